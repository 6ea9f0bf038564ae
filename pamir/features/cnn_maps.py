"""Where on a picture a CNN view's part of a linear score comes from: class-activation maps
that add up exactly.

A CNN view (pamir.features.cnn) makes its vector from the head's map F (C x h x w; ReLU6, so
F >= 0) in four steps, and a linear model (PAMIR) scores it as g . x, g being the query's
weights on the view's columns (q W, times the view's weight in a concatenation):

    P_rc = mean of F_c over the cells of region r   (r: the whole map, then the 2x2 grid)
    S_rc = P_rc ** gamma                            (power normalisation; gamma = settings.power)
    Z_rc = (S_rc - mu_rc) / sigma_rc                (standardisation, fitted on train pictures)
    x    = Z / ||Z||                                (L2)

With a_rc = g_rc / (sigma_rc ||Z||) and S_rc = (S_rc / P_rc) P_rc,

    g . x = sum_rc a_rc (S_rc - mu_rc)
          = sum_(i,j) sum_(r contains (i,j)) sum_c a_rc [(S_rc / P_rc) F_cij - mu_rc] / |r|

so each cell (i, j) of the map gets the inner sum as its contribution, and the cells' sum is the
view's score exactly (to float rounding): class activation mapping (Zhou et al. 2016) with the
view's normalisation folded into the channel weights.

What is exact and what is first-order:
- Exact: average pooling and the standardisation are linear (affine); the L2 norm ||Z|| and the
  power's factor P_rc ** (gamma - 1) are this picture's own numbers, taken as fixed per-picture
  scales. The contributions are then each cell's exact share of the score.
- First-order: what the score would do if one cell changed. Both scales move with the cells. To
  first order the power turns a share into gamma times it (d P^gamma = gamma P^(gamma-1) dP, so
  with the default gamma = 0.5 the marginal effect is half the share), and the norm takes away
  the part of the change along x. Only with gamma = 1 and no L2 are the shares also the effects.
- The training mean mu is spread evenly over each region's cells, so a cell adds nothing when,
  channel by channel, it looks like an average training picture's region.

Cells are placed on the displayed picture as the network's stride-32 tiles of the picture it
saw (cropped to at most MAX_ASPECT : 1 and resized; pamir.features.cnn.prepare_picture); the
receptive field of a cell is wider than its tile.
"""

from __future__ import annotations

import numpy as np

from .cnn import CNNRepresentation, crop_box, prepare_picture
from .images import displayed_size, read_bytes

#: The network's total stride: five stride-2 stages between the pixels and the head's map.
STRIDE = 32


def regions(h: int, w: int, n: int) -> list[tuple[slice, slice]]:
    """The pooled regions of an h x w map, in the pooled vector's order: the whole map, then
    (n = 2) the 2x2 grid's top-left, top-right, bottom-left, bottom-right cells, with the
    middle row or column of an odd size in both halves (as build_trunk slices them)."""
    whole = (slice(0, h), slice(0, w))
    if n == 0:
        return [whole]
    top, bottom = slice(0, (h + 1) // 2), slice(h // 2, h)
    left, right = slice(0, (w + 1) // 2), slice(w // 2, w)
    return [whole, (top, left), (top, right), (bottom, left), (bottom, right)]


def pool(F: np.ndarray, n_regions: int) -> np.ndarray:
    """(len(regions) * C,) float64: the map's averages over its regions, as build_trunk pools."""
    F = np.asarray(F, np.float64)
    return np.concatenate([F[:, rows, cols].mean((1, 2))
                           for rows, cols in regions(*F.shape[1:], n_regions)])


def map_contributions(F: np.ndarray, g: np.ndarray, rep: CNNRepresentation
                      ) -> tuple[np.ndarray, float, float]:
    """(cells, score, mean_term): each map cell's contribution (h x w float64) to g . x, x being
    the view's vector made from the map F (C x h x w) by rep's normalisation (module
    docstring); score = g . x = cells.sum() up to rounding; mean_term = -sum a mu, the part of
    the score that the training mean accounts for (spread over the cells)."""
    s = rep.settings
    F = np.asarray(F, np.float64)
    C, h, w = F.shape
    g = np.asarray(g, np.float64).ravel()
    P = pool(F, s.regions)
    if g.shape != P.shape:
        raise ValueError(f"{g.size} weights for a view of {P.size} numbers")
    S = P ** s.power  # P >= 0 (ReLU6)
    mu = np.asarray(rep.mean_, np.float64) if s.standardise else np.zeros_like(P)
    sigma = np.asarray(rep.std_, np.float64) if s.standardise else np.ones_like(P)
    Z = (S - mu) / sigma
    norm = max(float(np.linalg.norm(Z)), 1e-12) if s.l2 else 1.0  # as _finish guards it
    a = g / (sigma * norm)
    ratio = np.divide(S, P, out=np.zeros_like(P), where=P > 0)  # P = 0: F = 0 in the region
    cells = np.zeros((h, w))
    for k, (rows, cols) in enumerate(regions(h, w, s.regions)):
        part = slice(k * C, (k + 1) * C)
        size = (rows.stop - rows.start) * (cols.stop - cols.start)
        weights = a[part] * ratio[part]  # each channel's weight on this region's cells
        cells[rows, cols] += (np.tensordot(weights, F[:, rows, cols], 1)
                              - a[part] @ mu[part]) / size
    return cells, float(a @ (S - mu)), float(-(a @ mu))


def cell_boxes(grid: tuple[int, int], seen: tuple[int, int],
               crop: tuple[float, float, float, float]) -> np.ndarray:
    """(h * w, 4) boxes (x, y, w, h) on the displayed picture of an h x w map's cells, row by
    row: the stride-32 tiles of the H x W picture the network saw (`seen`), the last row and
    column cut at its edge, scaled onto `crop`."""
    (h, w), (H, W) = grid, seen
    x0, y0, cw, ch = crop
    ys = np.minimum(np.arange(h + 1) * STRIDE, H) * (ch / H) + y0
    xs = np.minimum(np.arange(w + 1) * STRIDE, W) * (cw / W) + x0
    top, left = np.meshgrid(ys[:-1], xs[:-1], indexing="ij")
    height, width = np.meshgrid(np.diff(ys), np.diff(xs), indexing="ij")
    return np.stack([left, top, width, height], -1).reshape(-1, 4)


def view_contributions(rep: CNNRepresentation, path, g: np.ndarray) -> dict:
    """One picture's CNN view explained: cells (h x w contributions), boxes (h * w x 4 on the
    displayed picture), score (= cells.sum()), mean_term, width and height (displayed)."""
    # the [cnn] extra: the map comes from eager torch (1 s to import), which the server and
    # the ONNX engine run without
    from .cnn_torch import feature_map  # noqa: PLC0415
    data = read_bytes(path)
    width, height = displayed_size(data)
    pixels = prepare_picture(data, rep.settings.short_side)
    F = feature_map(pixels, rep.settings)
    cells, score, mean_term = map_contributions(F, g, rep)
    boxes = cell_boxes(cells.shape, pixels.shape[:2], crop_box(width, height))
    return {"cells": cells, "boxes": boxes, "score": score, "mean_term": mean_term,
            "width": width, "height": height}


__all__ = ["STRIDE", "cell_boxes", "crop_box", "map_contributions", "pool", "regions",
           "view_contributions"]
