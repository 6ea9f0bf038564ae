"""The score matrix: the pictures' text-space vectors, word-major and memory-mapped.

`scores-<generation>.f32` is a raw float32 (T x capacity) matrix; row t holds word t's score
for every picture, so a query reads only the rows of its words (a 3-word query over 1M
pictures reads 12 MB, not 716 MB). Each picture owns one column; the catalogue row names it,
and `ScoreMatrix` keeps the reverse map (column -> picture id, -1 for a free column).

Crash safety, with the catalogue: columns are written in place only into slots that no
committed row references (fresh or freed ones) and flushed before the rows that point at them
are committed, so a crash leaves at worst an unreferenced slot. Growing writes a whole new
generation, fsyncs it and has the caller commit its name before the old file is deleted; a
file that no commit names is an orphan, deleted the next time the index is opened for writing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..storage import fsync_dir

#: The smallest matrix, in columns: growing by doubling from here keeps copies rare.
MIN_CAPACITY = 1024


def matrix_name(generation: int) -> str:
    return f"scores-{generation}.f32"


def matrix_files(directory: Path) -> list[Path]:
    """Every score-matrix file in an index folder, current or orphaned."""
    return sorted(Path(directory).glob("scores-*.f32"))


class ScoreMatrix:
    """The current matrix file of an index and which picture owns each column.

    `name` is the file the catalogue names ("" before the first picture), `capacity` its
    columns. Not thread-safe by itself: the Index facade serialises calls.
    """

    def __init__(self, directory: Path, T: int, name: str, capacity: int, generation: int,
                 writable: bool):
        self.directory = Path(directory)
        self.T = T
        self.writable = writable
        self._open(name, capacity, generation)
        self._col_id = np.full(0, -1, dtype=np.int64)
        self._width = 0  # columns up to the last owned one: what a query scores
        self._live = np.zeros(0, dtype=bool)

    def _open(self, name: str, capacity: int, generation: int) -> None:
        self.name, self.capacity, self.generation = name, capacity, generation
        self._map = None
        if name:
            self._map = np.memmap(self.directory / name, dtype=np.float32,
                                  mode="r+" if self.writable else "r", shape=(self.T, capacity))

    @property
    def path(self) -> Path | None:
        return self.directory / self.name if self.name else None

    def close(self) -> None:
        self._map = None

    def __len__(self) -> int:
        """How many columns belong to a picture."""
        return int(self._live.sum())

    # ------------------------------------------------------------------ column owners
    def assign(self, cols: Sequence[int], ids: Sequence[int] | int) -> None:
        """Columns now owned by these pictures (after the catalogue committed it)."""
        cols = np.asarray(cols, dtype=np.int64)
        if len(cols) and cols.max() >= len(self._col_id):
            grown = np.full(int(cols.max()) + 1, -1, dtype=np.int64)
            grown[: len(self._col_id)] = self._col_id
            self._col_id = grown
        self._col_id[cols] = ids
        live = np.flatnonzero(self._col_id >= 0)
        self._width = int(live[-1]) + 1 if len(live) else 0
        self._col_id = self._col_id[: self._width]
        self._live = self._col_id >= 0

    def release(self, cols: Sequence[int]) -> None:
        """Columns whose rows the catalogue deleted: free for reuse."""
        self.assign(cols, -1)

    # ------------------------------------------------------------------ scoring
    def scores(self, q: np.ndarray) -> np.ndarray:
        """z . q for every column (free columns -inf), reading only the rows of q's words."""
        q = np.asarray(q, dtype=np.float32).ravel()
        if q.shape != (self.T,):
            raise ValueError(f"query vector of length {q.size}; the vocabulary has {self.T}")
        out = np.zeros(self._width, dtype=np.float32)
        if self._width:  # an index with no picture has no matrix yet
            for t in np.flatnonzero(q):
                out += q[t] * self._map[t, : self._width]
        out[~self._live] = -np.inf
        return out

    def best(self, q: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(picture id, score) of the k best pictures for q, best first."""
        return self.best_of(self.scores(q), k)

    def best_of(self, s: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(picture id, score) of the k best columns by the scores s (one per column, -inf
        for those left out), best first; equal scores by id."""
        k = min(int(k), int(np.isfinite(s).sum()))
        if k == 0:
            return []
        if k < len(s):
            # every picture tied with the k-th best competes, so that among equal scores
            # the smallest ids win and the top 3 are the first 3 of the top 8
            kth = s[np.argpartition(-s, k - 1)[k - 1]]
            top = np.flatnonzero(s >= kth)
        else:
            top = np.arange(len(s))
        # Highest score first; equal scores by id, so results are reproducible.
        top = top[np.lexsort((self._col_id[top], -s[top]))][:k]
        return [(int(self._col_id[c]), float(s[c])) for c in top]

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

    def similarities(self, z: np.ndarray, mean: np.ndarray | None = None) -> np.ndarray:
        """Cosine similarity of every column's first len(z) rows to z (free columns -inf),
        both centred on `mean` when given. Reads every row it compares, unlike a query."""
        z = np.asarray(z, dtype=np.float64).ravel()
        out = np.full(self._width, -np.inf, dtype=np.float32)
        if not self._width:
            return out
        M = np.asarray(self._map[: len(z), : self._width], dtype=np.float32)  # rows x width
        mean = np.zeros(len(z)) if mean is None else np.asarray(mean, dtype=np.float64)
        zc = (z - mean).astype(np.float32)
        Mc = M - mean.astype(np.float32)[:, None]
        dots = zc @ Mc
        norms = np.sqrt(np.einsum("tn,tn->n", Mc, Mc)) * max(float(np.linalg.norm(zc)), 1e-12)
        sims = dots / np.maximum(norms, 1e-12)
        out[self._live] = sims[self._live]
        return out

    def mean(self, rows: int | None = None) -> np.ndarray:
        """(rows,) the mean of the pictures' first `rows` rows (all rows by default)."""
        rows = self.T if rows is None else int(rows)
        if not len(self):
            return np.zeros(rows)
        M = np.asarray(self._map[:rows, : self._width], dtype=np.float64)
        return M[:, self._live].mean(axis=1)

    def column(self, col: int) -> np.ndarray:
        """A picture's text-space vector z (T,), a copy."""
        return np.array(self._map[:, col], dtype=np.float32)

    # ------------------------------------------------------------------ writing
    def reserve(self, n: int, commit: Callable[[str, int, int], None]) -> np.ndarray:
        """n columns that no committed row references, growing the matrix if needed
        (commit(name, capacity, generation) records a new file in the catalogue)."""
        free = np.flatnonzero(~self._live)[:n]
        fresh = np.arange(self._width, self._width + n - len(free))
        cols = np.concatenate([free, fresh]).astype(np.int64)
        if len(cols) and cols.max() >= self.capacity:
            self._grow(max(2 * self.capacity, int(cols.max()) + 1, MIN_CAPACITY), commit)
        return cols

    def write(self, cols: np.ndarray, Z: np.ndarray) -> None:
        """Store the rows of Z (n x T) in these columns, on disk when this returns: before
        the caller commits any catalogue row that points at them."""
        if len(cols):
            self._map[:, cols] = Z.T
            self._map.flush()

    def _grow(self, capacity: int, commit: Callable[[str, int, int], None]) -> None:
        """Copy the matrix into a bigger new file, make it durable, have it committed, and
        only then delete the old one."""
        self._new_generation(self.T, capacity, None, commit)

    def rewrite(self, T: int, fill: Callable[[np.memmap], None],
                commit: Callable[[str, int, int], None], row_map=None) -> None:
        """A new generation of T rows (the vocabulary may have grown): the current rows are
        copied in, fill(new map) changes what it wants, then the file is made durable and
        commit(name, capacity, generation) records it (with whatever else must change in the
        same transaction) before the old file is deleted; a crash before the commit leaves
        an orphan, deleted at the next writable open. row_map: (old rows, new rows) saying
        where each copied row goes (default: the first rows, in place)."""
        self._new_generation(T, max(self.capacity, MIN_CAPACITY), fill, commit, row_map)

    def _new_generation(self, T: int, capacity: int, fill, commit, row_map=None) -> None:
        generation = self.generation + 1
        name = matrix_name(generation)
        path = self.directory / name
        new = np.memmap(path, dtype=np.float32, mode="w+", shape=(T, capacity))
        if self._map is not None:
            if row_map is None:
                rows = min(T, self.T)
                row_map = (np.arange(rows), np.arange(rows))
            for old, to in zip(*row_map):
                new[to, : self.capacity] = self._map[old]
        if fill is not None:
            fill(new)
        new.flush()
        del new
        with open(path, "rb+") as f:
            os.fsync(f.fileno())
        fsync_dir(self.directory)
        commit(name, capacity, generation)
        old = self.path
        self.T = T
        self._open(name, capacity, generation)
        if old is not None and old != self.path:
            old.unlink(missing_ok=True)

    def remove_orphans(self) -> None:
        """Delete the files of grows that never committed."""
        for p in matrix_files(self.directory):
            if p.name != self.name:
                p.unlink(missing_ok=True)
