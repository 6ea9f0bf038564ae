"""The numba core of PAMIR (pamir.models.pamir): the PA-I step on sparse queries and pictures,
triplet sampling, the training loops the estimator runs in the primal form (W) and the dual
form (W = W0 + alpha X), and the arrays they take (`Pictures`). Hand-written rather than
scipy, for the reason the estimator's module gives: one update touches a few hundred entries
of W.
"""

from __future__ import annotations

import threading

import numba
import numpy as np
import scipy.sparse as sp

from ..features.registry import ColumnBlocks
from .base import check_pictures
from .pa import pa1_tau


# ------------------------------------------------------------------------ the numba core

@numba.njit(cache=True, inline="always")
def _next_random(state):
    """splitmix64: a tiny seeded generator whose stream does not depend on numba's version."""
    state[0] += np.uint64(0x9E3779B97F4A7C15)
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, inline="always")
def _randint(state, n):
    """Uniform integer in [0, n) (n < 2^32) by multiply-shift, no modulo bias to speak of."""
    return np.int64(((_next_random(state) >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32))


@numba.njit(cache=True, inline="always")
def _sparse_dot(ai, ad, bi, bd):
    """Dot product of two sparse vectors given as sorted (indices, data)."""
    i = 0
    j = 0
    s = 0.0
    while i < ai.shape[0] and j < bi.shape[0]:
        if ai[i] == bi[j]:
            s += ad[i] * bd[j]
            i += 1
            j += 1
        elif ai[i] < bi[j]:
            i += 1
        else:
            j += 1
    return s


@numba.njit(cache=True, inline="always")
def _contains_all(words, caption):
    """Whether the sorted `caption` indices include every one of the sorted `words`."""
    j = 0
    for i in range(words.shape[0]):
        while j < caption.shape[0] and caption[j] < words[i]:
            j += 1
        if j == caption.shape[0] or caption[j] != words[i]:
            return False
    return True


@numba.njit(cache=True, inline="always")
def _score(W, qi, qd, pi, pd):
    """q · W p for sparse q and p, touching only W[q's words, p's visterms]."""
    s = 0.0
    for a in range(qi.shape[0]):
        row = W[qi[a]]
        r = 0.0
        for b in range(pi.shape[0]):
            r += row[pi[b]] * pd[b]
        s += qd[a] * r
    return s


@numba.njit(cache=True, inline="always")
def _add_outer(W, scale, qi, qd, pi, pd):
    """W[q, p] += scale * q p^T on the nonzeros."""
    for a in range(qi.shape[0]):
        row = W[qi[a]]
        f = scale * qd[a]
        for b in range(pi.shape[0]):
            row[pi[b]] += f * pd[b]


@numba.njit(cache=True, inline="always")
def _tau(loss, qd, d_sq, c):
    """PA-I's step for ||v||^2 = ||q||^2 ||p+ - p-||^2; 0 for identical pictures (no
    direction to move in)."""
    q_sq = 0.0
    for a in range(qd.shape[0]):
        q_sq += qd[a] * qd[a]
    norm = q_sq * d_sq
    return pa1_tau(loss, norm, c) if norm > 0.0 else 0.0


@numba.njit(cache=True, inline="always")
def _dense_diff(W, qi, qd, xp, xm):
    """q . W (x+ - x-) over the dense block: W's first len(x) columns, contiguous, which the
    compiler turns into SIMD loops (the sparse part's index indirection prevents that)."""
    diff = 0.0
    for a in range(qi.shape[0]):
        row = W[qi[a]]
        r = 0.0
        for b in range(xp.shape[0]):
            r += row[b] * (xp[b] - xm[b])
        diff += qd[a] * r
    return diff


@numba.njit(cache=True, inline="always")
def _add_dense(W, scale, qi, qd, xp, xm):
    """W[q, :D] += scale * q (x+ - x-)^T over the dense block."""
    for a in range(qi.shape[0]):
        row = W[qi[a]]
        f = scale * qd[a]
        for b in range(xp.shape[0]):
            row[b] += f * (xp[b] - xm[b])


@numba.njit(cache=True, inline="always")
def _pa_step(W, A, step, c, margin, qi, qd, xp, xm, ppi, ppd, pmi, pmd, pp_sq, pm_sq):
    """One PA-I update on (q, p+, p-); returns the hinge loss before the update.

    A picture is a dense block (xp / xm: W's first D columns, D may be 0) followed by a sparse
    part (indices already shifted past the block): CNN features, visterm bags and their
    concatenation all take this one step. A (same shape as W, or empty) accumulates
    step * delta so that the running average of W is ((n + 1) W - A) / n after n steps
    without ever touching all of W during training.
    """
    diff = (_dense_diff(W, qi, qd, xp, xm)
            + _score(W, qi, qd, ppi, ppd) - _score(W, qi, qd, pmi, pmd))
    loss = margin - diff
    if loss <= 0.0:
        return 0.0
    dot = _sparse_dot(ppi, ppd, pmi, pmd)
    for b in range(xp.shape[0]):
        dot += xp[b] * xm[b]
    tau = _tau(loss, qd, pp_sq + pm_sq - 2.0 * dot, c)
    if tau == 0.0:
        return loss
    _add_dense(W, tau, qi, qd, xp, xm)
    _add_outer(W, tau, qi, qd, ppi, ppd)
    _add_outer(W, -tau, qi, qd, pmi, pmd)
    if A.shape[0] > 0:
        _add_dense(A, tau * step, qi, qd, xp, xm)
        _add_outer(A, tau * step, qi, qd, ppi, ppd)
        _add_outer(A, -tau * step, qi, qd, pmi, pmd)
    return loss


@numba.njit(cache=True, inline="always")
def _sample_triplet(rng, n_pictures, epsilon, text_margin, Qp, Qi, Qd, Rp, Ri, Cp, Ci, Cd,
                    sample_queries):
    """(q, p+, p-, margin) drawn with the splitmix64 state `rng`; p- is -1 if none was found.

    q: uniform over `sample_queries`; p+: uniform over q's relevant pictures; p-: uniform over
    the pictures whose caption lacks one of q's words (rejection sampling; at most 1,000 draws).
    """
    q = sample_queries[_randint(rng, sample_queries.shape[0])]
    qi = Qi[Qp[q]:Qp[q + 1]]
    qd = Qd[Qp[q]:Qp[q + 1]]
    pos = Ri[Rp[q] + _randint(rng, Rp[q + 1] - Rp[q])]
    neg = -1
    for _ in range(1000):
        cand = _randint(rng, n_pictures)
        if not _contains_all(qi, Ci[Cp[cand]:Cp[cand + 1]]):
            neg = cand
            break
    margin = epsilon
    if neg >= 0 and text_margin:
        m = (_sparse_dot(qi, qd, Ci[Cp[pos]:Cp[pos + 1]], Cd[Cp[pos]:Cp[pos + 1]])
             - _sparse_dot(qi, qd, Ci[Cp[neg]:Cp[neg + 1]], Cd[Cp[neg]:Cp[neg + 1]]))
        margin = max(epsilon, m)
    return q, pos, neg, margin


# nogil: grid points, candidates and seeds train in threads of one process
# (pamir.training.selection), and each thread's updates then run on their own core.
@numba.njit(cache=True, fastmath=True, nogil=True)
def _train_steps(W, A, first_step, n_steps, rng, c, epsilon, text_margin,
                 Xdense, Xp, Xi, Xd, Xsq, Qp, Qi, Qd, Rp, Ri, Cp, Ci, Cd, sample_queries):
    """n_steps PA updates on sampled triplets of pictures given as a dense block Xdense
    (n x D, D may be 0) and a sparse rest (CSR parts Xp, Xi, Xd, indices shifted by D).
    Returns (number of triplets with a positive loss, sum of losses)."""
    n_active = 0
    loss_sum = 0.0
    for k in range(n_steps):
        q, pos, neg, margin = _sample_triplet(rng, Xp.shape[0] - 1, epsilon, text_margin, Qp,
                                              Qi, Qd, Rp, Ri, Cp, Ci, Cd, sample_queries)
        if neg < 0:
            continue
        loss = _pa_step(W, A, first_step + k + 1, c, margin, Qi[Qp[q]:Qp[q + 1]],
                        Qd[Qp[q]:Qp[q + 1]], Xdense[pos], Xdense[neg],
                        Xi[Xp[pos]:Xp[pos + 1]], Xd[Xp[pos]:Xp[pos + 1]],
                        Xi[Xp[neg]:Xp[neg + 1]], Xd[Xp[neg]:Xp[neg + 1]], Xsq[pos], Xsq[neg])
        if loss > 0.0:
            n_active += 1
            loss_sum += loss
    return n_active, loss_sum


# The dual form (the kernel form of TPAMI §III-E with the linear kernel): W = W0 + alpha X,
# and the scores S = W X^T of the training pictures are kept up to date, so a triplet's loss
# costs a few lookups in S instead of reading two pictures' D numbers and q's rows of W.
@numba.njit(cache=True, fastmath=True, nogil=True)
def _train_steps_dual(S, alpha, beta, G, Gdiag, first_step, n_steps, rng, c, epsilon,
                      text_margin, Qp, Qi, Qd, Rp, Ri, Cp, Ci, Cd, sample_queries):
    """`_train_steps` in the dual form, on the same triplets (the same sampler and seed).

    S (T x n, float64): q's words' scores of the training pictures, S[t, j] = (W x_j)_t.
    alpha (T x n): W = W0 + alpha X. beta (T x n, or empty): the sum of step * (alpha's
    change), so that the running average of W is W0 + ((n + 1) alpha - beta) X / n, as A
    gives it in the primal form. G (n x n): the Gram matrix X X^T, Gdiag its diagonal.
    An update moves alpha at p+ and p- and adds tau q_t (G[p+] - G[p-]) to S's rows of q's
    words: n numbers a word, where the primal form touches D."""
    n_active = 0
    loss_sum = 0.0
    n = S.shape[1]
    for k in range(n_steps):
        q, pos, neg, margin = _sample_triplet(rng, n, epsilon, text_margin, Qp, Qi, Qd, Rp,
                                              Ri, Cp, Ci, Cd, sample_queries)
        if neg < 0:
            continue
        qi = Qi[Qp[q]:Qp[q + 1]]
        qd = Qd[Qp[q]:Qp[q + 1]]
        diff = 0.0
        for a in range(qi.shape[0]):
            diff += qd[a] * (S[qi[a], pos] - S[qi[a], neg])
        loss = margin - diff
        if loss <= 0.0:
            continue
        n_active += 1
        loss_sum += loss
        tau = _tau(loss, qd, Gdiag[pos] + Gdiag[neg] - 2.0 * G[pos, neg], c)
        if tau == 0.0:
            continue
        step = first_step + k + 1
        gp = G[pos]
        gm = G[neg]
        for a in range(qi.shape[0]):
            t = qi[a]
            f = tau * qd[a]
            alpha[t, pos] += f
            alpha[t, neg] -= f
            if beta.shape[0] > 0:
                beta[t, pos] += f * step
                beta[t, neg] -= f * step
            row = S[t]
            for j in range(n):
                row[j] += f * (gp[j] - gm[j])
    return n_active, loss_sum


@numba.njit(cache=True, fastmath=True, nogil=True)
def _apply_triplets(W, A, first_step, c, margins, triplets,
                    Xdense, Xp, Xi, Xd, Xsq, Qp, Qi, Qd):
    """PA updates on given (query, p+, p-) rows, in order; returns the losses before each."""
    losses = np.zeros(triplets.shape[0])
    for k in range(triplets.shape[0]):
        q, pos, neg = triplets[k, 0], triplets[k, 1], triplets[k, 2]
        losses[k] = _pa_step(W, A, first_step + k + 1, c, margins[k],
                             Qi[Qp[q]:Qp[q + 1]], Qd[Qp[q]:Qp[q + 1]], Xdense[pos],
                             Xdense[neg], Xi[Xp[pos]:Xp[pos + 1]], Xd[Xp[pos]:Xp[pos + 1]],
                             Xi[Xp[neg]:Xp[neg + 1]], Xd[Xp[neg]:Xp[neg + 1]],
                             Xsq[pos], Xsq[neg])
    return losses


# ------------------------------------------------------------------------------ helpers

def _csr(M, dtype=np.float32, name="X", copy: bool = True) -> sp.csr_matrix:
    """CSR with sorted indices and the dtype the numba core is compiled for. copy=False:
    M itself when it already is that (nothing to change, so nothing copied)."""
    if not sp.issparse(M):
        M = np.asarray(M)
        if M.ndim != 2:
            raise ValueError(f"{name} must be a 2-D matrix, got shape {M.shape}")
    ready = (not copy and sp.issparse(M) and M.format == "csr" and M.dtype == dtype
             and M.has_canonical_format)
    if not ready:
        M = sp.csr_matrix(M, dtype=dtype, copy=True)
        M.sum_duplicates()
        M.sort_indices()
    if not np.isfinite(M.data).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return M


def _is_dense(M) -> bool:
    return isinstance(M, np.ndarray) and not sp.issparse(M)


def _dense(M, name: str) -> np.ndarray:
    """C-contiguous float32 rows, as the dense numba path reads them."""
    M = np.ascontiguousarray(M, dtype=np.float32)
    if M.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {M.shape}")
    if not np.isfinite(M).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return M


def _row_norms_sq(X) -> np.ndarray:
    if isinstance(X, np.ndarray):
        return np.einsum("ij,ij->i", X, X, dtype=np.float64)
    return np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()


def _parts(M: sp.csr_matrix):
    return M.indptr.astype(np.int64), M.indices.astype(np.int64), M.data


#: A leading run of columns that most rows store becomes a dense block from this width on.
MIN_DENSE_BLOCK = 16
#: Rows split into block and rest at a time (`_dense_and_sparse`): its temporaries.
SPLIT_ROWS = 1_024


def _dense_and_sparse(X) -> tuple:
    """(dense block, CSR parts of the rest with indices shifted past the block): the form
    the numba step reads. Dense pictures (CNN features) are all block; visterm bags have
    none; a concatenation [cnn, visterms] (CSR) is split so that its CNN part runs as SIMD
    loops, measured 4x faster than walking it through sparse indices. The block is the
    leading run of columns stored in at least half the rows, not in all of them: a CSR
    matrix drops exact zeros, which a standardised CNN number can be (a channel that never
    fires on the training pictures), and one such zero in the first row used to send a
    whole [cnn, cnn-lite2, visterms] concatenation through the indices."""
    n = X.shape[0]
    if isinstance(X, np.ndarray):
        return X, np.zeros(n + 1, np.int64), np.zeros(0, np.int64), np.zeros(0, X.dtype)
    stored = np.bincount(X.indices, minlength=X.shape[1]) >= max(n, 1) / 2
    width = int(np.argmin(np.append(stored, False)))
    if width < MIN_DENSE_BLOCK:
        return (np.zeros((n, 0), X.dtype), *_parts(X))
    # split SPLIT_ROWS rows at a time: slicing the whole matrix's columns held two more
    # copies of it; the block and the rest are the same
    block = np.empty((n, width), X.dtype)
    rests = []
    for start in range(0, n, SPLIT_ROWS):
        rows = X[start:start + SPLIT_ROWS]
        block[start:start + rows.shape[0]] = rows[:, :width].toarray()
        rests.append(sp.csr_matrix(rows[:, width:]))
    rest = sp.vstack(rests, format="csr") if len(rests) > 1 else rests[0]
    Xp, Xi, Xd = _parts(rest)
    return block, Xp, Xi + width, Xd


def blocks_dense_and_sparse(X) -> tuple | None:
    """`_dense_and_sparse` and `_row_norms_sq` of a ColumnBlocks (pamir.features.registry)
    without its whole CSR: CSR rows SPLIT_ROWS at a time, twice (the columns each stores,
    then the block and the rest), so that the dense views are never held at 8 bytes a number.
    The same arrays as from X.tocsr(); None when it would have no dense block."""
    n, d = X.shape
    starts = range(0, n, SPLIT_ROWS)

    def rows(start):
        return _csr(X.csr_rows(start, min(start + SPLIT_ROWS, n)), copy=False)

    stored = np.zeros(d, np.int64)
    for start in starts:
        stored += np.bincount(rows(start).indices, minlength=d)
    width = int(np.argmin(np.append(stored >= max(n, 1) / 2, False)))
    if width < MIN_DENSE_BLOCK:
        return None
    block, rests, norms = np.empty((n, width), np.float32), [], []
    for start in starts:
        r = rows(start)
        block[start:start + r.shape[0]] = r[:, :width].toarray()
        rests.append(sp.csr_matrix(r[:, width:]))
        norms.append(_row_norms_sq(r))
    rest = sp.vstack(rests, format="csr") if len(rests) > 1 else rests[0]
    Xp, Xi, Xd = _parts(rest)
    return (block, Xp, Xi + width, Xd), np.concatenate(norms)


class Projection:
    """W -> X W^T for the pictures X, with X's leading dense block (as `_dense_and_sparse`
    finds it) multiplied as a dense matrix. A CSR product walks every stored number through
    its index: for [cnn, cnn-lite1, cnn-lite2, visterms] (14,720 dense columns) scoring the
    500 validation pictures took 17x longer that way than dense + sparse (measured 5.1 s
    against 0.29 s, float64), and early stopping scores them 40 times a fit. `columns` gives
    the same split to `inner_products` (the dual form's validation scores)."""

    def __init__(self, X, dtype=np.float64):
        self.dtype, self.shape = dtype, X.shape
        if _is_dense(X) or X.shape[0] == 0:
            self.block, self.rest = np.asarray(X), None
            return
        stored = np.bincount(X.indices, minlength=X.shape[1]) >= X.shape[0] / 2
        width = int(np.argmin(np.append(stored, False)))
        if width < MIN_DENSE_BLOCK:
            self.block, self.rest = None, X
            return
        # held in X's dtype (float32), widened for each product: a fit's validation
        # pictures are held at half the size of float64, and score the same
        self.block = np.ascontiguousarray(X[:, :width].toarray())
        rest = sp.csr_matrix(X[:, width:])  # in X's column numbers, as `columns` gives it
        self.rest = sp.csr_matrix((rest.data, rest.indices + width, rest.indptr),
                                  shape=X.shape)

    def __call__(self, W) -> np.ndarray:
        block = None if self.block is None else self.block.astype(self.dtype, copy=False)
        return _products((block, self.rest), W)

    def columns(self) -> tuple:
        """(dense block or None, CSR of the other columns or None, in X's column numbers)."""
        return self.block, self.rest


def projector(X, dtype=np.float64) -> Projection:
    return Projection(X, dtype)


def train_columns(parts, shape) -> tuple:
    """`Projection.columns` of training pictures held as `_dense_and_sparse` parts."""
    block, Xp, Xi, Xd = parts
    rest = sp.csr_matrix((Xd, Xi, Xp), shape=shape) if len(Xd) else None
    return (block if block.shape[1] else None), rest


def inner_products(left: tuple, right: tuple) -> np.ndarray:
    """left X right^T (n_left x n_right, float32) of two sets of pictures of one
    representation, each given as `columns` (dense block or None, sparse rest or None, the
    rest n x D): one BLAS product of the columns both blocks hold, and a sparse product of
    the others. The blocks may differ in width (each set finds its own)."""
    (bl, rl), (br, rr) = left, right
    width = min(0 if bl is None else bl.shape[1], 0 if br is None else br.shape[1])
    d = max(x.shape[1] for x in (bl, rl, br, rr) if x is not None)
    out = np.zeros((_rows(bl, rl), _rows(br, rr)), np.float32)
    if width:
        out += bl[:, :width] @ br[:, :width].T
    sl, sr = _beyond(bl, rl, width, d), _beyond(br, rr, width, d)
    if sl is not None and sr is not None:
        out += (sl @ sr.T).toarray()
    return out


def _rows(block, rest) -> int:
    return (block if block is not None else rest).shape[0]


def _beyond(block, rest, width: int, d: int):
    """The pictures' columns from `width` on, as one n x d CSR (None: no such column)."""
    parts = [] if rest is None else [sp.csr_matrix(rest, dtype=np.float32)]
    if block is not None and block.shape[1] > width:
        b = sp.csr_matrix(block[:, width:])
        parts.append(sp.csr_matrix((b.data, b.indices + width, b.indptr),
                                   shape=(block.shape[0], d)))
    return None if not parts else parts[0] if len(parts) == 1 else parts[0] + parts[1]


def _combination(gamma, columns, shape, W0=None) -> np.ndarray:
    """W0 + gamma X (T x V float32) for pictures X given as `columns`."""
    block, rest = columns
    W = np.zeros((gamma.shape[0], shape[1]), np.float32) if W0 is None else W0.copy()
    gamma = np.asarray(gamma, np.float32)
    if block is not None:
        W[:, :block.shape[1]] += gamma @ block
    if rest is not None:
        W += np.asarray((rest.T @ gamma.T).T, np.float32)
    return W


def _products(columns, W) -> np.ndarray:
    """X W^T (n x T) for pictures X given as `columns`."""
    block, rest = columns
    out = 0.0
    if block is not None:
        out = block @ W[:, :block.shape[1]].T
    if rest is not None:
        out = out + rest @ W.T
    return np.asarray(out)


# ------------------------------------------------------------------- pictures, prepared

class Pictures:
    """Pictures in the form PAMIR reads them, prepared once and shared, read-only, by every
    fit on them (a selection's grid points and seeds, an ensemble's members, the retraining
    seeds run in threads on one copy): `use` "train" keeps what the update loop reads (the
    dense block and the CSR rest, `_dense_and_sparse`, and the squared row norms), "valid"
    what early stopping scores with (`projector`, float64). Each fit used to make these
    from its own copy of X; with a race's fits all alive at once (waiting at a rung), that
    was one copy per fit. The numbers are the same, so the fits are too."""

    def __init__(self, X, use: str = "train", name: str = "X"):
        if use not in ("train", "valid"):
            raise ValueError(f"Pictures: use is 'train' or 'valid', got {use!r}")
        self._lock, self._gram, self._cross = threading.Lock(), None, {}
        if isinstance(X, ColumnBlocks):  # a fit's features: never its whole CSR
            split = blocks_dense_and_sparse(X) if use == "train" and len(X) else None
            if split is not None:
                self.shape, self.use = X.shape, use
                (self.parts, self.Xsq) = split
                return
            X = X.tocsr()
        X = check_pictures(X, "PAMIR", name)
        # (no copy of a CSR that is already float32 and canonical: nothing here writes to it)
        X = _dense(X, name) if _is_dense(X) else _csr(X, name=name, copy=False)
        self.shape, self.use = X.shape, use
        if use == "train":
            self.parts, self.Xsq = _dense_and_sparse(X), _row_norms_sq(X)
        else:
            self.project = projector(X)

    def columns(self) -> tuple:
        """(dense block or None, sparse rest or None): pamir_core.inner_products' form."""
        return train_columns(self.parts, self.shape) if self.use == "train" \
            else self.project.columns()

    def gram(self) -> tuple[np.ndarray, np.ndarray]:
        """(X X^T as float32, its diagonal as float64) of training pictures, made once for
        all the fits that share them (the dual form's)."""
        with self._lock:
            if self._gram is None:
                G = inner_products(self.columns(), self.columns())
                self._gram = G, np.diagonal(G).astype(np.float64)
            return self._gram

    def cross(self, valid: "Pictures") -> np.ndarray:
        """X X_valid^T (n x n_valid, float64): the dual form's validation scores are
        W0 X_valid^T + gamma (X X_valid^T)."""
        with self._lock:
            if id(valid) not in self._cross:
                K = inner_products(self.columns(), valid.columns()).astype(np.float64)
                self._cross[id(valid)] = (valid, K)  # valid held: its id stays its own
            return self._cross[id(valid)][1]

    @classmethod
    def of(cls, X, use: str, name: str = "X") -> "Pictures":
        """X prepared for `use`, or X itself when it already is."""
        if isinstance(X, cls):
            if X.use != use:
                raise ValueError(f"PAMIR: {name} was prepared for {X.use}, not {use}")
            return X
        return cls(X, use, name)
