"""The zero-caption system as a prior inside every fitted system.

A model fitted on a few captioned pictures knows its words less well than ImageNet's
classifier knows the same words through WordNet (pamir.zeroshot.classes): on Corel 5k, 50 captioned
pictures searched worse than none. So each of a CNN system's words is scored by the model and
by the words' classes together:

    z'_w = (1 - a_w) z_w + a_w s_w SCALE m_w,    m_w = mass_score(P . c_w)

z_w: the model's score of the word; P: the picture's 1,000 class probabilities; c_w: the
word's classes (pamir.zeroshot.classes.ClassWords: WordNet's table, else the embedding of the
classes' descriptions); mass_score puts their probability mass in [0, 1]; s_w the spread
(standard deviation) of the model's scores of the word over the validation pictures and some
training pictures (SPREAD_PICTURES), so that
SCALE sets how many of the model's standard deviations a certain class match is worth (the
index's CLASS_SCALE, for the same reason). For one word this ranks as (1 - a) x the model's
standard score + a x SCALE x the class score, which is how the index mixes a word outside the
vocabulary; unlike a mix at query time it is linear, so the index keeps its exact top-k over
sorted lists, and the calibration (pamir.calibration) is fitted on these scores.

The weight a_w is chosen on validation: per word, the weight of WEIGHTS with the best AvgP
of the word's single-word query over the validation pictures, shrunk toward one global
weight (the best mean over the words) by how many validation pictures carry the word:
a_w = (n_w a*_w + SHRINK a_g) / (n_w + SHRINK); validation chose SHRINK infinite, the global
weight for every word (SHRINK's comment says why). The global weight chosen on few validation
pictures is itself settled toward DEFAULT_WEIGHT (SETTLE). The index measures a query's words
by the same spreads (pamir.jobs.loading.word_scales), so that a word mixed here and a word outside
the vocabulary, which reaches the classes at query time, weigh alike in one query. A word the classes do not reach keeps the
model alone (a_w = 0). With 45 training pictures the classes take most of the weight; with
4,000 the model keeps it (benchmarks/results/zero_caption.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from .classes import mass_score

#: The mix weights tried on validation (0: the model alone, 1: the classes alone).
WEIGHTS = tuple(np.round(np.linspace(0.0, 1.0, 11), 2))
#: How many validation pictures of a word weigh as much as the global weight (10: a word
#: with 3 pictures keeps 23 % of its own choice, one with 30 keeps 75 %). Chosen on
#: validation: infinite, the global weight for every word. The per-word choices raise each
#: word's own validation AvgP, but not the queries': on Corel 5k's validation pictures,
#: all-query AvgP for models of 50, 200, 1,000 and 4,000 captioned pictures was 15.55 /
#: 22.89 / 34.93 / 47.23 with SHRINK 10 and 15.52 / 22.87 / 34.96 / 47.70 with the global
#: weight alone (benchmarks/results/zero_caption.md): within noise, then 0.47 lower at
#: 4,000, where a test AvgP of 50.87 against 51.28 for the README's model agreed.
SHRINK = math.inf
#: Fewer validation words than this with a picture: too few to choose a global weight on,
#: and DEFAULT_WEIGHT is taken.
MIN_WORDS = 5
#: The global weight where validation cannot choose one, and what a choice made on few
#: validation pictures is shrunk toward: a = (n a* + SETTLE DEFAULT_WEIGHT) / (n + SETTLE)
#: for n validation pictures. With 5 (a folder of 50 captioned pictures) the best weight on
#: them swung from 0.1 to 0.8 between draws of the same size, while the weight that searched
#: the benchmark's 450 validation pictures best stayed near DEFAULT_WEIGHT. Both chosen on
#: Corel 5k's validation pictures, models of 50, 200 and 1,000 captioned pictures
#: (benchmarks/results/zero_caption.md, "The global weight").
DEFAULT_WEIGHT = 0.6
SETTLE = 20
#: The spreads s_w are measured over this many captioned pictures at most, the training
#: pictures' included: a spread of 5 validation pictures is noise (0.014 to 0.2 between
#: words of one model, against 0.11 to 0.18 over 50 pictures).
SPREAD_PICTURES = 2000
#: A certain class match is worth this many of the model's standard deviations (the index's
#: CLASS_SCALE, pamir.index.reading).
SCALE = 3.0


class Prior:
    """The classes' part of a system's word scores: weights (T,) in [0, 1], spreads (T,) of
    the model's scores, and each word's class weights (T x C, sparse rows; a row of zeros for
    a word the classes do not reach)."""

    def __init__(self, weights, spreads, classes, info: dict | None = None):
        self.weights = np.asarray(weights, dtype=np.float32)
        self.spreads = np.asarray(spreads, dtype=np.float32)
        self.classes = sp.csr_matrix(classes, dtype=np.float32)
        self.info = dict(info or {})
        if not (self.weights.shape == self.spreads.shape == (self.classes.shape[0],)):
            raise ValueError(f"prior: {self.weights.shape} weights, {self.spreads.shape} "
                             f"spreads for {self.classes.shape[0]} words")

    @property
    def T(self) -> int:
        return len(self.weights)

    def class_scores(self, P: np.ndarray, words: np.ndarray | None = None) -> np.ndarray:
        """(n x len(words)) the words' class scores m_w of pictures with class probabilities
        P (n x C); every word by default."""
        rows = self.classes if words is None else self.classes[words]
        return mass_score(np.asarray(rows @ np.asarray(P, np.float64).T).T)

    def mix(self, Z: np.ndarray, P: np.ndarray) -> np.ndarray:
        """Z' (n x T) float32: the model's scores Z (n x T) mixed with the class scores of
        the pictures' class probabilities P (n x C), each word by its weight."""
        Z = np.asarray(Z, dtype=np.float32)
        mixed = np.flatnonzero(self.weights > 0)
        if not len(mixed) or not len(Z):
            return Z
        out = Z.copy()
        a, s = self.weights[mixed], self.spreads[mixed]
        out[:, mixed] = (1 - a) * Z[:, mixed] + a * s * SCALE * self.class_scores(P, mixed)
        return out

    def grow(self, T: int) -> None:
        """New words (pamir learn) join with the model alone: weight 0, no classes."""
        extra = T - self.T
        if extra > 0:
            self.weights = np.concatenate([self.weights, np.zeros(extra, np.float32)])
            usual = np.median(self.spreads) if self.T else 1.0
            self.spreads = np.concatenate([self.spreads, np.full(extra, usual, np.float32)])
            self.classes = sp.vstack([self.classes, sp.csr_matrix((extra, self.classes.shape[1]),
                                                                  dtype=np.float32)]).tocsr()

    def to_saved(self) -> tuple[dict, dict[str, np.ndarray]]:
        return dict(self.info), {"weights": self.weights, "spreads": self.spreads,
                                 "data": self.classes.data, "indices": self.classes.indices,
                                 "indptr": self.classes.indptr,
                                 "shape": np.asarray(self.classes.shape, np.int64)}

    @classmethod
    def from_saved(cls, info: dict, arrays: dict[str, np.ndarray]) -> "Prior":
        classes = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]),
                                shape=tuple(int(x) for x in arrays["shape"]))
        return cls(arrays["weights"], arrays["spreads"], classes, info)


