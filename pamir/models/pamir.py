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

Why the core (pamir.models.pamir_core) is hand-written numba rather than scipy: one update only touches the rows of q's
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

import numpy as np
import scipy.sparse as sp

from .. import config
from ..evaluation import mean_average_precision
from ..text.vectors import idf as idf_of, text_vectors
from .base import (
    NotFittedError,
    TextSpaceModel,
    TrainingQueries,
    caption_matrix,
    check_pictures,
    training_queries,
)
from .pa import check_pa_params, train_pa
from .pamir_core import (
    Pictures,
    _apply_triplets,
    _combination,
    _csr,
    _dense_and_sparse,
    _is_dense,
    _parts,
    _products,
    _row_norms_sq,
    _train_steps,
    _train_steps_dual,
    projector,
)

MARGINS = ("constant", "text")
#: `pamir fit`'s update budget grows with the training pictures: this many
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
#: Updates `partial_fit` draws per captioned picture, and the most it draws.
LEARN_UPDATES_PER_PICTURE = 200
LEARN_MAX_UPDATES = 200_000
#: `dual="auto"` trains in the dual form up to this many training pictures: its Gram matrix
#: holds n^2 float32 numbers (256 MB at 8,000; Corel's 4,000 and 4,500: 64 and 81 MB).
DUAL_MAX_PICTURES = 8_000


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
    dual : train in the dual form (W = W0 + alpha X, TPAMI §III-E with the linear kernel,
        the training pictures' scores kept up to date: a triplet with no loss costs a few
        lookups instead of reading 2 x D numbers), True, False, or "auto" (as scikit-learn's
        LinearSVC): dual when there are fewer training pictures than half the dimensions and
        at most DUAL_MAX_PICTURES. The same updates on the same triplets, so the same model
        up to float rounding; `pamir_chunks.fit_chunks` always trains in the primal form.

    Learned: W_ (T x V float32) and what pamir.models.pa says every PA model reports.
    """

    kind = "pamir"
    input = "vectors"
    #: The update loop releases the GIL: pamir.training.selection fits grid points in threads.
    fits_in_threads = True
    #: The validation grid (TPAMI Table V tuned c; the number of updates is early stopping's).
    param_grid = {"c": [0.01, 0.1, 1.0]}

    def __init__(self, c: float = 0.1, n_updates: int = 4_000_000, eval_every: int = 100_000,
                 patience: int | None = 10, average: bool = True, margin: str = "constant",
                 epsilon: float = 1.0, random_state: int = 0,
                 max_valid_queries: int | None = config.VALID_MAX_QUERIES,
                 dual: bool | str = "auto"):
        self.c = c
        self.n_updates = n_updates
        self.eval_every = eval_every
        self.patience = patience
        self.average = average
        self.margin = margin
        self.epsilon = epsilon
        self.random_state = random_state
        self.max_valid_queries = max_valid_queries
        self.dual = dual

    def _check_params(self) -> None:
        check_pa_params("PAMIR", self.c, self.n_updates, self.eval_every, self.patience)
        if self.margin not in MARGINS:
            raise ValueError(f"PAMIR: margin must be one of {MARGINS}, got {self.margin!r}")
        if not self.epsilon > 0:
            raise ValueError(f"PAMIR: epsilon must be > 0, got {self.epsilon!r}")
        if self.max_valid_queries is not None and int(self.max_valid_queries) < 1:
            raise ValueError("PAMIR: max_valid_queries must be >= 1 or None, got "
                             f"{self.max_valid_queries!r}")
        if self.dual not in ("auto", True, False):
            raise ValueError(f"PAMIR: dual must be 'auto', True or False, got {self.dual!r}")

    # ---------------------------------------------------------------------------- training
    #: The weights every fit of this class starts from (T x V), None: zeros. Set on the
    #: class `starting_from` makes, so that every fit a selection, an ensemble or a
    #: retraining makes of it is warm-started (an incremental refit, pamir.training.refitting).
    coef_init = None

    @classmethod
    def starting_from(cls, W) -> type["PAMIR"]:
        """PAMIR whose fits start from W (T x V) instead of zeros, the running average
        included (scikit-learn's coef_init): a subclass of the same kind, saved and loaded as
        PAMIR."""
        return type(cls.__name__, (cls,), {"coef_init": np.asarray(W, np.float32),
                                           "__doc__": cls.__doc__})

    def fit(self, X, Y=None, *, validation=None, callback=None, y=None, coef_init=None):
        """Train on pictures X (n x V bags, sparse or dense) captioned by Y (n x T presence;
        `y`, scikit-learn's name, is the same; a 1-D y of labels is one word a picture).

        validation=(X_valid, Y_valid): the validation queries (every subset of a validation
        caption, training idf) measure mean AvgP every `eval_every` updates and the best W is
        kept. callback(updates, n_updates, valid_avgp) reports progress. coef_init (T x V):
        start from these weights instead of zeros (default: the class's `coef_init`).
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
        self._train(X, Y, queries, valid, callback,
                    self.coef_init if coef_init is None else coef_init)
        return self

    def _validation_queries(self, Y_valid) -> TrainingQueries:
        """The validation queries early stopping scores (capped: max_valid_queries), and
        how many there were, recorded in valid_queries_ = [scored, all]."""
        vq = training_queries(Y_valid, idf_weights=self.idf_)
        used = vq.sample(self.max_valid_queries, config.VALID_QUERY_SEED)
        self.valid_queries_ = [len(used), vq.total]
        return used

    @staticmethod
    def _scorer(valid):
        """Validation mean AvgP of weights W (T x V), or None without validation data."""
        if valid is None:
            return None
        return lambda W: mean_average_precision(valid[0].project(W), valid[1], valid[2])

    def _run(self, steps, current, score, callback,
             keep=lambda weights: weights.astype(np.float32)):
        """train_pa with this model's settings; records how it went, returns the kept
        weights (float32, what W_ is: a race's waiting fits each hold theirs)."""
        run = train_pa(steps, current, score, n_updates=self.n_updates,
                       eval_every=self.eval_every, patience=self.patience,
                       callback=callback, keep=keep)
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
        return run.best

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
        to share among many fits on the same pictures (pamir.training.selection does)."""
        return Pictures.of(X, use)

    def _train(self, X: Pictures, Y, queries: TrainingQueries, valid, callback,
               coef_init=None) -> None:
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
        if coef_init is not None and np.shape(coef_init) != (self.T_, self.V_):
            raise ValueError(f"PAMIR: coef_init has shape {np.shape(coef_init)}; the data "
                             f"give {(self.T_, self.V_)} (words x features)")
        rng = np.array([(int(self.random_state) * 0x2545F4914F6CDD1D + 1) % 2**64],
                       dtype=np.uint64)
        # the sampler's arrays: queries, their relevant pictures, the captions
        sampling = (*_parts(Q), R.indptr.astype(np.int64), R.indices.astype(np.int64),
                    *_parts(caps), sample)
        self.dual_ = self._dual(n_pictures)
        train = self._train_dual if self.dual_ else self._train_primal
        train(X, sampling, rng, valid, callback, coef_init)

    def _dual(self, n_pictures: int) -> bool:
        if self.dual != "auto":
            return bool(self.dual)
        return n_pictures <= DUAL_MAX_PICTURES and 2 * n_pictures <= self.V_

    def _train_primal(self, X: Pictures, sampling, rng, valid, callback, coef_init) -> None:
        # float32 W: the rows of a query's words (40 kB each at 10,000 visterms) stay in the
        # L2 cache, which is what makes an update cost well under a microsecond. A (the
        # running sum for averaging) is float64: ((n + 1) W - A) / n cancels large terms.
        W = np.zeros((self.T_, self.V_), dtype=np.float32)
        A = np.zeros(W.shape) if self.average else np.zeros((0, 0))
        if coef_init is not None:
            W[:] = coef_init
            # A sums k * (the k-th update's change); _current's ((n + 1) W_n - A) / n is then
            # the mean of W_1..W_n when A also holds W_0 once (W_0 = 0 in a fit from zeros)
            if self.average:
                A[:] = W
        pictures = X.parts

        def steps(done, k):
            return _train_steps(W, A, done, k, rng, float(self.c), float(self.epsilon),
                                self.margin == "text", *pictures, X.Xsq, *sampling)

        self.W_ = self._run(steps, lambda done: self._current(W, A, done),
                            self._scorer(valid), callback)

    def _train_dual(self, X: Pictures, sampling, rng, valid, callback, coef_init) -> None:
        """The primal's updates on the same triplets with W = W0 + alpha X (pamir_core's
        _train_steps_dual). Early stopping scores gamma, W's coefficients on the training
        pictures (alpha, or its running average), through X X_valid^T; the kept gamma
        becomes W_ at the end."""
        G, Gdiag = X.gram()
        S = np.zeros((self.T_, X.shape[0]))  # the training pictures' scores, W X^T
        W0 = None if coef_init is None else np.asarray(coef_init, np.float32)
        if W0 is not None:
            S[:] = _products(X.columns(), W0).T
        alpha = np.zeros_like(S)
        beta = np.zeros_like(S) if self.average else np.zeros((0, 0))

        def steps(done, k):
            return _train_steps_dual(S, alpha, beta, G, Gdiag, done, k, rng, float(self.c),
                                     float(self.epsilon), self.margin == "text", *sampling)

        # the primal's running average, on the coefficients
        gamma = self._run(steps, lambda done: self._current(alpha, beta, done),
                          self._dual_scorer(X, valid, W0), callback)
        self.W_ = _combination(gamma, X.columns(), X.shape, W0)

    @staticmethod
    def _dual_scorer(X: Pictures, valid, W0):
        """Validation mean AvgP of coefficients gamma (T x n): the validation pictures'
        scores are X_valid (W0 + gamma X)^T = X_valid W0^T + (X X_valid^T)^T gamma^T."""
        if valid is None:
            return None
        K = X.cross(valid[0])
        base = 0.0 if W0 is None else valid[0].project(W0)
        return lambda gamma: mean_average_precision(base + K.T @ gamma.T, valid[1], valid[2])

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
    # PA is an online algorithm, so a trained PAMIR keeps learning: from new
    # captioned pictures, new words included (partial_fit), and from a person's right / wrong
    # marks on a query's results (pamir_feedback.py: feedback_delta, apply_feedback).

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
        zero (measured worse on Corel 5k: pamir.training.online.learn). n_updates: default
        LEARN_UPDATES_PER_PICTURE a picture, at most LEARN_MAX_UPDATES. average: keep the
        average of W over these updates, as training does. A model not fitted yet starts
        from W = 0. What the call did is in `last_update_` (queries, updates, active)."""
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
                 "updates_per_second_", "valid_queries_", "out_of_time_", "dual_")
                if hasattr(self, k)}
        return meta, {"W": self.W_, "idf": self.idf_}

    def _set_state(self, meta, arrays):
        for k, v in meta.items():
            setattr(self, k, v)
        self.W_ = np.ascontiguousarray(arrays["W"], dtype=np.float32)
        self.idf_ = arrays["idf"]
        self.T_, self.V_ = self.W_.shape
        self.n_features_in_ = self.V_


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


__all__ = ["PAMIR", "pa_updates"]
