"""Search as a person wants it (issue 13), measured on Corel 5k.

- unseen: the 179 words split into 5 seeded folds; for each fold PAMIR is trained without
  those words (removed from every training and validation caption), and each held-out word
  is then a query on its own, answered through the bridges (pamir.text.bridge): the vocabulary
  bridge (inflections, then the nearest vocabulary words by all-MiniLM-L6-v2), and, with the
  CNN representation's ImageNet classifier, the class bridge (the nearest ImageNet class
  names, scored by the network's class probabilities: the bridge of issue 13, defined here;
  the product now matches classes with pamir.zeroshot.classes.ClassWords, but its CLASS_MIX is the
  mix chosen here). The bridges' settings (similarity
  floor, neighbours, how much of the class bridge is mixed in) are chosen on the validation
  pictures, then test AvgP is reported beside a random ranking and beside the model trained
  with the word (targets: >= 3x random, >= 40 % of supervised).
- feedback: every test query; the top 10 of the 499 test pictures are judged with the true
  relevance, one round re-ranks the rest: PA-I updates (pamir.training.online.feedback_delta), plus
  the neighbour term (pamir.training.online.neighbour_scores), whose setting is chosen on the
  validation queries; AvgP over the unjudged pictures before and after (target +25 %
  relative), PA alone beside it.
- learn: a held-out word is taught with pamir.training.online.learn (what `pamir learn` runs) from
  N = 1, 2, 5, 10, 20 captioned training pictures that have it plus 50 that do not; its
  test AvgP against N, beside the model trained with the word.
- latency: loading the embedding model, the vocabulary's embeddings (computed, then from
  the cache), and what mapping one unknown word adds to a query.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_search.py [--measures ...] \
        [--representation visterms|cnn+visterms|cnn+cnn-lite2+visterms|...]

Writes benchmarks/results/search.json and search.md (visterms), or
search_cnn_visterms.json and .md, search_cnn_cnn-lite2_visterms.json and .md, or
search_cnn_cnn-lite1_cnn-lite2_visterms.json and .md (the representation `pamir fit corel5k`
chooses today).
"""

from __future__ import annotations

import copy
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from pamir import config
from pamir.text.bridge import NEIGHBOURS as BRIDGE_NEIGHBOURS
from pamir.text.bridge import Bridge
from pamir.text.embedding import embedder
from pamir.zeroshot.imagenet import class_probabilities, imagenet_class_names
from pamir.facts.collection import load_collection
from pamir.evaluation.metrics import average_precision
from pamir.features import FeatureSettings
from pamir.features.representation import take_rows
from pamir.index import Index
from pamir.models.pamir import PAMIR
from pamir.protocol import Protocol
from pamir.text.query import parse, resolve
from pamir.training.online import (FEEDBACK_RIGHT_WEIGHT, FEEDBACK_SHARPNESS, FEEDBACK_WRONG_WEIGHT,
                                   feedback_delta, feedback_scores, learn, neighbour_scores)
from pamir.system import System
from pamir.training import collection_inputs

from common.harness import (HEAVY, RESULTS, Run, parser, report_head, rerender,
                            save_report)

FOLDS = 5
FLOORS = (0.3, 0.4, 0.5)
NEIGHBOURS = (1, 3, 5)
CLASS_FLOORS = (0.4, 0.5, 0.6)
MIX = (0.0, 0.25, 0.5, 0.75, 1.0)

# The class bridge of issue 13, measured here and nowhere else since: a word matched to the
# ImageNet class names nearest to it by embedding, scored by the network's probabilities of
# those classes. Its runs chose pamir.text.bridge.CLASS_MIX (search_cnn_visterms.md); the product
# now finds a word's classes with pamir.zeroshot.classes.ClassWords (WordNet's table first).
#: The class bridge's floor chosen then (CLASS_FLOORS' best on cnn+visterms validation).
CLASS_FLOOR = 0.6


def class_bridge(*, cache_dir=None, floor: float = CLASS_FLOOR,
                 neighbours: int = BRIDGE_NEIGHBOURS) -> Bridge:
    """A Bridge whose 'vocabulary' is the ImageNet classes: `nearest(word)` gives the
    classes whose names are closest to the word."""
    return Bridge(imagenet_class_names(), cache_dir=cache_dir, floor=floor,
                  neighbours=neighbours)


def class_probability_scores(logits: np.ndarray, classes) -> np.ndarray:
    """(n,) the pictures' scores for a word matched to ImageNet classes [(class, sim)]: the
    classifier's probabilities of those classes, weighted by similarity and summed."""
    P = class_probabilities(logits)
    out = np.zeros(P.shape[0])
    for c, s in classes:
        out += s * P[:, c]
    return out
JUDGED = 10
#: The neighbour term's grid (pamir.training.online.neighbour_scores), searched on validation.
SHARPNESS_GRID = (2.0, 5.0, 8.0)
RIGHT_GRID = (0.0, 1.0, 2.0, 3.0)
WRONG_GRID = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0)
#: Margins of the PA-alone alternative (the model's own is 1).
PA_MARGINS = (2.0, 4.0, 8.0)
NS = (1, 2, 5, 10, 20)
NEGATIVES = 50
LEARN_WORDS_PER_FOLD = 6
LEARN_SEEDS = 3
SEED = config.SEED


