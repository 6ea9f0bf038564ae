"""What the phases of `fit_system` read and hand on: small typed records (a `Fitting`
every phase reads, a `Candidate` per representation, the selection's `Winner`, the
`Trained` models the later phases refine), and the first phase, `plan`, which makes the
Fitting from the collection and the FitSettings: the request checked, the update budget,
the candidates, and the collection's rows taken once (names, paths, captions), so that
no later phase reads the collection.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .. import config
from ..data import Collection
from ..models import model_class
from ..models.neighbours import Neighbours
from ..protocol import Protocol
from .settings import FitSettings
from ..progress import FitDisplay
from .race import fit_workers
from .selection import Selection, check_points, grid_points, model_grid
from .candidates import representation_candidates, small_folder_candidates


@dataclass
class Fitting:
    """What every phase of one fit_system call reads: the request (`settings`), the
    protocol, the collection's rows taken once (`name`, `ids`, `paths`, and `captions`: the
    development pictures' caption presence, row `caption_row[i]` for picture i), the model
    (`cls`, its fixed parameters with the update budget, the grid), the candidates, how to
    report, the shared thread pool and display; and what the phases record for model.json
    (timing, what the time budget skipped)."""

    settings: FitSettings
    protocol: Protocol
    name: str
    ids: list
    paths: list[str]
    captions: object
    caption_row: np.ndarray
    cls: type
    params: dict
    grid: dict | list | None
    seeds_per_point: int
    candidates: list
    say: Callable
    workers: int
    updates: dict
    left_out: dict | None
    started: float
    pool: object = None
    display: FitDisplay | None = None
    timing: dict = field(default_factory=dict)
    skipped: list = field(default_factory=list)
    retrain: dict | None = None  # a kept retraining: how it started, and its updates

    def presence(self, idx: np.ndarray):
        """Caption presence of development pictures `idx` (Protocol.presence's rows, taken
        from those read once)."""
        return self.captions[self.caption_row[idx]]


@dataclass
class Candidate:
    """One representation candidate of fit_system: its features and the pictures its fits
    read (`pictures`: X_train and X_valid prepared for the fits, and X_valid as given, to
    score them). F, every picture's features, is dropped while the grid runs (None) unless
    it cannot be read again (`_hold_features`): the winner's is read again from the cache."""

    name: str
    weights: tuple | None
    label: str
    F: object
    ok: np.ndarray
    rep: object
    train: np.ndarray
    valid: np.ndarray
    feature_seconds: float
    stored_per_row: float
    pictures: tuple | None
    Y_train: object = None  # caption presence of `train` and `valid`
    Y_valid: object = None
    X_valid: object = None  # X_valid as given, once the prepared pictures are let go


@dataclass
class Winner:
    """What the selection chose: the winning candidate, its selection (the model and its
    parameters), every candidate's record (info["representations"]), the default point the
    small-validation guard compared with ({"representation", "params"}; None: no guard),
    and whether the grids were raced."""

    candidate: Candidate
    selection: Selection
    results: list[dict]
    record: dict
    guarded: dict | None
    raced: bool


@dataclass
class Trained:
    """The chosen system's models as the phases after the selection leave them: the
    selection's winner, the members averaged into its model, their validation AvgP, the
    chosen parameters, the idf, the neighbour part (and what its choice tried); and what
    calibration reads, the models and neighbours trained on train only (the retrained ones
    score validation in-sample)."""

    winner: Winner
    members: list
    valid_avgp: float
    params: dict
    idf: np.ndarray
    neighbours: Neighbours | None = None
    knn_info: dict | None = None
    on_train: list | None = None
    neighbours_on_train: Neighbours | None = None


def plan(collection: Collection, settings: FitSettings) -> Fitting:
    """The first phase: check the request (what would fail after minutes of features fails
    now), scale the update budget to the training pictures, list the candidates (the
    small-folder rule), and take the collection's rows once; returns the Fitting the other
    phases read."""
    s = settings
    say = s.log or (lambda *a: None)
    protocol = s.protocol or Protocol(collection)
    model_params = dict(s.model_params or {})
    cls = model_class(s.model)
    if s.coef_init is not None:
        cls = cls.starting_from(s.coef_init)
    if s.ensemble < 1 or (s.ensemble > 1 and cls.kind != "pamir"):
        raise ValueError(f"an ensemble of {s.ensemble} seeds: give a count of 1 or more, and "
                         "more than 1 only with the pamir model (a linear model, whose models "
                         "average into one)")
    grid = s.grid
    check_points(cls, model_params, grid_points(model_grid(cls, model_params)
                                                if grid is None else grid))
    _check_collection(collection, protocol)
    updates = update_budget(cls, model_params, len(protocol.train))
    model_params = {**{k: updates[k] for k in ("n_updates", "eval_every") if k in updates},
                    **model_params}
    candidates = ([(None, None)] if s.inputs is not None
                  else representation_candidates(s.model, s.representation, model_params))
    started = time.perf_counter()
    left_out = small_folder_candidates(candidates, s.representation, s.inputs, protocol)
    if left_out:
        candidates = candidates[-1:]
        say(f"{left_out['why']}: fitting {candidates[0][0]} alone")
        # (the model's own grid: None, or as `pamir fit` passes it)
        own = model_grid(cls, model_params)
        if (grid is None or grid == own) and own != [{}]:
            grid = {}  # and its own parameters, not a grid (SMALL_FOLDER_PICTURES)
            left_out["what"].append("the parameter grid")
            left_out["why"] += "; so is the parameter grid (it moved test AvgP by 0.15 there)"
    caption_row = np.full(len(collection), -1, np.int64)
    caption_row[protocol.development] = np.arange(len(protocol.development))
    return Fitting(
        settings=s, protocol=protocol, name=collection.name, ids=list(collection.ids),
        paths=[str(p) for p in collection.paths],
        captions=protocol.presence(protocol.development), caption_row=caption_row,
        cls=cls, params=model_params, grid=grid,
        seeds_per_point=1 if s.seeds is None else len(list(s.seeds)), candidates=candidates,
        say=say, workers=fit_workers(cls), updates=updates, left_out=left_out, started=started)


def update_budget(cls, params: dict, n_train: int) -> dict:
    """The update budget of a model's fits on n_train training pictures, as model.json
    records it: the model's own `update_budget` (PAMIR's grows with the pictures) for what
    the caller did not fix in `params`; {} for a model without one."""
    budget = getattr(cls, "update_budget", None)
    if budget is None:
        return {}
    scaled = budget(n_train)
    return {**{k: params.get(k, v) for k, v in scaled.items()}, "train_pictures": int(n_train),
            "scaled": sorted(k for k in scaled if k not in params)}


def _check_collection(collection, protocol) -> None:
    """What would only fail after minutes of feature extraction, said at once."""
    if protocol.T == 0:
        rule = (f"in at least {config.COREL_MIN_TEST_PICTURES} test pictures"
                if len(protocol.test) else
                f"in at least {config.MIN_WORD_PICTURES} training pictures")
        raise ValueError(
            f"{collection.name}: no caption word is {rule} ({len(protocol.train)} training "
            "pictures), so there is nothing to learn; caption more pictures")
    if len(protocol.valid) == 0:
        raise ValueError(
            f"{collection.name}: {len(protocol.development)} captioned pictures leave none "
            "for validation; caption at least 10")


__all__ = ["Candidate", "Fitting", "Trained", "Winner", "plan", "update_budget"]
