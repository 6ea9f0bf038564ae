"""PLSA with its latent space constrained toward the text (Monay & Gatica-Perez, ACM MM 2004).

The aspect model says terms t and visterms v are independent of the picture p given an aspect
z (TPAMI §II-B, eqs. 2-3):  P(t|p) = Σ_z P(z|p) P(t|z),  P(v|p) = Σ_z P(z|p) P(v|z).
Training is in two steps, so that the aspects are shaped by the captions alone:
  1. EM on the training captions for P(z|d) and P(t|z);
  2. EM for P(v|z) on the training visterm counts with P(z|d) held fixed.
A new picture is folded in: EM for its P(z|p) from its visterms, P(v|z) held fixed. Then
`transform` gives P(t|p) (output="probability", the paper's), or log P(t|p) (output="log"),
with which the dot product with an idf query vector is an idf-weighted query log-likelihood
Σ_t q_t log P(t|p): a picture must then explain every query word, not just the most
probable one. Which one is used is a hyper-parameter, chosen on validation.

Every EM step is one pass over the non-zero counts only (a numba kernel: the E-step
posterior P(z|d,w) ∝ P(z|d) P(w|z) is formed per count and accumulated straight into the
M-step sums, so no (counts x aspects) array is ever stored). The log-likelihood
Σ_{d,w} n(d,w) log P(w|d) of every iteration is kept in `loglik_`; EM never lets it fall.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit
from sklearn.utils import check_random_state

from .base import TextSpaceModel, dense_float32

OUTPUTS = ("probability", "log")
LOG_FLOOR = 1e-12  # log P(t|p) of a word no aspect of the picture can emit: finite, last


@njit(cache=True)
def _em_pass(indptr, indices, data, theta, phiT, acc_theta, acc_phi, update_phi):
    """One E-step over the non-zeros of a CSR count matrix N (documents x words).

    theta: P(z|d) (n x K); phiT: P(w|z) transposed (W x K). Adds to acc_theta[d, z] (and,
    if update_phi, acc_phi[w, z]) the sums Σ n(d,w) P(z|d,w) / P(z|d) (resp. / P(w|z)), so
    that the M-step is a product and a normalisation. Returns Σ n(d,w) log P(w|d) at the
    current parameters. Words with P(w|d) = 0 (visterms never seen in training) are skipped.
    """
    K = theta.shape[1]
    loglik = 0.0
    for d in range(len(indptr) - 1):
        for j in range(indptr[d], indptr[d + 1]):
            w = indices[j]
            p = 0.0
            for k in range(K):
                p += theta[d, k] * phiT[w, k]
            if p <= 0.0:
                continue
            loglik += data[j] * np.log(p)
            r = data[j] / p
            for k in range(K):
                acc_theta[d, k] += r * phiT[w, k]
            if update_phi:
                for k in range(K):
                    acc_phi[w, k] += r * theta[d, k]
    return loglik


def _normalise_rows(A: np.ndarray) -> np.ndarray:
    s = A.sum(axis=1, keepdims=True)
    np.divide(A, s, out=A, where=s > 0)
    return A


def _csr_counts(N, name: str) -> sp.csr_matrix:
    N = sp.csr_matrix(N, dtype=np.float64)
    N.sum_duplicates()
    if N.nnz and N.data.min() < 0:
        raise ValueError(f"{name}: PLSA needs non-negative counts, found {N.data.min():g}")
    return N


def run_em(N: sp.csr_matrix, theta: np.ndarray, phiT: np.ndarray, *, update_theta: bool,
           update_phi: bool, n_iter: int, tol: float) -> list[float]:
    """EM on counts N for theta = P(z|d) and phiT = P(w|z)^T, updated in place.

    Either factor can be held fixed. Stops after n_iter iterations or when the relative gain
    in log-likelihood falls under tol. Returns the log-likelihood before each iteration and
    after the last one.
    """
    history: list[float] = []
    for _ in range(n_iter + 1):
        acc_theta = np.zeros_like(theta)
        acc_phi = np.zeros_like(phiT) if update_phi else np.zeros((1, 1))
        ll = _em_pass(N.indptr, N.indices, N.data, theta, phiT, acc_theta, acc_phi, update_phi)
        history.append(float(ll))
        converged = len(history) > 1 and ll - history[-2] <= tol * abs(history[-2])
        if len(history) == n_iter + 1 or converged:
            break
        if update_theta:
            theta *= acc_theta
            _normalise_rows(theta)
        if update_phi:
            phiT *= acc_phi
            _normalise_rows(phiT.T)  # columns of phiT: P(.|z) sums to one over words
    return history


class PLSA(TextSpaceModel):
    """Text-constrained PLSA: pictures as P(t|p), t over the vocabulary.

    fit(X, Y): X (n x V) visterm counts (a sparse bag of visterms; tf-idf bags also work, as
    fractional counts), Y (n x T) caption word counts or presence.
    transform(X) -> (n x T) float32 P(t|p).

    n_aspects: K. n_iter_text, n_iter_visual, n_iter_fold: EM iterations of the three steps
    (each stops early once the relative log-likelihood gain is under tol). output:
    "probability" (P(t|p)) or "log" (log P(t|p), floored at LOG_FLOOR).
    """

    kind = "plsa"
    #: TPAMI Table VI: 400 aspects on Corel Small with a 50,000-visterm codebook. "log" makes
    #: Z q an idf-weighted query log-likelihood (module docstring).
    param_grid = {"n_aspects": [50, 100, 200, 400], "n_iter_fold": [10, 50],
                  "output": ["probability", "log"]}

    def __init__(self, n_aspects: int = 400, n_iter_text: int = 100, n_iter_visual: int = 100,
                 n_iter_fold: int = 50, tol: float = 1e-6, output: str = "probability",
                 random_state: int | None = 0):
        self.n_aspects = n_aspects
        self.n_iter_text = n_iter_text
        self.n_iter_visual = n_iter_visual
        self.n_iter_fold = n_iter_fold
        self.tol = tol
        self.output = output
        self.random_state = random_state

    def _check_params(self):
        if int(self.n_aspects) < 1:
            raise ValueError(f"n_aspects={self.n_aspects}: use at least 1 aspect")
        for name in ("n_iter_text", "n_iter_visual", "n_iter_fold"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{name}={getattr(self, name)}: use 0 or more iterations")
        if self.output not in OUTPUTS:
            raise ValueError(f"output={self.output!r}: use one of {OUTPUTS}")

    def fit(self, X, Y, *, validation=None, callback=None) -> "PLSA":
        """EM on the captions Y, then P(v|z) on the visterm counts X with P(z|d) fixed.

        Validation data is not used (pamir.training.selection chooses the hyper-parameters).
        """
        self._check_params()
        X, Y = _csr_counts(X, "X (visterm counts)"), _csr_counts(Y, "Y (captions)")
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} pictures but Y has {Y.shape[0]} captions")
        rng = check_random_state(self.random_state)
        n, K = Y.shape[0], int(self.n_aspects)
        # Random start for the text step (EM needs asymmetry to separate the aspects).
        theta = _normalise_rows(rng.random((n, K)) + 0.5)
        phi_t = _normalise_rows((rng.random((K, Y.shape[1])) + 0.5)).T.copy()
        text = run_em(Y, theta, phi_t, update_theta=True, update_phi=True,
                      n_iter=int(self.n_iter_text), tol=self.tol)
        # Visual step: the log-likelihood is concave in P(v|z) once P(z|d) is fixed, so a
        # uniform start is as good as any and needs no randomness.
        phi_v = np.full((X.shape[1], K), 1.0 / X.shape[1])
        visual = run_em(X, theta, phi_v, update_theta=False, update_phi=True,
                        n_iter=max(int(self.n_iter_visual), 1), tol=self.tol)
        self.term_given_aspect_ = phi_t.T.astype(np.float32)      # P(t|z), K x T
        self.visterm_given_aspect_ = phi_v.astype(np.float32)      # P(v|z)^T, V x K
        self.loglik_ = {"text": text, "visual": visual}
        self.n_terms_, self.n_visterms_ = Y.shape[1], X.shape[1]
        return self

    def fold_in(self, X) -> tuple[np.ndarray, list[float]]:
        """P(z|p) (n x K) of new pictures from their visterm counts, P(v|z) held fixed.

        Returns the aspect mixtures and the fold-in log-likelihood history (all pictures).
        Pictures without a known visterm keep the uniform mixture.
        """
        self._check_fitted()
        X = _csr_counts(X, "X (visterm counts)")
        if X.shape[1] != self.n_visterms_:
            raise ValueError(f"X has {X.shape[1]} visterms but the model was fitted on "
                             f"{self.n_visterms_}; use the same visual codebook")
        # Likelihood is concave in P(z|p) with P(v|z) fixed: start from uniform.
        theta = np.full((X.shape[0], self.n_aspects), 1.0 / self.n_aspects)
        phi_v = self.visterm_given_aspect_.astype(np.float64)
        history = run_em(X, theta, phi_v, update_theta=True, update_phi=False,
                         n_iter=int(self.n_iter_fold), tol=self.tol)
        return theta, history

    def transform(self, X) -> np.ndarray:
        """(n x T) float32 P(t|p) = Σ_z P(t|z) P(z|p) (or its log), P(z|p) folded in from X."""
        self._check_params()
        theta, _ = self.fold_in(X)
        P = theta @ self.term_given_aspect_.astype(np.float64)
        return dense_float32(np.log(np.maximum(P, LOG_FLOOR)) if self.output == "log" else P)

    def _check_fitted(self):
        if not hasattr(self, "term_given_aspect_"):
            raise RuntimeError("this PLSA model is not fitted yet: call fit(X, Y) or load it")

    def _state(self):
        self._check_fitted()
        meta = {"loglik": self.loglik_, "n_terms": self.n_terms_,
                "n_visterms": self.n_visterms_}
        return meta, {"term_given_aspect": self.term_given_aspect_,
                      "visterm_given_aspect": self.visterm_given_aspect_}

    def _set_state(self, meta, arrays):
        self.term_given_aspect_ = arrays["term_given_aspect"].astype(np.float32)
        self.visterm_given_aspect_ = arrays["visterm_given_aspect"].astype(np.float32)
        self.loglik_ = meta.get("loglik", {})
        self.n_terms_ = int(meta["n_terms"])
        self.n_visterms_ = int(meta["n_visterms"])
