"""Pictures as Dask tasks: the one home of pamir's Dask work (`--workers N | --scheduler ADDRESS`).

    with dask_client(workers=2) as client:                  # a LocalCluster of 2 processes
        transform = DaskTransform(client, model_dir, fingerprint, classes=False)
        index.update(folders, transform, batch_size=DASK_BATCH)      # pamir index
        with on_cluster(client, DASK_BATCH):                         # pamir fit
            system = fit_system(...)

Two commands use it, with one mechanism: a batch of pictures is one task, `submit_batch`
sends it (paths out, retried RETRIES times), and a worker builds what its tasks need once
(`once_per_worker`: a system, a network, a colour table) from what the task is given:
paths of shared files, settings as dicts, numpy arrays; never a pickled object.

`pamir index` (DaskTransform): a task decodes, extracts features, projects with the model and
hashes the files. The process that called `update` stays the index's only writer: it commits
each batch as its result comes back (pamir.index.sync, `map_batches`), so

- a batch whose task fails is retried alone (`retries`; a worker that dies mid-task has its
  tasks rescheduled by the scheduler), the others are committed meanwhile;
- a batch that never comes back is not committed, and the next run computes it (the
  catalogue is keyed by path, and a committed picture is unchanged for the next scan), so
  nothing is indexed twice.

Each worker loads the system itself, once, from the model folder's JSON + npz at the same
path (shared storage), and checks that its files hash to the client's fingerprint. Only paths
go out and (Z, ok, reasons, hashes) come back. Workers need pamir installed at the same
version, and the pictures at the same paths.

`pamir fit` (on_cluster): while it is active, the representations' per-picture work runs
its chunks of pictures through `cluster_chunks` (the blocks of pamir.features.extract, the
visterms of pamir.features.pipeline, the CNN's pooled vectors of pamir.features.cnn), the
results back in order, so what the caller sees is what it would have computed itself.

The batch size: DASK_BATCH, chosen from the per-task overhead measured by
benchmarks/bench_dask.py (benchmarks/results/dask.md) with `batch_for_overhead`.
"""

from __future__ import annotations

import contextvars
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

#: Pictures per task under Dask. Measured on Corel 5k (benchmarks/results/dask.md): Dask's
#: own cost is ~2 ms per task (13 ms as an awaited round trip) against ~8.6 ms of one core
#: per picture, so 25-155 pictures keep it under 1 %; but a batch also costs the writer a
#: commit and the worker its per-call setup and a smaller visterm-assignment batch, and
#: batches of 16 / 64 / 256 indexed Corel 5k in 37.6 / 29.1 / 17.9 s. 256 is also the
#: in-process batch: a retried task redoes at most 256 pictures, and a 5,000-picture
#: folder still makes 20 tasks for the workers to share.
DASK_BATCH = 256
#: How many times a failed batch is retried before the run reports it (a worker that dies
#: mid-task is rescheduled by the scheduler on top of this).
RETRIES = 2
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


@contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None):
    """A dask.distributed Client: to the scheduler at `scheduler`, or to a LocalCluster of
    `workers` single-threaded worker processes (closed on exit)."""
    from .extras import optional  # noqa: PLC0415

    with optional():  # the [dask] extra
        from distributed import Client, LocalCluster  # noqa: PLC0415  (heavy, optional path)

    if scheduler:
        client = Client(scheduler)
        try:
            yield client
        finally:
            client.close()
        return
    cluster = LocalCluster(n_workers=int(workers or 1), threads_per_worker=1, processes=True,
                           dashboard_address=None)
    try:
        with Client(cluster) as client:
            yield client
    finally:
        cluster.close()


def submit_batch(client, task, args: Sequence, paths: Sequence, *,
                 retries: int = RETRIES, **options):
    """task(*args, paths) as a Dask task: a batch of pictures, retried `retries` times.
    Never pure: the same paths may hold other pictures next time."""
    return client.submit(task, *args, list(paths), retries=retries, pure=False, **options)


# ------------------------------------------------------------- pamir fit: on_cluster

_CLUSTER: contextvars.ContextVar = contextvars.ContextVar("pamir_cluster", default=None)


@contextmanager
def on_cluster(client, batch: int = 64):
    """Inside this block the representations run their chunks of pictures as Dask tasks of
    `batch` pictures on `client` (`cluster_chunks`)."""
    token = _CLUSTER.set((client, int(batch)))
    try:
        yield
    finally:
        _CLUSTER.reset(token)


def active_cluster():
    """(client, batch) while on_cluster is active, else None."""
    return _CLUSTER.get()


def cluster_chunks(paths: Sequence, chunk_pictures: int, task, *args) -> Iterator[tuple]:
    """(chunk of paths, [task result per picture]) for consecutive chunks, each chunk's
    batches run as tasks task(*args, batch) -> list (one item per picture); the next chunk
    is submitted before a chunk is yielded, so the workers never wait for the caller."""
    client, batch = active_cluster()
    chunks = [paths[lo:lo + chunk_pictures] for lo in range(0, len(paths), chunk_pictures)]

    def submit(chunk):
        return [submit_batch(client, task, args, chunk[lo:lo + batch])
                for lo in range(0, len(chunk), batch)]

    ahead = submit(chunks[0]) if chunks else None
    for k, chunk in enumerate(chunks):
        futures, ahead = ahead, (submit(chunks[k + 1]) if k + 1 < len(chunks) else None)
        results = [r for part in client.gather(futures) for r in part]
        yield chunk, results


