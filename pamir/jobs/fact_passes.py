"""The passes of `pamir index` that read the pictures' pixels for facts, one row each: the one
table of them, as pamir.features.registry.REPRESENTATIONS is of the representations and
pamir.models.MODELS of the models.

    FACT_PASSES                        # text, faces, copies, colour: one FactPass each
    read_pass(index, "text")           # one pass alone over what it has not read

Everything that runs or shows a pass reads its row: the reading stage's streams and the passes'
rest (pamir.jobs.indexing.run_index), the update's report (`UpdateReport.passes`, by name),
progress (its label, in the terminal, the log and the page's progress record), the watcher
(`watch`), the CLI's `--X/--no-X` options (pamir.commands.index), and what is said where a
pass's extra is missing. A new pass is a module of facts (its readers) and a row here.

A row names its readers, sides and hooks as "module:attribute" strings, resolved when the
pass runs (`FactPass.part`): every command line reads this table for its options, and the
passes' modules (OCR's, the faces', OpenCV for the colours) cost 0.19 s to import over the
CLI's own imports, which `pamir search` should not pay.

The videos' frames are no row: they are the look's (pamir.index.videos), written by the
update with the video's row, recorded in no `passes` table; a row's `frames` says whether its
pass reads a video's frames as pictures (pamir.index.videos.FramesReader).
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass

#: The look (the update: each picture's vector and its files' facts) as progress names it.
LOOK, LOOK_LABEL = "look", "indexing"


@dataclass(frozen=True)
class FactPass:
    """One pass over the pictures' pixels (pamir.index.passes: resumable, incremental).

    name: its short name, the key of its report (UpdateReport.passes), of its progress and of
    its option (`--text/--no-text`). label: what its bar, its log line and the page call it.
    kinds: the kinds of facts it writes (pamir.facts.fact.KINDS; () for none). about: what it
    does, for its option's help. catalogued: its name in the catalogue's `passes` table, a
    string or a function giving one (its reader's fingerprint: another reader reads every
    picture again). side: the longer side of the raster it reads every picture at (the
    reading stage's Need); detail: that of its closer look (Item.detail), None where it looks
    no closer. stream: its reader of the reading stage's (path, raster, shown size[, closer
    look]) tuples; alone: its reader of paths, which decodes for itself (a plain function, so
    that it runs as a Dask task). record: the Index's method that commits a batch. extra: the
    optional install it needs (pamir.extras); missing: what a person is told when it is not
    there. ready: what loads its models (run by its stream's reader at its first pictures,
    and by the watcher as it starts; MissingExtra, RuntimeError or OSError where it cannot
    run here). then(index, report) -> report: what
    follows its reading (who each face is; the groups of copies). reads_alone: how it reads
    what the stream did not, "threads" (one a core), "processes" (the job's local
    processes) or "one". stream_readers: the threads reading its stream (where the stage reads
    on more than one). frames: a video's frames read as pictures. watch: the watcher runs
    it; cluster: on a Dask cluster its batches are tasks (else it reads here).
    """

    name: str
    label: str
    kinds: tuple[str, ...]
    about: str
    catalogued: str
    side: str
    stream: str
    alone: str
    record: str = "record_pass"
    detail: str | None = None
    extra: str | None = None
    missing: str = ""
    ready: str | None = None
    then: str | None = None
    reads_alone: str = "threads"
    stream_readers: int = 1
    frames: bool = True
    watch: bool = True
    cluster: bool = True

    def part(self, field: str):
        """The row's "module:attribute" `field` resolved (its module imported now)."""
        module, _, attribute = getattr(self, field).partition(":")
        return getattr(importlib.import_module(module), attribute)

    def catalogue_name(self) -> str:
        """Its name in the catalogue's `passes` table (`catalogued`)."""
        name = self.part("catalogued")
        return name() if callable(name) else name


