"""One annotation (pamir.jobs.annotation) behind the library, `pamir annotate` and the HTTP API:
the same picture gets the same keywords through all three."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from pamir.jobs.annotation import annotate_pictures, keyword_records, keywords_of_rows
from pamir.cli import app
from pamir.index import Index
from pamir.server import create_app
from pamir.jobs.indexing import index_folders
from pamir.jobs.errors import WorkflowError
from pamir.jobs.loading import load_system
from pamir.zeroshot.classes import Annotation


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def words(records):
    return [r["word"] for r in records]


def test_cli_api_and_library_agree(tiny_system, tmp_path):
    _, model, pictures, _ = tiny_system
    picture = pictures / "p001.png"
    system = load_system(model)

    r = CliRunner().invoke(app, ["annotate", str(model), str(picture), "--json"])
    assert r.exit_code == 0, r.output
    cli = json.loads(r.stdout)["keywords"]

    [library], ok, _ = annotate_pictures(system, [picture])
    Z, _, _ = system.transform_paths([str(picture)])
    [own] = system.annotate(Z)  # by validation's rule, as `pamir annotate` without -k

    index_folders(model, [pictures], index=tmp_path / "ix")
    with TestClient(create_app(tmp_path / "ix", model, warm_mapping=False)) as client:
        upload = client.post("/api/annotate", params={"k": 5}, content=picture.read_bytes(),
                             headers={"content-type": "image/png"})
        assert upload.status_code == 200, upload.text
        api = upload.json()["keywords"]
        hit = next(h for h in client.get("/api/search", params={"q": own[0][0], "k": 60})
                   .json()["hits"] if h["name"] == picture.name)
        stored = client.get(f"/api/pictures/{hit['id']}", params={"k": 5}).json()["keywords"]

    assert ok.tolist() == [True] and 1 <= len(cli) <= 5
    assert all("probability" in w for w in cli)  # calibrated, its thresholds chosen words
    assert words(cli) == words(library) == words(api) == words(stored) == [w for w, _ in own]
    for other in (library, api, stored):  # the index keeps float32 vectors
        assert [w["score"] for w in other] == pytest.approx([w["score"] for w in cli], rel=1e-5)
    assert [s for _, s in own] == pytest.approx([w["score"] for w in cli], rel=1e-6)


def test_a_count_of_words_and_a_query_agree_through_library_cli_and_api(tiny_system, tmp_path):
    """The README's `system.annotate(Z, k=5)` and `pamir annotate -k 5` give the same five
    words (a count: the k best, whatever the rule); `system.annotate(Z)`, `pamir annotate`
    and the API (whose k, 5 by default, is a most: the rule's words, at most k) give the
    rule's words. And one query, `sort:date` included, gives the same pictures in the same
    order through `Index.search`, `pamir search` and GET /api/search."""
    _, model, pictures, _ = tiny_system
    picture = pictures / "p002.png"
    system = load_system(model)
    assert system.calibration.thresholds is not None  # where the rule and a count differ

    def cli_words(*more):
        r = CliRunner().invoke(app, ["annotate", str(model), str(picture), *more, "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["keywords"]

    cli5, cli = cli_words("-k", "5"), cli_words()
    Z, _, _ = system.transform_paths([str(picture)])
    [readme5], [own] = system.annotate(Z, k=5), system.annotate(Z)
    [library5], _, _ = annotate_pictures(system, [picture], k=5)
    index_folders(model, [pictures], index=tmp_path / "ix")
    queries = [own[0][0], f"{own[0][0]} sort:date", f"{own[0][0]} -{readme5[-1][0]}"]
    with TestClient(create_app(tmp_path / "ix", model, warm_mapping=False)) as client:
        api = client.post("/api/annotate", content=picture.read_bytes(),
                          headers={"content-type": "image/png"}).json()["keywords"]
        api_hits = [client.get("/api/search", params={"q": q, "k": 12}).json()["hits"]
                    for q in queries]

    assert len(cli5) == 5 and all("probability" in w for w in cli5)
    assert words(cli5) == [w for w, _ in readme5] == words(library5)
    assert [s for _, s in readme5] == pytest.approx([w["score"] for w in cli5], rel=1e-6)
    assert 1 <= len(cli) < 5  # the rule chose fewer words than the count here
    assert words(cli) == [w for w, _ in own] == words(api)

    for q, from_api in zip(queries, api_hits):
        r = CliRunner().invoke(app, ["search", q, "--index", str(tmp_path / "ix"), "-k", "12",
                                     "--json"])
        assert r.exit_code == 0, r.output
        from_cli = json.loads(r.stdout)["hits"]
        with Index.open(tmp_path / "ix") as index:
            from_library = index.search(q, 12)
        assert len(from_library) == 12, q
        assert [h["path"] for h in from_cli] == [h.path for h in from_library] \
            == [h["path"] for h in from_api], q
        assert [h["score"] for h in from_api] == pytest.approx([h.score for h in from_library])


def test_a_model_of_another_vocabulary_is_refused(tiny_system, tmp_path):
    _, model, pictures, _ = tiny_system
    system = load_system(model)
    with pytest.raises(WorkflowError, match="another vocabulary"):
        load_system(model, vocabulary=list(system.vocabulary)[::-1])
    # the server loads the model on the first upload, with the same check
    words = list(system.vocabulary)[::-1]
    Index.create(tmp_path / "ix", words, np.ones(len(words)), model_dir=model).close()
    with TestClient(create_app(tmp_path / "ix", model, warm_mapping=False)) as client:
        r = client.post("/api/annotate", content=(pictures / "p001.png").read_bytes(),
                        headers={"content-type": "image/png"})
    assert r.status_code == 409 and "another vocabulary" in r.text, r.text


def test_keywords_of_rows_adds_imagenet_words_the_model_did_not_give():
    Z = np.array([[0.1, 0.9, 0.5]], np.float32)
    P = np.zeros((1, 1000))
    P[0, 281] = 1.0  # ImageNet class 281: tabby cat
    [records] = keywords_of_rows(Z, ["red", "tabby", "grass"], None, P, k=2)
    assert words(records)[:2] == ["tabby", "grass"]
    assert all(r.get("source") == "imagenet" for r in records[2:]) and records[2:]
    assert words(records[2:]) == ["cat"]  # the model gave "tabby" already
    assert records[2]["classes"] == 7 and records[2]["probability"] > 0.99
    sky = Annotation("sky", 0.9, 0.9, 1)
    assert keyword_records([("sky", 0.5, None)], [sky]) == [{"word": "sky", "score": 0.5}]


def test_with_no_model_the_surer_of_a_folder_word_and_imagenets_speaks():
    bear, sky = Annotation("bear", 0.8, 0.8, 1), Annotation("sky", 0.3, 0.3, 1)
    best = [("bear", 2.0, 0.4), ("sky", 1.5, 0.6)]
    # a fitted model's words stand for themselves
    assert [r.get("source") for r in keyword_records(best, [bear, sky])] == [None, None]
    # the folder's own words (no model), marked so: ImageNet's surer "bear" is kept, the
    # folder's "sky"
    records = keyword_records(best, [bear, sky], folder=True)
    assert [(r["word"], r["probability"], r.get("source")) for r in records] == \
        [("bear", 0.8, "imagenet"), ("sky", 0.6, "folder")]


class Likely:
    """Stands in for a calibration whose probabilities are not in the scores' order."""

    thresholds = None

    @staticmethod
    def word_probabilities(Z):
        return np.tile([0.2, 0.9, 0.5, 0.35], (len(Z), 1))


def test_the_folders_words_are_its_likeliest_not_its_best_scored():
    Z = np.array([[9.0, 1.0, 2.0, 3.0]])
    vocabulary = ["truck", "bear", "snow", "ice"]
    [records] = keywords_of_rows(Z, vocabulary, Likely(), folder=True)
    # the likeliest first, those under MIN_PROBABILITY (0.3) left out
    assert words(records) == ["bear", "snow", "ice"]
    assert {r["source"] for r in records} == {"folder"}
    # a fitted model's words keep the rule validation chose (here the best scored)
    [records] = keywords_of_rows(Z, vocabulary, Likely(), k=2, count=True)
    assert words(records) == ["truck", "ice"]


