"""The index job, one function for `pamir index`, the library and the server: open the
index for a model, bring it in line with the folders (each picture read once for the look,
the thumbnails and the fact passes), then the passes' rest, with progress.

    import pamir
    report = pamir.index_folders("models/mine", ["~/Pictures"], index="my-index")

    job = IndexJob(["~/Pictures"], passes=("text", "faces"))
    report, status = run_index(job, progress=lambda name, done, total: ...)

The fact passes (text, faces, the copies' looks, colours) are the rows of
pamir.jobs.fact_passes.FACT_PASSES; this module runs whichever the job names, each the same
way. In this process (no cluster), the update's transform is the reading stage
(pamir.index.stage): each new or changed picture is decoded once, its look and its files'
facts are committed batch by batch (searchable at once), its thumbnails written, and each pass
reads the same decode behind it on a thread of its own. What the stream did not read
(pictures indexed before, a pass asked for later, a new reader) is read after by the pass
alone (`read_pass`), which decodes for itself. On a Dask cluster (`workers`, `scheduler`:
pamir.jobs.indexing_dask) the workers decode the batches and the passes run as tasks.

Progress goes to `progress(name, done, total)` for "look" and each pass, to the index
folder's progress record (pamir.index.progress_record: the page shows it), and one line per
pass to this module's logger when it ends; notes for a person (an index rebuilt, a pass
whose extra is missing) go to `say` (the logger by default).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import config
from . import loading, opening
from .fact_passes import FactPass, chosen, fact_pass, pass_names, progress_labels
from .folder_look import refresh as refresh_folder_look
from ..extras import MissingExtra, require
from ..features.cnn_engines import streams
from ..features.rasters import look_needs
from ..index import BATCH_SIZE, Index
from ..index.passes import local_processes, run_pass
from ..index.progress_record import ProgressRecord
from ..index.stage import ReadingStage, StreamedPass
from ..index.videos import FramesReader
from ..system import index_transform

logger = logging.getLogger(__name__)

#: progress(name, done, total): a pass's pictures done of those it has to do.
Progress = Callable[[str, int, int], None]


@dataclass
class IndexJob:
    """What to index and how (`pamir index`'s options). model_dir None: the model the index
    has, else the zero-caption system. captions: {path: words} shown beside the pictures.
    passes: the names of the fact passes to run (pamir.jobs.fact_passes; default: every one).
    processes: local processes of a pass that reads what the stream did not in processes
    (the faces pass; pamir.index.passes.local_processes; 1: this one)."""

    folders: list
    model_dir: Path | None = None
    index_dir: Path | None = None
    captions: dict | None = None
    rebuild: bool = False
    batch_size: int | None = None
    passes: Sequence[str] = field(default_factory=pass_names)
    thumbnails: bool = True
    compact: bool = False
    workers: int | None = None
    scheduler: str | None = None
    processes: int = 1
    threads: int = field(default_factory=lambda: max(1, min(local_processes(), 4)))


def index_folders(model_dir, folders, *, index=None, captions: dict | None = None,
                  rebuild: bool = False, batch_size: int = BATCH_SIZE, progress=None,
                  say=logger.info, **passes):
    """Index the pictures under `folders` with the trained system in model_dir (None: the
    zero-caption system, ImageNet's words), incrementally, into the index folder `index`
    (default: pamir.config.default_index_dir()). captions: {path: words} shown beside the
    pictures. progress(done, total) follows the look's batches. passes: a fact pass's name
    (pamir.jobs.fact_passes: text, faces, copies, colour) = True, False or None: as `pamir
    index` does, None (the default) runs it where its extra ([ocr], [faces]) is installed
    and says so where it is not; True requires the extra (MissingExtra); False leaves the pass
    out (`text=False`). Returns the UpdateReport (report.text: what the text pass read)."""
    run, required = chosen(passes)
    job = IndexJob(list(folders), model_dir=None if model_dir is None else Path(model_dir),
                   index_dir=None if index is None else Path(index), captions=captions,
                   rebuild=rebuild, batch_size=batch_size, passes=run)

    def look(name, done, total):
        if progress is not None and name == "look":
            progress(done, total)

    report, _ = run_index(job, progress=look, say=say, required=required)
    return report


def run_index(job: IndexJob, *, system=None, fingerprint: str | None = None,
              progress: Progress | None = None, say=logger.info,
              after_look: Callable[[Index], None] | None = None,
              required=frozenset()) -> tuple:
    """The whole index job (see the module's doc): (UpdateReport, the index's status).
    system, fingerprint: what the index is built with, when the caller loaded it (the CLI,
    to say its errors); else from job.model_dir (pamir.jobs.loading.indexing_system).
    after_look(index): once every picture is committed, before the passes' rest (the CLI
    prepares its word mapping there). A pass whose extra is not installed is left out, its
    reason said, unless its name ("text", "faces") is in `required` (MissingExtra)."""
    index_dir = job.index_dir or config.default_index_dir()
    folders = opening.picture_folders(job.folders)
    model = None if job.model_dir is None else Path(job.model_dir).expanduser()
    if system is None:
        system, fingerprint = loading.indexing_system(model)
    index = opening.open_index(index_dir, model, system, fingerprint, job.rebuild, say=say)
    passes = [fact_pass(name) for name in pass_names() if name in job.passes]
    record = ProgressRecord(index.directory, progress, labels=progress_labels())
    with index, _cluster_if_asked(job, model, fingerprint, system, index) as (transform, batch,
                                                                             client):
        try:
            report = _look(index, job, passes, system, folders, transform, batch, client,
                           record)
            refresh_folder_look(index, system, say=say)  # a bare folder's own look
            if after_look is not None:
                after_look(index)
            for p in passes:
                report.passes[p.name] = _rest(index, p, job, client, record, say, required,
                                              report.passes[p.name])
        finally:
            record.finish()
        return report, index.status()


def read_pass(index: Index, name: str, *, client=None, progress=None, processes: int = 1
              ) -> dict:
    """The fact pass `name` (pamir.jobs.fact_passes) alone over every picture it has not read
    as it is now, and what follows it (the faces: who each is); its report as a dict. Each
    picture is decoded for this pass alone: `pamir index` feeds the pictures it indexes from
    its own decode (pamir.index.stage) and leaves this the rest. With a Dask client, batches
    as tasks; else as its row reads alone: on one thread a core, or in `processes` local
    processes (pamir.index.passes.local_processes; they start Python afresh, which imports
    the calling script's main module again: a script that asks for them runs its work under
    `if __name__ == "__main__":`). MissingExtra where its extra is not installed."""
    p = fact_pass(name)
    return _finished(index, p, _alone(index, p, client, progress, processes))


def _alone(index, p: FactPass, client, progress, processes: int) -> dict:
    """The pass's reading alone (pamir.index.passes.run_pass): its report as a dict."""
    if p.extra is not None:
        require(p.extra)  # MissingExtra before any work (and before a process is started)
    reader = FramesReader(p.part("alone")) if p.frames else p.part("alone")
    report = run_pass(index, p.catalogue_name(), p.kinds, reader,
                      client=client if p.cluster else None, progress=progress,
                      record=getattr(index, p.record),
                      processes=processes if p.reads_alone == "processes" else 1,
                      threads=streams() if p.reads_alone == "threads" else 1)
    return report.as_dict()


def _finished(index, p: FactPass, report: dict) -> dict:
    return p.part("then")(index, report) if p.then else report


@contextlib.contextmanager
def _cluster_if_asked(job: IndexJob, model, fingerprint, system, index):
    """(Dask transform, batch size, client) when the job asks for a cluster
    (pamir.jobs.indexing_dask.batch_runner), else (None, BATCH_SIZE, None)."""
    if not job.workers and not job.scheduler:
        yield None, BATCH_SIZE, None
        return
    from .indexing_dask import batch_runner  # noqa: PLC0415 - the [dask] extra

    with batch_runner(job.workers, job.scheduler, model, fingerprint, bool(index.classes),
                      cache_dir=config.default_cache_dir()) as (transform, batch, client):
        yield transform, batch, client


def _look(index, job, passes, system, folders, transform, batch, client, record):
    """The update: the look and the files' facts committed batch by batch; in this process
    through the reading stage, which also writes thumbnails and streams the passes. The
    report holds each pass's streamed part (None for a pass not streamed or not run)."""
    stage, short = (None, {}) if client is not None else _reading_stage(index, job, passes,
                                                                           system, record)
    totals = {name: len(index.pass_todo(name)) for name in (stage.streamed if stage else [])}

    def look(done, total):  # the passes have the update's pictures to read too
        record.set("look", done, total)
        for name, before in totals.items():
            record.set(short[name], total=before + total)

    record.set("look", 0, 0)
    try:
        report = opening.update_index(index, system, folders, stage or transform,
                                      captions=job.captions,
                                      batch_size=job.batch_size or batch, progress=look)
    except BaseException:  # Ctrl-C, a full disk: what the passes read is kept, no waiting
        if stage is not None:
            stage.finish(abandon=True)
        raise
    record.flush()  # the look done: the page shows how far the passes are behind it
    streamed = stage.finish() if stage is not None else {}
    logger.info(f"look: {len(index):,} pictures indexed (added {report.added:,}, changed "
        f"{report.changed:,}, unchanged {report.unchanged:,}, unreadable "
        f"{len(report.failed):,})")
    if job.compact:
        index.compact()
    report.passes = dict.fromkeys(pass_names())
    for name, r in streamed.items():
        report.passes[short[name]] = r.as_dict()
    return report


def _reading_stage(index, job: IndexJob, passes, system, record) -> tuple:
    """(the reading stage that streams the passes it can, {a streamed pass's catalogue
    name: its short name})."""
    short = {}
    streamed = []
    for p in passes:
        s = _streamed(p, index)
        if s is not None:
            streamed.append(s)
            short[s.name] = p.name
    stage = ReadingStage(index, index_transform(system, bool(index.classes)),
                         look_needs(system.pipeline), streamed=streamed,
                         thumbnails=index.thumbnails_dir if job.thumbnails else None,
                         threads=job.threads,
                         on_read=lambda name, n: record.add(short[name], n))
    return stage, short


def _streamed(p: FactPass, index) -> StreamedPass | None:
    """The pass fed from the reading stage's decode (None where its extra is missing: the
    pass run alone after says so). Its models are loaded by its stream's reader (`ready`:
    MissingExtra / RuntimeError / OSError there leave its pictures to the pass run alone)."""
    try:
        if p.extra is not None:
            require(p.extra)
        return StreamedPass(p.catalogue_name(), p.kinds, p.part("stream"),
                            getattr(index, p.record), p.part("side"),
                            _with_detail if p.detail else _picture,
                            detail=p.part("detail") if p.detail else None,
                            readers=p.stream_readers,
                            prepare=p.part("ready") if p.ready is not None else None)
    except (MissingExtra, RuntimeError, OSError, ImportError):
        return None


def _picture(item, rgb) -> tuple:
    """What a streamed pass's reader takes of a picture: (path, raster, shown size)."""
    return item.path, rgb, item.size


def _with_detail(item, rgb) -> tuple:
    """... and its closer look (Item.detail), for a pass that looks closer."""
    return item.path, rgb, item.size, item.detail


def _rest(index, p: FactPass, job, client, record, say, required, streamed: dict | None):
    """The pass over the pictures the stream did not read, its report merged with the
    stream's, and what follows it; None, with a line, where its extra is missing
    (MissingExtra where the pass is required)."""
    done = (streamed or {}).get("read", 0)
    try:
        rest = _alone(index, p, client,
                      lambda d, total: record.set(p.name, done + d, done + total),
                      job.processes)
    except MissingExtra as e:
        if p.name in required:
            raise
        say(f"{p.missing}: {e}")
        return None
    merged = _finished(index, p, _merged(streamed, rest))
    logger.info(f"{p.name}: {merged['read']:,} pictures read ({merged['with_facts']:,} with "
                f"{p.name}, {merged['failed']} unreadable) in {merged['seconds']:.1f} s"
                + "".join(f"; {n:,} {kind}" for kind, n in merged.get("groups", {}).items()))
    return merged


def _merged(streamed: dict | None, rest: dict) -> dict:
    """A pass's report: the stream's and the rest's counts added (the rest's other keys
    kept)."""
    if not streamed:
        return rest
    out = dict(rest)
    for key in ("read", "with_facts", "failed"):
        out[key] = streamed[key] + rest[key]
    out["seconds"] = round(streamed["seconds"] + rest["seconds"], 2)
    out["notes"] = (streamed["notes"] + rest["notes"])[:20]
    return out


__all__ = ["IndexJob", "index_folders", "read_pass", "run_index"]
