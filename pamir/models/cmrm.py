"""Cross-Media Relevance Model (Jeon, Lavrenko & Manmatha, SIGIR 2003; TPAMI 2008 §II-B).

Each training picture J is an urn of words and visterms. With Jelinek-Mercer smoothing:

    P(w|J) = (1 - alpha) #(w,J)/|J|_w + alpha #(w,T)/|T|_w          (paper eq. 4)
    P(v|J) = (1 - beta)  #(v,J)/|J|_v + beta  #(v,T)/|T|_v          (paper eq. 5)

and a picture I = {v_1 .. v_m} (visterm counts) gets

    P(w, I) = sum_J P(J) P(w|J) prod_v P(v|J)^#(v,I)                (eq. 3, uniform P(J))
    P(w|I)  = P(w, I) / sum_w' P(w', I)                              (eq. 1, Bayes' rule)

Products of ~77 probabilities underflow, so the sum over J is a logsumexp. The per-picture
log-likelihood sum_v #(v,I) log P(v|J) is split into a part that does not depend on J,
sum_v #(v,I) log(beta P(v|T)), plus a sparse correction over the visterms J and I share,
log(1 + (1-beta) #(v,J) / (|J| beta P(v|T))): one sparse product instead of a dense
(V x n_train) log table.

|J| is counted per modality (words for P(w|J), visterms for P(v|J)), so each smoothed
estimate is a distribution; the SIGIR paper's |J| counts both together, which would make
neither sum to one.

Retrieval (`mode`):
- "pacmrm": query likelihood, sum_{w in q} log P(w|I) (eq. 6);
- "drcmrm": the query's visterm model P(v|Q) (eq. 7-8) and the negative KL divergence to the
  picture's smoothed visterm model P(v|I) (eq. 9);
- "dot": the text-space dot product q . P(.|I) shared by every model (TPAMI §II-B).
FACMRM is `annotate`: the top-N words of P(w|I).

Input: X holds visterm COUNTS per picture (n x V), not tf-idf L2 bags: the likelihood is a
product over the blocks' visterms, so it needs how many blocks fell into each visterm.
The L2 tf-idf bags the rest of pamir passes are accepted as well, read as fractional counts
(about 0.1 a block instead of 1, which tempers the product of likelihoods); which input works better is a validated choice
(benchmarks/bench_compare.py, config.CMRM_CMTT_FEATURE_GRID).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from .. import config
from .base import TextSpaceModel, dense_float32

MODES = ("pacmrm", "drcmrm", "dot")
CHUNK = 512  # pictures (or queries) per dense block: bounds memory to CHUNK x n_train floats
_TINY = np.finfo(np.float64).tiny


def as_counts(X, name: str = "X") -> sp.csr_matrix:
    """CSR float64 copy of a non-negative count matrix, with a clear error otherwise."""
    X = sp.csr_matrix(X, dtype=np.float64)
    if X.nnz and (not np.isfinite(X.data).all() or X.data.min() < 0):
        raise ValueError(f"{name}: visterm counts must be finite and non-negative")
    X.eliminate_zeros()
    return X


def row_normalised(C: sp.csr_matrix) -> sp.csr_matrix:
    """Rows divided by their sums (empty rows stay empty)."""
    sums = np.asarray(C.sum(axis=1)).ravel()
    inv = np.divide(1.0, sums, out=np.zeros_like(sums), where=sums > 0)
    return sp.csr_matrix(sp.diags(inv) @ C)


def background(C: sp.csr_matrix) -> np.ndarray:
    """#(x,T)/|T|: each column's share of all occurrences in the training set."""
    totals = np.asarray(C.sum(axis=0)).ravel()
    return totals / max(totals.sum(), _TINY)


def smoothed_log_ratio(C: sp.csr_matrix, bg: np.ndarray, smoothing: float) -> sp.csr_matrix:
    """Sparse log(P(x|J) / (smoothing bg_x)) = log(1 + (1-s) ML / (s bg)) over J's non-zeros.

    Columns with bg = 0 are dropped (they only occur outside the training set, where the
    estimate is the same for every J).
    """
    ml = row_normalised(C).tocoo()
    keep = bg[ml.col] > 0
    rows, cols, vals = ml.row[keep], ml.col[keep], ml.data[keep]
    data = np.log1p((1 - smoothing) * vals / (smoothing * bg[cols]))
    return sp.csr_matrix((data, (rows, cols)), shape=C.shape)


