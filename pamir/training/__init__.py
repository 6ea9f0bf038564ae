"""Training a whole system (`fit_system`) in phases over one request record
(`FitSettings`, settings.py) and a `Fitting` every phase reads (plan.py): each phase a
function of the Fitting and the previous phase's result, in its own module.

1. plan (`plan.plan`): the request checked, the update budget, the representation
   candidates, and the collection's rows taken once (names, paths, captions);
2. features (`extraction.candidate_features`): each candidate's features, fitted on the
   training pictures only, and the pictures its fits read;
3. race (`selecting.select_candidate`): every candidate's grid on validation by
   selection.select, all in one race (race.py); the best validation mean wins (or the
   guarded default point, on a small validation split);
4. ensemble (`ensemble.grow_ensemble`): more seeds of the chosen PAMIR, averaged;
5. neighbours (`neighbours.add_neighbours`): a label-transfer part chosen on validation
   (pamir.models.neighbours);
6. retraining (`retraining.retrain_on_development`): the chosen settings again on train +
   valid;
7. the system (`assembly.finish`): its ImageNet prior (`prior.fit_prior`,
   pamir.zeroshot.prior; the vocabulary's classes started after the plan, `prior.start_classes`)
   and calibration (pamir.calibration), on the validation scores of the models trained on
   train only.

The result is a pamir.system.System; model.json's "info" says how it was made.
"""

from __future__ import annotations

from ..data import Collection
from ..models.pa import deadline
from ..progress import FitDisplay
from ..system import System
from .assembly import finish, validation_cost
from .candidates import (COMBINATION_WEIGHTS, DEFAULT_REPRESENTATIONS, SMALL_FOLDER_PICTURES,
                         WIDE_COMBINATION_WEIGHTS, representation_candidates,
                         small_folder_candidates)
from .ensemble import grow_ensemble
from .extraction import (MIN_BLOCKS_PER_VISTERM, candidate_features, collection_inputs,
                         read_features, supported_codebook)
from .neighbours import add_neighbours, choose_neighbours, neighbour_views
from .plan import plan, update_budget
from .prior import start_classes
from .race import fit_pool
from .refitting import (REFIT_MAX_GROWTH, REFIT_MAX_WORD_CHANGE, REFIT_UPDATE_SHARE,
                        fit_or_refit, refit_system, reselect_reason, saved_for_refit)
from .retraining import retrain_on_development
from .selecting import grid_reading, select_candidate
from .settings import FitSettings, logger


def fit_system(collection: Collection, *args, settings: FitSettings | None = None,
               **kwargs) -> System:
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

    The request is one record, `settings` (a FitSettings: what each keyword above
    sets). The old call stays: positional and keyword arguments after the collection are
    FitSettings' fields in its order (model, feature_settings, model_params, progress,
    ...); with `settings`, keywords change those fields (`dataclasses.replace`).

    The phases, in order (the module docstring): plan, features, race, ensemble,
    neighbours, retraining, then the system with its prior and calibration.
    """
    fitting = plan(collection, FitSettings.of(settings, *args, **kwargs))
    classes = start_classes(fitting)  # in a child process, now
    with FitDisplay(fitting.settings.progress, fitting.settings.log) as fitting.display, \
            fit_pool(fitting.workers) as fitting.pool, deadline(fitting.settings.time_budget):
        candidates = candidate_features(fitting, collection)
        winner = select_candidate(fitting, candidates)
        del candidates  # the losers' features and pictures go: only the winner's stay
        trained = grow_ensemble(fitting, winner)
        read_features(fitting, collection, winner.candidate)
        trained = add_neighbours(fitting, trained)
        trained = retrain_on_development(fitting, trained)
    return finish(fitting, trained, classes)


__all__ = ["COMBINATION_WEIGHTS", "DEFAULT_REPRESENTATIONS", "FitSettings",
           "MIN_BLOCKS_PER_VISTERM", "REFIT_MAX_GROWTH", "REFIT_MAX_WORD_CHANGE",
           "REFIT_UPDATE_SHARE", "SMALL_FOLDER_PICTURES", "WIDE_COMBINATION_WEIGHTS",
           "add_neighbours", "candidate_features", "choose_neighbours", "collection_inputs",
           "fit_or_refit", "fit_system", "grid_reading", "grow_ensemble", "logger",
           "neighbour_views", "refit_system", "representation_candidates", "reselect_reason",
           "retrain_on_development", "saved_for_refit", "select_candidate",
           "small_folder_candidates", "supported_codebook", "update_budget", "validation_cost"]
