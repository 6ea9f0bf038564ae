"""Scoring a query set against a picture set and averaging the metrics, per query subset.

Every model ends in a text-space matrix Z (n_pictures x T); a query vector q scores the
pictures by Z q. Models that rank differently (DRCMRM's KL divergence) provide
`score_queries(Q, X)` instead, and `query_scores` uses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .. import config
from .metrics import average_precision_pessimistic, interpolated_precision, ranking_metrics

CHUNK = 2048  # queries scored at once: bounds memory to CHUNK x n_pictures floats


def query_scores(Z, Q) -> np.ndarray:
    """(n_queries x n_pictures) scores Q Z^T from text-space pictures Z and query vectors Q."""
    Zt = np.asarray(Z.toarray() if sp.issparse(Z) else Z, dtype=np.float32).T
    Q = sp.csr_matrix(Q, dtype=np.float32)
    return np.asarray(Q @ Zt)


@dataclass
class Evaluation:
    """Per-query metrics of one system on one query set, with the query subsets' means."""

    per_query: dict[str, np.ndarray]
    subsets: dict[str, np.ndarray] = field(default_factory=dict)
    curve: np.ndarray | None = None  # mean 11-point interpolated precision

    def mean(self, metric: str = "avgp", subset: str = "all") -> float:
        values = self.per_query[metric]
        mask = self.subsets.get(subset, np.ones(len(values), bool))
        return float(values[mask].mean()) if mask.any() else float("nan")

    def table(self, metrics=("avgp", "bep", "p10")) -> dict[str, dict[str, float]]:
        """{subset: {metric: mean in percent}}."""
        subsets = self.subsets or {"all": np.ones(len(self.per_query["avgp"]), bool)}
        return {
            s: {m: round(100 * self.mean(m, s), 2) for m in metrics} | {"queries": int(mask.sum())}
            for s, mask in subsets.items()
        }


def evaluate_scores(scores_fn, n_queries: int, relevance: sp.csr_matrix,
                    subsets: dict[str, np.ndarray] | None = None, curve: bool = True,
                    ties: str = config.TIES) -> Evaluation:
    """Metrics per query, scoring CHUNK queries at a time with scores_fn(start, stop)."""
    parts: dict[str, list] = {}
    curves = []
    for start in range(0, n_queries, CHUNK):
        stop = min(start + CHUNK, n_queries)
        S, R = scores_fn(start, stop), relevance[start:stop]
        for k, v in ranking_metrics(S, R, ties=ties).items():
            parts.setdefault(k, []).append(v)
        if curve:
            curves.append(interpolated_precision(S, R, ties=ties))
    per_query = {k: np.concatenate(v) for k, v in parts.items()}
    mean_curve = np.concatenate(curves).mean(axis=0) if curves else None
    return Evaluation(per_query, subsets or {}, mean_curve)


def evaluate_text_space(Z, Q, relevance, subsets=None, **kw) -> Evaluation:
    """Evaluate pictures given as text-space vectors Z against query vectors Q."""
    Q = sp.csr_matrix(Q)
    return evaluate_scores(lambda a, b: query_scores(Z, Q[a:b]), Q.shape[0], relevance,
                           subsets, **kw)


def evaluate_model(model, X, Q, relevance, subsets=None, **kw) -> Evaluation:
    """Evaluate a fitted model on pictures X (whatever the model takes) and query vectors Q."""
    Q = sp.csr_matrix(Q)
    if hasattr(model, "score_queries"):
        fn = lambda a, b: np.asarray(model.score_queries(Q[a:b], X))  # noqa: E731
        return evaluate_scores(fn, Q.shape[0], relevance, subsets, **kw)
    return evaluate_text_space(model.transform(X), Q, relevance, subsets, **kw)


def mean_average_precision(Z, Q, relevance) -> float:
    """Mean AvgP of text-space pictures Z: the validation criterion of every model."""
    if config.TIES != "pessimistic":
        return evaluate_text_space(Z, Q, relevance, curve=False).mean("avgp")
    Q, R = sp.csr_matrix(Q), sp.csr_matrix(relevance)
    if Q.shape[0] == 0:
        return float("nan")
    total = 0.0
    for start in range(0, Q.shape[0], CHUNK):  # CHUNK x n_pictures scores at a time
        stop = min(start + CHUNK, Q.shape[0])
        total += average_precision_pessimistic(query_scores(Z, Q[start:stop]),
                                               R[start:stop]).sum()
    return total / Q.shape[0]
