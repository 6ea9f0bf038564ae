"""The zero-caption look's parts on Corel 5k that its studies share (bench_zero_caption,
bench_zero_typical): every picture's pooled CNN vectors from the feature cache, a vocabulary's
class matrix through the bridge, a split's AvgP by class mass, and the folder's neighbours."""

from __future__ import annotations

import functools

import numpy as np

from common.corel import query_metrics

from pamir import config
from pamir.features.cnn import CNNRepresentation, CNNSettings
from pamir.features.cnn_network import CHANNELS, classifier
from pamir.zeroshot import classes as zeroshot
from pamir.zeroshot import folder
from pamir.zeroshot.imagenet import class_probabilities, imagenet_class_names

#: The three views' networks and short sides (pamir.features.registry's presets).
VIEWS = {"lite0": 224, "lite1": 240, "lite2": 260}


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
