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
from ..jobs.loading import zero_caption_system
from ..index import Index, IndexDirError
from ..zeroshot.classes import MIN_PROBABILITY, WRITE_RIGHT
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
    xmp: bool = typer.Option(False, "--xmp", help="write the words likely enough (a "
                             "model's of probability 0.6 or more; with no model, ImageNet's "
                             "of 0.4 or more and the folder's own at the bar its held-out "
                             "tagged pictures chose; $PAMIR_XMP_PROBABILITY sets one bar for "
                             "all), the named faces "
                             "and the place into each picture's XMP sidecar, which digiKam, "
                             "darktable, Lightroom and Immich read (merged: the sidecar's "
                             "other fields kept; docs/usage.md, \"Writing back\")"),
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
    probabilities; beside them, ImageNet's words (marked), each with the probability that a
    person's caption has it; and for a picture the index holds, where it was taken and the
    words read on it (marked "(place)", "(text)"). With no model, a picture of an index whose
    folder's pictures carry keywords gets the folder's words too (`pamir index` learns them)."""
    if not product.is_model(model):
        model, pictures = None, [model, *(pictures or [])]
    missing = [p for p in pictures if not p.is_file()]
    for p in missing:
        why = "a folder; give picture files" if p.is_dir() else "file not found"
        console.print(f"[yellow]skipped[/yellow] {p}: {why}", markup=True)
    pictures = [p for p in pictures if p.is_file()]
    if not pictures:
        fail("no picture to annotate")
    if xmp:  # pamir.jobs.sidecars (the XMP reading) only where asked
        from ..jobs.sidecars import known_of_pictures, write_bars  # noqa: PLC0415 - start-up

        check_sidecar_name(xmp_name)  # and $PAMIR_XMP_PROBABILITY, checked before any work
    system = zero_caption_system() if model is None else product.load_system(model)
    bars = None
    with _facts_index(index_dir) as index:
        if model is None and index is not None:  # the folder's own words, where it has some
            # pamir.jobs.folder_look imports scipy and the models: only where an index is read
            from ..jobs.folder_look import attach  # noqa: PLC0415

            attach(system, index, writable=False)
        keywords, ok, reasons = annotate_pictures(system, pictures, k, index=index)
        if xmp:
            bars = write_bars(zero_caption=model is None,
                              folder=system.words if model is None else None)
            known = known_of_pictures(pictures, keywords, index, bars)
            if not as_json:
                console.print(escape(_bars_line(bars, system if model is None else None)),
                              markup=True)
    failed = len(missing)
    for i, (path, good, reason, words) in enumerate(zip(pictures, ok, reasons, keywords)):
        if not good:
            failed += 1
            console.print(f"[yellow]skipped[/yellow] {path}: {reason or 'could not be read'}",
                          markup=True)
            continue
        _write_and_say(path, words, known[i] if xmp else None, sidecar=sidecar,
                       xmp_name=xmp_name, bars=bars, as_json=as_json)
    if failed:
        raise typer.Exit(1)


def _write_and_say(path: Path, words: list[dict], known, *, sidecar: bool, xmp_name,
                   bars, as_json: bool) -> None:
    """One annotated picture: its sidecar files written (known: the XMP's words, None for no
    --xmp) and what was written said, printed or as a JSON line."""
    note = ""
    if sidecar:
        # the words pictures are described by; their place and text they hold already
        _, note = write_sidecar(path, [w["word"] for w in words
                                       if w.get("source") not in ("place", "text")])
    if known is not None:
        from ..jobs.sidecars import write_xmp  # noqa: PLC0415 - as above: only for --xmp

        sidecars = write_xmp(path, known, xmp_name)
    else:
        sidecars = []
    if as_json:
        print(json.dumps({"path": str(path), "keywords": words,
                          **({"sidecar": note} if sidecar else {}),
                          **({"xmp": dict(sidecars), "xmp_words": known.words,
                              "xmp_bars": {k or "model": v for k, v in bars.items()}}
                             if known is not None else {})}))
        return
    print(f"{path}\t{_annotation_line(words)}")
    if note and not note.startswith("wrote"):
        console.print(f"[yellow]{note}[/yellow]", markup=True)
    if known is not None:
        console.print(f"  {escape(_written_line(known.words, words, bars))}", markup=True)
    for target, what in sidecars:
        if what not in ("written", "unchanged", "nothing"):
            console.print(f"[yellow]{escape(target)}: {escape(what)}[/yellow]", markup=True)


@contextlib.contextmanager
def _facts_index(index_dir: Path | None):
    """The index `pamir annotate` reads the pictures' facts from (read-only): --index, else
    the default one where there is one; None (no facts) where there is none to read, with a
    line when --index named it."""
    where = index_dir or config.default_index_dir()
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


_SOURCES = {None: "the model's words", "imagenet": "ImageNet's words",
            "folder": "the folder's words"}


def _bars_line(bars: dict, zero=None) -> str:
    """"XMP sidecars: ImageNet's words of probability 0.4 or more (...), the folder's words
    of 0.45 or more (...)": what `--xmp` writes and how its bars were chosen (zero: the
    zero-caption system, whose folder words say theirs)."""
    said = []
    chosen = (zero.words.held_out.get("write") if zero is not None and zero.words is not None
              else None) or {}
    by_folder = {"folder": chosen, "imagenet": chosen.get("imagenet") or {}}
    for source, bar in bars.items():
        why = ""
        if by_folder.get(source, {}).get("bar") == bar and bar is not None:
            why = (f" (right {by_folder[source]['precision']:.0%} of the time at that bar on "
                   "the folder's held-out tagged pictures)")
        elif zero is not None and source == "imagenet":
            why = (f" (right {WRITE_RIGHT:.0%} of the time at that bar on Corel 5k's "
                   "validation pictures)")
        said.append(f"{_SOURCES[source]} of probability {bar:g} or more{why}")
    for source in ("folder", "imagenet") if chosen else ():
        if source not in bars:
            said.append(f"none of {_SOURCES[source]}: at no bar were they right half the "
                        "time on the folder's held-out tagged pictures")
    return "XMP sidecars: " + "; ".join(said)


def _written_line(written: list[str], words: list[dict], bars: dict) -> str:
    """What `--xmp` wrote of a picture's words and why: "XMP: tiger (0.83, its ImageNet
    class), cat (0.71, a word of 7 ImageNet classes, mass 0.64)", or why it wrote none."""
    by_word = {w["word"]: w for w in words if w.get("probability") is not None
               and w.get("source") in bars}
    if written:
        return "XMP: " + ", ".join(f"{w} ({_why(by_word[w])})" for w in written)
    sure = max(by_word.values(), key=lambda w: w["probability"], default=None)
    if sure is None and "imagenet" in bars:  # no model: ImageNet's words show from 0.3
        whose = "ImageNet's or the folder's" if "folder" in bars else "ImageNet's"
        return (f"XMP: no word written: the classifier is unsure of this picture (no word of "
                f"{whose} has probability {MIN_PROBABILITY:g} or more)")
    if sure is None:
        return ("XMP: no word written: no word of this picture has a probability (the "
                "classifier is unsure of it, or the model has no calibration)")
    return (f"XMP: no word written: none reaches its bar (the surest, {sure['word']}, has "
            f"{sure['probability']:.2f}, under {bars[sure.get('source')]:g})")


def _why(record: dict) -> str:
    """"0.83, its ImageNet class": a written word's probability and where it comes from."""
    p = f"{record['probability']:.2f}"
    if record.get("source") == "folder":
        return f"{p}, a keyword of this folder's pictures"
    if record.get("source") != "imagenet":
        return f"{p}, a word of the model's captions"
    if record.get("classes") == 1:
        return f"{p}, its ImageNet class"
    return f"{p}, a word of {record.get('classes')} ImageNet classes, mass {record['mass']:.2f}"


def register(app: typer.Typer) -> None:
    app.command("annotate")(annotate_command)
