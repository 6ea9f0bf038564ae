"""Model selection: the one loop over a model's validation grid, seeds and early stopping.

    sel = select("pamir", X_train, Y_train, X_valid, Y_valid)       # the model's own grid
    sel.model, sel.params, sel.valid_avgp                           # the winner, fitted
    for t in sel.trials: print(t.params, t.valid_avgp)             # every point, in order

Every point of the grid is fitted on the training pictures, with the validation pictures
given to `fit` (PAMIR, kernel PAMIR and BBNN early-stop on them; the SVMs choose C per word on
them), and scored by its validation mean AvgP over the validation queries (every subset of a
validation caption, weighted with the training idf), ranked the way the model ranks at test
time (`score_queries` where a model has it, Z q otherwise). The best mean over `seeds` wins;
an exact tie goes to the earlier point. `pamir fit` and every benchmark call this, so they
choose alike.

A model's grid is its `param_grid` (a dict, or a list of dicts for sub-grids, as kernel PAMIR
has one per kernel). Parameters the caller fixes drop out of it, and sub-grids that list other
values for them are left out. `selection_params` of a model class apply while selecting only
(BBNN trains fewer triplets per point) unless the caller fixes them; the chosen point is then
fitted with its full settings.

Grid points (and seeds) are fitted concurrently and may be raced, and a small validation
split keeps the default point unless another beats it beyond the noise: `race.py` (the race,
its pools and the guard). The validation queries a point is scored on are capped at
config.VALID_MAX_QUERIES (a sample seeded by config.VALID_QUERY_SEED), as PAMIR's early
stopping caps them.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from .. import config
from ..evaluation import evaluate_model
from ..features.registry import as_matrix
from ..models import MODELS, model_class
from ..models.base import TextSpaceModel, TrainingQueries, training_queries
from ..progress import FitDisplay, progress_callback
from ..text.vectors import idf as idf_weights
from .race import (Eliminated, Race, as_class, fit_pool, fit_workers, given_pool,
                   guarded_choice, plan_race, race_threads)


@dataclass
class Trial:
    """One grid point: its parameters, validation AvgP (percent; the mean over seeds, and
    each seed's), seconds, and where early stopping kept the weights."""

    params: dict
    valid_avgp: float
    per_seed: list[float]
    seconds: float
    stopping: dict = field(default_factory=dict)
    #: AvgP (fraction) per validation query of the first seed's model (None: raced out)
    per_query: np.ndarray | None = field(default=None, repr=False)

    def as_dict(self) -> dict:
        return {"params": self.params, "valid_avgp": round(self.valid_avgp, 3),
                "per_seed": [round(v, 3) for v in self.per_seed],
                "seconds": round(self.seconds, 2)} | self.stopping


@dataclass
class Selection:
    """The winner of a selection: `model` fitted on train (the first seed), `params` all its
    parameters, `valid_avgp` (percent), and every trial. `model` is None when every point
    lost in a race shared with other selections (pamir.training's candidates): `valid_avgp`
    is then the best any reached before it lost."""

    model: TextSpaceModel
    params: dict
    valid_avgp: float
    trials: list[Trial]
    #: every trial's fitted model (the first seed's), None where it was raced out
    models: list = field(default_factory=list, repr=False)

    @property
    def chosen(self) -> dict:
        """The values the grid chose (the parameters that varied)."""
        varied = {k for t in self.trials for k in t.params}
        return {k: v for k, v in self.params.items() if k in varied}

    def refit_params(self) -> dict:
        """Settings to train again without validation data (on train + valid): the chosen
        parameters plus where the model stopped (PAMIR's `refit_params_`)."""
        return {**self.params, **getattr(self.model, "refit_params_", {})}


def model_grid(model, fixed: dict | None = None) -> list[dict]:
    """The sub-grids of a model's `param_grid`, without the parameters in `fixed` (sub-grids
    that list other values of a fixed parameter are dropped)."""
    grid = as_class(model).param_grid
    fixed = fixed or {}
    out = []
    for sub in grid if isinstance(grid, list) else [grid]:
        if any(k in sub and fixed[k] not in sub[k] for k in fixed):
            continue
        out.append({k: list(v) for k, v in sub.items() if k not in fixed})
    return out or [{}]


def grid_points(grid: dict | list[dict]) -> list[dict]:
    """Every combination of a grid (a dict of lists, or a list of such sub-grids), in order."""
    points = []
    for sub in grid if isinstance(grid, list) else [grid]:
        keys = list(sub)
        points += [dict(zip(keys, values)) for values in itertools.product(*sub.values())]
    return points


def check_points(model, params: dict, points: list[dict]) -> None:
    """Every point's parameters are the model's and valid: said before any feature is
    computed, not after minutes of extraction."""
    cls = as_class(model)
    known = cls.default_params()
    for point in points:
        merged = {**params, **point}
        unknown = sorted(set(merged) - set(known))
        if unknown:
            raise ValueError(f"{cls.kind}: unknown parameter {', '.join(unknown)}; its "
                             f"parameters are {', '.join(known)}")
        m = cls(**merged)
        if hasattr(m, "_check_params"):
            m._check_params()


def validation_avgp(model, X, queries: TrainingQueries) -> float:
    """Mean AvgP (fraction) of a fitted model on pictures X, ranked as at test time."""
    return float(validation_per_query(model, X, queries).mean())


def validation_per_query(model, X, queries: TrainingQueries) -> np.ndarray:
    """AvgP (fraction) of each validation query, ranked as at test time."""
    return evaluate_model(model, X, queries.vectors, queries.relevance,
                          curve=False).per_query["avgp"]


def validation_queries(Y_valid, Y_train, most=config.VALID_MAX_QUERIES) -> TrainingQueries:
    """The validation queries a fit is scored on: every subset of a validation caption,
    weighted with the training idf, at most `most` of them (seeded sample)."""
    queries = training_queries(Y_valid, idf_weights=idf_weights(Y_train))
    return queries.sample(most, config.VALID_QUERY_SEED)


# select is longer than the 80 lines a function here keeps to: its fits (fit_point, scored)
# are closures over the one grid's data, prepared pictures and race, which split into
# functions would each take a dozen arguments; the race and guard are set up apart
# (plan_race), and a fit and its report (_fit, stopping) are functions of their own.
def select(model, X_train, Y_train, X_valid, Y_valid, *, params: dict | None = None,
           grid: dict | list | None = None, seeds=None, log=print,
           progress: bool = False, executor=None, label: str = "",
           race: "Race | bool | None" = None, race_lane: int = 0,
           guard: bool | None = None, X_valid_fit=None) -> Selection:
    """Choose a model's parameters on validation (module docstring).

    params: fixed parameters (they drop out of the grid). grid: the grid to search instead of
    the model's own ({} : none, the defaults alone). seeds: random_state values; each point's
    score is the mean over them. log: one line per point (None: silent). executor: where the
    fits run (pamir.training shares one among candidates; default: fit_workers threads).
    label: what the log lines and progress bars name the data by (a representation).
    race: race the points (`Race`, module docstring): None: config.RACE decides, for a model
    that fits in threads and one seed; False: every point to its end; a Race: join that race
    (shared with other calls; `race_lane` orders this call's fits among theirs for ties).
    guard: keep the default point unless another beats it beyond the noise
    (`guarded_choice`); None: when there are fewer than config.SMALL_VALIDATION validation
    pictures (pamir.training guards across representations itself, and passes False).
    X_valid_fit: X_valid as the fits read it, when the caller prepared it already
    (`prepare_for_fits`; X_train may be prepared too): X_valid itself scores the fits.
    """
    cls = as_class(model)
    params = dict(params or {})
    grid = model_grid(cls, params) if grid is None else grid
    points = grid_points(grid)
    check_points(cls, params, points)
    say = log or (lambda *a: None)
    seeds = [None] if seeds is None else list(seeds)
    most = params.get("max_valid_queries", config.VALID_MAX_QUERIES)
    queries = validation_queries(Y_valid, Y_train, most)
    during = {k: v for k, v in getattr(cls, "selection_params", {}).items() if k not in params}
    prefix = f"{label}: " if label else ""

    # a model that can (PAMIR) prepares the pictures once for all the fits; the caller's
    # copies are then not held by the fits (one copy per fit was most of the memory)
    X_fit, prepared_valid = prepare_for_fits(cls, X_train,
                                             X_valid if X_valid_fit is None else None)
    X_valid_fit = prepared_valid if X_valid_fit is None else X_valid_fit
    del X_train

    race, guarded = plan_race(cls, [("", (), points)], len(seeds), Y_valid.shape[0],
                              fit_workers(cls), race=race, guard=guard, lane=race_lane)
    guard, default = guarded is not None, None if guarded is None else guarded[1]
    keys = [(race_lane, k, s) for k in range(len(points)) for s in range(len(seeds))]
    if race:
        race.join(keys)

    def fit_point(k, point, j, seed):
        started = time.perf_counter()
        settings = {**during, **params, **point}  # what the caller fixed wins
        if seed is not None:
            settings["random_state"] = seed
        text = f"{prefix}{cls.kind} {_fmt(point) or 'defaults'} ({k}/{len(points)})"
        if not race:
            m = _fit(cls, settings, X_fit, Y_train, (X_valid_fit, Y_valid), text, progress)
            return scored(m, started)
        key = (race_lane, k - 1, j)
        full = {**cls.default_params(), **settings}
        try:
            m = race.run(key, lambda check: _fit(cls, settings, X_fit, Y_train,
                                                 (X_valid_fit, Y_valid), text, progress, check),
                         full["n_updates"], full["eval_every"])
        except Eliminated:  # lost at a rung: its best validation AvgP so far, no model
            e = race.entries[key]
            return (None, None, e.best, time.perf_counter() - started,
                    {"raced_out": e.out_at, "curve": e.curve})
        return scored(m, started)

    def scored(m, started):
        per_query = validation_per_query(m, X_valid, queries)
        return (m, per_query, 100 * float(per_query.mean()), time.perf_counter() - started,
                stopping(m))

    trials, fitted = [], []
    try:
        pool_cm = (race_threads(len(keys)) if race else
                   fit_pool(fit_workers(cls)) if executor is None else given_pool(executor))
        with pool_cm as pool:
            futures = [[pool.submit(fit_point, k, point, j, seed)
                        for j, seed in enumerate(seeds)] for k, point in enumerate(points, 1)]
            for point, runs in zip(points, futures):  # in grid order, whatever finished first
                try:
                    done = [f.result() for f in runs]
                except BaseException:
                    if race:  # fits that will not run must not hold up the others' rungs
                        race.withdraw(keys)
                    raise
                scores = [run[2] for run in done]
                first = done[0]
                trial = Trial(point, float(np.mean(scores)), scores,
                              sum(run[3] for run in done), first[4], first[1])
                trials.append(trial)
                fitted.append(first[0])
                say(f"{prefix}{cls.kind} {_fmt(point) or 'defaults'}: validation AvgP "
                    f"{trial.valid_avgp:.2f}"
                    + (f" (seeds {', '.join(f'{s:.2f}' for s in scores)})" if len(scores) > 1
                       else "")
                    + (f" (raced out at {trial.stopping['raced_out']:,} updates)"
                       if "raced_out" in trial.stopping else "")
                    + f" ({trial.seconds:.1f} s){FitDisplay.eta_text()}")
    except BaseException:
        if race:
            race.withdraw(keys)
        raise
    # the best of the fits that ran to their end (a raced-out fit was beaten at its rung by
    # fits whose best can only have grown since); the first of equals
    finished = [i for i, m in enumerate(fitted) if m is not None]
    if not finished:  # every point lost in a race shared with other selections
        best = max(range(len(trials)), key=lambda i: (trials[i].valid_avgp, -i))
        return Selection(None, {**params, **points[best]}, trials[best].valid_avgp, trials,
                         fitted)
    best = max(finished, key=lambda i: (trials[i].valid_avgp, -i))
    if guard and fitted[default] is not None:
        best = guarded_choice([t.per_query if m is not None else None
                               for t, m in zip(trials, fitted)], default)
        say(f"{prefix}{cls.kind}: {Y_valid.shape[0]} validation pictures: "
            f"{_fmt(points[default]) or 'the defaults'} kept unless another point beats it "
            f"beyond the noise: chose {_fmt(points[best]) or 'the defaults'}")
    winner, score = fitted[best], trials[best].valid_avgp
    if during:  # the chosen point again, with the training it was shortened from
        settings = {**params, **points[best]}
        if seeds[0] is not None:
            settings["random_state"] = seeds[0]
        say(f"{prefix}{cls.kind}: fitting the chosen point with its full settings")
        winner = _fit(cls, settings, X_fit, Y_train, (X_valid_fit, Y_valid),
                      f"{prefix}{cls.kind} chosen", progress)
        score = 100 * validation_avgp(winner, X_valid, queries)
        fitted = [winner if i == best else None for i in range(len(fitted))]
    return Selection(winner, winner.get_params(), score, trials, fitted)


def prepare_for_fits(cls, X_train, X_valid) -> tuple:
    """(X_train, X_valid) as the model's fits read them, prepared once when the model can
    (`prepare_pictures`, PAMIR's), else as given."""
    prepare = getattr(cls, "prepare_pictures", None)
    if prepare is None:  # (a fit's ColumnBlocks as the CSR other models read)
        return as_matrix(X_train), as_matrix(X_valid)
    return (prepare(X_train, "train"),
            None if X_valid is None else prepare(X_valid, "valid"))


def _fit(cls, settings, X, Y, validation, label, progress, check=None):
    """Fit one model; check(done, total, avgp): the race's checkpoint, after the bar's."""
    m = cls(**settings)
    with progress_callback(label, progress) as bar:
        callback = bar
        if check is not None:
            def callback(done, total, avgp):
                if bar is not None:
                    bar(done, total, avgp)
                check(done, total, avgp)
        return m.fit(X, Y, validation=validation, callback=callback)


def stopping(model) -> dict:
    """Where an early-stopped model kept its weights (PA models and BBNN)."""
    out = {}
    for key in ("best_update_", "n_updates_", "triplets_", "best_valid_avgp_"):
        if getattr(model, key, None) is not None:
            out[key.rstrip("_")] = getattr(model, key)
    history = getattr(model, "history_", None)
    if history and isinstance(history[0], (list, tuple)) and history[0][1] is not None:
        # the PA models' validation AvgP after each evaluation
        out["curve"] = [[int(h[0]), round(100 * h[1], 2)] for h in history if h[1] is not None]
    if getattr(model, "out_of_time_", False):  # cut short by the time budget
        out["out_of_time"] = True
    return out


def _fmt(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def models_description() -> dict:
    """{kind: {"input", "params": {name: default}, "grid": {name: values} or a list of
    sub-grids, "points": grid points}} of every model kind."""
    out = {}
    for kind in MODELS:
        cls = model_class(kind)
        grid = cls.param_grid
        out[kind] = {"input": cls().input, "params": cls.default_params(),
                     "grid": grid if isinstance(grid, dict) else [dict(g) for g in grid],
                     "points": len(grid_points(model_grid(cls))),
                     "doc": (cls.__doc__ or "").strip().splitlines()[0]}
        if getattr(cls, "selection_params", None):
            out[kind]["selection_params"] = cls.selection_params
    return out


__all__ = ["Selection", "Trial", "check_points", "grid_points", "model_grid", "models_description",
           "prepare_for_fits", "select", "stopping", "validation_avgp", "validation_per_query",
           "validation_queries"]
