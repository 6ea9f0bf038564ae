"""The retraining phase of `fit_system`: the chosen settings trained again on train +
valid (`retrain_on_development`), each member from its own weights where the model can.
"""

from __future__ import annotations

import time

import numpy as np

from ..features.representation import take_rows
from ..models.neighbours import Neighbours
from ..models.pa import out_of_time
from ..progress import progress_callback
from ..text.vectors import idf as idf_weights
from .plan import Fitting, Trained
from .refitting import REFIT_UPDATE_SHARE
from .selection import prepare_for_fits


def retrain_on_development(fitting: Fitting, trained: Trained) -> Trained:
    """With settings.retrain, the chosen settings (plus where each member stopped) trained
    again on train + valid, each member; the neighbours then vote with the train + valid
    pictures, the choices made on validation kept. Left out, or cut short, by the time
    budget: the models trained on train stay. What calibration reads is kept apart: the
    models and neighbours trained on train only (`Trained.on_train`; the neighbours copied
    before the retraining changes their votes)."""
    retrain = fitting.settings.retrain
    trained.on_train, trained.neighbours_on_train = trained.members, trained.neighbours
    if retrain and out_of_time():
        fitting.skipped.append("retrain")
    elif retrain:
        _retrain(fitting, trained)
    return trained


def _retrain(fitting: Fitting, trained: Trained) -> None:
    """retrain_on_development's fits, and the neighbours' votes again."""
    f, c, cls = fitting, trained.winner.candidate, fitting.cls
    started = time.perf_counter()
    dev = np.sort(np.concatenate([c.train, c.valid]))
    warm = hasattr(cls, "starting_from")  # PAMIR: each member goes on from its own weights
    refits = [_retrain_params(m, warm) for m in trained.members]
    trained.params = refits[0]
    f.say(f"retraining on train + valid ({len(dev)} pictures) with {trained.params}"
          + (f" and {len(refits) - 1} more seeds" if len(refits) > 1 else "")
          + (", each from its weights on train" if warm else ""))
    Y_dev = f.presence(dev)
    part = trained.neighbours
    if part is not None:  # its votes change below: calibration keeps the train-only ones
        trained.neighbours_on_train = Neighbours.from_saved(*part.to_dict())
    # the neighbours' view first: the seeds then share one prepared copy of X_dev
    # all the retraining reads is X_dev (and the neighbours' V_dev): F is let go here, but
    # its parts live on in `rows` until X_dev is made from them (the parts and
    # X_dev together are the peak of a 100,000-picture fit, fit_memory_synthetic_blocks.md)
    rows = take_rows(c.F, dev)
    c.F = None
    V_dev = part.view(rows) if part is not None else None
    X_dev = prepare_for_fits(cls, rows, None)[0]
    del rows

    def refit(member, params):
        seed = params.get("random_state", "")
        start = {"coef_init": member.W_} if warm else {}
        with progress_callback(f"{f.settings.model} train+valid {seed}",
                               f.settings.progress) as callback:
            return cls(**params).fit(X_dev, Y_dev, callback=callback, **start)

    f.display.phase("retraining", fits=len(refits), workers=min(f.workers, len(refits)))
    refitted = [done.result() for done in
                [f.pool.submit(refit, m, p) for m, p in zip(trained.members, refits)]]
    if any(getattr(m, "out_of_time_", False) for m in refitted):
        f.skipped.append("retrain")  # cut short: the models trained on train stay
        trained.params = trained.winner.selection.params
        f.say("time budget spent during the retraining: keeping the models trained on "
              "train")
    else:
        trained.members, trained.idf = refitted, idf_weights(Y_dev)
        f.retrain = {"start": "each member's weights on train" if warm else "zero",
                     "updates": int(refits[0]["n_updates"])}
        if part is not None:  # the choices made on validation stay
            part.transfer.fit(V_dev, Y_dev, [f.ids[i] for i in dev], [f.paths[i] for i in dev])
    f.timing["retrain"] = round(time.perf_counter() - started, 2)


def _retrain_params(member, warm: bool) -> dict:
    """A member's settings for the retraining: where it stopped on train (`refit_params_`),
    or with `warm` REFIT_UPDATE_SHARE of that, from its weights. Measured one
    level down on Corel 5k (benchmarks/results/retrain_warm.md: 3,500 training pictures
    grown by 500, judged on the 500 validation pictures), a quarter of the updates from the
    train-only weights did as well as all of them from zero, in a quarter of the time."""
    params = {**member.get_params(), **getattr(member, "refit_params_", {})}
    if warm:
        params["n_updates"] = max(int(params.get("eval_every") or 1),
                                  int(REFIT_UPDATE_SHARE * params["n_updates"]))
    return params


__all__ = ["retrain_on_development"]
