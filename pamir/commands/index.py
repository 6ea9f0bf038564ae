"""The tool a person uses: `pamir index` here (it parses, calls the index job,
pamir.jobs.indexing.run_index, and prints), with what the commands that load a model share
(`load_system`, `is_model`); `pamir search`, `annotate`, `learn` and `serve` in their own
modules beside it (pamir.cli imports each when its command runs).

The index lives in one folder (`--index`, else $PAMIR_INDEX, else
$XDG_DATA_HOME/pamir/index, i.e. ~/.local/share/pamir/index), so `pamir search` works from
any directory once `pamir index` has run, as rclip does.
"""

from __future__ import annotations

import functools
import inspect
import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import typer
from rich.markup import escape

from .. import config
from ..jobs import loading, opening
from ..jobs.errors import WorkflowError
from ..data import DataError, load_captions_table
from ..index import BATCH_SIZE, Index, IndexDirError, embeddings_enabled
from ..index.passes import local_processes
from ..jobs.fact_passes import FACT_PASSES, FactPass, chosen, progress_labels
from ..jobs.indexing_dask import BatchesFailed
from ..progress import PassBars
from ..text import lexicon
from ..text.embedding import EmbeddingUnavailable, model_installed
from ..zeroshot.imagenet import imagenet_class_names
from .common import INDEX_HELP, console, fail, own_the_reports
from .duplicates import print_copies_report
from .people import print_faces_report
from .sidecars import check_sidecar_name, print_sidecars_report, write_index_sidecars
# The serve command's host names, imported from here before the commands had modules of their
# own.
from .serve import LOOPBACK_NAMES  # noqa: F401

#: How many unreadable files `pamir index` lists before summarising the rest.
MAX_LISTED_FAILURES = 20


def pass_options(help_of: Callable[[FactPass], str], *, watching: bool = False):
    """A decorator that gives a command a `--X/--no-X` option per fact pass of the table
    (pamir.jobs.fact_passes.FACT_PASSES; the watcher's: those it runs), on by default, each
    passed to the command's **passes by the pass's name. help_of(row): its help."""
    rows = [p for p in FACT_PASSES if p.watch or not watching]

    def decorate(command):
        signature = inspect.signature(command)
        kept = [q for q in signature.parameters.values() if q.kind is not q.VAR_KEYWORD]
        added = [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                                   default=typer.Option(True, f"--{p.name}/--no-{p.name}",
                                                        help=help_of(p)))
                 for p in rows]
        run = functools.wraps(command)(lambda **options: command(**options))
        run.__signature__ = signature.replace(parameters=[*kept, *added])
        return run

    return decorate


def extra_note(p: FactPass) -> str:
    """" (the [ocr] extra)" for a pass's option's help."""
    return escape(f" (the [{p.extra}] extra)") if p.extra else ""  # not rich markup


def load_system(model: Path):
    """The trained system in `model` (pamir.jobs.loading.load_system), or the command fails
    saying why. Every command that loads a model calls it through this module."""
    # Heavy (the models and torch, over a second): imported only by the commands that load
    # a model, so that `pamir search` starts at once. Our own bar shows indexing progress.
    own_the_reports()
    try:
        return loading.load_system(model)
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
    write_xmp: bool = typer.Option(False, "--write-xmp", help="then write the words likely "
                                   "enough, the named faces and the place into the pictures' "
                                   "XMP sidecars ($PAMIR_XMP_SIDECAR picks which; "
                                   "docs/usage.md, \"Writing back\")"),
    **passes: bool,  # --text/--no-text, ...: a pass's option each (`pass_options`)
):
    """Index folders of pictures, incrementally: only new and changed files are computed.

    Renamed or copied files are recognised by their content and not recomputed; files gone
    from the folders are dropped; an interrupted run resumes where it stopped; unreadable
    files are reported and skipped.
    """
    index_dir = index_dir or config.default_index_dir()
    if write_xmp:
        check_sidecar_name(None)  # a wrong $PAMIR_XMP_SIDECAR fails before the indexing
    model, folders = _model_and_folders(model, list(folders or []), index_dir)
    try:
        folders = opening.picture_folders(folders)
    except WorkflowError as e:
        fail(str(e))
    if model is None:
        console.print("no model: searching by ImageNet's words (no captions needed); "
                      "`pamir fit` on captioned pictures learns your own words")
    system, fingerprint = loading.indexing_system(model, load=load_system)
    # start-up: the CNN's module (20 ms); `pamir search`, `learn`, `watch` and `annotate`
    # import this module (load_system) and do not need it
    from ..features.cnn import cnn_views  # noqa: PLC0415 - the CNN views' precision, one line each
    for view in cnn_views(system):
        console.print(f"cnn {escape(view.precision_says())}")
    caption_map = _caption_map(captions) if captions else None
    try:
        report, status = _index(system, fingerprint, folders=folders, model_dir=model,
                                index_dir=index_dir, captions=caption_map, rebuild=rebuild,
                                batch_size=batch, passes=chosen(passes)[0], compact=compact,
                                workers=workers, scheduler=scheduler,
                                processes=local_processes())
    except (OSError, sqlite3.OperationalError) as e:
        # a full or failing disk: every batch committed before it stays indexed and searchable
        fail(f"{index_dir}: cannot write the index ({e}); what was indexed before is kept and "
             "can be searched; free some space (or check the disk) and run the same command "
             "again to go on")
    sidecars = write_index_sidecars(index_dir, folders) if write_xmp else None
    if as_json:
        print(json.dumps({"index": str(index_dir), **report.as_dict(), "status": status,
                          **({"xmp": sidecars.as_dict()} if sidecars else {})}))
    else:
        _print_report(index_dir, report, status)
        if sidecars:
            print_sidecars_report(sidecars)


