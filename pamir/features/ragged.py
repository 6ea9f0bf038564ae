"""Ragged arrays: a variable number of descriptor rows per picture, concatenated.

The one home of this shape: block histograms (pamir.features.BlockSet adds which pictures
could be read), the block kernels' descriptor sets (kernel PAMIR) and BBNN's blocks all are
a Ragged, so selecting pictures, counting blocks and walking rows are written once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Ragged:
    """`descriptors` (n_rows x d) float32 and `offsets` (n + 1,) int64: picture j owns rows
    offsets[j]:offsets[j + 1]; a picture may own none."""

    descriptors: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_blocks(self) -> np.ndarray:
        """(n,) rows of each picture."""
        return np.diff(self.offsets)

    def blocks(self, i: int) -> np.ndarray:
        return self.descriptors[self.offsets[i]:self.offsets[i + 1]]

    def rows(self, pictures) -> tuple[np.ndarray, np.ndarray]:
        """The descriptor rows of `pictures` (indices) and, per row, its position in
        `pictures`; vectorised, as BBNN gathers a batch's blocks this way at every step."""
        pictures = np.asarray(pictures, dtype=np.int64)
        starts, counts = self.offsets[pictures], self.n_blocks[pictures]
        segment = np.repeat(np.arange(len(pictures)), counts)
        first = np.cumsum(counts) - counts  # where each picture's rows begin in the output
        rows = np.arange(counts.sum()) - np.repeat(first - starts, counts)
        return rows, segment

    def take_offsets(self, pictures) -> tuple[np.ndarray, np.ndarray]:
        """(descriptors, offsets) of `pictures`, in that order."""
        pictures = np.asarray(pictures, dtype=np.int64)
        rows, _ = self.rows(pictures)
        offsets = np.concatenate([[0], np.cumsum(self.n_blocks[pictures])]).astype(np.int64)
        return self.descriptors[rows], offsets

    def take(self, pictures) -> "Ragged":
        return Ragged(*self.take_offsets(pictures))

    @classmethod
    def from_arrays(cls, arrays, dim: int | None = None) -> "Ragged":
        """From a list of (n_rows x d) arrays, one per picture."""
        arrays = [np.asarray(a, dtype=np.float32) for a in arrays]
        bad = [i for i, a in enumerate(arrays) if a.ndim != 2]
        if bad:
            raise ValueError(f"picture {bad[0]}: block descriptors must be an (n_blocks x d) "
                             f"array, got shape {arrays[bad[0]].shape}")
        dims = {a.shape[1] for a in arrays if len(a)}
        if len(dims) > 1:
            raise ValueError(f"pictures have block descriptors of different sizes {sorted(dims)}")
        d = dims.pop() if dims else (arrays[0].shape[1] if arrays else dim or 0)
        offsets = np.zeros(len(arrays) + 1, np.int64)
        offsets[1:] = np.cumsum([len(a) for a in arrays])
        desc = (np.concatenate([a.reshape(-1, d) for a in arrays]) if arrays
                else np.zeros((0, d), np.float32))
        return cls(desc, offsets)

    def check(self, what: str = "block descriptors") -> "Ragged":
        """Raise a clear error unless the shapes agree and every value is finite."""
        desc, offsets = self.descriptors, self.offsets
        if desc.ndim != 2 or offsets.ndim != 1 or len(offsets) < 1:
            raise ValueError(f"{what} {desc.shape} / offsets {offsets.shape}: expected "
                             "(n_blocks x dim) and (n_pictures + 1,)")
        if offsets[0] != 0 or offsets[-1] != len(desc) or np.any(np.diff(offsets) < 0):
            raise ValueError(f"{what}: offsets must start at 0, end at the number of blocks "
                             "and never decrease")
        if not np.isfinite(desc).all():
            raise ValueError(f"{what} contain NaN or infinite values")
        return self


__all__ = ["Ragged"]
