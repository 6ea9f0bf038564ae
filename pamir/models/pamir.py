"""PAMIR: the Passive-Aggressive Model for Image Retrieval (Grangier & Bengio, TPAMI 2008 §III).

A picture p (a sparse L2 tf-idf bag of visterms, length V) is mapped into the text space by a
linear map W (T x V): f(p) = W p, and scores F(q, p) = q · W p for a query vector q. W starts
at 0 and learns from triplets (q, p+, p-) of a training query, a picture relevant to it and one
that is not, with the PA-I update of eq. (10):

    loss = max(0, eps_k - q·W p+ + q·W p-)
    tau  = min(c, loss / (||q||^2 ||p+ - p-||^2))
    W   += tau * q (p+ - p-)^T

eps_k is 1 ("constant" margin) or the text-eps margin of the BBNN paper (ICANN 2006, eq. 4),
eps_k = max(eps, F_text(q, c+) - F_text(q, c-)) with c+/c- the captions' normalised idf vectors.

Why the core is hand-written numba rather than scipy: one update only touches the rows of q's
words and the columns of the two pictures' visterms, nnz(q) x (nnz(p+) + nnz(p-)) entries of W
(about 3 x 150), so a loop over the sparse indices does O(500) work where any vectorised
library call would pay its own overhead several times over. W stays T x V (C order) during
training: the entries an update touches are W[t, v] for t in q, v in p.

Early stopping (TPAMI §III-D) is the loop both PAMIRs share (pamir.models.pa): every
`eval_every` updates the validation mean AvgP of the current W (or of the averaged W) is
measured and the best W is kept; training stops after `n_updates` or `patience` evaluations
without improvement.
"""

from __future__ import annotations


import numba
import numpy as np
import scipy.sparse as sp

from .. import config
from ..evaluation import mean_average_precision
from ..text import text_vectors
from .base import (NotFittedError, TextSpaceModel, TrainingQueries, caption_matrix,
                   check_pictures, training_queries)
from .pa import check_pa_params, pa1_tau, train_pa

MARGINS = ("constant", "text")
#: `pamir fit`'s update budget grows with the training pictures (issue 35): this many
#: triplets per training picture, Corel 5k's 4,000,000 for its 4,000 (its winning fit was
#: still improving at the last of them: benchmarks/results/fit_speed.json's curves, so not
#: fewer there), at least BUDGET_MIN_UPDATES, at most BUDGET_MAX_UPDATES (today's constant:
#: no larger budget has been measured).
UPDATES_PER_PICTURE = 1_000
BUDGET_MIN_UPDATES = 50_000
BUDGET_MAX_UPDATES = 4_000_000
#: Validation checkpoints a budget is cut into (Corel 5k: every 100,000 updates), so that
#: early stopping's patience and the race's rungs (fractions of the budget) scale with it.
BUDGET_EVALUATIONS = 40
#: PA-I passes over a feedback round's triplets (each stops early once none has a loss).
FEEDBACK_EPOCHS = 10
#: Updates `partial_fit` draws per captioned picture, and the most it draws.
LEARN_UPDATES_PER_PICTURE = 200
LEARN_MAX_UPDATES = 200_000


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


# nogil: grid points, candidates and seeds train in threads of one process (pamir.selection),
# and each thread's updates then run on their own core.
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
    # copies of it (issue 35); the block and the rest are the same
    block = np.empty((n, width), X.dtype)
    rests = []
    for start in range(0, n, SPLIT_ROWS):
        rows = X[start:start + SPLIT_ROWS]
        block[start:start + rows.shape[0]] = rows[:, :width].toarray()
        rests.append(sp.csr_matrix(rows[:, width:]))
    rest = sp.vstack(rests, format="csr") if len(rests) > 1 else rests[0]
    Xp, Xi, Xd = _parts(rest)
    return block, Xp, Xi + width, Xd



def projector(X, dtype=np.float64):
    """W -> X W^T for the pictures X, with X's leading dense block (as `_dense_and_sparse`
    finds it) multiplied as a dense matrix. A CSR product walks every stored number through
    its index: for [cnn, cnn-lite1, cnn-lite2, visterms] (14,720 dense columns) scoring the
    500 validation pictures took 17x longer that way than dense + sparse (measured 5.1 s
    against 0.29 s, float64), and early stopping scores them 40 times a fit."""
    if _is_dense(X) or X.shape[0] == 0:
        return lambda W: np.asarray(X, dtype) @ W.T
    stored = np.bincount(X.indices, minlength=X.shape[1]) >= X.shape[0] / 2
    width = int(np.argmin(np.append(stored, False)))
    if width < MIN_DENSE_BLOCK:
        return lambda W: X @ W.T
    # held in X's dtype (float32), widened for each product: a fit's validation pictures
    # are held at half the size of float64, and score the same
    block = np.ascontiguousarray(X[:, :width].toarray())
    rest = sp.csr_matrix(X[:, width:])
    return lambda W: block.astype(dtype, copy=False) @ W[:, :width].T + rest @ W[:, width:].T


