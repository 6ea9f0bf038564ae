"""Pictures as Dask tasks: the cluster plumbing of `--workers N | --scheduler ADDRESS`.

    with dask_client(workers=2) as client:                  # a LocalCluster of 2 processes
        with on_cluster(client, DASK_BATCH):                         # pamir fit
            system = fit_system(...)

A batch of pictures is one task, `submit_batch` sends it (paths out, retried RETRIES times),
and a worker builds what its tasks need once (`once_per_worker`: a system, a network, a
colour table) from what the task is given: paths of shared files, settings as dicts, numpy
arrays; never a pickled object. This module sits low (the representations import it) and
imports nothing of pamir's above it.

`pamir fit` (on_cluster): while it is active, the representations' per-picture work runs
its chunks of pictures through `cluster_chunks` (the blocks of pamir.features.extract, the
visterms of pamir.features.pipeline, the CNN's pooled vectors of pamir.features.cnn), the
results back in order, so what the caller sees is what it would have computed itself.

`pamir index` runs its batches through the same plumbing; its job (each worker loads the
system once, the client stays the index's one writer) is pamir.jobs.indexing_dask, above the system.

The batch size: DASK_BATCH, chosen from the per-task overhead measured by
benchmarks/bench_dask.py (benchmarks/results/dask.md) with `batch_for_overhead`.
"""

from __future__ import annotations

import contextvars
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from .extras import optional

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


@contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None):
    """A dask.distributed Client: to the scheduler at `scheduler`, or to a LocalCluster of
    `workers` single-threaded worker processes (closed on exit)."""
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


def _nothing(*_):
    return None


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


__all__ = ["DASK_BATCH", "RETRIES", "active_cluster", "batch_for_overhead", "cluster_chunks",
           "dask_client", "on_cluster", "once_per_worker", "submit_batch", "task_overhead"]
