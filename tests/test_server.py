"""The HTTP API: search, pictures, thumbnails, annotate, explain; bad requests; no traversal."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from pamir.index import Index
from pamir.server import create_app
from pamir.server.explain import block_contributions
from fakes import FakeSystem, build_index, use_fake_embedder


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    """Words outside the vocabulary stay unknown unless a test maps them (test_bridge runs
    the real model)."""
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


@pytest.fixture
def system():
    return FakeSystem()


@pytest.fixture
def client(tmp_path, system):
    app = create_app(build_index(tmp_path, system), system=system)
    with TestClient(app) as c:
        yield c


def test_search(client):
    r = client.get("/api/search", params={"q": "red", "k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["words"] == ["red"] and body["unknown"] == [] and body["pictures"] == 9
    assert len(body["hits"]) == 3
    assert all(h["name"].startswith("red") for h in body["hits"])
    scores = [h["score"] for h in body["hits"]]
    assert scores == sorted(scores, reverse=True)
    r = client.get("/api/search", params={"q": "blue unicorn"})
    assert r.json()["unknown"] == ["unicorn"]
    assert r.json()["hits"][0]["name"].startswith("blue")


def test_search_grammar_and_mapping(client, monkeypatch):
    use_fake_embedder(monkeypatch)
    body = client.get("/api/search", params={"q": "crimson -stripes", "k": 9}).json()
    assert body["words"] == ["red", "stripes"] and body["unknown"] == []
    assert body["mapped"] == ["crimson -> red 0.80"]
    assert body["mapping"][0] == {"term": "crimson", "weight": 1.0, "how": "embedding",
                                  "words": [{"word": "red", "similarity": 0.8}]}
    names = [h["name"] for h in body["hits"]]
    assert names.index("red-0.png") < names.index("red-2.png")  # stripes excluded
    body = client.get("/api/search", params={"q": "reds unicorn"}).json()
    assert body["mapped"] == ["reds -> red"] and body["unknown"] == ["unicorn"]
    assert "floor" in body["mapping"][1]["note"]
    # the score floor, as a parameter or in the query; sorting and folders
    r = client.get("/api/search", params={"q": "red", "floor": 100}).json()
    assert r["hits"] == [] and r["options"]["floor"] == 100
    assert client.get("/api/search", params={"q": "red floor:100"}).json()["hits"] == []
    assert client.get("/api/search", params={"q": "red", "sort": "size"}).status_code == 422
    assert client.get("/api/search", params={"q": "red sort:size"}).status_code == 400
    r = client.get("/api/search", params={"q": "red", "sort": "date", "k": 3}).json()
    assert r["options"]["sort"] == "newest" and len(r["hits"]) == 3
    r = client.get("/api/search", params={"q": "red", "in": "elsewhere"}).json()
    assert r["hits"] == []


def test_more_like_this(client):
    hit = client.get("/api/search", params={"q": "green stripes", "k": 1}).json()["hits"][0]
    assert hit["name"] == "green-2.png"
    r = client.get(f"/api/pictures/{hit['id']}/similar", params={"k": 8})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["space"] == "text" and hit["id"] not in [h["id"] for h in body["hits"]]
    assert {h["name"] for h in body["hits"][:2]} == {"green-0.png", "green-1.png"}
    assert len(body["hits"]) == 8
    assert client.get("/api/pictures/4242/similar").status_code == 404
    buf = io.BytesIO()
    Image.new("RGB", (40, 30), (10, 30, 240)).save(buf, "PNG")
    r = client.post("/api/similar", params={"k": 3}, content=buf.getvalue())
    assert r.status_code == 200 and r.json()["hits"][0]["name"].startswith("blue")


@pytest.mark.parametrize("params, status, needle", [
    ({"q": ""}, 400, "empty"),
    ({"q": "   "}, 400, "empty"),
    ({"q": "unicorn dragon"}, 400, "vocabulary"),
    ({"q": "red", "k": 0}, 422, ""),
    ({"q": "red", "k": -3}, 422, ""),
    ({"q": "red", "k": "ten"}, 422, ""),
    ({"q": "red", "k": 100000}, 422, ""),
    ({}, 422, ""),
])
def test_bad_searches(client, params, status, needle):
    r = client.get("/api/search", params=params)
    assert r.status_code == status, r.text
    assert needle in str(r.json()["detail"])
    if needle == "vocabulary":
        assert r.json()["unknown"] == ["unicorn", "dragon"]


def test_feedback_rerank_then_keep(tmp_path, system):
    model_dir = tmp_path / "model"
    system.save(model_dir)
    index_dir = build_index(tmp_path, system)
    with Index.open(index_dir, writable=True) as ix:
        ix.set_model(model_dir, "fake")
    W0 = system.model.W_.copy()
    with TestClient(create_app(index_dir, model_dir, system=system)) as c:
        hits = c.get("/api/search", params={"q": "stripes", "k": 9}).json()["hits"]
        by_name = {h["name"]: h["id"] for h in hits}
        right, wrong = by_name["green-0.png"], hits[0]["id"]
        assert hits[0]["name"] != "green-0.png"
        body = {"q": "stripes", "right": [right], "wrong": [wrong], "k": 9}
        r = c.post("/api/feedback", json=body)
        assert r.status_code == 200, r.text
        out = r.json()
        ranked = [h["id"] for h in out["hits"]]
        assert ranked.index(right) < ranked.index(wrong) and out["changed_words"] == ["stripes"]
        assert np.array_equal(system.model.W_, W0)  # re-ranked, nothing saved yet
        # the index still answers as before
        assert c.get("/api/search", params={"q": "stripes", "k": 1}).json()["hits"][0]["id"] == wrong
        # a right picture alone re-ranks by nearness to it, and teaches nothing to keep
        r = c.post("/api/feedback", json={**body, "wrong": []})
        assert r.status_code == 200 and r.json()["changed_words"] == []
        rose = [h["id"] for h in r.json()["hits"]]
        assert rose.index(right) < [h["id"] for h in hits].index(right)
        assert c.post("/api/feedback/keep", json={**body, "wrong": []}).status_code == 400
        assert c.post("/api/feedback", json={**body, "right": [], "wrong": []}).status_code == 400
        assert c.post("/api/feedback", json={**body, "right": [4242]}).status_code == 404

        r = c.post("/api/feedback/keep", json=body)
        assert r.status_code == 200, r.text
        assert r.json()["kept"]["rescored"] == 9
        assert not np.array_equal(system.model.W_, W0)
        assert np.array_equal(np.load(model_dir / "W.npy"), system.model.W_)
        assert np.array_equal(np.load(tmp_path / "model.previous" / "W.npy"), W0)
        after = [h["id"] for h in c.get("/api/search", params={"q": "stripes", "k": 9}).json()["hits"]]
        assert after.index(right) < after.index(wrong)  # the index was rescored
        # what is kept is PA's change to W; the neighbour term belonged to the round


def test_picture_keywords_and_thumbnail(client):
    hit = client.get("/api/search", params={"q": "green", "k": 1}).json()["hits"][0]
    p = client.get(f"/api/pictures/{hit['id']}", params={"k": 2}).json()
    assert p["keywords"][0]["word"] == "green" and len(p["keywords"]) == 2
    r = client.get(hit["thumbnail"], params={"size": 100})
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    im = Image.open(io.BytesIO(r.content))
    assert max(im.size) == 36  # never enlarged; cached copy is served the second time
    assert client.get(hit["thumbnail"]).content[:2] == b"\xff\xd8"


def test_unknown_ids_and_path_traversal(client, tmp_path):
    assert client.get("/api/pictures/9999").status_code == 404
    assert client.get("/api/pictures/9999/thumbnail").status_code == 404
    assert client.get("/api/pictures/abc").status_code == 422
    secret = tmp_path / "index" / "catalog.sqlite"
    for url in ["/static/../catalog.sqlite", "/static/%2e%2e/%2e%2e/index/catalog.sqlite",
                "/static/..%2f..%2fapp.py", "/api/pictures/../../etc/passwd",
                f"/api/pictures/{secret}", "/static//etc/passwd",
                "/api/pictures/1/thumbnail/../../../etc/passwd"]:
        r = client.get(url)
        assert r.status_code in (404, 422, 400), (url, r.status_code)
        assert b"SQLite" not in r.content and b"root:" not in r.content


def test_file_gone_is_410(client, tmp_path):
    hit = client.get("/api/search", params={"q": "red", "k": 1}).json()["hits"][0]
    Path(hit["path"]).unlink()
    r = client.get(hit["thumbnail"], params={"size": 512})
    assert r.status_code == 410 and "pamir index" in r.json()["detail"]


def test_annotate_upload(client):
    buf = io.BytesIO()
    Image.new("RGB", (40, 30), (10, 30, 240)).save(buf, "PNG")
    r = client.post("/api/annotate", params={"k": 3}, content=buf.getvalue(),
                    headers={"content-type": "image/png"})
    assert r.status_code == 200, r.text
    assert r.json()["keywords"][0]["word"] == "blue"
    assert client.post("/api/annotate", content=b"").status_code == 400
    r = client.post("/api/annotate", content=b"definitely not a picture")
    assert r.status_code == 422 and "decoded" in r.json()["detail"]
    assert "not a picture" in r.json()["detail"]  # the decoder's reason, passed on


def test_explanation_sums_to_the_score(client):
    hit = client.get("/api/search", params={"q": "red stripes", "k": 1}).json()["hits"][0]
    r = client.get(f"/api/pictures/{hit['id']}/explain", params={"q": "red stripes"})
    assert r.status_code == 200, r.text
    ex = r.json()
    assert len(ex["blocks"]) == 4 and (ex["width"], ex["height"]) == (36, 24)
    total = sum(b[4] for b in ex["blocks"])
    assert total == pytest.approx(hit["score"], rel=1e-5)
    assert ex["score"] == pytest.approx(ex["indexed_score"], rel=1e-5)
    assert client.get(f"/api/pictures/{hit['id']}/explain", params={"q": ""}).status_code == 400
    assert client.get("/api/pictures/424242/explain", params={"q": "red"}).status_code == 404


def test_block_contributions_are_exact():
    rng = np.random.default_rng(3)
    V, T = 50, 7
    visterms = rng.integers(0, V, 77)
    tf = np.bincount(visterms, minlength=V)
    bag = tf * rng.uniform(0.5, 3, V)
    bag /= np.linalg.norm(bag)
    W = rng.normal(size=(T, V))
    q = rng.random(T)
    c = block_contributions(visterms, bag, W, q)
    assert c.sum() == pytest.approx(q @ W @ bag, rel=1e-12)
    with pytest.raises(ValueError, match="different pictures"):
        block_contributions(visterms[:5], bag, W, q)


def test_explanation_needs_bags_of_visterms(tmp_path, system):
    index_dir = build_index(tmp_path, system)
    system.pipeline.output = "vectors"  # e.g. CNN features: they belong to no block
    with TestClient(create_app(index_dir, system=system)) as c:
        r = c.get("/api/pictures/1/explain", params={"q": "red"})
        assert r.status_code == 409 and "visterms" in r.json()["detail"]


def test_no_model_means_503_for_model_routes(tmp_path):
    app = create_app(build_index(tmp_path))  # the index names no model
    with TestClient(app) as c:
        assert c.get("/api/status").json()["model_available"] is False
        assert c.post("/api/annotate", content=b"x").status_code == 503
        hit = c.get("/api/search", params={"q": "red"}).json()["hits"][0]
        assert c.get(f"/api/pictures/{hit['id']}/explain", params={"q": "red"}).status_code == 503
        assert c.get(f"/api/pictures/{hit['id']}").status_code == 200  # needs no model


def test_non_linear_model_explanation_is_409(tmp_path, system):
    index_dir = build_index(tmp_path, system)
    system.model.W_ = None
    with TestClient(create_app(index_dir, system=system)) as c:
        r = c.get("/api/pictures/1/explain", params={"q": "red"})
        assert r.status_code == 409 and "PAMIR" in r.json()["detail"]


def test_openapi_and_page(client):
    schema = client.get("/openapi.json").json()
    for path in ["/api/search", "/api/annotate", "/api/status",
                 "/api/pictures/{picture_id}/thumbnail", "/api/pictures/{picture_id}/explain"]:
        assert path in schema["paths"]
    assert "image/*" in schema["paths"]["/api/annotate"]["post"]["requestBody"]["content"]
    page = client.get("/")
    assert page.status_code == 200 and 'id="q"' in page.text
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/api/status").json()["pictures"] == 9


def test_server_sees_pictures_indexed_while_it_runs(tmp_path, client, system):
    extra = tmp_path / "pictures" / "late.png"
    Image.new("RGB", (20, 20), (250, 0, 0)).save(extra)
    with Index.open(tmp_path / "index", writable=True) as ix:
        ix.update([tmp_path / "pictures"], system.transform_paths)
    assert client.get("/api/status").json()["pictures"] == 10


def test_a_loopback_server_answers_only_its_own_names(tmp_path, system):
    from pamir.commands.index import LOOPBACK_NAMES
    app = create_app(build_index(tmp_path, system), system=system, allowed_hosts=LOOPBACK_NAMES)
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        assert c.get("/api/status").status_code == 200
        assert c.get("/api/status", headers={"host": "localhost:8000"}).status_code == 200
        assert c.get("/api/status", headers={"host": "evil.example:8000"}).status_code == 400


def test_cache_dir_of_a_checkout_and_of_an_installed_package(tmp_path, monkeypatch):
    from pamir import config
    monkeypatch.delenv("PAMIR_CACHE", raising=False)
    assert config.default_cache_dir() == config.repo_root() / ".cache"  # this checkout
    monkeypatch.setattr(config, "repo_root", lambda: tmp_path / "site-packages")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert config.default_cache_dir() == tmp_path / "xdg" / "pamir"