def say(*a):
    print(*a, flush=True)


# ------------------------------------------------------------------------------- the data

#: Representations measured: the papers' visterms, CNN + visterms (what `pamir fit corel5k`
#: chose before the cnn-lite2 preset), the two networks and the visterms (before cnn-lite1),
#: and what it chooses on validation today (the three networks and the visterms), every part
#: weighted 1.
REPRESENTATIONS = {"visterms": ("visterms", None), "cnn+visterms": ("cnn+visterms", (1.0, 1.0)),
                   "cnn+cnn-lite2+visterms": ("cnn+cnn-lite2+visterms", (1.0, 1.0, 1.0)),
                   "cnn+cnn-lite1+cnn-lite2+visterms": ("cnn+cnn-lite1+cnn-lite2+visterms",
                                                        (1.0, 1.0, 1.0, 1.0))}


class Data:
    def __init__(self, representation: str = "visterms"):
        self.collection = load_collection("corel5k")
        self.protocol = p = Protocol(self.collection)
        self.representation = representation
        name, weights = REPRESENTATIONS[representation]
        F, ok, _ = collection_inputs(self.collection, p, name, FeatureSettings(),
                                     weights=weights, cache_dir=config.default_cache_dir(),
                                     progress=False, log=None)
        assert np.all(ok)
        self.F = F if isinstance(F, np.ndarray) else sp.csr_matrix(F)
        self.vocabulary = p.vocabulary
        self.T = p.T
        self.idx = {s: p.split(s) for s in ("train", "valid", "test")}
        self.X = {s: take_rows(self.F, i) for s, i in self.idx.items()}
        self.Y = {s: p.presence(i) for s, i in self.idx.items()}

    def fit(self, keep=None, seed: int = 0) -> PAMIR:
        """PAMIR (c = 0.1, as `pamir fit` chooses on Corel 5k) on the training captions
        restricted to the `keep` words, early-stopped on validation."""
        keep = np.arange(self.T) if keep is None else np.asarray(keep)
        return PAMIR(c=0.1, random_state=seed).fit(
            self.X["train"], self.Y["train"][:, keep],
            validation=(self.X["valid"], self.Y["valid"][:, keep]))

    def relevance(self, split: str, words) -> np.ndarray:
        """(len(words) x n) single-word relevance on a split."""
        return self.Y[split][:, list(words)].T.toarray() > 0


def avgp(scores, relevance) -> np.ndarray:
    return average_precision(np.atleast_2d(scores), np.atleast_2d(relevance))


def random_avgp(relevance: np.ndarray, draws: int = 200) -> np.ndarray:
    """Expected AvgP of a random ranking, per row (averaged over seeded draws)."""
    rng = np.random.default_rng(SEED)
    out = np.zeros(len(relevance))
    for _ in range(draws):
        out += avgp(rng.random(relevance.shape), relevance)
    return out / draws


def standardise(s: np.ndarray) -> np.ndarray:
    sd = s.std()
    return (s - s.mean()) / sd if sd > 0 else np.zeros_like(s)


# ------------------------------------------------------------------------------- unseen

def vocabulary_scores(Z, words_f, idf_f, bridge, word) -> tuple[np.ndarray | None, dict]:
    """Scores of the pictures Z (n x T_f) for `word` through the vocabulary bridge."""
    q = resolve(parse(word), words_f, idf_f, bridge)
    m = q.matches[0] if q.matches else None
    info = {"how": m.how if m else "none", "mapping": m.describe() if m else ""}
    if not q.words:
        return None, info
    return Z @ q.vector, info


def unseen(data: Data, logits: dict | None, cache: Path) -> dict:
    rng = np.random.default_rng(SEED)
    folds = np.array_split(rng.permutation(data.T), FOLDS)
    full = data.fit()
    Zte_full = full.transform(data.X["test"])
    words_all = list(range(data.T))
    rel_te = data.relevance("test", words_all)
    rel_va = data.relevance("valid", words_all)
    supervised = avgp(Zte_full.T, rel_te)
    rand_te = random_avgp(rel_te)
    rand_va = random_avgp(rel_va)
    per_word = {}
    fold_models = []
    for f, held in enumerate(folds):
        t0 = time.perf_counter()
        keep = np.array([t for t in range(data.T) if t not in set(held)])
        model = data.fit(keep)
        words_f = [data.vocabulary[t] for t in keep]
        idf_f = data.protocol.idf[keep]
        Z = {s: model.transform(data.X[s]) for s in ("valid", "test")}
        fold_models.append((held, keep, model))
        for t in held:
            w = data.vocabulary[t]
            entry = {"fold": f, "random": rand_te[t], "supervised": supervised[t],
                     "random_valid": rand_va[t], "valid_relevant": int(rel_va[t].sum()),
                     "vocab": {}, "class": {}}
            for floor in FLOORS:
                for k in NEIGHBOURS:
                    b = Bridge(words_f, cache_dir=cache, floor=floor, neighbours=k)
                    res = {}
                    for s in ("valid", "test"):
                        sc, info = vocabulary_scores(Z[s], words_f, idf_f, b, w)
                        rel = rel_va[t] if s == "valid" else rel_te[t]
                        res[s] = (None if sc is None else float(avgp(sc, rel)[0]))
                        res[s + "_scores"] = sc
                        res["mapping"] = info["mapping"]
                        res["how"] = info["how"]
                    entry["vocab"][(floor, k)] = res
            if logits is not None:
                for cf in CLASS_FLOORS:
                    cb = class_bridge(cache_dir=cache, floor=cf, neighbours=3)
                    classes, _ = cb.nearest(w)
                    res = {"classes": [(cb.vocabulary[c], round(s, 2)) for c, s in classes]}
                    for s in ("valid", "test"):
                        rel = rel_va[t] if s == "valid" else rel_te[t]
                        if classes:
                            sc = class_probability_scores(logits[s], classes)
                            res[s] = float(avgp(sc, rel)[0])
                            res[s + "_scores"] = sc
                        else:
                            res[s] = None
                            res[s + "_scores"] = None
                    entry["class"][cf] = res
            per_word[w] = entry
        say(f"fold {f + 1}/{FOLDS}: {len(held)} words held out, PAMIR on {len(keep)} words "
            f"(valid AvgP {100 * model.best_valid_avgp_:.2f}), {time.perf_counter() - t0:.0f} s")
    attach_relevance(data, per_word)
    return fold_models, per_word


