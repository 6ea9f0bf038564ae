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

Grid points (and seeds) are fitted concurrently, in threads (`fit_workers`, config.FIT_WORKERS:
one per core) for models whose training releases the GIL (`fits_in_threads`: PAMIR's numba
loop); every fit has its own seeded generator, so the results, and the choice, do not depend
on the number of threads. The validation queries a point is scored on are capped at
config.VALID_MAX_QUERIES (a sample seeded by config.VALID_QUERY_SEED), as PAMIR's early
stopping caps them.

Racing (config.RACE): such fits are raced by successive halving (`Race`): at
config.RACE_RUNGS (1/16, 1/8, 1/4, 1/2 of a fit's updates) the fits still running are ranked
by their best validation AvgP so far and the better half goes on; the last
config.RACE_FINALISTS run to their end, so the winner is the model the full loop would have
trained, at a fraction of the updates. A raced-out point's trial keeps its AvgP so far and
`raced_out` (updates). `pamir.training` races every representation's grid in one race.

Small validation splits: with fewer than config.SMALL_VALIDATION validation
pictures, the best mean chases noise; the default point (`default_point`: the model's own
parameters, on the richest representation) is kept unless another point beats it in a
one-sided paired Wilcoxon test over the validation queries (`guarded_choice`), and the race
never drops it.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from . import config
from .evaluation import evaluate_model
from .features.registry import as_matrix
from .models import model_class
from .models.base import TextSpaceModel, TrainingQueries, training_queries
from .progress import FitDisplay, progress_callback
from .text import idf as idf_weights


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


def as_class(model) -> type[TextSpaceModel]:
    return model_class(model) if isinstance(model, str) else model


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


def default_point(points: list[tuple], model) -> int | None:
    """Which of `points` ((representation, weights, params) in candidate order) is the
    default: the last representation candidate (the richest of pamir.config's list) with
    the model's own default parameters; None when no point has them (a grid without them
    has no default to keep)."""
    defaults = as_class(model).default_params()
    last = [k for k, p in enumerate(points) if (p[0], tuple(p[1])) == (points[-1][0],
                                                                        tuple(points[-1][1]))]
    same = [k for k in last if all(defaults.get(n) == v for n, v in points[k][2].items())]
    return same[0] if same else None


def plan_race(cls, lanes: list[tuple], n_seeds: int, n_valid: int, workers: int, *,
              race=None, guard: bool | None = None, lane: int = 0) -> tuple:
    """The race and the guard of a selection over `lanes` of grid points, one lane a
    `select` call that shares the race ((representation, weights, points) in candidate
    order; `lane`: the first lane's number). Returns (race, guarded): the `Race` (race None:
    config.RACE decides, for a model that fits in threads and one seed; True: one; False or
    a Race: as given), and the (lane, point) of the default point the guard keeps unless
    another beats it beyond the noise (`guarded_choice`; guard None: when there are fewer
    than config.SMALL_VALIDATION validation pictures), or None: no guard. A guarded default
    point is never raced out."""
    flat = [(lane + i, k) for i, (_, _, points) in enumerate(lanes) for k in range(len(points))]
    if race is None:
        race = config.RACE and n_seeds == 1 and getattr(cls, "fits_in_threads", False)
    default = default_point([(name, weights, p) for name, weights, points in lanes
                             for p in points], cls)
    if guard is None:
        guard = n_valid < config.SMALL_VALIDATION
    guarded = flat[default] if guard and default is not None else None
    if race is True:
        race = Race(len(flat) * n_seeds, workers,
                    protect=[(*guarded, 0)] if guarded is not None else ())
    return race, guarded


def guarded_choice(per_query: list, default: int, alpha: float = config.GUARD_ALPHA) -> int:
    """The point to keep when validation is small (config.SMALL_VALIDATION): `default`,
    unless other points beat it on the validation queries in a one-sided paired Wilcoxon
    signed-rank test at `alpha`; then the best mean among those. per_query: each point's
    AvgP per validation query (the same queries; None: a point that did not finish)."""
    from scipy.stats import wilcoxon  # noqa: PLC0415

    base = np.asarray(per_query[default], float)
    winners = []
    for k, v in enumerate(per_query):
        if k == default or v is None:
            continue
        v = np.asarray(v, float)
        if v.mean() > base.mean() and np.any(v != base):
            p = wilcoxon(v, base, zero_method="wilcox", alternative="greater").pvalue
            if p < alpha:
                winners.append(k)
    return max(winners, key=lambda k: (np.mean(per_query[k]), -k)) if winners else default


def fit_workers(model=None) -> int:
    """How many fits run at once: config.FIT_WORKERS (None: one per core), 1 for a model
    whose training holds the GIL (threads would only take turns)."""
    if model is not None and not getattr(as_class(model), "fits_in_threads", False):
        return 1
    return max(1, int(config.FIT_WORKERS or os.cpu_count() or 1))


class _Inline:
    """An executor that runs each job at once, in the caller's thread (one worker)."""

    def submit(self, fn, *args, **kw) -> Future:
        f = Future()
        try:
            f.set_result(fn(*args, **kw))
        except BaseException as e:  # noqa: BLE001 - handed back through the future
            f.set_exception(e)
        return f


@contextmanager
def fit_pool(workers: int):
    """An executor for `workers` concurrent fits (in the caller's thread when 1)."""
    if workers <= 1:
        yield _Inline()
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="pamir-fit") as pool:
        yield pool


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
        pool_cm = (_threads(len(keys)) if race else
                   fit_pool(fit_workers(cls)) if executor is None else _given(executor))
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


