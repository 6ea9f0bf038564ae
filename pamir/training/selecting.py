"""The first two phases of `fit_system`: every representation candidate's features
(`candidate_features`), and the selection among all the candidates' grids on validation,
in one race (`select_candidate`, by selection.select).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from .. import config
from ..features.registry import ColumnBlocks, as_matrix, release_networks, representation_name
from ..features.representation import take_rows
from .race import fit_pool, guarded_choice, plan_race
from .selection import Selection, grid_points, prepare_for_fits, select
from .candidates import collection_inputs
from .plan import Candidate, Fitting, Winner, grid_reading


def candidate_features(fitting: Fitting, candidates, inputs) -> list[Candidate]:
    """Phase 1: every candidate's features, one after another (extraction uses the cores
    itself), and the pictures its fits read."""
    f, protocol = fitting, fitting.protocol
    prepared = []
    for name, weights in candidates:
        started = time.perf_counter()
        F, ok, rep = inputs if inputs is not None else collection_inputs(
            f.collection, protocol, name, f.feature_settings, weights=weights,
            cnn_settings=f.cnn_settings, cache_dir=f.cache_dir, progress=f.progress, log=f.log,
            compact=True)
        name = representation_name(rep) if name is None else name
        release_networks(rep)
        feature_seconds = time.perf_counter() - started
        train, valid = protocol.train[ok[protocol.train]], protocol.valid[ok[protocol.valid]]
        for split, idx, full in (("train", train, protocol.train),
                                 ("valid", valid, protocol.valid)):
            if len(idx) < len(full):
                f.say(f"{len(full) - len(idx)} {split} pictures could not be read and are "
                      "left out")
        label = name + (f" (weights {', '.join(map(str, weights))})"
                        if weights and len(weights) > 1 else "")
        f.say(f"representation {label}: {feature_seconds:.1f} s of features")
        prepared.append(Candidate(name, weights, label, F, ok, rep, train, valid,
                                  feature_seconds, _stored_per_row(F),
                                  _fit_pictures(f.cls, F, train, valid)))
        if not _hold_features(inputs, candidates):
            prepared[-1].F = None  # read again from the cache if it wins
        del F
    f.timing["features"] = round(time.perf_counter() - f.started, 2)
    return prepared


def select_candidate(fitting: Fitting, prepared: list[Candidate]) -> Winner:
    """Phase 2: every candidate's grid on validation, all the fits sharing the threads (and
    one race, race.Race, one seed per point); the best validation mean wins, or
    under a small validation split the default point unless another beats it beyond the
    noise (race.guarded_choice), which is then never raced out."""
    f = fitting
    started = time.perf_counter()
    sub_grids = [grid_reading(f.cls, f.params, f.grid, p.name) for p in prepared]
    lanes = [(p.name, p.weights or (1.0,), grid_points(g)) for p, g in zip(prepared, sub_grids)]
    n_fits = f.seeds_per_point * sum(len(points) for _, _, points in lanes)
    f.display.phase("selection", workers=f.workers, fits=n_fits)
    race, default = plan_race(f.cls, lanes, f.seeds_per_point, len(f.protocol.valid),
                              f.workers)
    selections = _run_selections(f, prepared, sub_grids, race)
    f.timing["selection"] = round(time.perf_counter() - started, 2)
    results, best = [], None
    for i, (p, sel) in enumerate(zip(prepared, selections)):
        results.append({"representation": p.name, "weights": list(p.weights or [1.0]),
                        "valid_avgp": round(sel.valid_avgp, 3),
                        "feature_seconds": round(p.feature_seconds, 2),
                        "grid": [t.as_dict() for t in sel.trials]})
        # (no model: every point was raced out by other candidates' fits)
        if sel.model is not None and (best is None or sel.valid_avgp > best[0].valid_avgp):
            best = (sel, i)
        if len(prepared) > 1:
            f.say(f"representation {p.label}: validation AvgP {sel.valid_avgp:.2f}"
                  + (" (raced out)" if sel.model is None else ""))
    guarded = None
    if default is not None:
        guarded = {"representation": prepared[default[0]].name,
                   "params": selections[default[0]].trials[default[1]].params}
        best = _guarded(prepared, selections, lanes, default, f.say) or best
    sel, i = best
    return Winner(prepared[i], sel, results, results[i], guarded, bool(race))


def _run_selections(fitting: Fitting, prepared, sub_grids, race) -> list[Selection]:
    """selection.select on each candidate (its sub-grid), concurrently; in candidate
    order."""
    f = fitting

    def run(p, sub_grid, lane):
        X_fit, X_valid, X_valid_fit = p.pictures
        return select(f.cls, X_fit, f.protocol.presence(p.train), X_valid,
                      f.protocol.presence(p.valid), params=f.params,
                      seeds=f.seeds, log=f.log, progress=f.progress, grid=sub_grid,
                      executor=f.pool, label=p.label if len(prepared) > 1 else "",
                      race=race, race_lane=lane, guard=False, X_valid_fit=X_valid_fit)

    # the costliest candidates' fits are queued first (longest processing time first):
    # the widest fits, last in the candidate order, would otherwise end the phase alone
    # on one core. The order changes when a fit runs, never what it computes.
    costly_first = sorted(range(len(prepared)), key=lambda i: -prepared[i].stored_per_row)
    # (raced, every candidate's selection must run at once: its fits wait at the rungs
    # for the others')
    with fit_pool(len(prepared) if f.workers > 1 or race else 1) as candidates_pool:
        futures = {i: candidates_pool.submit(run, prepared[i], sub_grids[i], i)
                   for i in costly_first}
        return [futures[i].result() for i in range(len(prepared))]  # candidate order


def _guarded(prepared, selections, lanes, default, say):
    """The `best` of select_candidate under the small-validation guard
    (config.SMALL_VALIDATION): the default point unless another beats it beyond the noise;
    None if the fitted models needed are not there (a model refitted after a shortened
    selection)."""
    flat = [(i, k) for i, (_, _, points) in enumerate(lanes) for k in range(len(points))]
    per_query = [selections[i].trials[k].per_query if selections[i].models[k] is not None
                 else None for i, k in flat]
    d = flat.index(default)
    if per_query[d] is None:
        return None
    i, k = flat[guarded_choice(per_query, d)]
    sel, trial = selections[i], selections[i].trials[k]
    di, dk = default
    say(f"{len(prepared[i].valid)} validation pictures: the default point ({prepared[di].label}, "
        f"{selections[di].trials[dk].params}) is kept unless another beats it beyond the noise "
        f"(paired Wilcoxon, alpha {config.GUARD_ALPHA}): chose {prepared[i].label}, "
        f"{trial.params}, validation AvgP {trial.valid_avgp:.2f}")
    model = sel.models[k]
    chosen = Selection(model, model.get_params(), trial.valid_avgp, sel.trials, sel.models)
    return (chosen, i)


def read_features(fitting: Fitting, candidate: Candidate) -> None:
    """The winner's features again (from the feature cache) when they were let go during
    the grid (`_hold_features`)."""
    if candidate.F is None:
        f = fitting
        candidate.F = collection_inputs(
            f.collection, f.protocol, candidate.name, f.feature_settings,
            weights=candidate.weights, cnn_settings=f.cnn_settings, cache_dir=f.cache_dir,
            progress=False, log=None, compact=True)[0]


def _fit_pictures(cls, F, train, valid) -> tuple:
    """(X_train, X_valid, X_valid_fit): a candidate's rows as its fits read them
    (selection.prepare_for_fits, once for every fit), and X_valid as given."""
    X_valid = as_matrix(take_rows(F, valid))
    X_fit, X_valid_fit = prepare_for_fits(cls, take_rows(F, train), X_valid)
    return X_fit, X_valid, X_valid_fit


def _hold_features(inputs, candidates) -> bool:
    """Whether fit_system keeps every candidate's features through the grid: when they were
    given (`inputs`: nothing to read them again from) or there is one candidate. Otherwise
    each candidate's F (every picture, all its parts: 0.4 GB for Corel 5k's widest) is let
    go once its fits' pictures are prepared, and the winner's read again from the feature
    cache (holding all six was 2 GB of the peak)."""
    return inputs is not None or len(candidates) == 1


def _stored_per_row(F) -> float:
    """Numbers stored per picture: what one PA update of a representation costs, roughly."""
    if sp.issparse(F) or isinstance(F, ColumnBlocks):
        return F.nnz / max(F.shape[0], 1)
    return float(np.prod(F.shape[1:])) if hasattr(F, "shape") else 0.0


__all__ = ["candidate_features", "read_features", "select_candidate"]