def _filled(x, fallback):
    return fallback if x is None else x


def choose_bridges(data: Data, per_word: dict) -> dict:
    """Settings chosen on validation (mean AvgP over the held-out words that have validation
    pictures; a word a setting cannot map counts as a random ranking), test AvgP reported."""
    words = list(per_word)
    has_valid = [w for w in words if per_word[w]["valid_relevant"] > 0]

    def mean(split, get):
        pool = has_valid if split == "valid" else words
        fallback = "random_valid" if split == "valid" else "random"
        return float(np.mean([_filled(get(per_word[w], split), per_word[w][fallback])
                              for w in pool]))

    grid = []
    for key in per_word[words[0]]["vocab"]:
        get = (lambda e, s, key=key: e["vocab"][key][s])
        grid.append({"floor": key[0], "neighbours": key[1], "valid": mean("valid", get),
                     "test": mean("test", get),
                     "mapped": float(np.mean([per_word[w]["vocab"][key]["test"] is not None
                                              for w in words]))})
    best = max(grid, key=lambda g: g["valid"])
    bkey = (best["floor"], best["neighbours"])
    out = {"words": len(words), "valid_words": len(has_valid),
           "random": float(np.mean([per_word[w]["random"] for w in words])),
           "supervised": float(np.mean([per_word[w]["supervised"] for w in words])),
           "vocabulary_bridge": {"grid": grid, "chosen": best}}

    has_class = bool(per_word[words[0]]["class"])
    if has_class:
        mixes = []
        for cf in CLASS_FLOORS:
            for a in MIX:
                def get(e, s, cf=cf, a=a):
                    v = e["vocab"][bkey].get(s + "_scores")
                    c = e["class"][cf].get(s + "_scores")
                    rel = e["_rel_" + s]
                    if v is None and c is None:
                        return None
                    if c is None or a == 0:
                        return None if v is None else float(avgp(v, rel)[0])
                    if v is None or a == 1:
                        return float(avgp(c, rel)[0])
                    return float(avgp((1 - a) * standardise(v) + a * standardise(c), rel)[0])
                mixes.append({"class_floor": cf, "mix": a, "valid": mean("valid", get),
                              "test": mean("test", get)})
        chosen = max(mixes, key=lambda g: (g["valid"], -g["mix"]))
        alone = [m for m in mixes if m["mix"] == 1.0]
        out["class_bridge"] = {"grid": mixes, "chosen_mix": chosen,
                               "alone": max(alone, key=lambda g: g["valid"])}
    for s in ("random", "supervised"):
        out[s] = round(100 * out[s], 2)
    return out


def attach_relevance(data: Data, per_word: dict) -> None:
    for w, e in per_word.items():
        t = data.vocabulary.index(w)
        e["_rel_valid"] = data.relevance("valid", [t])[0]
        e["_rel_test"] = data.relevance("test", [t])[0]


# ------------------------------------------------------------------------------- feedback

def feedback_rounds(system: System, X, Q: np.ndarray, R: np.ndarray) -> list[dict]:
    """One simulated round per query with a relevant unjudged picture: the top JUDGED
    pictures judged with the true relevance, PA's re-ranking of the rest computed."""
    Z = system.model.transform(X)
    S = Z @ Q.T  # (n x queries)
    rounds = []
    for j in range(Q.shape[0]):
        s = S[:, j]
        order = np.lexsort((R[j].astype(float), -s))  # pessimistic ties, as the metrics
        top, rest = order[:JUDGED], order[JUDGED:]
        if not R[j, rest].any():
            continue
        pos, neg = top[R[j, top]], top[~R[j, top]]
        pa = np.zeros(len(rest))
        if len(pos) and len(neg):
            rows, delta = feedback_delta(system, Q[j], take_rows(X, pos), take_rows(X, neg))
            pa = feedback_scores(system, Q[j], rows, delta, take_rows(X, rest))
        rounds.append({"scores": s, "relevant": R[j], "right": pos, "wrong": neg,
                       "rest": rest, "pa": pa, "words": int((Q[j] != 0).sum()), "q": Q[j]})
    return rounds


