"""Column allocation, a part of `ScoreMatrix` (pamir.index.scores): which picture owns each
column, reserving columns no committed row references (free ones, else fresh ones, growing
the matrix), writing pictures' scores into them, and rewriting every shard for a grown
vocabulary.

Columns are global (the catalogue's `col`). A new picture goes into the last shard, which
grows by doubling up to tuning.SHARD_COLUMNS; then a new shard starts. Growing copies one
shard, never the whole matrix. A column in a segment's lists is never reused until a
compaction has rebuilt the lists without it (`_listed`, kept by `compaction`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..storage import fsync_dir
from . import tuning
from .layout import Commit, Shard, make_durable


class Columns:
    """The column owners of a ScoreMatrix, and writing into its columns."""

    def __len__(self) -> int:
        """How many columns belong to a picture."""
        return int(self._live.sum())

    # ------------------------------------------------------------------ owners
    def assign(self, cols: Sequence[int], ids: Sequence[int] | int) -> None:
        """Columns now owned by these pictures (after the catalogue committed it)."""
        cols = np.asarray(cols, dtype=np.int64)
        if len(cols) and cols.max() >= len(self._col_id):
            grown = np.full(int(cols.max()) + 1, -1, dtype=np.int64)
            grown[: len(self._col_id)] = self._col_id
            self._col_id = grown
        self._col_id[cols] = ids
        self._tails = None
        live = np.flatnonzero(self._col_id >= 0)
        self._width = int(live[-1]) + 1 if len(live) else 0
        self._col_id = self._col_id[: self._width]
        self._live = self._col_id >= 0

    def _move(self, old: np.ndarray, new: np.ndarray) -> None:
        """The pictures of columns `old` now own columns `new` (a committed compaction)."""
        ids = self._col_id[old]
        self._col_id[old] = -1
        self.assign(new, ids)

    def release(self, cols: Sequence[int]) -> None:
        """Columns whose rows the catalogue deleted: free (for reuse once in no list)."""
        self.assign(cols, -1)

    def ids_of(self, cols) -> np.ndarray:
        """The picture ids owning these columns (-1: free)."""
        cols = np.asarray(cols, dtype=np.int64)
        out = np.full(len(cols), -1, dtype=np.int64)
        inside = cols < self._width
        out[inside] = self._col_id[cols[inside]]
        return out

    def live_mask(self) -> np.ndarray:
        """(width,) whether each column belongs to a picture."""
        return self._live.copy()

    # ------------------------------------------------------------------ writing
    def reserve(self, n: int, commit: Commit) -> np.ndarray:
        """n columns that no committed row references and no segment lists, growing the
        matrix if needed (commit(layout) records new files in the catalogue)."""
        free = np.flatnonzero(~self._live & ~self._listed[: self._width])[:n]
        fresh = np.arange(self._width, self._width + n - len(free))
        cols = np.concatenate([free, fresh]).astype(np.int64)
        if len(cols) and cols.max() >= self.capacity:
            self._grow(int(cols.max()) + 1, commit)
        return cols

    def write(self, cols: np.ndarray, Z: np.ndarray) -> None:
        """Store the rows of Z (n x T) in these columns, on disk when this returns: before
        the caller commits any catalogue row that points at them."""
        cols = np.asarray(cols, np.int64)
        if not len(cols):
            return
        for sh in self.shards:
            inside = (cols >= sh.offset) & (cols < sh.offset + sh.capacity)
            if inside.any():
                sh.map[:, cols[inside] - sh.offset] = Z[inside].T
                sh.map.flush()

    def _grow(self, needed: int, commit: Commit) -> None:
        """Room for `needed` columns: the last shard doubled (up to SHARD_COLUMNS, copied
        into a new file), then new shards; made durable, committed, and only then are the
        replaced files deleted."""
        old = []
        while self.capacity < needed:
            last = self.shards[-1] if self.shards else None
            if last is not None and last.capacity < tuning.SHARD_COLUMNS:
                cap = min(tuning.SHARD_COLUMNS, max(2 * last.capacity, needed - last.offset,
                                                    tuning.MIN_CAPACITY))
                new, name = self._new_matrix(self.T, cap)
                new[:, : last.capacity] = last.map
                old.append(last.name)
                self.shards[-1] = self._durable_shard(new, name, last.offset, last.segments)
            else:
                cap = min(tuning.SHARD_COLUMNS, max(needed - self.capacity, tuning.MIN_CAPACITY))
                new, name = self._new_matrix(self.T, cap)
                self.shards.append(self._durable_shard(new, name, self.capacity))
            self.capacity = sum(s.capacity for s in self.shards)
        fsync_dir(self.directory)
        commit(self.layout())
        listed = np.zeros(self.capacity, dtype=bool)
        listed[: len(self._listed)] = self._listed
        self._listed = listed
        self._tails = None
        for name in old:
            (self.directory / name).unlink(missing_ok=True)

    def rewrite(self, T: int, fill: Callable[[Callable], None], commit: Commit,
                row_map=None) -> None:
        """New files of T rows for every shard (the vocabulary may have grown): the current
        rows are copied in, fill(put) changes what it wants (put(cols, Z) stores the rows of
        Z (n x T) in global columns), then the files are made durable and commit(layout)
        records them (with whatever else must change in the same transaction) before the old
        files are deleted. The segments are dropped (their scores changed): compact after.
        row_map: (old rows, new rows) saying where each copied row goes (default: the first
        rows, in place)."""
        if row_map is None:
            r = min(T, self.T)
            row_map = (np.arange(r), np.arange(r))
        shards = self.shards
        if not shards:  # no picture yet: nothing to copy
            self.T = T
            commit(self.layout())
            return
        old_names = [s.name for s in shards] + [g.name for s in shards for g in s.segments]
        news = []
        for sh in shards:
            new, name = self._new_matrix(T, sh.capacity)
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
            make_durable(new, self.directory / name)
        fsync_dir(self.directory)
        self.T = T
        names = [name for _, name in news]
        self.shards = [Shard(sh.offset, sh.capacity, name, self._map_of(name, sh.capacity))
                       for sh, name in zip(shards, names)]
        commit(self.layout())
        self._refresh_listed()
        for name in old_names:
            if name not in names:
                (self.directory / name).unlink(missing_ok=True)
