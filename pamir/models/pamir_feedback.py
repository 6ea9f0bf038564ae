"""Relevance feedback to a trained PAMIR: one round of a person's right / wrong marks on a
query's results as PA-I updates (TPAMI eq. 10) of the rows of the query's words
(`feedback_delta`), kept or not (`apply_feedback`). The estimator's own learning after
training, from new captioned pictures, is PAMIR.partial_fit.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .pamir import pa_updates

#: PA-I passes over a feedback round's triplets (each stops early once none has a loss).
FEEDBACK_EPOCHS = 10


def feedback_delta(model, q, positives, negatives, *, c: float | None = None,
                   epochs: int = FEEDBACK_EPOCHS, margin: float | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """One round of relevance feedback to a fitted PAMIR `model` for the query vector q
    (T,): PA-I updates (TPAMI eq. 10) on every (q, right picture, wrong picture) triplet,
    `epochs` passes (each stops early once none has a loss), with the model's c and
    epsilon unless given.
    positives, negatives: the pictures' rows (sparse or dense).

    Returns (rows, delta): the words the update touched (q's non-zero words: a PA step
    changes no other row of W) and the change of those rows (len(rows) x V). The model
    is not changed: apply_feedback(model, rows, delta) keeps the round."""
    model._check_fitted()
    q = np.asarray(q, dtype=np.float64).ravel()
    rows = np.flatnonzero(q)
    n_pos, n_neg = positives.shape[0], negatives.shape[0]
    if len(rows) == 0 or n_pos == 0 or n_neg == 0:
        return rows, np.zeros((len(rows), model.W_.shape[1]), np.float32)
    X = sp.vstack([sp.csr_matrix(p, dtype=np.float32) for p in (positives, negatives)],
                  format="csr")
    Ws = np.array(model.W_[rows], dtype=np.float32)
    before = Ws.copy()
    Q = sp.csr_matrix(q[rows][None, :].astype(np.float32))
    pairs = np.array([(0, i, n_pos + j) for i in range(n_pos) for j in range(n_neg)],
                     dtype=np.int64)
    c = float(model.c if c is None else c)
    margin = float(model.epsilon if margin is None else margin)
    rng = np.random.default_rng(0)
    for _ in range(int(epochs)):
        losses = pa_updates(Ws, X, Q, pairs[rng.permutation(len(pairs))], c,
                            margins=np.full(len(pairs), margin))
        if not (losses > 0).any():
            break
    return rows, Ws - before

def apply_feedback(model, rows, delta):
    """Fold a feedback round's change (from feedback_delta) into the model's W_; returns the
    model."""
    model._check_fitted()
    model.W_[np.asarray(rows, dtype=np.int64)] += np.asarray(delta, dtype=model.W_.dtype)
    return model


__all__ = ["FEEDBACK_EPOCHS", "apply_feedback", "feedback_delta"]
