"""Training a whole system (`fit_system`) in phases, each a function over small typed
records (a `Fitting` every phase reads, a `Candidate` per representation, the `Winner` of
the selection, the `Trained` models the later phases refine):

1. features (`candidate_features`): each representation candidate's features, fitted on
   the training pictures only (`candidates.py`), and the pictures its fits read;
2. selection (`select_candidate`): every candidate's grid on validation by
   selection.select, all in one race; the best validation mean wins (or the guarded
   default point, on a small validation split);
3. ensemble (`grow_ensemble`): more seeds of the chosen PAMIR, averaged;
4. neighbours (`add_neighbours`): a label-transfer part chosen on validation
   (pamir.models.neighbours);
5. retraining (`retrain_on_development`): the chosen settings again on train + valid;
6. the system's ImageNet prior (pamir.prior) and calibration (pamir.calibration), on the
   validation scores of the models trained on train only.

The result is a pamir.system.System; model.json's "info" says how it was made.
"""

from __future__ import annotations

import logging
import time

from .. import config
from ..data import Collection
from ..models.neighbours import Neighbours
from ..models.pa import deadline, out_of_time
from ..protocol import Protocol
from ..progress import FitDisplay
from ..features.registry import parse_name
from ..system import System, cnn_part
from .candidates import (COMBINATION_WEIGHTS, DEFAULT_REPRESENTATIONS, MIN_BLOCKS_PER_VISTERM,
                         SMALL_FOLDER_PICTURES, WIDE_COMBINATION_WEIGHTS, collection_inputs,
                         representation_candidates, small_folder_candidates, supported_codebook)
from .race import fit_pool
from .plan import Fitting, Trained, Winner, grid_reading, plan, update_budget
from .refining import (add_neighbours, calibrate, choose_neighbours, fit_prior, grow_ensemble,
                       neighbour_views, retrain_on_development, spread_rows,
                       start_vocabulary_classes, trained_on_train)
from .refitting import (REFIT_MAX_GROWTH, REFIT_MAX_WORD_CHANGE, REFIT_UPDATE_SHARE,
                        fit_or_refit, refit_system, reselect_reason, saved_for_refit)
from .selecting import candidate_features, read_features, select_candidate

#: Where fitting reports its steps unless given `log` (quiet unless logging is configured;
#: the CLI passes its own printer).
logger = logging.getLogger(__name__)


