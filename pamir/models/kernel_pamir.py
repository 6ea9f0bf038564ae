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

The kernels of §IV-C, each an object with a `name`, an `input` ("bags": CSR bags of visterms;
"blocks": per-picture block descriptors, a BlockSet or a list of (n_blocks x d) arrays) and
`__call__(A, B) -> (len(A) x len(B))` Gram matrix:
- LinearKernel: the visterm kernel, the dot product of tf-idf bags of visterms;
- ExpectedLikelihoodKernel: one Gaussian per picture fitted on its block descriptors,
  k(p, p') = integral N(x; m, S) N(x; m', S') dx = N(m; m', S + S') (Jebara & Kondor 2003);
- MatchKernel: K(A, B) = 1/2 [mean_a max_b k(a, b) + mean_b max_a k(a, b)] with the RBF minor
  kernel k(a, b) = exp(-||a - b||^2 / (2 sigma^2)) (Wallraven et al. 2003).
"""

from __future__ import annotations

import inspect
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..evaluation import mean_average_precision
from ..features.visterms import scale_blocks
from ..ragged import Ragged
from .base import TextSpaceModel, TrainingQueries, dense_float32
from .pa import check_pa_params, pa1_tau, train_pa

BLOCK_SCALINGS = ("none", "sqrt", "log1p")
LOG_2PI = math.log(2 * math.pi)


# ------------------------------------------------------------------------------------ INPUTS
def as_descriptor_sets(X, scaling: str) -> Ragged:
    """A BlockSet (pamir.features: its counts are scaled), a Ragged (taken as prepared and
    scaled already) or a list of (n_blocks x d) arrays, as the block kernels compare them."""
    if hasattr(X, "descriptors") and hasattr(X, "offsets"):
        if not hasattr(X, "counts"):
            return X  # already prepared (and scaled)
        sets = Ragged(np.asarray(X.counts()), np.asarray(X.offsets, np.int64))
    elif isinstance(X, (list, tuple)):
        if not len(X):
            raise ValueError("no pictures: give at least one (n_blocks x d) array")
        sets = Ragged.from_arrays(X)
    else:
        raise TypeError(f"block kernels take a BlockSet or a list of (n_blocks x d) arrays, "
                        f"not {type(X).__name__}")
    sets.check()
    desc = scale_blocks(sets.descriptors.astype(np.float32, copy=False), scaling)
    return Ragged(np.ascontiguousarray(desc, np.float32), sets.offsets)


def _check_scaling(scaling: str) -> None:
    if scaling not in BLOCK_SCALINGS:
        raise ValueError(f"block_scaling={scaling!r}: use one of {', '.join(BLOCK_SCALINGS)}")


# ----------------------------------------------------------------------------------- KERNELS
class LinearKernel:
    """The visterm kernel: k(p, p') = p . p' on (L2 tf-idf) bags of visterms."""

    name = "linear"
    input = "bags"

    def params(self) -> dict:
        return {}

    def prepare(self, X) -> sp.csr_matrix:
        if not sp.issparse(X) and not isinstance(X, np.ndarray):
            raise TypeError(f"the linear kernel takes a (n x V) matrix of bags of visterms, "
                            f"not {type(X).__name__}")
        X = sp.csr_matrix(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"bags of visterms must be a 2-D (n x V) matrix, got {X.shape}")
        return X

    def gram(self, A, B) -> np.ndarray:
        if A.shape[1] != B.shape[1]:
            raise ValueError(f"bags over {A.shape[1]} and {B.shape[1]} visterms: the pictures "
                             "must come from the same visterm codebook")
        return np.asarray((A @ B.T).toarray(), dtype=np.float64)

    def diag(self, A) -> np.ndarray:
        return np.asarray(A.multiply(A).sum(axis=1), dtype=np.float64).ravel()

    def take(self, A, idx):
        return A[np.asarray(idx, dtype=np.int64)]

    def length(self, A) -> int:
        return A.shape[0]

    def to_arrays(self, A) -> dict[str, np.ndarray]:
        return {"data": A.data, "indices": A.indices, "indptr": A.indptr,
                "shape": np.asarray(A.shape, np.int64)}

    def from_arrays(self, a: dict[str, np.ndarray]):
        return sp.csr_matrix((a["data"], a["indices"], a["indptr"]),
                             shape=tuple(int(v) for v in a["shape"]))

    def __call__(self, A, B) -> np.ndarray:
        return self.gram(self.prepare(A), self.prepare(B))


@dataclass
class Gaussians:
    """One Gaussian per picture: means (n x d), covariances (n x d) diagonal or (n x d x d)."""

    means: np.ndarray
    covariances: np.ndarray
    empty: np.ndarray  # (n,) bool: pictures without blocks (their kernel values are 0)

    def __len__(self) -> int:
        return len(self.means)


class ExpectedLikelihoodKernel:
    """k(p, p') = N(m; m', S + S'): the expected likelihood of two per-picture Gaussians.

    covariance: "diag" (O(d) per pair) or "full" (a d x d Cholesky per pair: small sets only).
    ridge: added to every variance (diagonal of S): it keeps a picture whose blocks agree in a
        dimension from having a zero variance there, and smooths the kernel (larger = broader).
    normalize: divide by sqrt(k(p, p) k(p', p')), so k(p, p) = 1. Raw values span hundreds of
        orders of magnitude in 109 dimensions (|S + S'|^(-1/2) alone), which would let the few
        pictures with the smallest variances dominate every PA step.
    """

    name = "elk"
    input = "blocks"

    def __init__(self, covariance: str = "diag", ridge: float = 1.0, normalize: bool = True,
                 block_scaling: str = "sqrt"):
        if covariance not in ("diag", "full"):
            raise ValueError(f"covariance={covariance!r}: use 'diag' or 'full'")
        if not ridge > 0:
            raise ValueError(f"ridge={ridge}: the expected likelihood kernel needs ridge > 0")
        _check_scaling(block_scaling)
        self.covariance, self.ridge, self.normalize = covariance, float(ridge), bool(normalize)
        self.block_scaling = block_scaling

    def params(self) -> dict:
        return {"covariance": self.covariance, "ridge": self.ridge,
                "normalize": self.normalize, "block_scaling": self.block_scaling}

    def prepare(self, X) -> Gaussians:
        if isinstance(X, Gaussians):
            return X
        sets = as_descriptor_sets(X, self.block_scaling)
        n, d = len(sets), sets.descriptors.shape[1]
        means = np.zeros((n, d))
        covs = np.zeros((n, d) if self.covariance == "diag" else (n, d, d))
        for i in range(n):
            blocks = sets.descriptors[sets.offsets[i]:sets.offsets[i + 1]].astype(np.float64)
            if len(blocks) == 0:
                continue
            means[i] = blocks.mean(axis=0)
            centred = blocks - means[i]
            if self.covariance == "diag":
                covs[i] = (centred ** 2).mean(axis=0)  # maximum likelihood
            else:
                covs[i] = centred.T @ centred / len(blocks)
        if self.covariance == "diag":
            covs += self.ridge
        else:
            covs += self.ridge * np.eye(d)
        return Gaussians(means, covs, sets.n_blocks == 0)

    def log_gram(self, A: Gaussians, B: Gaussians) -> np.ndarray:
        """log N(m_a; m_b, S_a + S_b) for every pair."""
        if A.means.shape[1] != B.means.shape[1]:
            raise ValueError(f"Gaussians in {A.means.shape[1]} and {B.means.shape[1]} "
                             "dimensions: the pictures must have the same block descriptors")
        if self.covariance == "diag":
            out = np.empty((len(A), len(B)))
            _elk_diag_log(A.means, A.covariances, B.means, B.covariances, out)
            return out
        return _elk_full_log(A.means, A.covariances, B.means, B.covariances)

    def log_diag(self, A: Gaussians) -> np.ndarray:
        """log k(p, p) = log N(m; m, 2 S) = -1/2 (d log 2 pi + log |2 S|)."""
        d = A.means.shape[1]
        if self.covariance == "diag":
            logdet = np.log(2 * A.covariances).sum(axis=1)
        else:
            logdet = np.linalg.slogdet(2 * A.covariances)[1]
        return -0.5 * (d * LOG_2PI + logdet)

    def gram(self, A: Gaussians, B: Gaussians) -> np.ndarray:
        logk = self.log_gram(A, B)
        if self.normalize:
            logk -= 0.5 * self.log_diag(A)[:, None] + 0.5 * self.log_diag(B)[None, :]
        K = np.exp(logk)
        K[A.empty] = 0.0
        K[:, B.empty] = 0.0
        return K

    def diag(self, A: Gaussians) -> np.ndarray:
        k = np.ones(len(A)) if self.normalize else np.exp(self.log_diag(A))
        k[A.empty] = 0.0
        return k

    def take(self, A: Gaussians, idx) -> Gaussians:
        idx = np.asarray(idx, dtype=np.int64)
        return Gaussians(A.means[idx], A.covariances[idx], A.empty[idx])

    def length(self, A) -> int:
        return len(A)

    def to_arrays(self, A: Gaussians) -> dict[str, np.ndarray]:
        return {"means": A.means, "covariances": A.covariances, "empty": A.empty}

    def from_arrays(self, a: dict[str, np.ndarray]) -> Gaussians:
        return Gaussians(a["means"], a["covariances"], a["empty"].astype(bool))

    def __call__(self, A, B) -> np.ndarray:
        return self.gram(self.prepare(A), self.prepare(B))


@njit(cache=True, nogil=True)
def _elk_diag_log(ma, va, mb, vb, out):
    d = ma.shape[1]
    const = d * math.log(2 * math.pi)
    for i in range(ma.shape[0]):
        for j in range(mb.shape[0]):
            s = 0.0
            for k in range(d):
                v = va[i, k] + vb[j, k]
                diff = ma[i, k] - mb[j, k]
                s += math.log(v) + diff * diff / v
            out[i, j] = -0.5 * (const + s)


def _elk_full_log(ma, Sa, mb, Sb, chunk: int = 4096) -> np.ndarray:
    # One Cholesky of S_a + S_b per pair (O(d^3)): batched, `chunk` pairs at a time.
    d = ma.shape[1]
    ia, ib = np.meshgrid(np.arange(len(ma)), np.arange(len(mb)), indexing="ij")
    ia, ib = ia.ravel(), ib.ravel()
    out = np.empty(len(ia))
    for s in range(0, len(ia), chunk):
        a, b = ia[s:s + chunk], ib[s:s + chunk]
        L = np.linalg.cholesky(Sa[a] + Sb[b])
        diff = (ma[a] - mb[b])[..., None]
        y = np.linalg.solve(L, diff)[..., 0]  # L y = m_a - m_b, so diff' S^-1 diff = |y|^2
        logdet = 2 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)
        out[s:s + chunk] = -0.5 * (d * LOG_2PI + logdet + (y ** 2).sum(axis=1))
    return out.reshape(len(ma), len(mb))


class MatchKernel:
    """K(A, B) = 1/2 [mean_{a in A} max_{b in B} k(a, b) + mean_{b in B} max_{a in A} k(a, b)].

    Minor kernel: RBF k(a, b) = exp(-||a - b||^2 / (2 sigma^2)), so max_b k(a, b) is
    exp(-min_b ||a - b||^2 / (2 sigma^2)): the squared distances come from one BLAS product per
    chunk of pictures, and several sigmas can share them (`match_grams`). Not a Mercer kernel
    (Boughorbel et al. 2004); K(A, A) = 1.
    """

    name = "match"
    input = "blocks"

    def __init__(self, sigma: float = 4.0, block_scaling: str = "sqrt"):
        if not sigma > 0:
            raise ValueError(f"sigma={sigma}: the RBF minor kernel needs sigma > 0")
        _check_scaling(block_scaling)
        self.sigma, self.block_scaling = float(sigma), block_scaling

    def params(self) -> dict:
        return {"sigma": self.sigma, "block_scaling": self.block_scaling}

    def prepare(self, X) -> Ragged:
        return as_descriptor_sets(X, self.block_scaling)

    def gram(self, A: Ragged, B: Ragged) -> np.ndarray:
        return match_grams(A, B, [self.sigma])[0]

    def diag(self, A: Ragged) -> np.ndarray:
        return (A.n_blocks > 0).astype(np.float64)

    def take(self, A: Ragged, idx) -> Ragged:
        return A.take(idx)

    def length(self, A) -> int:
        return len(A)

    def to_arrays(self, A: Ragged) -> dict[str, np.ndarray]:
        return {"descriptors": A.descriptors, "offsets": A.offsets}

    def from_arrays(self, a: dict[str, np.ndarray]) -> Ragged:
        return Ragged(a["descriptors"], a["offsets"].astype(np.int64))

    def __call__(self, A, B) -> np.ndarray:
        return self.gram(self.prepare(A), self.prepare(B))


def _padded(sets: Ragged) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, m, d) blocks padded to the most blocks m, their squared norms (inf on padding)."""
    n, d = len(sets), sets.descriptors.shape[1]
    counts = sets.n_blocks
    m = max(int(counts.max()) if n else 0, 1)
    P = np.zeros((n, m, d), np.float32)
    norms = np.full((n, m), np.inf, np.float32)
    for i in range(n):
        blocks = sets.descriptors[sets.offsets[i]:sets.offsets[i + 1]]
        P[i, :len(blocks)] = blocks
        norms[i, :len(blocks)] = (blocks.astype(np.float64) ** 2).sum(axis=1)
    return P, norms, counts


def match_grams(A: Ragged, B: Ragged, sigmas, chunk_a: int = 32,
                chunk_b: int = 512) -> list[np.ndarray]:
    """Match-kernel Gram matrices (len(A) x len(B)), one per sigma, from one distance pass.

    Pictures without blocks get 0 with everything. When A is B only the upper triangle of
    chunks is computed.
    """
    if A.descriptors.shape[1] != B.descriptors.shape[1]:
        raise ValueError(f"block descriptors of {A.descriptors.shape[1]} and "
                         f"{B.descriptors.shape[1]} dimensions: use the same features")
    symmetric = A is B
    Pa, Na, ca = _padded(A)
    Pb, Nb = (Pa, Na) if symmetric else _padded(B)[:2]
    cb = ca if symmetric else B.n_blocks
    gammas = [1.0 / (2.0 * float(s) ** 2) for s in sigmas]
    out = [np.zeros((len(A), len(B))) for _ in sigmas]
    ma, mb, d = Pa.shape[1], Pb.shape[1], Pa.shape[2]
    for a0 in range(0, len(A), chunk_a):
        a1 = min(a0 + chunk_a, len(A))
        XA, NA = Pa[a0:a1].reshape(-1, d), Na[a0:a1].reshape(-1)
        for b0 in range(a0 if symmetric else 0, len(B), chunk_b):
            b1 = min(b0 + chunk_b, len(B))
            XB, NB = Pb[b0:b1].reshape(-1, d), Nb[b0:b1].reshape(-1)
            D = XA @ XB.T
            D *= -2
            D += NA[:, None]
            D += NB[None, :]  # padding rows/columns are +inf, so never a best match
            np.maximum(D, 0, out=D)
            D = D.reshape(a1 - a0, ma, b1 - b0, mb)
            best_ab = D.min(axis=3)  # (na, ma, nb): each block of a against picture b
            best_ba = D.min(axis=1)  # (na, nb, mb): each block of b against picture a
            for g, K in zip(gammas, out):
                k_ab = np.exp(-g * best_ab).sum(axis=1) / np.maximum(ca[a0:a1, None], 1)
                k_ba = np.exp(-g * best_ba).sum(axis=2) / np.maximum(cb[None, b0:b1], 1)
                K[a0:a1, b0:b1] = 0.5 * (k_ab + k_ba)
    if symmetric:
        for K in out:
            upper = np.triu(K)
            K[...] = upper + np.triu(K, 1).T
    for K in out:
        K[ca == 0] = 0.0
        K[:, cb == 0] = 0.0
    return out


KERNELS = {"linear": LinearKernel, "elk": ExpectedLikelihoodKernel, "match": MatchKernel}


def make_kernel(name: str, **params):
    """A kernel by name with its parameters (those it does not take are ignored)."""
    if name not in KERNELS:
        raise ValueError(f"kernel={name!r}: use one of {', '.join(KERNELS)}")
    cls = KERNELS[name]
    names = inspect.signature(cls).parameters
    return cls(**{k: v for k, v in params.items() if k in names})


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
    #: fixes the kernel keeps only its sub-grid (pamir.selection).
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
