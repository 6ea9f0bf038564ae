"""The exact top-k of a query whose terms reach ImageNet classes, without scoring
every picture.

Such a query scores a picture base + mult x sum_t w_t mass_score(m_t): m_t = P . v_t, the
probability mass of term t's classes (pamir.zeroshot.classes), and base the model words' part of a
mixed query, (1 - mix) x their standard score (pamir.index.reading), or 0 for classes alone.
mass_score rises with m, so where v_t >= 0 and w_t > 0 a block of columns scores at most
base's maximum there + mult x sum_t w_t mass_score(v_t . the class rows' block maxima)
(layout.Segment.row_bounds); an excluded term (w_t < 0) adds at most 0. The blocks are
scored best bound first, until the next bound is under the k-th score found: the answer is
the scan's, exactly, since a picture's score is computed the same way here as there
(`class_part`: float32 masses summed in ascending row order, then float64).

At a million pictures a scan reads each class row of the query in full (a table word: a
class or two; a word matched by meaning: up to 20) and takes the log of a million masses;
the bounds read a block's maximum instead, and the columns of the few blocks that can win.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..zeroshot.classes import mass_score

#: The bounds are widened by this much (relative) against rounding in the float64 part
#: (mass_score, the sums): a wider bound scores a block more, never changes an answer.
BOUND_MARGIN = 1e-6
#: Blocks scored per round, at first; each round scores twice as many as the last, so a
#: query whose bounds are loose ends in a few rounds, not one per block.
FIRST_BLOCKS = 64

Terms = Sequence[tuple[float, np.ndarray]]


def _rows(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.flatnonzero(v)
    return rows, np.asarray(v, np.float32)[rows]


def class_part(matrix, terms: Terms, start: int, cols: np.ndarray | None = None) -> np.ndarray:
    """sum_t w_t mass_score(m_t) (float64) of the given global columns (every column up to
    the width by default): the one computation of a class query's score, so that the
    bounded top-k and the scan agree exactly. start: the matrix row of the first class."""
    parts = [_rows(v) for _, v in terms]
    n = matrix._width if cols is None else len(cols)
    masses = [np.zeros(n, np.float32) for _ in terms]
    for sh, a, b in matrix._spans():
        if cols is None:
            at, local = slice(a, b), slice(0, b - a)
        else:
            at = np.flatnonzero((cols >= a) & (cols < b))
            local = cols[at] - sh.offset
            if not len(at):
                continue
        for m, (rows, x) in zip(masses, parts):
            part = np.zeros(b - a if cols is None else len(at), np.float32)
            for r, xr in zip(rows, x):  # ascending rows, from 0: as ScoreMatrix.scores adds
                part += xr * sh.map[start + r, local]
            m[at] = part
    return sum(w * mass_score(m) for (w, _), m in zip(terms, masses))


def top(matrix, terms: Terms, start: int, k: int, *, base: np.ndarray | None = None,
        mult: float = 1.0, keep: np.ndarray | None = None,
        floor: float | None = None) -> list[tuple[int, float]] | None:
    """(picture id, score) of the k best pictures, best first, equal scores by id: what
    scoring every column as (base + mult x class_part).astype(float32) and ranking would
    give, within keep and over floor. None where a segment lacks its class rows' bounds
    (an index written before them, until its next compaction): the caller scans."""
    width = matrix._width
    if not width or not terms:
        return None
    parts = [(w, *_rows(v)) for w, v in terms]
    ok = matrix._live[:width].copy()
    if keep is not None:  # a filter's mask may end before the last columns: not kept
        kept = np.zeros(width, bool)
        kept[: min(width, len(keep))] = np.asarray(keep[:width], bool)
        ok &= kept
    exact_cols, blocks = [], []  # columns scored outright; (shard, block, bound) to order
    tails = matrix._tail_cols()
    spans = list(matrix._spans())
    for n_shard, (sh, a, b) in enumerate(spans):
        bound = _shard_bounds(matrix, sh, b - a, parts, start, base, mult, ok[a:b])
        if bound is None:
            return None
        exact_cols.append(sh.offset + tails[n_shard])
        if len(bound):
            nb = len(bound)
            blocks.append((np.full(nb, n_shard), np.arange(nb), bound))
    best_s = np.zeros(0, np.float32)
    best_c = np.zeros(0, np.int64)

    def offer(cols: np.ndarray) -> None:
        nonlocal best_s, best_c
        cols = cols[ok[cols]]
        if not len(cols):
            return
        c = class_part(matrix, terms, start, cols)
        s = (c if base is None else base[cols] + mult * c).astype(np.float32)
        if floor is not None:
            cols, s = cols[s >= floor], s[s >= floor]
        best_s = np.concatenate([best_s, s])
        best_c = np.concatenate([best_c, cols])
        order = np.lexsort((matrix._col_id[best_c], -best_s))[:k]  # best_s[-1]: the k-th
        best_s, best_c = best_s[order], best_c[order]

    offer(np.concatenate(exact_cols) if exact_cols else np.zeros(0, np.int64))
    if blocks:
        shard_of = np.concatenate([x[0] for x in blocks])
        block_of = np.concatenate([x[1] for x in blocks])
        bound = np.concatenate([x[2] for x in blocks])
        order = np.argsort(-bound, kind="stable")
        order = order[bound[order] > -np.inf]
        done, size = 0, FIRST_BLOCKS
        while done < len(order):
            if len(best_s) >= k and bound[order[done]] < best_s[-1]:
                break  # no block left can hold a picture better than the k-th
            chunk = order[done:done + size]
            if len(best_s) >= k:
                chunk = chunk[bound[chunk] >= best_s[-1]]
            offer(_block_columns(matrix, spans, shard_of[chunk], block_of[chunk]))
            done += size
            size *= 2
    return [(int(i), float(s)) for i, s in zip(matrix._col_id[best_c], best_s)]


def _shard_bounds(matrix, sh, local: int, parts, start: int, base, mult: float,
                  ok: np.ndarray) -> np.ndarray | None:
    """Per block of a shard's columns, the most a listed column there can score (-inf:
    no listed column, or none the filters keep: ok); None where a segment has no bounds for
    a class row of the query."""
    if not sh.segments:
        return np.zeros(0)
    block = sh.segments[0].block
    if not block or any(g.block != block for g in sh.segments):
        return None
    nb = -(-local // block)
    total = np.zeros(nb)
    listed = np.full(nb, False)
    for w, rows, x in parts:
        ub = np.full(nb, -np.inf, np.float32)
        for seg in sh.segments:
            m = np.zeros(min(nb, seg.bmax.shape[1]), np.float32)
            for r, xr in zip(rows, x):
                bounds = seg.row_bounds(start + r, matrix.words)
                if bounds is None:
                    return None
                m += xr * bounds[: len(m)]
            ub[: len(m)] = np.maximum(ub[: len(m)], m)
        listed |= ub > -np.inf
        if w > 0:  # an excluded term's part is at most 0
            total += w * mass_score(np.where(ub > -np.inf, ub, 0.0))
    total *= mult
    if base is not None:
        b = base[sh.offset: sh.offset + local].astype(np.float64)
        b = np.concatenate([b, np.full(nb * block - local, -np.inf)])
        total += b.reshape(nb, block).max(axis=1)
    finite = np.isfinite(total)
    total[finite] += BOUND_MARGIN * (1.0 + np.abs(total[finite]))
    kept = np.concatenate([ok[:local], np.zeros(nb * block - local, bool)])
    return np.where(listed & kept.reshape(nb, block).any(axis=1), total, -np.inf)


def _block_columns(matrix, spans, shards: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """The global columns of these blocks that a segment lists (a tail's are scored
    outright)."""
    out = []
    for n_shard in np.unique(shards):
        sh, a, b = spans[n_shard]
        block = sh.segments[0].block
        starts = blocks[shards == n_shard] * block
        cols = (starts[:, None] + np.arange(block)[None, :]).ravel()
        cols = cols[cols < b - a] + sh.offset
        out.append(cols[matrix._listed[cols]])
    return np.concatenate(out) if out else np.zeros(0, np.int64)
