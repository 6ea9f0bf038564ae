"""Region segmentation and region descriptors for Blobs (Duygulu et al., ECCV 2002), for any
picture.

    labels = segment(rgb)                      # (H, W) int: 0..n-1, largest region first
    F = region_features(rgb, labels)           # (n, 36) float32, n <= MAX_REGIONS

Segmentation: SLIC superpixels (scikit-image), merged by a normalised cut on their
region-adjacency graph (the RAG of mean colours, `graph.cut_normalized`), as Duygulu et al.
used Shi and Malik's normalised cuts. The regions are then the connected parts of the cut;
the MAX_REGIONS largest ones covering at least MIN_AREA of the picture are kept.

Region descriptor (36 numbers, as the 2006 papers' "colour 18, texture 12, shape/location 6"):
- colour (18): mean and standard deviation of R, G, B, of L*, a*, b*, and of the
  chromaticities r = R / (R+G+B), g = G / (R+G+B), and their mean 3x3 local contrast in L*
  and a*, b* (the within-region colour texture).
- texture (12): mean absolute responses of oriented first-derivative-of-Gaussian filters, 4
  orientations at 2 scales (8), and of a Laplacian of Gaussian at 2 scales (2), the local
  grey standard deviation at 2 scales (2).
- shape and position (6): area (fraction of the picture), centroid x and y (fractions),
  eccentricity and orientation-free elongation from second moments, and the fill of the
  bounding box.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy import ndimage as ndi
from skimage import segmentation
from skimage.color import rgb2lab

#: The most regions a picture keeps, and the smallest (fraction of the picture's pixels).
MAX_REGIONS = 10
MIN_AREA = 0.01
N_FEATURES = 36


def segment(rgb: np.ndarray, *, n_segments: int = 60, compactness: float = 10.0,
            thresh: float = 0.02, max_regions: int = MAX_REGIONS,
            min_area: float = MIN_AREA) -> np.ndarray:
    """(H, W) int32 labels: -1 outside the kept regions, 0..n-1 the kept regions from the
    largest down (n <= max_regions, each at least min_area of the picture)."""
    rgb = np.ascontiguousarray(rgb[..., :3])
    h, w = rgb.shape[:2]
    if np.ptp(rgb.reshape(-1, 3), axis=0).max() == 0:  # flat: one region
        sup = np.zeros((h, w), np.int64)
    else:
        sup = segmentation.slic(rgb, n_segments=n_segments, compactness=compactness,
                                start_label=0, enforce_connectivity=True)
        sup = normalised_cut(rgb, sup, thresh=thresh)
    # connected parts of each cut segment
    regions = np.zeros((h, w), np.int64)
    n = 0
    for value in np.unique(sup):
        lab, k = ndi.label(sup == value)
        regions[lab > 0] = lab[lab > 0] + n
        n += k
    sizes = np.bincount(regions.ravel(), minlength=n + 1)
    sizes[0] = 0
    order = np.argsort(-sizes, kind="stable")
    keep = [r for r in order[:max_regions] if sizes[r] >= max(1, min_area * h * w)]
    rank = np.full(n + 1, -1, np.int32)
    rank[keep] = np.arange(len(keep), dtype=np.int32)
    return rank[regions]


def superpixel_graph(rgb: np.ndarray, sup: np.ndarray, sigma: float = 255.0):
    """(W, sizes): the similarity exp(-|mean colour i - mean colour j|^2 / sigma) of adjacent
    superpixels (scikit-image's rag_mean_color, mode "similarity"), dense (n x n)."""
    n = int(sup.max()) + 1
    flat = sup.ravel()
    sizes = np.bincount(flat, minlength=n).astype(np.float64)
    means = np.stack([np.bincount(flat, rgb[..., c].ravel().astype(np.float64), n)
                      for c in range(3)], axis=1) / np.maximum(sizes, 1)[:, None]
    A = np.zeros((n, n), bool)
    for a, b in ((sup[:, :-1], sup[:, 1:]), (sup[:-1, :], sup[1:, :]),
                 (sup[:-1, :-1], sup[1:, 1:]), (sup[:-1, 1:], sup[1:, :-1])):
        A[a.ravel(), b.ravel()] = True
    A |= A.T
    np.fill_diagonal(A, False)
    d2 = ((means[:, None, :] - means[None, :, :]) ** 2).sum(2)
    return np.where(A, np.exp(-d2 / sigma), 0.0), sizes


def _ncut_value(W, d, mask):
    cut = W[mask][:, ~mask].sum()
    return cut / max(d[mask].sum(), 1e-12) + cut / max(d[~mask].sum(), 1e-12)


def _partition(W, nodes, thresh, num_cuts, out, next_label):
    """Shi and Malik's recursive two-way normalised cut on the nodes (indices into W), as
    scikit-image's cut_normalized does it, in dense numpy: the second smallest generalised
    eigenvector of (D - W) y = l D y, split at the best of num_cuts thresholds; a part is
    split again while the best cut's value is below thresh."""
    if len(nodes) > 2:
        Ws = W[np.ix_(nodes, nodes)]
        d = Ws.sum(1)
        if (d > 0).all():
            inv = 1.0 / np.sqrt(d)
            L = np.eye(len(nodes)) - inv[:, None] * Ws * inv[None, :]
            vals, vecs = np.linalg.eigh(L)
            y = vecs[:, 1] * inv
            lo, hi = y.min(), y.max()
            if hi > lo:
                best, best_mask = np.inf, None
                for t in np.linspace(lo, hi, num_cuts + 2)[1:-1]:
                    mask = y > t
                    if 0 < mask.sum() < len(nodes):
                        v = _ncut_value(Ws, d, mask)
                        if v < best:
                            best, best_mask = v, mask
                if best_mask is not None and best < thresh:
                    next_label = _partition(W, nodes[best_mask], thresh, num_cuts, out,
                                            next_label)
                    return _partition(W, nodes[~best_mask], thresh, num_cuts, out,
                                      next_label)
    out[nodes] = next_label
    return next_label + 1


def normalised_cut(rgb: np.ndarray, sup: np.ndarray, *, thresh: float = 0.05,
                   num_cuts: int = 10) -> np.ndarray:
    """Superpixels merged by a recursive normalised cut of their colour-similarity graph:
    (H, W) labels of the cut's segments (the result of scikit-image's
    rag_mean_color + cut_normalized, ~20x faster on 60 superpixels)."""
    W, _ = superpixel_graph(rgb, sup)
    out = np.zeros(len(W), np.int64)
    _partition(W, np.arange(len(W)), thresh, num_cuts, out, 0)
    return out[sup]


def _lab(rgb: np.ndarray) -> np.ndarray:
    return rgb2lab(rgb).astype(np.float32)


def _pixel_features(rgb: np.ndarray) -> np.ndarray:
    """(H, W, 34) per-pixel maps whose means (and some standard deviations) describe a region:
    the 30 colour and texture numbers come from these."""
    x = rgb.astype(np.float32) / 255.0
    lab = _lab(rgb)
    s = x.sum(2) + 1e-6
    chroma = np.stack([x[..., 0] / s, x[..., 1] / s], axis=2)
    grey = lab[..., 0] / 100.0
    maps = [x, lab / np.float32([100, 128, 128]), chroma]  # 3 + 3 + 2 = 8 (mean and std: 16)
    # local contrast in L* and in a*b* (2)
    contrast_l = np.abs(grey - ndi.uniform_filter(grey, 3))
    ab = lab[..., 1:] / 128.0
    contrast_ab = np.abs(ab - np.stack([ndi.uniform_filter(ab[..., i], 3) for i in (0, 1)],
                                       axis=2)).sum(2)
    tex = [contrast_l, contrast_ab]
    for sigma in (1.0, 2.5):
        gy = ndi.gaussian_filter(grey, sigma, order=(1, 0))
        gx = ndi.gaussian_filter(grey, sigma, order=(0, 1))
        for angle in (0.0, np.pi / 4, np.pi / 2, 3 * np.pi / 4):
            tex.append(np.abs(np.cos(angle) * gx + np.sin(angle) * gy))
        tex.append(np.abs(ndi.gaussian_laplace(grey, sigma)))
        mean = ndi.uniform_filter(grey, int(4 * sigma) | 1)
        sq = ndi.uniform_filter(grey * grey, int(4 * sigma) | 1)
        tex.append(np.sqrt(np.maximum(sq - mean * mean, 0)))
    return np.concatenate([np.concatenate(maps, axis=2), np.stack(tex, axis=2)], axis=2)


def region_features(rgb: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(n, 36) float32 descriptors of the regions 0..n-1 of `labels` (module docstring)."""
    n = int(labels.max()) + 1
    if n <= 0:
        return np.zeros((0, N_FEATURES), np.float32)
    h, w = labels.shape
    P = _pixel_features(rgb)
    flat = P.reshape(-1, P.shape[2]).astype(np.float64)
    lab = labels.ravel()
    inside = lab >= 0
    lab_in, flat_in = lab[inside], flat[inside]
    count = np.bincount(lab_in, minlength=n).astype(np.float64)
    onehot = sp.csr_matrix((np.ones(len(lab_in)), (lab_in, np.arange(len(lab_in)))),
                           shape=(n, len(lab_in)))
    mean = np.asarray(onehot @ flat_in) / count[:, None]
    sq = np.asarray(onehot @ (flat_in[:, :8] ** 2))
    std = np.sqrt(np.maximum(sq / count[:, None] - mean[:, :8] ** 2, 0))
    colour = np.concatenate([mean[:, :8], std, mean[:, 8:10]], axis=1)  # 18
    texture = mean[:, 10:22]  # 12
    ys, xs = np.divmod(np.flatnonzero(inside), w)
    yn, xn = ys / max(h - 1, 1), xs / max(w - 1, 1)
    cy = np.bincount(lab_in, yn, n) / count
    cx = np.bincount(lab_in, xn, n) / count
    dy, dx = yn - cy[lab_in], xn - cx[lab_in]
    myy = np.bincount(lab_in, dy * dy, n) / count
    mxx = np.bincount(lab_in, dx * dx, n) / count
    mxy = np.bincount(lab_in, dx * dy, n) / count
    root = np.sqrt(((mxx - myy) / 2) ** 2 + mxy ** 2)
    l1, l2 = (mxx + myy) / 2 + root, np.maximum((mxx + myy) / 2 - root, 0)
    ecc = np.sqrt(np.maximum(1 - l2 / np.maximum(l1, 1e-12), 0))
    elong = np.sqrt(l2 / np.maximum(l1, 1e-12))
    box = ndi.find_objects(labels + 1, max_label=n)  # label r is r + 1 here
    ymin = np.array([b[0].start for b in box], float)
    ymax = np.array([b[0].stop - 1 for b in box], float)
    xmin = np.array([b[1].start for b in box], float)
    xmax = np.array([b[1].stop - 1 for b in box], float)
    fill = count / ((ymax - ymin + 1) * (xmax - xmin + 1))
    shape = np.stack([count / (h * w), cx, cy, ecc, elong, fill], axis=1)  # 6
    return np.concatenate([colour, texture, shape], axis=1).astype(np.float32)


def picture_regions(rgb: np.ndarray, **segment_kw) -> np.ndarray:
    """(n, 36) float32 descriptors of a picture's largest regions (at most MAX_REGIONS)."""
    return region_features(rgb, segment(rgb, **segment_kw))


__all__ = ["MAX_REGIONS", "MIN_AREA", "N_FEATURES", "picture_regions", "region_features",
           "segment"]
