"""The colour codebook: k-means centres over RGB pixels of the training pictures.

A block's colour histogram counts its pixels by nearest codebook colour (TPAMI §IV-B). The
nearest colour of each of the 2^24 RGB values is precomputed once into a lookup table
(16 MiB): assigning a pixel is then one memory read instead of 50 distances (5x faster on
whole pictures, measured in benchmarks/results/features.md).
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Iterable

import faiss
import numpy as np
from numba import njit, prange

from .. import config
from ..storage import atomic_write
from .images import ImageError, load_rgb
from .settings import FeatureSettings

log = logging.getLogger(__name__)


class ColourCodebook:
    """centres: (n_colours, 3) float32 RGB in 0..255."""

    def __init__(self, centres: np.ndarray):
        centres = np.ascontiguousarray(centres, dtype=np.float32)
        if centres.ndim != 2 or centres.shape[1] != 3 or not 1 <= len(centres) <= 256:
            raise ValueError(f"colour centres must be (1..256, 3), got {centres.shape}")
        self.centres = centres
        self._lut: np.ndarray | None = None

    @property
    def n_colours(self) -> int:
        return len(self.centres)

    @classmethod
    def fit(
        cls,
        paths: Iterable[str | Path],
        n_colours: int = FeatureSettings.n_colours,
        seed: int = config.SEED,
        *,
        pixels_per_picture: int = FeatureSettings.colour_pixels_per_picture,
        max_pictures: int = FeatureSettings.colour_max_pictures,
        short_side: int | None = FeatureSettings.short_side,
        n_iter: int = 25,
    ) -> "ColourCodebook":
        """k-means on RGB pixels sampled at random from (at most max_pictures of) `paths`."""
        rng = np.random.default_rng(seed)
        paths = list(paths)
        if len(paths) > max_pictures:
            paths = [paths[i] for i in np.sort(rng.choice(len(paths), max_pictures, replace=False))]
        samples = []
        for p in paths:
            try:
                rgb = load_rgb(p, short_side).reshape(-1, 3)
            except ImageError:
                continue  # extraction reports bad pictures; the codebook just does without
            take = rng.choice(len(rgb), min(pixels_per_picture, len(rgb)), replace=False)
            samples.append(rgb[take])
        if not samples:
            raise ValueError("no readable picture to learn the colour codebook from")
        pixels = np.concatenate(samples).astype(np.float32)
        if len(pixels) < n_colours:
            raise ValueError(f"{len(pixels)} pixels sampled, fewer than n_colours={n_colours}")
        km = faiss.Kmeans(3, n_colours, niter=n_iter, seed=int(seed), verbose=False,
                          max_points_per_centroid=1 << 20)
        km.train(pixels)
        # Sort the centres by brightness so codes read sensibly (0 dark .. n-1 light).
        centres = km.centroids[np.argsort(km.centroids @ np.array([0.299, 0.587, 0.114]))]
        return cls(centres)

    @property
    def lut(self) -> np.ndarray:
        """(2^24,) uint8: nearest centre of RGB value (r << 16) | (g << 8) | b."""
        if self._lut is None:
            self._lut = _build_lut(self.centres)
        return self._lut

    def cache_lut(self, folder: str | Path) -> np.ndarray:
        """The lookup table, read from folder/<digest>-lut.npy or built and stored there
        (16 MiB; reading it takes milliseconds, building it about a second)."""
        path = Path(folder) / f"{self.digest()}-lut.npy"
        if self._lut is None and path.exists():
            try:
                lut = np.load(path, allow_pickle=False)
                if lut.shape == (1 << 24,) and lut.dtype == np.uint8:
                    self._lut = lut
            except (OSError, ValueError):
                pass  # damaged: rebuilt below
        if not path.exists() or self._lut is None:
            lut = self.lut
            try:
                atomic_write(path, lambda f: np.save(f, lut, allow_pickle=False))
            except OSError as e:
                # the table is good in memory: a cache that cannot take it (a full disk, a
                # read-only folder) costs a rebuild next time, not the run
                log.warning("feature cache: could not write %s (%s)", path, e)
        return self.lut

    def assign(self, rgb: np.ndarray) -> np.ndarray:
        """Nearest-colour codes of an (..., 3) uint8 array -> (...) uint8."""
        rgb = np.asarray(rgb)
        if rgb.dtype != np.uint8 or rgb.shape[-1] != 3:
            raise ValueError(f"expected (..., 3) uint8 RGB, got {rgb.dtype} {rgb.shape}")
        idx = (rgb[..., 0].astype(np.int32) << 16) | (rgb[..., 1].astype(np.int32) << 8) | rgb[..., 2]
        return self.lut[idx]

    def assign_exact(self, rgb: np.ndarray) -> np.ndarray:
        """The same as `assign` by brute-force distances (for checking the table)."""
        x = np.asarray(rgb, dtype=np.float32).reshape(-1, 3)
        d = ((x[:, None, :] - self.centres[None, :, :]) ** 2).sum(-1)
        return d.argmin(1).astype(np.uint8).reshape(np.shape(rgb)[:-1])

    def digest(self) -> str:
        """Identity of the codebook, for cache keys."""
        return hashlib.blake2b(self.centres.tobytes(), digest_size=8).hexdigest()

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"colour_centres": self.centres}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "ColourCodebook":
        return cls(arrays["colour_centres"])


@njit(parallel=True, cache=True)
def _build_lut(centres: np.ndarray) -> np.ndarray:
    # Distances in float32 exactly as assign_exact computes them, first minimum wins. For
    # each (r, g) the 256 blues are updated centre by centre: that inner loop vectorises.
    n = centres.shape[0]
    lut = np.empty(1 << 24, dtype=np.uint8)
    blues = np.arange(256).astype(np.float32)
    for rg in prange(1 << 16):
        r = np.float32(rg >> 8)
        g = np.float32(rg & 255)
        best_d = np.full(256, np.inf, dtype=np.float32)
        best = np.zeros(256, dtype=np.uint8)
        for k in range(n):
            dr = r - centres[k, 0]
            dg = g - centres[k, 1]
            rg_d = dr * dr + dg * dg
            for b in range(256):
                db = blues[b] - centres[k, 2]
                d = rg_d + db * db
                if d < best_d[b]:
                    best_d[b] = d
                    best[b] = k
        lut[rg << 8:(rg + 1) << 8] = best
    return lut
