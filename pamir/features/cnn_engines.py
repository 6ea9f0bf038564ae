"""What runs the CNN trunk (pamir.features.cnn_torch, exported to ONNX) on batches of pictures.

    engine = OnnxEngine("lite0", threads=1)           # or cnn_torch.TorchEngine, the reference
    pooled = engine(pixels)                           # (n, H, W, 3) uint8 -> (n, 5 x 1280)
    with ShapeBatches(network, batch_size, done, streams()) as batches:
        for item, pixels in read_ahead(...):          # pictures decoded by a thread pool
            batches.add(item, pixels)                 # batched by shape, run on `streams`
        batches.finish()                              # done(items, rows) per finished batch

Engines: "onnx" exports the trunk with its pooling to ONNX once per model + weights + export
code (dynamic batch, height and width), cached under config.default_cache_dir() / "onnx",
and runs it with ONNX Runtime; "torch" (pamir.features.cnn_torch.TorchEngine, the [cnn]
extra's torch) runs the same module eagerly and is the reference.
Both give the same pooled vectors within ~1e-4, so the feature cache does not depend on the
engine. Either way pictures are decoded by a thread pool while the network runs, and one
batch per core runs at a time, each on one thread (`streams` says why).
benchmarks/results/cnn_speed.md has the speeds.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import numpy as np

from .cnn_int8 import int8_graph
from .cnn_network import (
    cache_bytes,
    cpu_session,
    export_onnx,
    onnx_path,
    swap_left_right,
)


def _torch_threads() -> int | None:
    """torch's thread count in this thread, if torch is imported."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def streams() -> int:
    """How many batches run side by side, each on cores // streams threads: one per core.

    Measured end to end on this 2-core machine (lite0, Corel at 336x224, ONNX Runtime): one
    batch at a time on 2 intra-op threads gave 61 pictures/s, two at a time on one thread
    each 73-92, when it was lightly loaded; while another process kept one core busy, 17-20
    against 30-49 (each operator of a 2-thread run waits at a barrier for the thread that
    was descheduled). Eager torch's OpenMP threads behave the same (36-38 against 39-56)."""
    return STREAMS or cores()


#: None: one stream per core (see `streams`).
STREAMS: int | None = None


