"""Issue 24: concurrent selection chooses as the sequential loop did, a fit is deterministic
whatever the number of threads, the validation cap is seeded and recorded, and the fast AvgP
is the metrics' AvgP."""

import numpy as np
import pytest
import scipy.sparse as sp

from pamir import config
from pamir.evaluation.metrics import average_precision, average_precision_pessimistic
from pamir.features import FeatureSettings
from pamir.models.base import TrainingQueries
from pamir.models.pamir import PAMIR
from pamir.training.selection import select
from pamir.system import System
from pamir.training import fit_system
from pictures import LOOKS, striped_collection, vectors

SETTINGS = FeatureSettings(short_side=48, n_visterms=24, n_colours=8, kmeans_iterations=5,
                           colour_max_pictures=60)


@pytest.fixture(scope="module")
def data():
    Xt, Yt = vectors(300, 0)
    Xv, Yv = vectors(80, 1)
    return Xt, Yt, Xv, Yv


def test_concurrent_selection_picks_the_point_of_the_sequential_loop(data, monkeypatch):
    # 5 updates against 3,000: the answer is clear
    grid = {"n_updates": [5, 3_000], "c": [0.1, 1.0]}
    runs = {}
    for workers in (1, 2):
        monkeypatch.setattr(config, "FIT_WORKERS", workers)
        sel = select("pamir", *data, params={"eval_every": 500}, grid=grid, seeds=[0, 1],
                     log=None)
        runs[workers] = sel
    one, two = runs[1], runs[2]
    assert one.chosen["n_updates"] == 3_000
    assert one.chosen == two.chosen
    assert [t.per_seed for t in one.trials] == [t.per_seed for t in two.trials]
    assert np.array_equal(one.model.W_, two.model.W_)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return striped_collection(tmp_path_factory.mktemp("pictures"), LOOKS, 90, (48, 72), 0, 3)


def untimed(value):
    """A record without its seconds (which differ from run to run; nothing else may)."""
    if isinstance(value, list):
        return [untimed(v) for v in value]
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if "seconds" not in k}
    return value


def test_a_fit_is_deterministic_whatever_the_concurrency(folder, tmp_path, monkeypatch):
    monkeypatch.setattr(config, "SMALL_VALIDATION", 200)  # the guard on, raced with the rest
    kw = dict(progress=False, cache_dir=tmp_path / "cache", log=None, ensemble=2, retrain=True,
              representation=["visterms", "visterms+visterms"])
    params = {"n_updates": 2_000, "eval_every": 500}
    systems = []
    for workers in (1, 2, 1):
        monkeypatch.setattr(config, "FIT_WORKERS", workers)
        systems.append(fit_system(folder, "pamir", SETTINGS, params, **kw))
    first = systems[0]
    for other in systems[1:]:
        assert np.array_equal(first.model.W_, other.model.W_)
        for key in ("representation", "params", "valid_avgp", "grid", "representations"):
            assert untimed(first.info[key]) == untimed(other.info[key]), key
    assert systems[1].info["fit_workers"] == 2 and first.info["fit_workers"] == 1
    # raced, and guarded (a small validation split): the default point's record
    assert first.info["raced"] is True
    assert first.info["selection_rule"] == {
        "rule": "guarded", "alpha": config.GUARD_ALPHA,
        "default": {"representation": "visterms+visterms", "params": {"c": 0.1}}}
    assert set(first.info["timing"]) == {"features", "selection", "ensemble", "retrain"}


def test_the_validation_cap_is_seeded_and_recorded(data, folder, tmp_path):
    Xt, Yt, Xv, Yv = data
    everything = TrainingQueries(Yv)
    capped = [PAMIR(n_updates=1_000, eval_every=250, max_valid_queries=7).fit(
        Xt, Yt, validation=(Xv, Yv)) for _ in range(2)]
    assert capped[0].valid_queries_ == [7, len(everything)] and len(everything) > 7
    # the same sample both times: the same validation scores (history's last column is time)
    assert [r[:4] for r in capped[0].history_] == [r[:4] for r in capped[1].history_]
    assert np.array_equal(capped[0].W_, capped[1].W_)
    # the sample is a seeded choice of rows, in order, and the cap changes what is scored
    sample = everything.sample(7, config.VALID_QUERY_SEED)
    assert sample.total == len(everything) and len(sample) == 7
    assert (sample.relevance != everything.sample(7, config.VALID_QUERY_SEED).relevance).nnz == 0
    full = PAMIR(n_updates=1_000, eval_every=250, max_valid_queries=None).fit(
        Xt, Yt, validation=(Xv, Yv))
    assert full.valid_queries_ == [len(everything), len(everything)]
    assert [r[1] for r in full.history_] != [r[1] for r in capped[0].history_]
    with pytest.raises(ValueError, match="max_valid_queries"):
        PAMIR(max_valid_queries=0).fit(Xt, Yt)

    # recorded in the saved system: the model's parameter and what it scored
    system = fit_system(folder, "pamir", SETTINGS, {"n_updates": 1_000, "eval_every": 500,
                                                    "max_valid_queries": 3},
                        progress=False, cache_dir=tmp_path / "cache", log=None, grid={},
                        representation="visterms")
    assert system.info["valid_queries"]["scored"] == 3
    assert system.info["valid_queries"]["seed"] == config.VALID_QUERY_SEED
    # and what the validation cost: its seconds and their share of the chosen fit
    cost = system.info["valid_queries"]
    assert cost["seconds"] > 0 and 0 < cost["share"] < 1
    assert cost["share"] == pytest.approx(cost["seconds"] / (
        cost["seconds"] + system.model.train_seconds_), abs=1e-3)
    system.save(tmp_path / "m")
    back = System.load(tmp_path / "m", cache_dir=tmp_path / "cache", progress=False)
    assert back.model.max_valid_queries == 3 and back.model.valid_queries_[0] == 3


def test_the_fast_avgp_is_the_metrics_avgp():
    rng = np.random.default_rng(0)
    for trial in range(60):
        n, m = rng.integers(2, 50), rng.integers(1, 30)
        # ties on purpose every other trial: pessimistic ties must agree too
        S = (rng.integers(0, 4, (m, n)).astype(float) if trial % 2 else rng.normal(size=(m, n)))
        R = sp.csr_matrix(rng.random((m, n)) < 0.2)
        assert np.allclose(average_precision_pessimistic(S, R),
                           average_precision(S, R, ties="pessimistic"))


def test_a_spent_time_budget_keeps_the_best_model_found_and_says_so(folder, tmp_path):
    kw = dict(progress=False, cache_dir=tmp_path / "cache", log=None, representation="visterms")
    params = {"n_updates": 50_000, "eval_every": 500}
    # a budget spent before the first fit: each fit stops after its first evaluation, and
    # neither the ensemble nor the retraining runs
    system = fit_system(folder, "pamir", SETTINGS, params, ensemble=2, retrain=True,
                        time_budget=0.0, **kw)
    budget = system.info["budget"]
    assert budget["reached"] and budget["skipped"] == ["ensemble", "retrain"]
    assert budget["fits_stopped"] == 3
    assert all(t["n_updates"] == 500 and t["out_of_time"] for t in system.info["grid"])
    assert not system.info["retrained"] and system.info["ensemble"] is None
    roomy = fit_system(folder, "pamir", SETTINGS, {"n_updates": 1_000, "eval_every": 500},
                       grid={}, time_budget=600.0, **kw)
    assert roomy.info["budget"] == {"seconds": 600.0, "skipped": [], "fits_stopped": 0,
                                    "reached": False}
    assert "out_of_time" not in roomy.info["grid"][0]
