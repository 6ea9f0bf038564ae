"""Fitting a calibration (pamir.calibration says what it is): the shared logistic on a
validation query set (`fit_calibration`), a fitted system's own (`calibrate_system`: what
`pamir fit` keeps), and the annotation rule validation prefers (`choose_annotation_rule`).

scipy, scikit-learn and numba (pamir.calibration.thresholds) are imported at this module's
top: what fits a calibration imports it (the training, the folder look when it learns a
folder's words); `pamir search`, which reads one, does not.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression

from ..protocol import generate_queries
from ..text.vectors import text_vectors
from . import (
    CEILING,
    FEATURES,
    MAX_PAIRS,
    MAX_REFERENCE,
    RETRAINED_REFERENCE,
    Calibration,
    _sigmoid,
)
from .thresholds import RULES, choose_rule, fit_thresholds


def _fit_with_ceiling(X: np.ndarray, y: np.ndarray, w: np.ndarray, b: float,
                      weight: np.ndarray | None = None) -> tuple[np.ndarray, float, float]:
    """(w, b, ceiling) maximising the likelihood of P = ceiling x sigmoid(X w + b), each
    pair weighing `weight` (1 by default), from a plain logistic's (w, b); the L2 penalty of
    sklearn's C = 1 on w."""
    yf = y.astype(np.float64)
    m = np.ones(len(yf)) if weight is None else np.asarray(weight, np.float64)

    def loss(theta):
        w_, b_, g = theta[:-2], theta[-2], theta[-1]
        c = _sigmoid(g)
        s = _sigmoid(X @ w_ + b_)
        p = np.clip(c * s, 1e-12, 1 - 1e-12)
        dp = m * (-yf / p + (1 - yf) / (1 - p))  # d loss / d p
        du = dp * c * s * (1 - s)
        grad = np.concatenate([X.T @ du + w_, [du.sum(), (dp * s).sum() * c * (1 - c)]])
        value = -(m * (yf * np.log(p) + (1 - yf) * np.log(1 - p))).sum() + 0.5 * w_ @ w_
        return value, grad

    start = np.concatenate([w, [b, 4.0]])  # ceiling 0.98 to start
    res = minimize(loss, start, jac=True, method="L-BFGS-B", options={"maxiter": 500})
    return res.x[:-2], float(res.x[-2]), float(_sigmoid(res.x[-1]))


def word_pictures(Y: sp.spmatrix) -> list[np.ndarray]:
    """For each word (column of the n x T presence matrix Y), the pictures that have it."""
    C = sp.csc_matrix(Y)
    C.eliminate_zeros()
    C.sort_indices()
    return [C.indices[C.indptr[t]:C.indptr[t + 1]].astype(np.int64) for t in range(C.shape[1])]


def fit_calibration(Z_reference: np.ndarray, Q: sp.spmatrix, terms: Sequence[Sequence[int]],
                    relevance: sp.spmatrix, Y_train: sp.spmatrix, *, Z_scored=None,
                    seed: int = 0, info: dict | None = None,
                    features: Sequence[str] = FEATURES, ceiling: bool = CEILING,
                    negatives: int | None = None) -> Calibration:
    """Fit the shared logistic on every (query, picture) pair of a query set.

    Z_reference: (n x T) text-space vectors of the reference pictures (validation), which
    also set each query's standard scores; Z_scored: the vectors whose scores the logistic
    learns from (the same pictures, by default; a model trained on train only where the
    served model has seen the reference pictures); Q (n_queries x T) query vectors with
    their word indices `terms`; relevance: (n_queries x n) 0/1; Y_train: training captions
    (n_train x T presence), for the priors. features: those of FEATURES the logistic
    reads (the others weigh 0); without the interaction where it would make the slope
    negative at some prior. ceiling: fit the highest probability too (Calibration).
    negatives: the most non-relevant pairs fitted on (None: all): every relevant pair is
    kept, and a seeded sample of the others, each weighing as many as it stands for, so
    that the likelihood, and so the probabilities, are those of every pair in expectation
    (case-control sampling: the relevant pairs are the few that carry the information)."""
    Z_reference = np.asarray(Z_reference, dtype=np.float32)
    Zs = Z_reference if Z_scored is None else np.asarray(Z_scored, dtype=np.float32)
    rng = np.random.default_rng(seed)
    rows = np.arange(len(Z_reference))  # the pictures kept as the reference, and scored
    if len(rows) > MAX_REFERENCE:
        rows = np.sort(rng.choice(len(rows), MAX_REFERENCE, replace=False))
    Y_train = sp.csr_matrix(Y_train)
    lists = word_pictures(Y_train)
    # the scored model's standard scores come from its own spread over the same pictures
    scorer = Calibration(np.eye(len(FEATURES))[0], 0.0, Zs[rows], lists, Y_train.shape[0])
    Q = sp.csr_matrix(Q, dtype=np.float64)
    S = np.asarray(Q @ Zs[rows].T.astype(np.float64))
    X = scorer.features(Q, terms, S, own=True).reshape(-1, len(FEATURES))
    y = np.asarray(sp.csr_matrix(relevance)[:, rows].toarray(), dtype=bool).ravel()
    if y.all() or not y.any():
        raise ValueError("calibration: the validation queries need relevant and non-relevant "
                         "pictures both")
    weight = np.ones(len(y))
    if negatives is not None and (~y).sum() > negatives:
        off = np.flatnonzero(~y)
        keep = np.sort(np.concatenate([np.flatnonzero(y),
                                       rng.choice(off, negatives, replace=False)]))
        X, y = X[keep], y[keep]
        weight = np.where(y, 1.0, len(off) / negatives)
    if len(y) > MAX_PAIRS:
        keep = rng.choice(len(y), MAX_PAIRS, replace=False)
        X, y, weight = X[keep], y[keep], weight[keep]
    used = [FEATURES.index(f) for f in features]
    for cols in (used, [c for c in used if c != 3]):
        # C = 1: it shrinks the coefficients only where the pairs are few (a small collection)
        lr = LogisticRegression(max_iter=1000).fit(X[:, cols], y, sample_weight=weight)
        w, b, top = lr.coef_.ravel(), float(lr.intercept_[0]), 1.0
        if ceiling:
            w, b, top = _fit_with_ceiling(X[:, cols], y, w, b, weight)
        coef = np.zeros(len(FEATURES))
        coef[cols] = w
        try:
            return Calibration(coef, b, Z_reference[rows], lists, Y_train.shape[0],
                               {"pairs": int(len(y)), "queries": int(Q.shape[0]),
                                "positives": int(y.sum()),
                                "features": [FEATURES[c] for c in cols], **(info or {})},
                               ceiling=top)
        except ValueError:
            continue  # the slope falls below 0 somewhere: without the interaction
    raise ValueError("calibration: validation scores do not rise with relevance; the model "
                     "ranks no better than chance")


