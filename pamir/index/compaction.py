"""Segments and compaction, a part of `ScoreMatrix` (pamir.index.scores): sealing a shard's
tail into a segment of sorted lists, merging a shard's segments, and compacting.

Columns in no segment (the shard's tail: pictures added since its last seal) are scanned
brute force by a query. `seal` turns a tail into a new segment (end of an indexing run, or
when a tail grows past tuning.SEAL_AT); past tuning.MAX_SEGMENTS segments a shard's segments
are merged into one. A column once in a segment is never rewritten in place: a picture
removed there leaves a dead column, skipped by the search and reused only after a compaction
has rebuilt the lists without it. `compact` rebuilds every shard as a single segment over its
live columns, and first moves its pictures so that pictures with alike scores are neighbours
(`block_order`): a block then holds alike pictures, its bounds are tight, and a search skips
far more blocks. Pictures keep their ids; only their columns change (the catalogue records
the move in the same commit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..storage import fsync_dir
from . import tuning
from .layout import Commit, Segment, Shard, lists_name, open_segment, write_segment

if TYPE_CHECKING:
    from .scores import ScoreMatrix


def block_order(S: np.ndarray, seed: int = 0) -> np.ndarray:
    """An order of n pictures (S: words x n, their scores) in which alike pictures are
    neighbours: by k-means cluster of their score vectors (ORDER_CLUSTERS, faiss; the
    clusters by their centre's highest word), then by the word each picture scores highest,
    then by that score. Blocks of consecutive columns in this order hold alike pictures, so
    the block bounds (the most a block's pictures can score) are close to what its pictures
    do score. Returns the permutation (n,)."""
    from ..features.visterms import Assigner, fit_codebook  # faiss: only compaction needs it

    n = S.shape[1]
    X = np.ascontiguousarray(S.T, dtype=np.float32)
    clusters = min(tuning.ORDER_CLUSTERS, n // tuning.ORDER_SAMPLE_PER_CLUSTER)
    if clusters >= 2:
        rng = np.random.default_rng(seed)
        sample = rng.choice(n, min(n, tuning.ORDER_SAMPLE_PER_CLUSTER * clusters),
                            replace=False)
        centres, _, _ = fit_codebook(X[np.sort(sample)], clusters, n_iter=10, seed=seed)
        # the clusters themselves in the same order (by their centres' highest word), so
        # that alike clusters are neighbours too
        rank = np.empty(clusters, np.int64)
        rank[np.lexsort((-centres.max(axis=1), centres.argmax(axis=1)))] = np.arange(clusters)
        label = rank[Assigner(centres)(X)]
    else:
        label = np.zeros(n, np.int64)
    return np.lexsort((-S.max(axis=0), S.argmax(axis=0), label))


class Compaction:
    """The segments of a ScoreMatrix's shards: sealing, merging, compacting (the matrix's
    `_compaction`)."""

    def __init__(self, matrix: ScoreMatrix):
        self._matrix = matrix

    def tail_sizes(self) -> list[int]:
        """Per shard, how many live columns are in no segment."""
        return [len(t) for t in self._matrix._tail_cols()]

    def segment_counts(self) -> list[int]:
        return [len(sh.segments) for sh in self._matrix.shards]

    def seal(self, commit: Commit, minimum: int | None = None) -> bool:
        """Turn every shard tail of at least `minimum` columns into a segment; merge a
        shard's segments once it has more than MAX_SEGMENTS. True if anything changed."""
        m = self._matrix
        minimum = tuning.SEAL_MIN if minimum is None else minimum
        plan = {}
        for i, (sh, a, b) in enumerate(m._spans()):
            tail = np.flatnonzero(~m._listed[a:b] & m._live[a:b])
            if len(tail) and len(tail) >= minimum:
                if len(sh.segments) + 1 > tuning.MAX_SEGMENTS:
                    plan[i] = None  # merge everything
                else:
                    plan[i] = tail
        return self._resegment(plan, commit)

    def compact(self, commit: Commit) -> bool:
        """Rebuild every shard as one segment over its live columns, its pictures moved into
        block_order at the start of the shard (dead columns become reusable, tails get
        lists); commit(layout, moves) records the move. True if anything changed."""
        m = self._matrix
        plan = {}
        for i, (sh, a, b) in enumerate(m._spans()):
            live = m._live[a:b]
            listed = m._listed[a:b]
            if not live.any() and not sh.segments:
                continue  # no picture, no lists: nothing to rebuild
            if len(sh.segments) == 1 and sh.segments[0].ordered \
                    and np.array_equal(live, listed) \
                    and not m._listed[b:sh.offset + sh.capacity].any():
                continue
            plan[i] = None
        for sh in m.shards[len(list(m._spans())):]:  # shards past the live width
            if sh.segments:
                plan[m.shards.index(sh)] = None
        return self._resegment(plan, commit, order=True)

    def _resegment(self, plan: dict, commit: Commit, order: bool = False) -> bool:
        """plan: shard number -> local columns of a new segment added to it, or None for
        one segment over all its live columns in place of its segments (with `order`,
        the shard's pictures first moved into block_order, in a new matrix file)."""
        m = self._matrix
        if not plan:
            return False
        before = [(sh, sh.segments.copy()) for sh in m.shards]
        try:
            return self._resegment_shards(plan, commit, order)
        except BaseException:
            # nothing was committed: the shards as they were (their files stay; the new
            # ones are orphans, deleted at the next writable open)
            for sh, segments in before:
                sh.segments = segments
            m.shards = [sh for sh, _ in before]
            m._refresh_listed()
            raise

    def _resegment_shards(self, plan: dict, commit: Commit, order: bool) -> bool:
        m = self._matrix
        dropped, old, new = [], [], []
        for i, cols in plan.items():
            sh = m.shards[i]
            ordered = False
            if cols is None:
                a = sh.offset
                b = min(sh.offset + sh.capacity, m._width)
                cols = np.flatnonzero(m._live[a:b]) if b > a else np.zeros(0, np.int64)
                dropped += [s.name for s in sh.segments]
                sh.segments = []
                if order and len(cols):
                    dropped.append(sh.name)
                    moved = cols[block_order(np.asarray(sh.map[: m.words, cols]))]
                    cols = self._reorder(i, moved)
                    sh = m.shards[i]  # the shard in its new file
                    old.append(sh.offset + moved)
                    new.append(sh.offset + cols)
                    ordered = True
            if len(cols):
                sh.segments.append(self._build_segment(sh, cols, ordered))
        fsync_dir(m.directory)
        if order:
            moves = (np.concatenate(old or [[]]).astype(np.int64),
                     np.concatenate(new or [[]]).astype(np.int64))
            commit(m.layout(), moves)
            m._move(*moves)
        else:
            commit(m.layout())
        m._refresh_listed()
        for name in dropped:
            (m.directory / name).unlink(missing_ok=True)
        return True

    def _reorder(self, i: int, moved: np.ndarray) -> np.ndarray:
        """Shard i in a new matrix file whose first columns hold the pictures of its local
        columns `moved`, in that order (every row, classes too); returns their new local
        columns. The old file stays until the caller has committed the move."""
        m = self._matrix
        sh = m.shards[i]
        new, name = m._new_matrix(m.T, sh.capacity)
        n = len(moved)
        for t in range(m.T):  # a row at a time: one gather of a row, not of the matrix
            new[t, :n] = sh.map[t, moved]
        m.shards[i] = m._durable_shard(new, name, sh.offset, sh.segments)
        return np.arange(n, dtype=np.int64)


    def _build_segment(self, sh: Shard, cols: np.ndarray, ordered: bool = False) -> Segment:
        """Write the sorted lists of these local columns of a shard (one sort per word), the
        block bounds of every row."""
        m = self._matrix
        m.generation += 1
        name = lists_name(m.generation)
        cols = np.sort(np.asarray(cols, np.int64))  # ascending: the blocks are runs of it
        L, W, block = len(cols), m.words, tuning.BLOCK
        B = int(cols[-1]) // block + 1 if L else 0
        local = cols.astype(np.int32)
        whole = L and cols[0] == 0 and cols[-1] == L - 1  # every column: a slice, no gather
        blocks, starts = np.unique(cols // block, return_index=True)

        C = m.T - W  # a model's class rows: bounds only (layout._segment_parts)

        def fill(ids, vals, bmax, bmin, cmax):
            for c in range(C):
                v = np.array(sh.map[W + c, :L]) if whole else np.asarray(sh.map[W + c, cols])
                if L:
                    cmax[c] = -np.inf
                    cmax[c, blocks] = np.maximum.reduceat(v, starts)
            for t in range(W):
                v = np.array(sh.map[t, :L]) if whole else np.asarray(sh.map[t, cols])
                order = np.argsort(-v)  # the order among equal scores does not matter to TA
                ids[t] = local[order]
                vals[t] = v[order]
                if L:
                    bmax[t] = -np.inf  # blocks with none of these columns bound nothing
                    bmin[t] = np.inf
                    bmax[t, blocks] = np.maximum.reduceat(v, starts)
                    bmin[t, blocks] = np.minimum.reduceat(v, starts)

        write_segment(m.directory / name, W, L, B, fill, C)
        return open_segment(m.directory, {"name": name, "length": L, "block": block,
                                             "blocks": B, "class_rows": C,
                                             **({"ordered": True} if ordered else {})}, W)
