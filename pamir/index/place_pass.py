"""The places pass: the place facts of every picture with a GPS position named again, from the
position its catalogue keeps, when the rule that names places changes (pamir.facts.places:
`fingerprint`), so that an index made before a better rule finds its pictures by the new
city words without reading a file again. It is a pass of pamir.index.passes named after the
rule ("places 1a2b3c..."): a picture is named once per rule and per version of its bytes, and
costs a millisecond (the gazetteer is loaded once per process, about 1.5 s)."""

from __future__ import annotations

from .passes import PassReport, run_pass


def name_places(index) -> PassReport | None:
    """Name again the places of `index`'s pictures not named by today's rule (a writable
    Index); None for a catalogue that keeps no positions (then its facts are left alone)."""
    from ..facts.places import fingerprint, place_facts  # noqa: PLC0415 - GeoNames, on first use

    name = f"places {fingerprint()}"
    todo = index.pass_todo(name)
    if not todo:
        return PassReport(name)
    where = index.positions()
    if where is None:
        return None
    by_path = {path: where.get(picture_id) for picture_id, path, _ in todo}

    def reader(paths):
        return [(place_facts(by_path.get(p)), "") for p in paths]

    return run_pass(index, name, ("place",), reader, batch_size=2048)
