"""The picture kernels of kernel PAMIR (TPAMI 2008 §IV-C), each an object with a `name`, an
`input` ("bags": CSR bags of visterms; "blocks": per-picture block descriptors, a BlockSet or a
list of (n_blocks x d) arrays) and `__call__(A, B) -> (len(A) x len(B))` Gram matrix, with
what kernel PAMIR needs to hold a training set in its form (`prepare`, `gram`, `diag`, `take`,
`to_arrays` / `from_arrays` for saving):
- LinearKernel: the visterm kernel, the dot product of tf-idf bags of visterms;
- ExpectedLikelihoodKernel: one Gaussian per picture fitted on its block descriptors,
  k(p, p') = integral N(x; m, S) N(x; m', S') dx = N(m; m', S + S') (Jebara & Kondor 2003);
- MatchKernel: K(A, B) = 1/2 [mean_a max_b k(a, b) + mean_b max_a k(a, b)] with the RBF minor
  kernel k(a, b) = exp(-||a - b||^2 / (2 sigma^2)) (Wallraven et al. 2003).

The model that learns with them is pamir.models.kernel_pamir.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..features.visterms import scale_blocks
from ..features.ragged import Ragged

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