def fit_system(collection: Collection, model: str = "pamir", feature_settings=None,
               model_params: dict | None = None, progress: bool = False, *,
               representation=None, retrain: bool = False, grid: dict | list | None = None,
               protocol: Protocol | None = None, inputs=None, seeds=None, cnn_settings=None,
               ensemble: int = 1, cache_dir=None, log=logger.info,
               time_budget: float | None = None, neighbours: bool | None = None,
               coef_init=None) -> System:
    """Train a whole system on a captioned collection.

    For each representation candidate (`representation`: a name or a list of names; None:
    DEFAULT_REPRESENTATIONS the model can read), the features are fitted on protocol.train
    and selection.select chooses the model's parameters on validation (`grid`: the
    model's own when None, {} for none; `seeds`: random_state values averaged). The
    representation and parameters with the best validation mean AvgP win. With `retrain`, the
    winner's settings (plus where it stopped) are trained again on train + valid. With
    `ensemble` > 1 (PAMIR only), the winner is trained with that many seeds and the models are
    averaged (PAMIR.average), on train and, with `retrain`, each again on train + valid.
    `inputs` = (F, ok, representation) reuses features already computed for this collection
    and protocol. `log` takes one line per step (default: the pamir.training logger; None:
    silent); `progress` shows live progress bars on a terminal. cache_dir: where features
    are cached, None for config.default_cache_dir().

    Fits run concurrently (race.fit_workers) and give the same system whatever
    the number of threads. `time_budget` (seconds, from the call): fits still running when it
    is spent stop at their next validation, keeping their best weights, and the ensemble and
    the retraining are left out if there is no time left for them; info["budget"] says what
    was cut (the result then depends on the machine's speed).

    `neighbours` (None: config.NEIGHBOURS): a PAMIR system on a representation with CNN
    views gets a label-transfer part (pamir.models.neighbours), its k, temperature and mix
    weight chosen on validation once PAMIR is trained (`choose_neighbours`); with `retrain`
    its neighbours are then the train + valid pictures, the choices kept.

    `coef_init` (PAMIR; T x V): every fit starts from these weights instead of zeros (an
    incremental refit, `refitting.refit_system`).

    The phases, in order (the module docstring): features, selection, ensemble,
    neighbours, retraining, then the system's prior and calibration.
    """
    fitting, candidates = plan(
        collection, model, feature_settings, model_params, progress, representation, grid,
        protocol, inputs, seeds, cnn_settings, ensemble, cache_dir, log)
    if coef_init is not None:
        fitting.cls = fitting.cls.starting_from(coef_init)
    # the vocabulary's ImageNet classes for the prior: in a child process, now
    classes = (start_vocabulary_classes(fitting.protocol.vocabulary)
               if config.PRIOR and _may_read_cnn(candidates, inputs) else None)
    with FitDisplay(progress, log) as fitting.display, \
            fit_pool(fitting.workers) as fitting.pool, deadline(time_budget):
        # (the candidates are let go when the selection returns: only the winner's stay)
        winner = select_candidate(fitting, candidate_features(fitting, candidates, inputs))
        trained = grow_ensemble(fitting, winner, ensemble)
        # the prepared pictures the selection's and the ensemble's fits read are done with:
        # let go before the neighbours' views and the retraining's block are made, and
        # before the features are read again (at 100,000 pictures the training
        # block is 5.5 GiB, as much as the features); calibration reads X_valid
        X_valid, winner.candidate.pictures = winner.candidate.pictures[1], None
        read_features(fitting, winner.candidate)
        if (config.NEIGHBOURS if neighbours is None else neighbours) and \
                fitting.cls.kind == "pamir":
            add_neighbours(fitting, winner, trained)
        # calibration reads the train-only models' validation scores (not in-sample ones),
        # with the neighbours the training pictures made (the retraining refits them in place)
        trained.on_train = trained.members
        trained.neighbours_on_train = (Neighbours.from_saved(*trained.neighbours.to_dict())
                                       if retrain and trained.neighbours is not None
                                       else trained.neighbours)
        if retrain and out_of_time():
            fitting.skipped.append("retrain")
        elif retrain:
            retrain_on_development(fitting, winner, trained)
    final = (fitting.cls.average(trained.members) if len(trained.members) > 1
             else trained.members[0])
    info = _info(fitting, winner, trained, retrain=retrain, time_budget=time_budget)
    system = System(winner.candidate.rep, final, fitting.protocol.vocabulary, trained.idf,
                    info, trained.neighbours)
    scored = trained_on_train(system, trained.on_train, trained.neighbours_on_train,
                              fitting.cls)
    train, valid = winner.candidate.train, winner.candidate.valid
    P_valid = fit_prior(system, scored, X_valid, valid, fitting.protocol, collection,
                        fitting.say, classes, spread_rows(winner.candidate, train), train)
    calibrate(system, scored, X_valid, valid, train, fitting.protocol, fitting.say, P_valid)
    return system


def _may_read_cnn(candidates, inputs) -> bool:
    """Whether the winner may have a CNN view (and so an ImageNet prior)."""
    if inputs is not None:
        return cnn_part(inputs[2]) is not None
    return any(part.startswith("cnn") for name, _ in candidates for part in parse_name(name))


def _info(fitting: Fitting, winner: Winner, trained: Trained, *, retrain: bool,
          time_budget: float | None) -> dict:
    """How the system was made, as model.json keeps it (`System.info`)."""
    f, c, sel = fitting, winner.candidate, winner.selection
    scored = getattr(sel.model, "valid_queries_", None)
    results = winner.results
    members = trained.members
    return {
        "data": f.collection.name, "model": f.model, "params": trained.params,
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
                  "valid": [f.collection.ids[i] for i in f.protocol.valid]},
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


__all__ = ["COMBINATION_WEIGHTS", "DEFAULT_REPRESENTATIONS", "MIN_BLOCKS_PER_VISTERM",
           "REFIT_MAX_GROWTH", "REFIT_MAX_WORD_CHANGE", "REFIT_UPDATE_SHARE", "fit_or_refit",
           "refit_system", "reselect_reason", "saved_for_refit", "SMALL_FOLDER_PICTURES", "WIDE_COMBINATION_WEIGHTS", "add_neighbours",
           "candidate_features", "choose_neighbours", "collection_inputs", "fit_system",
           "grid_reading", "grow_ensemble", "neighbour_views", "representation_candidates",
           "retrain_on_development", "select_candidate", "small_folder_candidates",
           "supported_codebook", "update_budget", "validation_cost"]
