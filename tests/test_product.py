"""The commands a person uses: pamir index / search / annotate (and serve's wiring).

The first tests drive the commands with a small stand-in system (fast, exact); the last one
drives the real thing, fit -> index -> search -> annotate, on generated captioned pictures.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import pamir.commands.index as product
from pamir import config
from fakes import run, use_fake_embedder
from pictures import COLOURS, coloured_pictures


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    """Words outside the vocabulary stay unknown unless a test maps them."""
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def test_index_then_search(fake, tmp_path):
    model, pictures = fake
    (pictures / "junk.jpg").write_bytes(b"\x00" * 10)
    r = run("index", model, pictures, "--index", tmp_path / "ix")
    assert "9 pictures indexed" in r.output and "junk.jpg" in r.output
    r = run("search", "red stripes", "--index", tmp_path / "ix", "-k", "3")
    assert "red-2.png" in r.stdout.splitlines()[0]
    r = run("search", "red", "--index", tmp_path / "ix", "-k", "2", "-f")
    paths = r.stdout.split()
    assert len(paths) == 2 and all(Path(p).name.startswith("red") for p in paths)
    r = run("search", "blue unicorns", "--index", tmp_path / "ix", "--json")
    body = json.loads(r.stdout)
    assert body["unknown"] == ["unicorns"] and Path(body["hits"][0]["path"]).name.startswith("blue")
    assert "unicorns" in r.stderr

    # Incremental: a second run computes nothing; the model folder changed (it learnt):
    # every picture is rescored; another model needs --rebuild.
    r = run("index", model, pictures, "--index", tmp_path / "ix", "--json")
    report = json.loads(r.stdout)
    assert report["unchanged"] == 10 and report["added"] == 0
    (model / "model.json").write_text('{"fake": 2}')
    r = run("index", model, pictures, "--index", tmp_path / "ix")
    assert "rescoring" in r.output and "added 0" in r.output
    other = tmp_path / "other-model"
    other.mkdir()
    (other / "model.json").write_text('{"fake": 3}')
    r = run("index", other, pictures, "--index", tmp_path / "ix", ok=False)
    assert r.exit_code == 2 and "--rebuild" in r.output
    r = run("index", other, pictures, "--index", tmp_path / "ix", "--rebuild")
    assert "added 9" in r.output


def test_a_model_fitted_again_in_its_folder_rebuilds_its_index(fake, tmp_path):
    """`pamir fit -o MODEL` again (a refit) changes the model's words: `pamir index MODEL`
    then rebuilds the index by itself, where another model folder needs --rebuild."""
    model, pictures = fake
    run("index", model, pictures, "--index", tmp_path / "ix")
    system = product.load_system(model)
    order = np.arange(len(system.vocabulary))[::-1]
    system.vocabulary = [system.vocabulary[t] for t in order]
    system.idf = system.idf[order]
    system.model.W_ = system.model.W_[order]
    (model / "model.json").write_text('{"fake": "fitted again"}')
    r = run("index", model, pictures, "--index", tmp_path / "ix")
    assert "fitted again" in r.output and "added 9" in r.output
    r = run("search", "red", "--index", tmp_path / "ix", "-k", "2", "-f")
    assert all(Path(p).name.startswith("red") for p in r.stdout.split())


def test_search_grammar_mapping_and_like(fake, tmp_path, monkeypatch):
    model, pictures = fake
    ix = tmp_path / "ix"
    run("index", model, pictures, "--index", ix)
    use_fake_embedder(monkeypatch)
    # red-0.png and red-1.png are the same file: one hit unless copies are shown apart
    folded = run("search", "crimson -stripes", "--index", ix, "-k", "3")
    assert "(+1 like it)" in folded.stdout.splitlines()[0]
    r = run("search", "crimson -stripes", "--index", ix, "-k", "3", "--collapse", "none")
    assert "mapped: crimson -> red 0.80" in r.stderr
    assert [Path(line.split()[-1]).name for line in r.stdout.splitlines()][:2] == [
        "red-0.png", "red-1.png"]
    body = json.loads(run("search", "reds unicorn", "--index", ix, "--json").stdout)
    assert body["words"] == ["red"] and body["unknown"] == ["unicorn"]
    assert body["mapping"][0]["how"] == "inflection"
    r = run("search", "unicorn", "--index", ix, ok=False)
    assert r.exit_code == 2 and "floor" in r.output
    r = run("search", "unicorn", "--index", ix, "--no-mapping", ok=False)
    assert "floor" not in r.output and "vocabulary" in r.output
    # the floor: "nothing relevant" is an answer, not an error
    r = run("search", "red floor:50", "--index", ix)
    assert r.stdout == "" and "nothing scores at least 50" in r.stderr
    assert run("search", "red", "--floor", "50", "--index", ix, "-f").stdout == ""
    r = run("search", "red", "--sort", "date", "--in", str(pictures), "--index", ix, "-k", "2")
    assert len(r.stdout.splitlines()) == 2
    run("search", "red", "--sort", "size", "--index", ix, ok=False)

    # more like this: an indexed picture (its stored vector), a new one (through the model)
    r = run("search", "--like", pictures / "blue-0.png", "--index", ix, "-k", "2", "-f")
    assert [Path(p).name for p in r.stdout.split()] == ["blue-1.png", "blue-2.png"]
    new = tmp_path / "new.png"
    from PIL import Image
    Image.new("RGB", (30, 20), (240, 10, 10)).save(new)
    r = run("search", "--like", new, "--index", ix, "--model", model, "-k", "2", "--json")
    body = json.loads(r.stdout)
    assert body["source"] == "computed by the model" and body["space"] == "text"
    assert all(Path(h["path"]).name.startswith("red") for h in body["hits"])
    r = run("search", "red", "--like", new, "--index", ix, ok=False)
    assert "not both" in r.output


def test_index_interrupted_then_resumed(fake, tmp_path, monkeypatch):
    model, pictures = fake
    system = product.load_system(model)
    calls = []
    real = system.transform_paths

    def interrupted(paths):
        calls.append(paths)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(paths)

    monkeypatch.setattr(system, "transform_paths", interrupted)
    r = run("index", model, pictures, "--index", tmp_path / "ix", "--batch", "4", ok=False)
    assert r.exit_code == 130 and "4 pictures are safely indexed" in r.output
    r = run("index", model, pictures, "--index", tmp_path / "ix", "--json")
    report = json.loads(r.stdout)  # identical pictures count as copies, not recomputed
    assert report["added"] + report["copied"] == 5 and report["unchanged"] == 4


def test_default_index_folder(fake, tmp_path, monkeypatch):
    model, pictures = fake
    run("index", model, pictures)
    assert (tmp_path / "xdg" / "pamir" / "index" / "catalog.sqlite").is_file()
    assert "green" in run("search", "green", "-k", "1").output
    monkeypatch.setenv("PAMIR_INDEX", str(tmp_path / "elsewhere"))
    assert config.default_index_dir() == tmp_path / "elsewhere"


@pytest.mark.parametrize("query, needle", [("", "empty"), ("  ", "empty"),
                                           ("unicorn", "vocabulary"), ("the of", "stop words")])
def test_search_bad_queries(fake, tmp_path, query, needle):
    model, pictures = fake
    run("index", model, pictures, "--index", tmp_path / "ix")
    r = run("search", query, "--index", tmp_path / "ix", ok=False)
    assert r.exit_code == 2 and needle in r.output


def test_search_without_index(tmp_path):
    r = run("search", "red", "--index", tmp_path / "none", ok=False)
    assert r.exit_code == 2 and "pamir index" in r.output


def test_index_bad_folder(fake, tmp_path):
    model, _ = fake
    r = run("index", model, tmp_path / "missing", "--index", tmp_path / "ix", ok=False)
    assert r.exit_code == 2 and "not a folder" in r.output


def test_annotate_and_sidecars(fake, tmp_path):
    model, pictures = fake
    red, blue = pictures / "red-0.png", pictures / "blue-2.png"
    r = run("annotate", model, red, blue, "-k", "2")
    lines = r.stdout.splitlines()
    assert lines[0].startswith(str(red)) and "red" in lines[0].split("\t")[1].split()[0]
    assert {w for w in lines[1].split("\t")[1].split()[::2]} == {"blue", "stripes"}

    # --sidecar writes beside the picture, replaces its own, never someone else's.
    (pictures / "green-0.txt").write_text("my own notes\n")
    r = run("annotate", model, red, pictures / "green-0.png", "--sidecar", "-k", "1")
    assert (pictures / "red-0.txt").read_text() == "red\n"
    assert (pictures / "green-0.txt").read_text() == "my own notes\n"
    assert "did not write" in r.output
    run("annotate", model, red, "--sidecar", "-k", "2")
    assert (pictures / "red-0.txt").read_text().startswith("red, ")
    (pictures / "red-0.txt").write_text("red, edited by hand\n")
    r = run("annotate", model, red, "--sidecar", "-k", "1", "--json")
    assert "edited since" in json.loads(r.stdout)["sidecar"]
    assert (pictures / "red-0.txt").read_text() == "red, edited by hand\n"


def test_annotate_reports_unreadable(fake, tmp_path):
    model, pictures = fake
    bad = pictures / "bad.jpg"
    bad.write_bytes(b"nope")
    r = run("annotate", model, bad, pictures / "missing.png", pictures / "red-1.png", ok=False)
    assert r.exit_code == 1 and "bad.jpg" in r.output and "missing.png" in r.output
    assert "not a picture" in r.output  # the transform's reason, not a second decode
    assert "red-1.png" in r.stdout


@pytest.fixture(scope="module")
def real_model(tmp_path_factory):
    """A real PAMIR system fitted on 60 generated captioned pictures (a few seconds)."""
    from pamir.facts.collection import load_collection
    from pamir.features import FeatureSettings
    from pamir.training import fit_system

    root = tmp_path_factory.mktemp("real")
    table = coloured_pictures(root / "pictures", digits=2)
    settings = FeatureSettings(short_side=48, n_visterms=24, n_colours=8, kmeans_iterations=5,
                               colour_max_pictures=60)
    system = fit_system(load_collection(table), "pamir", settings,
                        {"n_updates": 6_000, "eval_every": 1_000}, progress=False,
                        representation="visterms",  # the product path, not the choice of one
                        cache_dir=root / "cache", log=None, grid={})
    system.save(root / "model")
    return root


def test_fit_index_search_annotate_explain(real_model, tmp_path):
    """The whole path on real features and a real PAMIR: fit -> index -> search -> annotate,
    and the web API's block explanation adds up to the indexed score exactly."""
    from fastapi.testclient import TestClient

    from pamir.server import create_app
    from pamir.system import System

    model, pictures, ix = real_model / "model", real_model / "pictures", tmp_path / "ix"
    r = run("index", model, pictures, "--index", ix, "--captions", pictures / "captions.tsv")
    assert "60 pictures indexed" in r.output

    # Retrieval works: the top pictures for each colour + texture carry both words.
    captions = dict(line.split("\t") for line in
                    (pictures / "captions.tsv").read_text().splitlines()[1:])
    for query in ("red stripes", "blue plain", "yellow"):
        r = run("search", query, "--index", ix, "-k", "3", "-f")
        tops = [Path(p).name for p in r.stdout.split()]
        assert all(set(query.split()) <= set(captions[t].split()) for t in tops), (query, tops)
    # more like this, on the model's text space: the nearest pictures share the caption
    r = run("search", "--like", pictures / "p00.png", "--index", ix, "-k", "3", "-f")
    tops = [Path(p).name for p in r.stdout.split()]
    assert "p00.png" not in tops
    assert sum(captions[t] == captions["p00.png"] for t in tops) >= 2, tops

    # Annotation of a new picture the system never saw.
    new = tmp_path / "new.png"
    a = np.empty((48, 64, 3), np.float32)
    a[:] = COLOURS["green"]
    a += np.random.default_rng(5).normal(0, 12, a.shape)  # as noisy as the training pictures
    a[:, (np.arange(64) // 4) % 2 == 0] = 250
    Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(new)
    r = run("annotate", model, new, "-k", "2", "--json")
    assert {w["word"] for w in json.loads(r.stdout)["keywords"]} == {"green", "stripes"}

    # The index's scores are the system's, and the explanation is exact.
    system = System.load(model, progress=False)
    with TestClient(create_app(ix, system=system)) as client:
        hit = client.get("/api/search", params={"q": "red stripes", "k": 1}).json()["hits"][0]
        Z, _, _ = system.transform_paths([hit["path"]])
        q, _ = system.query_vector("red stripes")
        assert hit["score"] == pytest.approx(float(Z[0] @ q), rel=1e-5)
        ex = client.get(f"/api/pictures/{hit['id']}/explain", params={"q": "red stripes"}).json()
        assert sum(b[4] for b in ex["blocks"]) == pytest.approx(hit["score"], rel=1e-4)
        assert (ex["width"], ex["height"]) == (64, 48)
        p = client.get(f"/api/pictures/{hit['id']}").json()
        assert set(p["caption"]) == {"red", "stripes"}


def test_an_index_refuses_a_model_of_another_representation(real_model, tmp_path):
    """An index built with a visterms model is refused to a CNN model, with a message that
    names both representations and the way out (--rebuild), and nothing indexed is lost."""
    from pamir.facts.collection import load_collection
    from pamir.features import FeatureSettings
    from pamir.training import fit_system

    pictures, ix = real_model / "pictures", tmp_path / "ix"
    cnn_model = tmp_path / "cnn-model"
    fit_system(load_collection(pictures / "captions.tsv"), "pamir", FeatureSettings(),
               {"n_updates": 2_000, "eval_every": 1_000}, progress=False, representation="cnn",
               cache_dir=real_model / "cache", log=None, grid={}).save(cnn_model)
    run("index", real_model / "model", pictures, "--index", ix)
    r = run("index", cnn_model, pictures, "--index", ix, ok=False)
    message = " ".join(r.output.split())
    assert r.exit_code == 2 and "--rebuild" in message
    assert "reads pictures as visterms; this model reads them as cnn" in message
    r = run("search", "red stripes", "--index", ix, "-k", "3", "-f")  # the index still answers
    assert len(r.stdout.split()) == 3
    r = run("index", cnn_model, pictures, "--index", ix, "--rebuild")
    assert "60 pictures indexed" in r.output
