"""Kernel PAMIR: the Passive-Aggressive ranking model with W held as support sets.

TPAMI 2008 §III-E: every w_t stays a linear combination of training pictures, w_t =
sum_j alpha_{t,j} p_j, so the text-space score of a picture p for word t is
[f(p)]_t = sum_j alpha_{t,j} k(p_j, p) for any picture kernel k. The PA-I step of §III-D on a
triplet (q, p+, p-) becomes: loss = max(0, 1 - q.(f(p+) - f(p-))),
||v||^2 = ||q||^2 (k(p+,p+) + k(p-,p-) - 2 k(p+,p-)), tau = min(c, loss / ||v||^2), then
alpha_{t,p+} += tau q_t and alpha_{t,p-} -= tau q_t for each query word t.

Representation chosen here: the training pictures are a fixed set, so alpha is a dense
(T x n_train) array and the training Gram matrix is computed once before the updates. Each
update then reads two rows of K (p+ and p-), which every kernel would otherwise have to
recompute on demand a great many times (each picture is drawn as p+ or p- thousands of times
in a million updates; one match-kernel row alone is n_train x 77 x 77 x 109 flops). The cost
is n_train^2 floats: 128 MB for Corel's 4,000 training pictures, too much beyond ~20,000.
After training, only the pictures with a non-zero alpha are kept: the support set.

The kernels of §IV-C (LinearKernel on bags of visterms, ExpectedLikelihoodKernel and
MatchKernel on block descriptors) are pamir.models.kernels'; their names stay importable from
here.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..evaluation import mean_average_precision
from .base import TextSpaceModel, TrainingQueries, dense_float32
# The kernels stay importable from here too, as before they had a module of their own.
from .kernels import (KERNELS, ExpectedLikelihoodKernel, LinearKernel,  # noqa: F401
                      MatchKernel, make_kernel, match_grams)
from .pa import check_pa_params, pa1_tau, train_pa


# ------------------------------------------------------------------------------- TRIPLETS
def sample_triplets(queries: TrainingQueries, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n x 3) int64 rows (query, relevant picture, non-relevant picture), as linear PAMIR.

    The query is uniform over the training queries that have a non-relevant picture, p+ uniform
    over its relevant pictures, p- uniform over the others (drawn again while relevant).
    """
    R = queries.relevance.tocsr()
    R.sort_indices()
    n_pictures = R.shape[1]
    n_rel = np.diff(R.indptr)
    usable = np.flatnonzero((n_rel > 0) & (n_rel < n_pictures))
    if len(usable) == 0:
        raise ValueError("no training query has both relevant and non-relevant pictures: "
                         "the captions must differ between pictures")
    q = usable[rng.integers(len(usable), size=n)]
    pos = R.indices[R.indptr[q] + (rng.random(n) * n_rel[q]).astype(np.int64)]
    keys = np.asarray(np.repeat(np.arange(R.shape[0]), n_rel), np.int64) * n_pictures + R.indices
    neg = rng.integers(n_pictures, size=n)
    todo = np.arange(n)
    while len(todo):
        k = q[todo] * n_pictures + neg[todo]
        hit = np.searchsorted(keys, k)
        relevant = keys[np.minimum(hit, len(keys) - 1)] == k
        todo = todo[relevant]
        neg[todo] = rng.integers(n_pictures, size=len(todo))
    return np.stack([q, pos, neg], axis=1).astype(np.int64)


@njit(cache=True, nogil=True, fastmath=True)  # fastmath: lets the dot products use SIMD
def _pa_updates(alpha, K, kdiag, q_indptr, q_indices, q_data, q_sqnorm, triplets, c):
    """PA-I steps in kernel form over the triplets; alpha (T x n) is updated in place.

    Returns (number of triplets with a positive loss, their summed loss before the step).
    """
    n = K.shape[0]
    n_loss = 0
    total = 0.0
    for i in range(triplets.shape[0]):
        qi, pos, neg = triplets[i, 0], triplets[i, 1], triplets[i, 2]
        a, b = q_indptr[qi], q_indptr[qi + 1]
        margin = 0.0
        for k in range(a, b):
            t = q_indices[k]
            s = 0.0
            for j in range(n):
                s += alpha[t, j] * (K[pos, j] - K[neg, j])
            margin += q_data[k] * s
        loss = 1.0 - margin
        if loss <= 0.0:
            continue
        n_loss += 1
        total += loss
        sq = q_sqnorm[qi] * (kdiag[pos] + kdiag[neg] - 2.0 * K[pos, neg])
        if sq <= 1e-12:
            continue  # p+ and p- coincide in feature space: no step can separate them
        tau = pa1_tau(loss, sq, c)
        for k in range(a, b):
            t = q_indices[k]
            alpha[t, pos] += tau * q_data[k]
            alpha[t, neg] -= tau * q_data[k]
    return n_loss, total


