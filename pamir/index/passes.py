"""Passes of `pamir index` that read the pictures' pixels for facts (pamir.facts): the text
written in them (pamir.ocr) today. A pass runs after the pictures are indexed, so they are
searchable by their look and their files' facts while it reads; it has its own progress.

A pass is resumable and incremental like the rest of the index: it reads the scored pictures
it has not read as they are now (the catalogue's `passes` table records the hash of the bytes
each was read as), and commits each batch's facts with the record that they were read, so a
pass killed half-way goes on from its last commit, and a changed picture is read again. A
picture that cannot be read is recorded too, with a note, and read again only once its bytes
change.

With a Dask client (`pamir index --workers N | --scheduler ADDRESS`), the batches are read as
tasks on the cluster; this process stays the one writer and commits them as they come back.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: Pictures read per commit: a few seconds of OCR, so a killed pass loses little.
PASS_BATCH = 32
#: The most local processes a pass reads with (`processes`): each loads its reader's models
#: (the faces pass: 30 MB of weights, about a second to start).
MAX_PROCESSES = 4

#: reader(paths) -> for each path (its Facts, or None where the picture could not be read,
#: and a note): a plain function of paths, so that it can run as a Dask task.
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
             record: Callable | None = None, processes: int = 1) -> PassReport:
    """Read every picture of `index` that the pass `name` has not read as it is now, with
    `reader`, writing the facts of `kinds` it finds (see the module docstring);
    progress(done, total) after each commit. record(name, kinds, {id: found}, done) commits
    a batch (default: index.record_pass, for a reader of facts; the faces pass stores
    faces, Index.record_faces). processes: without a client, read batches in this many
    local processes (`local_processes()`; 1: in this one), when there are more batches
    than processes."""
    record = record or index.record_pass
    started = time.perf_counter()
    report = PassReport(name)
    todo = index.pass_todo(name)
    batches = [todo[i:i + batch_size] for i in range(0, len(todo), batch_size)]
    pool = _Processes(processes) if client is None and 1 < processes < len(batches) else None
    try:
        _run(index, name, kinds, reader, batches, client or pool, record, report, progress,
             len(todo))
    finally:
        if pool is not None:
            pool.close()
    report.seconds = time.perf_counter() - started
    return report


def _run(index, name, kinds, reader, batches, client, record, report, progress, total):
    for batch, results in _read(batches, reader, client):
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
        if progress is not None:
            progress(report.read, total)


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

    def submit(self, fn, *args, pure: bool = False):
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


def _read(batches: list[list[tuple]], reader: Reader, client):
    """(batch, its results) in order: read here one after another, or as tasks on a Dask
    client, a few in flight at a time so that results come back while others are read."""
    if client is None:
        for batch in batches:
            yield batch, reader([path for _, path, _ in batch])
        return
    ahead = max(2, 2 * len(client.scheduler_info().get("workers", {})))
    futures = []
    for i, batch in enumerate(batches):
        futures.append((batch, client.submit(reader, [p for _, p, _ in batch], pure=False)))
        if len(futures) >= ahead or i == len(batches) - 1:
            while futures and (len(futures) >= ahead or i == len(batches) - 1):
                done_batch, future = futures.pop(0)
                yield done_batch, future.result()


__all__ = ["MAX_PROCESSES", "PASS_BATCH", "PassReport", "local_processes", "run_pass"]
