"""The frames of videos in the catalogue (layout.FRAMES_SCHEMA): per video, the times of the
frames read and their rows of the score matrix, small (float16), so that a hit on a video
names the time of its best frame for the query (`best_times`). SQL and arrays only."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

import numpy as np

from ..zeroshot.classes import mass_score


def write(conn: sqlite3.Connection, picture_id: int, times, rows) -> None:
    """A video's frames: times (f,) seconds, rows (f x R) its frames' rows of the matrix."""
    times = np.asarray(times, np.float32)
    rows = np.asarray(rows, np.float32)
    if rows.ndim != 2 or len(rows) != len(times):
        raise ValueError(f"{len(times)} frame times for frame rows of shape {rows.shape}")
    conn.execute("INSERT OR REPLACE INTO frames VALUES (?, ?, ?)",
                 (int(picture_id), times.tobytes(), rows.astype(np.float16).tobytes()))


def read(conn: sqlite3.Connection, ids: Iterable[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """{id: (times (f,), rows (f x R) float32)} of those of `ids` that are videos; empty for a
    catalogue older than the frames table."""
    ids = [int(i) for i in ids]
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'frames'"
                       ).fetchone()
    if not ids or has is None:
        return {}
    out = {}
    for i, t, r in conn.execute(f"SELECT picture, times, rows FROM frames WHERE picture IN "
                                f"({','.join('?' * len(ids))})", ids):
        times = np.frombuffer(t, np.float32)
        out[int(i)] = times, np.frombuffer(r, np.float16).astype(np.float32).reshape(
            len(times), -1)
    return out


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
    that are videos; found: `read`'s answer for their ids."""
    vector = getattr(q, "vector", q)
    class_terms = getattr(q, "class_terms", ())
    for h in hits:
        if h.id in found:
            times, rows = found[h.id]
            yield h, float(times[int(np.argmax(frame_scores(rows, vector, class_terms, words)))])


__all__ = ["best_times", "frame_scores", "read", "write"]
