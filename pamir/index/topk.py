"""Exact top-k kernels (numba): Fagin's threshold algorithm over score-sorted word lists, and
a fused brute-force scan, sharing one bounded heap per query.

Order. A result ranks by score, highest first, then by picture id, smallest first: (s1, id1)
is better than (s2, id2) when s1 > s2, or s1 == s2 and id1 < id2. Both paths and the numpy
reference (`ScoreMatrix.best_of`) use it, so they agree on ties.

Exactness. A picture's score is computed the same way everywhere, in float32, adding the
query's words in ascending row order starting from 0: s = ((0 + q0*z0) + q1*z1) + ... .
Rounded float32 multiplication by a fixed weight and rounded addition are monotone, so the
threshold tau computed the same way from the lists' current values bounds every unseen
picture's computed score exactly (not just up to rounding). A word with a negative weight is
walked from the low end of its list, where q*z is largest.

Block bounds. A segment also stores, per word and per block of BLOCK columns, the highest
and the lowest score of its columns there; a query's bound for a block (each word's maximum,
its minimum for a negative weight, summed as above) is never below a score in it, so a scan
skips every block whose bound is under the k-th score found so far. A short TA first finds
good scores, so that most blocks are skipped (docs/scale.md).

The heap holds the k best so far with the worst at its root; every kernel takes it, so shards
and segments searched one after another prune with the k-th score found so far.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Columns scored at a time by the brute-force scan (fits L1 with a few rows).
CHUNK = 2048


@njit(cache=True, inline="always")
def _better(s1, i1, s2, i2):
    return s1 > s2 or (s1 == s2 and i1 < i2)


@njit(cache=True)
def _push(hs, hid, size, k, s, pid):
    """Offer (s, pid) to the heap of the k best (root: the worst of them)."""
    n = size[0]
    if n < k:
        i = n
        size[0] = n + 1
        while i > 0:
            p = (i - 1) >> 1
            if _better(hs[p], hid[p], s, pid):
                hs[i] = hs[p]
                hid[i] = hid[p]
                i = p
            else:
                break
        hs[i] = s
        hid[i] = pid
        return
    if not _better(s, pid, hs[0], hid[0]):
        return
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        r = c + 1
        if r < n and _better(hs[c], hid[c], hs[r], hid[r]):
            c = r  # the worse child
        if _better(s, pid, hs[c], hid[c]):
            hs[i] = hs[c]
            hid[i] = hid[c]
            i = c
        else:
            break
    hs[i] = s
    hid[i] = pid


@njit(cache=True, inline="always")
def _offer(hs, hid, size, k, s, pid, floor, has_floor):
    if has_floor and s < floor:
        return
    if size[0] == k and not _better(s, pid, hs[0], hid[0]):
        return
    _push(hs, hid, size, k, s, pid)


@njit(cache=True, inline="always")
def _admission(hs, size, k, floor, has_floor):
    """The score under which nothing can enter the heap now."""
    thr = hs[0] if size[0] == k else np.float32(-np.inf)
    if has_floor and floor > thr:
        thr = floor
    return thr


@njit(cache=True)
def ta_segment(ids, vals, rows, q, M, offset, width, col_id, live, keep, use_keep,
               floor, has_floor, hs, hid, size, k, seen, touched, ntouched, max_depth):
    """The threshold algorithm over one segment's lists (ids, vals: (list rows, L), each row
    a word's local columns and scores sorted by score, descending). rows/q: the query's word
    rows (ascending) and weights; M: the shard's (rows, capacity) matrix; offset: the shard's
    first global column. Marks every column it scores in `seen` (and lists it in `touched`).
    Returns the depth it stopped at, or -1 when it reached max_depth without being sure (the
    caller then scans the rest of the shard)."""
    m = len(rows)
    L = ids.shape[1]
    for d in range(L):
        if d >= max_depth:
            return -1
        for j in range(m):
            pos = d if q[j] > 0 else L - 1 - d
            c = ids[rows[j], pos]
            if seen[c]:
                continue
            seen[c] = 1
            touched[ntouched[0]] = c
            ntouched[0] += 1
            g = offset + c
            if g >= width or not live[g]:
                continue
            if use_keep and not keep[g]:
                continue
            s = np.float32(0)
            for i in range(m):  # word j's score is the list's (the same float): m - 1 reads
                s += q[i] * (vals[rows[j], pos] if i == j else M[rows[i], c])
            _offer(hs, hid, size, k, s, col_id[g], floor, has_floor)
        tau = np.float32(0)
        for j in range(m):
            pos = d if q[j] > 0 else L - 1 - d
            tau += q[j] * vals[rows[j], pos]
        if has_floor and tau < floor:
            return d + 1
        if size[0] == k and tau < hs[0]:
            return d + 1
    return L


@njit(cache=True)
def brute_range(rows, q, M, offset, c0, c1, width, col_id, live, keep, use_keep,
                floor, has_floor, hs, hid, size, k, seen, use_seen):
    """Score the shard's local columns c0..c1 (global offset + c) and offer each to the heap;
    with use_seen, columns already scored (seen) are skipped."""
    m = len(rows)
    acc = np.empty(CHUNK, np.float32)
    c1 = min(c1, width - offset)
    for start in range(c0, c1, CHUNK):
        n = min(CHUNK, c1 - start)
        a = acc[:n]
        row = M[rows[0], start:start + n]  # 1-d slices: the loops vectorise
        qj = q[0]
        for i in range(n):
            a[i] = np.float32(0) + qj * row[i]
        for j in range(1, m):
            row = M[rows[j], start:start + n]
            qj = q[j]
            for i in range(n):
                a[i] += qj * row[i]
        thr = _admission(hs, size, k, floor, has_floor)
        over = 0
        for i in range(n):  # a branch-free count (vectorises): most chunks have no candidate
            over += a[i] >= thr
        if over == 0:
            continue
        for i in range(n):
            s = acc[i]
            if s < thr:  # cannot enter the heap (a tie with the k-th goes on to the check)
                continue
            c = start + i
            g = offset + c
            if not live[g] or (use_keep and not keep[g]) or (use_seen and seen[c]):
                continue
            _offer(hs, hid, size, k, s, col_id[g], floor, has_floor)
            thr = _admission(hs, size, k, floor, has_floor)


@njit(cache=True)
def block_bounds(rows, q, bmax, bmin, ub):
    """ub[b] = max(ub[b], the most any picture of block b can score): each word's block
    maximum (its minimum for a negative weight), summed the way a score is (module docstring),
    so the bound holds for the computed float32 scores exactly. bmax, bmin: (words, blocks) of
    one segment; a block without columns in it is -inf / +inf there, and its bound -inf."""
    n = min(bmax.shape[1], len(ub))
    acc = np.empty(n, np.float32)
    for j in range(len(rows)):  # word by word: the inner loops vectorise
        bound = bmax[rows[j]] if q[j] > 0 else bmin[rows[j]]
        qj = q[j]
        if j == 0:
            for b in range(n):
                acc[b] = np.float32(0) + qj * bound[b]
        else:
            for b in range(n):
                acc[b] += qj * bound[b]
    for b in range(n):
        if acc[b] > ub[b]:
            ub[b] = acc[b]


#: The block scan goes down the bounds in passes: blocks whose bound is in the top 1/16 of
#: the span between the k-th score found so far and the highest bound, then the top 1/4,
#: then the rest; the early passes raise the k-th score, so the later ones skip more.
PASSES = (1 / 16, 1 / 4, 1.0)


@njit(cache=True)
def pruned_range(rows, q, M, offset, ub, block, local, listed, width, col_id, live, keep,
                 use_keep, floor, has_floor, hs, hid, size, k, seen):
    """The scan of a shard's listed columns (those in a segment; 0..local), block by block,
    skipping every block whose bound ub[b] is under the heap's admission score: exact, as no
    picture scores above its block's bound. Columns already scored (seen) are skipped."""
    m = len(rows)
    acc = np.empty(block, np.float32)
    thr = _admission(hs, size, k, floor, has_floor)
    n = 0  # the blocks that can still matter, gathered in one sweep
    for b in range(len(ub)):
        n += ub[b] >= thr
    cand = np.empty(n, np.int64)
    n = 0
    top = np.float32(-np.inf)
    for b in range(len(ub)):
        if ub[b] >= thr:
            cand[n] = b
            n += 1
            top = max(top, ub[b])
    hi = np.float32(np.inf)
    for p in range(len(PASSES)):
        thr = _admission(hs, size, k, floor, has_floor)
        if top < thr:
            return
        last = p == len(PASSES) - 1 or thr == -np.inf
        lo = thr if last else np.float32(top - (top - thr) * PASSES[p])
        for b in cand:
            u = ub[b]
            if u >= hi or u < lo or u < _admission(hs, size, k, floor, has_floor):
                continue  # scanned in an earlier pass, left to a later one, or hopeless
            c0 = b * block
            n = min(block, local - c0)
            for i in range(n):  # scores of the block's columns, as brute_range adds them
                acc[i] = np.float32(0) + q[0] * M[rows[0], c0 + i]
            for j in range(1, m):
                qj = q[j]
                for i in range(n):
                    acc[i] += qj * M[rows[j], c0 + i]
            thr = _admission(hs, size, k, floor, has_floor)
            for i in range(n):
                s = acc[i]
                if s < thr:  # a tie with the k-th goes on to the check
                    continue
                c = c0 + i
                g = offset + c
                if not listed[g] or seen[c] or not live[g] or (use_keep and not keep[g]):
                    continue
                _offer(hs, hid, size, k, s, col_id[g], floor, has_floor)
                thr = _admission(hs, size, k, floor, has_floor)
        if last:
            return
        hi = lo


@njit(cache=True)
def brute_cols(rows, q, M, offset, cols, width, col_id, live, keep, use_keep,
               floor, has_floor, hs, hid, size, k):
    """Score the shard's local columns `cols` (an unsorted tail) and offer each."""
    m = len(rows)
    for c in cols:
        g = offset + c
        if g >= width or not live[g] or (use_keep and not keep[g]):
            continue
        s = np.float32(0)
        for i in range(m):
            s += q[i] * M[rows[i], c]
        _offer(hs, hid, size, k, s, col_id[g], floor, has_floor)


@njit(cache=True)
def clear_seen(seen, touched, n):
    for i in range(n):
        seen[touched[i]] = 0


def sorted_hits(hs: np.ndarray, hid: np.ndarray, size: int) -> list[tuple[int, float]]:
    """The heap's (id, score) pairs in result order."""
    s, i = hs[:size], hid[:size]
    order = np.lexsort((i, -s))
    return list(zip(i[order].tolist(), s[order].tolist()))
