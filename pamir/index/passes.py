"""Passes of `pamir index` that read the pictures' pixels for facts (pamir.facts.fact): the text
written in them (pamir.facts.ocr) today. A pass runs after the pictures are indexed, so they are
searchable by their look and their files' facts while it reads; it has its own progress.

A pass is resumable and incremental like the rest of the index: it reads the scored pictures
it has not read as they are now (the catalogue's `passes` table records the hash of the bytes
each was read as), and commits each batch's facts with the record that they were read, so a
pass killed half-way goes on from its last commit, and a changed picture is read again. A
picture that cannot be read is recorded too, with a note, and read again only once its bytes
change.

Without a cluster, a pass reads its batches in this process: on `threads` threads (the text
pass: one per core, pamir.features.cnn_engines.streams, as the CNN features run; a reader
such as pamir.facts.ocr.read_texts keeps one set of ONNX Runtime sessions per thread, each on one
intra-op thread, and ONNX Runtime lets go of the GIL while it runs), or in `processes` local
processes (the faces pass). With a Dask client (`pamir index --workers N | --scheduler
ADDRESS`), the batches are read as tasks on the cluster. Either way this process stays the
one writer and commits the batches in order as they come back.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

from ..distributed import submit_batch

#: Pictures read per commit: a few seconds of OCR, so a killed pass loses little.
PASS_BATCH = 32
#: The most local processes a pass reads with (`processes`): each loads its reader's models
#: (the faces pass: 30 MB of weights, about a second to start).
MAX_PROCESSES = 4

#: reader(paths) -> for each path (its Facts, or None where the picture could not be read,
#: and a note): a plain function of paths, so that it can run as a Dask task (and, for a
#: pass read on threads, safe to call from several at once, as pamir.facts.ocr's readers).
Reader = Callable[[Sequence[str]], list]


@dataclass
class PassReport:
    name: str
    read: int = 0      # pictures read in this run
    with_facts: int = 0  # of them, those the pass found facts in
    failed: int = 0    # could not be read (notes say why)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"pass": self.name, "read": self.read, "with_facts": self.with_facts,
                "failed": self.failed, "seconds": round(self.seconds, 2),
                "notes": self.notes[:20]}


def run_pass(index, name: str, kinds: Sequence[str], reader: Reader, *,
             batch_size: int = PASS_BATCH, client=None,
             progress: Callable[[int, int], None] | None = None,
             record: Callable | None = None, processes: int = 1,
             threads: int = 1) -> PassReport:
    """Read every picture of `index` that the pass `name` has not read as it is now, with
    `reader`, writing the facts of `kinds` it finds (see the module docstring);
    progress(done, total) after each commit. record(name, kinds, {id: found}, done) commits
    a batch (default: index.record_pass, for a reader of facts; the faces pass stores
    faces, Index.record_faces). processes: without a client, read batches in this many
    local processes (`local_processes()`; 1: in this one), when there are more batches
    than processes; else on this many threads of this process (`threads`; 1: one batch
    after another)."""
    record = record or index.record_pass
    started = time.perf_counter()
    report = PassReport(name)
    todo = index.pass_todo(name)
    batches = [todo[i:i + batch_size] for i in range(0, len(todo), batch_size)]
    pool = _Processes(processes) if client is None and 1 < processes < len(batches) else None
    try:
        _run(index, name, kinds, reader, batches, client or pool, record, report, progress,
             len(todo), threads)
    finally:
        if pool is not None:
            pool.close()
    report.seconds = time.perf_counter() - started
    return report


def _run(index, name, kinds, reader, batches, client, record, report, progress, total,
         threads):
    for batch, results in _read(batches, reader, client, threads):
        record_batch(record, name, kinds, batch, results, report)
        if progress is not None:
            progress(report.read, total)


def record_batch(record: Callable, name: str, kinds: Sequence[str], batch: Sequence[tuple],
                 results: Sequence[tuple], report: PassReport) -> None:
    """Commit a batch's results, (found, note) for each (picture id, path, hash), with
    `record`, and count them in `report` (the reading stage's streamed passes too)."""
    facts, done = {}, []
    for (picture_id, path, digest), (found, note) in zip(batch, results):
        if found is None:
            report.failed += 1
            report.notes.append(note or f"{path}: could not be read")
        report.with_facts += bool(found)
        facts[picture_id] = found or []
        done.append((picture_id, digest))
    record(name, kinds, facts, done)
    report.read += len(batch)


def local_processes() -> int:
    """The processes a pass reads with on this machine: its cores (those this process may
    use), at most MAX_PROCESSES."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_PROCESSES))


class _Processes:
    """Local processes that read a pass's batches, as a Dask client's workers would
    (`_read`): started afresh ("spawn"), so that they inherit none of this process's
    threads (torch's, BLAS's). A process that dies (out of memory) leaves its batch, and
    the rest, to be read in this process."""

    def __init__(self, n: int):
        self.n = n
        self.broken = False
        self._pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"))

    def scheduler_info(self) -> dict:
        return {"workers": dict.fromkeys(range(self.n))}

    def submit(self, fn, *args, pure: bool = False, **dask_options):  # retries: Dask's
        if not self.broken:
            try:
                return _Fallback(self, self._pool.submit(fn, *args), fn, args)
            except BrokenProcessPool:
                self.broken = True
        return _Fallback(self, None, fn, args)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class _Fallback:
    """A batch's future in a local process, read in this process when that one died."""

    def __init__(self, pool: _Processes, future, fn, args):
        self.pool, self.future, self.fn, self.args = pool, future, fn, args

    def result(self):
        if self.future is not None:
            try:
                return self.future.result()
            except BrokenProcessPool:
                self.pool.broken = True
        return self.fn(*self.args)


def _read(batches: list[list[tuple]], reader: Reader, client, threads: int = 1
          ) -> Iterator[tuple[list[tuple], list]]:
    """(batch, its results) in the batches' order: as tasks on a Dask client (or local
    processes, `_Processes`), or on `threads` threads here (one after another for one thread
    or one batch), a few batches in flight at a time so that results come back while others
    are read."""
    def paths(batch):
        return [p for _, p, _ in batch]

    if client is not None:
        ahead = max(2, 2 * len(client.scheduler_info().get("workers", {})))
        # a failed batch is tried again (RETRIES), as an index's batches are
        yield from _in_order(batches, lambda b: submit_batch(client, reader, (), paths(b)),
                             ahead)
        return
    if threads <= 1 or len(batches) <= 1:
        for batch in batches:
            yield batch, reader(paths(batch))
        return
    pool = ThreadPoolExecutor(threads, thread_name_prefix="pamir-pass")
    try:
        yield from _in_order(batches, lambda b: pool.submit(reader, paths(b)), 2 * threads)
    finally:
        # interrupted (Ctrl-C, a reader's error): batches not started are dropped, those
        # running end on their own; their pictures were not recorded, the next run reads them
        pool.shutdown(wait=False, cancel_futures=True)


def _in_order(batches, submit, ahead: int):
    """(batch, submit(batch)'s result) in order, at most `ahead` submitted and not yet
    yielded."""
    pending: list = []
    for batch in batches:
        pending.append((batch, submit(batch)))
        if len(pending) >= ahead:
            done, future = pending.pop(0)
            yield done, future.result()
    for done, future in pending:
        yield done, future.result()


__all__ = ["MAX_PROCESSES", "PASS_BATCH", "PassReport", "local_processes", "record_batch",
           "run_pass"]
