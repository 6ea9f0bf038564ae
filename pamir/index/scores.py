"""The score matrix: the pictures' text-space vectors, word-major, memory-mapped, in shards,
with per-word lists sorted by score for exact top-k search without a full scan.

Shards. Columns are global (the catalogue's `col`), split into shards of at most
`SHARD_COLUMNS` columns, one file each (`scores-<generation>.f32`, a raw float32
(rows x capacity) matrix: row t holds word t's score for each of the shard's pictures, so a
query reads only its words' rows). A new picture goes into the last shard, which grows by
doubling up to SHARD_COLUMNS; then a new shard starts. Growing copies one shard, never the
whole matrix, and no file outgrows what one sort (building its lists) handles at once.

Segments. Beside each shard's matrix, `lists-<generation>.bin` files each hold one segment:
for a set of the shard's columns, per word row the local column ids sorted by that word's
score, descending (int32, words x L), then the scores in that order (float32, words x L),
then (segments whose meta has "blocks": B) per word row the highest and the lowest score of
the segment's columns in each block of BLOCK local columns (float32, words x B each).
`pamir.index.topk` walks the lists with Fagin's threshold algorithm, and where that is not
soon sure, scans only the blocks whose bound can still beat the k-th score. Columns in no
segment (the shard's tail: pictures added since its last seal) are scanned brute force. A
column once in a segment is never rewritten in place: a picture removed there leaves a dead
column, skipped by the search and reused only after a compaction has rebuilt the lists
without it. `seal` turns a tail into a new segment (end of an indexing run, or when a tail
grows past SEAL_AT); past MAX_SEGMENTS segments a shard's segments are merged into one;
`compact` rebuilds every shard as a single segment over its live columns, and first moves
its pictures so that pictures with alike scores are neighbours (`block_order`): a block then
holds alike pictures, its bounds are tight, and a search skips far more blocks. Pictures keep
their ids; only their columns change (the catalogue records the move in the same commit).

Crash safety, with the catalogue: columns are written in place only into slots that no
committed row references (fresh or freed ones) and flushed before the rows that point at them
are committed, so a crash leaves at worst an unreferenced slot. A grown shard, a new segment
or a rewritten matrix is a new file, fsynced, and the caller commits the new layout
(`meta.shards`) before any file it replaces is deleted; a file no commit names is an orphan,
deleted the next time the index is opened for writing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..storage import fsync_dir

#: The smallest matrix, in columns: growing by doubling from here keeps copies rare.
MIN_CAPACITY = 1024
#: Most columns in one shard (see docs/scale.md for the choice): 2^20, so a 1M-picture
#: collection is one shard and a shard's lists are built by sorts of a million scores.
SHARD_COLUMNS = 1 << 20
#: A shard's tail is sealed into a segment by `Index.add` once it has this many columns;
#: `seal` at the end of an indexing run seals tails of at least SEAL_MIN columns.
SEAL_AT = 1 << 18
SEAL_MIN = 1 << 14
#: Segments per shard beyond which `seal` merges them.
MAX_SEGMENTS = 8
#: The threshold algorithm gives up (and the shard is scanned) after L / (TA_DEPTH_DIVISOR
#: x m^2) steps of a list of L for a query of m words: a step costs m^2 random reads (m new
#: pictures, m rows each), the scan m sequential rows, and at 1M Corel-like pictures a
#: 3-word step cost ~80 ns against ~2 ms for the scan: the limit keeps a losing TA to about
#: half a scan. (A flat 1/16 of the list, best at 200k where everything fits in cache, let
#: 3-word queries at 1M run 7 ms: docs/scale.md.)
TA_DEPTH_DIVISOR = 8
#: Columns per block of the block bounds (the highest and lowest score of each word in each
#: block of a segment). Small blocks bound tightly: at 1M Corel-like pictures, the blocks a
#: 2-word (3-word) top 100 cannot skip were 1.6 % (3.1 %) of them at 16 columns, 2.8 %
#: (7.3 %) at 32 and about 12 % (29 %) at 64, medians of 30 random queries; the bounds then
#: take 2 x 4 / 16 bytes a score, an eighth of the matrix's size.
BLOCK = 16
#: Clusters of the column order a compaction writes (`block_order`). Measured at 1M Corel-like
#: pictures (docs/scale.md), the blocks a 3-word top 100 cannot skip: 3.5 % of them in
#: insertion order, 0.99 % with 256 clusters (k-means 0.7 s), 0.93 % with 1,024 (3.3 s) and
#: 0.89 % with 4,096 (17 s): 256 takes nearly all of the gain for a second a million.
ORDER_CLUSTERS = 256
#: Pictures per cluster the order's k-means trains on (a sample: the order only has to be
#: good, never exact, as it changes no answer).
ORDER_SAMPLE_PER_CLUSTER = 64
#: Before scanning a shard with block bounds, the threshold algorithm takes at most this
#: many steps per k results: its first scores let the scan skip most blocks (with 4 k steps
#: the blocks left were 3.0 % / 7.5 % at 1M for 2 / 3 words, against 6.2 % / 17.5 % with k).
BOOT_STEPS_PER_RESULT = 4
#: Queries with more word rows than this are scanned (3+ words, bridged words, mixtures).
#: Measured at 1M Corel-like pictures, warm, one core (benchmarks/bench_index.py, docs/
#: scale.md): the TA (with the limit above) took 7.8 ms median for 3 words and 12.3 ms for 4,
#: the scan 2.4 and 2.7 ms; for 2 words they tied (2.2 against 2.0 ms), for 1 word the TA
#: won (0.7 against 1.5 ms).
TA_MAX_WORDS = 2

#: A shard's layout as the catalogue records it: {"matrix", "capacity", "segments": [...]}.
ShardMeta = dict
#: commit(layout) records new files; a compaction's commit(layout, moves) also records where
#: its pictures went: moves = (old global columns, new global columns).
Commit = Callable[..., None]


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
    clusters = min(ORDER_CLUSTERS, n // ORDER_SAMPLE_PER_CLUSTER)
    if clusters >= 2:
        rng = np.random.default_rng(seed)
        sample = rng.choice(n, min(n, ORDER_SAMPLE_PER_CLUSTER * clusters), replace=False)
        centres, _, _ = fit_codebook(X[np.sort(sample)], clusters, n_iter=10, seed=seed)
        # the clusters themselves in the same order (by their centres' highest word), so
        # that alike clusters are neighbours too
        rank = np.empty(clusters, np.int64)
        rank[np.lexsort((-centres.max(axis=1), centres.argmax(axis=1)))] = np.arange(clusters)
        label = rank[Assigner(centres)(X)]
    else:
        label = np.zeros(n, np.int64)
    return np.lexsort((-S.max(axis=0), S.argmax(axis=0), label))


def matrix_name(generation: int) -> str:
    return f"scores-{generation}.f32"


def lists_name(generation: int) -> str:
    return f"lists-{generation}.bin"


def matrix_files(directory: Path) -> list[Path]:
    """Every score-matrix and sorted-list file in an index folder, current or orphaned."""
    d = Path(directory)
    return sorted(d.glob("scores-*.f32")) + sorted(d.glob("lists-*.bin"))


@dataclass
class Segment:
    """One sealed set of a shard's columns with its per-word sorted lists."""
    name: str
    length: int
    ids: np.ndarray  # (words, L) int32 local columns, by score descending
    vals: np.ndarray  # (words, L) float32 their scores
    block: int = 0  # columns per block of the bounds (0: no bounds)
    bmax: np.ndarray | None = None  # (words, blocks) float32 the highest score in a block
    bmin: np.ndarray | None = None  # (words, blocks) float32 the lowest (-inf/+inf: none)
    ordered: bool = False  # its columns were put in block_order by a compaction

    def meta(self) -> dict:
        meta = {"name": self.name, "length": self.length}
        if self.block:
            meta.update(block=self.block, blocks=self.bmax.shape[1])
        if self.ordered:
            meta.update(ordered=True)
        return meta


