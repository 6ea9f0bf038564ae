"""Relevance feedback as a library (pamir.jobs.feedback): a Keep through the HTTP API and the same
marks through the library make the same model and the same index scores; a round's re-ranked
hits are the same through both."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from fastapi.testclient import TestClient

import pamir
from conftest import model_arrays, same_model
from pamir.server import create_app
from pamir.jobs.indexing import index_folders
from pamir.jobs.errors import WorkflowError
from pamir.jobs.feedback import feedback_round, marks
from pamir.jobs.loading import load_system


@pytest.fixture(autouse=True)
def no_word_mapping(monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def marked(index_dir, pictures):
    """Right: red striped pictures; wrong: red plain ones (tests/conftest's pictures: p%03d,
    colour i % 4 (red first), striped when (i // 4) is even)."""
    with pamir.Index.open(index_dir) as ix:
        ids = {i: ix.id_of_path(pictures / f"p{i:03d}.png") for i in range(12)}
    return [ids[0], ids[8]], [ids[4]]


def test_keep_through_the_api_equals_the_library(tiny_system, tmp_path):
    _, model, pictures, _ = tiny_system
    for name in ("api", "lib"):
        shutil.copytree(model, tmp_path / name / "model")
        report = index_folders(tmp_path / name / "model", [pictures],
                               index=tmp_path / name / "index")
        assert report.added == 60
    right, wrong = marked(tmp_path / "api" / "index", pictures)
    assert (right, wrong) == marked(tmp_path / "lib" / "index", pictures)

    app = create_app(tmp_path / "api" / "index", tmp_path / "api" / "model")
    with TestClient(app) as client:
        r = client.post("/api/feedback/keep", json={"q": "red stripes", "right": right,
                                                    "wrong": wrong})
    assert r.status_code == 200, r.text
    done = feedback_round(tmp_path / "lib" / "model", tmp_path / "lib" / "index",
                          "red stripes", right, wrong)
    assert done["kept"]["rescored"] == r.json()["kept"]["rescored"] == 60
    assert sorted(done["rows"]) == sorted(r.json()["changed_words"]) == ["red", "stripes"]
    before, after = model_arrays(model), model_arrays(tmp_path / "lib" / "model")
    assert not np.array_equal(before["model/W"], after["model/W"])  # it learnt
    assert same_model(tmp_path / "api" / "model", tmp_path / "lib" / "model")
    for name in ("api", "lib"):
        with pamir.Index.open(tmp_path / name / "index") as ix:
            hits = ix.search("red stripes", k=60)
            assert ix.model_fingerprint == pamir.index.model_fingerprint(
                tmp_path / name / "model")
            if name == "api":
                api_hits = [(h.path, h.score) for h in hits]
    assert [(h.path, h.score) for h in hits] == api_hits


def test_rerank_through_the_api_equals_the_library(tiny_system, tmp_path):
    _, model0, pictures, _ = tiny_system
    model, index = tmp_path / "model", tmp_path / "index"
    shutil.copytree(model0, model)
    assert index_folders(model, [pictures], index=index).added == 60
    right, wrong = marked(index, pictures)
    rounds = [(right, wrong), (right, []), ([], wrong)]  # PA and neighbours; neighbours alone
    app = create_app(index, model)
    with TestClient(app) as client:
        replies = [client.post("/api/feedback", json={"q": "red stripes", "right": r,
                                                      "wrong": w, "k": 20}) for r, w in rounds]
    system = load_system(model)  # a script's own, loaded once for its rounds
    for (r, w), reply in zip(rounds, replies):
        assert reply.status_code == 200, reply.text
        done = pamir.feedback_round(model, index, "red stripes", r, w, keep=False, k=20,
                                    system=system)
        assert done["kept"] is None
        assert done["rows"] == reply.json()["changed_words"]
        assert done["candidates"] == reply.json()["candidates"]
        assert [(h.id, h.path, h.score) for h in done["hits"]] == [
            (h["id"], h["path"], h["score"]) for h in reply.json()["hits"]]
    assert same_model(model, model0)  # a round without Keep saves nothing


def test_marks_and_refusals(tiny_system, tmp_path):
    assert marks([3, 3, 1], [1, 2, 2]) == ([3, 1], [2])
    _, model, _, _ = tiny_system
    with pytest.raises(WorkflowError, match="right and one wrong"):
        feedback_round(model, tmp_path / "none", "red", [1], [1])
