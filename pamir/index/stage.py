"""The reading stage of `pamir index`: each new or changed picture decoded once, and every
pass fed from that one decode.

    stage = ReadingStage(index, transform, needs, streamed=[text, faces], thumbnails=folder)
    index.update(folders, stage)      # the stage is the update's transform
    reports = stage.finish()          # the streamed passes drained and committed

The stage stands where the index's writer calls its transform (applying pamir.index.sync's
plan). For each small chunk of a batch it decodes the pictures
(pamir.features.rasters.read_item, at the largest raster that every picture needs: the look,
the thumbnails, each streamed pass's first look; on `threads` threads: Pillow and libheif
let go of the GIL), shares the rasters with the system's transform by content hash (the CNN
views and the visterms take their input from them), writes the thumbnails, and hands each
streamed pass (text, faces, the copies' looks) its reduced raster and the picture's closer
look (`Item.detail`), which a pass asks for only where its first look found something
(the text's lines, the faces' cues).

"Searchable first": a streamed pass reads on threads of its own (`readers`) behind the look; its
results are committed by this process (the one writer) once their pictures are (at the next
batch, or at `finish`): a picture answers searches by its look and its files' facts before
its text and faces are read. Why a stream rather than a cache of rasters on disk: the passes
then cost no file written and read back, and memory stays bounded by the pixels queued
(QUEUED_PIXELS per pass: about 70 MB of rasters, 35 pictures of 12 MP read at 1,008 pixels,
fewer where a HEIC keeps its closer look); when a pass lags that far, the look waits for it,
which on a machine of few cores costs nothing, since both share the same cores.

A pass run on its own later (a new OCR model, faces asked for after) reads the pictures the
stream did not with pamir.index.passes.run_pass, which decodes for itself only.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..features.thumbnails import INDEXED_SIZES, write_from_raster
from ..features.rasters import (HEIF_THREADS, SLACK, Item, Need, heif_threads, read_item,
                                sharing)
from .passes import PassReport, record_batch

#: Pictures decoded, transformed and handed on together: few, so that the rasters held at
#: once stay few (a 12-MP HEIC's is 36 MB while it is decoded).
CHUNK = 8
#: Pixels (of the rasters and kept closer looks) waiting for a streamed pass, at most: bounds
#: the memory the stream holds (3 bytes a pixel); one chunk is always let through.
QUEUED_PIXELS = 24_000_000
#: Pictures are read ahead (a JPEG decoded at its closer look's scale, 1/2 for a 12-MP photo,
#: and reduced for the raster every pass reads) while at least this share of those read
#: lately asked for their closer look (faces' cues, small lines of text): a 12-MP JPEG's 1/2
#: decode and reduction cost 79 ms, its 1/4 decode 57, a second decode at 1/2 78 with its
#: bytes read and hashed again (results/profile_passes.md), so the second decode pays only
#: below (79 - 57) / 78, 0.28. On Corel-made camera photos (landscapes and animals) 0.55-0.76
#: asked (sand, fur and wood look like skin or lines): they are read ahead; a roll where few
#: do is read at the smaller size.
AHEAD_SHARE = 0.3
#: The pictures read lately: the share decays by 1/AHEAD_WINDOW a picture.
AHEAD_WINDOW = 64


@dataclass
class StreamedPass:
    """A pass fed by the reading stage: its name and kinds (as pamir.index.passes.run_pass
    takes them), `read(inputs)` -> (found, note) for each input, `record` (the index's
    record_pass or record_faces), the longest raster side it reads every picture at (None:
    full size; met within SLACK), `inputs(item, rgb)`: what `read` takes for one picture from
    its reduced raster (item.detail gives its closer look), `detail`: the longest side
    of its closer look (None: it looks at no picture closer), `readers`: the threads
    reading its chunks where the stage reads on more than one, and `prepare()`: what loads
    its models, run by its readers when their first chunk comes (the look goes on
    meanwhile: the text reader's took about a second of every `pamir index` before the
    first picture was decoded, even where none was new); where it fails, the pass reads
    nothing streamed and the pass run alone after says why."""

    name: str
    kinds: tuple[str, ...]
    read: Callable[[list], list]
    record: Callable
    side: int | None
    inputs: Callable[[Item, np.ndarray], object]
    detail: int | None = None
    readers: int = 1
    prepare: Callable[[], object] | None = None

    @property
    def need(self) -> Need:
        return Need(self.name, long=self.side, slack=SLACK)


class _Stream:
    """One streamed pass: `readers` threads reading the chunks put to it, each a chunk at a
    time, their results kept for the writer to commit (`ready`, in any order: the writer
    matches them to their pictures)."""

    def __init__(self, spec: StreamedPass, readers: int = 1):
        self.spec = spec
        self.report = PassReport(spec.name)
        self.error: BaseException | None = None
        self.dropping = False  # the job stopped: chunks not read yet are left to the next run
        self._queue: queue.Queue = queue.Queue()
        self._queued = 0  # pixels queued (QUEUED_PIXELS)
        self._room = threading.Condition()
        self._results: list[tuple[list[Item], list]] = []
        self._lock = threading.Lock()
        self._prepare_first = spec.prepare  # None once a reader has run it
        self._preparing = threading.Lock()  # held by the reader loading the pass's models
        self._threads = [threading.Thread(target=self._run, daemon=True,
                                          name=f"pamir-{spec.name.split()[0]}-{i}")
                         for i in range(max(1, readers))]
        for thread in self._threads:
            thread.start()

    def put(self, items: list[Item]) -> None:
        if self.error is None and items:
            # the item without its frames: the queue holds the pass's reduced rasters (and a
            # format decoded whole, its kept closer look) only
            chunk = []
            for it in items:
                kept, rgb = it.for_pass(self.spec.side, self.spec.detail)
                chunk.append((kept, self.spec.inputs(kept, rgb), _pixels(rgb, kept)))
            # a part for each reader: the chunk is read on every reader at once (the last
            # chunk of an update, read after every picture is decoded, no longer on one core)
            n = min(len(self._threads), len(chunk))
            for k in range(n):
                self._put(chunk[k * len(chunk) // n:(k + 1) * len(chunk) // n])

    def _put(self, part: list) -> None:
        pixels = sum(n for _, _, n in part)
        with self._room:  # waits while the pass is QUEUED_PIXELS behind
            self._room.wait_for(lambda: self._queued == 0
                                or self._queued + pixels <= QUEUED_PIXELS)
            self._queued += pixels
        self._queue.put(part)

    def _run(self) -> None:
        while (chunk := self._queue.get()) is not None:
            try:
                self._prepare()  # at the first chunk: an update with nothing new loads nothing
                self._read(chunk)
            finally:
                with self._room:
                    self._queued -= sum(n for _, _, n in chunk)
                    self._room.notify_all()

    def _prepare(self) -> None:
        """The pass's models loaded once, by the first of its readers (the others wait)."""
        with self._preparing:
            if self._prepare_first is not None and self.error is None:
                try:
                    self._prepare_first()
                except BaseException as e:  # noqa: BLE001 - said by the pass run alone after
                    self.error = e
            self._prepare_first = None

    def _read(self, chunk: list) -> None:
        if self.error is not None or self.dropping:
            return  # a reader that failed for every file, or the job stopped
        started = time.perf_counter()
        try:
            results = self.spec.read([inputs for _, inputs, _ in chunk])
        except BaseException as e:  # noqa: BLE001 - MissingExtra and the like: said later
            self.error = e
            return
        self.report.seconds += time.perf_counter() - started
        with self._lock:  # the items without their closer looks: none is kept till commit
            self._results.append(([Item(it.path, it.digest, it.size) for it, _, _ in chunk],
                                  results))

    def ready(self) -> list[tuple[list[Item], list]]:
        with self._lock:
            out, self._results = self._results, []
        return out

    def keep(self, pending: list) -> None:
        """Results whose pictures are not committed yet: offered again next time."""
        with self._lock:
            self._results[:0] = pending

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()