class CMRM(TextSpaceModel):
    """Cross-Media Relevance Model over visterm counts.

    alpha: word smoothing (Jelinek-Mercer weight of the background), in [0, 1].
    beta: visterm smoothing, in (0, 1] (0 would make every unseen visterm impossible).
    mode: how `score_queries` ranks: "pacmrm", "drcmrm" or "dot" (see the module docstring).
    """

    kind = "cmrm"
    #: TPAMI Table VI used 0.5 / 0.1, the SIGIR paper's FACMRM (tuned on F-measure) 0.1 / 0.9.
    #: The defaults are Corel 5k's validation choice (77 blocks, 10,000 visterms); DRCMRM led
    #: PACMRM there by ~4.5 AvgP.
    param_grid = {"alpha": [0.1, 0.3, 0.5, 0.7, 0.9],
                  "beta": [0.1, 0.3, 0.5, 0.7, 0.9, 0.97, 0.99, 0.999],
                  "mode": ["pacmrm", "drcmrm", "dot"]}

    def __init__(self, alpha: float = 0.3, beta: float = 0.3, mode: str = "drcmrm"):
        self.alpha = alpha
        self.beta = beta
        self.mode = mode

    def _check_params(self) -> None:
        if not 0 <= self.alpha <= 1:
            raise ValueError(f"alpha={self.alpha}: the word smoothing must lie in [0, 1]")
        if not 0 < self.beta <= 1:
            raise ValueError(f"beta={self.beta}: the visterm smoothing must lie in (0, 1]")
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r}: use one of {', '.join(MODES)}")

    # ------------------------------------------------------------------------------ training
    def fit(self, X, Y, *, validation=None, callback=None):
        """Keep the training pictures' visterm counts X (n x V) and captions Y (n x T).

        CMRM is non-parametric: the model is the training set and its background counts.
        Validation data is not used (pamir.training.selection chooses alpha, beta and mode).
        """
        self._check_params()
        C, W = as_counts(X, "X"), as_counts(Y, "Y")
        if C.shape[0] != W.shape[0]:
            raise ValueError(f"X has {C.shape[0]} pictures but Y has {W.shape[0]} captions")
        if C.shape[0] == 0:
            raise ValueError("CMRM needs at least one training picture")
        self.visterm_counts_, self.word_counts_ = C, W
        self._prepare()
        return self

    def _prepare(self) -> None:
        C, W = self.visterm_counts_, self.word_counts_
        self.n_visterms_, self.n_words_ = C.shape[1], W.shape[1]
        self.visterm_background_ = background(C)
        self.word_background_ = background(W)
        self.visterm_ratio_ = smoothed_log_ratio(C, self.visterm_background_, self.beta)
        self.word_given_picture_ = self._word_given_training_picture()
        self.log_word_given_picture_ = np.log(np.maximum(self.word_given_picture_, _TINY))

    def _word_given_training_picture(self) -> np.ndarray:
        """P(w|J), (n_train x T) dense; a training picture with no caption gets P(w|T)."""
        ml = row_normalised(self.word_counts_).toarray()
        empty = np.asarray(self.word_counts_.sum(axis=1)).ravel() == 0
        ml[empty] = self.word_background_
        return (1 - self.alpha) * ml + self.alpha * self.word_background_

    def visterm_given_training_picture(self) -> sp.csr_matrix:
        """The ML part #(v,J)/|J| of P(v|J) (sparse); P(v|J) = (1-beta) this + beta P(v|T)."""
        return row_normalised(self.visterm_counts_)

    # ----------------------------------------------------------------------------- inference
    def _check_fitted(self, X) -> sp.csr_matrix:
        if not hasattr(self, "visterm_counts_"):
            raise RuntimeError("CMRM is not fitted: call fit(X, Y) first")
        X = as_counts(X)
        if X.shape[1] != self.n_visterms_:
            raise ValueError(f"X has {X.shape[1]} visterms, the model was fitted on "
                             f"{self.n_visterms_}")
        return X

    def _visterm_constant(self, X: sp.csr_matrix) -> np.ndarray:
        """sum_v #(v,I) log(beta P(v|T)), the part of log P(I|J) shared by every J."""
        with np.errstate(divide="ignore"):
            log_bg = np.log(self.beta * self.visterm_background_)
        return np.asarray(X @ log_bg).ravel()  # -inf if I holds a visterm never seen

    def log_picture_given_training(self, X) -> np.ndarray:
        """log P(I|J) = sum_v #(v,I) log P(v|J), (n x n_train)."""
        X = self._check_fitted(X)
        return (X @ self.visterm_ratio_.T).toarray() + self._visterm_constant(X)[:, None]

    def log_joint(self, X) -> np.ndarray:
        """log P(w, I) for every word (n x T): eq. 3 with logsumexp over the training set."""
        X = self._check_fitted(X)
        out = np.empty((X.shape[0], self.n_words_))
        for a in range(0, X.shape[0], CHUNK):
            L = (X[a:a + CHUNK] @ self.visterm_ratio_.T).toarray()
            out[a:a + CHUNK] = self._log_mix(L) + self._visterm_constant(X[a:a + CHUNK])[:, None]
        return out

    def _log_mix(self, L: np.ndarray) -> np.ndarray:
        """log sum_J P(J) P(w|J) exp(L_IJ) for each row I of L (up to the dropped constant).

        Shifting each row by its maximum makes exp() of the best J equal to 1, and since
        P(w|J) >= alpha P(w|T), the sum cannot underflow: a logsumexp without the (n x n_train
        x T) tensor.
        """
        m = L.max(axis=1, keepdims=True)
        mix = np.exp(L - m) @ self.word_given_picture_
        with np.errstate(divide="ignore"):
            return np.log(mix) + m - np.log(L.shape[1])

    def log_word_probabilities(self, X) -> np.ndarray:
        """log P(w|I), (n x T) float64: the joint normalised over the words."""
        X = self._check_fitted(X)
        out = np.empty((X.shape[0], self.n_words_))
        for a in range(0, X.shape[0], CHUNK):
            L = (X[a:a + CHUNK] @ self.visterm_ratio_.T).toarray()
            lj = self._log_mix(L)
            out[a:a + CHUNK] = lj - logsumexp(lj, axis=1, keepdims=True)
        return out

    def transform(self, X) -> np.ndarray:
        """P(w|I) for each picture (n x T) float32: the PACMRM / FACMRM text-space vector."""
        return dense_float32(np.exp(self.log_word_probabilities(X)))

    def annotate(self, X, n_words: int = config.ANNOTATION_WORDS) -> np.ndarray:
        """FACMRM: the indices of each picture's n_words most probable words (n x n_words)."""
        P = self.log_word_probabilities(X)
        return np.argsort(-P, axis=1, kind="stable")[:, :n_words]

    # ----------------------------------------------------------------------------- retrieval
    def score_queries(self, Q, X) -> np.ndarray:
        """(n_queries x n_pictures) scores of pictures X for query vectors Q (n_q x T).

        Query likelihood and DRCMRM use only which words a query holds, not their weights.
        """
        Q = sp.csr_matrix(Q)
        if Q.shape[1] != getattr(self, "n_words_", Q.shape[1]):
            raise ValueError(f"queries have {Q.shape[1]} words, the model knows {self.n_words_}")
        if self.mode == "dot":
            return np.asarray(Q @ self.transform(X).T.astype(np.float64))
        words = (Q != 0).astype(np.float64)
        if self.mode == "pacmrm":
            return np.asarray(words @ self.log_word_probabilities(X).T)
        return self.negative_kl(words, X)

    def query_visterm_model(self, words: sp.csr_matrix) -> np.ndarray:
        """P(v|Q) for queries given as word presence (n_q x T): eq. 7-8, (n_q x V) dense.

        P(v|Q) = sum_J u_QJ P(v|J) with u_QJ = P(J) prod_w P(w|J) normalised over J.
        """
        words = sp.csr_matrix(words, dtype=np.float64)
        log_u = np.asarray(words @ self.log_word_given_picture_.T)  # (n_q x n_train)
        u = np.exp(log_u - logsumexp(log_u, axis=1, keepdims=True))
        ml = self.visterm_given_training_picture()
        return (1 - self.beta) * np.asarray((ml.T @ u.T).T) + self.beta * self.visterm_background_

    def negative_kl(self, words, X) -> np.ndarray:
        """-KL(P(.|Q) || P(.|I)) for queries (word presence, n_q x T) and pictures X (eq. 9).

        P(v|I) is the picture's own smoothed estimate (eq. 5 with the training background).
        Visterms never seen in training have P(v|Q) = 0 and contribute nothing.
        """
        X = self._check_fitted(X)
        bg = self.visterm_background_
        seen = bg > 0
        log_bg = np.zeros_like(bg)
        log_bg[seen] = np.log(self.beta * bg[seen])
        ratio = smoothed_log_ratio(X, bg, self.beta)  # log P(v|I) - log(beta bg) on I's visterms
        words = sp.csr_matrix(words)
        out = np.empty((words.shape[0], X.shape[0]))
        for a in range(0, words.shape[0], CHUNK):
            PQ = self.query_visterm_model(words[a:a + CHUNK])
            neg_entropy = (PQ[:, seen] * np.log(PQ[:, seen])).sum(axis=1)
            cross = (PQ @ log_bg)[:, None] + np.asarray((ratio @ PQ.T).T)
            out[a:a + CHUNK] = cross - neg_entropy[:, None]
        return out

    # --------------------------------------------------------------------------- persistence
    def _state(self):
        arrays = {}
        for name, M in (("visterms", self.visterm_counts_), ("words", self.word_counts_)):
            arrays |= {f"{name}_data": M.data, f"{name}_indices": M.indices,
                       f"{name}_indptr": M.indptr, f"{name}_shape": np.array(M.shape)}
        return {"n_visterms": self.n_visterms_, "n_words": self.n_words_}, arrays

    def _set_state(self, meta, arrays):
        def csr(name):
            return sp.csr_matrix((arrays[f"{name}_data"], arrays[f"{name}_indices"],
                                  arrays[f"{name}_indptr"]), shape=tuple(arrays[f"{name}_shape"]))
        self.visterm_counts_, self.word_counts_ = csr("visterms"), csr("words")
        self._prepare()