#: Every fact pass, in the order they run after the look and are reported.
FACT_PASSES = (
    FactPass("text", "reading text", ("text",),
             "read the text written in the pictures (signs, menus, covers), once per picture: "
             "`text:` and its words find it",
             catalogued="pamir.jobs.fact_passes:text_pass_name",
             # lines found at DETECT_SIDE, read at READ_SIDE where there are
             side="pamir.facts.ocr:DETECT_SIDE", detail="pamir.facts.ocr:READ_SIDE",
             stream="pamir.facts.ocr:read_text_rasters", alone="pamir.facts.ocr:read_texts",
             extra="ocr", missing="text in pictures not read",
             ready="pamir.facts.ocr:shared_reader"),
    FactPass("faces", "finding faces", ("person",),
             "find the faces and who they are, once per picture: names find them "
             "(`pamir people`)",
             catalogued="pamir.jobs.fact_passes:faces_pass_name",
             # found at DETECT_SIDE; small ones looked for closer, where there are cues
             side="pamir.facts.people.faces:DETECT_SIDE",
             detail="pamir.facts.people.zoom:ZOOM_SIDE",
             stream="pamir.facts.people.pictures:read_face_rasters",
             alone="pamir.facts.people.pictures:read_faces", record="record_faces",
             extra="faces", missing="faces not found",
             ready="pamir.facts.people.faces:face_finder",
             then="pamir.jobs.fact_passes:who_is_who", reads_alone="processes",
             # the largest cost of a photo (HOG at 1,008 px: 160-180 ms of a core for a 12-MP
             # JPEG, against 60 for the text pass), and dlib lets go of the GIL while it scans.
             # 300 camera-size JPEGs (benchmarks/camera_roll.py's, this 2-core Xeon, shared):
             # one faces reader, 111.6 s and a peak of 1,267 MB (load 2-4 from other work); two
             # faces and two text readers 71.3 s, 1,624 MB (load 2-3: over issue 52's 1.5 GB);
             # two faces readers and one text reader 1,415 MB (its time not comparable: load
             # 4-5). Text keeps one.
             stream_readers=2),
    FactPass("copies", "finding copies", (),
             "find the copies and bursts among the pictures by their looks "
             "(`pamir duplicates`)",
             catalogued="pamir.duplicates.groups:LOOKS_PASS",
             side="pamir.duplicates.looks:RASTER_SIDE",
             stream="pamir.duplicates.looks:read_look_rasters",
             alone="pamir.duplicates.looks:read_looks", record="record_looks",
             then="pamir.jobs.fact_passes:copies_found", reads_alone="one", frames=False),
    FactPass("colour", "naming colours", ("colour",),
             "name each picture's dominant colours: `colour:red` (or `color:red`) finds them",
             catalogued="pamir.facts.colour:PASS_NAME", side="pamir.facts.colour:SIDE",
             stream="pamir.facts.colour:read_colour_rasters",
             alone="pamir.facts.colour:read_colours"),
)


def fact_pass(name: str) -> FactPass:
    """The row of the pass `name`; ValueError naming the passes for any other."""
    for p in FACT_PASSES:
        if p.name == name:
            return p
    raise ValueError(f"no pass {name!r}: the passes are {', '.join(pass_names())}")


def pass_names() -> list[str]:
    return [p.name for p in FACT_PASSES]


def progress_labels() -> dict[str, str]:
    """{name: label} of the look and every pass, in the order progress shows them."""
    return {LOOK: LOOK_LABEL, **{p.name: p.label for p in FACT_PASSES}}


def chosen(asked: dict, *, watching: bool = False) -> tuple[tuple[str, ...], frozenset]:
    """(the passes to run, those required) from {name: True | False | None} as a caller asks
    (`index_folders(text=False)`, `--no-faces`): every pass (the watcher's: those it runs)
    unless asked False; None or unasked reads it where its extra is installed and says so
    where it is not, True makes a missing extra an error (MissingExtra)."""
    for name in asked:
        fact_pass(name)  # ValueError for a name that is no pass
    run = tuple(p.name for p in FACT_PASSES
                if asked.get(p.name) is not False and (p.watch or not watching))
    return run, frozenset(name for name, value in asked.items() if value is True)


# ------------------------------------------------------------------- the rows' own parts
# Imported inside: these run only with their pass (this module is read by every command line).
def text_pass_name() -> str:
    """The text pass's name: its reader's (another reader, other models or settings, reads
    every picture again)."""
    from ..facts import ocr  # noqa: PLC0415 - start-up time: the pass's module

    return f"text {ocr.fingerprint(ocr.settled())}"


def faces_pass_name() -> str:
    """The faces pass's name: its detector's and network's."""
    from ..facts.people import faces  # noqa: PLC0415 - start-up time: the pass's module

    return f"faces {faces.fingerprint()}"


def who_is_who(index, report: dict) -> dict:
    """After the faces pass: who every face is (pamir.facts.people.who.identify: names from
    files and keywords, names carried, unnamed people) and their pictures' person facts."""
    from ..facts.people.who import identify  # noqa: PLC0415 - start-up time

    return {**report, "people": identify(index).as_dict()}


def copies_found(index, report: dict) -> dict:
    """After the looks pass: the groups of copies and bursts found again where a look is new
    (pamir.duplicates.groups), their counts by kind in the report."""
    from ..duplicates.grouping import KINDS  # noqa: PLC0415 - start-up time
    from ..duplicates.groups import find_duplicates, stored_duplicates  # noqa: PLC0415 - start-up time

    started = time.perf_counter()
    # no look read: no picture new or changed (a removed one leaves its groups by itself)
    groups = find_duplicates(index, read=False) if report["read"] else stored_duplicates(index)
    return {**report, "groups": {k: sum(g.kind == k for g in groups) for k in KINDS},
            "seconds": round(report["seconds"] + time.perf_counter() - started, 2)}


__all__ = ["FACT_PASSES", "FactPass", "LOOK", "LOOK_LABEL", "chosen", "fact_pass",
           "faces_pass_name", "pass_names", "progress_labels", "text_pass_name"]
