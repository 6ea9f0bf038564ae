"""The jobs of `pamir fit` and `pamir evaluate`: train a whole system on captioned pictures,
and measure one on a split's queries (what `pamir models` lists is
pamir.training.selection.models_description).

    collection = load_collection("corel5k")
    system = fit_or_refit(collection, Path("models/corel"), "pamir", model_params={},
                          grid=[{}])
    system, result = evaluate("models/corel", "corel5k", "test")

The training, the models and the evaluation are imported at this module's top (scipy,
scikit-learn, numba: about 3 s): commands/fit.py imports this module only when `pamir fit` or
`evaluate` runs, so that `pamir fit --help` does not wait for them.
"""

from __future__ import annotations

from pathlib import Path

from ..evaluation.trec import write_qrels, write_run
from ..facts.collection import load_collection
from ..features.cnn import cnn_views
from ..features.registry import parse_name
from ..models import MODELS
from ..models.base import check_replaceable
from ..system import System, evaluate_system
from ..training import fit_or_refit
from ..training.selection import model_grid
from .loading import load_system


def check_request(output: Path, representations) -> None:
    """ValueError or OSError for a request that would fail after minutes of features: an
    OUTPUT that cannot be replaced, a representation's name that is not one."""
    check_replaceable(output.resolve())
    for name in representations or ():
        parse_name(name)


def validation_grid(model: str, params: dict, no_grid: bool) -> list[dict]:
    """The grid `pamir fit` searches on validation: [{}] (the defaults and --param) with
    --no-grid, else the model's grid less the fixed parameters."""
    return [{}] if no_grid else model_grid(model, params)


def precision_notes(system: System) -> list[str]:
    """Each CNN view's precision, and why (CNNRepresentation.precision_says)."""
    return [view.precision_says() for view in cnn_views(system)]


def evaluate(model: Path, data: str, split: str, *, scores: bool,
             progress: bool) -> tuple[System, dict]:
    """The system in `model` and its evaluation on `split` of `data` (evaluate_system); the
    block cache makes a second evaluation of the same pictures cheap."""
    system = load_system(model, progress=progress)
    return system, evaluate_system(system, load_collection(data), split, scores=scores)


def write_trec(system: System, result: dict, run: Path | None, qrels: Path | None) -> None:
    """The evaluation's TREC run and qrels files, those asked for."""
    if run is not None:
        write_run(run, result["qids"], result["docids"], result["scores"], tag=system.model.kind)
    if qrels is not None:
        write_qrels(qrels, result["qids"], result["docids"], result["relevance"])


__all__ = ["MODELS", "check_request", "evaluate", "fit_or_refit", "load_collection",
           "precision_notes", "validation_grid", "write_trec"]
