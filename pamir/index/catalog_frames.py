"""A part of the catalogue (pamir.index.catalog): the SQL of the `frames` table
(layout.FRAMES_SCHEMA): per video, the times of the frames read and their rows of the score
matrix, small (float16). A frame's score for a query is pamir.index.frames'."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

import numpy as np

from .catalog_base import Schema, marks


class FrameTables:
    """The videos' frames of an open catalogue (`Catalog.frames`)."""

    def __init__(self, conn: sqlite3.Connection, schema: Schema):
        self._conn, self._schema = conn, schema

    def write(self, picture_id: int, times, rows) -> None:
        """A video's frames: times (f,) seconds, rows (f x R) its frames' rows of the matrix
        (inside the caller's transaction)."""
        times = np.asarray(times, np.float32)
        rows = np.asarray(rows, np.float32)
        if rows.ndim != 2 or len(rows) != len(times):
            raise ValueError(f"{len(times)} frame times for frame rows of shape {rows.shape}")
        self._conn.execute("INSERT OR REPLACE INTO frames VALUES (?, ?, ?)",
                           (int(picture_id), times.tobytes(), rows.astype(np.float16).tobytes()))

    def read(self, ids: Iterable[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """{id: (times (f,), rows (f x R) float32)} of those of `ids` that are videos; empty
        for a catalogue older than the frames table."""
        ids = [int(i) for i in ids]
        if not ids or not self._schema.has_table("frames"):
            return {}
        out = {}
        for i, t, r in self._conn.execute(
                f"SELECT picture, times, rows FROM frames WHERE picture IN ({marks(ids)})", ids):
            times = np.frombuffer(t, np.float32)
            out[int(i)] = times, np.frombuffer(r, np.float16).astype(np.float32).reshape(
                len(times), -1)
        return out
