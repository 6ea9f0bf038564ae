"""The race among a selection's fits, and the pools they run in.

Grid points (and seeds) are fitted concurrently, in threads (`fit_workers`, config.FIT_WORKERS:
one per core) for models whose training releases the GIL (`fits_in_threads`: PAMIR's numba
loop); every fit has its own seeded generator, so the results, and the choice, do not depend
on the number of threads (`fit_pool`).

Racing (config.RACE): such fits are raced by successive halving (`Race`): at
config.RACE_RUNGS (1/16, 1/8, 1/4, 1/2 of a fit's updates) the fits still running are ranked
by their best validation AvgP so far and the better half goes on; the last
config.RACE_FINALISTS run to their end, so the winner is the model the full loop would have
trained, at a fraction of the updates. A raced-out point's trial keeps its AvgP so far and
`raced_out` (updates). `pamir.training` races every representation's grid in one race
(`plan_race` sets it up).

Small validation splits: with fewer than config.SMALL_VALIDATION validation
pictures, the best mean chases noise; the default point (`default_point`: the model's own
parameters, on the richest representation) is kept unless another point beats it in a
one-sided paired Wilcoxon test over the validation queries (`guarded_choice`), and the race
never drops it.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import wilcoxon

from .. import config
from ..models import model_class
from ..models.base import TextSpaceModel


def as_class(model) -> type[TextSpaceModel]:
    return model_class(model) if isinstance(model, str) else model



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
def given_pool(executor):
    """The caller's executor, as a pool that fit_pool's callers enter alike."""
    yield executor


@contextmanager
def race_threads(n: int):
    """One thread per raced fit (the race's tokens bound how many compute at once)."""
    with ThreadPoolExecutor(max(1, n), thread_name_prefix="pamir-race") as pool:
        yield pool


__all__ = ["Eliminated", "Race", "as_class", "default_point", "fit_pool", "fit_workers",
           "given_pool", "guarded_choice", "plan_race", "race_threads"]
