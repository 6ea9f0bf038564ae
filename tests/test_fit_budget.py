"""Issue 35: `pamir fit`'s update budget grows with the training pictures and is recorded in
the model; a small folder skips the candidates that cannot pay, and says so."""

import json
from types import SimpleNamespace

import numpy as np
import pytest

from pamir.features import FeatureSettings
from pamir.models.pamir import (BUDGET_EVALUATIONS, BUDGET_MAX_UPDATES, BUDGET_MIN_UPDATES,
                                PAMIR)
from pamir.system import System
from pamir.training import (SMALL_FOLDER_PICTURES, fit_system, representation_candidates,
                            small_folder_candidates)
from pictures import LOOKS, striped_collection

SETTINGS = FeatureSettings(short_side=48, n_visterms=24, n_colours=8, kmeans_iterations=5,
                           colour_max_pictures=60)


def test_the_budget_grows_with_the_training_pictures():
    corel = PAMIR.update_budget(4_000)
    assert corel == {"n_updates": 4_000_000, "eval_every": 100_000}  # today's, on Corel 5k
    small, mid = PAMIR.update_budget(270), PAMIR.update_budget(1_350)
    assert small["n_updates"] < mid["n_updates"] < corel["n_updates"]
    assert small["n_updates"] == 270_000
    for b in (small, mid, corel):  # the checkpoints (and the race's rungs) scale with it
        assert b["n_updates"] / b["eval_every"] == pytest.approx(BUDGET_EVALUATIONS, abs=1)
    assert PAMIR.update_budget(3)["n_updates"] == BUDGET_MIN_UPDATES
    assert PAMIR.update_budget(10**6)["n_updates"] == BUDGET_MAX_UPDATES


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return striped_collection(tmp_path_factory.mktemp("pictures"), LOOKS, 90, (48, 72), 0, 3)


def test_pamir_fit_records_the_budget_it_scaled(folder, tmp_path):
    kw = dict(progress=False, cache_dir=tmp_path / "cache", log=None, grid={},
              representation="visterms")
    system = fit_system(folder, "pamir", SETTINGS, {"patience": 2}, **kw)
    n_train = system.info["pictures"]["train"]
    budget = PAMIR.update_budget(n_train)
    assert system.model.n_updates == budget["n_updates"] < 4_000_000
    assert system.model.eval_every == budget["eval_every"]
    system.save(tmp_path / "m")
    saved = json.loads((tmp_path / "m" / "model.json").read_text())["info"]["updates"]
    assert saved == {**budget, "train_pictures": n_train, "scaled": ["eval_every", "n_updates"]}
    # what the caller fixes stays fixed, and the record says so
    fixed = fit_system(folder, "pamir", SETTINGS, {"n_updates": 3_000, "patience": 2}, **kw)
    assert fixed.model.n_updates == 3_000
    assert fixed.info["updates"]["scaled"] == ["eval_every"]
    assert System.load(tmp_path / "m", cache_dir=tmp_path / "cache",
                       progress=False).info["updates"] == saved


def test_a_small_folder_fits_the_richest_representation_alone():
    candidates = representation_candidates("pamir")
    small = SimpleNamespace(development=np.arange(300))
    left_out = small_folder_candidates(candidates, None, None, small)
    assert left_out["what"] == [name for name, _ in candidates[:-1]]
    assert "300 captioned pictures" in left_out["why"]
    # enough pictures, representations the caller named, or features given: all run
    enough = SimpleNamespace(development=np.arange(SMALL_FOLDER_PICTURES))
    assert small_folder_candidates(candidates, None, None, enough) is None
    assert small_folder_candidates(candidates, ["cnn", "visterms"], None, small) is None
    assert small_folder_candidates([(None, None)], None, (1, 2, 3), small) is None
