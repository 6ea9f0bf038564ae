"""Block descriptors for many pictures: parallel, cached, streaming, robust to bad files.

Work is spread over threads rather than processes: the per-picture kernel is compiled with
the GIL released (numba nogil), and Pillow, file reads and hashing release it too, so two
threads keep two cores busy without pickling pictures between processes or copying the
16 MiB colour table into each worker.
"""

from __future__ import annotations

import hashlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
from ..distributed import active_cluster, cluster_chunks, once_per_worker
from ..progress import Bar, report
from .ragged import Ragged
from .blocks import block_histograms
from .cache import BlockCache
from .colour import ColourCodebook
from .images import ImageError, content_hash, read_bytes
from .rasters import rgb_for
from .settings import JOBS, FeatureSettings

log = logging.getLogger(__name__)

#: Pictures handed to the workers at a time; bounds the memory held for results in flight.
CHUNK_PICTURES = 1024


@dataclass
class BlockSet(Ragged):
    """Block descriptors of n pictures, concatenated (a Ragged array, pamir.features.ragged).

    descriptors: (n_blocks_total, dim) float32 block histograms (counts, or log(1 + count)
        when `log_counts`); picture i's blocks are descriptors[offsets[i]:offsets[i + 1]].
    offsets: (n + 1,) int64; a picture that could not be read has no blocks.
    ok: (n,) bool, False for pictures skipped or failed.
    failures: (path, reason) of each picture not ok.
    """

    ok: np.ndarray
    failures: list[tuple[str, str]] = field(default_factory=list)
    log_counts: bool = False
    n_extracted: int = 0
    n_cached: int = 0
    n_skipped: int = 0
    n_failed: int = 0
    seconds: float = 0.0

    def counts(self) -> np.ndarray:
        """The descriptors as counts, whatever `log_counts` says."""
        if not self.log_counts:
            return self.descriptors
        return np.rint(np.expm1(self.descriptors)).astype(np.float32)

    def summary(self) -> dict:
        n = len(self)
        return {"pictures": n, "done": self.n_extracted + self.n_cached,
                "extracted": self.n_extracted, "cached": self.n_cached,
                "skipped": self.n_skipped, "failed": self.n_failed,
                "blocks": int(self.offsets[-1]), "seconds": round(self.seconds, 3),
                "pictures_per_second": round(n / self.seconds, 1) if self.seconds else None}

    def take(self, idx) -> "BlockSet":
        """The pictures `idx`, in that order (their blocks, ok flags and failures)."""
        idx = np.asarray(idx, dtype=np.int64)
        return BlockSet(*self.take_offsets(idx), np.asarray(self.ok)[idx],
                        log_counts=self.log_counts)

    @classmethod
    def concatenate(cls, parts: Sequence["BlockSet"], dim: int) -> "BlockSet":
        if not parts:
            return cls(np.zeros((0, dim), np.float32), np.zeros(1, np.int64), np.zeros(0, bool))
        offsets = [np.zeros(1, np.int64)]
        base = 0
        for p in parts:
            offsets.append(p.offsets[1:] + base)
            base += int(p.offsets[-1])
        return cls(
            np.concatenate([p.descriptors for p in parts]),
            np.concatenate(offsets),
            np.concatenate([p.ok for p in parts]),
            [f for p in parts for f in p.failures],
            parts[0].log_counts,
            *(sum(getattr(p, a) for p in parts)
              for a in ("n_extracted", "n_cached", "n_skipped", "n_failed", "seconds")),
        )


# ------------------------------------------------------------------ on a Dask cluster
# `pamir fit --workers N | --scheduler ADDRESS`: while pamir.distributed.on_cluster is active,
# iter_blocks (and VisualPipeline's codebook assignment) run their chunks of pictures as
# Dask tasks. Workers get settings and codebooks as plain dicts and numpy arrays (no pickled
# objects), results come back in order, so what the caller sees is what it would have
# computed itself.

def worker_colour_codebook(arrays: dict) -> ColourCodebook:
    """The colour codebook of these arrays, its lookup table built once per worker process."""
    key = hashlib.blake2b(np.ascontiguousarray(arrays["colour_centres"]).tobytes(),
                          digest_size=8).hexdigest()
    return once_per_worker(("colour codebook", key), lambda: _with_lut(arrays))


def _with_lut(arrays: dict) -> ColourCodebook:
    codebook = ColourCodebook.from_arrays(arrays)
    codebook.lut  # noqa: B018  (built here, once)
    return codebook


def blocks_task(settings: dict, colours: dict, cache_dir, paths) -> list:
    """_picture for each path, on a worker (one thread: a worker runs a task per thread)."""
    s = FeatureSettings.from_dict(settings)
    codebook = worker_colour_codebook(colours)
    cache = BlockCache(cache_dir, s, codebook) if cache_dir else None
    return [_picture(p, s, codebook, cache) for p in paths]


