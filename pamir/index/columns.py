"""Column allocation, a part of `ScoreMatrix` (pamir.index.scores): reserving columns no
committed row references (free ones, else fresh ones, growing the matrix), writing pictures'
scores into them, and rewriting every shard for a grown vocabulary. Which picture owns each
column is the matrix's own state.

Columns are global (the catalogue's `col`). A new picture goes into the last shard, which
grows by doubling up to tuning.SHARD_COLUMNS; then a new shard starts. Growing copies one
shard, never the whole matrix. A column in a segment's lists is never reused until a
compaction has rebuilt the lists without it (the matrix's `_listed`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..storage import fsync_dir
from . import tuning
from .layout import Commit, Shard, make_durable

if TYPE_CHECKING:
    from .scores import ScoreMatrix


class Columns:
    """Writing into a ScoreMatrix's columns (the matrix's `_columns`)."""

    def __init__(self, matrix: ScoreMatrix):
        self._matrix = matrix

    def reserve(self, n: int, commit: Commit) -> np.ndarray:
        """n columns that no committed row references and no segment lists, growing the
        matrix if needed (commit(layout) records new files in the catalogue)."""
        m = self._matrix
        free = np.flatnonzero(~m._live & ~m._listed[: m._width])[:n]
        fresh = np.arange(m._width, m._width + n - len(free))
        cols = np.concatenate([free, fresh]).astype(np.int64)
        if len(cols) and cols.max() >= m.capacity:
            self._grow(int(cols.max()) + 1, commit)
        return cols

    def write(self, cols: np.ndarray, Z: np.ndarray) -> None:
        """Store the rows of Z (n x T) in these columns, on disk when this returns: before
        the caller commits any catalogue row that points at them."""
        cols = np.asarray(cols, np.int64)
        if not len(cols):
            return
        for sh in self._matrix.shards:
            inside = (cols >= sh.offset) & (cols < sh.offset + sh.capacity)
            if inside.any():
                sh.map[:, cols[inside] - sh.offset] = Z[inside].T
                sh.map.flush()

    def _grow(self, needed: int, commit: Commit) -> None:
        """Room for `needed` columns: the last shard doubled (up to SHARD_COLUMNS, copied
        into a new file), then new shards; made durable, committed, and only then are the
        replaced files deleted."""
        m = self._matrix
        old = []
        while m.capacity < needed:
            last = m.shards[-1] if m.shards else None
            if last is not None and last.capacity < tuning.SHARD_COLUMNS:
                cap = min(tuning.SHARD_COLUMNS, max(2 * last.capacity, needed - last.offset,
                                                    tuning.MIN_CAPACITY))
                new, name = m._new_matrix(m.T, cap)
                new[:, : last.capacity] = last.map
                old.append(last.name)
                m.shards[-1] = m._durable_shard(new, name, last.offset, last.segments)
            else:
                cap = min(tuning.SHARD_COLUMNS, max(needed - m.capacity, tuning.MIN_CAPACITY))
                new, name = m._new_matrix(m.T, cap)
                m.shards.append(m._durable_shard(new, name, m.capacity))
            m.capacity = sum(s.capacity for s in m.shards)
        fsync_dir(m.directory)
        commit(m.layout())
        listed = np.zeros(m.capacity, dtype=bool)
        listed[: len(m._listed)] = m._listed
        m._listed = listed
        m._tails = None
        for name in old:
            (m.directory / name).unlink(missing_ok=True)

    def rewrite(self, T: int, fill: Callable[[Callable], None], commit: Commit,
                row_map=None) -> None:
        """New files of T rows for every shard (the vocabulary may have grown): the current
        rows are copied in, fill(put) changes what it wants (put(cols, Z) stores the rows of
        Z (n x T) in global columns), then the files are made durable and commit(layout)
        records them (with whatever else must change in the same transaction) before the old
        files are deleted. The segments are dropped (their scores changed): compact after.
        row_map: (old rows, new rows) saying where each copied row goes (default: the first
        rows, in place)."""
        m = self._matrix
        if row_map is None:
            r = min(T, m.T)
            row_map = (np.arange(r), np.arange(r))
        shards = m.shards
        if not shards:  # no picture yet: nothing to copy
            m.T = T
            commit(m.layout())
            return
        old_names = [s.name for s in shards] + [g.name for s in shards for g in s.segments]
        news = []
        for sh in shards:
            new, name = m._new_matrix(T, sh.capacity)
            for o, t in zip(*row_map):
                new[t] = sh.map[o]
            news.append((new, name))

        def put(cols, Z):
            cols = np.asarray(cols, np.int64)
            for sh, (new, _) in zip(shards, news):
                inside = (cols >= sh.offset) & (cols < sh.offset + sh.capacity)
                if inside.any():
                    new[:, cols[inside] - sh.offset] = np.asarray(Z)[inside].T

        if fill is not None:
            fill(put)
        for new, name in news:
            make_durable(new, m.directory / name)
        fsync_dir(m.directory)
        m.T = T
        names = [name for _, name in news]
        m.shards = [Shard(sh.offset, sh.capacity, name, m._map_of(name, sh.capacity))
                       for sh, name in zip(shards, names)]
        commit(m.layout())
        m._refresh_listed()
        for name in old_names:
            if name not in names:
                (m.directory / name).unlink(missing_ok=True)
