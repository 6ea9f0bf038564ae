"""Evaluation: metrics, significance, TREC export, and scoring query sets."""

from .metrics import (
    annotation_metrics,
    average_precision,
    interpolated_precision,
    precision_at,
    prediction_metrics,
    r_precision,
    ranking_metrics,
)
from .retrieval import (
    Evaluation,
    evaluate_model,
    evaluate_text_space,
    mean_average_precision,
    query_scores,
)


def __getattr__(name: str):
    # the significance tests import scipy.stats (about a second): only when asked for, so
    # that `pamir index` (through pamir.system and pamir.training.selection) does not pay for it
    if name == "wilcoxon":
        # scipy.stats: 0.5 s; PEP 562, only significance tests need it
        from .significance import wilcoxon  # noqa: PLC0415

        return wilcoxon
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "annotation_metrics", "average_precision", "interpolated_precision", "precision_at",
    "prediction_metrics",
    "r_precision", "ranking_metrics", "Evaluation", "evaluate_model", "evaluate_text_space",
    "mean_average_precision", "query_scores", "wilcoxon",
]
