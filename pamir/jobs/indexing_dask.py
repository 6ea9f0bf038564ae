"""`pamir index` on a Dask cluster (`--workers N | --scheduler ADDRESS`): a batch of pictures
is one task that decodes, extracts features, projects with the model and hashes the files.

    with dask_client(workers=2) as client:                  # pamir.distributed
        transform = DaskTransform(client, model_dir, fingerprint, classes=False)
        index.update(folders, transform, batch_size=DASK_BATCH)

The process that called `update` stays the index's only writer: it commits each batch as its
result comes back (`map_batches`, which the index's writer uses to apply pamir.index.sync's
plan), so

- a batch whose task fails is retried alone (`retries`; a worker that dies mid-task has its
  tasks rescheduled by the scheduler), the others are committed meanwhile;
- a batch that never comes back is not committed, and the next run computes it (the
  catalogue is keyed by path, and a committed picture is unchanged for the next scan), so
  nothing is indexed twice.

Each worker loads the system itself, once (`worker_system`), from the model folder's JSON +
npz at the same path (shared storage), and checks that its files hash to the client's
fingerprint; with no model (`pamir index FOLDER`, model_dir None) it builds the
zero-caption system (ImageNet's classifier, from the installed weights) and checks its
fingerprint the same way. Only paths go out and (Z, ok, reasons, hashes) come back. Workers
need pamir installed at the same version, and the pictures at the same paths.

`batch_runner` is the whole of it for a caller (the CLI, a script): a cluster (a
LocalCluster of N processes, or a running scheduler's) and the transform that runs an index's
batches on it; the same client then runs the index's passes (the text pass,
pamir.index.passes) as tasks.

This job sits beside the index and the workflow, above the system; the cluster plumbing it
runs on (the client, submitting a batch, what a worker builds once) stays low in
pamir.distributed, where the feature extraction of `pamir fit --workers` uses it too.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from ..distributed import DASK_BATCH, RETRIES, dask_client, once_per_worker, submit_batch
from ..facts.video import VideoError
from ..index import model_fingerprint
from ..index.sync import file_hash
from ..index.videos import video_rows
from .loading import load_system, zero_caption_system

#: Tasks in flight per worker thread: enough to keep each busy while results are written,
#: few enough that results waiting to be written stay small.
IN_FLIGHT_PER_THREAD = 3


class BatchesFailed(RuntimeError):
    """Some batches failed on every try; the others were committed."""

    def __init__(self, failed: list[tuple[int, BaseException]]):
        self.failed = failed
        k, err = failed[0]
        super().__init__(f"{len(failed)} batch(es) failed on the Dask workers (first: batch "
                         f"{k}: {type(err).__name__}: {err}); the others are indexed: run "
                         "the same command again to compute the rest")


# -------------------------------------------------------------------------- on a worker

def worker_system(model_dir: str, fingerprint: str, cache_dir: str | None):
    """The system at model_dir, loaded once per worker process (checked against the client's
    fingerprint: a model folder that differs here is not on shared storage); model_dir ""
    (no model): the zero-caption system."""
    return once_per_worker(("system", model_dir, fingerprint, cache_dir),
                           lambda: _load_system(model_dir, fingerprint, cache_dir))


def _load_system(model_dir: str, fingerprint: str, cache_dir: str | None):
    if not model_dir:
        return _zero_caption_system(fingerprint, cache_dir)
    if fingerprint and model_fingerprint(model_dir) != fingerprint:
        raise RuntimeError(f"{model_dir} on this worker is not the client's model (another "
                           "fingerprint): put it on storage every worker shares")
    # the client lists unreadable pictures with their reasons, once
    logging.getLogger("pamir.features.extract").setLevel(logging.ERROR)
    system = load_system(model_dir, cache_dir=cache_dir)
    _single_threaded(system.pipeline)
    return system


def _zero_caption_system(fingerprint: str, cache_dir: str | None):
    """What `pamir index FOLDER` indexes with no model (pamir.zeroshot.classes), as the client built
    it: another network or weights installed here would give other class probabilities."""
    logging.getLogger("pamir.features.cnn").setLevel(logging.ERROR)
    system = zero_caption_system(cache_dir)
    if fingerprint and system.fingerprint != fingerprint:
        raise RuntimeError(f"this worker's zero-caption system ({system.fingerprint}) is not "
                           f"the client's ({fingerprint}): install the same pamir and "
                           "network weights on every worker")
    _single_threaded(system.pipeline)
    return system


def _single_threaded(rep) -> None:
    """One extraction thread per task: a worker runs one task per thread it has."""
    for part in getattr(rep, "parts", [rep]):
        if hasattr(part, "n_jobs"):
            part.n_jobs = 1


def transform_batch(model_dir: str, fingerprint: str, classes: bool, cache_dir: str | None,
                    paths: Sequence[str]) -> tuple:
    """(Z, ok, reasons, hashes) of one batch, on a worker: what pamir.index.sync commits."""
    from ..system import index_transform  # noqa: PLC0415  start-up time: numba, scipy

    system = worker_system(model_dir, fingerprint, cache_dir)
    hashes = []
    for p in paths:
        try:
            hashes.append(file_hash(p))
        except OSError:
            hashes.append(None)
    Z, ok, reasons = index_transform(system, classes)(list(paths))
    return np.asarray(Z, np.float32), np.asarray(ok, bool), list(reasons), hashes


def video_task(model_dir: str, fingerprint: str, classes: bool, cache_dir: str | None,
               paths: Sequence[str]) -> list[tuple]:
    """[(row, (frame times, frame rows), None) or (None, None, why)] of videos, on a worker:
    their frames read and scored here (pamir.index.videos.video_rows), where the videos are
    at the same paths; a video that cannot be read is an answer, not a retry."""
    from ..system import index_transform  # noqa: PLC0415  start-up time: numba, scipy

    transform = index_transform(worker_system(model_dir, fingerprint, cache_dir), classes)
    out = []
    for p in paths:
        try:
            row, frames, _ = video_rows(p, transform)
            out.append((row, frames, None))
        except VideoError as e:
            out.append((None, None, str(e)))
    return out


# --------------------------------------------------------------------------- the client

class DaskTransform:
    """An index transform whose batches run as Dask tasks (see the module's doc).

    Called on paths it runs them as one task and waits (what Index.rescore uses);
    `map_batches` is what Index.apply (an update) uses: every batch a task, at most
    IN_FLIGHT_PER_THREAD per worker thread in flight, results yielded as they finish.
    task: the function a task runs (transform_batch; tests wrap it)."""

    def __init__(self, client, model_dir, fingerprint: str, classes: bool = False, *,
                 cache_dir=None, retries: int = RETRIES, task=transform_batch):
        self.client = client
        # model_dir None: the zero-caption system ("" on the wire)
        self.args = ("" if model_dir is None else str(Path(model_dir).resolve()),
                     fingerprint, bool(classes),
                     None if cache_dir is None else str(Path(cache_dir).resolve()))
        self.retries = retries
        self.task = task

    def __call__(self, paths):
        Z, ok, reasons, _ = self._submit(paths).result()
        return Z, ok, reasons

    def _submit(self, paths, **options):
        return submit_batch(self.client, self.task, self.args, paths, retries=self.retries,
                            **options)

    def video_rows(self, path: str) -> tuple[np.ndarray, tuple]:
        """(row, (frame times, frame rows)) of a video, read on a worker (`video_task`):
        the frames this process would write are not on a remote worker's disk.
        VideoError where the worker cannot read it."""
        [(row, frames, why)] = submit_batch(self.client, video_task, self.args, [path],
                                            retries=self.retries).result()
        if why is not None:
            raise VideoError(why)
        return row, frames

    def threads(self) -> int:
        return max(1, sum(self.client.nthreads().values()))

    def map_batches(self, batches: Sequence[Sequence[str]]) -> Iterator[tuple[int, tuple]]:
        from distributed import as_completed  # noqa: PLC0415 - the [dask] extra

        window = IN_FLIGHT_PER_THREAD * self.threads()
        which, failed = {}, []
        pending = iter(enumerate(batches))

        def submit(k, paths):
            f = self._submit(paths, key=f"pamir-batch-{k}-{time.time_ns()}")
            which[f.key] = k
            return f

        first = [submit(k, b) for k, b in _take(pending, window)]
        running = as_completed(first, with_results=False)
        for f in running:
            k = which.pop(f.key)
            try:
                result = f.result()
            except Exception as e:  # noqa: BLE001  (retried already: report, go on)
                failed.append((k, e))
            else:
                yield k, result
            finally:
                f.release()
            for k2, b in _take(pending, 1):
                running.add(submit(k2, b))
        if failed:
            raise BatchesFailed(failed)


@contextlib.contextmanager
def batch_runner(workers: int | None, scheduler: str | None, model_dir, fingerprint: str,
                 classes: bool, cache_dir=None):
    """(transform, batch size, client) that `pamir index` runs with: (None, None, None) --
    the index's own transform in this process -- without `workers` or `scheduler`; else a
    DaskTransform on a LocalCluster of `workers` processes or on the cluster of `scheduler`
    (closed on exit), DASK_BATCH, and its client for the passes. model_dir None: the
    zero-caption system."""
    if not workers and not scheduler:
        yield None, None, None
        return
    with dask_client(workers, scheduler) as client:
        yield (DaskTransform(client, model_dir, fingerprint, classes, cache_dir=cache_dir),
               DASK_BATCH, client)


def _take(it, n):
    out = []
    for _ in range(n):
        try:
            out.append(next(it))
        except StopIteration:
            break
    return out


__all__ = ["BatchesFailed", "DaskTransform", "IN_FLIGHT_PER_THREAD", "batch_runner",
           "transform_batch", "worker_system"]
