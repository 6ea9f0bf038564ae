"""Visterms: k-means codebook over block descriptors, nearest-codeword assignment, tf-idf bags.

A picture's bag of visterms counts its blocks by nearest codeword (tf), weighted by
idf = -log(fraction of training pictures containing the visterm) and L2-normalised, as the
text side is (TPAMI §IV-A/B). The k-means and the exhaustive nearest-codeword search are
faiss's (BLAS matrix products: K = 10,000 codewords x 109 dimensions).
"""

from __future__ import annotations

import time

import faiss
import numpy as np
import scipy.sparse as sp

#: Blocks per faiss search call: bounds the (chunk x K) distance buffer faiss allocates.
SEARCH_CHUNK = 16_384


def scale_blocks(counts: np.ndarray, scaling: str, mean=None, std=None) -> np.ndarray:
    """Block histograms (counts) -> float32 descriptors, for the visterm k-means and the block
    kernels of kernel PAMIR alike (the one home of block scaling).

    sqrt and count^0.25 shrink the dominant bins (a sky block is 1,000 counts of one colour)
    so that the Euclidean k-means also sees the small ones; "sqrt_std" then gives each
    dimension unit variance over the training blocks (mean, std from `scaling_statistics`).
    """
    x = np.asarray(counts, dtype=np.float32)
    if scaling == "none":
        return x
    x = np.maximum(x, 0)  # counts; a negative value would only be noise (and NaN under sqrt)
    if scaling in ("sqrt", "sqrt_std"):
        x = np.sqrt(x)
    elif scaling == "quarter":
        x = np.sqrt(np.sqrt(x))
    elif scaling == "log1p":
        x = np.log1p(x)
    else:
        raise ValueError(f"unknown scaling {scaling!r}")
    if scaling == "sqrt_std":
        if mean is None or std is None:
            raise ValueError("sqrt_std scaling needs the training mean and std")
        x = (x - mean) / std
    return np.ascontiguousarray(x, dtype=np.float32)


def scaling_statistics(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std of sqrt(counts) per dimension; a constant dimension gets std 1."""
    x = np.sqrt(np.asarray(counts, dtype=np.float64))
    mean, std = x.mean(0), x.std(0)
    std[std < 1e-6] = 1.0
    return mean.astype(np.float32), std.astype(np.float32)


def fit_codebook(x: np.ndarray, k: int, *, n_iter: int, seed: int, verbose: bool = False):
    """k-means (faiss) -> (centres (k, d) float32, objective per iteration, seconds)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if len(x) < k:
        raise ValueError(
            f"{len(x):,} training blocks for n_visterms={k:,}: lower n_visterms or add pictures"
        )
    # min_points_per_centroid only decides whether faiss prints "please provide at least
    # 39 x k training points" (the result is the same bit for bit): the default codebook
    # is fitted on 10 blocks a centre by choice (FeatureSettings.kmeans_max_blocks, chosen on
    # validation), so that warning would only alarm the person running `pamir fit`.
    km = faiss.Kmeans(x.shape[1], k, niter=n_iter, seed=int(seed), verbose=verbose,
                      max_points_per_centroid=max(256, len(x) // k + 1),
                      min_points_per_centroid=1)
    t0 = time.perf_counter()
    km.train(x)
    return km.centroids.copy(), np.asarray(km.obj, dtype=np.float64), time.perf_counter() - t0


class Assigner:
    """Nearest codeword of each descriptor (exact, squared Euclidean)."""

    def __init__(self, centres: np.ndarray):
        self.index = faiss.IndexFlatL2(centres.shape[1])
        self.index.add(np.ascontiguousarray(centres, dtype=np.float32))

    def __call__(self, x: np.ndarray, return_distances: bool = False):
        x = np.ascontiguousarray(x, dtype=np.float32)
        ids = np.empty(len(x), dtype=np.int64)
        dist = np.empty(len(x), dtype=np.float32)
        for lo in range(0, len(x), SEARCH_CHUNK):
            d, i = self.index.search(x[lo:lo + SEARCH_CHUNK], 1)
            ids[lo:lo + SEARCH_CHUNK], dist[lo:lo + SEARCH_CHUNK] = i[:, 0], d[:, 0]
        return (ids, dist) if return_distances else ids


def term_frequencies(ids: np.ndarray, offsets: np.ndarray, k: int) -> sp.csr_matrix:
    """(n_pictures x k) float32 counts of each picture's block visterms."""
    n = len(offsets) - 1
    rows = np.repeat(np.arange(n), np.diff(offsets))
    tf = sp.csr_matrix((np.ones(len(ids), np.float32), (rows, ids)), shape=(n, k))
    tf.sum_duplicates()
    return tf


def inverse_document_frequency(tf: sp.csr_matrix, n_pictures: int | None = None) -> np.ndarray:
    """idf_i = -log(r_i), r_i the fraction of pictures containing visterm i.

    A visterm no training picture contains gets the idf of one that a single picture has:
    it is at least that rare, and an infinite weight would swamp the bag.
    """
    n = n_pictures if n_pictures is not None else tf.shape[0]
    df = np.bincount(tf.indices, minlength=tf.shape[1]).astype(np.float64)
    return (-np.log(np.maximum(df, 1.0) / max(n, 1))).astype(np.float32)


def tfidf(tf: sp.csr_matrix, idf: np.ndarray) -> sp.csr_matrix:
    """tf * idf, rows L2-normalised (an empty row stays empty)."""
    X = sp.csr_matrix(tf.multiply(idf[None, :]), dtype=np.float32)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(1)).ravel())
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    X = sp.csr_matrix(sp.diags(scale.astype(np.float32)) @ X, dtype=np.float32)
    X.eliminate_zeros()  # a visterm present in every training picture has idf 0
    X.sort_indices()
    return X