def pa_updates(alpha: np.ndarray, K: np.ndarray, Q: sp.csr_matrix, triplets: np.ndarray,
               c: float, kdiag: np.ndarray | None = None) -> tuple[int, float]:
    """Run PA-I steps on `triplets` (rows query, p+, p- into Q and K), updating alpha in place.

    alpha: (T x n) float64; K: (n x n) symmetric training Gram matrix; Q: (n_queries x T).
    """
    Q = sp.csr_matrix(Q, dtype=np.float64)
    kdiag = np.diagonal(K).copy() if kdiag is None else np.asarray(kdiag, np.float64)
    q_sqnorm = np.asarray(Q.multiply(Q).sum(axis=1), np.float64).ravel()
    return _pa_updates(alpha, np.ascontiguousarray(K, np.float64), kdiag, Q.indptr,
                       Q.indices, Q.data, q_sqnorm, np.ascontiguousarray(triplets, np.int64),
                       float(c))


# ---------------------------------------------------------------------------------- MODEL
class KernelPAMIR(TextSpaceModel):
    """PAMIR with a picture kernel: [f(p)]_t = sum_j alpha_{t,j} k(p_j, p).

    kernel: "linear" (bags of visterms), "elk" or "match" (block descriptors); `input` says
        which this instance takes. sigma: the match kernel's RBF width; covariance, ridge,
        normalize: the expected likelihood kernel's Gaussians; block_scaling: how block
        histograms become descriptors for the block kernels ("sqrt", "log1p", "none").
    c, n_updates, eval_every, patience, random_state: the PA training of pamir.models.pa,
        with the same names and meaning as linear PAMIR's.

    Defaults, measured on Corel 5k (32-px blocks, sqrt counts): a block's nearest block in
    another picture lies at 23 / 34 / 46 (10% / 50% / 90%), so sigma below ~8 makes every match
    0; per-picture variances of sqrt counts are 0 / 1.3 / 13, and with a ridge of 1 the median
    normalised ELK between two pictures is 1e-11 (every picture alone), with 64 it is 0.09.

    Fitted: alpha_ (T x n_support), support_ (indices of the support pictures in the
    training set), support_rep_ (their kernel representation), timings_, and what
    pamir.models.pa says every PA model reports.
    """

    kind = "kernel-pamir"
    #: One sub-grid per kernel: each kernel's own width is tried with every c. A user who
    #: fixes the kernel keeps only its sub-grid (pamir.training.selection).
    param_grid = [
        {"kernel": ["linear"], "c": [0.01, 0.1, 1.0]},
        {"kernel": ["match"], "sigma": [8.0, 16.0, 32.0, 64.0], "c": [0.01, 0.1, 1.0]},
        {"kernel": ["elk"], "ridge": [4.0, 16.0, 64.0, 256.0], "c": [0.01, 0.1, 1.0]},
    ]

    def __init__(self, kernel: str = "linear", c: float = 0.1, n_updates: int = 3_000_000,
                 eval_every: int = 100_000, patience: int | None = 5, sigma: float = 16.0,
                 covariance: str = "diag", ridge: float = 64.0, normalize: bool = True,
                 block_scaling: str = "sqrt", random_state: int | None = 0):
        self.kernel = kernel
        self.c = c
        self.n_updates = n_updates
        self.eval_every = eval_every
        self.patience = patience
        self.sigma = sigma
        self.covariance = covariance
        self.ridge = ridge
        self.normalize = normalize
        self.block_scaling = block_scaling
        self.random_state = random_state

    @property
    def input(self) -> str:
        kind = KERNELS[self.kernel].input if self.kernel in KERNELS else "bags"
        return "vectors" if kind == "bags" else kind  # the linear kernel takes any vectors

    @property
    def kernel_(self):
        """The kernel object of the current parameters (checked)."""
        return make_kernel(self.kernel, sigma=float(self.sigma), covariance=self.covariance,
                           ridge=float(self.ridge), normalize=bool(self.normalize),
                           block_scaling=self.block_scaling)

    def _check_params(self) -> None:
        check_pa_params("kernel PAMIR", self.c, self.n_updates, self.eval_every, self.patience)
        self.kernel_  # noqa: B018 - builds the kernel, which checks its own parameters

    # training ---------------------------------------------------------------------------
    def fit(self, X, Y, *, validation=None, callback=None, gram=None, gram_valid=None):
        """Learn alpha from training pictures X with captions Y (n x T presence).

        validation=(X_valid, Y_valid) early-stops on validation AvgP. gram / gram_valid:
        precomputed K(X, X) (n x n) and K(X_valid, X) (n_valid x n), to share one (costly)
        kernel computation across a grid of c; they must come from this model's kernel.
        """
        self._check_params()
        kernel = self.kernel_
        rep = kernel.prepare(X)
        n = kernel.length(rep)
        Y = sp.csr_matrix(Y)
        if Y.shape[0] != n:
            raise ValueError(f"{n} training pictures but {Y.shape[0]} caption rows")
        timings = {}
        t0 = time.perf_counter()
        K = kernel.gram(rep, rep) if gram is None else np.asarray(gram, np.float64)
        if K.shape != (n, n):
            raise ValueError(f"gram has shape {K.shape}; expected ({n}, {n})")
        K = np.ascontiguousarray(K)
        timings["gram_train_s"] = time.perf_counter() - t0

        train_q = TrainingQueries(Y)
        valid = None
        if validation is not None:
            X_valid, Y_valid = validation
            t0 = time.perf_counter()
            rep_v = kernel.prepare(X_valid)
            Kv = kernel.gram(rep_v, rep) if gram_valid is None else np.asarray(gram_valid)
            n_v = kernel.length(rep_v)
            if Kv.shape != (n_v, n):
                raise ValueError(f"gram_valid has shape {Kv.shape}; expected ({n_v}, {n})")
            timings["gram_valid_s"] = time.perf_counter() - t0
            valid_q = TrainingQueries(Y_valid, idf_weights=train_q.idf)
            valid = (Kv, valid_q.vectors, valid_q.relevance)

        alpha, timings_pa = self._train(K, train_q, valid, callback)
        timings.update(timings_pa)
        self.support_ = np.flatnonzero(np.any(alpha != 0, axis=0))
        self.alpha_ = np.ascontiguousarray(alpha[:, self.support_])
        self.support_rep_ = kernel.take(rep, self.support_)
        self.n_train_, self.n_words_ = n, Y.shape[1]
        self.timings_ = timings
        return self

    def _train(self, K, train_q: TrainingQueries, valid, callback):
        rng = np.random.default_rng(self.random_state)
        T, n = train_q.vectors.shape[1], K.shape[0]
        Q = sp.csr_matrix(train_q.vectors, dtype=np.float64)
        kdiag = np.diagonal(K).copy()
        alpha = np.zeros((T, n))
        eval_s = [0.0]

        def steps(done, k):
            return pa_updates(alpha, K, Q, sample_triplets(train_q, k, rng), self.c, kdiag)

        def score(weights):
            t0 = time.perf_counter()
            Kv, Qv, Rv = valid
            avgp = mean_average_precision(Kv @ weights.T, Qv, Rv)
            eval_s[0] += time.perf_counter() - t0
            return avgp

        run = train_pa(steps, lambda done: alpha.copy(), None if valid is None else score,
                       n_updates=self.n_updates, eval_every=self.eval_every,
                       patience=self.patience, callback=callback)
        self.n_updates_, self.best_update_ = run.n_updates, run.best_update
        self.best_valid_avgp_ = run.best_valid_avgp
        self.history_ = run.history
        return run.best, {"pa_s": run.seconds, "eval_s": eval_s[0],
                          "us_per_update": 1e6 * run.seconds / max(run.n_updates, 1)}

    @property
    def refit_params_(self) -> dict:
        """The settings to retrain without validation data (train+valid): the kept point."""
        return {"n_updates": int(self.best_update_)}

    # scoring ----------------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "alpha_"):
            raise RuntimeError("this KernelPAMIR is not fitted: call fit(X, Y) or load a model")

    def transform(self, X, chunk: int = 1024) -> np.ndarray:
        """(n x T) float32 text-space vectors f(p) = alpha K(support, p), `chunk` at a time."""
        self._check_fitted()
        kernel = self.kernel_
        rep = kernel.prepare(X)
        n = kernel.length(rep)
        Z = np.zeros((n, self.alpha_.shape[0]), np.float32)
        if len(self.support_) == 0:
            return Z
        for s in range(0, n, chunk):
            part = kernel.take(rep, np.arange(s, min(s + chunk, n)))
            Z[s:s + chunk] = kernel.gram(part, self.support_rep_) @ self.alpha_.T
        return dense_float32(Z)

    # saving -----------------------------------------------------------------------------
    def _state(self):
        self._check_fitted()
        meta = {"n_train": self.n_train_, "n_words": self.n_words_,
                "n_updates": self.n_updates_, "best_update": self.best_update_,
                "best_valid_avgp": self.best_valid_avgp_, "history": self.history_,
                "timings": self.timings_}
        arrays = {"alpha": self.alpha_, "support": self.support_}
        arrays |= {f"support_{k}": v for k, v in
                   self.kernel_.to_arrays(self.support_rep_).items()}
        return meta, arrays

    def _set_state(self, meta, arrays):
        self.alpha_ = np.ascontiguousarray(arrays["alpha"], np.float64)
        self.support_ = arrays["support"].astype(np.int64)
        rep = {k[len("support_"):]: v for k, v in arrays.items() if k.startswith("support_")}
        self.support_rep_ = self.kernel_.from_arrays(rep)
        self.n_train_, self.n_words_ = meta["n_train"], meta["n_words"]
        self.n_updates_, self.best_update_ = meta["n_updates"], meta["best_update"]
        self.best_valid_avgp_ = meta["best_valid_avgp"]
        self.history_ = meta["history"]
        self.timings_ = meta.get("timings", {})
