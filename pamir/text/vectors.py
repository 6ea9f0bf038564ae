"""Text as vectors: idf weights and the query and caption vectors of the TPAMI paper
(§III-A): q_i = b_i idf_i / ||b idf||, with b_i the presence of word i and idf_i = -log(r_i),
r_i the fraction of training captions that contain word i.

scipy.sparse is imported at this module's top: what builds these vectors (the protocol, the
models, the system, the training, the calibration's fitting) has imported it already, and a
query's words (pamir.text.words, the query language) need none of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import scipy.sparse as sp


def idf(Y: sp.spmatrix) -> np.ndarray:
    """idf_i = -log(r_i) from an (n x T) presence matrix; words never seen get the largest idf."""
    Y = sp.csr_matrix(Y)
    n = max(Y.shape[0], 1)
    df = np.asarray((Y > 0).sum(axis=0)).ravel().astype(np.float64)
    return -np.log(np.maximum(df, 0.5) / n)  # an unseen word counts as half a picture


def text_vectors(B: sp.spmatrix, idf_weights: np.ndarray, tf: bool = False) -> sp.csr_matrix:
    """L2-normalised (binary or tf) x idf rows of an (n x T) word-count matrix, float32 CSR."""
    B = sp.csr_matrix(B, dtype=np.float64)
    if not tf:
        B.data = np.ones_like(B.data)
    V = B @ sp.diags(idf_weights)
    norms = np.sqrt(np.asarray(V.multiply(V).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sp.csr_matrix(sp.diags(1.0 / norms) @ V, dtype=np.float32)


def bag_of_words(docs: Sequence[Sequence[str]], word_index: dict[str, int]) -> sp.csr_matrix:
    """(n x T) counts of the in-vocabulary words of each document; other words are ignored."""
    rows, cols = [], []
    for i, doc in enumerate(docs):
        for w in doc or ():
            j = word_index.get(w)
            if j is not None:
                rows.append(i)
                cols.append(j)
    data = np.ones(len(rows), dtype=np.float32)
    M = sp.csr_matrix((data, (rows, cols)), shape=(len(docs), len(word_index)))
    M.sum_duplicates()
    return M


def query_vector(word_ids: Iterable[int], idf_weights: np.ndarray) -> np.ndarray:
    """The (T,) float32 query vector of a bag of vocabulary word ids: presence x idf, L2
    normalised (TPAMI §III-A); all zeros for an empty bag. The one home of query vectors:
    the System, the index and the evaluation build theirs here or with text_vectors."""
    ids = sorted(set(int(t) for t in word_ids))
    B = sp.csr_matrix((np.ones(len(ids)), (np.zeros(len(ids), int), ids)),
                      shape=(1, len(idf_weights)))
    return text_vectors(B, np.asarray(idf_weights, np.float64)).toarray().ravel()


__all__ = ["bag_of_words", "idf", "query_vector", "text_vectors"]
