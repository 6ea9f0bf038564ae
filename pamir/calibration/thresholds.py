"""Annotation rules beyond a fixed number of words: per-word thresholds on calibrated
probabilities.

The standard rule gives every picture its 5 best words (metrics.annotation_metrics). Here a
picture gets each word whose calibrated probability (pamir.calibration, per word) reaches the
word's threshold, however many that is. Thresholds are chosen on validation pictures:
- "global": one probability for every word, the one whose (mean P, mean R) F1 is best;
- "per word": each word's own, the one with the best F1 of that word on validation, shrunk
  toward the global one as if SHRINK more validation pictures had voted for it (a threshold
  fitted on two pictures is noise): n / (n + SHRINK) of the word's own, n its validation
  pictures.
Which rule a system uses (top 5, or thresholds) is chosen on validation by `choose_rule`,
with the thresholds cross-fitted (fitted on one half of the validation pictures, scored on
the other, both ways) so that they are not scored on the pictures that set them.
"""

from __future__ import annotations

import numpy as np

from ..evaluation.metrics import _dense_bool, annotation_metrics, prediction_metrics

#: The probability thresholds tried.
THRESHOLDS = np.round(np.arange(0.05, 0.96, 0.05), 2)
#: Pseudo-pictures pulling a word's threshold toward the global one. Chosen on validation
#: (cross-fitted, PAMIR on the cnn view, 260 words): F1 32.5 with none (words with one
#: picture get thresholds of their own), 42.65 at 3, 42.66 at 10, 42.44 at 30, and 42.33
#: for the global threshold alone: beyond none, within the noise.
SHRINK = 10
RULES = ("top 5", "global threshold", "per-word thresholds")


def threshold_predictions(P: np.ndarray, thresholds) -> np.ndarray:
    """(n x T) bool: word t for picture i where P[i, t] >= thresholds[t] (NaN: never)."""
    P = np.asarray(P, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(P, nan=-1.0) >= np.asarray(thresholds, dtype=np.float64)


def fit_thresholds(P: np.ndarray, truth, *, per_word: bool = True,
                   shrink: float = SHRINK) -> np.ndarray:
    """(T,) probability thresholds chosen on validation pictures (P: their n x T calibrated
    word probabilities, truth: their captions), as the module docstring says."""
    Y = _dense_bool(truth)
    T = P.shape[1]
    best = max(THRESHOLDS, key=lambda t: prediction_metrics(
        threshold_predictions(P, np.full(T, t)), Y)["f1"])
    out = np.full(T, float(best))
    if not per_word:
        return out
    for t in np.flatnonzero(Y.sum(axis=0) > 0):
        p, y = np.nan_to_num(P[:, t], nan=-1.0), Y[:, t]
        pred = p[:, None] >= THRESHOLDS[None, :]
        tp = (pred & y[:, None]).sum(axis=0)
        f1 = 2 * tp / (pred.sum(axis=0) + y.sum())
        own = THRESHOLDS[int(np.argmax(f1))]  # the lowest of equals: recall counts too
        n = y.sum()
        out[t] = (n * own + shrink * best) / (n + shrink)
    return out


def choose_rule(P: np.ndarray, Z: np.ndarray, truth, n_words: int = 5, seed: int = 0
                ) -> tuple[str, dict]:
    """(the rule with the best validation F1, {rule: validation metrics}): top `n_words` of
    the scores Z, or thresholds on the probabilities P (cross-fitted on two halves)."""
    Y = _dense_bool(truth)
    out = {RULES[0]: annotation_metrics(Z, Y, n_words)}
    half = np.random.default_rng(seed).permutation(len(Y)) < len(Y) // 2
    for rule, per_word in ((RULES[1], False), (RULES[2], True)):
        pred = np.zeros_like(Y)
        for fit_on in (half, ~half):
            th = fit_thresholds(P[fit_on], Y[fit_on], per_word=per_word)
            pred[~fit_on] = threshold_predictions(P[~fit_on], th)
        out[rule] = prediction_metrics(pred, Y)
    return max(RULES, key=lambda r: out[r]["f1"]), out


__all__ = ["RULES", "SHRINK", "THRESHOLDS", "choose_rule", "fit_thresholds",
           "threshold_predictions"]
