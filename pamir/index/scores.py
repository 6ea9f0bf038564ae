"""The score matrix: the pictures' text-space vectors, word-major, memory-mapped, in shards,
with per-word lists sorted by score for exact top-k search without a full scan.

Shards. Columns are global (the catalogue's `col`), split into shards, one matrix file each:
row t holds word t's score for each of the shard's pictures, so a query reads only its
words' rows. Segments. Beside each shard's matrix, lists files each hold one segment: for a
set of the shard's columns, per word row the columns sorted by that word's score, and per
block of columns each word's highest and lowest score. The files' format is
pamir.index.layout's; their sizes and thresholds are pamir.index.tuning's.

`ScoreMatrix` holds the state this module opens (the shards, which picture owns each column,
which columns a segment lists), and its jobs as parts, one module each, members that work
from that state: `columns` (reserving, growing and writing columns), `scoring` (a query's
scores, the top-k dispatch over pamir.index.topk's kernels, similarities) and `compaction`
(sealing tails into segments, merging them, compacting).

Crash safety, with the catalogue: columns are written in place only into slots that no
committed row references (fresh or freed ones) and flushed before the rows that point at them
are committed, so a crash leaves at worst an unreferenced slot. A grown shard, a new segment
or a rewritten matrix is a new file, fsynced, and the caller commits the new layout
(`meta.shards`) before any file it replaces is deleted; a file no commit names is an orphan,
deleted the next time the index is opened for writing.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .columns import Columns
from .compaction import Compaction
from .layout import (Shard, ShardMeta, create_matrix, make_durable, matrix_files, matrix_name,
                     open_matrix, open_shard)
from .parts import delegate
from .scoring import Scoring


class ScoreMatrix:
    """The shards of an index and which picture owns each column, with its jobs as parts
    (`_columns`, `_scoring`, `_compaction`).

    rows: the matrix rows (T words, then C classes); words: the rows that get sorted lists.
    shards: the catalogue's `meta.shards`. Not thread-safe by itself: the Index facade
    serialises calls.
    """

    def __init__(self, directory: Path, rows: int, shards: Sequence[ShardMeta],
                 generation: int, writable: bool, words: int | None = None):
        self.directory = Path(directory)
        self.T = rows
        self.words = rows if words is None else int(words)
        self.writable = writable
        self.generation = generation  # the last generation a file was named with
        self._open(shards)
        self._col_id = np.full(0, -1, dtype=np.int64)  # each column's picture id (-1: free)
        self._tails = None  # the cache of each shard's tail (`_tail_cols`)
        self._width = 0  # columns up to the last owned one: what a query scores
        self._live = np.zeros(0, dtype=bool)
        matrix = weakref.proxy(self)  # held weakly: no cycle keeps the files open
        self._columns = Columns(matrix)
        self._scoring = Scoring(matrix)
        self._compaction = Compaction(matrix)

    # ------------------------------------------------------------------ the parts' methods
    reserve = delegate("_columns", Columns.reserve)
    write = delegate("_columns", Columns.write)
    rewrite = delegate("_columns", Columns.rewrite)
    scores = delegate("_scoring", Scoring.scores)
    best = delegate("_scoring", Scoring.best)
    best_of = delegate("_scoring", Scoring.best_of)
    top = delegate("_scoring", Scoring.top)
    similarities = delegate("_scoring", Scoring.similarities)
    mean = delegate("_scoring", Scoring.mean)
    column = delegate("_scoring", Scoring.column)
    seal = delegate("_compaction", Compaction.seal)
    compact = delegate("_compaction", Compaction.compact)
    tail_sizes = delegate("_compaction", Compaction.tail_sizes)
    segment_counts = delegate("_compaction", Compaction.segment_counts)

    # ------------------------------------------------------------------ column owners
    def __len__(self) -> int:
        """How many columns belong to a picture."""
        return int(self._live.sum())

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

    def _tail_cols(self) -> list[np.ndarray]:
        """Per shard (up to the width), its live columns in no segment, local; cached until
        the columns' owners or the segments change."""
        if self._tails is None:
            self._tails = [np.flatnonzero(~self._listed[a:b] & self._live[a:b])
                           for _, a, b in self._spans()]
        return self._tails

    def _refresh_listed(self) -> None:
        """Which columns a segment lists (never reused until a compaction drops them)."""
        self._tails = None
        self._listed = np.zeros(self.capacity, dtype=bool)
        for sh in self.shards:
            for seg in sh.segments:
                self._listed[sh.offset + seg.ids[0]] = True

    # ------------------------------------------------------------------ shards
    def _open(self, shards: Sequence[ShardMeta]) -> None:
        self.shards: list[Shard] = []
        offset = 0
        for s in shards:
            self.shards.append(open_shard(self.directory, offset, s, self.T, self.words,
                                          self.writable))
            offset += int(s["capacity"])
        self.capacity = offset
        self._refresh_listed()

    def layout(self) -> dict:
        """What the catalogue records: {"shards": [...], "generation": g}."""
        return {"shards": [s.meta() for s in self.shards], "generation": self.generation}

    @property
    def path(self) -> Path | None:
        """The first shard's matrix file (a one-shard index's whole matrix)."""
        return self.directory / self.shards[0].name if self.shards else None

    def close(self) -> None:
        self.shards = []

    def _shard_of(self, col: int) -> Shard:
        for sh in self.shards:
            if sh.offset <= col < sh.offset + sh.capacity:
                return sh
        raise IndexError(col)

    def _spans(self, width: int | None = None):
        """(shard, start, stop) global column spans of the shards up to width."""
        width = self._width if width is None else width
        for sh in self.shards:
            stop = min(sh.offset + sh.capacity, width)
            if stop > sh.offset:
                yield sh, sh.offset, stop

    # ------------------------------------------------------------------ files
    def _new_matrix(self, rows: int, capacity: int) -> tuple[np.memmap, str]:
        """A new matrix file, named with the next generation, to fill before it is made
        durable (`_durable_shard`)."""
        self.generation += 1
        name = matrix_name(self.generation)
        return create_matrix(self.directory / name, rows, capacity), name

    def _durable_shard(self, new: np.memmap, name: str, offset: int,
                       segments: list | None = None) -> Shard:
        """The shard of a filled new matrix file, on disk and opened as the others are."""
        make_durable(new, self.directory / name)
        capacity = new.shape[1]
        return Shard(offset, capacity, name, self._map_of(name, capacity),
                     [] if segments is None else segments)

    def _map_of(self, name: str, capacity: int) -> np.memmap:
        return open_matrix(self.directory / name, self.T, capacity, self.writable)

    def remove_orphans(self) -> None:
        """Delete the files of grows and seals that never committed."""
        keep = {s.name for s in self.shards} | {g.name for s in self.shards
                                                for g in s.segments}
        for p in matrix_files(self.directory):
            if p.name not in keep:
                p.unlink(missing_ok=True)
