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
        grown, grown_avgp = _seed_ensemble(f, sel, c)
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


def _seed_ensemble(fitting: Fitting, sel, candidate):
    """The chosen PAMIR `sel` and settings.ensemble - 1 more trained with the next seeds
    (concurrently, on the fit's pool), each early-stopped on validation; returns (the models,
    the validation AvgP of their average, percent). They read the candidate's pictures as
    the selection's fits did (`extraction._fit_pictures`), shared by every member."""
    f, n = fitting, fitting.settings.ensemble
    first, cls = int(sel.params.get("random_state", 0)), type(sel.model)
    X_fit, X_valid, X_valid_fit = candidate.pictures
    Y_train, Y_valid = candidate.Y_train, candidate.Y_valid

    def member(seed):
        with progress_callback(f"pamir seed {seed}", f.settings.progress) as callback:
            return cls(**{**sel.params, "random_state": seed}).fit(
                X_fit, Y_train, validation=(X_valid_fit, Y_valid), callback=callback)

    f.display.phase("ensemble", fits=n - 1, workers=min(f.workers, n - 1))
    futures = [f.pool.submit(member, seed) for seed in range(first + 1, first + n)]
    members = [sel.model] + [done.result() for done in futures]
    queries = validation_queries(Y_valid, Y_train, sel.params.get("max_valid_queries",
                                                                  config.VALID_MAX_QUERIES))
    scores = [100 * validation_avgp(m, X_valid, queries) for m in members]
    averaged = 100 * validation_avgp(cls.average(members), X_valid, queries)
    f.say(f"ensemble of seeds {first}-{first + n - 1}: validation AvgP {averaged:.2f} (each "
        f"{', '.join(f'{v:.2f}' for v in scores)})")
    return members, averaged


__all__ = ["grow_ensemble"]