@dataclass
class Shard:
    offset: int
    capacity: int
    name: str
    map: np.ndarray | None
    segments: list[Segment] = field(default_factory=list)
    _seen: np.ndarray | None = None
    _touched: np.ndarray | None = None

    def meta(self) -> dict:
        return {"matrix": self.name, "capacity": self.capacity,
                "segments": [s.meta() for s in self.segments]}

    def scratch(self):
        if self._seen is None or len(self._seen) < self.capacity:
            self._seen = np.zeros(self.capacity, np.uint8)
            self._touched = np.empty(self.capacity, np.int64)
        return self._seen, self._touched


class ScoreMatrix:
    """The shards of an index and which picture owns each column.

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
        self.generation = generation
        self._open(shards)
        self._col_id = np.full(0, -1, dtype=np.int64)
        self._tails = None
        self._width = 0  # columns up to the last owned one: what a query scores
        self._live = np.zeros(0, dtype=bool)

    # ------------------------------------------------------------------ files
    def _open(self, shards: Sequence[ShardMeta]) -> None:
        self.shards: list[Shard] = []
        offset = 0
        for s in shards:
            self.shards.append(self._open_shard(offset, s))
            offset += int(s["capacity"])
        self.capacity = offset
        self._listed = np.zeros(self.capacity, dtype=bool)
        for sh in self.shards:
            for seg in sh.segments:
                self._listed[sh.offset + seg.ids[0]] = True

    def _open_shard(self, offset: int, s: ShardMeta) -> Shard:
        mode = "r+" if self.writable else "r"
        capacity = int(s["capacity"])
        m = np.memmap(self.directory / s["matrix"], dtype=np.float32, mode=mode,
                      shape=(self.T, capacity))
        return Shard(offset, capacity, s["matrix"], m,
                     [self._open_segment(g) for g in s.get("segments", [])])

    def _open_segment(self, g: dict) -> Segment:
        L, W = int(g["length"]), self.words
        path = self.directory / g["name"]
        ids = np.asarray(np.memmap(path, dtype=np.int32, mode="r", shape=(W, L)))
        vals = np.asarray(np.memmap(path, dtype=np.float32, mode="r", shape=(W, L),
                                    offset=4 * W * L))
        if "blocks" not in g:  # written before block bounds: the shard is scanned whole
            return Segment(g["name"], L, ids, vals)
        B = int(g["blocks"])
        bmax, bmin = (np.asarray(np.memmap(path, dtype=np.float32, mode="r", shape=(W, B),
                                           offset=8 * W * L + 4 * W * B * i)) for i in (0, 1))
        return Segment(g["name"], L, ids, vals, int(g["block"]), bmax, bmin,
                       bool(g.get("ordered")))

    def layout(self) -> dict:
        """What the catalogue records: {"shards": [...], "generation": g}."""
        return {"shards": [s.meta() for s in self.shards], "generation": self.generation}

    @property
    def path(self) -> Path | None:
        """The first shard's matrix file (a one-shard index's whole matrix)."""
        return self.directory / self.shards[0].name if self.shards else None

    def close(self) -> None:
        self.shards = []

    def __len__(self) -> int:
        """How many columns belong to a picture."""
        return int(self._live.sum())

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

    # ------------------------------------------------------------------ column owners
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

    # ------------------------------------------------------------------ scoring
    def scores(self, q: np.ndarray) -> np.ndarray:
        """z . q for every column (free columns -inf), reading only the rows of q's words.
        The reference: in float32, words added in ascending row order from 0."""
        q = np.asarray(q, dtype=np.float32).ravel()
        if q.shape != (self.T,):
            raise ValueError(f"query vector of length {q.size}; the vocabulary has {self.T}")
        out = np.zeros(self._width, dtype=np.float32)
        for sh, a, b in self._spans():
            part = out[a:b]
            for t in np.flatnonzero(q):
                part += q[t] * sh.map[t, : b - a]
        out[~self._live] = -np.inf
        return out

    def best(self, q: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(picture id, score) of the k best pictures for q, best first (brute force)."""
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

    def top(self, q: np.ndarray, k: int, *, keep: np.ndarray | None = None,
            floor: float | None = None, method: str = "auto") -> list[tuple[int, float]]:
        """(picture id, score) of the k best pictures for q, best first, equal scores by
        id: the same answer as best(q, k) restricted to keep (a (width,) mask) and to scores
        >= floor. method "auto": the threshold algorithm on each shard's segments, then (if
        it is not sure by then) the scan of the blocks whose bounds can still beat the k-th
        score, brute force on tails and on segments without bounds; "scan": the fused
        brute-force scan everywhere; "ta": the threshold algorithm without giving up (for
        tests)."""
        from . import topk  # noqa: PLC0415 - numba: imported by the first query that needs it

        q = np.asarray(q, dtype=np.float32).ravel()
        if q.shape != (self.T,):
            raise ValueError(f"query vector of length {q.size}; the vocabulary has {self.T}")
        rows = np.flatnonzero(q).astype(np.int64)
        k = int(k)
        hs = np.full(k, -np.inf, np.float32)
        hid = np.zeros(k, np.int64)
        size = np.zeros(1, np.int64)
        if not self._width:
            return []
        if not len(rows):  # every live picture scores 0
            kept = self._live if keep is None else self._live & np.asarray(keep, bool)
            return self.best_of(np.where(kept, np.float32(0), -np.inf), k) \
                if floor is None or floor <= 0 else []
        qr = q[rows]
        use_keep = keep is not None
        keep = np.asarray(keep, bool) if use_keep else np.zeros(1, bool)
        has_floor = floor is not None
        fl = np.float32(floor if has_floor else 0.0)
        listed_rows = rows[-1] < self.words  # class rows have no lists nor bounds
        use_ta = method != "scan" and listed_rows and (
            method == "ta" or len(rows) <= TA_MAX_WORDS)
        use_blocks = method == "auto" and listed_rows
        args = (self._width, self._col_id, self._live, keep, use_keep, fl, has_floor,
                hs, hid, size, k)
        tails = self._tail_cols()
        for n_shard, (sh, a, b) in enumerate(self._spans()):
            M = np.asarray(sh.map)
            local = b - a
            block = sh.segments[0].block if sh.segments else 0
            bounded = use_blocks and block and all(g.block == block for g in sh.segments)
            if (use_ta or bounded) and sh.segments:
                seen, touched = sh.scratch()
                nt = np.zeros(1, np.int64)
                sure = True
                for seg in sh.segments:
                    limit = seg.length
                    if method != "ta" and use_ta:
                        limit = max(k, limit // (TA_DEPTH_DIVISOR * len(rows) ** 2))
                    if bounded:  # a short walk finds scores for the bounds to beat
                        limit = min(limit, BOOT_STEPS_PER_RESULT * k)
                    d = topk.ta_segment(seg.ids, seg.vals, rows, qr, M, sh.offset, *args[:5],
                                        fl, has_floor, hs, hid, size, k, seen, touched, nt,
                                        limit)
                    if d < 0:  # not sure yet: the rest of the shard, skipping what TA scored
                        sure = False
                        break
                if not sure and bounded:
                    ub = np.full(-(-local // block), -np.inf, np.float32)
                    for seg in sh.segments:
                        topk.block_bounds(rows, qr, seg.bmax, seg.bmin, ub)
                    topk.pruned_range(rows, qr, M, sh.offset, ub, block, local, self._listed,
                                      *args, seen)
                elif not sure:
                    topk.brute_range(rows, qr, M, sh.offset, 0, local, *args, seen, True)
                    topk.clear_seen(seen, touched, nt[0])
                    continue  # the brute scan covered the tail too
                topk.clear_seen(seen, touched, nt[0])
            else:
                topk.brute_range(rows, qr, M, sh.offset, 0, local, *args,
                                 np.zeros(1, np.uint8), False)
                continue
            tail = tails[n_shard]
            if len(tail):
                topk.brute_cols(rows, qr, M, sh.offset, tail, *args)
        return topk.sorted_hits(hs, hid, int(size[0]))

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

    def _rows(self, rows: int) -> np.ndarray:
        """The first `rows` rows over the live width, as one (rows, width) array (a copy)."""
        out = np.empty((rows, self._width), np.float32)
        for sh, a, b in self._spans():
            out[:, a:b] = sh.map[:rows, : b - a]
        return out

    def similarities(self, z: np.ndarray, mean: np.ndarray | None = None) -> np.ndarray:
        """Cosine similarity of every column's first len(z) rows to z (free columns -inf),
        both centred on `mean` when given. Reads every row it compares, unlike a query."""
        z = np.asarray(z, dtype=np.float64).ravel()
        out = np.full(self._width, -np.inf, dtype=np.float32)
        if not self._width:
            return out
        M = self._rows(len(z))
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
        total = np.zeros(rows)
        for sh, a, b in self._spans():
            live = self._live[a:b]
            total += np.asarray(sh.map[:rows, : b - a], np.float64)[:, live].sum(axis=1)
        return total / len(self)

    def column(self, col: int) -> np.ndarray:
        """A picture's text-space vector z (T,), a copy."""
        sh = self._shard_of(int(col))
        return np.array(sh.map[:, int(col) - sh.offset], dtype=np.float32)

    # ------------------------------------------------------------------ segments
    def tail_sizes(self) -> list[int]:
        """Per shard, how many live columns are in no segment."""
        return [len(t) for t in self._tail_cols()]

    def segment_counts(self) -> list[int]:
        return [len(sh.segments) for sh in self.shards]

    def seal(self, commit: Commit, minimum: int | None = None) -> bool:
        """Turn every shard tail of at least `minimum` columns into a segment; merge a
        shard's segments once it has more than MAX_SEGMENTS. True if anything changed."""
        minimum = SEAL_MIN if minimum is None else minimum
        plan = {}
        for i, (sh, a, b) in enumerate(self._spans()):
            tail = np.flatnonzero(~self._listed[a:b] & self._live[a:b])
            if len(tail) and len(tail) >= minimum:
                if len(sh.segments) + 1 > MAX_SEGMENTS:
                    plan[i] = None  # merge everything
                else:
                    plan[i] = tail
        return self._resegment(plan, commit)

    def compact(self, commit: Commit) -> bool:
        """Rebuild every shard as one segment over its live columns, its pictures moved into
        block_order at the start of the shard (dead columns become reusable, tails get
        lists); commit(layout, moves) records the move. True if anything changed."""
        plan = {}
        for i, (sh, a, b) in enumerate(self._spans()):
            live = self._live[a:b]
            listed = self._listed[a:b]
            if not live.any() and not sh.segments:
                continue  # no picture, no lists: nothing to rebuild
            if len(sh.segments) == 1 and sh.segments[0].ordered \
                    and np.array_equal(live, listed) \
                    and not self._listed[b:sh.offset + sh.capacity].any():
                continue
            plan[i] = None
        for sh in self.shards[len(list(self._spans())):]:  # shards past the live width
            if sh.segments:
                plan[self.shards.index(sh)] = None
        return self._resegment(plan, commit, order=True)

    def _resegment(self, plan: dict, commit: Commit, order: bool = False) -> bool:
        """plan: shard number -> local columns of a new segment added to it, or None for
        one segment over all its live columns in place of its segments (with `order`,
        the shard's pictures first moved into block_order, in a new matrix file)."""
        if not plan:
            return False
        before = [(sh, sh.segments.copy()) for sh in self.shards]
        try:
            return self._resegment_shards(plan, commit, order)
        except BaseException:
            # nothing was committed: the shards as they were (their files stay; the new
            # ones are orphans, deleted at the next writable open)
            for sh, segments in before:
                sh.segments = segments
            self.shards = [sh for sh, _ in before]
            self._refresh_listed()
            raise

    def _resegment_shards(self, plan: dict, commit: Commit, order: bool) -> bool:
        dropped, old, new = [], [], []
        for i, cols in plan.items():
            sh = self.shards[i]
            ordered = False
            if cols is None:
                a = sh.offset
                b = min(sh.offset + sh.capacity, self._width)
                cols = np.flatnonzero(self._live[a:b]) if b > a else np.zeros(0, np.int64)
                dropped += [s.name for s in sh.segments]
                sh.segments = []
                if order and len(cols):
                    dropped.append(sh.name)
                    moved = cols[block_order(np.asarray(sh.map[: self.words, cols]))]
                    cols = self._reorder(i, moved)
                    sh = self.shards[i]  # the shard in its new file
                    old.append(sh.offset + moved)
                    new.append(sh.offset + cols)
                    ordered = True
            if len(cols):
                sh.segments.append(self._build_segment(sh, cols, ordered))
        fsync_dir(self.directory)
        if order:
            moves = (np.concatenate(old or [[]]).astype(np.int64),
                     np.concatenate(new or [[]]).astype(np.int64))
            commit(self.layout(), moves)
            self._move(*moves)
        else:
            commit(self.layout())
        self._refresh_listed()
        for name in dropped:
            (self.directory / name).unlink(missing_ok=True)
        return True

    def _reorder(self, i: int, moved: np.ndarray) -> np.ndarray:
        """Shard i in a new matrix file whose first columns hold the pictures of its local
        columns `moved`, in that order (every row, classes too); returns their new local
        columns. The old file stays until the caller has committed the move."""
        sh = self.shards[i]
        new = self._new_file(self.T, sh.capacity)
        n = len(moved)
        for t in range(self.T):  # a row at a time: one gather of a row, not of the matrix
            new[t, :n] = sh.map[t, moved]
        self.shards[i] = Shard(sh.offset, sh.capacity, self._finish(new), None, sh.segments)
        self.shards[i].map = self._map_of(self.shards[i])
        return np.arange(n, dtype=np.int64)

    def _tail_cols(self) -> list[np.ndarray]:
        """Per shard (up to the width), its live columns in no segment, local; cached until
        the columns' owners or the segments change."""
        if self._tails is None:
            self._tails = [np.flatnonzero(~self._listed[a:b] & self._live[a:b])
                           for _, a, b in self._spans()]
        return self._tails

    def _refresh_listed(self) -> None:
        self._tails = None
        self._listed = np.zeros(self.capacity, dtype=bool)
        for sh in self.shards:
            for seg in sh.segments:
                self._listed[sh.offset + seg.ids[0]] = True

    def _build_segment(self, sh: Shard, cols: np.ndarray, ordered: bool = False) -> Segment:
        """Write the sorted lists of these local columns of a shard (one sort per word)."""
        self.generation += 1
        name = lists_name(self.generation)
        path = self.directory / name
        cols = np.sort(np.asarray(cols, np.int64))  # ascending: the blocks are runs of it
        L, W = len(cols), self.words
        B = int(cols[-1]) // BLOCK + 1 if L else 0
        out = np.memmap(path, dtype=np.uint8, mode="w+", shape=(max(1, 8 * W * (L + B)),))
        ids = out[: 4 * W * L].view(np.int32).reshape(W, L)
        vals = out[4 * W * L: 8 * W * L].view(np.float32).reshape(W, L)
        bmax = out[8 * W * L: 8 * W * L + 4 * W * B].view(np.float32).reshape(W, B)
        bmin = out[8 * W * L + 4 * W * B:].view(np.float32).reshape(W, B)
        local = cols.astype(np.int32)
        whole = L and cols[0] == 0 and cols[-1] == L - 1  # every column: a slice, no gather
        blocks, starts = np.unique(cols // BLOCK, return_index=True)
        for t in range(W):
            v = np.array(sh.map[t, :L]) if whole else np.asarray(sh.map[t, cols])
            order = np.argsort(-v)  # the order among equal scores does not matter to the TA
            ids[t] = local[order]
            vals[t] = v[order]
            if L:
                bmax[t] = -np.inf  # blocks with none of these columns bound nothing
                bmin[t] = np.inf
                bmax[t, blocks] = np.maximum.reduceat(v, starts)
                bmin[t, blocks] = np.minimum.reduceat(v, starts)
        out.flush()
        del out, ids, vals, bmax, bmin
        with open(path, "rb+") as f:
            os.fsync(f.fileno())
        return self._open_segment({"name": name, "length": L, "block": BLOCK, "blocks": B,
                                   **({"ordered": True} if ordered else {})})

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
            if last is not None and last.capacity < SHARD_COLUMNS:
                cap = min(SHARD_COLUMNS, max(2 * last.capacity, needed - last.offset,
                                             MIN_CAPACITY))
                new = self._new_file(self.T, cap)
                new[:, : last.capacity] = last.map
                old.append(last.name)
                self.shards[-1] = Shard(last.offset, cap, self._finish(new),
                                        None, last.segments)
                self.shards[-1].map = self._map_of(self.shards[-1])
            else:
                cap = min(SHARD_COLUMNS, max(needed - self.capacity, MIN_CAPACITY))
                name = self._finish(self._new_file(self.T, cap))
                sh = Shard(self.capacity, cap, name, None)
                sh.map = self._map_of(sh)
                self.shards.append(sh)
            self.capacity = sum(s.capacity for s in self.shards)
        fsync_dir(self.directory)
        commit(self.layout())
        listed = np.zeros(self.capacity, dtype=bool)
        listed[: len(self._listed)] = self._listed
        self._listed = listed
        self._tails = None
        for name in old:
            (self.directory / name).unlink(missing_ok=True)

    def _new_file(self, rows: int, capacity: int) -> np.memmap:
        self.generation += 1
        self._pending = matrix_name(self.generation)
        return np.memmap(self.directory / self._pending, dtype=np.float32, mode="w+",
                         shape=(rows, capacity))

    def _finish(self, new: np.memmap) -> str:
        new.flush()
        del new
        name = self._pending
        with open(self.directory / name, "rb+") as f:
            os.fsync(f.fileno())
        return name

    def _map_of(self, sh: Shard) -> np.memmap:
        return np.memmap(self.directory / sh.name, dtype=np.float32,
                         mode="r+" if self.writable else "r", shape=(self.T, sh.capacity))

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
            new = self._new_file(T, sh.capacity)
            for o, t in zip(*row_map):
                new[t] = sh.map[o]
            news.append((new, self._pending))

        def put(cols, Z):
            cols = np.asarray(cols, np.int64)
            for sh, (new, _) in zip(shards, news):
                inside = (cols >= sh.offset) & (cols < sh.offset + sh.capacity)
                if inside.any():
                    new[:, cols[inside] - sh.offset] = np.asarray(Z)[inside].T

        if fill is not None:
            fill(put)
        names = []
        for new, name in news:
            self._pending = name
            names.append(self._finish(new))
        fsync_dir(self.directory)
        self.T = T
        self.shards = [Shard(sh.offset, sh.capacity, name, None)
                       for sh, name in zip(shards, names)]
        for sh in self.shards:
            sh.map = self._map_of(sh)
        commit(self.layout())
        self._refresh_listed()
        for name in old_names:
            if name not in names:
                (self.directory / name).unlink(missing_ok=True)

    def remove_orphans(self) -> None:
        """Delete the files of grows and seals that never committed."""
        keep = {s.name for s in self.shards} | {g.name for s in self.shards
                                                for g in s.segments}
        for p in matrix_files(self.directory):
            if p.name not in keep:
                p.unlink(missing_ok=True)
