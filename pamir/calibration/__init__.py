"""Calibrated relevance: the probability that a picture is relevant to a query.

A model's scores z . q are in its own units: 0.3 may be the best of bad matches for one query
and a poor one for another. The calibration turns a query's score into the probability that
the picture is relevant as the protocol defines it (its caption has every query word), from
what a logistic reads (FEATURES):

- z, the score's standard score over reference pictures, (s - mu_q) / sd_q, where mu_q and
  sd_q are the mean and standard deviation of Z_ref q (Z_ref: the text-space vectors of the
  validation pictures, kept): how unusual the picture is for this query;
- the log of the query's prior, the smoothed fraction of training pictures whose caption has
  every query word (a rare word or an unusual pair is rarely right even when unusual);
- the number of query words less one;
- z x the log prior: for a rare query, only a far outlier is relevant;
- z - the best reference picture's z: how the picture compares with the best match among
  pictures like the collection's (a query whose best match stands far out has a clear
  answer).

One logistic is shared by every word and query (pooling: a word with 3 validation positives
cannot fit its own curve). Its logit is linear in z for a given query, with a slope checked
positive at every prior, so a query's probability rises with its score and lies in (0, 1),
and a probability floor is a raw floor for that query (`score_floor`), which the index's
top-k search takes as it is. Which features it reads was chosen on validation
(benchmarks/results/calibration.md). It is fitted on every (validation query, validation
picture) pair, the protocol's queries (every subset of a caption); how well it holds on test
is in benchmarks/results/calibration.md.

Saved inside the system's model.json (the coefficients) and arrays.npz (the reference
vectors and the training captions' word lists), never pickled: `to_saved` / `from_saved`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..config import ANNOTATION_WORDS

if TYPE_CHECKING:
    import scipy.sparse as sp

# Fitting one is pamir.calibration.fitting's (scipy, scikit-learn: imported at its top).
# scipy.sparse is imported where a calibration is read in bulk, never to search: `pamir
# search` imports this module, and scipy.sparse costs it 0.3 s

#: The most reference pictures kept (the validation pictures, a seeded sample beyond).
MAX_REFERENCE = 1000
#: A query's prior is (pictures with every word + PRIOR_PSEUDO) / (training pictures + 1).
PRIOR_PSEUDO = 0.5
#: The most (query, picture) pairs the logistic is fitted on (a seeded sample beyond).
MAX_PAIRS = 2_000_000
FEATURES = ("standard score", "log prior", "extra words", "standard score x log prior",
            "standard score over the best reference picture's")
#: Whether the logistic is fitted with a ceiling (Calibration.ceiling), chosen on validation
#: (benchmarks/results/calibration.md).
CEILING = True
#: Retrained on train + validation (`pamir fit --retrain`): the reference scores a query's
#: standard scores are read against, the train-only model's on the validation pictures
#: ("train-only") or the retrained model's own, in-sample ("retrained"). Measured on Corel
#: 5k test (bench_calibration.py --retrain-study, bench_annotation.py --calibrated).
RETRAINED_REFERENCE = "train-only"
#: "Likely relevant" (the page's and the CLI's count): at least this probability.
LIKELY = 0.5
KEY = "calibration"


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))


def line_probability(scores, a, b, ceiling: float = 1.0) -> np.ndarray:
    """ceiling x sigmoid(a s + b): the probability of relevance of scores s on a query's
    logit line (a, b) (Calibration.logit_line); floor_of is its inverse."""
    return ceiling * _sigmoid(a * np.asarray(scores, dtype=np.float64) + b)


def floor_of(p: float, a: float, b: float, ceiling: float = 1.0) -> float:
    """The score s with ceiling x sigmoid(a s + b) = p (a > 0): -inf for p <= 0, +inf where
    p reaches the ceiling."""
    if p <= 0:
        return -np.inf
    if p >= ceiling:
        return np.inf
    r = p / ceiling
    return float((np.log(r / (1 - r)) - b) / a)


def _best_of_others(R: np.ndarray) -> np.ndarray:
    """(n_queries x n_ref) for each reference picture, the best score of the others."""
    order = np.argsort(-R, axis=1)[:, :2]
    first = np.take_along_axis(R, order[:, :1], axis=1)
    second = np.take_along_axis(R, order[:, 1:2], axis=1) if R.shape[1] > 1 else first
    out = np.repeat(first, R.shape[1], axis=1)
    np.put_along_axis(out, order[:, :1], second, axis=1)
    return out


class Calibration:
    """P(relevant | score, query) for one system (see the module docstring).

    coef: (5,) weights of FEATURES; intercept: the logistic's constant; reference: (n_ref x
    T) float32 text-space vectors; word_pictures: for each of the T words, the sorted
    training pictures whose caption has it; n_train: the number of training pictures.
    annotation_rule: the annotation rule validation preferred (pamir.calibration.thresholds:
    "top 5", "global threshold" or "per-word thresholds") and thresholds, the (T,)
    probability each word needs (None for top 5). ceiling: the highest probability any
    picture reaches, P = ceiling x sigmoid(logit): captions are incomplete (a picture of a
    tiger in grass captioned without "grass"), so even the surest match is relevant less
    than always, and a plain logistic is over-confident at the top.
    """

    def __init__(self, coef, intercept: float, reference: np.ndarray,
                 word_pictures: Sequence[np.ndarray], n_train: int, info: dict | None = None,
                 ceiling: float = 1.0):
        self.coef = np.asarray(coef, dtype=np.float64)
        self.intercept = float(intercept)
        self.ceiling = float(ceiling)
        if not 0 < self.ceiling <= 1:
            raise ValueError(f"calibration ceiling {ceiling}: a probability in (0, 1]")
        self.reference = np.asarray(reference, dtype=np.float32)
        self.mean = self.reference.mean(axis=0, dtype=np.float64)
        self.word_pictures = [np.asarray(p, dtype=np.int64) for p in word_pictures]
        self.n_train = int(n_train)
        self.info = dict(info or {})
        self.annotation_rule = "top 5"
        self.thresholds: np.ndarray | None = None
        if self.coef.shape != (len(FEATURES),) or not self._rising():
            raise ValueError(f"calibration coefficients {self.coef}: {len(FEATURES)} numbers "
                             "that make the probability rise with the score")
        if len(self.word_pictures) != self.T:
            raise ValueError(f"calibration: {len(self.word_pictures)} word lists for "
                             f"{self.T} words")

    @property
    def T(self) -> int:
        return self.reference.shape[1]

    def _rising(self) -> bool:
        """Whether the slope on the standard score is positive at every prior (it is linear
        in the log prior, which lies between that of no picture and 0)."""
        lowest = np.log(PRIOR_PSEUDO / (self.n_train + 1.0))
        return all(self._slope(lp) > 0 for lp in (lowest, 0.0))

    def _slope(self, log_prior):
        c = self.coef
        return c[0] + c[3] * log_prior + c[4]

    # ------------------------------------------------------------------ one query
    def covers(self, q: np.ndarray) -> bool:
        """Whether q's words are all words the calibration knows (not words `pamir learn`
        added since) and q spreads the reference pictures' scores at all."""
        q = np.asarray(q, dtype=np.float64).ravel()
        return not np.any(q[self.T:]) and self._reference_scores(q[:self.T]).std() > 0

    def _reference_scores(self, q: np.ndarray) -> np.ndarray:
        nz = np.flatnonzero(q)
        return (self.reference[:, nz].astype(np.float64) @ q[nz] if len(nz)
                else np.zeros(len(self.reference)))

    def prior(self, words: Sequence[int]) -> float:
        """The smoothed fraction of training pictures whose caption has every word."""
        words = sorted({int(w) for w in words if 0 <= int(w) < self.T})
        if not words:
            return 1.0
        common = self.word_pictures[words[0]]
        for w in words[1:]:
            common = np.intersect1d(common, self.word_pictures[w], assume_unique=True)
        return (len(common) + PRIOR_PSEUDO) / (self.n_train + 1.0)

    def _lines(self, mu, sd, top, log_prior, extra) -> tuple[np.ndarray, np.ndarray]:
        """(a, b) per query from its statistics: logit = a s + b. With z = (s - mu) / sd
        the logistic reads z, the log prior, the extra words, z x log prior and z - top
        (top: the best reference picture's standard score), so the logit is linear in z."""
        c = self.coef
        slope = self._slope(log_prior)
        offset = c[1] * log_prior + c[2] * extra - c[4] * top + self.intercept
        a = slope / sd
        return a, offset - a * mu

    def logit_line(self, q: np.ndarray, words: Sequence[int]) -> tuple[float, float]:
        """(a, b) with logit P(relevant | s) = a s + b for this query (a > 0)."""
        q = np.asarray(q, dtype=np.float64).ravel()[:self.T]
        r = self._reference_scores(q)
        mu, sd = float(r.mean()), float(r.std())
        if sd <= 0:
            raise ValueError("the query's words score every reference picture alike: "
                             "no calibrated probability")
        extra = max(len({int(w) for w in words}) - 1, 0)
        a, b = self._lines(mu, sd, (r.max() - mu) / sd, np.log(self.prior(words)), extra)
        return float(a), float(b)

    def probability(self, scores, q: np.ndarray, words: Sequence[int]) -> np.ndarray:
        """P(relevant) of pictures with these scores for the query (vector q, positive
        vocabulary words `words`), in (0, ceiling), increasing in the score."""
        return line_probability(scores, *self.logit_line(q, words), self.ceiling)

    def score_floor(self, p: float, q: np.ndarray, words: Sequence[int]) -> float:
        """The score at which the query's probability reaches p: the raw floor of p
        (infinite where no score reaches it: p at or over the ceiling)."""
        return floor_of(p, *self.logit_line(q, words), self.ceiling)

    # ------------------------------------------------------------------ many queries
    def features(self, Q: sp.spmatrix, terms: Sequence[Sequence[int]], S: np.ndarray,
                 own: bool = False) -> np.ndarray:
        """(n_queries x n_pictures x 5) FEATURES of the scores S (n_queries x n_pictures)
        of the queries Q (n_queries x T vectors) with their words `terms`. own: S scores
        the reference pictures themselves (fitting): each picture is compared with the
        best of the others, as a new picture is with the best of the reference (with
        itself among them, the best validation picture would never stand out, and the
        logistic would not learn what standing out means)."""
        # start-up: scipy (0.3 s)
        import scipy.sparse as sp  # noqa: PLC0415
        Q = sp.csr_matrix(Q, dtype=np.float64)
        R = np.asarray(Q @ self.reference.T.astype(np.float64))  # (n_queries x n_ref)
        mu, sd = R.mean(axis=1), R.std(axis=1)
        sd = np.where(sd > 0, sd, np.inf)  # a query scoring all alike: standard score 0
        top = _best_of_others(R) if own else R.max(axis=1)[:, None]
        prior = np.log([self.prior(t) for t in terms])[:, None]
        extra = np.array([max(len(set(t)) - 1, 0) for t in terms], dtype=np.float64)
        z = (np.asarray(S, dtype=np.float64) - mu[:, None]) / sd[:, None]
        return np.stack([z, np.broadcast_to(prior, z.shape),
                         np.broadcast_to(extra[:, None], z.shape), z * prior,
                         z - (top - mu[:, None]) / sd[:, None]], axis=-1)

    def probabilities(self, Q, terms, S) -> np.ndarray:
        """P(relevant) for every (query, picture) score of S (n_queries x n_pictures)."""
        return self.ceiling * _sigmoid(self.features(Q, terms, S) @ self.coef + self.intercept)

    def word_probabilities(self, Z: np.ndarray, own: bool = False) -> np.ndarray:
        """(n x T) P(the picture's caption has word t) for text-space rows Z (n x T'): each
        word as a one-word query (whose score is z_t); words the calibration does not know
        (learnt after it) get NaN. Annotation reads these. own: Z is the reference itself
        (as in `features`)."""
        Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
        T = min(self.T, Z.shape[1])
        ref = self.reference[:, :T].astype(np.float64)
        mu, sd = ref.mean(axis=0), ref.std(axis=0)
        sd = np.where(sd > 0, sd, np.inf)
        top = _best_of_others(ref.T).T if own else ref.max(axis=0)
        a, b = self._lines(mu, sd, (top - mu) / sd,
                           np.log([self.prior([t]) for t in range(T)]), 0.0)
        out = np.full(Z.shape, np.nan)
        out[:, :T] = line_probability(Z[:, :T], a, b, self.ceiling)
        return out

    # ------------------------------------------------------------------ saving
    def to_saved(self) -> tuple[dict, dict[str, np.ndarray]]:
        """(JSON-able dict, arrays) to store beside a model; no pickle."""
        lengths = np.array([len(p) for p in self.word_pictures], dtype=np.int64)
        flat = (np.concatenate(self.word_pictures) if lengths.sum()
                else np.zeros(0, np.int64))
        meta = {"features": list(FEATURES), "coef": [float(c) for c in self.coef],
                "intercept": self.intercept, "ceiling": self.ceiling,
                "n_train": self.n_train, "info": self.info,
                "annotation_rule": self.annotation_rule}
        thresholds = {} if self.thresholds is None else {"thresholds": self.thresholds}
        return meta, thresholds | {"reference": self.reference,
                      "word_pictures_indptr": np.concatenate([[0], np.cumsum(lengths)]),
                      "word_pictures": flat.astype(np.int64)}

    @classmethod
    def from_saved(cls, meta: dict, arrays: dict) -> "Calibration":
        try:
            if list(meta["features"]) != list(FEATURES):
                raise ValueError(f"features {meta['features']}, not {list(FEATURES)}")
            ptr, flat = arrays["word_pictures_indptr"], arrays["word_pictures"]
            lists = [flat[ptr[t]:ptr[t + 1]] for t in range(len(ptr) - 1)]
            cal = cls(meta["coef"], meta["intercept"], arrays["reference"], lists,
                      meta["n_train"], meta.get("info"), meta.get("ceiling", 1.0))
            cal.annotation_rule = str(meta.get("annotation_rule", "top 5"))
            if "thresholds" in arrays:
                cal.thresholds = np.asarray(arrays["thresholds"], dtype=np.float64)
            return cal
        except (KeyError, TypeError, IndexError) as e:
            raise ValueError(f"a damaged calibration ({type(e).__name__}: {e}); fit the "
                             "model again") from None


