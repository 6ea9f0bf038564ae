"""Scoring, a part of `ScoreMatrix` (pamir.index.scores): a query vector's score of every
column (the reference), the exact top-k (`top`: which kernel of pamir.index.topk searches
each shard), and the reads `similar` and `vector` need.

`top` walks a shard's segments with Fagin's threshold algorithm, and where that is not soon
sure, scans only the blocks whose bound can still beat the k-th score; a shard's tail (its
columns in no segment) is scanned brute force.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import tuning

if TYPE_CHECKING:
    from .scores import ScoreMatrix


class Scoring:
    """Reading a ScoreMatrix's scores (the matrix's `_scoring`)."""

    def __init__(self, matrix: ScoreMatrix):
        self._matrix = matrix
        self._scratch: dict[int, tuple] = {}  # the top-k's per-shard marks, by offset

    def scores(self, q: np.ndarray) -> np.ndarray:
        """z . q for every column (free columns -inf), reading only the rows of q's words.
        The reference: in float32, words added in ascending row order from 0."""
        m = self._matrix
        q = self._query(q)
        out = np.zeros(m._width, dtype=np.float32)
        for sh, a, b in m._spans():
            part = out[a:b]
            for t in np.flatnonzero(q):
                part += q[t] * sh.map[t, : b - a]
        out[~m._live] = -np.inf
        return out

    def _query(self, q: np.ndarray) -> np.ndarray:
        m = self._matrix
        q = np.asarray(q, dtype=np.float32).ravel()
        if q.shape != (m.T,):
            raise ValueError(f"query vector of length {q.size}; the vocabulary has {m.T}")
        return q

    def best(self, q: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(picture id, score) of the k best pictures for q, best first (brute force)."""
        return self.best_of(self.scores(q), k)

    def best_of(self, s: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(picture id, score) of the k best columns by the scores s (one per column, -inf
        for those left out), best first; equal scores by id."""
        m = self._matrix
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
        top = top[np.lexsort((m._col_id[top], -s[top]))][:k]
        return [(int(m._col_id[c]), float(s[c])) for c in top]

    def top(self, q: np.ndarray, k: int, *, keep: np.ndarray | None = None,
            floor: float | None = None, method: str = "auto") -> list[tuple[int, float]]:
        """(picture id, score) of the k best pictures for q, best first, equal scores by
        id: the same answer as best(q, k) restricted to keep (a (width,) mask) and to scores
        >= floor. method "auto": the threshold algorithm on each shard's segments, then (if
        it is not sure by then) the scan of the blocks whose bounds can still beat the k-th
        score, brute force on tails and on segments without bounds; "scan": the fused
        brute-force scan everywhere; "ta": the threshold algorithm without giving up (for
        tests)."""
        m = self._matrix
        from . import topk  # noqa: PLC0415 - numba: imported by the first query that needs it

        q = self._query(q)
        rows = np.flatnonzero(q).astype(np.int64)
        k = int(k)
        if not m._width:
            return []
        if not len(rows):  # every live picture scores 0
            kept = m._live if keep is None else m._live & np.asarray(keep, bool)
            return self.best_of(np.where(kept, np.float32(0), -np.inf), k) \
                if floor is None or floor <= 0 else []
        hs = np.full(k, -np.inf, np.float32)  # the heap of the k best so far, and its size
        hid = np.zeros(k, np.int64)
        size = np.zeros(1, np.int64)
        use_keep = keep is not None
        keep = np.asarray(keep, bool) if use_keep else np.zeros(1, bool)
        has_floor = floor is not None
        fl = np.float32(floor if has_floor else 0.0)
        # what every kernel takes after the query's rows, weights and shard
        heap = (m._width, m._col_id, m._live, keep, use_keep, fl, has_floor,
                hs, hid, size, k)
        listed_rows = rows[-1] < m.words  # class rows have no lists nor bounds
        use_ta = method != "scan" and listed_rows and (
            method == "ta" or len(rows) <= tuning.TA_MAX_WORDS)
        use_blocks = method == "auto" and listed_rows
        tails = m._tail_cols()
        for n_shard, (sh, a, b) in enumerate(m._spans()):
            self._top_of_shard(topk, sh, b - a, tails[n_shard], rows, q[rows], heap, method,
                               use_ta, use_blocks)
        return topk.sorted_hits(hs, hid, int(size[0]))

    def _top_of_shard(self, topk, sh, local: int, tail: np.ndarray, rows, qr, heap,
                      method: str, use_ta: bool, use_blocks: bool) -> None:
        """Offer one shard's best columns (its first `local` ones) to the heap."""
        M = np.asarray(sh.map)
        k = heap[-1]
        block = sh.segments[0].block if sh.segments else 0
        bounded = use_blocks and block and all(g.block == block for g in sh.segments)
        if not ((use_ta or bounded) and sh.segments):
            topk.brute_range(rows, qr, M, sh.offset, 0, local, *heap,
                             np.zeros(1, np.uint8), False)
            return
        seen, touched = self._scratch_of(sh)
        nt = np.zeros(1, np.int64)
        sure = True
        for seg in sh.segments:
            limit = seg.length
            if method != "ta" and use_ta:
                limit = max(k, limit // (tuning.TA_DEPTH_DIVISOR * len(rows) ** 2))
            if bounded:  # a short walk finds scores for the bounds to beat
                limit = min(limit, tuning.BOOT_STEPS_PER_RESULT * k)
            d = topk.ta_segment(seg.ids, seg.vals, rows, qr, M, sh.offset, *heap, seen,
                                touched, nt, limit)
            if d < 0:  # not sure yet: the rest of the shard, skipping what TA scored
                sure = False
                break
        if not sure and bounded:
            ub = np.full(-(-local // block), -np.inf, np.float32)
            for seg in sh.segments:
                topk.block_bounds(rows, qr, seg.bmax, seg.bmin, ub)
            topk.pruned_range(rows, qr, M, sh.offset, ub, block, local, self._matrix._listed, *heap,
                              seen)
        elif not sure:
            topk.brute_range(rows, qr, M, sh.offset, 0, local, *heap, seen, True)
            topk.clear_seen(seen, touched, nt[0])
            return  # the brute scan covered the tail too
        topk.clear_seen(seen, touched, nt[0])
        if len(tail):
            topk.brute_cols(rows, qr, M, sh.offset, tail, *heap)

    def _scratch_of(self, sh) -> tuple[np.ndarray, np.ndarray]:
        """The threshold algorithm's marks of the columns it scored in a shard, and which
        those were (to clear them after), kept between queries."""
        seen, touched = self._scratch.get(sh.offset, (None, None))
        if seen is None or len(seen) < sh.capacity:
            seen, touched = np.zeros(sh.capacity, np.uint8), np.empty(sh.capacity, np.int64)
            self._scratch[sh.offset] = seen, touched
        return seen, touched

    # ------------------------------------------------------------------ similar, vector
    def _rows(self, rows: int) -> np.ndarray:
        """The first `rows` rows over the live width, as one (rows, width) array (a copy)."""
        m = self._matrix
        out = np.empty((rows, m._width), np.float32)
        for sh, a, b in m._spans():
            out[:, a:b] = sh.map[:rows, : b - a]
        return out

    def similarities(self, z: np.ndarray, mean: np.ndarray | None = None) -> np.ndarray:
        """Cosine similarity of every column's first len(z) rows to z (free columns -inf),
        both centred on `mean` when given. Reads every row it compares, unlike a query."""
        m = self._matrix
        z = np.asarray(z, dtype=np.float64).ravel()
        out = np.full(m._width, -np.inf, dtype=np.float32)
        if not m._width:
            return out
        M = self._rows(len(z))
        mean = np.zeros(len(z)) if mean is None else np.asarray(mean, dtype=np.float64)
        zc = (z - mean).astype(np.float32)
        Mc = M - mean.astype(np.float32)[:, None]
        dots = zc @ Mc
        norms = np.sqrt(np.einsum("tn,tn->n", Mc, Mc)) * max(float(np.linalg.norm(zc)), 1e-12)
        sims = dots / np.maximum(norms, 1e-12)
        out[m._live] = sims[m._live]
        return out

    def mean(self, rows: int | None = None) -> np.ndarray:
        """(rows,) the mean of the pictures' first `rows` rows (all rows by default)."""
        m = self._matrix
        rows = m.T if rows is None else int(rows)
        if not len(m):
            return np.zeros(rows)
        total = np.zeros(rows)
        for sh, a, b in m._spans():
            live = m._live[a:b]
            total += np.asarray(sh.map[:rows, : b - a], np.float64)[:, live].sum(axis=1)
        return total / len(m)

    def column(self, col: int) -> np.ndarray:
        """A picture's text-space vector z (T,), a copy."""
        sh = self._matrix._shard_of(int(col))
        return np.array(sh.map[:, int(col) - sh.offset], dtype=np.float32)
