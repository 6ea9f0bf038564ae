"""Text side: tokenising captions and queries, idf weights and query vectors.

Queries and captions are bags of words. A query vector is the normalised idf weighting of the
TPAMI paper (§III-A): q_i = b_i idf_i / ||b idf||, with b_i the presence of word i and
idf_i = -log(r_i), r_i the fraction of training captions that contain word i.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # scipy is imported by the functions that build matrices: a query needs none
    import scipy.sparse as sp

def _english_stop_words() -> frozenset[str]:
    """scikit-learn's English stop words (318, from the Glasgow IR group's list), read from
    its source file: importing sklearn.feature_extraction would add about a second to every
    `pamir search`, which only needs this list."""
    spec = importlib.util.find_spec("sklearn")
    source = Path(spec.submodule_search_locations[0], "feature_extraction", "_stop_words.py")
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and getattr(node.targets[0], "id", "") == "ENGLISH_STOP_WORDS"):
            return frozenset(ast.literal_eval(node.value.args[0]))
    raise ImportError(f"{source}: no ENGLISH_STOP_WORDS; is scikit-learn installed whole?")


#: English stop words for free-text captions and queries: scikit-learn's list, the few this
#: project used before it, and the words of definitions that scikit-learn's list lacks (a
#: folder of one-line descriptions kept "called", "means" and "used" as words). Keywords are
#: not filtered; an index drops from this list the words its model's vocabulary holds
#: (Corel 5k's "detail" stays searchable).
STOP_WORDS = _english_stop_words() | frozenset(
    """a an and are as at be by for from has have in is it its of on or that the this to was
    were with without over under into onto near some his her their our your my""".split()
) | frozenset("called calls means meaning used uses using known named also".split())

_TOKEN = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*", re.UNICODE)


def tokenize(text: str, stop_words: Iterable[str] | None = STOP_WORDS,
             min_length: int = 2) -> list[str]:
    """Lower-case words of `text`, punctuation split off, stop words and tokens shorter than
    min_length (captions: one-character tokens, "a" or the "s" of "peacock's" typed with
    another apostrophe) removed, order kept."""
    stop = frozenset(stop_words or ())
    return [w for w in (m.group(0).lower() for m in _TOKEN.finditer(text))
            if len(w) >= min_length and w not in stop]


_SPACES = re.compile(r"\s+")


def fold(text: str) -> str:
    """A word as facts and queries are matched (pamir.facts.fact, pamir.text.query): lower
    case, accents taken off (NFKD, then the combining marks dropped), runs of spaces made one,
    so that a query word and a stored fact meet whatever the case and accents ("reykjavik"
    finds Reykjavík). "Reykjavík" -> "reykjavik", "  São  Paulo " -> "sao paulo". Letters with
    no decomposition (ø, ł, ß) keep theirs, casefolded."""
    decomposed = unicodedata.normalize("NFKD", str(text))
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _SPACES.sub(" ", bare.casefold()).strip()

def split_keywords(text: str) -> list[str]:
    """Keywords separated by spaces, commas or semicolons, lower-cased, duplicates dropped."""
    words = [w.strip().lower() for w in re.split(r"[\s,;]+", text)]
    return list(dict.fromkeys(w for w in words if w))


def idf(Y: sp.spmatrix) -> np.ndarray:
    """idf_i = -log(r_i) from an (n x T) presence matrix; words never seen get the largest idf."""
    # start-up: scipy (0.3 s)
    import scipy.sparse as sp  # noqa: PLC0415

    Y = sp.csr_matrix(Y)
    n = max(Y.shape[0], 1)
    df = np.asarray((Y > 0).sum(axis=0)).ravel().astype(np.float64)
    return -np.log(np.maximum(df, 0.5) / n)  # an unseen word counts as half a picture


def text_vectors(B: sp.spmatrix, idf_weights: np.ndarray, tf: bool = False) -> sp.csr_matrix:
    """L2-normalised (binary or tf) x idf rows of an (n x T) word-count matrix, float32 CSR."""
    # start-up: scipy (0.3 s)
    import scipy.sparse as sp  # noqa: PLC0415

    B = sp.csr_matrix(B, dtype=np.float64)
    if not tf:
        B.data = np.ones_like(B.data)
    V = B @ sp.diags(idf_weights)
    norms = np.sqrt(np.asarray(V.multiply(V).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sp.csr_matrix(sp.diags(1.0 / norms) @ V, dtype=np.float32)


def bag_of_words(docs: Sequence[Sequence[str]], word_index: dict[str, int]) -> sp.csr_matrix:
    """(n x T) counts of the in-vocabulary words of each document; other words are ignored."""
    # start-up: scipy (0.3 s)
    import scipy.sparse as sp  # noqa: PLC0415

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
    # start-up: scipy (0.3 s)
    import scipy.sparse as sp  # noqa: PLC0415

    ids = sorted(set(int(t) for t in word_ids))
    B = sp.csr_matrix((np.ones(len(ids)), (np.zeros(len(ids), int), ids)),
                      shape=(1, len(idf_weights)))
    return text_vectors(B, np.asarray(idf_weights, np.float64)).toarray().ravel()