def calibrate_system(system, F_valid, Y_valid: sp.spmatrix, Y_train: sp.spmatrix, *,
                     scored=None, log=None, max_queries: int = 4000, seed: int = 0,
                     P_valid: np.ndarray | None = None) -> Calibration | None:
    """The calibration of a fitted system (pamir.system.System) on its validation pictures
    (their model inputs F_valid and captions Y_valid over the system's vocabulary): the
    protocol's validation queries (every subset of a caption, a seeded sample of
    `max_queries` beyond), vectors with the system's idf. `scored`: the system trained on
    train only, whose validation scores the logistic learns from when `system` was
    retrained on train + validation (its own would be in-sample, and over-confident).
    None, with a line logged, where validation cannot fit one (too few captions).
    P_valid: the validation pictures' class probabilities, for a system with a prior
    (pamir.zeroshot.prior): the probabilities are those of its mixed scores."""
    say = log or (lambda *a: None)
    Y_valid = sp.csr_matrix(Y_valid)
    caps = [Y_valid.indices[Y_valid.indptr[j]:Y_valid.indptr[j + 1]]
            for j in range(Y_valid.shape[0])]
    qs = generate_queries(caps, list(system.vocabulary), np.arange(len(caps)))
    if len(qs) > max_queries:
        qs = qs.subset(np.isin(np.arange(len(qs)), np.random.default_rng(seed).choice(
            len(qs), max_queries, replace=False)))
    Q = text_vectors(qs.presence(), system.idf)
    prior = getattr(system, "prior", None)

    def scores(of):  # the validation pictures' text-space vectors, the prior mixed in
        Z = of.transform_features(F_valid)
        return prior.mix(Z, P_valid) if prior is not None and P_valid is not None else Z

    Z = scores(system)
    Zs = None if scored is None else scores(scored)
    # retrained, the served model has seen the validation pictures and scores them higher
    # than it will new ones: its probabilities are read against the train-only model's
    # validation scores (RETRAINED_REFERENCE; measured in benchmarks/results/calibration.md)
    reference = Zs if Zs is not None and RETRAINED_REFERENCE == "train-only" else Z
    try:
        cal = fit_calibration(reference, Q, qs.terms, qs.relevance, Y_train, seed=seed,
                              Z_scored=Zs,
                              info={"scored_by": "train-only model" if scored is not None
                                    else "the model itself",
                                    "reference": "train-only model" if reference is Zs
                                    else "the model itself"})
    except ValueError as e:
        say(f"no calibrated probabilities: {e}")
        return None
    choose_annotation_rule(cal, Z if Zs is None else Zs, Y_valid, seed=seed)
    say(f"annotation rule on validation: {cal.annotation_rule} ("
        + ", ".join(f"{r} F1 {100 * m:.1f}" for r, m in cal.info["annotation_f1"].items())
        + ")")
    say(f"calibration on {len(qs):,} validation queries x {Z.shape[0]} pictures: logit = "
        + " + ".join(f"{c:.3f} {f}" for c, f in zip(cal.coef, FEATURES) if c)
        + f" + {cal.intercept:.3f}; at most {cal.ceiling:.3f}")
    return cal


def choose_annotation_rule(cal: Calibration, Z_valid: np.ndarray, Y_valid, *, seed: int = 0,
                           n_words: int = 5) -> np.ndarray:
    """Set cal's annotation rule (and thresholds) to what the validation pictures prefer
    (pamir.calibration.thresholds.choose_rule), their text-space vectors Z_valid scored by
    the model trained without them; standard scores over those same pictures. Returns those
    pictures' word probabilities (n x T) it chose on."""
    own = Calibration(cal.coef, cal.intercept, Z_valid, cal.word_pictures, cal.n_train,
                      ceiling=cal.ceiling)
    P = own.word_probabilities(Z_valid, own=True)
    rule, metrics = choose_rule(P, Z_valid, Y_valid, n_words, seed)
    cal.annotation_rule = rule
    cal.thresholds = (None if rule == RULES[0] else
                      fit_thresholds(P, Y_valid, per_word=rule == RULES[2]))
    cal.info["annotation_f1"] = {r: round(m["f1"], 4) for r, m in metrics.items()}
    return P


__all__ = ["calibrate_system", "choose_annotation_rule", "fit_calibration", "word_pictures"]
