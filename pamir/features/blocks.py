"""The block grid and per-block histograms: uniform LBP (59) + colour (50) = 109 counts.

A picture is cut into overlapping square blocks of side B every B/2 pixels (TPAMI §IV-B,
§V-B). Each block is described by the histogram of its pixels' LBP codes followed by the
histogram of their colour codes. One compiled pass per picture computes grey levels, LBP
codes and colour codes for every pixel once, then counts them per block.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .colour import ColourCodebook
from .lbp import circle, code_table, lbp_codes
from .settings import FeatureSettings


def block_side(height: int, width: int, settings: FeatureSettings) -> tuple[int, int]:
    """(block side, step) in pixels for a picture of this (working) size."""
    side = settings.block_size or max(1, round(min(height, width) * settings.block_fraction))
    step = settings.block_step or max(1, side // 2)
    return side, step


def _positions(length: int, side: int, step: int) -> np.ndarray:
    if length <= side:
        return np.zeros(1, dtype=np.int32)
    n = (length - side) // step + 1
    start = (length - side - (n - 1) * step) // 2  # centre the grid: equal margins
    return (start + step * np.arange(n)).astype(np.int32)


def block_grid(height: int, width: int, settings: FeatureSettings) -> np.ndarray:
    """(n_blocks, 4) int32 rows (x, y, w, h), row-major from the top-left block.

    Blocks are squares of the block side; along a dimension shorter than a block, the block
    spans the whole dimension (a picture smaller than a block is one block).
    """
    side, step = block_side(height, width, settings)
    xs = _positions(width, side, step)
    ys = _positions(height, side, step)
    bw, bh = min(side, width), min(side, height)
    grid = np.empty((len(ys) * len(xs), 4), dtype=np.int32)
    grid[:, 0] = np.tile(xs, len(ys))
    grid[:, 1] = np.repeat(ys, len(xs))
    grid[:, 2] = bw
    grid[:, 3] = bh
    return grid


def count_dtype(grid: np.ndarray) -> type:
    """The smallest unsigned type that holds a block's pixel count."""
    area = int(grid[0, 2]) * int(grid[0, 3])
    return np.uint16 if area <= np.iinfo(np.uint16).max else np.uint32


@njit(cache=True, nogil=True)
def _grey(rgb: np.ndarray) -> np.ndarray:
    # Pillow's "L" conversion (ITU-R 601-2 luma), in the same fixed-point arithmetic.
    h, w, _ = rgb.shape
    out = np.empty((h, w), dtype=np.uint8)
    for y in range(h):
        for x in range(w):
            v = (np.uint32(rgb[y, x, 0]) * 19595 + np.uint32(rgb[y, x, 1]) * 38470
                 + np.uint32(rgb[y, x, 2]) * 7471 + 0x8000) >> 16
            out[y, x] = v
    return out


@njit(cache=True, nogil=True)
def _colour_codes(rgb: np.ndarray, lut: np.ndarray) -> np.ndarray:
    h, w, _ = rgb.shape
    out = np.empty((h, w), dtype=np.uint8)
    for y in range(h):
        for x in range(w):
            out[y, x] = lut[(np.int64(rgb[y, x, 0]) << 16) | (np.int64(rgb[y, x, 1]) << 8)
                            | np.int64(rgb[y, x, 2])]
    return out


@njit(cache=True, nogil=True)
def _count_blocks(lbp, colour, n_lbp, grid, out):
    for b in range(grid.shape[0]):
        x0, y0, bw, bh = grid[b, 0], grid[b, 1], grid[b, 2], grid[b, 3]
        for y in range(y0, y0 + bh):
            for x in range(x0, x0 + bw):
                out[b, lbp[y, x]] += 1
                out[b, n_lbp + colour[y, x]] += 1


def block_histograms(
    rgb: np.ndarray, settings: FeatureSettings, colour_codebook: ColourCodebook
) -> tuple[np.ndarray, np.ndarray]:
    """Counts (n_blocks, n_lbp + n_colours) uint16/uint32 and the grid (n_blocks, 4) x,y,w,h.

    rgb: (H, W, 3) uint8 at working size (see images.decode_rgb).
    """
    if colour_codebook.n_colours != settings.n_colours:
        raise ValueError(
            f"colour codebook has {colour_codebook.n_colours} colours, settings say "
            f"{settings.n_colours}"
        )
    rgb = np.ascontiguousarray(rgb)
    grid = block_grid(rgb.shape[0], rgb.shape[1], settings)
    rp, cp = circle(settings.lbp_points, float(settings.lbp_radius))
    out = np.zeros((len(grid), settings.dim), dtype=count_dtype(grid))
    # Separate compiled calls, not one kernel calling the others: numba's on-disk cache of a
    # caller does not notice when a callee in another module changes, and would keep the
    # stale callee compiled in.
    lbp = lbp_codes(_grey(rgb), rp, cp, code_table(settings.lbp_points))
    colour = _colour_codes(rgb, colour_codebook.lut)
    _count_blocks(lbp, colour, settings.n_lbp, grid, out)
    return out, grid