def feedback_avgp(rounds, Z, setting=None) -> tuple[np.ndarray, np.ndarray]:
    """AvgP over the unjudged pictures before and after each round: after = the scores + the
    PA step's change + the neighbour term at `setting` (sharpness, right and wrong weights;
    None: PA alone). The centring mean is the pictures' mean, as an index's."""
    mean = Z.mean(axis=0)
    before, after = [], []
    for f in rounds:
        s, rel, rest = f["scores"], f["relevant"], f["rest"]
        new = s[rest] + f["pa"]
        if setting is not None:
            g, a, b = setting
            new = new + neighbour_scores(Z[rest], Z[f["right"]], Z[f["wrong"]], mean, s.std(),
                                         sharpness=g, right_weight=a, wrong_weight=b)
        before.append(avgp(s[rest], rel[rest])[0])
        after.append(avgp(new, rel[rest])[0])
    return np.array(before), np.array(after)


def feedback_alternatives(system: System, rounds, X) -> list[dict]:
    """Other ways to use one round, on the validation queries only (none is the product's):
    PA with a larger margin (a bigger step towards the judged pairs), and Rocchio's sums in
    the model's input space: scores + spread x (a x mean k(p, right) - b x mean k(p, wrong)),
    k the input space's dot product (each part of a concatenation is unit-length)."""
    before = np.array([avgp(f["scores"][f["rest"]], f["relevant"][f["rest"]])[0]
                       for f in rounds])
    out = []

    def row(label, after):
        out.append({"method": label, "valid_after": round(100 * float(np.mean(after)), 2),
                    "valid_relative": round(100 * (np.mean(after) - before.mean())
                                            / before.mean(), 1)})
    for margin in PA_MARGINS:
        after = []
        for f in rounds:
            new = f["scores"][f["rest"]]
            if len(f["right"]) and len(f["wrong"]):
                rows, delta = feedback_delta(system, f["q"], take_rows(X, f["right"]),
                                             take_rows(X, f["wrong"]), margin=margin)
                new = new + feedback_scores(system, f["q"], rows, delta, take_rows(X, f["rest"]))
            after.append(avgp(new, f["relevant"][f["rest"]])[0])
        row(f"PA alone, margin {margin:g}", after)
    K = X @ X.T
    K = K.toarray() if sp.issparse(K) else np.asarray(K)
    for a, b in itertools.product(RIGHT_GRID[1:], WRONG_GRID):
        after = []
        for f in rounds:
            s, rest = f["scores"], f["rest"]
            new = s[rest].copy()
            for judged, w in ((f["right"], a), (f["wrong"], -b)):
                if len(judged) and w:
                    new += w * s.std() * K[np.ix_(rest, judged)].mean(axis=1)
            after.append(avgp(new, f["relevant"][rest])[0])
        row(f"Rocchio in the input space, right {a:g}, wrong {b:g}", after)
    return out


def bootstrap_interval(d: np.ndarray, draws: int = 2000) -> list[float]:
    """95 % bootstrap interval of the mean of paired differences (AvgP points)."""
    rng = np.random.default_rng(SEED)
    means = [d[rng.integers(0, len(d), len(d))].mean() for _ in range(draws)]
    return [round(100 * float(x), 2) for x in np.percentile(means, [2.5, 97.5])]


def feedback(data: Data) -> dict:
    """PA alone against PA + the neighbour term, whose setting is chosen on the validation
    queries (the PA model itself early-stops on the validation pictures too, as `pamir
    fit`); the test queries are read once for PA alone and once for the chosen setting."""
    system = System(None, data.fit(), data.vocabulary, data.protocol.idf)
    split = {}
    for name in ("valid", "test"):
        qs = data.protocol.queries(name)
        Q, R = data.protocol.query_vectors(qs).toarray(), qs.relevance.toarray() > 0
        split[name] = (feedback_rounds(system, data.X[name], Q, R),
                       system.model.transform(data.X[name]))
    valid, Zv = split["valid"]
    b, pa_only = feedback_avgp(valid, Zv)
    grid = []
    for setting in itertools.product(SHARPNESS_GRID, RIGHT_GRID, WRONG_GRID):
        after = feedback_avgp(valid, Zv, setting)[1]
        grid.append({"sharpness": setting[0], "right_weight": setting[1],
                     "wrong_weight": setting[2], "valid_after": round(100 * after.mean(), 2),
                     "valid_relative": round(100 * (after.mean() - b.mean()) / b.mean(), 1)})
    best = max(grid, key=lambda g: g["valid_after"])
    chosen = (best["sharpness"], best["right_weight"], best["wrong_weight"])
    product = (FEEDBACK_SHARPNESS, FEEDBACK_RIGHT_WEIGHT, FEEDBACK_WRONG_WEIGHT)
    alternatives = feedback_alternatives(system, valid, data.X["valid"])
    valid_chosen = feedback_avgp(valid, Zv, chosen)[1]
    valid_product = feedback_avgp(valid, Zv, product)[1]
    t0 = time.perf_counter()
    test, Zt = split["test"]
    before, pa = feedback_avgp(test, Zt)
    after = feedback_avgp(test, Zt, product)[1]
    seconds = time.perf_counter() - t0
    right = np.array([len(f["right"]) > 0 for f in test])
    wrong = np.array([len(f["wrong"]) > 0 for f in test])
    words = np.array([f["words"] for f in test])

    def part(mask):
        b, p, a = (100 * x[mask].mean() for x in (before, pa, after))
        return {"queries": int(mask.sum()), "before": round(b, 2), "pa": round(p, 2),
                "after": round(a, 2), "pa_relative": round(100 * (p - b) / b, 1),
                "relative": round(100 * (a - b) / b, 1)}

    return {"judged": JUDGED, "grid": grid, "alternatives": alternatives,
            "chosen": dict(zip(("sharpness", "right_weight", "wrong_weight"), chosen)),
            "product": dict(zip(("sharpness", "right_weight", "wrong_weight"), product)),
            "valid": {"queries": len(valid), "before": round(100 * b.mean(), 2),
                      "pa": round(100 * pa_only.mean(), 2),
                      "chosen": round(100 * valid_chosen.mean(), 2),
                      "product": round(100 * valid_product.mean(), 2),
                      "product_minus_pa_interval": bootstrap_interval(valid_product - pa_only),
                      "chosen_minus_product_interval":
                          bootstrap_interval(valid_chosen - valid_product)},
            "all": part(np.ones(len(test), bool)),
            "right_and_wrong": part(right & wrong), "wrong_only": part(~right & wrong),
            "right_only": part(right & ~wrong),
            "single_word": part(words == 1), "multi_word": part(words > 1),
            "ms_per_round": round(1000 * seconds / max(len(test), 1), 2)}


