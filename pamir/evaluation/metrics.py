"""Ranking and annotation metrics, per query.

Ties: a system that gives many pictures the same score must not be flattered by the order in
which they happen to be stored. With `ties="pessimistic"` (the default, config.TIES) the
non-relevant pictures come first among equal scores, so a constant scorer gets the worst
AvgP; with `ties="random"` tied pictures are shuffled with a seeded generator.

All ranking functions take `scores` (n_queries x n_pictures, dense) and `relevance`
(n_queries x n_pictures, sparse or dense, non-zero = relevant) and return one value per query.
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp

from .. import config

RECALL_LEVELS = np.linspace(0.0, 1.0, 11)


def _dense_bool(relevance) -> np.ndarray:
    if sp.issparse(relevance):
        relevance = relevance.toarray()
    return np.asarray(relevance) != 0


def ranked_relevance(scores, relevance, ties: str = config.TIES, seed: int = config.SEED):
    """Relevance flags in ranked order (n_queries x n_pictures bool) and relevant counts."""
    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    rel = np.atleast_2d(_dense_bool(relevance))
    if scores.shape != rel.shape:
        raise ValueError(f"scores {scores.shape} and relevance {rel.shape} differ in shape")
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN; a model produced invalid output")
    if ties == "pessimistic":
        tiebreak = rel.astype(np.float64)  # relevant last among equals
    elif ties == "random":
        tiebreak = np.random.default_rng(seed).random(scores.shape)
    else:
        raise ValueError(f"ties must be 'pessimistic' or 'random', not {ties!r}")
    order = np.lexsort((tiebreak, -scores), axis=-1)
    return np.take_along_axis(rel, order, axis=-1), rel.sum(axis=1)


def _precisions(ranked: np.ndarray) -> np.ndarray:
    hits = np.cumsum(ranked, axis=1)
    return hits / np.arange(1, ranked.shape[1] + 1)


def average_precision(scores, relevance, **kw) -> np.ndarray:
    """AvgP: the mean, over the relevant pictures, of the precision at their rank."""
    ranked, n_rel = ranked_relevance(scores, relevance, **kw)
    total = (_precisions(ranked) * ranked).sum(axis=1)
    return np.divide(total, n_rel, out=np.zeros(len(n_rel)), where=n_rel > 0)


def precision_at(scores, relevance, k: int, **kw) -> np.ndarray:
    """P@k: the fraction of relevant pictures among the first k (k counted even past n)."""
    ranked, _ = ranked_relevance(scores, relevance, **kw)
    return ranked[:, :k].sum(axis=1) / k


def r_precision(scores, relevance, **kw) -> np.ndarray:
    """BEP, the break-even point: the precision at rank R, R the number of relevant pictures."""
    ranked, n_rel = ranked_relevance(scores, relevance, **kw)
    hits = np.cumsum(ranked, axis=1)
    idx = np.maximum(n_rel - 1, 0)
    at_r = hits[np.arange(len(n_rel)), idx]
    return np.divide(at_r, n_rel, out=np.zeros(len(n_rel)), where=n_rel > 0)


def interpolated_precision(scores, relevance, **kw) -> np.ndarray:
    """The 11-point interpolated recall-precision curve of each query (n_queries x 11)."""
    ranked, n_rel = ranked_relevance(scores, relevance, **kw)
    prec = _precisions(ranked)
    recall = np.cumsum(ranked, axis=1) / np.maximum(n_rel, 1)[:, None]
    # interpolated precision at r = the best precision at any recall >= r
    best_after = np.maximum.accumulate(prec[:, ::-1], axis=1)[:, ::-1]
    out = np.zeros((len(n_rel), len(RECALL_LEVELS)))
    for k, level in enumerate(RECALL_LEVELS):
        reached = recall >= level - 1e-12
        first = np.argmax(reached, axis=1)
        ok = reached.any(axis=1) & (n_rel > 0)
        out[ok, k] = best_after[np.flatnonzero(ok), first[ok]]
    return out


def ranking_metrics(scores, relevance, p_at=config.P_AT, **kw) -> dict[str, np.ndarray]:
    """AvgP, BEP and P@k per query in one pass over the ranking."""
    ranked, n_rel = ranked_relevance(scores, relevance, **kw)
    hits = np.cumsum(ranked, axis=1)
    prec = hits / np.arange(1, ranked.shape[1] + 1)
    valid = n_rel > 0
    out = {
        "avgp": np.divide((prec * ranked).sum(axis=1), n_rel, out=np.zeros(len(n_rel)),
                          where=valid),
        "bep": np.divide(hits[np.arange(len(n_rel)), np.maximum(n_rel - 1, 0)], n_rel,
                         out=np.zeros(len(n_rel)), where=valid),
    }
    for k in p_at:
        out[f"p{k}"] = ranked[:, :k].sum(axis=1) / k
    return out


def annotation_metrics(word_scores, truth, n_words: int = config.ANNOTATION_WORDS) -> dict:
    """Per-word precision and recall of fixed-length annotation (Jeon et al., Duygulu et al.).

    word_scores: (n_pictures x T) scores; each picture is annotated with its top `n_words`.
    truth: (n_pictures x T) caption presence. Per word w: precision = correct / annotated with
    w (0 if never predicted), recall = correct / pictures whose caption has w. Means are over
    the words present in `truth`; N+ counts the words with recall > 0.
    """
    S = np.asarray(word_scores, dtype=np.float64)
    Y = _dense_bool(truth)
    top = np.argsort(-S, axis=1, kind="stable")[:, :n_words]
    pred = np.zeros_like(Y)
    np.put_along_axis(pred, top, True, axis=1)
    return prediction_metrics(pred, Y)


def prediction_metrics(predicted, truth) -> dict:
    """annotation_metrics of given annotations: predicted (n_pictures x T) bool, any number
    of words a picture (pamir.calibration.thresholds)."""
    pred, Y = _dense_bool(predicted), _dense_bool(truth)
    correct = (pred & Y).sum(axis=0)
    n_pred, n_true = pred.sum(axis=0), Y.sum(axis=0)
    words = n_true > 0
    precision = np.divide(correct, n_pred, out=np.zeros(len(correct)), where=n_pred > 0)
    recall = np.divide(correct, n_true, out=np.zeros(len(correct)), where=words)
    mp, mr = precision[words].mean(), recall[words].mean()
    return {
        "words": int(words.sum()),
        "mean_precision": float(mp),
        "mean_recall": float(mr),
        "f1": float(2 * mp * mr / (mp + mr)) if mp + mr > 0 else 0.0,
        "n_plus": int((recall[words] > 0).sum()),
        "per_word_precision": precision,
        "per_word_recall": recall,
    }


@numba.njit(cache=True, nogil=True)
def _avgp_pessimistic(S, indptr, indices, out):
    """AvgP of each row of S (n_queries x n_pictures) with its relevant pictures given as CSR
    (indptr, indices), ties pessimistic, without sorting a row: the k-th best relevant
    picture (by score) sits at rank k + the number of non-relevant pictures scoring at least
    as much, so AvgP = mean over k of k / that rank (tied relevant pictures take consecutive
    ranks after the tied non-relevant ones, whatever their order: the sum is the same)."""
    n = S.shape[1]
    for q in range(S.shape[0]):
        a, b = indptr[q], indptr[q + 1]
        m = b - a
        if m == 0:
            out[q] = 0.0
            continue
        rel = np.empty(m)
        for j in range(m):
            rel[j] = S[q, indices[a + j]]
        rel = np.sort(rel)[::-1]
        is_rel = np.zeros(n, np.bool_)
        for j in range(m):
            is_rel[indices[a + j]] = True
        total = 0.0
        for k in range(m):
            above = 0
            for i in range(n):
                if not is_rel[i] and S[q, i] >= rel[k]:
                    above += 1
            total += (k + 1) / (k + 1 + above)
        out[q] = total / m


def average_precision_pessimistic(scores, relevance) -> np.ndarray:
    """average_precision(scores, relevance, ties="pessimistic"), the same numbers, in
    O(relevant x pictures) per query instead of a sort of every row: the validation
    criterion runs every `eval_every` updates of every fit, and on Corel 5k the sort cost
    more than the projection it ranks (0.15 s an evaluation, 40 of them a fit)."""
    S = np.ascontiguousarray(np.atleast_2d(scores), dtype=np.float64)
    R = sp.csr_matrix(relevance)
    R.eliminate_zeros()
    R.sort_indices()
    if S.shape != R.shape:
        raise ValueError(f"scores {S.shape} and relevance {R.shape} differ in shape")
    if np.isnan(S).any():
        raise ValueError("scores contain NaN; a model produced invalid output")
    out = np.empty(S.shape[0])
    _avgp_pessimistic(S, R.indptr.astype(np.int64), R.indices.astype(np.int64), out)
    return out