def threads_per_stream() -> int:
    return max(1, cores() // streams())


# ------------------------------------------------------------------------------ engines

_EXPORT_LOCK = threading.Lock()


class OnnxEngine:
    """The exported trunk run by ONNX Runtime on the CPU; one session, safe to call from
    several threads at once, each call on `threads` intra-op threads. precision "int8": the
    quantized trunk (pamir.features.cnn_int8), made the first time on this machine."""

    name = "onnx"

    def __init__(self, model: str, threads: int = 1, precision: str = "fp32"):
        self.threads, self.precision = threads, precision
        # the [cnn] extra
        import onnxruntime  # noqa: F401, PLC0415 - missing: say so before any export
        path = onnx_path(model)
        with _EXPORT_LOCK:
            if precision == "int8":
                t0 = time.perf_counter()
                source: str | bytes = int8_graph(model)
                self.export_seconds = time.perf_counter() - t0
            elif path.is_file():
                source = str(path)
                self.export_seconds = 0.0
            else:
                t0 = time.perf_counter()
                source = export_onnx(model)
                self.export_seconds = time.perf_counter() - t0
                cache_bytes(path, source)  # a read-only cache: run it from memory
        self.session = cpu_session(source, threads)

    def __call__(self, pixels: np.ndarray) -> np.ndarray:
        return self.session.run(None, {"pixels": pixels})[0]


#: The engines' names, as CNNSettings.engine takes them: "torch" is the reference,
#: pamir.features.cnn_torch.TorchEngine (the trunk run eagerly; the [cnn] extra's torch).
ENGINES = (OnnxEngine.name, "torch")


@contextmanager
def torch_threads_kept(engine: Callable[[], object]):
    """torch's thread count in this thread as it was before the block, put back after it
    when `engine()` (the engine that ran, if any) is a TorchEngine, whose calls set it."""
    before = _torch_threads()
    try:
        yield
    finally:
        ran = engine()
        if getattr(ran, "name", None) == "torch":  # cnn_torch.TorchEngine
            ran.set_threads(before or ran.threads_before)


def pooled_batch(engine, pixels: np.ndarray, flip: bool, dim: int) -> np.ndarray:
    """(n, H, W, 3) uint8 of one shape -> (n, dim) pooled float32; with `flip`, averaged
    with the mirrored pictures' vectors (their left and right cells swapped back)."""
    pooled = engine(pixels)
    if flip:
        mirrored = engine(np.ascontiguousarray(pixels[:, :, ::-1]))
        pooled = (pooled + swap_left_right(mirrored)) / 2
    return np.ascontiguousarray(pooled[:, :dim], dtype=np.float32)


# ------------------------------------------------------------------------------ batching

def read_ahead(items: Iterable, load: Callable, threads: int, window: int) -> Iterator[tuple]:
    """(item, load(item)) in the items' order, `threads` threads loading up to `window` items
    ahead of the one given, so that decoding goes on while the caller runs the network.
    Close it (contextlib.closing) to wait for the loads in flight when leaving early."""
    with ThreadPoolExecutor(threads) as pool:
        todo = iter(items)
        pending: deque = deque()

        def top_up():
            while len(pending) < window and (item := next(todo, None)) is not None:
                pending.append((item, pool.submit(load, item)))

        top_up()
        while pending:
            item, future = pending.popleft()
            top_up()
            yield item, future.result()


class ShapeBatches:
    """Pictures batched by resized shape, the batches run by `n_streams` threads.

    Corel has two shapes (336x224 and 224x336), a photo folder a handful. Padding to a
    common size would let a picture's vector depend on its batch neighbours (the
    convolutions see the padding) and so on the order of a run, which the feature cache
    cannot allow; cropping would drop part of the picture and resizing would distort it.
    Rare shapes run in small batches, which on a CPU cost about the same per picture as
    large ones.

    network(): called in the caller's thread when the first batch is ready (a run served
    wholly from the cache builds no network), gives the function a stream runs on a batch:
    (n, H, W, 3) uint8 -> (n, d). done(items, rows): called in the caller's thread with each
    finished batch, in the order the batches started.
    """

    def __init__(self, network: Callable[[], Callable], batch_size: int,
                 done: Callable[[list, np.ndarray], None], n_streams: int):
        self.network, self.run = network, None
        self.batch_size, self.done, self.n_streams = batch_size, done, n_streams
        self.buckets: dict[tuple, list] = {}
        self.running: deque = deque()  # (items, future) of the batches in the network
        self.streams = ThreadPoolExecutor(n_streams)

    def __enter__(self) -> "ShapeBatches":
        return self

    def __exit__(self, *exc) -> None:
        self.streams.shutdown()

    def add(self, item, pixels: np.ndarray) -> None:
        """Queue one picture; a batch starts when its shape has batch_size pictures, or when
        more than two batches' worth wait in many shapes (then the largest starts)."""
        bucket = self.buckets.setdefault(pixels.shape, [])
        bucket.append((item, pixels))
        if len(bucket) >= self.batch_size:
            self._start(pixels.shape)
        elif sum(len(b) for b in self.buckets.values()) > 2 * self.batch_size:
            self._start(max(self.buckets, key=lambda k: len(self.buckets[k])))

    def _start(self, shape: tuple) -> None:
        batch = self.buckets.pop(shape)
        if self.run is None:
            self.run = self.network()
        future = self.streams.submit(self.run, np.stack([pixels for _, pixels in batch]))
        self.running.append(([item for item, _ in batch], future))
        self.collect(at_most=self.n_streams + 1)  # one batch waits, ready, for a free stream

    def collect(self, at_most: int | None = None) -> None:
        """Hand the finished batches to `done`, waiting until at most `at_most` are left in
        the network (None: no waiting)."""
        while self.running and (self.running[0][1].done() or
                                (at_most is not None and len(self.running) > at_most)):
            items, future = self.running.popleft()
            self.done(items, future.result())

    def finish(self) -> None:
        """Run the pictures still queued and wait for every batch."""
        for shape in list(self.buckets):
            self._start(shape)
        self.collect(at_most=0)


__all__ = ["ENGINES", "STREAMS", "OnnxEngine", "ShapeBatches", "cores",
           "pooled_batch", "read_ahead", "streams", "threads_per_stream", "torch_threads_kept"]
