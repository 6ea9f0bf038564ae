"""fit_system's request as one record (FitSettings) and the plan phase, which takes the
collection's rows once."""

from dataclasses import FrozenInstanceError

import numpy as np
import pytest

from pamir.training import FitSettings
from pamir.training.plan import plan


def test_an_old_call_maps_onto_the_record():
    s = FitSettings.of(None, "cmrm", None, {"alpha": 0.1}, True, retrain=True, ensemble=1)
    assert (s.model, s.model_params, s.progress, s.retrain) == ("cmrm", {"alpha": 0.1}, True,
                                                               True)
    assert FitSettings.of().model == "pamir" and FitSettings.of().neighbours is None


def test_keywords_change_a_given_record_and_nothing_else():
    base = FitSettings(representation="cnn", time_budget=60.0)
    changed = FitSettings.of(base, retrain=True)
    assert changed.retrain and changed.representation == "cnn" and changed.time_budget == 60.0
    assert not base.retrain  # the record is not changed
    with pytest.raises(FrozenInstanceError):
        base.retrain = True
    with pytest.raises(TypeError, match="unknown setting colour"):
        FitSettings.of(base, colour="red")
    with pytest.raises(TypeError, match="not both"):
        FitSettings.of(base, "pamir")


def test_the_plan_takes_the_collections_rows_once(corel_root):
    from pamir.data import load_corel5k

    collection = load_corel5k(corel_root)
    fitting = plan(collection, FitSettings(representation="visterms", grid={}, log=None))
    p = fitting.protocol
    assert not hasattr(fitting, "collection")  # no later phase reads the collection
    assert fitting.name == collection.name and fitting.ids == list(collection.ids)
    assert fitting.paths[p.train[0]] == str(collection.paths[p.train[0]])
    for idx in (p.train, p.valid[::7], np.sort(np.concatenate([p.train[:50], p.valid]))):
        got, want = fitting.presence(idx), p.presence(idx)
        assert (got != want).nnz == 0 and got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got.indices, want.indices)  # the same rows, in the same order
    assert fitting.candidates == [("visterms", (1.0,))]
