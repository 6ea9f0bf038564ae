"""Corel 5k split by the protocol, with the features the benchmarks read, and what they measure
on it: a model's test figures (`test_entry`, per query in results/perquery/), its indexing
and query times (TPAMI Tables VII and VIII), the annotation studies' vocabulary and rules,
and the zero-caption studies' queries searched through a real index.

    corel = Corel()                           # the visterm bags `pamir fit corel5k` reads
    sel = corel.select("cmrm")                # pamir.training.selection.select on train / valid
    ev = corel.test.evaluate(sel.model)       # the 2,241 test queries, with their subsets

Every benchmark chooses its parameters with pamir.training.selection.select, as `pamir fit`
does; a benchmark adds the studies and timings the papers report around it. The feature code
(faiss, OpenCV, Pillow) is imported by the methods that use it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from pamir import config
from pamir.facts.collection import load_collection
from pamir.evaluation import evaluate_model
from pamir.features import FeatureSettings
from pamir.features.representation import take_rows
from pamir.protocol import Protocol
from pamir.training.selection import select

from .harness import METRICS, PERQUERY

# ------------------------------------------------------------------------------ the data

class Split:
    """One split of the protocol on features F (rows in collection order): its rows X, its
    captions Y, its queries (vectors Q weighted with the training idf, relevance) and, for
    test, the TPAMI query subsets (Tables X-XII)."""

    def __init__(self, protocol: Protocol, F, name: str):
        self.name = name
        self.idx = protocol.split(name)
        self.X = take_rows(F, self.idx)
        self.Y = protocol.presence(self.idx)
        self.queries = protocol.queries(name)
        self.Q = protocol.query_vectors(self.queries)
        self.relevance = self.queries.relevance
        self.subsets = protocol.query_subsets(self.queries) if name == "test" else None

    def sample(self, n: int, seed: int = config.SEED) -> "Split":
        """A seeded random subset of n of its pictures (idx, X, Y: for training only)."""
        keep = np.sort(np.random.default_rng(seed).choice(len(self.idx), n, replace=False))
        part = object.__new__(Split)
        part.__dict__.update(self.__dict__, idx=self.idx[keep], X=take_rows(self.X, keep),
                             Y=self.Y[keep], queries=None, Q=None, relevance=None)
        return part

    def evaluate(self, model, X=None, **kw):
        """The model's Evaluation on this split's queries, ranked as at test time."""
        X = self.X if X is None else X
        return evaluate_model(model, X, self.Q, self.relevance, self.subsets, **kw)

    def avgp(self, model, X=None) -> float:
        """Mean AvgP in percent."""
        return 100 * self.evaluate(model, X, curve=False).mean("avgp")


class Corel:
    """Corel 5k, its protocol, and one representation of every picture split three ways.

    Corel(): the default visterm bags, exactly what `pamir fit corel5k` reads
    (pamir.training.collection_inputs, cached); `settings` other FeatureSettings;
    representation="blocks" block descriptors (BBNN, the block kernels), "blobs" Duygulu's
    blobs as L2 tf-idf bags with the training idf (ECML 2006 Table 3); F: features made
    elsewhere (visterm counts), rows in collection order.
    """

    def __init__(self, settings: FeatureSettings | None = None, representation: str = "visterms",
                 *, F=None, base: "Corel | None" = None):
        self.collection = base.collection if base else load_collection("corel5k")
        self.protocol = base.protocol if base else Protocol(self.collection)
        self.settings = settings or (base.settings if base else FeatureSettings())
        self.representation = representation
        self.rep = None
        started = time.perf_counter()
        from pamir.features.visterms import inverse_document_frequency, tfidf  # noqa: PLC0415
        from pamir.training import collection_inputs  # noqa: PLC0415
        if F is None and representation == "blobs":
            presence = self.counts()
            F = tfidf(presence, inverse_document_frequency(presence[self.protocol.train]))
        elif F is None:
            F, ok, self.rep = collection_inputs(
                self.collection, self.protocol, representation, self.settings,
                cache_dir=config.default_cache_dir(), progress=False, log=None)
            if not np.all(ok):
                raise RuntimeError(f"corel5k: {int((~np.asarray(ok)).sum())} pictures could "
                                   "not be read; the benchmarks expect every picture")
            # as `pamir fit`, a codebook larger than the training blocks support is capped
            # (pamir.training.supported_codebook: 10 blocks per visterm at least)
            self.settings = getattr(self.rep, "settings", self.settings)
        self.feature_seconds = time.perf_counter() - started
        self.F = F
        self.train, self.valid, self.test = (Split(self.protocol, F, s)
                                             for s in ("train", "valid", "test"))

    def with_features(self, F, representation: str | None = None) -> "Corel":
        """The same pictures and protocol with other features (rows in collection order)."""
        return Corel(self.settings, representation or self.representation, F=F, base=self)

    def select(self, model, **kw):
        """pamir.training.selection.select on train, validation queries with the training idf."""
        return select(model, self.train.X, self.train.Y, self.valid.X, self.valid.Y, **kw)

    def visterms_per_picture(self) -> float:
        """Distinct visterms per picture."""
        return round(float(sp.csr_matrix(self.F).getnnz(axis=1).mean()), 1)

    def counts(self) -> sp.csr_matrix:
        """What the bags count, for every picture: blob presence, or the exact visterm
        counts (the cached blocks assigned to the cached pipeline's codewords again). CMRM,
        CMTT and PLSA are defined on counts; the bags are tf-idf and L2-normalised."""
        from pamir.features import extract_blocks, load_blobs  # noqa: PLC0415
        from pamir.features.visterms import term_frequencies  # noqa: PLC0415
        if self.representation == "blobs":
            return sp.csr_matrix(load_blobs(self.collection)[0], dtype=np.float32)
        pipe = self.rep
        blocks = extract_blocks(self.collection.paths, self.settings, pipe.colour_codebook_,
                                cache_dir=config.default_cache_dir(), progress=False)
        tf = term_frequencies(pipe.assign(blocks.counts()), blocks.offsets,
                              self.settings.n_visterms)
        if not np.array_equal(sp.csr_matrix(tf > 0).indices, sp.csr_matrix(self.F > 0).indices):
            raise RuntimeError("visterm counts disagree with the cached bags: clear "
                               ".cache/pipelines")
        return sp.csr_matrix(tf, dtype=np.float64)

    def describe(self, **extra) -> dict:
        """The features in a results entry."""
        if self.representation == "blobs":  # Duygulu's: no settings of ours
            return {"kind": "blobs", **extra}
        return {"kind": self.representation, "settings": self.settings.to_dict(), **extra}


# ------------------------------------------------------------------------------ timings

def text_index(model, X):
    """The (n x T) vectors a model ranks pictures X with, computed once per picture: its
    text space, or log P(w|I) for PACMRM (DRCMRM ranks by a divergence; its index is P(w|I),
    as the CMRM paper's)."""
    if getattr(model, "mode", None) == "pacmrm":
        return model.log_word_probabilities(X)
    return model.transform(X)


def query_weights(model, Q) -> sp.csr_matrix:
    """What multiplies the index for query vectors Q: the query's words for CMRM, the SVMs'
    fusion weights, the idf vectors themselves otherwise."""
    if getattr(model, "mode", None) in ("pacmrm", "drcmrm"):
        return sp.csr_matrix(sp.csr_matrix(Q) != 0, dtype=np.float64)
    return sp.csr_matrix(model.query_weights(Q) if hasattr(model, "query_weights") else Q)


def indexing(fit, X_test, repeats: int = 1):
    """(model, seconds): fit() trains a model (no validation), then the test pictures are
    indexed (text_index); the best wall time of `repeats` runs (TPAMI Table VII)."""
    best, model = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        model = fit()
        text_index(model, X_test)
        best = min(best, time.perf_counter() - t0)
    return model, best


def query_ms(model, X, Q, repeats: int = 3, most: int = 500, index=None) -> float:
    """Milliseconds to rank the pictures X for one query and sort them (TPAMI Table VIII),
    the best of `repeats` passes. Product models score from the word-major index (T x n;
    `index`: text_index(model, X) if computed already): the rows of the query's words only.
    DRCMRM scores each query against the pictures (its first `most` queries, one pass:
    ~6 ms each)."""
    W = query_weights(model, Q)
    if getattr(model, "mode", None) == "drcmrm":
        W = W[:most]
        t0 = time.perf_counter()
        for i in range(W.shape[0]):
            np.argsort(-model.negative_kl(W[i], X)[0])
        return 1000 * (time.perf_counter() - t0) / W.shape[0]
    Z = text_index(model, X) if index is None else index
    Zt = np.ascontiguousarray(np.asarray(Z, dtype=np.float32).T)
    W = sp.csr_matrix(W, dtype=np.float32)
    queries = [(W.indices[W.indptr[i]:W.indptr[i + 1]], W.data[W.indptr[i]:W.indptr[i + 1]])
               for i in range(W.shape[0])]
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for words, weights in queries:
            np.argsort(-(weights @ Zt[words]))
        best = min(best, time.perf_counter() - t0)
    return 1000 * best / len(queries)


# ----------------------------------------------------------------- a model's test figures

def pct(ev, metric: str = "avgp", subset: str = "all") -> float:
    return round(100 * ev.mean(metric, subset), 2)


def test_entry(name: str, ev) -> dict:
    """Test figures of an Evaluation ("test", "subsets"); its per-query metrics and curve go
    to results/perquery/NAME.npz, which bench_compare reads (protocol order)."""
    PERQUERY.mkdir(parents=True, exist_ok=True)
    np.savez(PERQUERY / f"{name}.npz", **{m: ev.per_query[m] for m in METRICS}, curve=ev.curve)
    return {"test": {m: pct(ev, m) for m in METRICS}, "subsets": ev.table(METRICS)}


def selection_rows(sel, top: int | None = None) -> list[dict]:
    """The trials of a Selection, best validation AvgP first: valid_avgp, the point's
    parameters, seconds and where early stopping kept the weights."""
    trials = sorted(sel.trials, key=lambda t: -t.valid_avgp)[:top]
    return [{"valid_avgp": round(t.valid_avgp, 2), **t.params, "seconds": round(t.seconds, 1),
             **t.stopping} for t in trials]


# ------------------------------------------------------- annotation (bench_annotation*)
#: The annotation goal (P / R / N+ in %, %, words) both annotation studies hold results to.
GOAL = (40, 45, 180)


def annotation_vocabulary(collection, protocol) -> list[str]:
    """The words of both the development and the test captions (260 on Corel 5k)."""
    words = lambda idx: {w for i in idx for w in (collection.captions[i] or ())}  # noqa: E731
    return sorted(words(protocol.development) & words(protocol.test))


def apply_rule(rule: str, Z: np.ndarray, reference: np.ndarray) -> np.ndarray:
    if rule == "scores":
        return Z
    mean, std = reference.mean(axis=0), reference.std(axis=0)
    return (Z - mean) / np.where(std > 0, std, 1.0)


# ------------------------------------------ Corel 5k with features made per call (CNN studies)

class CorelViews:
    """Corel 5k, its protocol and each split's queries, with the features of any
    representation made on call (`features`) and PAMIR selected on them with its own grid."""

    def __init__(self):
        from pamir.data import load_corel5k  # noqa: PLC0415

        self.collection = load_corel5k()
        self.protocol = p = Protocol(self.collection)
        self.train, self.valid, self.test = p.train, p.valid, p.test
        self.test_queries = p.queries(self.test)
        self.Q_test = p.query_vectors(self.test_queries)
        self.subsets = p.query_subsets(self.test_queries)

    def features(self, name: str, cnn: dict | None = None, weights=None):
        from pamir.features.cnn import CNNSettings  # noqa: PLC0415
        from pamir.training import collection_inputs  # noqa: PLC0415

        t0 = time.perf_counter()
        F, ok, rep = collection_inputs(self.collection, self.protocol, name, FeatureSettings(),
                                       weights=weights, cnn_settings=CNNSettings(**(cnn or {})),
                                       progress=sys.stderr.isatty(), log=None)
        if not ok.all():
            print(f"  {int((~ok).sum())} pictures unreadable", flush=True)
        return F, time.perf_counter() - t0

    def select(self, F, seeds=None):
        p = self.protocol
        return select("pamir", F[self.train], p.presence(self.train), F[self.valid],
                      p.presence(self.valid), params={}, seeds=seeds, log=None)

    def test_evaluation(self, Z):
        from pamir.evaluation import evaluate_text_space  # noqa: PLC0415

        return evaluate_text_space(Z, self.Q_test, self.test_queries.relevance, self.subsets)


# ---------------------------------------------- searching with no captions (zero-caption studies)

def query_metrics(S: np.ndarray, qs) -> dict:
    """AvgP and P10 (%) over all queries and the single-word ones."""
    from pamir.evaluation.metrics import ranking_metrics  # noqa: PLC0415

    m = ranking_metrics(S, qs.relevance)
    one = qs.n_words == 1
    return {"all": {"avgp": round(100 * m["avgp"].mean(), 2),
                    "p10": round(100 * m["p10"].mean(), 2)},
            "single-word": {"avgp": round(100 * m["avgp"][one].mean(), 2),
                            "p10": round(100 * m["p10"][one].mean(), 2)}}


def word_scores(P: np.ndarray, words, vocabulary) -> dict:
    """{word: (its mass scores over P's pictures or None, the match)}; words: a
    pamir.zeroshot.classes.ClassWords."""
    from pamir.zeroshot import classes as zeroshot  # noqa: PLC0415

    out = {}
    for w in vocabulary:
        match = words.match(w)
        out[w] = (None if match.vector is None else zeroshot.mass_score(P @ match.vector),
                  match)
    return out


def query_matrix(scores: dict, qs, n: int) -> np.ndarray:
    """The queries' scores: the sum of their words' (as the index sums a query's terms)."""
    zero = np.zeros(n)
    return np.stack([sum(scores[qs.vocabulary[t]][0] if scores[qs.vocabulary[t]][0]
                         is not None else zero for t in q) for q in qs.terms])


def through_index(Z: np.ndarray, prot, vocabulary, idf, classes, folder: Path,
                  split: str = "test", scales=None) -> dict:
    """A split's queries searched through a real index of its pictures (columns Z), as
    `pamir search` does: per query, every picture's score, then AvgP / P10; queries with no
    searchable word score every picture alike (the worst ties). scales: the words' spreads
    the index measures a query's words by (pamir.jobs.loading.word_scales)."""
    from pamir.index import Index, QueryError  # noqa: PLC0415

    qs, idx = prot.queries(split), prot.split(split)
    paths = [str(prot.collection.paths[i]) for i in idx]
    with Index.create(folder, vocabulary, idf, classes=classes, scales=scales) as ix:
        ix.add([{"path": p, "size": 1, "mtime_ns": 1, "hash": f"h{j}"}
                for j, p in enumerate(paths)], Z)
        position = {p: j for j, p in enumerate(paths)}
        S = np.zeros((len(qs), len(idx)))
        unanswered = 0
        for i, words in enumerate(qs.words):
            try:
                hits = ix.search(" ".join(words), len(idx))
            except QueryError:
                unanswered += 1
                continue
            for h in hits:
                S[i, position[h.path]] = h.score
    return {**query_metrics(S, qs), "unanswered_queries": unanswered}
