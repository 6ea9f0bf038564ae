"""Cross-Media Translation Table (Pan et al. 2004; TPAMI 2008 §II-B, ECML 2006 §4.2).

Words and visterms are two languages. Over the training pictures, each word and each visterm
is a vector of its tf-idf weights in the n_train pictures; the stacked matrix
M = [t_1 .. t_T, v_1 .. v_V] (n_train x (T + V)) is replaced by its rank-k SVD approximation
(noise removal), and the translation table comes from the cosines between the reduced word
and visterm vectors. A picture's word distribution is

    P(t|p) = sum_v P(t|v) P(v|p),   P(v|p) = #(v,p) / sum_v' #(v',p).

Choices the papers leave open, made here:
- tf-idf weights: binary tf x idf for words, visterm count x idf for visterms; with
  `l2_pictures` each picture's word part and visterm part are L2-normalised separately, so
  neither modality dominates the SVD by sheer mass (77 blocks against ~3.5 words a picture);
- negative cosines are set to zero: a translation weight cannot be negative;
- `normalise="terms"`: P(t|v) = cos+(t,v) / sum_t' cos+(t',v) (each visterm's row sums to one,
  TPAMI's P(t|v)); `normalise="visterms"`: sim(t,v) = cos+(t,v) / sum_v' cos+(t,v') (the
  normalisation TPAMI and ECML write), then P(t|p) renormalised over the words (ECML);
- a visterm with no positive cosine (or never seen in training) translates to the training
  word prior, and so does a picture with no visterm.

Input: X holds visterm COUNTS per picture (n x V), since P(v|p) is a frequency.
The L2 tf-idf bags the rest of pamir passes are accepted as well, read as fractional counts
(about 0.1 a block instead of 1); which input works better is a validated choice
(benchmarks/bench_compare.py, config.CMRM_CMTT_FEATURE_GRID).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.extmath import randomized_svd

from .base import TextSpaceModel, dense_float32
from .cmrm import as_counts, background, row_normalised

NORMALISATIONS = ("terms", "visterms")


def document_frequency_idf(C: sp.csr_matrix) -> np.ndarray:
    """idf_x = log(n / df_x) over the rows of C (0 for columns never seen)."""
    df = np.diff(sp.csc_matrix(C > 0).indptr).astype(np.float64)
    return np.log(C.shape[0] / np.maximum(df, 1.0)) * (df > 0)


def l2_rows(M: sp.csr_matrix) -> sp.csr_matrix:
    norms = np.sqrt(np.asarray(M.multiply(M).sum(axis=1)).ravel())
    inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return sp.csr_matrix(sp.diags(inv) @ M)


def tfidf(C: sp.csr_matrix, idf: np.ndarray, binary: bool = False,
          l2: bool = True) -> sp.csr_matrix:
    C = sp.csr_matrix(C, dtype=np.float64, copy=True)
    if binary:
        C.data[:] = 1.0
    M = sp.csr_matrix(C @ sp.diags(idf))
    return l2_rows(M) if l2 else M


def positive_cosines(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """max(0, cos(a_i, b_j)) between the rows of A and B (zero rows give zero)."""
    def unit(M):
        n = np.linalg.norm(M, axis=1, keepdims=True)
        return np.divide(M, n, out=np.zeros_like(M), where=n > 0)
    return np.maximum(unit(A) @ unit(B).T, 0.0)


class CMTT(TextSpaceModel):
    """Cross-Media Translation Table over visterm counts.

    n_components: singular values kept (TPAMI Table VI: 50).
    normalise: "terms" or "visterms" (module docstring).
    l2_pictures: L2-normalise each picture's word and visterm tf-idf vectors before the SVD.
    """

    kind = "cmtt"
    #: TPAMI Table VI kept 50 singular values on Corel Small; with 10,000 visterms 400 led
    #: Corel 5k's validation (200 within 0.1 AvgP), and 800 is there so 400 is not an edge.
    #: The papers say "tf-idf" only; l2_pictures barely moves validation AvgP on blobs.
    param_grid = {"n_components": [10, 25, 50, 100, 200, 400, 800],
                  "normalise": ["terms", "visterms"], "l2_pictures": [True, False]}

    def __init__(self, n_components: int = 400, normalise: str = "terms",
                 l2_pictures: bool = True, random_state: int = 0):
        self.n_components = n_components
        self.normalise = normalise
        self.l2_pictures = l2_pictures
        self.random_state = random_state

    def _check_params(self) -> None:
        if int(self.n_components) < 1:
            raise ValueError(f"n_components={self.n_components}: keep at least one singular "
                             "value")
        if self.normalise not in NORMALISATIONS:
            raise ValueError(f"normalise={self.normalise!r}: use one of "
                             f"{', '.join(NORMALISATIONS)}")

    def fit(self, X, Y, *, validation=None, callback=None):
        """Build the translation table from training visterm counts X (n x V), captions Y."""
        self._check_params()
        C, W = as_counts(X, "X"), as_counts(Y, "Y")
        if C.shape[0] != W.shape[0]:
            raise ValueError(f"X has {C.shape[0]} pictures but Y has {W.shape[0]} captions")
        T, V = W.shape[1], C.shape[1]
        k = min(int(self.n_components), min(C.shape[0], T + V) - 1)
        if k < 1:
            raise ValueError("CMTT needs at least two training pictures")
        M = sp.hstack([tfidf(W, document_frequency_idf(W), True, self.l2_pictures),
                       tfidf(C, document_frequency_idf(C), False, self.l2_pictures)]).tocsr()
        _, s, Vt = randomized_svd(M, k, n_iter=7, random_state=self.random_state)
        reduced = (Vt.T * s)  # ((T + V) x k): each word / visterm in the latent space
        cos = positive_cosines(reduced[:T], reduced[T:])  # (T x V)
        self.word_prior_ = background(W)
        self.table_ = self._table(cos)
        self.singular_values_ = s
        return self

    def _table(self, cos: np.ndarray) -> np.ndarray:
        """(V x T): P(t|v) rows for "terms", sim(t, v) transposed for "visterms"."""
        axis = 0 if self.normalise == "terms" else 1
        sums = cos.sum(axis=axis, keepdims=True)
        table = np.divide(cos, sums, out=np.zeros_like(cos), where=sums > 0).T
        if self.normalise == "terms":
            table[sums.ravel() == 0] = self.word_prior_  # no evidence: the word prior
        return np.ascontiguousarray(table)

    @property
    def translation_table(self) -> np.ndarray:
        """(V x T) P(t|v) (normalise="terms") or sim(t,v) (normalise="visterms")."""
        return self.table_

    def word_probabilities(self, X) -> np.ndarray:
        """P(t|p), (n x T) float64, rows summing to one."""
        if not hasattr(self, "table_"):
            raise RuntimeError("CMTT is not fitted: call fit(X, Y) first")
        X = as_counts(X)
        if X.shape[1] != self.table_.shape[0]:
            raise ValueError(f"X has {X.shape[1]} visterms, the model was fitted on "
                             f"{self.table_.shape[0]}")
        P = np.asarray(row_normalised(X) @ self.table_)
        sums = P.sum(axis=1, keepdims=True)
        P = np.divide(P, sums, out=np.zeros_like(P), where=sums > 0)
        P[sums.ravel() == 0] = self.word_prior_
        return P

    def transform(self, X) -> np.ndarray:
        return dense_float32(self.word_probabilities(X))

    def _state(self):
        return {}, {"table": self.table_, "word_prior": self.word_prior_,
                    "singular_values": self.singular_values_}

    def _set_state(self, meta, arrays):
        self.table_ = arrays["table"]
        self.word_prior_ = arrays["word_prior"]
        self.singular_values_ = arrays["singular_values"]
