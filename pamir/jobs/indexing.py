"""The index job, one function for `pamir index`, the library and the server: open the
index for a model, bring it in line with the folders (each picture read once for the look,
the thumbnails and the text and faces passes), then the passes' rest, with progress.

    import pamir
    report = pamir.index_folders("models/mine", ["~/Pictures"], index="my-index")

    job = IndexJob(["~/Pictures"], text=True, faces=True)
    report, status = run_index(job, progress=lambda name, done, total: ...)

In this process (no cluster), the update's transform is the reading stage
(pamir.index.stage): each new or changed picture is decoded once, its look and its files'
facts are committed batch by batch (searchable at once), its thumbnails written, and the
text and faces passes read the same decode behind it on threads of their own. What the
stream did not read (pictures indexed before, a pass asked for later, a new reader) is read
after by the pass alone (pamir.jobs.workflow.read_text, read_faces), which decodes for itself.
On a Dask cluster (`workers`, `scheduler`: pamir.jobs.indexing_dask) the workers decode the batches
and the passes run as tasks, as before.

Progress goes to `progress(name, done, total)` for "look", "text" and "faces", to the index
folder's progress record (pamir.index.progress_record: the page shows it), and one line per
pass to this module's logger when it ends; notes for a person (an index rebuilt, a pass
whose extra is missing) go to `say` (the logger by default).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import config
from . import loading, opening, workflow
from .folder_look import refresh as refresh_folder_look
from ..index import BATCH_SIZE, Index

logger = logging.getLogger(__name__)

#: progress(name, done, total): a pass's pictures done of those it has to do.
Progress = Callable[[str, int, int], None]


@dataclass
class IndexJob:
    """What to index and how (`pamir index`'s options). model_dir None: the model the index
    has, else the zero-caption system. captions: {path: words} shown beside the pictures.
    processes: local processes of the faces pass that reads what the stream did not
    (pamir.index.passes.local_processes; 1: this one)."""

    folders: list
    model_dir: Path | None = None
    index_dir: Path | None = None
    captions: dict | None = None
    rebuild: bool = False
    batch_size: int | None = None
    text: bool = False
    faces: bool = False
    thumbnails: bool = True
    copies: bool = True
    compact: bool = False
    workers: int | None = None
    scheduler: str | None = None
    processes: int = 1
    threads: int = field(default_factory=lambda: _cores())


def _cores() -> int:
    from ..index.passes import local_processes  # noqa: PLC0415

    return max(1, min(local_processes(), 4))


def index_folders(model_dir, folders, *, index=None, captions: dict | None = None,
                  rebuild: bool = False, batch_size: int = BATCH_SIZE, progress=None,
                  say=logger.info, text: bool | None = None, faces: bool | None = None):
    """Index the pictures under `folders` with the trained system in model_dir (None: the
    zero-caption system, ImageNet's words), incrementally, into the index folder `index`
    (default: pamir.config.default_index_dir()). captions: {path: words} shown beside the
    pictures. progress(done, total) follows the look's batches. text: also read the text
    written in the pictures (report.text says what it read); faces: also find the faces and
    who they are (report.faces). As `pamir index` does, None reads them where their extra
    ([ocr], [faces]) is installed and says so where it is not; True requires the extra
    (MissingExtra); False leaves the pass out. Returns the UpdateReport."""
    job = IndexJob(list(folders), model_dir=None if model_dir is None else Path(model_dir),
                   index_dir=None if index is None else Path(index), captions=captions,
                   rebuild=rebuild, batch_size=batch_size, text=text is not False,
                   faces=faces is not False)

    def look(name, done, total):
        if progress is not None and name == "look":
            progress(done, total)

    required = {kind for kind, asked in (("text", text), ("faces", faces)) if asked}
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
    from ..index.progress_record import ProgressRecord  # noqa: PLC0415

    record = ProgressRecord(index.directory, progress)
    with index, _cluster_if_asked(job, model, fingerprint, system, index) as (transform, batch,
                                                                             client):
        try:
            report = _look(index, job, system, folders, transform, batch, client, record, say)
            refresh_folder_look(index, system, say=say)  # a bare folder's own look
            if after_look is not None:
                after_look(index)
            if job.text:
                report.text = _rest(index, "text", record, say, required,
                                    lambda p: workflow.read_text(index, client=client,
                                                                 progress=p).as_dict(),
                                    report.text)
            if job.faces:
                report.faces = _rest(index, "faces", record, say, required,
                                     lambda p: workflow.read_faces(
                                         index, client=client, progress=p,
                                         processes=job.processes), report.faces)
            if job.copies:  # copies and bursts (pamir.duplicates.groups), their looks streamed too
                report.copies = _copies(index, client, report.copies)
        finally:
            record.finish()
        return report, index.status()


@contextlib.contextmanager
def _cluster_if_asked(job: IndexJob, model, fingerprint, system, index):
    """(Dask transform, batch size, client) when the job asks for a cluster
    (pamir.jobs.indexing_dask.batch_runner), else (None, BATCH_SIZE, None)."""
    if not job.workers and not job.scheduler:
        yield None, BATCH_SIZE, None
        return
    from .. import config  # noqa: PLC0415
    from .indexing_dask import batch_runner  # noqa: PLC0415

    with batch_runner(job.workers, job.scheduler, model, fingerprint, bool(index.classes),
                      cache_dir=config.default_cache_dir()) as (transform, batch, client):
        yield transform, batch, client


def _look(index, job, system, folders, transform, batch, client, record, say):
    """The update: the look and the files' facts committed batch by batch; in this process
    through the reading stage, which also writes thumbnails and streams the passes."""
    stage = None
    if client is None:
        stage = _reading_stage(index, job, system, record, say)
    totals = {name: len(index.pass_todo(name)) for name in (stage.streamed if stage else [])}

    def look(done, total):  # the passes have the update's pictures to read too
        record.set("look", done, total)
        for name, before in totals.items():
            record.set(_short(name), total=before + total)

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
    for name, r in streamed.items():
        setattr(report, _short(name), r.as_dict())
    return report


def _copies(index, client, streamed: dict | None) -> dict:
    """The looks the stream did not read (pamir.duplicates.groups.copies_pass reads them alone),
    then the groups of copies and bursts found again where a look is new."""
    from ..duplicates.groups import copies_pass  # noqa: PLC0415

    copies = copies_pass(index, client=client, already=(streamed or {}).get("read", 0))
    logger.info(f"copies: {sum(copies['groups'].values()):,} groups "
                f"({', '.join(f'{n} {k}' for k, n in copies['groups'].items())}) "
                f"in {copies['seconds']:.1f} s")
    return copies


def _short(name: str) -> str:
    """"text", "faces", "copies": a pass's name without its reader's fingerprint (the looks
    pass is the copies' part)."""
    short = name.split()[0]
    return "copies" if short == "looks" else short


def _reading_stage(index, job: IndexJob, system, record, say):
    from ..features.rasters import look_needs  # noqa: PLC0415
    from ..index.stage import ReadingStage  # noqa: PLC0415
    from ..system import index_transform  # noqa: PLC0415  heavy: numba, scipy

    streamed = []
    if job.text:
        streamed += _streamed("text", index)
    if job.faces:
        streamed += _streamed("faces", index)
    if job.copies:
        streamed += _streamed("looks", index)
    return ReadingStage(index, index_transform(system, bool(index.classes)),
                        look_needs(system.pipeline), streamed=streamed,
                        thumbnails=index.thumbnails_dir if job.thumbnails else None,
                        threads=job.threads,
                        on_read=lambda name, n: record.add(_short(name), n))


def _streamed(kind: str, index) -> list:
    """The streamed pass of this kind ([] where its extra is missing: the pass run alone
    after says so)."""
    from ..extras import MissingExtra, optional  # noqa: PLC0415
    from ..index.stage import StreamedPass  # noqa: PLC0415

    try:
        if kind == "looks":  # the copies' looks, from the same decode (pamir.duplicates.looks)
            from ..duplicates.groups import LOOKS_PASS  # noqa: PLC0415
            from ..duplicates.looks import RASTER_SIDE, read_look_rasters  # noqa: PLC0415

            return [StreamedPass(LOOKS_PASS, (), read_look_rasters, index.record_looks,
                                 RASTER_SIDE, lambda item, rgb: (item.path, rgb, item.size))]
        if kind == "text":  # lines found at DETECT_SIDE, read at READ_SIDE where there are
            from ..facts import ocr  # noqa: PLC0415

            ocr.shared_reader()  # rapidocr and its models, or MissingExtra / OcrUnavailable
            return [StreamedPass(workflow.text_pass_name(), ("text",), ocr.read_text_rasters,
                                 index.record_pass, ocr.DETECT_SIDE,
                                 lambda item, rgb: (item.path, rgb, item.size, item.detail),
                                 detail=ocr.READ_SIDE)]
        from ..facts.people import faces, zoom  # noqa: PLC0415
        from ..facts.people.pictures import read_face_rasters  # noqa: PLC0415

        with optional():  # the [faces] extra, as the pass alone asks for it
            import dlib  # noqa: F401, PLC0415
        faces.face_finder()  # and its models
        # faces found at DETECT_SIDE; small ones looked for closer, where there are cues
        return [StreamedPass(workflow.faces_pass_name(), ("person",), read_face_rasters,
                             index.record_faces, faces.DETECT_SIDE,
                             lambda item, rgb: (item.path, rgb, item.size, item.detail),
                             detail=zoom.ZOOM_SIDE)]
    except (MissingExtra, RuntimeError, OSError, ImportError):
        return []


def _rest(index, kind: str, record, say, required, run, streamed: dict | None):
    """The pass `kind` over the pictures the stream did not read, its report merged with the
    stream's; None, with a line, where its extra is missing (MissingExtra where `kind` is
    required)."""
    from ..extras import MissingExtra  # noqa: PLC0415

    done = (streamed or {}).get("read", 0)
    try:
        rest = run(lambda d, total: record.set(kind, done + d, done + total))
    except MissingExtra as e:
        if kind in required:
            raise
        say(f"{'text in pictures not read' if kind == 'text' else 'faces not found'}: {e}")
        return None
    merged = _merged(streamed, rest)
    logger.info(f"{kind}: {merged['read']:,} pictures read ({merged['with_facts']:,} with "
        f"{kind}, {merged['failed']} unreadable) in {merged['seconds']:.1f} s")
    return merged


def _merged(streamed: dict | None, rest: dict) -> dict:
    """A pass's report: the stream's and the rest's counts added (the rest's other keys,
    the faces pass's "people", kept)."""
    if not streamed:
        return rest
    out = dict(rest)
    for key in ("read", "with_facts", "failed"):
        out[key] = streamed[key] + rest[key]
    out["seconds"] = round(streamed["seconds"] + rest["seconds"], 2)
    out["notes"] = (streamed["notes"] + rest["notes"])[:20]
    return out


__all__ = ["IndexJob", "index_folders", "run_index"]
