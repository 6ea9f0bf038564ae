"""The retrieval protocol of the papers: vocabulary, splits, queries and relevance.

- Vocabulary (Corel 5k): the words of the development set that occur in at least 2 test
  pictures (179 words). A user's collection: the words of at least 2 training pictures.
- A picture is relevant to a query iff its caption contains every query word.
- The query set of a picture set is every non-empty subset of vocabulary words that has at
  least one relevant picture in the set, i.e. every subset of some caption (optionally capped
  in size, for collections with long captions).
- The development set is split into train and validation pictures with a seeded permutation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import scipy.sparse as sp

from . import config
from .data import Collection
from .text.vectors import bag_of_words, idf, text_vectors


@dataclass
class QuerySet:
    """Queries over one picture set, with their relevance judgements.

    terms: each query's vocabulary indices (sorted tuple).
    relevance: (n_queries x n_pictures) CSR, 1 where picture j (a position in `pictures`)
        is relevant to query i.
    pictures: the collection indices of the picture set.
    """

    vocabulary: list[str]
    terms: list[tuple[int, ...]]
    relevance: sp.csr_matrix
    pictures: np.ndarray

    def __len__(self) -> int:
        return len(self.terms)

    @property
    def words(self) -> list[tuple[str, ...]]:
        return [tuple(self.vocabulary[t] for t in q) for q in self.terms]

    @property
    def n_words(self) -> np.ndarray:
        return np.array([len(q) for q in self.terms], dtype=np.int64)

    @property
    def n_relevant(self) -> np.ndarray:
        return np.diff(self.relevance.indptr)

    def presence(self) -> sp.csr_matrix:
        """(n_queries x T) binary word presence."""
        rows = np.repeat(np.arange(len(self.terms)), self.n_words)
        cols = np.fromiter((t for q in self.terms for t in q), dtype=np.int64, count=len(rows))
        data = np.ones(len(rows), dtype=np.float32)
        return sp.csr_matrix((data, (rows, cols)), shape=(len(self.terms), len(self.vocabulary)))

    def vectors(self, idf_weights: np.ndarray) -> sp.csr_matrix:
        """The normalised idf query vectors (n_queries x T)."""
        return text_vectors(self.presence(), idf_weights)

    def subset(self, mask: np.ndarray) -> "QuerySet":
        keep = np.flatnonzero(mask)
        return QuerySet(
            self.vocabulary, [self.terms[i] for i in keep], self.relevance[keep], self.pictures
        )

    def qids(self) -> list[str]:
        """Stable query ids: the query's words joined by '+' (safe in TREC files)."""
        return ["+".join(w) for w in self.words]


def generate_queries(
    captions: list[np.ndarray], vocabulary: list[str], pictures: np.ndarray,
    max_words: int | None = config.MAX_QUERY_WORDS,
) -> QuerySet:
    """Every subset of each caption's vocabulary words, with the pictures containing it."""
    relevant: dict[tuple[int, ...], list[int]] = {}
    for j, terms in enumerate(captions):
        terms = sorted(set(int(t) for t in terms))
        top = len(terms) if max_words is None else min(max_words, len(terms))
        for size in range(1, top + 1):
            for q in combinations(terms, size):
                relevant.setdefault(q, []).append(j)
    terms = sorted(relevant, key=lambda q: (len(q), q))
    indptr = np.cumsum([0] + [len(relevant[q]) for q in terms])
    indices = np.fromiter((j for q in terms for j in relevant[q]), np.int32, indptr[-1])
    R = sp.csr_matrix(
        (np.ones(len(indices), np.float32), indices, indptr), shape=(len(terms), len(captions))
    )
    return QuerySet(vocabulary, terms, R, np.asarray(pictures))


