"""`pamir index`, `pamir search`, `pamir annotate`, `pamir serve`: the tool a person uses.

The index lives in one folder (`--index`, else $PAMIR_INDEX, else
$XDG_DATA_HOME/pamir/index, i.e. ~/.local/share/pamir/index), so `pamir search` works from
any directory once `pamir index` has run, as rclip does.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import sys
from pathlib import Path

import numpy as np
import typer
from rich.markup import escape

from .. import config
from ..annotation import annotate_pictures, write_sidecar
from ..calibration import LIKELY
from ..data import DataError, load_captions_table
from ..index import BATCH_SIZE, Index, IndexDirError, QueryError
from ..zeroshot import ZeroCaptionSystem
from .. import workflow
from ..workflow import default_index_dir
from .common import console, fail

#: How many unreadable files `pamir index` lists before summarising the rest.
MAX_LISTED_FAILURES = 20


#: Host names a server bound to 127.0.0.1 answers to (Starlette's host check cuts the port at
#: the first colon, so the IPv6 loopback cannot be listed: a server on ::1 answers any name).
LOOPBACK_NAMES = ["127.0.0.1", "localhost"]
INDEX_HELP = "index folder (default: $PAMIR_INDEX, else ~/.local/share/pamir/index)"


def own_the_reports() -> None:
    """These commands list unreadable pictures themselves, with the reason; the feature
    extractor's own warning line for each would say it a second time."""
    logging.getLogger("pamir.features.extract").setLevel(logging.ERROR)


def load_system(model: Path):
    # Heavy (the models and torch, over a second): imported only by the commands that load
    # a model, so that `pamir search` starts at once. Our own bar shows indexing progress.
    own_the_reports()
    try:
        return workflow.load_system(model)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))