def _print_report(index_dir: Path, report, status: dict) -> None:
    """What `pamir index` did, for a person: the notes and unreadable files (the first
    MAX_LISTED_FAILURES of each), the counts, and each fact pass's."""
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
    for name, r in report.passes.items():
        if r is not None:
            PASS_REPORTS.get(name, _print_pass_report)(name, r)


def _print_pass_report(name: str, r: dict) -> None:
    """A fact pass's report, for a person (a pass with more to say has its own, PASS_REPORTS)."""
    for note in r["notes"][:MAX_LISTED_FAILURES]:
        console.print(f"[yellow]{name} not read:[/yellow] {escape(note)}", markup=True)
    console.print(f"{name}: {r['read']:,} pictures read ({r['with_facts']:,} with {name}, "
                  f"{r['failed']} unreadable) in {r['seconds']:.1f} s")


#: The passes whose report says more than what they read (pamir.jobs.fact_passes' `then`).
PASS_REPORTS = {"faces": lambda _, r: print_faces_report(r),
                "copies": lambda _, r: print_copies_report(r)}


def is_model(path: Path) -> bool:
    """Whether `path` is a model folder (`pamir fit` writes model.json there)."""
    return (path / "model.json").is_file()


def _model_and_folders(first: Path, rest: list[Path], index_dir: Path
                       ) -> tuple[Path | None, list[Path]]:
    """`pamir index [MODEL] FOLDER...`: (the model, or None for the zero-caption system; the
    folders). With no MODEL, an index that was built with a model keeps it."""
    if is_model(first):
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
            if not is_model(Path(built_with)):
                fail(f"{index_dir} was built with the model {built_with}, which is no longer "
                     "there; give the model first (pamir index MODEL FOLDER), or --rebuild "
                     "to search with no captions")
            return Path(built_with), folders
    return None, folders


def _index(system, fingerprint, **job):
    """index_command's work, the library's index job (pamir.jobs.indexing.run_index, of
    IndexJob(**job)) with bars: (report, status); its errors said."""
    # start-up: the index job's modules (the reading stage, the passes: 0.35 s), which
    # `pamir search` (it imports this module for load_system) does not need
    from ..jobs.indexing import IndexJob, run_index  # noqa: PLC0415

    job = IndexJob(**job)
    bars = PassBars(console, progress_labels())
    try:
        with bars:
            return run_index(job, system=system, fingerprint=fingerprint,
                             progress=bars.update,
                             say=lambda line: console.print(escape(line), markup=True),
                             after_look=_prepare_word_mapping)
    except (IndexDirError, WorkflowError, BatchesFailed) as e:
        fail(str(e))
    except KeyboardInterrupt:
        bars.stop()
        console.print(f"interrupted: {_indexed(job.index_dir)} pictures are safely indexed "
                      "and searchable, with the text and faces read so far; run the same "
                      "command again to go on")
        raise typer.Exit(130) from None


def _indexed(index_dir: Path) -> str:
    """How many pictures the index holds ("?" where it cannot be opened)."""
    try:
        with Index.open(index_dir) as index:
            return f"{len(index):,}"
    except (IndexDirError, OSError, sqlite3.Error):
        return "?"


def _prepare_word_mapping(index: Index) -> None:
    """Make now, not on a query's path, what `pamir search` maps words outside the
    vocabulary with: this machine's lexicon of word embeddings (pamir.text.lexicon; once per
    machine, about a minute), the embeddings of this index's vocabulary (once per vocabulary,
    cached in the index folder) and of the ImageNet classes' descriptions (pamir.zeroshot.classes;
    once per machine, in the feature cache, about 40 s). Nothing when the lexicon or the
    mapping is turned off, or the model is not installed (queries then work as before)."""
    if not embeddings_enabled() or lexicon.lexicon_size() == 0 or not model_installed()[0]:
        return
    try:
        if lexicon.missing():
            console.print(f"building the lexicon of word embeddings for this machine, once "
                          f"({lexicon.lexicon_size():,} words, about a minute): "
                          f"{lexicon.lexicon_dir()}")
            lexicon.build(names=_class_names())
        if index.vocabulary:  # the zero-caption system's index has none
            index.bridge.vocabulary_embeddings()
        bridge = index.class_words.bridge if index.class_words is not None else None
        if (bridge is not None and not bridge.cache_file.exists()
                and (bridge.shipped is None or bridge.shipped() is None)):  # none packaged
            # a line, not a spinner: the passes' bars are the terminal's one live display
            console.print("embedding ImageNet's class descriptions, once per machine")
            bridge.vocabulary_embeddings()
    except EmbeddingUnavailable as e:
        console.print(f"[yellow]words outside the vocabulary cannot be mapped:[/yellow] "
                      f"{escape(str(e))}", markup=True)


def _caption_map(table: Path) -> dict[str, tuple[str, ...]]:
    try:
        coll = load_captions_table(table, include_uncaptioned=False)
    except DataError as e:
        fail(str(e))
    return {str(p): c for p, c in zip(coll.paths, coll.captions) if c}


def register(app: typer.Typer) -> None:
    app.command("index")(pass_options(lambda p: f"then {p.about}{extra_note(p)}")(index_command))


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use the `pamir` command")


def _class_names() -> list[str]:
    """ImageNet's class names for the lexicon, or none where the package is missing (the
    lexicon then holds English words alone)."""
    try:
        return imagenet_class_names()
    except Exception:  # noqa: BLE001 - the class names are optional here
        return []