def annotate(cal: Calibration | None, Z: np.ndarray, vocabulary: Sequence[str],
             k: int | None = None, *, count: bool = False, floor: float | None = None
             ) -> list[list[tuple[str, float, float | None]]]:
    """Each text-space row's words, best first, as (word, score, probability): by the rule
    validation preferred (cal.annotation_rule): the k best (5 by default), or with per-word
    thresholds every word whose probability reaches its threshold (at most k if given, so
    none at all where no word is likely enough). Without a calibration: the k best words,
    probability None. count: the k best words whatever the rule (what a person asking for
    k words gets: `pamir annotate -k`, `System.annotate(Z, k)`), with their probabilities.
    floor: one threshold for every word instead of the rule (a bare folder's own words,
    whose scores are not on one scale and whose probabilities are), at most k (5)."""
    Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))[:, :len(vocabulary)]
    P = cal.word_probabilities(Z) if cal is not None else np.full(Z.shape, np.nan)
    thresholds = None if cal is None or cal.thresholds is None else cal.thresholds
    if cal is not None and floor is not None and not count:
        thresholds, k = np.full(Z.shape[1], floor), k or ANNOTATION_WORDS
    out = []
    for z, p in zip(Z, P):
        if thresholds is not None and not count:
            over = np.flatnonzero(np.nan_to_num(p[:len(thresholds)], nan=-1) >= thresholds)
            chosen = over[np.argsort(-p[over], kind="stable")][:k]
        else:
            chosen = np.argsort(-z, kind="stable")[:k or ANNOTATION_WORDS]
        out.append([(vocabulary[t], float(z[t]), None if np.isnan(p[t]) else float(p[t]))
                    for t in chosen])
    return out


