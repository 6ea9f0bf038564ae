"""Uniform local binary patterns, compiled (numba) and free of the GIL.

Same codes as scikit-image's `local_binary_pattern(grey, P, R, "nri_uniform")` (the P*(P-1)+3
"non-rotation-invariant uniform" codes, 59 for P=8), same bilinear interpolation on the
circle, with one deliberate difference: outside the picture the nearest edge pixel is used
(scikit-image pads with 0). Zero padding invents a dark frame, so every border pixel would
see an edge and border blocks would carry texture that is not in the picture; with edge
padding a flat picture is one code everywhere. Equal to scikit-image on np.pad(grey, R, "edge")
except at exact ties (an interpolated neighbour equal to the centre in real arithmetic), which
are settled as exact arithmetic would (>=) rather than by the last bit of rounding.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit


def n_codes(P: int) -> int:
    return P * (P - 1) + 3


@lru_cache(maxsize=None)
def circle(P: int, R: float) -> tuple[np.ndarray, np.ndarray]:
    """Row and column offsets of the P neighbours, rounded as scikit-image does."""
    angles = 2 * np.pi * np.arange(P, dtype=np.float64) / P
    return np.round(-R * np.sin(angles), 5), np.round(R * np.cos(angles), 5)


@lru_cache(maxsize=None)
def code_table(P: int) -> np.ndarray:
    """(2^P,) uint8: the nri_uniform code of each P-bit pattern (bit i = neighbour i)."""
    if not 1 <= P <= 16:
        raise ValueError(f"LBP with P={P} neighbours: use 1..16")
    table = np.empty(1 << P, dtype=np.uint8)
    for pattern in range(1 << P):
        bits = [(pattern >> i) & 1 for i in range(P)]
        table[pattern] = _nri_uniform(bits, P)
    return table


def _nri_uniform(bits: list[int], P: int) -> int:
    # scikit-image's rule: patterns with at most 2 transitions (counted without wrapping,
    # which is equivalent) are coded by their number of ones and rotation; the rest share one.
    changes = sum(abs(bits[i] - bits[i + 1]) for i in range(P - 1))
    if changes > 2:
        return P * (P - 1) + 2
    n_ones = sum(bits)
    if n_ones == 0:
        return 0
    if n_ones == P:
        return P * (P - 1) + 1
    first_one = bits.index(1)
    first_zero = bits.index(0)
    rot_index = n_ones - first_zero if first_one == 0 else P - first_one
    return 1 + (n_ones - 1) * P + rot_index


@njit(cache=True, nogil=True)
def _edge_pad(grey: np.ndarray, m: int) -> np.ndarray:
    rows, cols = grey.shape
    out = np.empty((rows + 2 * m, cols + 2 * m), dtype=np.float64)
    for r in range(rows + 2 * m):
        rr = min(max(r - m, 0), rows - 1)
        for c in range(cols + 2 * m):
            out[r, c] = grey[rr, min(max(c - m, 0), cols - 1)]
    return out


@njit(cache=True, nogil=True)
def lbp_codes(grey: np.ndarray, rp: np.ndarray, cp: np.ndarray, table: np.ndarray) -> np.ndarray:
    """(H, W) uint8 codes of an (H, W) uint8 grey picture."""
    rows, cols = grey.shape
    P = rp.shape[0]
    # Bilinear interpolation at a fixed offset from every pixel: the four surrounding pixels
    # and their weights are the same everywhere, so they are computed once.
    r0 = np.floor(rp).astype(np.int64)
    c0 = np.floor(cp).astype(np.int64)
    r1 = np.ceil(rp).astype(np.int64)
    c1 = np.ceil(cp).astype(np.int64)
    dr = rp - r0
    dc = cp - c0
    w00 = (1 - dr) * (1 - dc)
    w01 = (1 - dr) * dc
    w10 = dr * (1 - dc)
    w11 = dr * dc
    m = 1 + max(np.abs(r0).max(), np.abs(r1).max(), np.abs(c0).max(), np.abs(c1).max())
    g = _edge_pad(grey, m)
    # Neighbour by neighbour over whole rows: the inner loop is contiguous and vectorises.
    pattern = np.zeros((rows, cols), dtype=np.int32)
    for i in range(P):
        a, b, d, e = w00[i], w01[i], w10[i], w11[i]
        bit = np.int32(1 << i)
        for r in range(rows):
            y0, y1 = r + m + r0[i], r + m + r1[i]
            x0, x1 = m + c0[i], m + c1[i]
            top0, top1 = g[y0, x0:x0 + cols], g[y0, x1:x1 + cols]
            bot0, bot1 = g[y1, x0:x0 + cols], g[y1, x1:x1 + cols]
            centre, row = g[r + m, m:m + cols], pattern[r]
            for c in range(cols):
                texture = a * top0[c] + b * top1[c] + d * bot0[c] + e * bot1[c]
                # Rounding leaves errors below 1e-12 on 8-bit values, while a true difference
                # is at least 1e-10 (offsets have 5 decimals): the tolerance settles exact
                # ties (a neighbour equal to the centre in real arithmetic) as >=, as exact
                # arithmetic would, instead of by the last bit of rounding.
                row[c] |= bit * np.int32(texture - centre[c] >= -1e-11)
    out = np.empty((rows, cols), dtype=np.uint8)
    for r in range(rows):
        for c in range(cols):
            out[r, c] = table[pattern[r, c]]
    return out


def local_binary_pattern(grey: np.ndarray, P: int = 8, R: float = 2.0) -> np.ndarray:
    """nri_uniform LBP codes (H, W) uint8 of a grey uint8 picture, edge-padded."""
    rp, cp = circle(P, float(R))
    return lbp_codes(np.ascontiguousarray(grey, dtype=np.uint8), rp, cp, code_table(P))
