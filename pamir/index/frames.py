"""The frames of videos: per video, the times of the frames read and their rows of the score
matrix, which the catalogue keeps (pamir.index.catalog_frames), so that a hit on a video names
the time of its best frame for the query (`best_times`). Arrays only."""

from __future__ import annotations

import numpy as np

from ..zeroshot.classes import mass_score


def frame_scores(rows: np.ndarray, vector: np.ndarray | None, class_terms, words: int
                 ) -> np.ndarray:
    """(f,) each frame's score for a query: its word rows . the query's vector, plus each
    class term's weight x the mass score of its classes (the index's class rows start at row
    `words`), as a picture's score is made of the same parts."""
    s = np.zeros(len(rows), np.float64)
    if vector is not None and len(vector):
        # a frame row of an older, narrower model (kept by a rescore) scores on its words
        v = np.asarray(vector, np.float32).ravel()[:min(words, rows.shape[1])]
        s += rows[:, :len(v)] @ v
    for weight, classes in class_terms or ():
        c = np.asarray(classes.toarray() if hasattr(classes, "toarray") else classes,
                       np.float32).ravel()
        part = rows[:, words:words + len(c)]
        if part.shape[1] == len(c):
            s += weight * mass_score(part @ c)
    return s


def best_times(found: dict, hits, q, words: int):
    """(hit, the time of its best frame for the query q: a Query or a vector) of the hits
    that are videos; found: their frames ({id: (times, rows)}, FrameTables.read)."""
    vector = getattr(q, "vector", q)
    class_terms = getattr(q, "class_terms", ())
    for h in hits:
        if h.id in found:
            times, rows = found[h.id]
            yield h, float(times[int(np.argmax(frame_scores(rows, vector, class_terms, words)))])


__all__ = ["best_times", "frame_scores"]
