"""Issue 24: racing the grid (successive halving) chooses what the full loop chooses where the
answer is clear, decides its rungs by validation scores only (not by which thread ran first),
and a candidate whose every point is raced out leaves the choice to the others."""

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from pamir import config
from pamir.training.selection import select
from pamir.training.race import Eliminated, Race, default_point, guarded_choice
from pictures import vectors


@pytest.fixture(scope="module")
def data():
    Xt, Yt = vectors(300, 0)
    Xv, Yv = vectors(80, 1)
    return Xt, Yt, Xv, Yv


def fake_race(curves, workers, finalists=2, jitter=0, protect=()):
    """Run fake fits under a Race with rungs after 200 and 300 of 400 updates: fit i reports
    curves[i][j] at update 100 (j + 1); returns {i: 'done' or the update it was raced out
    at}, and the largest number of fits that computed at once."""
    race = Race(len(curves), workers, (0.5, 0.75), finalists,
                protect=[(0, i, 0) for i in protect])
    busy, most, lock = [0], [0], threading.Lock()
    rng = random.Random(jitter)
    pauses = [[rng.random() * 0.002 * jitter for _ in c] for c in curves]

    def fit(i, check):
        for j, avgp in enumerate(curves[i]):
            with lock:
                busy[0] += 1
                most[0] = max(most[0], busy[0])
            time.sleep(pauses[i][j])
            with lock:
                busy[0] -= 1
            check(100 * (j + 1), 400, avgp)
        return "done"

    def one(i):
        try:
            return race.run((0, i, 0), lambda check: fit(i, check), 400, 100)
        except Eliminated:
            return race.entries[(0, i, 0)].out_at

    with ThreadPoolExecutor(len(curves)) as pool:
        out = dict(enumerate(pool.map(one, range(len(curves)))))
    return out, most[0]


def test_the_race_halves_the_field_at_each_rung_by_score_whatever_the_threads():
    # six fits: 6 -> 3 at 200 updates (best so far), 3 -> 2 at 300
    curves = [[0.10, 0.20, 0.30, 0.40],   # a slow starter: out at 200
              [0.50, 0.58, 0.59, 0.60],   # kept at 200, the worst of three at 300
              [0.40, 0.60, 0.70, 0.80],   # a finalist
              [0.30],                     # ended early (patience), below the half: out
              [0.45, 0.55, 0.90, 0.95],   # a finalist
              [0.45, 0.55, 0.99, 0.99]]   # ties fit 4 at 200, the later key: out
    expected = {0: 200, 1: 300, 2: "done", 3: "done", 4: "done", 5: 200}
    for workers in (1, 2, 3):
        for jitter in (0, 1, 2):
            out, most = fake_race(curves, workers, jitter=jitter)
            assert out == expected, (workers, jitter)
            assert most <= workers  # the tokens bound the fits computing at once


def test_a_fit_that_ended_early_but_leads_stays_in_and_the_finalists_run_to_the_end():
    curves = [[0.9], [0.1, 0.2, 0.3, 0.4], [0.2, 0.3, 0.4, 0.5]]
    assert fake_race(curves, 2)[0] == {0: "done", 1: 200, 2: "done"}
    assert fake_race(curves, 2, finalists=1)[0] == {0: "done", 1: 200, 2: 300}
    # a protected fit (the default point, which the guard compares with) is never out
    assert fake_race(curves, 2, finalists=1, protect=[1])[0] == {0: "done", 1: "done",
                                                                 2: "done"}


def test_the_guard_keeps_the_default_unless_another_wins_beyond_the_noise():
    rng = np.random.default_rng(0)
    base = rng.random(60)
    noisy = base + rng.normal(0, 0.2, 60) + 0.01   # a higher mean, by chance
    better = np.minimum(base + 0.15 + rng.normal(0, 0.02, 60), 1.0)
    best = np.minimum(base + 0.3 + rng.normal(0, 0.02, 60), 1.0)
    assert noisy.mean() > base.mean()
    assert guarded_choice([noisy, base], 1) == 1          # its gain is noise: the default
    assert guarded_choice([noisy, base, better], 1) == 2  # a real gain
    assert guarded_choice([best, base, better], 1) == 0   # the best mean of the real gains
    assert guarded_choice([None, base, better], 1) == 2   # a raced-out point is no candidate
    # the default: the last representation's point with the model's own parameters
    points = [("cnn", (1.0,), {"c": 0.1}), ("a+b", (1.0, 1.0), {"c": 0.01}),
              ("a+b", (1.0, 1.0), {"c": 0.1}), ("a+b", (1.0, 1.0), {"c": 1.0})]
    assert default_point(points, "pamir") == 2
    assert default_point(points[:2], "pamir") is None  # no point has the defaults


def test_a_small_validation_split_keeps_the_default_point(data, monkeypatch):
    monkeypatch.setattr(config, "SMALL_VALIDATION", 200)  # off by default (measured)
    # 80 validation pictures (< config.SMALL_VALIDATION): c = 0.1 (PAMIR's default) stays
    # unless c = 1.0 beats it beyond the noise; raced or not, the same choice
    params = {"n_updates": 4_000, "eval_every": 250, "patience": None}
    grid = {"c": [1e-5, 0.1, 1.0]}
    plain = select("pamir", *data, params=params, grid=grid, log=None, race=False,
                   guard=False)
    guarded = [select("pamir", *data, params=params, grid=grid, log=None, race=race)
               for race in (False, None)]
    assert guarded[0].chosen == guarded[1].chosen
    assert guarded[1].trials[1].per_query is not None  # the default was not raced out
    chosen = guarded[0].chosen["c"]
    assert chosen == 0.1 or plain.chosen["c"] == chosen


def test_raced_selection_picks_the_point_of_the_full_loop(data, monkeypatch):
    # c = 1e-4 barely moves W in 4,000 updates: the answer is clear
    grid = {"c": [1e-4, 3e-4, 0.1, 1.0]}
    params = {"n_updates": 4_000, "eval_every": 250, "patience": None}
    full = select("pamir", *data, params=params, grid=grid, log=None, race=False)
    runs = []
    for workers in (1, 2):
        monkeypatch.setattr(config, "FIT_WORKERS", workers)
        runs.append(select("pamir", *data, params=params, grid=grid, log=None))
    raced = runs[0]
    assert full.chosen["c"] in (0.1, 1.0)
    assert raced.chosen == full.chosen
    assert np.array_equal(raced.model.W_, full.model.W_)  # the winner ran to its end
    assert raced.valid_avgp == full.valid_avgp
    out = [t.stopping.get("raced_out") for t in raced.trials]
    assert out[:2] == [250, 250] and out[2:] == [None, None]  # 4 -> 2 at 1/16 of 4,000
    # deterministic whatever the threads: the same trials, scores and curves
    assert [t.as_dict() | {"seconds": 0} for t in runs[0].trials] == \
        [t.as_dict() | {"seconds": 0} for t in runs[1].trials]
    assert np.array_equal(runs[0].model.W_, runs[1].model.W_)


def test_a_selection_raced_out_by_another_has_no_model(data):
    params = {"n_updates": 4_000, "eval_every": 250, "patience": None}
    race = Race(4, 2)
    with ThreadPoolExecutor(2) as pool:
        weak, strong = pool.map(
            lambda lane: select("pamir", *data, params=params, log=None, race=race,
                                race_lane=lane, grid={"c": [[1e-5, 2e-5], [0.1, 1.0]][lane]}),
            (0, 1))
    assert weak.model is None and all("raced_out" in t.stopping for t in weak.trials)
    assert strong.model is not None and weak.valid_avgp < strong.valid_avgp