def word_classes(vocabulary: Sequence[str], class_words) -> "np.ndarray":
    """(T x C) each vocabulary word's class weights through `class_words`
    (pamir.zeroshot.classes.ClassWords), zeros where they reach none; sparse."""
    rows = []
    for w in vocabulary:
        match = class_words.match(w.replace("_", " "), w.split("_"))
        rows.append(sp.csr_matrix(match.vector[None, :]) if match.vector is not None
                    else sp.csr_matrix((1, len(class_words.names)), dtype=np.float32))
    return sp.vstack(rows).tocsr() if rows else sp.csr_matrix((0, len(class_words.names)))


def choose_prior(Z_valid: np.ndarray, P_valid: np.ndarray, Y_valid, classes,
                 *, Z_train: np.ndarray | None = None, queries=None,
                 weights: Sequence[float] = WEIGHTS, shrink: float = SHRINK,
                 settle: float = SETTLE) -> Prior:
    """The prior of a system whose model scores the validation pictures Z_valid (n x T),
    with their class probabilities P_valid (n x C), captions Y_valid (n x T presence) and
    the words' classes (T x C, `word_classes`): the weights chosen as the module docstring
    says; the spreads over the validation pictures and Z_train, the model's scores of (some
    of) its training pictures. The global weight is the one whose scores search `queries`
    best (the validation queries the selection scores fits on, pamir.training.selection
    .validation_queries: word sets, as people search), or the words' single-word queries
    without them. info records the global weight and the validation AvgP of the queries
    with the model alone and mixed."""
    Z = np.asarray(Z_valid, dtype=np.float64)
    Y = sp.csr_matrix(Y_valid).toarray() > 0
    T = Z.shape[1]
    spreads = spreads_of(Z if Z_train is None else np.vstack([Z, Z_train]), T)
    prior = Prior(np.zeros(T), spreads, classes)
    reach = np.flatnonzero(np.asarray(prior.classes.sum(axis=1)).ravel() > 0)
    seen = reach[Y[:, reach].any(axis=0)] if len(Z) else reach[:0]
    info = {"weights_tried": list(map(float, weights)),
            "shrink": None if math.isinf(shrink) else float(shrink),  # None: the global weight
            "words_reaching_classes": int(len(reach)), "validation_words": int(len(seen))}
    if len(seen):
        M_reach = prior.class_scores(P_valid, reach)  # (n x words the classes reach)
        M = M_reach[:, np.searchsorted(reach, seen)]  # (seen is a subset of reach, sorted)
        base, rel = Z[:, seen], Y[:, seen]
        avgp = np.stack([word_avgp(base, spreads[seen], M, rel, a)
                         for a in weights])  # (weights x words)
        mean = avgp.mean(axis=1)
        info.update(valid_single_word_avgp={"model": round(100 * float(mean[0]), 2),
                                            "mixed_global": round(100 * float(mean.max()), 2)})
        if queries is not None and queries.vectors.shape[0]:
            mean = query_avgp(Z, M_reach, spreads, reach, queries,
                              weights)
            info["valid_query_avgp"] = {"model": round(float(mean[0]), 2),
                                        "mixed_global": round(float(mean.max()), 2)}
        best = float(weights[int(np.argmax(mean))])
    if len(seen) < MIN_WORDS:
        best = DEFAULT_WEIGHT
        info["global_from"] = f"default: {len(seen)} validation words (< {MIN_WORDS})"
    else:
        info["global_best_on_validation"] = best
        best = round(float((len(Z) * best + settle * DEFAULT_WEIGHT) / (len(Z) + settle)), 3)
    w = np.zeros(T)
    w[reach] = best
    if len(seen):
        own = np.asarray(weights)[np.argmax(avgp, axis=0)]
        n = rel.sum(axis=0)
        w[seen] = best if math.isinf(shrink) else (n * own + shrink * best) / (n + shrink)
        final = float(word_avgp(Z[:, seen], spreads[seen], M, rel, w[seen]).mean())
        info["valid_single_word_avgp"]["mixed"] = round(100 * final, 2)
    info["global_weight"] = best
    return Prior(w, spreads, prior.classes, info)


