"""Passes of `pamir index` that read the pictures' pixels for facts (pamir.facts): the text
written in them (pamir.ocr) today. A pass runs after the pictures are indexed, so they are
searchable by their look and their files' facts while it reads; it has its own progress.

A pass is resumable and incremental like the rest of the index: it reads the scored pictures
it has not read as they are now (the catalogue's `passes` table records the hash of the bytes
each was read as), and commits each batch's facts with the record that they were read, so a
pass killed half-way goes on from its last commit, and a changed picture is read again. A
picture that cannot be read is recorded too, with a note, and read again only once its bytes
change.

Without a cluster the batches are read by one thread per core of this process
(pamir.features.cnn_engines.streams, as the CNN features run: a reader such as
pamir.ocr.read_texts keeps one set of ONNX Runtime sessions per thread, each on one intra-op
thread, and ONNX Runtime lets go of the GIL while it runs). With a Dask client (`pamir index
--workers N | --scheduler ADDRESS`), the batches are read as tasks on the cluster. Either way
this process stays the one writer and commits the batches in order as they come back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

#: Pictures read per commit: a few seconds of OCR, so a killed pass loses little.
PASS_BATCH = 32

#: reader(paths) -> for each path (its Facts, or None where the picture could not be read,
#: and a note): a plain function of paths, so that it can run as a Dask task, and safe to
#: call from several threads at once (each with its own state, as pamir.ocr's readers).
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
             batch_size: int = PASS_BATCH, client=None, threads: int | None = None,
             progress: Callable[[int, int], None] | None = None) -> PassReport:
    """Read every picture of `index` that the pass `name` has not read as it is now, with
    `reader`, writing the facts of `kinds` it finds (see the module docstring): as tasks
    on a Dask `client`, else on `threads` threads of this process (default: one per core);
    progress(done, total) after each commit."""
    started = time.perf_counter()
    report = PassReport(name)
    todo = index.pass_todo(name)
    batches = [todo[i:i + batch_size] for i in range(0, len(todo), batch_size)]
    if client is None and threads is None:
        from ..features.cnn_engines import streams  # noqa: PLC0415

        threads = streams()
    for batch, results in _read(batches, reader, client, threads or 1):
        facts, done = {}, []
        for (picture_id, path, digest), (found, note) in zip(batch, results):
            if found is None:
                report.failed += 1
                report.notes.append(note or f"{path}: could not be read")
            report.with_facts += bool(found)
            facts[picture_id] = found or []
            done.append((picture_id, digest))
        index.record_pass(name, kinds, facts, done)
        report.read += len(batch)
        if progress is not None:
            progress(report.read, len(todo))
    report.seconds = time.perf_counter() - started
    return report


def _read(batches: list[list[tuple]], reader: Reader, client, threads: int
          ) -> Iterator[tuple[list[tuple], list]]:
    """(batch, its results) in the batches' order: as tasks on a Dask client, or on
    `threads` threads here (one after another for one thread or one batch), a few batches
    in flight at a time so that results come back while others are read."""
    def paths(batch):
        return [p for _, p, _ in batch]

    if client is not None:
        from ..distributed import submit_batch  # noqa: PLC0415

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


__all__ = ["PASS_BATCH", "PassReport", "run_pass"]