# -------------------------------------------------------------------------- on a worker

_built: dict[tuple, object] = {}
_built_lock = threading.RLock()  # a build may ask for another (a pipeline, its colour table)


def once_per_worker(key: tuple, build: Callable[[], object]):
    """What build() gives, built by the first task of this worker process that asks for
    `key` and kept for the later ones (a system, a network, a colour table cost seconds;
    a task, milliseconds). key: (what, ...) naming what is built and from what."""
    with _built_lock:
        if key not in _built:
            _built[key] = build()
        return _built[key]


def worker_system(model_dir: str, fingerprint: str, cache_dir: str | None):
    """The system at model_dir, loaded once per worker process (checked against the client's
    fingerprint: a model folder that differs here is not on shared storage)."""
    return once_per_worker(("system", model_dir, fingerprint, cache_dir),
                           lambda: _load_system(model_dir, fingerprint, cache_dir))


def _load_system(model_dir: str, fingerprint: str, cache_dir: str | None):
    from .index import model_fingerprint  # noqa: PLC0415
    from .system import System  # noqa: PLC0415

    if fingerprint and model_fingerprint(model_dir) != fingerprint:
        raise RuntimeError(f"{model_dir} on this worker is not the client's model (another "
                           "fingerprint): put it on storage every worker shares")
    # the client lists unreadable pictures with their reasons, once
    logging.getLogger("pamir.features.extract").setLevel(logging.ERROR)
    system = System.load(model_dir, cache_dir=cache_dir, progress=False)
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
    from .system import index_transform  # noqa: PLC0415
    from .index.sync import file_hash  # noqa: PLC0415

    system = worker_system(model_dir, fingerprint, cache_dir)
    hashes = []
    for p in paths:
        try:
            hashes.append(file_hash(p))
        except OSError:
            hashes.append(None)
    Z, ok, reasons = index_transform(system, classes)(list(paths))
    return np.asarray(Z, np.float32), np.asarray(ok, bool), list(reasons), hashes


def _nothing(*_):
    return None


# --------------------------------------------------------------------------- the client

class DaskTransform:
    """An index transform whose batches run as Dask tasks (see the module's doc).

    Called on paths it runs them as one task and waits (what Index.rescore uses);
    `map_batches` is what pamir.index.sync.update uses: every batch a task, at most
    IN_FLIGHT_PER_THREAD per worker thread in flight, results yielded as they finish.
    task: the function a task runs (transform_batch; tests wrap it)."""

    def __init__(self, client, model_dir, fingerprint: str, classes: bool = False, *,
                 cache_dir=None, retries: int = RETRIES, task=transform_batch):
        self.client = client
        self.args = (str(Path(model_dir).resolve()), fingerprint, bool(classes),
                     None if cache_dir is None else str(Path(cache_dir).resolve()))
        self.retries = retries
        self.task = task

    def __call__(self, paths):
        Z, ok, reasons, _ = self._submit(paths).result()
        return Z, ok, reasons

    def _submit(self, paths, **options):
        return submit_batch(self.client, self.task, self.args, paths, retries=self.retries,
                            **options)

    def threads(self) -> int:
        return max(1, sum(self.client.nthreads().values()))

    def map_batches(self, batches: Sequence[Sequence[str]]) -> Iterator[tuple[int, tuple]]:
        from distributed import as_completed  # noqa: PLC0415

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


def _take(it, n):
    out = []
    for _ in range(n):
        try:
            out.append(next(it))
        except StopIteration:
            break
    return out


# ----------------------------------------------------------------------- measurements

def task_overhead(client, n: int = 400) -> dict:
    """Seconds of overhead per task: `n` empty tasks submitted at once (throughput: the
    scheduler's cost per task), and 20 submitted one at a time, each awaited (latency)."""
    client.submit(_nothing, -1, pure=False).result()  # warm
    t0 = time.perf_counter()
    client.gather(client.map(_nothing, range(n), pure=False))
    burst = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for i in range(20):
        client.submit(_nothing, i, pure=False).result()
    latency = (time.perf_counter() - t0) / 20
    return {"per_task_s_burst": burst, "per_task_s_round_trip": latency, "tasks": n}


def batch_for_overhead(overhead_s: float, seconds_per_picture: float,
                       max_share: float = 0.01) -> int:
    """The smallest batch whose per-task overhead is at most `max_share` of its work."""
    return max(1, math.ceil(overhead_s / (max_share * seconds_per_picture)))


__all__ = ["BatchesFailed", "DASK_BATCH", "DaskTransform", "active_cluster", "batch_for_overhead",
           "cluster_chunks", "dask_client", "on_cluster", "once_per_worker", "submit_batch",
           "task_overhead", "transform_batch", "worker_system"]