class Protocol:
    """Vocabulary, train / valid / test pictures and their query sets for one collection.

    Indices (`train`, `valid`, `test`) are positions in `collection`.
    """

    def __init__(
        self,
        collection: Collection,
        *,
        seed: int = config.SEED,
        valid_size: int | None = None,
        max_query_words: int | None = config.MAX_QUERY_WORDS,
        vocabulary: list[str] | None = None,
        valid_ids=None,
    ):
        self.collection = collection
        self.seed = seed
        self.max_query_words = max_query_words
        captioned = {int(i) for i in collection.captioned}
        dev = [i for i in collection.indices("train") if i in captioned]
        test = [i for i in collection.indices("test") if i in captioned]
        if not dev:  # a user's table without a split column: every captioned picture is dev
            dev = sorted(i for i in captioned if collection.splits[i] != "test")
        if not dev:
            raise ValueError(f"{collection.name}: no captioned pictures to learn from")
        self.development = np.array(dev, dtype=np.int64)
        self.test = np.array(test, dtype=np.int64)
        if valid_size is None:
            valid_size = config.VALID_SIZE if len(dev) > 5 * config.VALID_SIZE else len(dev) // 10
        self.valid_size = valid_size
        order = np.random.default_rng(seed).permutation(len(dev))
        if valid_ids is not None:  # a model's own validation pictures, kept (an incremental
            # refit, pamir.training.refitting): the seeded draw moves when pictures are added
            ids = set(valid_ids)
            kept = np.array([collection.ids[i] in ids for i in dev], bool)
            order, valid_size = np.concatenate([order[kept[order]], order[~kept[order]]]), \
                int(kept.sum())
            self.valid_size = valid_size
        self.valid = np.sort(self.development[order[:valid_size]])
        self.train = np.sort(self.development[order[valid_size:]])
        self.vocabulary = vocabulary or self._vocabulary_rule()
        self.word_index = {w: k for k, w in enumerate(self.vocabulary)}
        Y_train = self.presence(self.train)
        self.idf = idf(Y_train)

    def _vocabulary_rule(self) -> list[str]:
        caps = self.collection.captions
        dev_words = {w for i in self.development for w in caps[i]}
        if len(self.test):
            in_test = Counter(w for i in self.test for w in set(caps[i]))
            words = {w for w in dev_words if in_test[w] >= config.COREL_MIN_TEST_PICTURES}
        else:
            in_train = Counter(w for i in self.train for w in set(caps[i]))
            words = {w for w, n in in_train.items() if n >= config.MIN_WORD_PICTURES}
        return sorted(words)

    @property
    def T(self) -> int:
        return len(self.vocabulary)

    def presence(self, idx: np.ndarray) -> sp.csr_matrix:
        """(len(idx) x T) binary caption matrix Y over the vocabulary."""
        Y = bag_of_words([self.collection.captions[i] or () for i in idx], self.word_index)
        Y.data[:] = 1.0
        return Y

    def split(self, name: str) -> np.ndarray:
        return {"train": self.train, "valid": self.valid, "test": self.test,
                "development": self.development}[name]

    def queries(self, split: str | np.ndarray) -> QuerySet:
        idx = self.split(split) if isinstance(split, str) else np.asarray(split)
        Y = self.presence(idx)
        caps = [Y.indices[Y.indptr[j]:Y.indptr[j + 1]] for j in range(len(idx))]
        return generate_queries(caps, self.vocabulary, idx, self.max_query_words)

    def query_vectors(self, qs: QuerySet) -> sp.csr_matrix:
        return qs.vectors(self.idf)

    def query_subsets(self, qs: QuerySet) -> dict[str, np.ndarray]:
        """Boolean masks of the TPAMI query subsets (Tables X, XI, XII)."""
        nrel, nw = qs.n_relevant, qs.n_words
        seen = {q for s in ("train", "valid") for q in self.queries(s).terms}
        return {
            "all": np.ones(len(qs), bool),
            "single-word": nw == 1,
            "multi-word": nw > 1,
            "easy": nrel >= config.EASY_MIN_RELEVANT,
            "difficult": nrel < config.EASY_MIN_RELEVANT,
            "unseen": np.array([q not in seen for q in qs.terms], bool),
        }

    def stats(self) -> dict:
        """Table I of the TPAMI paper for this collection."""
        out = {"vocabulary": self.T, "seed": self.seed}
        for name in ("train", "valid", "test"):
            idx = self.split(name)
            if not len(idx):
                continue
            qs = self.queries(name)
            out[name] = {
                "pictures": int(len(idx)),
                "queries": len(qs),
                "relevant_per_query": round(float(qs.n_relevant.mean()), 2) if len(qs) else 0.0,
                "words_per_query": round(float(qs.n_words.mean()), 2) if len(qs) else 0.0,
                "single_word_queries": int((qs.n_words == 1).sum()),
            }
        return out