def expected_calibration_error(p: np.ndarray, y: np.ndarray, bins: int = 10
                               ) -> tuple[float, list[dict]]:
    """ECE over equal-width probability bins (the count-weighted mean |mean p - rate|), and
    each bin's count, mean probability and relevant rate (the reliability diagram)."""
    p, y = np.asarray(p, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    which = np.minimum((p * bins).astype(np.int64), bins - 1)
    rows, total = [], 0.0
    for b in range(bins):
        m = which == b
        if not m.any():
            continue
        gap = abs(p[m].mean() - y[m].mean())
        total += m.sum() * gap
        rows.append({"bin": [b / bins, (b + 1) / bins], "count": int(m.sum()),
                     "mean_probability": float(p[m].mean()), "relevant_rate": float(y[m].mean())})
    return total / max(len(p), 1), rows


def load_calibration(model_dir) -> Calibration | None:
    """The calibration stored with a system (`pamir fit`), without loading the rest of it
    (a search reads only this); None for a model saved without one, or no model."""
    path = Path(model_dir) if model_dir else None
    if path is None or not (path / "model.json").is_file() or not (path / "arrays.npz").is_file():
        return None
    try:
        meta = json.loads((path / "model.json").read_text(encoding="utf-8")).get(KEY)
        if not meta:
            return None
        with np.load(path / "arrays.npz", allow_pickle=False) as npz:
            arrays = {k.partition("/")[2]: npz[k] for k in npz.files
                      if k.startswith(KEY + "/")}
        return Calibration.from_saved(meta, arrays)
    except (OSError, ValueError, AttributeError):
        return None  # unreadable: searches go on with raw scores, as before calibration


__all__ = ["CEILING", "LIKELY", "Calibration", "floor_of", "annotate",
           "expected_calibration_error", "load_calibration"]