# ------------------------------------------------------------------------------- learn

def learn_curve(data: Data, fold_models, per_word: dict, chosen_key, cache: Path) -> dict:
    train_idx = data.idx["train"]
    Ytr = data.Y["train"].toarray() > 0
    rel_te = data.relevance("test", range(data.T))
    rng = np.random.default_rng(SEED)
    rows = []
    n_train = len(train_idx)
    for held, keep, model in fold_models:
        held_set = set(held.tolist())
        candidates = [t for t in held if Ytr[:, t].sum() >= max(NS) + 1]
        chosen = rng.choice(candidates, min(LEARN_WORDS_PER_FOLD, len(candidates)),
                            replace=False)
        words_f = [data.vocabulary[t] for t in keep]
        idf_f = data.protocol.idf[keep]
        for t in chosen:
            w = data.vocabulary[t]
            have = np.flatnonzero(Ytr[:, t])
            lack = np.flatnonzero(~Ytr[:, t])
            entry = {"word": w, "supervised": float(per_word[w]["supervised"]),
                     "random": float(per_word[w]["random"]),
                     "bridge": _filled(per_word[w]["vocab"][chosen_key]["test"],
                                       per_word[w]["random"])}
            near, _ = Bridge(words_f, cache_dir=cache, floor=chosen_key[0],
                             neighbours=chosen_key[1]).neighbours(w)
            for start, init in (("zero", None), ("bridge", {w: near})):
                by_n = entry.setdefault("by_n_" + start, {})
                for n in NS:
                    res = []
                    for seed in range(LEARN_SEEDS):
                        r = np.random.default_rng(1000 * seed + n + t)
                        pics = np.concatenate([r.choice(have, n, replace=False),
                                               r.choice(lack, NEGATIVES, replace=False)])
                        captions = [tuple(data.vocabulary[u] for u in np.flatnonzero(Ytr[i])
                                          if u == t or u not in held_set) for i in pics]
                        system = System(None, copy.deepcopy(model), words_f, idf_f,
                                        {"pictures": {"train": n_train}})
                        learn(system, take_rows(data.X["train"], pics), captions, seed=seed,
                              init=init)
                        col = system.word_index[w]
                        sc = np.asarray(data.X["test"] @ system.model.W_[col].astype(np.float64))
                        res.append(float(avgp(sc.ravel(), rel_te[t])[0]))
                    by_n[n] = float(np.mean(res))
            rows.append(entry)
            say(f"learn {w}: " + ", ".join(f"N={n} {100 * v:.1f}" for n, v in
                                           entry["by_n_bridge"].items())
                + f" (from zero: N=20 {100 * entry['by_n_zero'][20]:.1f}; supervised "
                  f"{100 * entry['supervised']:.1f})")
    mean = {s: {n: round(100 * float(np.mean([r["by_n_" + s][n] for r in rows])), 2)
                for n in NS} for s in ("zero", "bridge")}
    return {"words": len(rows), "negatives": NEGATIVES, "seeds": LEARN_SEEDS,
            "avgp_by_n": mean["bridge"], "avgp_by_n_from_zero": mean["zero"],
            "supervised": round(100 * float(np.mean([r["supervised"] for r in rows])), 2),
            "random": round(100 * float(np.mean([r["random"] for r in rows])), 2),
            "bridge_n0": round(100 * float(np.mean([r["bridge"] for r in rows])), 2),
            "per_word": [{**r, **{k: {n: round(100 * v, 2) for n, v in r[k].items()}
                                  for k in ("by_n_zero", "by_n_bridge")}} for r in rows]}


# ------------------------------------------------------------------------------- latency

