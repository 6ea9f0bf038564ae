"""Pseudo-relevance feedback for a query that ImageNet's classes alone answer (Rocchio, as in
text retrieval since the SMART system): the query's K best pictures stand for what it means in
this folder, and every picture is ranked again by a mix of its score and its likeness to them.

A word's classes say what it means to ImageNet ("beach": seashore, sandbar); a folder's beach
pictures are also sky, sea and people, classes the word does not name. The K best pictures
hold them: their class probabilities' centroid is the query as this folder shows it. Likeness
is the Bhattacharyya coefficient of two class distributions (the cosine of their square
roots: 1 for the same distribution), and the two parts are mixed as standard scores over the
folder's pictures, (1 - WEIGHT) of the query's and WEIGHT of the likeness, so that neither's
scale decides.

Chosen on Corel 5k's 2,028 validation queries (the look of a folder of its 500 validation
pictures, their neighbours mixed in; benchmarks/bench_zero_caption.py --feedback,
results/zero_caption_feedback.md): single-word AvgP 25.57 -> 27.40 (fp32), 26.06 -> 26.72
(int8) at K = 5 and WEIGHT = 0.7; K 3 to 5 and weights 0.5 to 0.9 are a plateau within 0.3 of
each other, of which this one does not lower the queries of several words (fp32 all-query
AvgP 17.38 -> 18.01, int8 17.57 -> 17.59, where K 3 and 0.9 lost 0.2). Likeness in the look's
CNN views instead of the classes gained less (26.56 at best), and the centroid as one more
class term scored as a word is (mass_score, which the index's bounded top-k could keep)
gained nothing (25.61).

What it costs: a scan of every picture's 1,000 class rows for each such query (the bounded
top-k of pamir.index.class_topk reads a query's few class rows only).
"""

from __future__ import annotations

import os

import numpy as np

#: The query's best pictures that make its centroid, and the likeness's share of the mix.
FEEDBACK_K = 5
FEEDBACK_WEIGHT = 0.7
#: 0 (or off, no, false) turns the feedback off: the classes' scores alone, as before.
ENABLED_ENV = "PAMIR_FEEDBACK"


def enabled() -> bool:
    return os.environ.get(ENABLED_ENV, "1").strip().lower() not in ("0", "no", "off", "false")


def standard(s: np.ndarray, live: np.ndarray) -> np.ndarray:
    """(n,) float64 standard scores of s over its live entries (0 elsewhere)."""
    out = np.zeros(len(s), np.float64)
    x = np.asarray(s, np.float64)[live]
    if len(x):
        out[live] = (x - x.mean()) / max(float(x.std()), 1e-12)
    return out


def rerank(scores: np.ndarray, roots: np.ndarray, k: int = FEEDBACK_K,
           weight: float = FEEDBACK_WEIGHT) -> np.ndarray:
    """(n,) float32: scores (n,; -inf: a picture left out, kept so) mixed with each picture's
    likeness to the centroid of the k best (the module's doc). roots: (C x n) the square
    roots of the pictures' class probabilities (a picture's column has unit length)."""
    scores = np.asarray(scores, np.float32)
    live = np.isfinite(scores)
    if live.sum() <= k:
        return scores.copy()
    best = np.flatnonzero(live)[np.argsort(-scores[live], kind="stable")[:k]]
    centre = roots[:, best].mean(axis=1)
    likeness = centre @ roots
    out = ((1 - weight) * standard(scores, live) + weight * standard(likeness, live))
    return np.where(live, out, -np.inf).astype(np.float32)


def class_roots(matrix, start: int, classes: int) -> np.ndarray:
    """(classes x width) float32 the square roots of an index's class rows (pamir.index's
    score matrix, its class rows from row `start`), every column."""
    out = np.zeros((classes, matrix._width), np.float32)
    for sh, a, b in matrix._spans():
        out[:, a:b] = np.sqrt(np.maximum(sh.map[start:start + classes, : b - a], 0.0))
    return out


__all__ = ["ENABLED_ENV", "FEEDBACK_K", "FEEDBACK_WEIGHT", "class_roots", "enabled", "rerank",
           "standard"]
