"""The word-embedding model run from this machine's ONNX export (pamir.text.embedding): the
first process that loads it through torch exports it, checked; a later one loads the export
(no torch) and gives the same vectors."""

from __future__ import annotations

import numpy as np
import pytest

from pamir.text import embedding

pytestmark = pytest.mark.skipif(not embedding.model_installed()[0],
                                reason="the [mapping] extra is not installed")

WORDS = ["tiger", "quillfern", "fresh bread", "a boat on the lake at dawn", "x", ""]


def test_a_later_process_loads_the_export_and_embeds_alike(cache_of_the_module, monkeypatch):
    monkeypatch.setattr(embedding, "_embedder", None)
    monkeypatch.setattr(embedding, "_embedder_error", None)
    first = embedding.embedder()  # torch, then the export made
    from pamir.text.embedding_torch import TorchEmbedder  # loaded by now: torch, at its top
    assert type(first) is TorchEmbedder and embedding.onnx_path().is_file()
    monkeypatch.setattr(embedding, "_embedder", None)  # as a new process finds it
    later = embedding.embedder()
    assert isinstance(later, embedding.OnnxEmbedder)
    a, b = first.encode(WORDS), later.encode(WORDS)
    assert a.shape == b.shape == (len(WORDS), first.dim)
    assert np.abs(a - b).max() <= embedding.ONNX_TOLERANCE
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)


def test_a_damaged_export_falls_back_to_the_model(cache_of_the_module, monkeypatch):
    path = embedding.onnx_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a graph")
    monkeypatch.setattr(embedding, "_embedder", None)
    monkeypatch.setattr(embedding, "_embedder_error", None)
    from pamir.text.embedding_torch import TorchEmbedder  # torch, at its top
    assert type(embedding.embedder()) is TorchEmbedder