LOAD_SNIPPET = ("import time; t = time.perf_counter(); from pamir.text.embedding import embedder; "
                "e = embedder(); print(time.perf_counter() - t, e.load_seconds)")


def latency(data: Data) -> dict:
    out = {}
    loads = []
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", LOAD_SNIPPET], capture_output=True,
                           text=True, check=True)
        loads.append(float(r.stdout.split()[0]))
    out["model_load_seconds"] = {"median": round(float(np.median(loads)), 2),
                                 "runs": [round(x, 2) for x in loads]}
    embedder()._cache.clear()  # words embedded by other measures would be free here
    with tempfile.TemporaryDirectory() as d:
        b = Bridge(data.vocabulary, cache_dir=d)
        t0 = time.perf_counter()
        b.vocabulary_embeddings()
        out["vocabulary_embeddings_seconds"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        Bridge(data.vocabulary, cache_dir=d).vocabulary_embeddings()
        out["vocabulary_embeddings_cached_seconds"] = round(time.perf_counter() - t0, 4)
        # the index's parse_query: an unknown word (mapped) against a vocabulary word
        with Index.create(Path(d) / "ix", data.vocabulary, data.protocol.idf) as ix:
            ix.parse_query("tiger")
            ix.bridge.warm()
            words = [w for w in class_bridge().vocabulary if w.isalpha()
                     and w not in ix.word_index][:200]
            mapped, known = [], []
            for w in words:
                t0 = time.perf_counter()
                try:
                    ix.parse_query(w)
                except Exception:  # noqa: BLE001 - unmapped words count too
                    pass
                mapped.append(time.perf_counter() - t0)
                v = data.vocabulary[len(known) % data.T]
                t0 = time.perf_counter()
                ix.parse_query(v)
                known.append(time.perf_counter() - t0)
    mapped, known = 1000 * np.array(mapped), 1000 * np.array(known)
    extra = mapped - known
    out["query_ms"] = {"words": len(words),
                       "known_median": round(float(np.median(known)), 3),
                       "unknown_median": round(float(np.median(mapped)), 2),
                       "unknown_p90": round(float(np.percentile(mapped, 90)), 2),
                       "unknown_max": round(float(mapped.max()), 2),
                       "added_median": round(float(np.median(extra)), 2),
                       "added_p90": round(float(np.percentile(extra, 90)), 2)}
    return out


# ------------------------------------------------------------------------------- report

def cnn_logits(data: Data) -> dict:
    from pamir.features.cnn import CNNRepresentation

    rep = CNNRepresentation(cache_dir=config.default_cache_dir(), progress=False)
    out = {}
    for s in ("valid", "test"):
        L, ok, _ = rep.class_scores([data.collection.paths[i] for i in data.idx[s]])
        assert np.all(ok)
        out[s] = L
    return out


def clean(value):
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, tuple) else ",".join(map(str, k)): clean(v)
                for k, v in value.items() if not str(k).endswith("_scores")
                and not str(k).startswith("_rel_")}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--measures", nargs="+", default=["unseen", "feedback", "learn", "latency"],
                    choices=["unseen", "feedback", "learn", "latency"])
    ap.add_argument("--no-cnn", action="store_true", help="leave out the ImageNet class bridge")
    ap.add_argument("--representation", default="visterms", choices=sorted(REPRESENTATIONS))
    ap.add_argument("--report-only", action="store_true",
                    help="write the .md again from the .json, measuring nothing")
    args = ap.parse_args()
    stem = "search" if args.representation == "visterms" else "search_" + "_".join(
        args.representation.split("+"))
    if args.report_only:
        rerender(stem, report)
        return
    run = Run("bench_search.py")
    head = {"command": run.command, "machine": run.machine, "date": run.date}
    data = Data(args.representation)
    out_path = RESULTS / f"{stem}.json"
    results = json.loads(out_path.read_text()) if out_path.is_file() else {}
    results.update(head, representation=args.representation)
    cache = Path(tempfile.mkdtemp(prefix="pamir-bench-search-"))
    if "unseen" in args.measures or "learn" in args.measures:
        logits = None if args.no_cnn else cnn_logits(data)
        say("CNN class scores ready" if logits is not None else "no CNN bridge")
        fold_models, per_word = unseen(data, logits, cache)
        summary = choose_bridges(data, per_word)
        summary["per_word"] = {w: {"fold": e["fold"],
                                   "random": round(100 * e["random"], 2),
                                   "supervised": round(100 * e["supervised"], 2),
                                   "mapping": e["vocab"][(summary["vocabulary_bridge"]["chosen"]
                                                          ["floor"],
                                                          summary["vocabulary_bridge"]["chosen"]
                                                          ["neighbours"])]["mapping"],
                                   "bridge": e["vocab"][(summary["vocabulary_bridge"]["chosen"]
                                                         ["floor"],
                                                         summary["vocabulary_bridge"]["chosen"]
                                                         ["neighbours"])]["test"],
                                   **({"classes": e["class"][CLASS_FLOORS[1]]["classes"]}
                                      if e["class"] else {})}
                               for w, e in per_word.items()}
        if "unseen" in args.measures:
            results["unseen"] = clean(summary)
        if "learn" in args.measures:
            key = (summary["vocabulary_bridge"]["chosen"]["floor"],
                   summary["vocabulary_bridge"]["chosen"]["neighbours"])
            results["learn"] = clean(learn_curve(data, fold_models, per_word, key, cache))
    if "feedback" in args.measures:
        results["feedback"] = feedback(data)
        say("feedback", results["feedback"]["all"])
    if "latency" in args.measures:
        results["latency"] = latency(data)
        say("latency", results["latency"])
    for m in args.measures:  # a partial run leaves the other measures' runs as they were
        if isinstance(results.get(m), dict):
            results[m]["run"] = {"command": head["command"], "date": head["date"]}
    results["minutes"] = run.minutes()
    save_report(stem, clean(results), report, echo=False)