def _picture(path, settings: FeatureSettings, codebook: ColourCodebook, cache: BlockCache | None):
    """(counts or None, status, reason) for one picture; never raises."""
    try:
        data = read_bytes(path)
        digest = content_hash(data)
        if cache is not None and (hit := cache.get(digest)) is not None:
            return hit, "cached", ""
        counts, _ = block_histograms(rgb_for(data, digest, settings.short_side), settings,
                                     codebook)
        if cache is not None:
            try:
                cache.put(digest, counts)
            except OSError as e:
                # the counts are good: a cache that cannot take them costs a recomputation
                # next time, not the picture
                log.warning("feature cache: could not write %s (%s)", path, e)
        return counts, "extracted", ""
    except ImageError as e:
        return None, "skipped", str(e)
    except Exception as e:  # a bug or an exhausted resource: count it, keep going
        return None, "failed", f"{type(e).__name__}: {e}"


def iter_blocks(
    paths: Sequence[str | Path],
    settings: FeatureSettings,
    colour_codebook: ColourCodebook,
    *,
    cache_dir: str | Path | None = None,
    n_jobs: int = JOBS,
    progress: bool = True,
    chunk_pictures: int | None = None,
) -> Iterator[BlockSet]:
    """BlockSets of consecutive chunks of `paths` (CHUNK_PICTURES each by default): memory
    stays bounded by one chunk."""
    chunk_pictures = chunk_pictures or CHUNK_PICTURES
    if colour_codebook.n_colours != settings.n_colours:  # else every picture would fail
        raise ValueError(f"colour codebook has {colour_codebook.n_colours} colours, settings "
                         f"say n_colours={settings.n_colours}")
    cache = BlockCache(cache_dir, settings, colour_codebook) if cache_dir else None
    colour_codebook.lut  # build the colour table once, before the threads share it
    bar = Bar("blocks", len(paths), enabled=progress, unit="pictures", rate=True)
    done = 0
    if active_cluster() is not None:
        chunks = cluster_chunks(list(paths), chunk_pictures, blocks_task, settings.to_dict(),
                                colour_codebook.to_arrays(),
                                None if cache_dir is None else str(cache_dir))
    else:
        chunks = None
    with bar, ThreadPoolExecutor(max(1, n_jobs)) as pool:
        for lo in range(0, len(paths), chunk_pictures):
            chunk = paths[lo:lo + chunk_pictures]
            t0 = time.perf_counter()
            results = []
            computed = (next(chunks)[1] if chunks is not None else pool.map(
                lambda p: _picture(p, settings, colour_codebook, cache), chunk))
            for path, res in zip(chunk, computed):
                results.append(res)
                if res[1] in ("skipped", "failed"):
                    _report(f"{res[1]} {path}: {res[2]}", bar.console if progress else None)
                done += 1
                if done % 64 == 0 or done == len(paths):
                    bar.update(completed=done)
            yield _block_set(chunk, results, settings, time.perf_counter() - t0)


_report = partial(report, log=log)  # _report(line, console or None)


def _block_set(chunk, results, settings: FeatureSettings, seconds: float) -> BlockSet:
    arrays = [r[0] if r[0] is not None else np.zeros((0, settings.dim), np.uint16) for r in results]
    offsets = np.zeros(len(arrays) + 1, np.int64)
    np.cumsum([len(a) for a in arrays], out=offsets[1:])
    descriptors = (np.concatenate(arrays) if arrays else np.zeros((0, settings.dim))).astype(np.float32)
    if settings.log_counts:
        np.log1p(descriptors, out=descriptors)
    status = [r[1] for r in results]
    return BlockSet(
        descriptors, offsets,
        np.array([s in ("extracted", "cached") for s in status], dtype=bool),
        [(str(p), r[2]) for p, r in zip(chunk, results) if r[1] in ("skipped", "failed")],
        settings.log_counts,
        status.count("extracted"), status.count("cached"),
        status.count("skipped"), status.count("failed"), seconds,
    )


def extract_blocks(
    paths: Sequence[str | Path],
    settings: FeatureSettings,
    colour_codebook: ColourCodebook,
    *,
    cache_dir: str | Path | None = None,
    n_jobs: int = JOBS,
    progress: bool = True,
) -> BlockSet:
    """Block descriptors of every picture in `paths`, in order (see BlockSet).

    Holds every block in memory (Corel 5k: 385k x 109 float32, 168 MB); for larger
    collections iterate with `iter_blocks`.
    """
    t0 = time.perf_counter()
    parts = list(iter_blocks(paths, settings, colour_codebook, cache_dir=cache_dir,
                             n_jobs=n_jobs, progress=progress))
    blocks = BlockSet.concatenate(parts, settings.dim)
    blocks.seconds = time.perf_counter() - t0
    return blocks