class Pictures:
    """Pictures in the form PAMIR reads them, prepared once and shared, read-only, by every
    fit on them (a selection's grid points and seeds, an ensemble's members, the retraining
    seeds run in threads on one copy): `use` "train" keeps what the update loop reads (the
    dense block and the CSR rest, `_dense_and_sparse`, and the squared row norms), "valid"
    what early stopping scores with (`projector`, float64). Each fit used to make these
    from its own copy of X; with a race's fits all alive at once (waiting at a rung), that
    was one copy per fit (issue 35). The numbers are the same, so the fits are too."""

    def __init__(self, X, use: str = "train", name: str = "X"):
        if use not in ("train", "valid"):
            raise ValueError(f"Pictures: use is 'train' or 'valid', got {use!r}")
        X = check_pictures(X, "PAMIR", name)
        # (no copy of a CSR that is already float32 and canonical: nothing here writes to it)
        X = _dense(X, name) if _is_dense(X) else _csr(X, name=name, copy=False)
        self.shape, self.use = X.shape, use
        if use == "train":
            self.parts, self.Xsq = _dense_and_sparse(X), _row_norms_sq(X)
        else:
            self.project = projector(X)

    @classmethod
    def of(cls, X, use: str, name: str = "X") -> "Pictures":
        """X prepared for `use`, or X itself when it already is."""
        if isinstance(X, cls):
            if X.use != use:
                raise ValueError(f"PAMIR: {name} was prepared for {X.use}, not {use}")
            return X
        return cls(X, use, name)


