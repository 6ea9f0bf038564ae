"""The ensemble phase of `fit_system`: more seeds of the chosen PAMIR, averaged
(`grow_ensemble`); the prepared pictures the selection's and the ensemble's fits read are
let go at its end.
"""

from __future__ import annotations

import time

from .. import config
from ..models.pa import out_of_time
from ..progress import progress_callback
from .plan import Fitting, Trained, Winner
from .selection import validation_avgp, validation_queries


def grow_ensemble(fitting: Fitting, winner: Winner) -> Trained:
    """With settings.ensemble > 1, the chosen PAMIR and ensemble - 1 more seeds, averaged
    (left out when the time budget is spent, or cut short during it)."""
    f, sel, c, ensemble = fitting, winner.selection, winner.candidate, fitting.settings.ensemble
    trained = Trained(winner, [sel.model], sel.valid_avgp, sel.params, f.protocol.idf)
    if ensemble > 1 and out_of_time():
        f.skipped.append("ensemble")
    elif ensemble > 1:
        started = time.perf_counter()
        f.display.phase("ensemble", fits=ensemble - 1, workers=min(f.workers, ensemble - 1))
        grown, grown_avgp = _seed_ensemble(sel, ensemble, c.pictures, c.Y_train, c.Y_valid,
                                           f.settings.progress, f.say, f.pool)
        if any(getattr(m, "out_of_time_", False) for m in grown):
            f.skipped.append("ensemble")  # a member cut short: the chosen model alone
            f.say("time budget spent during the ensemble: keeping the chosen model alone")
        else:
            trained.members, trained.valid_avgp = grown, grown_avgp
        f.timing["ensemble"] = round(time.perf_counter() - started, 2)
    # the prepared pictures the selection's and the ensemble's fits read are done with:
    # let go before the neighbours' views and the retraining's block are made, and
    # before the features are read again (at 100,000 pictures the training
    # block is 5.5 GiB, as much as the features); calibration reads X_valid
    c.X_valid, c.pictures = c.pictures[1], None
    return trained


def _seed_ensemble(sel, n: int, pictures, Y_train, Y_valid, progress, say, pool):
    """The chosen PAMIR and n - 1 more trained with the next seeds (concurrently, on `pool`),
    each early-stopped on validation; returns (the models, the validation AvgP of their
    average, percent). pictures: the selection's (X_train, X_valid, X_valid) as the fits
    read them (`extraction._fit_pictures`), shared by every member."""
    first, cls = int(sel.params.get("random_state", 0)), type(sel.model)
    X_fit, X_valid, X_valid_fit = pictures

    def member(seed):
        with progress_callback(f"pamir seed {seed}", progress) as callback:
            return cls(**{**sel.params, "random_state": seed}).fit(
                X_fit, Y_train, validation=(X_valid_fit, Y_valid), callback=callback)

    futures = [pool.submit(member, seed) for seed in range(first + 1, first + n)]
    members = [sel.model] + [f.result() for f in futures]
    queries = validation_queries(Y_valid, Y_train, sel.params.get("max_valid_queries",
                                                                  config.VALID_MAX_QUERIES))
    scores = [100 * validation_avgp(m, X_valid, queries) for m in members]
    averaged = 100 * validation_avgp(cls.average(members), X_valid, queries)
    say(f"ensemble of seeds {first}-{first + n - 1}: validation AvgP {averaged:.2f} (each "
        f"{', '.join(f'{v:.2f}' for v in scores)})")
    return members, averaged


__all__ = ["grow_ensemble"]
