"""`pamir annotate`: a picture's keywords (pamir.jobs.annotation), printed or as JSON lines, and
sidecar files written beside the pictures."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import typer
from rich.markup import escape

from .. import config
from ..jobs.annotation import annotate_pictures, write_sidecar
from ..index import Index, IndexDirError
from ..jobs.workflow import default_index_dir
from ..zeroshot.classes import ZeroCaptionSystem
from . import index as product
from .common import console, fail
from .sidecars import check_sidecar_name

# `load_system` is looked up on pamir.commands.index when a command runs, so that a test's
# stand-in for it (monkeypatch) reaches every command that loads a model.


def annotate_command(
    model: Path = typer.Argument(..., help="a trained system (from `pamir fit`); leave it out "
                                            "to annotate with ImageNet's words alone",
                                 metavar="[MODEL]"),
    pictures: list[Path] = typer.Argument(None, help="picture files"),
    k: int = typer.Option(None, "-k", "--top", min=1,
                          help=f"words each (default: {config.ANNOTATION_WORDS}, or where "
                               "validation preferred per-word thresholds, every word likely "
                               "enough)"),
    sidecar: bool = typer.Option(False, help="write PICTURE.txt beside each picture (never "
                                             "over a file pamir did not write)"),
    xmp: bool = typer.Option(False, "--xmp", help="write the words likely enough, the named "
                             "faces and the place into each picture's XMP sidecar, which "
                             "digiKam, darktable, Lightroom and Immich read (merged: the "
                             "sidecar's other fields kept; docs/usage.md, \"Writing back\")"),
    xmp_name: str = typer.Option(None, "--xmp-name", envvar="PAMIR_XMP_SIDECAR",
                                 help="which sidecar: NAME.EXT.xmp (digiKam, darktable, "
                                      "Immich), NAME.xmp (Lightroom, Immich) or both; "
                                      "NAME.EXT.xmp when not said"),
    as_json: bool = typer.Option(False, "--json", help="print JSON lines"),
    index_dir: Path = typer.Option(None, "--index", help="the index whose facts of the "
                                   "pictures it holds are added: where each was taken, the "
                                   "words read on it [default: the default index, if any]"),
):
    """The words that best describe each picture, with their scores and calibrated
    probabilities; beside them, ImageNet's words (marked) whose classes hold a good share
    of the classifier's probability; and for a picture the index holds, where it was taken
    and the words read on it (marked "(place)", "(text)")."""
    if not product.is_model(model):
        model, pictures = None, [model, *(pictures or [])]
    missing = [p for p in pictures if not p.is_file()]
    for p in missing:
        why = "a folder; give picture files" if p.is_dir() else "file not found"
        console.print(f"[yellow]skipped[/yellow] {p}: {why}", markup=True)
    pictures = [p for p in pictures if p.is_file()]
    if not pictures:
        fail("no picture to annotate")
    if xmp:  # pamir.jobs.sidecars only where asked: every command's start imports this module
        from ..jobs.sidecars import known_of_pictures, write_xmp  # noqa: PLC0415

        check_sidecar_name(xmp_name)
    system = ZeroCaptionSystem(config.default_cache_dir()) if model is None else product.load_system(model)
    with _facts_index(index_dir) as index:
        keywords, ok, reasons = annotate_pictures(system, pictures, k, index=index)
        known = known_of_pictures(pictures, keywords, index) if xmp else None
    failed = len(missing)
    for i, (path, good, reason, words) in enumerate(zip(pictures, ok, reasons, keywords)):
        if not good:
            failed += 1
            console.print(f"[yellow]skipped[/yellow] {path}: {reason or 'could not be read'}",
                          markup=True)
            continue
        note = ""
        if sidecar:
            # the words pictures are described by; their place and text they hold already
            written, why = write_sidecar(path, [w["word"] for w in words
                                                if w.get("source") not in ("place", "text")])
            note = why
        sidecars = write_xmp(path, known[i], xmp_name) if xmp else []
        if as_json:
            print(json.dumps({"path": str(path), "keywords": words,
                              **({"sidecar": note} if sidecar else {}),
                              **({"xmp": dict(sidecars)} if xmp else {})}))
        else:
            print(f"{path}\t{_annotation_line(words)}")
            if note and not note.startswith("wrote"):
                console.print(f"[yellow]{note}[/yellow]", markup=True)
            for target, what in sidecars:
                if what not in ("written", "unchanged", "nothing"):
                    console.print(f"[yellow]{escape(target)}: {escape(what)}[/yellow]",
                                  markup=True)
    if failed:
        raise typer.Exit(1)


@contextlib.contextmanager
def _facts_index(index_dir: Path | None):
    """The index `pamir annotate` reads the pictures' facts from (read-only): --index, else
    the default one where there is one; None (no facts) where there is none to read, with a
    line when --index named it."""
    where = index_dir or default_index_dir()
    if not Index.exists(where):
        if index_dir is not None:
            console.print(f"[yellow]no index at {index_dir}: no place or text added[/yellow]",
                          markup=True)
        yield None
        return
    try:
        index = Index.open(where)
    except IndexDirError as e:
        console.print(f"[yellow]{escape(str(e))}: no place or text added[/yellow]", markup=True)
        yield None
        return
    with index:
        yield index


def _annotation_line(words: list[dict]) -> str:
    """"blue 0.812  sea 0.640  [ImageNet] pelican 0.93  bird 0.98  Kyoto (place)  bakery
    (text)": the model's words with their scores, then ImageNet's with their probability
    mass, then the picture's facts marked with their kind."""
    own = "  ".join(f"{w['word']} {w['score']:.3f}"
                    + (f" (p {w['probability']:.2f})" if "probability" in w else "")
                    for w in words if "score" in w)
    more = "  ".join(f"{w['word']} {w['probability']:.2f}" for w in words
                     if w.get("source") == "imagenet")
    facts = "  ".join(f"{w.get('shown') or w['word']} ({w['source']})" for w in words
                      if w.get("source") in ("place", "text"))
    return "  ".join(x for x in (own, f"[ImageNet] {more}" if more else "", facts) if x) or \
        "(no word: the classifier is unsure of this picture)"


def register(app: typer.Typer) -> None:
    app.command("annotate")(annotate_command)