def query_avgp(Z: np.ndarray, M: np.ndarray, spreads: np.ndarray, reach: np.ndarray, queries,
               weights: Sequence[float]) -> np.ndarray:
    """(weights,) mean AvgP (%) of `queries` over pictures whose model scores are Z and class
    scores M (of the words `reach`), each weight mixing every word the classes reach. Why
    queries and not single words: a weight that served each word alone best took 0.4 at
    4,000 captioned pictures and cost the 2,028 multi-word validation queries 0.8 AvgP
    (benchmarks/results/zero_caption.md)."""
    # pamir.evaluation imports numba (0.7 s): at fit time only
    from ..evaluation.retrieval import mean_average_precision  # noqa: PLC0415

    out = []
    for a in weights:
        mixed = Z.copy()
        mixed[:, reach] = (1 - a) * Z[:, reach] + a * spreads[reach] * SCALE * M
        out.append(100 * mean_average_precision(mixed.astype(np.float32), queries.vectors,
                                                queries.relevance))
    return np.asarray(out)


def spreads_of(Z: np.ndarray, T: int) -> np.ndarray:
    """(T,) the standard deviation of each word's scores Z (n x T); a word the model never
    learnt (no spread) takes the usual one."""
    spreads = Z.std(axis=0) if len(Z) else np.ones(T)
    usual = np.median(spreads[spreads > 0]) if (spreads > 0).any() else 1.0
    return np.where(spreads > 0, spreads, usual)


def word_avgp(Z: np.ndarray, spreads: np.ndarray, M: np.ndarray, rel: np.ndarray,
              w) -> np.ndarray:
    """(words,) the AvgP of each word's single-word query over pictures whose model scores
    are Z and class scores M (n x words), each word mixing with its weight w (one for all,
    or one each); rel: the pictures' captions (n x words, bool)."""
    from ..evaluation.metrics import average_precision  # noqa: PLC0415 - numba, as above

    return average_precision(((1 - w) * Z + w * spreads * SCALE * M).T, rel.T)


__all__ = ["DEFAULT_WEIGHT", "Prior", "SCALE", "SHRINK", "WEIGHTS", "choose_prior",
           "word_classes"]