# ------------------------------------------------------------------------------- index
def index_command(
    model: Path = typer.Argument(..., help="a trained system (from `pamir fit`); leave it out "
                                            "to search with no captions (ImageNet's words) or "
                                            "with the model the index already has",
                                 metavar="[MODEL]"),
    folders: list[Path] = typer.Argument(None, help="folders of pictures, searched "
                                                    "recursively"),
    index_dir: Path = typer.Option(None, "--index", help=INDEX_HELP),
    captions: Path = typer.Option(None, help="a captions table whose captions are shown "
                                              "beside the pictures (.tsv/.csv/.jsonl)"),
    rebuild: bool = typer.Option(False, help="start afresh (needed after changing MODEL)"),
    batch: int = typer.Option(None, min=1, help="pictures computed and committed at a time "
                                                f"[default: {BATCH_SIZE}]"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
    workers: int = typer.Option(None, min=1, help="run batches as Dask tasks on a local "
                                                  "cluster of this many worker processes"),
    scheduler: str = typer.Option(None, help="run batches as Dask tasks on the cluster of "
                                             "this scheduler (tcp://HOST:8786; docs/scale.md)"),
    compact: bool = typer.Option(False, "--compact", help="then merge the index's segments "
                                 "of sorted lists into one per shard, alike pictures side by "
                                 "side for faster search (results unchanged)"),
    text: bool = typer.Option(True, "--text/--no-text", help="then read the text written in "
                              "the pictures (signs, menus, covers), once per picture: `text:` "
                              "and its words find it (the [ocr] extra)"),
    faces: bool = typer.Option(True, "--faces/--no-faces", help="then find the faces and who "
                               "they are, once per picture: names find them (`pamir people`; "
                               "the [faces] extra)"),
):
    """Index folders of pictures, incrementally: only new and changed files are computed.

    Renamed or copied files are recognised by their content and not recomputed; files gone
    from the folders are dropped; an interrupted run resumes where it stopped; unreadable
    files are reported and skipped.
    """
    index_dir = index_dir or default_index_dir()
    model, folders = _model_and_folders(model, list(folders or []), index_dir)
    try:
        folders = workflow.picture_folders(folders)
    except workflow.WorkflowError as e:
        fail(str(e))
    if model is None:
        console.print("no model: searching by ImageNet's words (no captions needed); "
                      "`pamir fit` on captioned pictures learns your own words")
    system, fingerprint = workflow.indexing_system(model, load=load_system)
    caption_map = _caption_map(captions) if captions else None
    try:
        report, status = _index(index_dir, model, system, fingerprint, rebuild, folders,
                                caption_map, batch, workers, scheduler, compact, text, faces)
    except (OSError, sqlite3.OperationalError) as e:
        # a full or failing disk: every batch committed before it stays indexed and searchable
        fail(f"{index_dir}: cannot write the index ({e}); what was indexed before is kept and "
             "can be searched; free some space (or check the disk) and run the same command "
             "again to go on")
    if as_json:
        print(json.dumps({"index": str(index_dir), **report.as_dict(), "status": status}))
        return
    for note in report.notes[:MAX_LISTED_FAILURES]:  # those pictures are uncaptioned
        console.print(f"[yellow]note:[/yellow] {escape(note)}", markup=True)
    if len(report.notes) > MAX_LISTED_FAILURES:
        console.print(f"... and {len(report.notes) - MAX_LISTED_FAILURES} more metadata notes "
                      "(--json lists them all)")
    for path, reason in report.failed[:MAX_LISTED_FAILURES]:
        console.print(f"[yellow]skipped[/yellow] {path}: {reason}", markup=True)
    if len(report.failed) > MAX_LISTED_FAILURES:
        console.print(f"... and {len(report.failed) - MAX_LISTED_FAILURES} more unreadable "
                      "files (--json lists them all)")
    console.print(
        f"{index_dir}: {status['pictures']:,} pictures indexed "
        f"(added {report.added}, changed {report.changed}, renamed {report.renamed}, "
        f"copies {report.copied}, removed {report.removed}, unchanged {report.unchanged}, "
        f"unreadable {len(report.failed)}); captions: {report.captioned} of the pictures read, "
        f"{report.recaptioned} read again (sidecar changed)")
    if report.text is not None:
        t = report.text
        for note in t["notes"][:MAX_LISTED_FAILURES]:
            console.print(f"[yellow]text not read:[/yellow] {escape(note)}", markup=True)
        console.print(f"text: {t['read']:,} pictures read ({t['with_facts']:,} with text, "
                      f"{t['failed']} unreadable) in {t['seconds']:.1f} s")
    if report.faces is not None:
        from .people import print_faces_report  # noqa: PLC0415

        print_faces_report(report.faces)


def _is_model(path: Path) -> bool:
    return (path / "model.json").is_file()


def _model_and_folders(first: Path, rest: list[Path], index_dir: Path
                       ) -> tuple[Path | None, list[Path]]:
    """`pamir index [MODEL] FOLDER...`: (the model, or None for the zero-caption system; the
    folders). With no MODEL, an index that was built with a model keeps it."""
    if _is_model(first):
        if not rest:
            fail(f"give the folders of pictures to index after the model {first}")
        return first, rest
    folders = [first, *rest]
    if Index.exists(index_dir):
        try:
            with Index.open(index_dir) as index:
                built_with = index.model_dir
        except IndexDirError:
            built_with = ""  # damaged: `_open_for` says so
        if built_with:
            if not _is_model(Path(built_with)):
                fail(f"{index_dir} was built with the model {built_with}, which is no longer "
                     "there; give the model first (pamir index MODEL FOLDER), or --rebuild "
                     "to search with no captions")
            return Path(built_with), folders
    return None, folders


def _index(index_dir, model, system, fingerprint, rebuild, folders, caption_map, batch,
           workers, scheduler, compact, text=True, faces=True):
    """index_command's work: (report, status); with `text`, the text pass after, with
    `faces`, the faces pass."""
    from ..progress import Bar  # noqa: PLC0415

    index = _open_for(index_dir, model, system, fingerprint, rebuild)
    with index, _batch_runner(workers, scheduler, model, fingerprint, system,
                              bool(index.classes)) as (transform, default_batch, client), \
            Bar("indexing", console=console, unit="pictures") as bar:
        try:
            report = workflow.update_index(index, system, folders, transform,
                                           captions=caption_map, batch_size=batch or default_batch,
                                           progress=lambda done, total: bar.update(
                                               completed=done, total=total))
        except KeyboardInterrupt:
            bar.stop()
            console.print(f"interrupted: {len(index):,} pictures are safely indexed; run the "
                          "same command again to go on")
            raise typer.Exit(130) from None
        if compact:
            index.compact()
        bar.stop()
        _prepare_word_mapping(index)
        if text:
            report.text = _read_text(index, client)
        if faces:
            from .people import read_faces  # noqa: PLC0415

            report.faces = read_faces(index, client)
        return report, index.status()


def _read_text(index: Index, client) -> dict | None:
    """The text pass (pamir.workflow.read_text) with its own progress, after the pictures
    are searchable; None, with a line, where the [ocr] extra is not installed."""
    from ..extras import MissingExtra  # noqa: PLC0415
    from ..progress import Bar  # noqa: PLC0415

    try:
        with Bar("reading text", console=console, unit="pictures") as bar:
            return workflow.read_text(index, client=client, progress=lambda done, total:
                                      bar.update(completed=done, total=total)).as_dict()
    except MissingExtra as e:
        console.print(f"text in pictures not read: {escape(str(e))}")
    except KeyboardInterrupt:
        console.print(f"interrupted: {len(index):,} pictures are indexed and searchable; the "
                      "text read so far is kept, and the same command reads the rest")
        raise typer.Exit(130) from None
    return None


def _prepare_word_mapping(index: Index) -> None:
    """Make now, not on a query's path, what `pamir search` maps words outside the
    vocabulary with: this machine's lexicon of word embeddings (pamir.lexicon; once per
    machine, about a minute), the embeddings of this index's vocabulary (once per vocabulary,
    cached in the index folder) and of the ImageNet classes' descriptions (pamir.zeroshot;
    once per machine, in the feature cache, about 40 s). Nothing when the lexicon or the
    mapping is turned off, or the model is not installed (queries then work as before)."""
    from .. import lexicon  # noqa: PLC0415
    from ..embedding import EmbeddingUnavailable, model_installed  # noqa: PLC0415
    from ..index import embeddings_enabled  # noqa: PLC0415

    if not embeddings_enabled() or lexicon.lexicon_size() == 0 or not model_installed()[0]:
        return
    try:
        if lexicon.missing():
            console.print(f"building the lexicon of word embeddings for this machine, once "
                          f"({lexicon.lexicon_size():,} words, about a minute): "
                          f"{lexicon.lexicon_dir()}")
            lexicon.build()
        if index.vocabulary:  # the zero-caption system's index has none
            index.bridge.vocabulary_embeddings()
        if index.class_words is not None and not index.class_words.bridge.cache_file.exists():
            with console.status("embedding ImageNet's class descriptions, once per machine"):
                index.class_words.bridge.vocabulary_embeddings()
    except EmbeddingUnavailable as e:
        console.print(f"[yellow]words outside the vocabulary cannot be mapped:[/yellow] "
                      f"{escape(str(e))}", markup=True)


@contextlib.contextmanager
def _batch_runner(workers, scheduler, model: Path | None, fingerprint: str, system,
                  classes: bool):
    """(transform, default batch size, client) that `pamir index` computes batches with
    (pamir.index_job.batch_runner): in this process, or as Dask tasks (--workers: a
    LocalCluster; --scheduler: a running cluster), its failures said."""
    if not workers and not scheduler:  # pamir.workflow.update_index's own
        yield None, BATCH_SIZE, None
        return
    from ..index_job import BatchesFailed, batch_runner  # noqa: PLC0415

    with batch_runner(workers, scheduler, model, fingerprint, classes,
                      cache_dir=config.default_cache_dir()) as (transform, batch, client):
        try:
            yield transform, batch, client
        except BatchesFailed as e:
            fail(str(e))


def _open_for(index_dir: Path, model: Path | None, system, fingerprint: str,
              rebuild: bool) -> Index:
    """The index at index_dir for this model (pamir.workflow.open_index), its errors said."""
    try:
        return workflow.open_index(index_dir, model, system, fingerprint, rebuild,
                                   say=console.print)
    except (IndexDirError, workflow.WorkflowError) as e:
        fail(str(e))


def _caption_map(table: Path) -> dict[str, tuple[str, ...]]:
    try:
        coll = load_captions_table(table, include_uncaptioned=False)
    except DataError as e:
        fail(str(e))
    return {str(p): c for p, c in zip(coll.paths, coll.captions) if c}


# ------------------------------------------------------------------------------- search
QUERY_HELP = ('words, e.g. "tiger grass"; -word excludes, word^2 or 2:word weighs, "a phrase" '
              'is one concept, p:0.5 keeps the pictures more likely relevant than not (a '
              'calibrated probability), floor:0.5 keeps scores >= 0.5, sort:date orders by the date '
              'taken, date:2019-07 (or 2019-06..2019-08) keeps pictures taken then, in:FOLDER '
              'keeps pictures under a folder (docs/usage.md, "Queries", "Dates")')


#: `pamir search` answers one query and exits. Scoring every picture with numpy (about 3 ms a
#: query word at 1,000,000 pictures, benchmarks/results/index.md) costs far less than
#: importing and loading the exact top-k kernels (numba: 0.4 s and more), up to indexes of
#: this size; `pamir serve`, which answers many queries, keeps the kernels. Same answers.
NUMPY_SEARCH_UP_TO = 10_000_000


def search_command(
    query: str = typer.Argument("", help=QUERY_HELP, show_default=False),
    index_dir: Path = typer.Option(None, "--index", help=INDEX_HELP),
    k: int = typer.Option(10, "-k", "--top", min=1, help="how many pictures"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    files_only: bool = typer.Option(False, "-f", "--files", help="print paths only"),
    floor: float = typer.Option(None, help="leave out pictures scoring under this (as floor:X)"),
    p_floor: float = typer.Option(None, "--p", "--probability",
                                  help="leave out pictures less likely than this to be "
                                       "relevant, 0-1 (as p:X)"),
    sort: str = typer.Option(None, help="score (default), date / newest, or oldest (as sort:X)"),
    folder: list[str] = typer.Option(None, "--in", help="only pictures under this folder (as "
                                                        "in:X); may be repeated"),
    like: Path = typer.Option(None, "--like", help="pictures like this one (indexed or not), "
                                                   "nearest in the model's text space"),
    model: Path = typer.Option(None, help="the model for --like on a picture that is not "
                                          "indexed (default: the one the index was built with)"),
    mapping: bool = typer.Option(None, "--mapping/--no-mapping",
                                 help="map words outside the vocabulary onto it with the "
                                      "word-embedding model (default: on, unless "
                                      "$PAMIR_EMBEDDINGS is 0)"),
):
    """Rank the indexed pictures for a text query, or for a picture (--like)."""
    index_dir = index_dir or default_index_dir()
    if not query.strip() and like is None:
        fail("empty query: type one or more words, e.g. \"tiger grass\", or give --like PICTURE")
    try:
        index = Index.open(index_dir)
    except IndexDirError as e:
        fail(str(e))
    with index:
        if like is not None:
            _search_like(index, like, model, query, k, floor, sort, folder, as_json, files_only)
            return
        try:
            q = index.parse_query(query, mapping=mapping)
            hits = index.search(q, k, floor=floor, sort=_sort_name(sort),
                                folders=(q.folders + list(folder)) if folder else None,
                                method="brute" if len(index) <= NUMPY_SEARCH_UP_TO else "auto",
                                p_floor=p_floor)
            likely = index.count_likely(q, LIKELY, (q.folders + list(folder)) if folder
                                        else None)
        except QueryError as e:
            if as_json:
                print(json.dumps({"query": query, "error": str(e), "unknown": e.unknown}))
            fail(str(e))
    for m in q.mapped:
        console.print(f"[cyan]mapped:[/cyan] {escape(m.describe())}", markup=True)
    if q.unknown:
        notes = [m.describe() for m in q.matches if m.how == "unknown"]
        console.print(f"[yellow]not in the vocabulary, ignored:[/yellow] "
                      f"{escape('; '.join(notes))}", markup=True)
    used_floor = q.floor if floor is None else floor
    used_p = q.p_floor if p_floor is None else p_floor
    if not hits and used_p is not None:
        console.print(f"nothing is relevant with a probability of at least {used_p:g}")
    elif not hits and used_floor is not None:
        console.print(f"nothing scores at least {used_floor:g}: no picture is relevant enough")
    if likely is not None and not as_json and not files_only and (hits or used_p is None):
        console.print(f"{likely:,} {'picture is' if likely == 1 else 'pictures are'} likely "
                      f"relevant (a calibrated probability of {LIKELY:g} or more)")
    _print_hits(hits, as_json, files_only, {
        "query": query, "words": q.words, "unknown": q.unknown, "mapping": q.mapping_json(),
        "likely": likely, "likely_probability": LIKELY,
        "options": {**q.options_json(), "floor": used_floor, "p_floor": used_p,
                    "sort": _sort_name(sort) or q.sort,
                    "folders": q.folders + list(folder or [])}})


def _sort_name(sort: str | None) -> str | None:
    if sort is None:
        return None
    from ..query import SORTS  # noqa: PLC0415

    if sort.lower() not in SORTS:
        fail(f"--sort {sort}: one of {', '.join(sorted(SORTS))}")
    return SORTS[sort.lower()]


def _print_hits(hits, as_json: bool, files_only: bool, head: dict) -> None:
    if as_json:
        from ..storage import shown_path  # noqa: PLC0415 - a non-UTF-8 name as the API gives it

        print(json.dumps({**head, "hits": [{**h.__dict__, "path": shown_path(h.path)}
                                           for h in hits]}))
    elif files_only:
        # the name's own bytes, so that `| xargs` opens a file whose name is not UTF-8
        sys.stdout.flush()
        for h in hits:
            sys.stdout.buffer.write(os.fsencode(h.path) + b"\n")
        sys.stdout.buffer.flush()
    else:
        from ..storage import shown_path  # noqa: PLC0415

        for rank, h in enumerate(hits, 1):  # plain lines: paths never wrapped, easy to grep
            when = f"{h.taken[:10]}  " if getattr(h, "taken", None) else ""
            caption = f"\t{' '.join(h.caption)}" if getattr(h, "caption", None) else ""
            p = getattr(h, "probability", None)
            chance = f"p {p:4.2f}  " if p is not None else ""  # none: nothing invented
            place = ", ".join((getattr(h, "facts", None) or {}).get("place", ()))
            where = f"{place}  " if place else ""
            held = getattr(h, "matched", None)
            said = f"[{', '.join(held)}]  " if held else ""  # the facts that put it first
            print(f"{rank:>3}  {h.score:8.4f}  {chance}{when}{where}{said}"
                  f"{shown_path(h.path)}{caption}")


def _search_like(index: Index, like: Path, model: Path | None, query: str, k: int, floor,
                 sort, folder, as_json: bool, files_only: bool) -> None:
    """More like this: an indexed picture's stored vector, or a new picture through the
    model; nearest pictures by cosine in the text space (Index.similar says why)."""
    if query.strip():
        fail("give either a query or --like PICTURE, not both")
    if not like.is_file():
        fail(f"{like}: no such picture file")
    picture_id = index.id_of_path(like)
    if picture_id is not None:
        z, source = index.vector(picture_id), "indexed"
    else:
        model = model or (Path(index.model_dir) if index.model_dir else None)
        if model is None or not model.is_dir():
            fail(f"{like} is not indexed, and the model to read it is not here; give --model "
                 "MODEL or index the picture")
        system = load_system(model)
        try:
            workflow.check_vocabulary(system, index.vocabulary, model)
        except workflow.WorkflowError as e:
            fail(str(e))
        Z, ok, reasons = system.transform_paths([str(like)])
        if not np.asarray(ok)[0]:
            fail(f"{like}: {reasons[0] or 'could not be read'}")
        z, source = np.asarray(Z, np.float32)[0], "computed by the model"
    hits = index.similar(z, k, exclude=[picture_id] if picture_id is not None else [],
                         floor=floor, sort=_sort_name(sort) or "score", folders=folder or ())
    if not as_json and not files_only:
        space = "the model's text space" if index.T else "ImageNet's class probabilities"
        console.print(f"pictures like {like} ({source}), by cosine similarity in {space}")
    _print_hits(hits, as_json, files_only, {"like": str(like), "source": source,
                                            "space": "text", "id": picture_id})


# ------------------------------------------------------------------------------- annotate
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
    as_json: bool = typer.Option(False, "--json", help="print JSON lines"),
    index_dir: Path = typer.Option(None, "--index", help="the index whose facts of the "
                                   "pictures it holds are added: where each was taken, the "
                                   "words read on it [default: the default index, if any]"),
):
    """The words that best describe each picture, with their scores and calibrated
    probabilities; beside them, ImageNet's words (marked) whose classes hold a good share
    of the classifier's probability; and for a picture the index holds, where it was taken
    and the words read on it (marked "(place)", "(text)")."""
    if not _is_model(model):
        model, pictures = None, [model, *(pictures or [])]
    missing = [p for p in pictures if not p.is_file()]
    for p in missing:
        why = "a folder; give picture files" if p.is_dir() else "file not found"
        console.print(f"[yellow]skipped[/yellow] {p}: {why}", markup=True)
    pictures = [p for p in pictures if p.is_file()]
    if not pictures:
        fail("no picture to annotate")
    system = ZeroCaptionSystem(config.default_cache_dir()) if model is None else load_system(model)
    with _facts_index(index_dir) as index:
        keywords, ok, reasons = annotate_pictures(system, pictures, k, index=index)
    failed = len(missing)
    for path, good, reason, words in zip(pictures, ok, reasons, keywords):
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
        if as_json:
            print(json.dumps({"path": str(path), "keywords": words,
                              **({"sidecar": note} if sidecar else {})}))
        else:
            print(f"{path}\t{_annotation_line(words)}")
            if note and not note.startswith("wrote"):
                console.print(f"[yellow]{note}[/yellow]", markup=True)
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


# ------------------------------------------------------------------------------- learn
def learn_command(
    model: Path = typer.Argument(..., help="a trained PAMIR system (from `pamir fit`): updated "
                                           "in place, the previous one kept as MODEL.previous"),
    captions: Path = typer.Argument(..., help="a captions table of new pictures (.tsv/.csv/"
                                              ".jsonl); new words are allowed"),
    index_dirs: list[Path] = typer.Option(None, "--index", help="indexes built with MODEL to "
                                          "update (default: the default index, if it was)"),
    updates: int = typer.Option(None, min=1, help="PA updates to run (default: 200 a picture)"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
):
    """Teach a model new captioned pictures (and new words) without refitting from scratch.

    PAMIR learns online: Passive-Aggressive updates on triplets drawn from the new captions
    move only the rows of their words; a new word gets a row of its own. Indexes built with
    the model are brought up to date (features come from the cache; pictures are not decoded
    again when cached).
    """
    system = load_system(model)
    try:
        coll = load_captions_table(captions, include_uncaptioned=False)
    except DataError as e:
        fail(str(e))
    pairs = [(p, c) for p, c in zip(coll.paths, coll.captions) if c]
    if not pairs:
        fail(f"{captions}: no captioned picture to learn from")
    try:
        report = workflow.learn_pictures(model, system, pairs, index_dirs=index_dirs,
                                         n_updates=updates)
    except (ValueError, NotImplementedError, OSError) as e:
        # OSError: a full or failing disk, the previous model stays, whole
        fail(str(e))
    for path, why in report.pop("skipped"):
        console.print(f"[yellow]skipped[/yellow] {path}: {why}", markup=True)
    if as_json:
        print(json.dumps(report))
        return
    added = ", ".join(report["new_words"]) or "none"
    console.print(f"{model}: learnt {report['pictures']} pictures with {report['updates']:,} "
                  f"PA updates ({report['active']:,} moved the model); new words: {added}; "
                  f"vocabulary {report['vocabulary']} words; the previous model is in "
                  f"{report['previous']}")
    for w in report["words_without_negatives"]:
        console.print(f"[yellow]every new picture has '{escape(w)}':[/yellow] add pictures "
                      "without it, so that pamir learns what it is not", markup=True)
    for ix in report["indexes"]:
        console.print(f"index {ix['index']}: {ix['status']}")
    if any(ix["status"].startswith("not updated,") for ix in report["indexes"]):
        fail(f"{model}: learnt and saved, but an index could not be updated (above)")


# ------------------------------------------------------------------------------- serve
def serve_command(
    index_dir: Path = typer.Option(None, "--index", help=INDEX_HELP),
    model: Path = typer.Option(None, help="the trained system for uploads and explanations "
                                          "(default: the one the index was built with)"),
    host: str = typer.Option("127.0.0.1", help="address to bind; 127.0.0.1 keeps it private, "
                                               "any other needs a token"),
    port: int = typer.Option(8000, min=1, max=65535),
    token_file: Path = typer.Option(None, help="the viewer and editor tokens (JSON, made there "
                                               "if absent); given, tokens are needed even on "
                                               "loopback (behind a reverse proxy). Default off "
                                               "loopback: ~/.config/pamir/serve-tokens.json"),
    read_only: bool = typer.Option(False, "--read-only", help="nothing is kept: the feedback "
                                                              "loop's Keep is refused"),
    max_upload_mb: float = typer.Option(32.0, min=0.01, help="uploads over this are refused "
                                                              "(413)"),
    uploads_per_minute: int = typer.Option(
        None, min=0, help="uploads a client may send a minute (429 over it; 0: no limit; "
                          "default 60 with tokens, else no limit)"),
    max_pixels: int = typer.Option(None, min=1, help="pictures declaring more pixels are "
                                                     "refused as decompression bombs "
                                                     "(default 89,478,485, Pillow's)"),
    allowed_host: list[str] = typer.Option(None, help="a host name the server answers to "
                                                      "(repeatable; e.g. the reverse proxy's "
                                                      "public name)"),
    certfile: Path = typer.Option(None, help="TLS certificate (PEM), with --keyfile: HTTPS"),
    keyfile: Path = typer.Option(None, help="TLS private key (PEM)"),
    forwarded_allow_ips: str = typer.Option(
        None, help="addresses of reverse proxies whose X-Forwarded-For/-Proto are trusted "
                   "(uvicorn's; default 127.0.0.1)"),
):
    """Serve the web page and the HTTP API (OpenAPI schema at /docs)."""
    # Heavy (the web stack, and the models behind the server): only `pamir serve` needs them.
    import uvicorn  # noqa: PLC0415

    from ..server import create_app  # noqa: PLC0415
    from ..server.sharing import Sharing  # noqa: PLC0415

    index_dir = index_dir or default_index_dir()
    own_the_reports()
    if (certfile is None) != (keyfile is None):
        fail("--certfile and --keyfile go together: give both for HTTPS")
    loopback = host in ("127.0.0.1", "localhost", "::1")
    tokens = _serve_tokens(token_file, loopback)
    # bound to this machine only: answer only to its own names (no DNS rebinding)
    hosts = LOOPBACK_NAMES if host in LOOPBACK_NAMES else None
    if allowed_host:
        hosts = [*(hosts or []), *allowed_host]
    if uploads_per_minute is None:
        uploads_per_minute = 60 if tokens else 0
    sharing = Sharing(tokens, read_only=read_only, uploads_per_minute=uploads_per_minute)
    try:
        app = create_app(index_dir, model, allowed_hosts=hosts, sharing=sharing,
                         max_upload_bytes=int(max_upload_mb * 2**20), max_pixels=max_pixels)
    except IndexDirError as e:
        fail(str(e))
    scheme = "https" if certfile else "http"
    console.print(f"serving {index_dir} on {scheme}://{host}:{port}/  (Ctrl-C stops)"
                  + ("; read-only" if read_only else ""))
    if tokens:  # printed once, here; never logged (uvicorn's access log is off)
        import socket  # noqa: PLC0415

        name = socket.gethostname() if host in ("0.0.0.0", "::") else host
        name = f"[{name}]" if ":" in name else name
        for role in ("viewer", "editor"):
            console.print(f"  {role}: {scheme}://{name}:{port}/?token={tokens[role]}",
                          markup=False, soft_wrap=True)
    extra = {"forwarded_allow_ips": forwarded_allow_ips} if forwarded_allow_ips else {}
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                ssl_certfile=str(certfile) if certfile else None,
                ssl_keyfile=str(keyfile) if keyfile else None, **extra)


def _serve_tokens(token_file: Path | None, loopback: bool) -> dict | None:
    """The viewer and editor tokens: needed off loopback (made in the default file if it has
    none) or wherever --token-file is given; None on loopback without it."""
    from ..server.sharing import TokenFileError, load_or_create_tokens  # noqa: PLC0415

    if token_file is None and loopback:
        return None
    if token_file is None:
        config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        token_file = config_home / "pamir" / "serve-tokens.json"
    try:
        tokens, made = load_or_create_tokens(token_file)
    except (TokenFileError, OSError) as e:
        fail(str(e))
    console.print(f"tokens {'made in' if made else 'read from'} {token_file} (owner-only); "
                  "a viewer searches and annotates, an editor also teaches the model")
    return tokens


def register(app: typer.Typer) -> None:
    app.command("index")(index_command)
    app.command("search")(search_command)
    app.command("annotate")(annotate_command)
    app.command("learn")(learn_command)
    app.command("serve")(serve_command)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use the `pamir` command")