def feedback_report(f: dict, ran: str) -> list[str]:
    if "grid" not in f:  # a run before the neighbour term: PA alone
        return ["## One round of feedback\n", ran, "(PA alone, re-run to see the neighbour "
                f"term) all queries: {f['all']['before']:.2f} -> {f['all']['after']:.2f}, "
                f"{f['all']['relative']:+.1f} %.", ""]
    v, c, pr = f["valid"], f["chosen"], f["product"]

    def setting(x):
        return (f"sharpness {x['sharpness']:g}, right {x['right_weight']:g}, "
                f"wrong {x['wrong_weight']:g}")
    lines = ["## One round of feedback\n", ran,
             f"Every query: the top {f['judged']} pictures judged with the true relevance, "
             "then one round re-ranks the rest: PA-I updates with the right pictures as "
             "positives and the wrong ones as negatives (pamir.training.online.feedback_delta: the "
             "model's c and margin, 10 passes; it needs a right and a wrong picture), plus "
             "the neighbour term (pamir.training.online.neighbour_scores): in the model's text space, "
             "a picture near a right one rises and one near a wrong one sinks. AvgP (%) over "
             "the unjudged pictures; queries with no relevant unjudged picture are left out.",
             "",
             f"Validation ({v['queries']} queries): before {v['before']:.2f}, PA alone "
             f"{v['pa']:.2f}, best of the grid ({setting(c)}) {v['chosen']:.2f}, the "
             f"product's setting ({setting(pr)}) {v['product']:.2f}. Product minus PA alone, "
             f"95 % bootstrap interval over the queries: {v['product_minus_pa_interval'][0]} "
             f"to {v['product_minus_pa_interval'][1]} AvgP points; best minus product: "
             f"{v['chosen_minus_product_interval'][0]} to "
             f"{v['chosen_minus_product_interval'][1]}.", "",
             "Test, once for PA alone and once for the product's setting:", "",
             "| queries | n | before | PA alone | relative | PA + neighbours | relative |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for key, label in (("all", "all"), ("right_and_wrong", "a right and a wrong judged"),
                       ("wrong_only", "no right picture judged"),
                       ("right_only", "no wrong picture judged"),
                       ("single_word", "single-word"), ("multi_word", "multi-word")):
        p = f[key]
        if p["queries"]:
            lines.append(f"| {label} | {p['queries']} | {p['before']:.2f} | {p['pa']:.2f} | "
                         f"{p['pa_relative']:+.1f} % | {p['after']:.2f} | "
                         f"{p['relative']:+.1f} % |")
    best = sorted(f["grid"], key=lambda g: -g["valid_after"])[:8]
    lines += ["", f"One round takes {f['ms_per_round']} ms. Best settings of the validation "
                  "grid (AvgP %):", "", "| sharpness | right | wrong | valid | relative |",
              "|---:|---:|---:|---:|---:|"]
    lines += [f"| {g['sharpness']:g} | {g['right_weight']:g} | {g['wrong_weight']:g} | "
              f"{g['valid_after']:.2f} | {g['valid_relative']:+.1f} % |" for g in best]
    alt = f.get("alternatives") or []
    if alt:
        top = sorted((a for a in alt if a["method"].startswith("Rocchio")),
                     key=lambda a: -a["valid_after"])[:3]
        lines += ["", "Alternatives, on the validation queries only (AvgP %; before "
                      f"{v['before']:.2f}): PA alone with a larger margin, and the three best "
                      "Rocchio sums in the model's input space "
                      "(bench_search.feedback_alternatives):", "",
                  "| method | valid | relative |", "|---|---:|---:|"]
        lines += [f"| {a['method']} | {a['valid_after']:.2f} | {a['valid_relative']:+.1f} % |"
                  for a in [a for a in alt if a["method"].startswith("PA")] + top]
    return lines + [""]


