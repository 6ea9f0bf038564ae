"""The one selection loop: grids, seeds, and `pamir fit` choosing as the benchmarks do."""

import json

import numpy as np
import pytest
import scipy.sparse as sp
from typer.testing import CliRunner

from pamir.cli import app
from pamir.features import FeatureSettings
from pamir.models import MODELS, model_class
from pamir.protocol import Protocol
from pamir.training.selection import grid_points, model_grid, select
from pamir.training import collection_inputs, fit_system, grid_reading
from pictures import LOOKS, striped_collection

SETTINGS = FeatureSettings(short_side=48, n_visterms=24, n_colours=8, kmeans_iterations=5,
                           colour_max_pictures=60)

#: Small settings and grids so that every kind is selected in seconds; each grid has two or
#: more points, so the choice is a real one.
FAST = {
    "pamir": ({"n_updates": 3_000, "eval_every": 500}, None),
    "kernel-pamir": ({"n_updates": 2_000, "eval_every": 500}, None),
    "cmrm": ({}, {"alpha": [0.1, 0.5], "beta": [0.3, 0.9], "mode": ["pacmrm", "drcmrm"]}),
    "cmtt": ({}, {"n_components": [2, 5], "normalise": ["terms", "visterms"]}),
    "plsa": ({"n_iter_text": 10, "n_iter_visual": 10}, {"n_aspects": [2, 4],
                                                         "output": ["probability", "log"]}),
    "svm": ({"Cs": [0.1, 1.0], "n_jobs": 1}, None),
    "bbnn": ({"max_triplets": 600, "eval_every": 200, "n_hidden1": 8, "n_hidden2": 8},
             {"learning_rate": [0.5, 1.0]}),
}


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    return striped_collection(tmp_path_factory.mktemp("pictures"), LOOKS, 80, (48, 64), 1, 2)


def test_every_grid_key_is_a_parameter_and_models_lists_them():
    r = CliRunner().invoke(app, ["models", "--json"])
    assert r.exit_code == 0, r.output
    described = json.loads(r.output)
    assert set(described) == set(MODELS)
    for kind, d in described.items():
        grids = d["grid"] if isinstance(d["grid"], list) else [d["grid"]]
        for grid in grids:
            assert set(grid) <= set(d["params"]), kind
        assert d["params"] == json.loads(json.dumps(model_class(kind).default_params(),
                                                    default=list))
    assert "n_aspects" in described["plsa"]["grid"]
    assert "n_components" in described["cmtt"]["grid"]
    assert {"sigma", "ridge"} <= {k for g in described["kernel-pamir"]["grid"] for k in g}


def test_grids_points_and_fixed_parameters():
    assert grid_points({"a": [1, 2], "b": ["x"]}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]
    assert grid_points([{"a": [1]}, {"b": [2, 3]}]) == [{"a": 1}, {"b": 2}, {"b": 3}]
    assert model_grid("kernel-pamir", {"kernel": "match", "c": 1.0}) == [
        {"sigma": [8.0, 16.0, 32.0, 64.0]}]
    with pytest.raises(ValueError, match="unknown parameter bogus"):
        select("pamir", sp.eye(3), sp.eye(3), sp.eye(3), sp.eye(3), params={"bogus": 1})
    with pytest.raises(ValueError, match="aggressiveness"):
        select("pamir", sp.eye(3), sp.eye(3), sp.eye(3), sp.eye(3), params={"c": -1})


def test_seeds_are_averaged(collection, tmp_path):
    protocol = Protocol(collection)
    X, ok, _ = collection_inputs(collection, protocol, "visterms", SETTINGS,
                                 cache_dir=tmp_path, progress=False, log=None)
    tr, va = protocol.train, protocol.valid
    sel = select("pamir", X[tr], protocol.presence(tr), X[va], protocol.presence(va),
                 params={"n_updates": 2_000, "eval_every": 500}, grid={"c": [0.1]},
                 seeds=[0, 1, 2], log=None)
    (trial,) = sel.trials
    assert len(trial.per_seed) == 3 and trial.valid_avgp == pytest.approx(np.mean(trial.per_seed))


@pytest.mark.parametrize("kind", list(MODELS))
def test_fit_chooses_what_the_selection_loop_chooses(collection, kind, tmp_path):
    """`pamir fit` and the benchmarks both call pamir.training.selection.select; on the same features
    they must choose the same point, for every kind."""
    params, grid = FAST[kind]
    system = fit_system(collection, kind, SETTINGS, params, progress=False, grid=grid,
                        cache_dir=tmp_path, log=None,
                        representation="blocks" if kind == "bbnn" else "visterms")
    protocol = Protocol(collection)
    name = "blocks" if kind == "bbnn" else "visterms"
    F, ok, _ = collection_inputs(collection, protocol, name, SETTINGS, cache_dir=tmp_path,
                                 progress=False, log=None)
    tr, va = protocol.train, protocol.valid
    cls = model_class(kind)
    sel = select(cls, F.take(tr) if kind == "bbnn" else F[tr], protocol.presence(tr),
                 F.take(va) if kind == "bbnn" else F[va], protocol.presence(va),
                 params=params, grid=grid_reading(cls, params, grid, name), log=None)
    assert len(sel.trials) >= 2
    assert system.info["params"] == sel.params
    assert system.info["valid_avgp"] == pytest.approx(sel.valid_avgp, abs=1e-3)