class ReadingStage:
    """An index transform (pamir.index.sync.Transform) that reads each picture once for the
    look, the thumbnails and the streamed passes (see the module's doc). on_read(name, n):
    n more pictures of the pass `name` committed."""

    def __init__(self, index, transform, needs: Sequence[Need], *,
                 streamed: Sequence[StreamedPass] = (), thumbnails: Path | None = None,
                 threads: int = 2, on_read: Callable[[str, int], None] | None = None):
        self.index, self.transform = index, transform
        self.needs = [*needs, *(s.need for s in streamed)]
        self.detail = max((s.detail for s in streamed if s.detail), default=None)
        if thumbnails is not None:
            self.needs.append(Need("thumbnails", long=max(INDEXED_SIZES)))
        self.thumbnails = thumbnails
        self.on_read = on_read
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="pamir-read")
        # a picture per thread: libheif's own threads would only contend with them
        self._heif = heif_threads(HEIF_THREADS) if threads > 1 else None
        self._streams = [_Stream(s, s.readers if threads > 1 else 1) for s in streamed]
        self._share = [0.0, 0.0]  # decayed counts: pictures read, pictures that asked
        self._share_lock = threading.Lock()
        self._decoding: dict[str, Future] = {}  # path: its item, decoded ahead (`prefetch`)

    @property
    def streamed(self) -> list[str]:
        """The names of the passes the stage streams."""
        return [s.spec.name for s in self._streams]

    def prefetch(self, paths: Sequence[str]) -> None:
        """Start decoding the first chunk of a batch the writer is about to hand over, while
        it reads the batch's metadata and hashes on its own thread (pamir.index.sync.
        read_batch: the files' EXIF and hashes, and on a photo roll's first batch the places'
        gazetteer, about a second): the decoders would otherwise wait for it. A picture
        decoded ahead but not handed over (its file unreadable) is dropped at the next call."""
        ahead = self.reading_ahead()
        for path in paths[:CHUNK]:
            if path not in self._decoding:
                self._decoding[path] = self._pool.submit(self._read, path, ahead)

    def _read(self, path: str, ahead: bool) -> Item:
        return read_item(path, self.needs, self.detail, ahead=ahead, asked=self._asked)

    def __call__(self, paths: Sequence[str]) -> tuple:
        self.commit_ready()
        for path in self._decoding.keys() - set(paths):
            del self._decoding[path]  # not handed over: its raster is not kept
        Z, ok, reasons = [], [], []
        for start in range(0, len(paths), CHUNK):
            chunk = list(paths[start:start + CHUNK])
            ahead = self.reading_ahead()
            decoding = [self._decoding.pop(p, None) or self._pool.submit(self._read, p, ahead)
                        for p in chunk]
            items = [f.result() for f in decoding]
            self._count(read=len(chunk))
            with sharing(items):
                z, o, r = self.transform(chunk)
            o = np.asarray(o, bool)
            good = [it for it, k in zip(items, o) if k and it.ok]
            if self.thumbnails is not None:
                list(self._pool.map(self._thumbnail, good))
            for stream in self._streams:
                stream.put(good)
            Z.append(np.asarray(z, np.float32))
            ok.append(o)
            reasons += list(r)
        if not Z:
            return np.zeros((0, 0), np.float32), np.zeros(0, bool), []
        return np.vstack(Z), np.concatenate(ok), reasons

    def reading_ahead(self) -> bool:
        """Whether pictures are read ahead now (AHEAD_SHARE)."""
        with self._share_lock:
            read, asked = self._share
        return bool(self.detail) and read > 0 and asked >= AHEAD_SHARE * read

    def _count(self, read: int = 0, asked: int = 0) -> None:
        keep = (1 - 1 / AHEAD_WINDOW) ** read
        with self._share_lock:
            self._share = [self._share[0] * keep + read, self._share[1] * keep + asked]

    def _asked(self) -> None:
        self._count(asked=1)

    def look(self, paths: Sequence[str]) -> tuple:
        """The system's transform alone, on files the stage does not read itself: a video's
        frames (pamir.index.videos), whose text and faces the passes read after."""
        return self.transform(paths)

    def _thumbnail(self, item: Item) -> None:
        try:
            write_from_raster(self.thumbnails, item.digest, item.rgb)
        except OSError:
            pass  # a cache: the server makes it on request

    def commit_ready(self) -> None:
        """Commit the streamed passes' results whose pictures the index holds (as read)."""
        for stream in self._streams:
            pending = []
            for items, results in stream.ready():
                batch, found, later = [], [], []
                for it, res in zip(items, results):
                    picture_id = self.index.id_of_path(it.path)
                    p = None if picture_id is None else self.index.picture(picture_id)
                    if p is None:
                        later.append((it, res))
                    elif p.hash == it.digest:
                        batch.append((picture_id, it.path, it.digest))
                        found.append(res)
                if batch:
                    record_batch(stream.spec.record, stream.spec.name, stream.spec.kinds,
                                 batch, found, stream.report)
                    if self.on_read is not None:
                        self.on_read(stream.spec.name, len(batch))
                if later:
                    pending.append(([it for it, _ in later], [r for _, r in later]))
            stream.keep(pending)

    def finish(self, abandon: bool = False) -> dict[str, PassReport]:
        """Wait for the streamed passes, commit what they read; {name: report}. A reader's
        error (MissingExtra) is raised by the pass run alone after (`errors`). abandon (the
        job interrupted): the chunks not being read are dropped, not waited for; the next
        run reads their pictures."""
        for stream in self._streams:
            stream.dropping = abandon
        for stream in self._streams:
            stream.close()
        self.commit_ready()
        self._decoding.clear()
        self._pool.shutdown(wait=True)
        if self._heif is not None:
            heif_threads(self._heif)
        return {s.spec.name: s.report for s in self._streams}

    def errors(self) -> dict[str, BaseException]:
        return {s.spec.name: s.error for s in self._streams if s.error is not None}


def _pixels(rgb: np.ndarray, item: Item) -> int:
    """What a queued picture holds: its reduced raster, or the larger raster its closer look
    keeps (the raster read, a closer look read ahead or kept from a whole decode)."""
    return max(rgb.shape[0] * rgb.shape[1], item.closer.pixels if item.closer else 0)


__all__ = ["CHUNK", "QUEUED_PIXELS", "ReadingStage", "StreamedPass"]