def report(r: dict) -> str:
    def pct(x):  # a fraction, as percent
        return "-" if x is None else f"{100 * x:.2f}"
    # each section names its own run: the head is the machine's
    lines = [*report_head("Search: unseen words, feedback, learning new words, latency (Corel "
                          f"5k, {r.get('representation', 'visterms')} PAMIR)",
                          {"machine": r["machine"]}),
             f"Each section says the command (run under `{HEAVY}`) and date it was measured "
             "with.\n"]

    def ran(section: dict) -> str:
        run = section.get("run") or {"command": r["command"], "date": r["date"]}
        return f"Measured by `{run['command'].strip()}` on {run['date']}.\n"
    u = r.get("unseen")
    if u:
        vb = u["vocabulary_bridge"]["chosen"]
        rnd, sup = u["random"], u["supervised"]
        lines += ["## Unseen words\n", ran(u),
                  f"{u['words']} words in {FOLDS} seeded folds; for each fold PAMIR is trained "
                  "without its words (removed from every training and validation caption), "
                  "then each held-out word alone is a query on the 499 test pictures. Test "
                  "AvgP (%), mean over the words; a word a bridge cannot map counts as a "
                  "random ranking. Bridge settings chosen on the validation pictures "
                  f"({u['valid_words']} of the words have validation pictures).\n",
                  "| ranking | test AvgP | x random | % of supervised | words mapped |",
                  "|---|---:|---:|---:|---:|",
                  f"| random | {rnd:.2f} | 1.0 | {100 * rnd / sup:.0f} % | |",
                  f"| vocabulary bridge (floor {vb['floor']}, {vb['neighbours']} neighbours) | "
                  f"{pct(vb['test'])} | {100 * vb['test'] / rnd:.1f} | "
                  f"{100 * 100 * vb['test'] / sup:.0f} % | {100 * vb['mapped']:.0f} % |"]
        cb = u.get("class_bridge")
        if cb:
            a, m = cb["alone"], cb["chosen_mix"]
            lines += [f"| ImageNet class bridge alone (class floor {a['class_floor']}) | "
                      f"{pct(a['test'])} | {100 * a['test'] / rnd:.1f} | "
                      f"{100 * 100 * a['test'] / sup:.0f} % | |",
                      f"| both, mixed {m['mix']} of the class bridge (floor "
                      f"{m['class_floor']}), chosen on validation | {pct(m['test'])} | "
                      f"{100 * m['test'] / rnd:.1f} | {100 * 100 * m['test'] / sup:.0f} % | |"]
        lines += [f"| supervised (the model trained with the word) | {sup:.2f} | "
                  f"{sup / rnd:.1f} | 100 % | |", ""]
        lines += ["Validation grid of the vocabulary bridge (AvgP %):\n",
                  "| floor | neighbours | valid | test | mapped |", "|---:|---:|---:|---:|---:|"]
        lines += [f"| {g['floor']} | {g['neighbours']} | {pct(g['valid'])} | {pct(g['test'])} | "
                  f"{100 * g['mapped']:.0f} % |" for g in u["vocabulary_bridge"]["grid"]]
        if cb:
            lines += ["", "Validation grid of the class bridge's mix (AvgP %):\n",
                      "| class floor | mix | valid | test |", "|---:|---:|---:|---:|"]
            lines += [f"| {g['class_floor']} | {g['mix']} | {pct(g['valid'])} | "
                      f"{pct(g['test'])} |" for g in cb["grid"]]
        ex = [f"{w}: {e['mapping']}" for w, e in list(u["per_word"].items())[:12]]
        lines += ["", "Some mappings (chosen settings): " + "; ".join(ex) + ".", ""]
    f = r.get("feedback")
    if f:
        lines += feedback_report(f, ran(f))
    lr = r.get("learn")
    if lr:
        lines += ["## Learning a new word with `pamir learn`\n", ran(lr),
                  f"{lr['words']} held-out words (fold models above), each taught from N "
                  f"captioned training pictures that have it plus {lr['negatives']} that do "
                  f"not (pamir.training.online.learn, 200 PA updates a picture, W averaged over the "
                  f"updates), {lr['seeds']} seeds. Test AvgP (%) of the word alone. The new "
                  "word's row starts from zero (what `pamir learn` does), or from the rows of "
                  "the vocabulary words the bridge maps it to.\n",
                  "| N | " + " | ".join(str(n) for n in lr["avgp_by_n"]) +
                  " | bridge only (N = 0) | full retraining | random |",
                  "|---|" + "---:|" * (len(lr["avgp_by_n"]) + 3),
                  "| from the bridge | " + " | ".join(f"{v:.2f}" for v in lr["avgp_by_n"].values())
                  + f" | {lr['bridge_n0']:.2f} | {lr['supervised']:.2f} | {lr['random']:.2f} |",
                  "| from zero | " + " | ".join(f"{v:.2f}" for v in
                                              lr["avgp_by_n_from_zero"].values())
                  + " | | | |", ""]
    la = r.get("latency")
    if la:
        q = la["query_ms"]
        lines += ["## Latency\n", ran(la),
                  f"- Loading the embedding model (sentence-transformers import + weights), a "
                  f"fresh process: {la['model_load_seconds']['median']} s (median of 3). "
                  "`pamir serve` does it in a background thread at start; `pamir search` only "
                  "when a query has a word outside the vocabulary and its inflections.",
                  f"- The vocabulary's embeddings ({r.get('vocabulary_size', 179)} words): "
                  f"{la['vocabulary_embeddings_seconds']} s computed, "
                  f"{la['vocabulary_embeddings_cached_seconds']} s from the cache file.",
                  f"- Parsing a query, model loaded: {q['known_median']} ms for a vocabulary "
                  f"word; {q['unknown_median']} ms median (p90 {q['unknown_p90']}, max "
                  f"{q['unknown_max']}) for a word that must be embedded ({q['words']} ImageNet "
                  f"class names): the mapping adds {q['added_median']} ms (p90 "
                  f"{q['added_p90']}); a word seen before is cached.", ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
