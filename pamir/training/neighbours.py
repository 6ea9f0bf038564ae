"""The neighbours phase of `fit_system`: a PAMIR system on CNN views gets a label-transfer
part (pamir.models.neighbours), its k, temperature and mix weight chosen on validation once
PAMIR is trained (`add_neighbours`, `choose_neighbours`).
"""

from __future__ import annotations

import time

import numpy as np

from .. import config
from ..evaluation.retrieval import mean_average_precision
from ..features.registry import Concatenation, as_matrix
from ..features.representation import take_rows
from ..models.base import dense_float32
from ..models.neighbours import LabelTransfer, Neighbours, fit_projection, mix_stats, mixed, view_of
from .assembly import averaged
from .plan import Fitting, Trained
from .selection import validation_queries


def add_neighbours(fitting: Fitting, trained: Trained) -> Trained:
    """With settings.neighbours (None: config.NEIGHBOURS), a PAMIR system on CNN views gets
    a neighbour part (`choose_neighbours`), kept where it beats the model alone on
    validation."""
    f, c = fitting, trained.winner.candidate
    asked = f.settings.neighbours
    views = (neighbour_views(c.rep) if (config.NEIGHBOURS if asked is None else asked)
             and f.cls.kind == "pamir" else [])
    if not views:
        return trained
    started = time.perf_counter()
    members = trained.members
    part, knn_info = choose_neighbours(
        averaged(f.cls, members), c.F, c.train, c.valid,
        c.Y_train, c.Y_valid, views, ids=[f.ids[i] for i in c.train],
        paths=[f.paths[i] for i in c.train])
    f.timing["neighbours"] = round(time.perf_counter() - started, 2)
    f.say(f"neighbours: k {knn_info['k']}, temperature {knn_info['temperature']}, "
          f"weight {knn_info['alpha']}: validation AvgP {knn_info['valid_avgp']:.2f} "
          f"(the model alone {knn_info['model_valid_avgp']:.2f})"
          + ("" if part is not None else ": left out"))
    trained.neighbours, trained.knn_info = part, knn_info
    if part is not None:
        trained.valid_avgp = knn_info["valid_avgp"]
    return trained


def neighbour_views(rep) -> list[tuple[int, int]]:
    """[start, stop) column ranges of the CNN views in the model's input, for the
    neighbours: the global average of each (config.NEIGHBOUR_GLOBAL_VIEWS) or all of it. Only
    the CNN parts before any other part are used (their widths are known without reading
    the pictures); [] when the representation starts with none."""
    parts = rep.parts if isinstance(rep, Concatenation) else [rep]
    views, at = [], 0
    for p in parts:
        if getattr(p, "kind", None) != "cnn":
            break
        width = p.dim // (1 + p.settings.regions ** 2) if config.NEIGHBOUR_GLOBAL_VIEWS else p.dim
        views.append((at, at + width))
        at += p.dim
    return views


def choose_neighbours(model, F, train: np.ndarray, valid: np.ndarray, Y_train, Y_valid,
                      views, *, ids=None, paths=None, grid: dict | None = None
                      ) -> tuple[Neighbours | None, dict]:
    """The neighbour part for a fitted model: the training pictures vote, and k, the
    temperature and the mix weight alpha are chosen on the validation pictures' AvgP (grid:
    {"k", "temperature", "alpha"} lists, config.NEIGHBOUR_* by default; the first best
    wins). The mix's statistics are measured on the validation pictures too. Y_train,
    Y_valid: the pictures' caption presence. Returns (the part, or None where alpha = 0
    wins; what was tried)."""
    grid = {"k": config.NEIGHBOUR_K, "temperature": config.NEIGHBOUR_TEMPERATURE,
            "alpha": config.NEIGHBOUR_ALPHA} | dict(grid or {})
    X_valid = as_matrix(take_rows(F, valid))
    queries = validation_queries(Y_valid, Y_train)
    P = dense_float32(model.transform(X_valid))

    def avgp(Z):
        return 100 * mean_average_precision(Z, queries.vectors, queries.relevance)

    V_train = view_of(take_rows(F, train), views)
    projection = (fit_projection(V_train, config.NEIGHBOUR_DIMS, config.SEED)
                  if config.NEIGHBOUR_DIMS else None)
    shape = Neighbours(LabelTransfer(), views, 0.0, {}, projection)  # the views it compares
    transfer = LabelTransfer(k=max(grid["k"]), floor=config.NEIGHBOUR_FLOOR).fit(
        shape.project(V_train), Y_train, ids, paths)
    sims, nbrs = transfer.search(shape.view(X_valid))
    alone = avgp(P)
    trials, best = [], None
    for k in grid["k"]:
        for temperature in grid["temperature"]:
            transfer.set_params(k=k, temperature=temperature)
            L = transfer.log_vote(transfer.vote_of(sims, nbrs))
            stats = mix_stats(P, L)
            for alpha in grid["alpha"]:
                value = alone if alpha == 0 else avgp(mixed(P, L, alpha, stats))
                trials.append({"k": k, "temperature": temperature, "alpha": alpha,
                               "valid_avgp": round(float(value), 3)})
                if best is None or value > best[0]:
                    best = (value, k, temperature, alpha, stats)
    value, k, temperature, alpha, stats = best
    transfer.set_params(k=k, temperature=temperature)
    info = {"k": k, "temperature": temperature, "alpha": alpha, "floor": transfer.floor,
            "valid_avgp": round(float(value), 3), "model_valid_avgp": round(float(alone), 3),
            "views": [list(v) for v in views], "dims": int(transfer.vectors_.shape[1]),
            "stats": stats, "grid": trials}
    return (Neighbours(transfer, views, alpha, stats, projection) if alpha > 0 else None), info


__all__ = ["add_neighbours", "choose_neighbours", "neighbour_views"]