class PAMIR(TextSpaceModel):
    """Linear PAMIR trained with PA-I updates, early-stopped on validation AvgP.

    Parameters
    ----------
    c : aggressiveness of PA-I (the most a single update may move W; TPAMI Table V: 0.1).
    n_updates : the most triplets to draw (TPAMI Table V chose 2.53M on validation; validation
        AvgP plateaus after ~1M updates on Corel 5k, so early stopping ends far sooner).
    eval_every : updates between two validation evaluations (when validation data is given).
    patience : stop after this many evaluations without a better validation AvgP (None: run
        all n_updates).
    average : rank with the average of W over the updates so far instead of the last W
        (+0.1-0.3 AvgP measured on Corel 5k).
    margin : "constant" (eps_k = epsilon, TPAMI eq. 7) or "text" (eps_k = max(epsilon,
        F_text(q, c+) - F_text(q, c-)), BBNN ICANN 2006 eq. 4).
    epsilon : the margin (constant) or its floor (text).
    random_state : seed of the triplet sampling.
    max_valid_queries : early stopping scores at most this many validation queries, a sample
        seeded by config.VALID_QUERY_SEED (None: all). Long captions make hundreds of
        thousands of them; see config.VALID_MAX_QUERIES.

    Learned: W_ (T x V float32) and what pamir.models.pa says every PA model reports.
    """

    kind = "pamir"
    input = "vectors"
    #: The update loop releases the GIL: pamir.selection fits grid points in threads.
    fits_in_threads = True
    #: The validation grid (TPAMI Table V tuned c; the number of updates is early stopping's).
    param_grid = {"c": [0.01, 0.1, 1.0]}

    def __init__(self, c: float = 0.1, n_updates: int = 4_000_000, eval_every: int = 100_000,
                 patience: int | None = 10, average: bool = True, margin: str = "constant",
                 epsilon: float = 1.0, random_state: int = 0,
                 max_valid_queries: int | None = config.VALID_MAX_QUERIES):
        self.c = c
        self.n_updates = n_updates
        self.eval_every = eval_every
        self.patience = patience
        self.average = average
        self.margin = margin
        self.epsilon = epsilon
        self.random_state = random_state
        self.max_valid_queries = max_valid_queries

    def _check_params(self) -> None:
        check_pa_params("PAMIR", self.c, self.n_updates, self.eval_every, self.patience)
        if self.margin not in MARGINS:
            raise ValueError(f"PAMIR: margin must be one of {MARGINS}, got {self.margin!r}")
        if not self.epsilon > 0:
            raise ValueError(f"PAMIR: epsilon must be > 0, got {self.epsilon!r}")
        if self.max_valid_queries is not None and int(self.max_valid_queries) < 1:
            raise ValueError("PAMIR: max_valid_queries must be >= 1 or None, got "
                             f"{self.max_valid_queries!r}")

    # ---------------------------------------------------------------------------- training
    def fit(self, X, Y=None, *, validation=None, callback=None, y=None):
        """Train on pictures X (n x V bags, sparse or dense) captioned by Y (n x T presence;
        `y`, scikit-learn's name, is the same; a 1-D y of labels is one word a picture).

        validation=(X_valid, Y_valid): the validation queries (every subset of a validation
        caption, training idf) measure mean AvgP every `eval_every` updates and the best W is
        kept. callback(updates, n_updates, valid_avgp) reports progress.
        """
        self._check_params()
        self.valid_queries_ = None
        X = Pictures.of(X, "train")
        Y = caption_matrix(y if Y is None else Y, "PAMIR")
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"PAMIR: X has {X.shape[0]} pictures but Y has {Y.shape[0]} captions")
        if X.shape[0] < 2:
            raise ValueError("PAMIR: n_samples = 1; ranking needs a relevant and a non-relevant "
                             "picture, so at least two")
        queries = training_queries(Y)
        self.idf_ = queries.idf
        self.V_, self.T_ = X.shape[1], Y.shape[1]
        self.n_features_in_ = self.V_
        valid = None
        if validation is not None:
            X_valid, Y_valid = validation
            vq = self._validation_queries(Y_valid)
            valid = (Pictures.of(X_valid, "valid", "X_valid"), vq.vectors, vq.relevance)
        self._train(X, Y, queries, valid, callback)
        return self

    def fit_chunks(self, chunks: FeatureChunks, *, validation=None, callback=None,
                   visit_updates: int | None = None, work_dir=None):
        """Train on captioned pictures stored on disk in chunks (FeatureChunks), so that the
        number of pictures is bounded by the disk, not by memory: only the chunk being
        trained on is open (memory-mapped when dense), with its queries.

        The updates are PAMIR's (same PA-I step, margins, averaging, early stopping on
        `validation`, held in memory); what differs from `fit` is the sampling: each visit
        of a chunk draws `visit_updates` triplets (default: eval_every) among that chunk's
        pictures, the chunks visited in a seeded random order. The idf is the whole
        store's. work_dir: where each chunk's queries are kept between visits (default: a
        temporary folder, removed at the end).
        """
        import shutil  # noqa: PLC0415
        import tempfile  # noqa: PLC0415
        from pathlib import Path  # noqa: PLC0415

        self._check_params()
        self.valid_queries_ = None
        if len(chunks) == 0:
            raise ValueError("PAMIR: no chunk to train on")
        self.idf_ = chunks.idf()
        self.V_, self.T_ = chunks.dim, chunks.words
        valid = None
        if validation is not None:
            X_valid, Y_valid = validation
            vq = self._validation_queries(Y_valid)
            valid = (Pictures.of(X_valid, "valid", "X_valid"), vq.vectors, vq.relevance)
        W = np.zeros((self.T_, self.V_), dtype=np.float32)
        A = np.zeros(W.shape) if self.average else np.zeros((0, 0))
        rng = np.array([(int(self.random_state) * 0x2545F4914F6CDD1D + 1) % 2**64],
                       dtype=np.uint64)
        own = work_dir is None
        work = Path(tempfile.mkdtemp(prefix="pamir-chunks-") if own else work_dir)
        try:
            steps = _ChunkVisits(self, chunks, W, A, rng, visit_updates or self.eval_every,
                                 work)
            self._run(steps, W, A, valid, callback)
        finally:
            if own:
                shutil.rmtree(work, ignore_errors=True)
        self.chunk_visits_ = steps.visits
        return self

    def _validation_queries(self, Y_valid) -> TrainingQueries:
        """The validation queries early stopping scores (capped: max_valid_queries), and
        how many there were, recorded in valid_queries_ = [scored, all]."""
        vq = training_queries(Y_valid, idf_weights=self.idf_)
        used = vq.sample(self.max_valid_queries, config.VALID_QUERY_SEED)
        self.valid_queries_ = [len(used), vq.total]
        return used

    def _run(self, steps, W, A, valid, callback) -> None:
        if valid is None:
            score = None
        else:
            project = valid[0].project

            def score(weights):
                return mean_average_precision(project(weights), valid[1], valid[2])
        # the best W is held as float32, what W_ is (a race's waiting fits each hold one)
        run = train_pa(steps, lambda done: self._current(W, A, done), score,
                       n_updates=self.n_updates, eval_every=self.eval_every,
                       patience=self.patience, callback=callback,
                       keep=lambda weights: weights.astype(np.float32))
        self.W_ = run.best
        self.n_updates_ = run.n_updates
        self.best_update_ = run.best_update
        self.best_valid_avgp_ = run.best_valid_avgp
        self.history_ = run.history
        self.train_seconds_ = run.seconds  # numba updates only, validation excluded
        self.train_cpu_seconds_ = run.cpu_seconds  # the same in CPU time (the machine is shared)
        self.valid_seconds_ = run.valid_seconds  # the validation checkpoints' time
        self.active_updates_ = run.active
        self.out_of_time_ = run.out_of_time  # stopped early by `pamir fit --time-budget`
        self.updates_per_second_ = run.n_updates / run.seconds if run.seconds > 0 else float("nan")

    @classmethod
    def update_budget(cls, n_train: int) -> dict:
        """The n_updates and eval_every `pamir fit` gives a fit on n_train training pictures
        (UPDATES_PER_PICTURE, within BUDGET_MIN_UPDATES..BUDGET_MAX_UPDATES, cut into
        BUDGET_EVALUATIONS checkpoints): Corel 5k's 4,000 get today's 4,000,000 and
        100,000; a folder of 270 gets 270,000 and 6,750."""
        n_updates = int(np.clip(UPDATES_PER_PICTURE * int(n_train), BUDGET_MIN_UPDATES,
                                BUDGET_MAX_UPDATES))
        return {"n_updates": n_updates,
                "eval_every": max(1, -(-n_updates // BUDGET_EVALUATIONS))}

    @classmethod
    def prepare_pictures(cls, X, use: str = "train") -> Pictures:
        """X in the form `fit` reads for `use` ("train": X; "valid": validation's X_valid),
        to share among many fits on the same pictures (pamir.selection does)."""
        return Pictures.of(X, use)

    def _train(self, X: Pictures, Y, queries: TrainingQueries, valid, callback) -> None:
        Q = _csr(queries.vectors, name="query vectors")
        R = sp.csr_matrix(queries.relevance)
        # captions as normalised idf vectors: relevance tests and the text-eps margin
        caps = _csr(text_vectors(Y, self.idf_), name="captions")
        n_pictures = X.shape[0]
        n_rel = np.diff(R.indptr)
        sample = np.flatnonzero((n_rel > 0) & (n_rel < n_pictures)).astype(np.int64)
        if len(sample) == 0:
            raise ValueError("PAMIR: no training query has both relevant and non-relevant "
                             "pictures; the captions leave nothing to rank")
        Xsq = X.Xsq
        Qp, Qi, Qd = _parts(Q)
        Rp, Ri = R.indptr.astype(np.int64), R.indices.astype(np.int64)
        Cp, Ci, Cd = _parts(caps)
        # float32 W: the rows of a query's words (40 kB each at 10,000 visterms) stay in the
        # L2 cache, which is what makes an update cost well under a microsecond. A (the
        # running sum for averaging) is float64: ((n + 1) W - A) / n cancels large terms.
        W = np.zeros((self.T_, self.V_), dtype=np.float32)
        A = np.zeros(W.shape) if self.average else np.zeros((0, 0))
        rng = np.array([(int(self.random_state) * 0x2545F4914F6CDD1D + 1) % 2**64],
                       dtype=np.uint64)

        pictures = X.parts

        def steps(done, k):
            return _train_steps(W, A, done, k, rng, float(self.c), float(self.epsilon),
                                self.margin == "text", *pictures, Xsq, Qp, Qi, Qd, Rp, Ri,
                                Cp, Ci, Cd, sample)

        self._run(steps, W, A, valid, callback)

    @staticmethod
    def _current(W, A, n):
        """The last W, or the average of W over the n updates so far."""
        if A.shape[0] == 0 or n == 0:
            return W.astype(np.float64)
        out = W.astype(np.float64)  # ((n + 1) W - A) / n, in place: one array, not four
        out *= n + 1
        out -= A
        out /= n
        return out

    @property
    def refit_params_(self) -> dict:
        """The settings to retrain without validation data (train+valid): the kept point."""
        return {"n_updates": int(self.best_update_)}

    @classmethod
    def average(cls, models: list[PAMIR]) -> PAMIR:
        """One PAMIR whose W is the mean of the models' W: their ensemble (the mean of their
        text-space vectors), since X W^T is linear in W. So an ensemble of seeds ranks at
        the cost of one model. The first model's settings and training record are kept;
        `members_` counts the models averaged."""
        if not models or any(not isinstance(m, cls) for m in models):
            raise ValueError("PAMIR.average: give one or more fitted PAMIR models")
        shapes = {m.W_.shape for m in models}
        if len(shapes) > 1:
            raise ValueError(f"PAMIR.average: the models' W differ in shape: {sorted(shapes)}")
        out = cls(**models[0].get_params())
        out.__dict__.update({k: v for k, v in vars(models[0]).items() if k.endswith("_")})
        out.W_ = np.mean([m.W_ for m in models], axis=0, dtype=np.float64).astype(np.float32)
        out.members_ = len(models)
        return out

    # ------------------------------------------------------------- learning after training
    # PA is an online algorithm (issue 13), so a trained PAMIR keeps learning: from new
    # captioned pictures, new words included (partial_fit), and from a person's right / wrong
    # marks on a query's results (feedback_delta, then apply_feedback to keep them).

    def grow_vocabulary(self, idf) -> "PAMIR":
        """Words past the T_ the model knows, in order: W_ gains a zero row each and idf_
        the new words' weights from `idf` (the whole grown vocabulary's; the known words keep
        theirs). Nothing changes when `idf` has no more words than T_."""
        self._check_fitted()
        idf = np.asarray(idf, dtype=np.float64)
        if idf.ndim != 1 or len(idf) < self.T_:
            raise ValueError(f"PAMIR: idf for {idf.shape} words; the model has {self.T_}")
        extra = len(idf) - self.T_
        if extra:
            self.W_ = np.ascontiguousarray(
                np.vstack([self.W_, np.zeros((extra, self.W_.shape[1]), self.W_.dtype)]))
            self.idf_ = np.concatenate([self.idf_, idf[self.T_:]])
            self.T_ = len(idf)
        return self

    def partial_fit(self, X, Y=None, *, idf=None, init=None, n_updates: int | None = None,
                    random_state: int = 0, c: float | None = None, average: bool = True,
                    y=None) -> "PAMIR":
        """Learn from new captioned pictures without refitting: PA-I updates on triplets
        (q, p+, p-) drawn from them as in training (q: a word or a subset of a caption, p+ a
        picture with all of q's words, p- one without), the model's c and epsilon.

        Y (n x T', T' >= T_): the new pictures' captions; columns past T_ are new words, for
        which W_ gains rows (grow_vocabulary). Rows with no word are left out. idf (T',):
        the query weights (default: idf_, the new words' from Y). init: {new word's column:
        [(column, weight)]}: its row starts as the weighted mean of those rows instead of
        zero (measured worse on Corel 5k: pamir.online.learn). n_updates: default
        LEARN_UPDATES_PER_PICTURE a picture, at most LEARN_MAX_UPDATES. average: keep the
        average of W over these updates, as training does. A model not fitted yet starts
        from W = 0. What the call did is in `last_update_` (queries, updates, active)."""
        from ..text import idf as idf_of  # noqa: PLC0415

        X = check_pictures(X, "PAMIR")
        Y = caption_matrix(y if Y is None else Y, "PAMIR")
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"PAMIR: X has {X.shape[0]} pictures but Y has {Y.shape[0]} captions")
        if not hasattr(self, "W_"):
            self._check_params()
            self.W_ = np.zeros((0, X.shape[1]), np.float32)
            self.V_, self.T_, self.idf_ = X.shape[1], 0, np.zeros(0)
            self.n_features_in_ = self.V_
        if X.shape[1] != self.V_:
            raise ValueError(f"PAMIR: X has {X.shape[1]} features, but PAMIR is expecting "
                             f"{self.V_} features as input")
        if Y.shape[1] < self.T_:
            raise ValueError(f"PAMIR: Y has {Y.shape[1]} words; the model has {self.T_} (new "
                             "words go after them)")
        captioned = np.flatnonzero(np.diff(Y.indptr) > 0)
        X, Y = X[captioned], Y[captioned]
        if idf is None:
            idf = np.concatenate([self.idf_, idf_of(Y)[self.T_:]])
        idf = np.asarray(idf, dtype=np.float64)
        if idf.shape != (Y.shape[1],):
            raise ValueError(f"PAMIR: idf for {idf.shape} words; Y has {Y.shape[1]}")
        self.grow_vocabulary(idf)
        W = self.W_
        for t, near in (init or {}).items():
            weights = np.array([w for _, w in near], dtype=np.float64)
            W[t] = (weights / weights.sum()) @ W[[k for k, _ in near]]
        n = Y.shape[0]
        total = int(n_updates if n_updates is not None
                    else min(LEARN_UPDATES_PER_PICTURE * n, LEARN_MAX_UPDATES))
        tq = TrainingQueries(Y, idf_weights=idf)
        R = sp.csr_matrix(tq.relevance)
        rel = [R.indices[R.indptr[k]:R.indptr[k + 1]] for k in range(R.shape[0])]
        usable = [k for k, r in enumerate(rel) if 0 < len(r) < n]
        self.last_update_ = {"queries": len(usable), "updates": 0, "active": 0}
        if not usable or total <= 0:
            return self
        rng = np.random.default_rng(random_state)
        qs = rng.choice(usable, total)
        triplets = np.empty((total, 3), dtype=np.int64)
        everyone = np.arange(n)
        for k, qk in enumerate(qs):
            pos = rel[qk]
            neg = np.setdiff1d(everyone, pos, assume_unique=True)
            triplets[k] = (qk, rng.choice(pos), rng.choice(neg))
        c = float(self.c if c is None else c)
        W0 = W.astype(np.float64) if average else None
        A = np.zeros(W.shape) if average else None
        losses = pa_updates(W, sp.csr_matrix(X, dtype=np.float32), tq.vectors, triplets, c,
                            margins=np.full(total, float(self.epsilon)), A=A)
        if average:  # the mean of W over the updates: ((n + 1) W_n - A) / n - W_0 / n
            W[:] = (((total + 1) * W.astype(np.float64) - A - W0) / total).astype(W.dtype)
        self.last_update_.update(updates=total, active=int((losses > 0).sum()))
        return self

    def feedback_delta(self, q, positives, negatives, *, c: float | None = None,
                       epochs: int = FEEDBACK_EPOCHS, margin: float | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
        """One round of relevance feedback for the query vector q (T,): PA-I updates (TPAMI
        eq. 10) on every (q, right picture, wrong picture) triplet, `epochs` passes (each
        stops early once none has a loss), with the model's c and epsilon unless given.
        positives, negatives: the pictures' rows (sparse or dense).

        Returns (rows, delta): the words the update touched (q's non-zero words: a PA step
        changes no other row of W) and the change of those rows (len(rows) x V). The model
        is not changed: apply_feedback(rows, delta) keeps the round."""
        self._check_fitted()
        q = np.asarray(q, dtype=np.float64).ravel()
        rows = np.flatnonzero(q)
        n_pos, n_neg = positives.shape[0], negatives.shape[0]
        if len(rows) == 0 or n_pos == 0 or n_neg == 0:
            return rows, np.zeros((len(rows), self.W_.shape[1]), np.float32)
        X = sp.vstack([sp.csr_matrix(p, dtype=np.float32) for p in (positives, negatives)],
                      format="csr")
        Ws = np.array(self.W_[rows], dtype=np.float32)
        before = Ws.copy()
        Q = sp.csr_matrix(q[rows][None, :].astype(np.float32))
        pairs = np.array([(0, i, n_pos + j) for i in range(n_pos) for j in range(n_neg)],
                         dtype=np.int64)
        c = float(self.c if c is None else c)
        margin = float(self.epsilon if margin is None else margin)
        rng = np.random.default_rng(0)
        for _ in range(int(epochs)):
            losses = pa_updates(Ws, X, Q, pairs[rng.permutation(len(pairs))], c,
                                margins=np.full(len(pairs), margin))
            if not (losses > 0).any():
                break
        return rows, Ws - before

    def apply_feedback(self, rows, delta) -> "PAMIR":
        """Fold a feedback round's change (from feedback_delta) into W_."""
        self._check_fitted()
        self.W_[np.asarray(rows, dtype=np.int64)] += np.asarray(delta, dtype=self.W_.dtype)
        return self

    # ----------------------------------------------------------------------------- using it
    def transform(self, X) -> np.ndarray:
        """(n x T) text-space vectors X W^T of the pictures X (n x V sparse bags)."""
        self._check_fitted()
        X = check_pictures(X, "PAMIR")
        if X.shape[1] != self.W_.shape[1]:
            raise ValueError(f"PAMIR: X has {X.shape[1]} features, but PAMIR is expecting "
                             f"{self.W_.shape[1]} features as input (visterms or other "
                             "dimensions a picture); use the same representation")
        X = np.asarray(X, np.float32) if _is_dense(X) else sp.csr_matrix(X, dtype=np.float32)
        if not np.isfinite(X.data if sp.issparse(X) else X).all():
            raise ValueError("PAMIR: X contains NaN or infinite values")
        return np.ascontiguousarray(projector(X, np.float32)(self.W_), dtype=np.float32)

    def _check_fitted(self) -> None:
        if not hasattr(self, "W_"):
            raise NotFittedError("PAMIR: not fitted yet; call fit() or load a trained model")

    def _state(self):
        self._check_fitted()
        meta = {k: getattr(self, k) for k in
                ("n_updates_", "best_update_", "best_valid_avgp_", "history_",
                 "train_seconds_", "train_cpu_seconds_", "valid_seconds_", "active_updates_",
                 "updates_per_second_", "valid_queries_", "out_of_time_")
                if hasattr(self, k)}
        return meta, {"W": self.W_, "idf": self.idf_}

    def _set_state(self, meta, arrays):
        for k, v in meta.items():
            setattr(self, k, v)
        self.W_ = np.ascontiguousarray(arrays["W"], dtype=np.float32)
        self.idf_ = arrays["idf"]
        self.T_, self.V_ = self.W_.shape
        self.n_features_in_ = self.V_


# ------------------------------------------------------------- training from disk, in chunks

class FeatureChunks:
    """Captioned pictures stored on disk in chunks, for training past the size of memory.

        store = FeatureChunks.create("/data/train", dim=256, words=T)
        store.append(X_chunk, Y_chunk)        # (n x dim) float32, (n x T) caption presence
        model = PAMIR().fit_chunks(FeatureChunks("/data/train"), validation=(Xv, Yv))

    folder/chunks.json lists the chunks; each is X-NNNNN.npy (dense float32 pictures, read
    back memory-mapped: only the pages training touches come into memory, and they are
    the kernel's to drop) or X-NNNNN.npz (CSR bags, loaded whole while its chunk is
    trained on), and Y-NNNNN.npz (the captions, CSR). No pickle anywhere.
    """

    MANIFEST = "chunks.json"

    def __init__(self, folder):
        import json  # noqa: PLC0415
        from pathlib import Path  # noqa: PLC0415

        self.folder = Path(folder)
        head = json.loads((self.folder / self.MANIFEST).read_text())
        if head.get("kind") != "pamir-feature-chunks":
            raise ValueError(f"{folder}: not a folder of feature chunks")
        self.dim, self.words, self.chunks = int(head["dim"]), int(head["words"]), head["chunks"]

    @classmethod
    def create(cls, folder, dim: int, words: int) -> "FeatureChunks":
        from pathlib import Path  # noqa: PLC0415

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        cls._write_manifest(folder, {"kind": "pamir-feature-chunks", "version": 1,
                                     "dim": int(dim), "words": int(words), "chunks": []})
        return cls(folder)

    @classmethod
    def _write_manifest(cls, folder, head) -> None:
        import json  # noqa: PLC0415

        from ..storage import atomic_write_bytes  # noqa: PLC0415

        atomic_write_bytes(folder / cls.MANIFEST, json.dumps(head, indent=1).encode())

    def append(self, X, Y) -> None:
        """Write one more chunk: pictures X (n x dim, dense or sparse) and captions Y."""
        from ..storage import atomic_write  # noqa: PLC0415

        Y = sp.csr_matrix(Y)
        if X.shape[0] != Y.shape[0] or X.shape[1] != self.dim or Y.shape[1] != self.words:
            raise ValueError(f"chunk X {X.shape}, Y {Y.shape}; the store holds {self.dim} "
                             f"dimensions and {self.words} words")
        k = len(self.chunks)
        if sp.issparse(X):
            X = _csr(X, name="X")
            name = f"X-{k:05d}.npz"
            atomic_write(self.folder / name, lambda f: np.savez(
                f, data=X.data, indices=X.indices, indptr=X.indptr,
                shape=np.asarray(X.shape)))
        else:
            X = _dense(X, "X")
            name = f"X-{k:05d}.npy"
            atomic_write(self.folder / name, lambda f: np.save(f, X, allow_pickle=False))
        atomic_write(self.folder / f"Y-{k:05d}.npz", lambda f: np.savez(
            f, indices=Y.indices.astype(np.int32), indptr=Y.indptr.astype(np.int64),
            shape=np.asarray(Y.shape)))
        self.chunks.append({"X": name, "Y": f"Y-{k:05d}.npz", "pictures": int(X.shape[0])})
        self._write_manifest(self.folder, {"kind": "pamir-feature-chunks", "version": 1,
                                           "dim": self.dim, "words": self.words,
                                           "chunks": self.chunks})

    def __len__(self) -> int:
        return len(self.chunks)

    @property
    def pictures(self) -> int:
        return sum(c["pictures"] for c in self.chunks)

    def X(self, k: int):
        """Chunk k's pictures: a read-only memory map (dense) or a CSR matrix."""
        path = self.folder / self.chunks[k]["X"]
        if path.suffix == ".npy":
            return np.load(path, mmap_mode="r", allow_pickle=False)
        with np.load(path, allow_pickle=False) as z:
            return sp.csr_matrix((z["data"], z["indices"], z["indptr"]),
                                 shape=tuple(z["shape"]))

    def Y(self, k: int) -> sp.csr_matrix:
        with np.load(self.folder / self.chunks[k]["Y"], allow_pickle=False) as z:
            ind = z["indices"]
            return sp.csr_matrix((np.ones(len(ind)), ind, z["indptr"]), shape=tuple(z["shape"]))

    def idf(self) -> np.ndarray:
        """The training idf over every chunk's captions (pamir.text.idf, summed by chunk)."""
        df, n = np.zeros(self.words), 0
        for k in range(len(self)):
            Y = self.Y(k)
            df += np.bincount(Y.indices, minlength=self.words)
            n += Y.shape[0]
        return -np.log(np.maximum(df, 0.5) / max(n, 1))


class _ChunkVisits:
    """PAMIR's update steps over a FeatureChunks: the chunks are visited in a seeded random
    order (each once per pass), `visit_updates` updates per visit, triplets drawn within the
    visited chunk. A chunk's queries, relevance and captions are computed on its first
    visit and kept on disk (work_dir) for the next ones; only the visited chunk is open."""

    def __init__(self, model, chunks: FeatureChunks, W, A, rng, visit_updates: int, work_dir):
        self.m, self.chunks, self.W, self.A, self.rng = model, chunks, W, A, rng
        self.visit_updates = int(visit_updates)
        self.work_dir = work_dir
        self.order = np.random.default_rng(model.random_state)
        self.queue: list[int] = []
        self.current, self.left = None, 0
        self.visits = 0

    def _prepared(self, k: int) -> tuple:
        folder = self.work_dir / f"chunk-{k:05d}"
        names = ("Qp", "Qi", "Qd", "Rp", "Ri", "Cp", "Ci", "Cd", "sample", "Xsq")
        if not (folder / "done").exists():
            Y = self.chunks.Y(k)
            queries = TrainingQueries(Y, idf_weights=self.m.idf_)
            Q = _csr(queries.vectors, name="query vectors")
            R = sp.csr_matrix(queries.relevance)
            caps = _csr(text_vectors(Y, self.m.idf_), name="captions")
            n_rel = np.diff(R.indptr)
            sample = np.flatnonzero((n_rel > 0) & (n_rel < Y.shape[0])).astype(np.int64)
            X = self.chunks.X(k)
            arrays = (*_parts(Q), R.indptr.astype(np.int64), R.indices.astype(np.int64),
                      *_parts(caps), sample, _row_norms_sq(X))
            folder.mkdir(parents=True, exist_ok=True)
            for name, a in zip(names, arrays):
                np.save(folder / f"{name}.npy", a, allow_pickle=False)
            (folder / "done").touch()
        return tuple(np.load(folder / f"{n}.npy", mmap_mode="r") for n in names)

    def _open(self, k: int) -> None:
        X = self.chunks.X(k)
        if isinstance(X, np.ndarray):  # a memory map: numba reads it as it is
            X = np.asarray(X)
            if X.dtype != np.float32 or not X.flags.c_contiguous:
                raise ValueError(f"chunk {k}: pictures must be C-ordered float32")
        Qp, Qi, Qd, Rp, Ri, Cp, Ci, Cd, sample, Xsq = (np.asarray(a)
                                                       for a in self._prepared(k))
        self.current = (_dense_and_sparse(X), Xsq, Qp, Qi, Qd, Rp, Ri, Cp, Ci, Cd, sample)
        self.left = self.visit_updates if len(sample) else 0
        self.visits += 1

    def __call__(self, done: int, k: int) -> tuple[int, float]:
        active, loss = 0, 0.0
        while k > 0:
            if self.left == 0:
                if not self.queue:
                    self.queue = list(self.order.permutation(len(self.chunks)))
                self.current = None  # let the last chunk's map go first
                self._open(int(self.queue.pop(0)))
                continue
            n = min(k, self.left)
            pictures, Xsq, Qp, Qi, Qd, Rp, Ri, Cp, Ci, Cd, sample = self.current
            a, l_ = _train_steps(self.W, self.A, done, n, self.rng, float(self.m.c),
                                 float(self.m.epsilon), self.m.margin == "text", *pictures,
                                 Xsq, Qp, Qi, Qd, Rp, Ri, Cp, Ci, Cd, sample)
            active, loss, done, k, self.left = active + a, loss + l_, done + n, k - n, self.left - n
        return active, loss


def pa_updates(W, X, Q, triplets, c, margins=None, A=None, first_step=0) -> np.ndarray:
    """Apply PA-I updates on given triplets (rows of query, p+, p- indices) to W in place.

    W: (T x V) float32 (or float64); X: pictures (n x V); Q: query vectors (m x T). Returns
    the losses
    before each update. For tests and for anyone who wants to drive the updates themselves.
    """
    X, Q = _csr(X, W.dtype, name="X"), _csr(Q, W.dtype, name="Q")
    triplets = np.ascontiguousarray(triplets, dtype=np.int64).reshape(-1, 3)
    margins = np.ones(len(triplets)) if margins is None else np.asarray(margins, np.float64)
    A = np.zeros((0, 0)) if A is None else A
    Xsq = _row_norms_sq(X)
    return _apply_triplets(W, A, first_step, float(c), margins, triplets,
                           *_dense_and_sparse(X), Xsq, *_parts(Q))


__all__ = ["FeatureChunks", "PAMIR", "pa_updates"]
