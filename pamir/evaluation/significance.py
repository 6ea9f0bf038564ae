"""Paired significance of the difference between two systems' per-query scores."""

from __future__ import annotations

import numpy as np
from scipy import stats


def wilcoxon(a, b, alpha: float = 0.05) -> dict:
    """Two-sided Wilcoxon signed-rank test of per-query scores a vs b (same queries).

    Queries on which the two systems agree carry no information and are dropped ("wilcox"
    zero method), as is usual for this test.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        raise ValueError(f"paired scores differ in length: {a.shape} vs {b.shape}")
    d = a - b
    if not np.any(d != 0):
        return {"statistic": 0.0, "pvalue": 1.0, "significant": False, "better": None,
                "n": 0}
    res = stats.wilcoxon(a, b, zero_method="wilcox", alternative="two-sided")
    p = float(res.pvalue)
    return {
        "statistic": float(res.statistic),
        "pvalue": p,
        "significant": p < alpha,
        "better": "a" if d.mean() > 0 else "b",
        "n": int(np.count_nonzero(d)),
    }