class Eliminated(Exception):
    """Raised in a raced fit's thread when it loses at a rung: the fit ends there."""


@dataclass
class _Entry:
    key: tuple
    level: int = 0  # rungs passed
    best: float = -np.inf  # best validation AvgP so far (percent)
    state: str = "running"  # running, waiting (at a rung), kept, done, out
    holding: bool = False  # holds a compute token
    out_at: int | None = None  # updates when it lost
    curve: list = field(default_factory=list)


class Race:
    """Successive halving among fits that run in threads (one thread per fit, at most
    `workers` computing at once: a fit holds a token while it trains, and gives it back
    while it waits at a rung).

    At each rung (config.RACE_RUNGS: fractions of a fit's n_updates, rounded up to its
    evaluations) a fit waits until every fit still in the race has reached that rung or
    ended; they are then ranked by their best validation AvgP so far (an ended fit by its
    final one; ties to the earlier key) and the better half goes on, never fewer than
    config.RACE_FINALISTS; the others stop there (`Eliminated`). The rankings depend only
    on the validation scores at the rungs, never on which thread ran first: the choice is
    deterministic for a seed, whatever the number of threads.

    `entrants`: how many fits will join (a rung is decided only once all have joined).
    One race may span several `select` calls (pamir.training races every representation's grid
    together): `keys` order the fits for ties. `protect`: keys never raced out (the default
    point, which a small collection's guarded choice compares the others with).
    """

    def __init__(self, entrants: int, workers: int, rungs=None, finalists=None, protect=()):
        self.entrants = int(entrants)
        self.protect = {tuple(k) for k in protect}
        self.rungs = tuple(config.RACE_RUNGS if rungs is None else rungs)
        self.finalists = max(1, int(config.RACE_FINALISTS if finalists is None else finalists))
        self.tokens = threading.Semaphore(max(1, int(workers)))
        self.cond = threading.Condition()
        self.entries: dict[tuple, _Entry] = {}

    def join(self, keys) -> None:
        """Register fits before they start (so that no rung is decided without them)."""
        with self.cond:
            for key in keys:
                self.entries.setdefault(tuple(key), _Entry(tuple(key)))
            self.cond.notify_all()

    def withdraw(self, keys) -> None:
        """Fits that will never run (their selection failed before them): out of the race."""
        with self.cond:
            for key in keys:
                e = self.entries.setdefault(tuple(key), _Entry(tuple(key)))
                if e.state in ("running", "waiting", "kept"):
                    e.state = "out"
            self.entrants = max(self.entrants, len(self.entries))
            self._decide()
            self.cond.notify_all()

    def rung_updates(self, level: int, n_updates: int, eval_every: int) -> int:
        every = max(1, int(eval_every))
        return -(-int(np.ceil(self.rungs[level] * int(n_updates))) // every) * every

    def run(self, key, fit, n_updates: int, eval_every: int):
        """fit(callback) under the race: callback(done, total, avgp) is to be called at each
        evaluation (a PA model's fit does); returns fit's result, or raises Eliminated."""
        key = tuple(key)
        self.join([key])
        e = self.entries[key]
        self.tokens.acquire()
        e.holding = True

        def checkpoint(done, total, avgp):
            if avgp is not None:
                e.best = max(e.best, 100 * avgp)
                e.curve.append([int(done), round(100 * avgp, 2)])
            if e.level < len(self.rungs) and done >= self.rung_updates(e.level, n_updates,
                                                                        eval_every):
                self._wait_at_rung(e, done)

        try:
            return fit(checkpoint)
        finally:
            with self.cond:
                if e.state != "out":
                    e.state = "done"
                self._decide()
            if e.holding:
                e.holding = False
                self.tokens.release()

    def _wait_at_rung(self, e: _Entry, done: int) -> None:
        e.holding = False
        self.tokens.release()
        with self.cond:
            if e.state != "out":  # out already: its selection was withdrawn
                e.state = "waiting"
                self._decide()
            while e.state == "waiting":
                self.cond.wait()
            lost = e.state == "out"
            if lost:
                e.out_at = int(done)
            else:
                e.state = "running"
        if lost:
            raise Eliminated(f"raced out after {done} updates")
        self.tokens.acquire()
        e.holding = True

    def _decide(self) -> None:
        """Decide every rung that can be (the lock held): its field is every fit still in
        the race at that level, and it is decided once they have all reached it or ended."""
        if len(self.entries) < self.entrants:
            return
        while True:
            alive = [e for e in self.entries.values() if e.state != "out"]
            levels = [e.level for e in alive if e.level < len(self.rungs)]
            if not levels:
                return
            level = min(levels)
            field_ = [e for e in alive if e.level == level]
            if any(e.state in ("running", "kept") for e in field_):
                return  # some fit is still on its way to the rung
            ranked = sorted(field_, key=lambda e: (-e.best, e.key))
            keep = max(-(-len(field_) // 2), min(self.finalists, len(field_)))
            for rank, e in enumerate(ranked):
                kept = rank < keep or e.key in self.protect
                e.level = level + 1 if kept else e.level
                if not kept:
                    e.state = "out" if e.state == "waiting" else "done-out"
                elif e.state == "waiting":
                    e.state = "kept"
            # ended fits that lost stay ended (their model exists), out of later rungs
            for e in field_:
                if e.state == "done-out":
                    e.state = "out"
            self.cond.notify_all()


@contextmanager
def _given(executor):
    yield executor


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


@contextmanager
def _threads(n: int):
    """One thread per raced fit (the race's tokens bound how many compute at once)."""
    with ThreadPoolExecutor(max(1, n), thread_name_prefix="pamir-race") as pool:
        yield pool


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


__all__ = ["Eliminated", "Race", "Selection", "Trial", "check_points", "default_point",
           "fit_pool", "fit_workers", "grid_points", "guarded_choice", "model_grid", "plan_race",
           "prepare_for_fits", "select", "validation_avgp", "validation_per_query",
           "validation_queries"]
