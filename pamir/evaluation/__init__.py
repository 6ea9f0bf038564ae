"""Evaluation: metrics, significance, TREC export, and scoring query sets."""

from .metrics import (annotation_metrics, average_precision, interpolated_precision,
                      precision_at, r_precision, ranking_metrics)
from .retrieval import (Evaluation, evaluate_model, evaluate_text_space,
                        mean_average_precision, query_scores)
from .significance import wilcoxon

__all__ = [
    "annotation_metrics", "average_precision", "interpolated_precision", "precision_at",
    "r_precision", "ranking_metrics", "Evaluation", "evaluate_model", "evaluate_text_space",
    "mean_average_precision", "query_scores", "wilcoxon",
]
