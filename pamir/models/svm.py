"""Concept classification: one linear SVM per vocabulary word (TPAMI §II-A, §V-A).

Each word t gets a binary classifier "does t occur in this picture's caption" on the linear
visterm kernel, i.e. a linear SVM on the L2 tf-idf bags of visterms (scikit-learn's
LinearSVC: liblinear, which frees the GIL, so two threads train two words at once without
copying X). C is tuned for each word on validation: the C whose decision values give the
best AvgP for that word's single-word query on the validation pictures. Words without a
relevant validation picture take the C that is best on average over the other words.

Multi-word queries fuse the words' scores after normalising each classifier's mean and
variance (Ayache et al., as TPAMI §II-A adopts). The statistics come from the validation
pictures' decision values when they are given (held-out pictures look like the pictures
that will be ranked; training pictures sit on or beyond the margin by construction), else
from the training pictures. `transform(X)` gives the normalised scores, so Z q is a
weighted sum; with fusion="mean" `score_queries` averages the query words plainly.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp
from joblib import Parallel, delayed
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

from ..evaluation.metrics import average_precision
from .base import TextSpaceModel, dense_float32

CLASS_WEIGHTS = ("none", "balanced")
FUSIONS = ("mean", "idf")


def _fit_word(X, y, X_valid, y_valid, Cs, class_weight, seed, max_iter):
    """Fit one word's SVM for every C; return (coefs n_C x V, intercepts, validation AvgPs).

    A word with no positive (or no negative) training picture gets zero weights: it cannot be
    learned, and a constant score ranks nothing.
    """
    n_C, V = len(Cs), X.shape[1]
    coefs, intercepts = np.zeros((n_C, V), np.float32), np.zeros(n_C)
    avgp = np.full(n_C, np.nan)
    if y.all() or not y.any():
        return coefs, intercepts, avgp
    for i, C in enumerate(Cs):
        clf = LinearSVC(C=C, class_weight=None if class_weight == "none" else class_weight,
                        random_state=seed, max_iter=max_iter)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(X, y)
        coefs[i], intercepts[i] = clf.coef_[0], clf.intercept_[0]
    if X_valid is not None and y_valid.any():
        scores = np.asarray(X_valid @ coefs.T.astype(np.float64)).T + intercepts[:, None]
        avgp = average_precision(scores, np.tile(y_valid, (n_C, 1)))
    return coefs, intercepts, avgp


class WordSVM(TextSpaceModel):
    """Per-word linear SVMs on bags of visterms; pictures as normalised per-word scores.

    fit(X, Y, X_valid, Y_valid): X (n x V) tf-idf bags, Y (n x T) caption presence; the
    validation pair tunes C per word and gives the normalisation statistics.
    transform(X) -> (n x T) float32 scores, each word's decision value standardised.

    Cs: the C values tried per word (one value: no tuning). class_weight: "none" or
    "balanced" (positives weighted up by their rarity). fusion: "mean" or "idf" (see module).
    """

    kind = "svm"
    input = "vectors"
    #: C is chosen per word inside fit (TPAMI §V-A), from `Cs`; these are chosen for all words.
    param_grid = {"class_weight": ["none", "balanced"], "fusion": ["mean", "idf"]}

    def __init__(self, Cs=(0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0),
                 class_weight: str = "none", fusion: str = "mean", C_default: float = 1.0,
                 max_iter: int = 5000, n_jobs: int = 2, random_state: int | None = 0):
        self.Cs = Cs
        self.class_weight = class_weight
        self.fusion = fusion
        self.C_default = C_default
        self.max_iter = max_iter
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _check_params(self):
        if not len(self.Cs) or min(self.Cs) <= 0:
            raise ValueError(f"Cs={self.Cs}: give one or more positive C values")
        if self.class_weight not in CLASS_WEIGHTS:
            raise ValueError(f"class_weight={self.class_weight!r}: use one of {CLASS_WEIGHTS}")
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion={self.fusion!r}: use one of {FUSIONS}")

    def fit(self, X, Y, *, validation=None, callback=None) -> "WordSVM":
        self._check_params()
        X_valid, Y_valid = validation if validation is not None else (None, None)
        start = time.perf_counter()
        X, Y = sp.csr_matrix(X, dtype=np.float64), sp.csc_matrix(Y)
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} pictures but Y has {Y.shape[0]} captions")
        has_valid = X_valid is not None and Y_valid is not None
        if has_valid:
            X_valid, Y_valid = sp.csr_matrix(X_valid, dtype=np.float64), sp.csc_matrix(Y_valid)
            if X_valid.shape[1] != X.shape[1] or Y_valid.shape[1] != Y.shape[1]:
                raise ValueError("X_valid / Y_valid must have the columns of X / Y")
        T = Y.shape[1]
        label = lambda M, t: M[:, t].toarray().ravel() > 0  # noqa: E731
        jobs = (delayed(_fit_word)(X, label(Y, t), X_valid if has_valid else None,
                                   label(Y_valid, t) if has_valid else None, self.Cs,
                                   self.class_weight, self.random_state, self.max_iter)
                for t in range(T))
        results = Parallel(n_jobs=self.n_jobs, prefer="threads")(jobs)
        avgp = np.array([r[2] for r in results])  # T x n_C, NaN where not measurable
        choice = self._choose_C(avgp)
        coef = np.stack([results[t][0][choice[t]] for t in range(T)])
        intercept = np.array([results[t][1][choice[t]] for t in range(T)])
        mean, std = self._score_statistics(X_valid if has_valid else X, coef, intercept)
        # Fold the standardisation into the linear map: transform is then one product.
        self.coef_ = (coef / std[:, None]).astype(np.float32)
        self.intercept_ = ((intercept - mean) / std).astype(np.float32)
        self.C_ = np.array(self.Cs)[choice]
        self.valid_avgp_ = avgp
        self.score_mean_, self.score_std_ = mean, std
        self.fit_seconds_ = time.perf_counter() - start
        return self

    def _choose_C(self, avgp: np.ndarray) -> np.ndarray:
        """Index of each word's C: best validation AvgP (smallest C among ties); words that
        validation cannot judge take the C with the best mean AvgP over the judged words."""
        judged = ~np.isnan(avgp).any(axis=1)
        if judged.any():
            fallback = int(np.argmax(avgp[judged].mean(axis=0)))
        else:
            fallback = int(np.argmin(np.abs(np.log(np.array(self.Cs) / self.C_default))))
        choice = np.full(len(avgp), fallback)
        choice[judged] = np.argmax(avgp[judged], axis=1)
        return choice

    @staticmethod
    def _score_statistics(X, coef, intercept):
        scores = np.asarray(X @ coef.T.astype(np.float64)) + intercept
        mean, std = scores.mean(axis=0), scores.std(axis=0)
        std[std < 1e-12] = 1.0  # a constant classifier stays constant (zero after centring)
        return mean, std

    def transform(self, X) -> np.ndarray:
        """(n x T) standardised decision values of the per-word SVMs."""
        if not hasattr(self, "coef_"):
            raise RuntimeError("this WordSVM is not fitted yet: call fit(X, Y) or load it")
        X = sp.csr_matrix(X, dtype=np.float32)
        if X.shape[1] != self.coef_.shape[1]:
            raise ValueError(f"X has {X.shape[1]} visterms but the model was fitted on "
                             f"{self.coef_.shape[1]}; use the same visual codebook")
        return dense_float32(np.asarray(X @ self.coef_.T) + self.intercept_)

    def query_weights(self, Q) -> sp.csr_matrix:
        """Word weights of query vectors Q under this model's fusion rule (rows sum to 1 for
        "mean"; the idf query vectors unchanged for "idf")."""
        Q = sp.csr_matrix(Q, dtype=np.float32)
        if self.fusion == "idf":
            return Q
        B = (Q > 0).astype(np.float32)
        n = np.maximum(np.asarray(B.sum(axis=1)).ravel(), 1.0)
        return sp.csr_matrix(sp.diags(1.0 / n) @ B)

    def score_queries(self, Q, X) -> np.ndarray:
        """(n_queries x n_pictures) fused scores of queries Q over pictures X."""
        return np.asarray(self.query_weights(Q) @ self.transform(X).T)

    def _state(self):
        meta = {"C": self.C_, "fit_seconds": self.fit_seconds_}
        return meta, {"coef": self.coef_, "intercept": self.intercept_,
                      "valid_avgp": self.valid_avgp_, "score_mean": self.score_mean_,
                      "score_std": self.score_std_}

    def _set_state(self, meta, arrays):
        self.coef_, self.intercept_ = arrays["coef"], arrays["intercept"]
        self.valid_avgp_ = arrays["valid_avgp"]
        self.score_mean_, self.score_std_ = arrays["score_mean"], arrays["score_std"]
        self.C_ = np.asarray(meta["C"], dtype=np.float64)
        self.fit_seconds_ = float(meta.get("fit_seconds", 0.0))
