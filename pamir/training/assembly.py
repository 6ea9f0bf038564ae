"""The last phase of `fit_system`: the system assembled from the trained models, with how
it was made (model.json's "info"), its ImageNet prior (the prior phase, prior.py) and its
calibration (pamir.calibration), both read off the validation scores of the models trained
on train only (`finish`).
"""

from __future__ import annotations

import time

from .. import config
from ..calibration.fitting import calibrate_system
from ..system import System
from .plan import Fitting, Trained
from .prior import fit_prior


def finish(fitting: Fitting, trained: Trained, classes=None) -> System:
    """The system of the trained models, its prior and its calibration; classes: what
    `prior.start_classes` gave."""
    f = fitting
    c = trained.winner.candidate
    system = System(c.rep, averaged(f.cls, trained.members), f.protocol.vocabulary, trained.idf,
                    _info(f, trained), trained.neighbours)
    # the system as trained on train only, when it was retrained on train + validation:
    # validation choices read its scores (the retrained ones are in-sample)
    scored = (system.with_model(averaged(f.cls, trained.on_train), trained.neighbours_on_train)
              if system.info["retrained"] else None)
    P_valid = fit_prior(f, c, system, scored, classes)
    # its calibrated probabilities of relevance, fitted on the validation pictures' scores
    # (by `scored` where there is one), its prior mixed in
    system.calibration = calibrate_system(system, c.X_valid, c.Y_valid, c.Y_train,
                                          scored=scored, log=f.say, P_valid=P_valid)
    if system.calibration is not None:
        system.info["calibration"] = system.calibration.info
    return system


def averaged(cls, members: list):
    """The one model of a system's members: their average (an ensemble), or the member."""
    return cls.average(members) if len(members) > 1 else members[0]


def _info(fitting: Fitting, trained: Trained) -> dict:
    """How the system was made, as model.json keeps it (`System.info`)."""
    f, winner = fitting, trained.winner
    c, sel = winner.candidate, winner.selection
    retrain, time_budget = f.settings.retrain, f.settings.time_budget
    scored = getattr(sel.model, "valid_queries_", None)
    results = winner.results
    members = trained.members
    return {
        "data": f.name, "model": f.settings.model, "params": trained.params,
        "representation": c.name, "representation_settings": c.rep.to_dict().get("settings"),
        "valid_avgp": round(trained.valid_avgp, 3), "grid": winner.record["grid"],
        "ensemble": [int(m.random_state) for m in members] if len(members) > 1 else None,
        "representations": [{k: v for k, v in r.items() if k != "grid"}
                            | {"curves": [_curve(t) for t in r["grid"]]} for r in results],
        "retrained": retrain and "retrain" not in f.skipped, "seed": f.protocol.seed,
        "retraining": f.retrain,
        "vocabulary_size": f.protocol.T,
        "pictures": {"train": int(len(c.train)), "valid": int(len(c.valid))},
        # what an incremental refit keeps and compares with (refitting.reselect_reason)
        "split": {"development": int(len(f.protocol.development)),
                  "valid": [f.ids[i] for i in f.protocol.valid]},
        "valid_queries": None if scored is None else {
            "scored": scored[0], "all": scored[1], "seed": config.VALID_QUERY_SEED,
            **validation_cost(sel.model)},
        "fit_workers": f.workers, "timing": f.timing, "neighbours": trained.knn_info,
        "updates": f.updates, "skipped": [f.left_out] if f.left_out else [],
        "selection_rule": ({"rule": "guarded", "alpha": config.GUARD_ALPHA,
                            "default": winner.guarded}
                           if winner.guarded is not None else {"rule": "best validation mean"}),
        "raced": winner.raced,
        "budget": None if time_budget is None else {
            "seconds": float(time_budget), "skipped": f.skipped,
            "fits_stopped": sum(bool(t.get("out_of_time")) for r in results for t in r["grid"]),
            "reached": bool(f.skipped) or any(t.get("out_of_time") for r in results
                                              for t in r["grid"])},
        "model_seconds": round(time.perf_counter() - f.started, 2),
    }


def validation_cost(model) -> dict:
    """What the chosen fit's validation checkpoints cost: seconds and their share of the fit
    (updates + checkpoints, bounded at about 10 %); {} for a model that says not."""
    valid, train = getattr(model, "valid_seconds_", None), getattr(model, "train_seconds_", None)
    if valid is None or not train:
        return {}
    return {"seconds": round(valid, 6), "share": round(valid / (valid + train), 4)}


def _curve(trial: dict) -> dict:
    """A grid point's validation AvgP after each evaluation (percent), to study how early a
    race between candidates could be decided (benchmarks/bench_fit_speed.py)."""
    return ({"params": trial["params"], "valid_avgp": trial["valid_avgp"],
             "curve": trial.get("curve", [])}
            | ({"raced_out": trial["raced_out"]} if trial.get("raced_out") else {}))


__all__ = ["averaged", "finish", "validation_cost"]
