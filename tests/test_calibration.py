"""Calibrated relevance (issue 26): the probabilities, the p: floor in the grammar, the index,
the CLI and the API, saving and loading, and annotation with per-word thresholds."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from pamir.calibration import (Calibration, annotate, expected_calibration_error,
                               load_calibration)
from pamir.cli import app
from pamir.evaluation import annotation_metrics, prediction_metrics
from pamir.calibration.fitting import fit_calibration
from pamir.calibration.thresholds import choose_rule, fit_thresholds, threshold_predictions
from pamir.index import Index, QueryError
from pamir.text.query import QuerySyntaxError, parse
from pamir.server.app import create_app
from pamir.system import System
from pamir.text.vectors import text_vectors

runner = CliRunner()


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def synthetic(n=300, T=6, seed=0):
    """Captions with 1-3 of T words, and text-space vectors that score a picture's own words
    higher, noisily: (Z, Y) with Y (n x T) 0/1."""
    rng = np.random.default_rng(seed)
    Y = np.zeros((n, T))
    for i in range(n):
        Y[i, rng.choice(T, rng.integers(1, 4), replace=False, p=np.linspace(2, 1, T) / np.linspace(2, 1, T).sum())] = 1
    Z = Y + rng.normal(0, 0.6, Y.shape)
    return Z.astype(np.float32), Y


def queries_of(Y):
    """Every word and pair with a relevant picture: (terms, Q vectors, relevance)."""
    T = Y.shape[1]
    terms = [(t,) for t in range(T)] + [(a, b) for a in range(T) for b in range(a + 1, T)]
    R = np.array([Y[:, list(t)].all(axis=1) for t in terms])
    keep = R.any(axis=1)
    terms = [t for t, k in zip(terms, keep) if k]
    B = sp.lil_matrix((len(terms), T))
    for i, t in enumerate(terms):
        B[i, list(t)] = 1
    return terms, text_vectors(B, np.ones(T)), sp.csr_matrix(R[keep].astype(float))


@pytest.fixture(scope="module")
def fitted():
    Z, Y = synthetic()
    terms, Q, R = queries_of(Y)
    return fit_calibration(Z, Q, terms, R, sp.csr_matrix(Y)), Z, Y


def test_probabilities_rise_with_the_score_and_lie_in_0_1(fitted):
    cal, Z, Y = fitted
    assert cal.coef[0] > 0
    s = np.linspace(-5, 5, 201)
    for words in ([0], [5], [1, 3]):
        q = np.zeros(cal.T)
        q[words] = 1 / np.sqrt(len(words))
        p = cal.probability(s, q, words)
        assert np.all((p >= 0) & (p <= 1)) and np.all(np.diff(p) >= 0)
        assert p[-1] - p[0] > 0.5  # not flat
        for level in (0.1, 0.5, 0.9):  # the raw floor of a probability is where it reaches it
            f = cal.score_floor(level, q, words)
            assert cal.probability([f], q, words)[0] == pytest.approx(level, abs=1e-9)
    P = cal.word_probabilities(Z)
    assert P.shape == Z.shape and np.all((P >= 0) & (P <= 1))
    # a word's probability is the one-word query's
    assert P[3, 2] == pytest.approx(cal.probability([Z[3, 2]], np.eye(cal.T)[2], [2])[0])


def test_calibrated_on_held_out_pictures(fitted):
    """Fitted on one draw, the probabilities hold on another (the ECE is small)."""
    cal, _, _ = fitted
    Z, Y = synthetic(seed=1)
    terms, Q, R = queries_of(Y)
    S = np.asarray(Q @ Z.T.astype(np.float64))
    ece, bins = expected_calibration_error(cal.probabilities(Q, terms, S), R.toarray())
    assert ece < 0.03 and sum(b["count"] for b in bins) == R.shape[0] * R.shape[1]
    flat = Calibration([1e-9, 0, 0, 0, 0], -3.0, cal.reference, cal.word_pictures, cal.n_train)
    assert expected_calibration_error(flat.probabilities(Q, terms, S), R.toarray())[0] > ece


def test_a_sample_of_the_non_relevant_pairs_weighted_stays_calibrated():
    """Every relevant pair and a fifth of the others, each weighing five: the probabilities
    hold on another draw as the full fit's do (unweighted, they would be about five times
    too high for the non-relevant pairs' share)."""
    Z, Y = synthetic()
    terms, Q, R = queries_of(Y)
    off = R.shape[0] * R.shape[1] - R.nnz
    cal = fit_calibration(Z, Q, terms, R, sp.csr_matrix(Y), negatives=off // 5)
    assert cal.info["pairs"] == R.nnz + off // 5 and cal.info["positives"] == R.nnz
    Z, Y = synthetic(seed=1)
    terms, Q, R = queries_of(Y)
    P = cal.probabilities(Q, terms, np.asarray(Q @ Z.T.astype(np.float64)))
    assert expected_calibration_error(P, R.toarray())[0] < 0.03
    assert P.mean() == pytest.approx(R.toarray().mean(), rel=0.2)


def test_saved_and_loaded_without_pickle(fitted, tmp_path):
    cal, Z, _ = fitted
    cal.annotation_rule, cal.thresholds = "per-word thresholds", np.linspace(0.2, 0.7, cal.T)
    meta, arrays = cal.to_saved()
    json.dumps(meta)
    assert all(a.dtype != object for a in arrays.values())
    back = Calibration.from_saved(meta, arrays)
    assert np.array_equal(back.word_probabilities(Z), cal.word_probabilities(Z))
    assert back.annotation_rule == cal.annotation_rule
    assert np.array_equal(back.thresholds, cal.thresholds)
    with pytest.raises(ValueError, match="damaged calibration"):
        Calibration.from_saved({k: v for k, v in meta.items() if k != "coef"}, arrays)


def test_the_grammar_reads_a_probability_floor():
    assert parse("tiger p:0.5").p_floor == 0.5
    assert parse("prob:90% tiger").p_floor == pytest.approx(0.9)
    q = parse("tiger floor:0.2 p:0.3 sort:date")
    assert (q.floor, q.p_floor, q.sort) == (0.2, 0.3, "newest")
    assert [t.text for t in parse("tiger p:0.5").terms] == ["tiger"]
    for bad in ("tiger p:2", "tiger p:-0.1", "tiger p:abc"):
        with pytest.raises(QuerySyntaxError):
            parse(bad)


# -------------------------------------------------------------------- a real fitted system

def test_fit_calibrates_and_saves_it(tiny_system):
    _, model, _, _ = tiny_system
    system = System.load(model, progress=False)
    assert system.calibration is not None and system.calibration.T == system.T
    assert system.info["calibration"]["queries"] > 0
    assert load_calibration(model).coef.tolist() == system.calibration.coef.tolist()


def test_a_model_saved_without_calibration_loads_and_searches(tiny_system, tmp_path):
    root, model, pictures, _ = tiny_system
    system = System.load(model, progress=False)
    system.calibration = None
    system.save(tmp_path / "old")
    assert System.load(tmp_path / "old", progress=False).calibration is None
    assert load_calibration(tmp_path / "old") is None and load_calibration(None) is None
    with Index.create(tmp_path / "ix", system.vocabulary, system.idf,
                      model_dir=tmp_path / "old") as ix:
        ix.update([pictures], system.transform_paths)
        hits = ix.search("red", 3)
        assert len(hits) == 3 and all(h.probability is None for h in hits)
        assert ix.count_likely(ix.parse_query("red")) is None
        with pytest.raises(QueryError, match="no calibrated probabilities"):
            ix.search("red p:0.5", 3)


@pytest.fixture(scope="module")
def real_index(tiny_system, tmp_path_factory):
    _, model, pictures, _ = tiny_system
    system = System.load(model, progress=False)
    where = tmp_path_factory.mktemp("calibrated") / "index"
    with Index.create(where, system.vocabulary, system.idf, model_dir=model) as ix:
        ix.update([pictures], system.transform_paths)
    return where, system


def test_the_index_gives_probabilities_and_floors_on_them(real_index):
    where, system = real_index
    with Index.open(where) as ix:
        every = ix.search("red", 60)
        p = np.array([h.probability for h in every])
        assert np.all((p >= 0) & (p <= 1)) and np.all(np.diff(p) <= 0)  # by score: by p
        likely = ix.count_likely(ix.parse_query("red"), 0.5)
        assert likely == int((p >= 0.5).sum())
        kept = ix.search("red p:0.5", 60)
        assert [h.id for h in kept] == [h.id for h in every if h.probability >= 0.5]
        by_date = ix.search("red p:0.5 sort:date", 60)
        assert sorted(h.id for h in by_date) == sorted(h.id for h in kept)
        assert ix.search("red p:1", 60) == []
        assert len(ix.search("red p:0", 60)) == len(every)
        # the floor is at least as high as a raw floor given beside it
        assert len(ix.search("red p:0.5 floor:1e9", 60)) == 0


def test_the_cli_prints_probabilities_and_floors(real_index):
    where, _ = real_index
    r = runner.invoke(app, ["search", "red", "--index", str(where), "-k", "60", "--json"])
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    probs = [h["probability"] for h in body["hits"]]
    assert all(0 <= p <= 1 for p in probs) and body["likely"] == sum(p >= 0.5 for p in probs)
    r = runner.invoke(app, ["search", "red p:0.5", "--index", str(where), "-k", "60", "--json"])
    assert [h["probability"] >= 0.5 for h in json.loads(r.stdout)["hits"]] == \
        [True] * body["likely"]
    r = runner.invoke(app, ["search", "red", "--p", "0.5", "--index", str(where), "-k", "60",
                            "-f"])
    assert len(r.stdout.split()) == body["likely"]
    r = runner.invoke(app, ["search", "red", "--index", str(where), "-k", "2"])
    assert " p 0." in r.stdout or " p 1." in r.stdout
    assert "likely relevant" in r.output
    r = runner.invoke(app, ["search", "red p:7", "--index", str(where)])
    assert r.exit_code != 0 and "between 0 and 1" in r.output


def test_the_api_gives_probabilities_and_likely_ones_first(real_index):
    where, system = real_index
    with TestClient(create_app(where, system=system)) as client:
        body = client.get("/api/search", params={"q": "red", "k": 60}).json()
        hits = body["hits"]
        assert body["likely"] == sum(h["likely"] for h in hits) > 0
        assert all(0 <= h["probability"] <= 1 for h in hits)
        floored = client.get("/api/search", params={"q": "red", "p": 0.5, "k": 60}).json()
        assert len(floored["hits"]) == body["likely"]
        assert client.get("/api/search", params={"q": "red p:0.5", "k": 60}).json()["hits"] \
            == floored["hits"]
        dated = client.get("/api/search", params={"q": "red sort:date", "k": 60}).json()["hits"]
        n = body["likely"]
        assert all(h["likely"] for h in dated[:n]) and not any(h["likely"] for h in dated[n:])
        assert client.get("/api/search", params={"q": "red", "p": 2}).status_code == 422
        pid = hits[0]["id"]
        kw = client.get(f"/api/pictures/{pid}").json()["keywords"]
        assert all(0 <= k["probability"] <= 1 for k in kw if "score" in k)


# ---------------------------------------------------------------------------- annotation

def test_prediction_metrics_agree_with_the_top_k_rule():
    Z, Y = synthetic(n=120)
    top = np.argsort(-Z, axis=1, kind="stable")[:, :2]
    pred = np.zeros(Y.shape, bool)
    np.put_along_axis(pred, top, True, axis=1)
    a, b = annotation_metrics(Z, Y, 2), prediction_metrics(pred, Y)
    assert a["f1"] == b["f1"] and a["n_plus"] == b["n_plus"]


def test_per_word_thresholds_are_chosen_on_validation(fitted):
    cal, Z, Y = fitted
    P = cal.word_probabilities(Z)
    th = fit_thresholds(P, Y)
    assert th.shape == (cal.T,) and np.all((th > 0) & (th < 1))
    pred = threshold_predictions(P, th)
    assert prediction_metrics(pred, Y)["f1"] >= prediction_metrics(
        threshold_predictions(P, np.full(cal.T, 0.95)), Y)["f1"]
    rule, metrics = choose_rule(P, Z, Y, n_words=5)
    assert rule in metrics and metrics[rule]["f1"] == max(m["f1"] for m in metrics.values())
    cal.annotation_rule, cal.thresholds = "per-word thresholds", th
    words = annotate(cal, Z[:4], [f"w{t}" for t in range(cal.T)])
    for row, z, p in zip(words, Z[:4], P[:4]):
        assert {w for w, _, _ in row} == {f"w{t}" for t in np.flatnonzero(p >= th)}
        assert [x[2] for x in row] == sorted((x[2] for x in row), reverse=True)
    plain = annotate(None, Z[:2], [f"w{t}" for t in range(cal.T)], 3)
    assert all(len(r) == 3 and r[0][2] is None for r in plain)
