"""Rankings as TREC run files and relevance as qrels, for trec_eval or ir-measures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp


def write_run(path, qids, docids, scores, tag: str = "pamir", depth: int | None = None) -> None:
    """One line `qid Q0 docid rank score tag` per ranked picture, best first.

    scores: (n_queries x n_pictures). Ties keep the picture order (stable sort); trec_eval
    re-sorts by score and breaks ties by docid, so its figures can differ on tied scores.
    """
    scores = np.asarray(scores)
    docids = list(docids)
    with open(path, "w", encoding="utf-8") as f:
        for qid, row in zip(qids, scores):
            order = np.argsort(-row, kind="stable")[:depth]
            for rank, j in enumerate(order, 1):
                f.write(f"{qid} Q0 {docids[j]} {rank} {row[j]:.8g} {tag}\n")


def write_qrels(path, qids, docids, relevance) -> None:
    """One line `qid 0 docid 1` per relevant (query, picture) pair."""
    R = sp.csr_matrix(relevance)
    docids = list(docids)
    with open(path, "w", encoding="utf-8") as f:
        for i, qid in enumerate(qids):
            for j in R.indices[R.indptr[i]:R.indptr[i + 1]]:
                f.write(f"{qid} 0 {docids[j]} 1\n")


def read_run(path) -> dict[str, dict[str, float]]:
    """{qid: {docid: score}} from a run file."""
    run: dict[str, dict[str, float]] = {}
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        parts = line.split()
        if len(parts) != 6:
            raise ValueError(f"{path}:{lineno}: expected 6 fields 'qid Q0 doc rank score tag'")
        run.setdefault(parts[0], {})[parts[2]] = float(parts[4])
    return run
