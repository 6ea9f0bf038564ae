"""The race phase of `fit_system`: the selection among all the candidates' grids on
validation, in one race (`select_candidate`, by selection.select and race.Race).
"""

from __future__ import annotations

import time

from .. import config
from ..features.registry import takes
from .race import fit_pool, guarded_choice, plan_race
from .selection import Selection, grid_points, model_grid, select
from .plan import Candidate, Fitting, Winner


def select_candidate(fitting: Fitting, prepared: list[Candidate]) -> Winner:
    """The race phase: every candidate's grid on validation, all the fits sharing the threads (and
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
    # (raced, every candidate's selection must run at once: its fits wait at the rungs
    # for the others')
    with fit_pool(len(prepared) if f.workers > 1 or race else 1) as candidates_pool:
        selections = _run_selections(f, prepared, sub_grids, race, candidates_pool)
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


def grid_reading(cls, params: dict, grid, representation: str) -> list[dict]:
    """The sub-grids of `grid` (the model's own when None) whose models read the named
    representation:
    kernel PAMIR's block kernels are tried on blocks, its linear kernel on vectors."""
    subs = model_grid(cls, params) if grid is None else (grid if isinstance(grid, list)
                                                         else [grid])
    kept = [sub for sub in subs if takes(cls(**params, **{k: v[0] for k, v in sub.items()}).input,
                                         representation)]
    return kept or [{}]


def _run_selections(fitting: Fitting, prepared, sub_grids, race,
                    candidates_pool) -> list[Selection]:
    """selection.select on each candidate (its sub-grid), concurrently on `candidates_pool`;
    in candidate order."""
    f = fitting

    def run(p, sub_grid, lane):
        X_fit, X_valid, X_valid_fit = p.pictures
        return select(f.cls, X_fit, p.Y_train, X_valid, p.Y_valid, params=f.params,
                      seeds=f.settings.seeds, log=f.settings.log,
                      progress=f.settings.progress, grid=sub_grid,
                      executor=f.pool, label=p.label if len(prepared) > 1 else "",
                      race=race, race_lane=lane, guard=False, X_valid_fit=X_valid_fit)

    # the costliest candidates' fits are queued first (longest processing time first):
    # the widest fits, last in the candidate order, would otherwise end the phase alone
    # on one core. The order changes when a fit runs, never what it computes.
    costly_first = sorted(range(len(prepared)), key=lambda i: -prepared[i].stored_per_row)
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


__all__ = ["grid_reading", "select_candidate"]
