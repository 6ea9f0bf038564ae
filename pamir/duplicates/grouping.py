"""Copies and bursts found among pictures: which pictures are the same picture (exact copies:
the same file, or the same pixels in another file), which were made from one (near-copies:
resized, recompressed, cropped a little, colour-adjusted, exported from an editor) and which
were shot seconds apart of one scene (bursts). Arrays in, groups out: pamir.duplicates.groups reads
the index and acts on the groups.

Two pictures are linked when they look alike (pamir.duplicates.looks: the best correlation of a crop of
one with the other) and their dates taken agree:
- a copy keeps the date of its original (an editor's export, a copy) or has none (a PNG
  export): alike >= NEAR_ALIKE and no two different dates;
- a burst's shots have dates 1 to BURST_SECONDS seconds apart: alike >= BURST_ALIKE.
Pictures of one scene shot minutes apart, or undated (the other pictures of a Corel CD), are
neither, however alike: a copy is never guessed from the look alone below NEAR_ALIKE.

Only candidate pairs are compared: the same file hash, each picture's NEIGHBOURS nearest by
look (faiss, exact up to FLAT_MAX pictures, else an inverted file), and pictures taken within
BURST_SECONDS of each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .looks import Looks

#: Alike enough, matched finely (pamir.duplicates.looks.FINE), to be copies. On the benchmark's 1,600
#: pictures every copy joined its group (through the copy it is most alike: two copies of one
#: another, a half-size one and a cropped one, score as low as 0.969), no other picture of
#: its CD did (0.926 at most), and of all 247,500 pairs of different pictures of one Corel
#: CD one scores over it: two frames of one tiger (benchmarks/results/duplicates.md).
NEAR_ALIKE = 0.98
#: Pairs matched coarsely this alike are matched finely (of all Corel CD pairs, 42 are).
COARSE_FLOOR = 0.94
#: A coarse match this alike makes a copy where the fine match cannot be made.
COARSE_SURE = 0.995
#: Copies of one size matched this alike are decoded to see whether their pixels are equal
#: (the same pixels in a PNG and a JPEG score 0.98 coarsely: the JPEG is decoded at 1/8).
EXACT_FLOOR = 0.97
#: Alike enough, taken seconds apart, to be one burst (shots a few pixels apart score 0.8+).
BURST_ALIKE = 0.75
#: The most seconds between two shots of one burst.
BURST_SECONDS = 10.0
#: Candidates: each picture's nearest pictures by look, and those with a key this alike.
NEIGHBOURS, KEY_FLOOR = 12, 0.5
#: Up to this many pictures, neighbours are exact (faiss flat); over it an inverted file.
FLAT_MAX = 200_000
#: Pictures a burst's time window compares one picture with, at most.
WINDOW_MAX = 50
#: Kinds of group, from the most alike.
KINDS = ("exact", "near", "burst")


@dataclass
class Group:
    """Pictures (indices into the arrays given) that are one picture: kind "exact" (all of
    them the same pixels) or "near" (copies of one, `parts`: its sets of exact copies); or
    one moment: "burst" (`parts`: its shots, each a picture and its copies)."""
    kind: str
    members: list[int]
    parts: list[list[int]] = field(default_factory=list)


def find_groups(hashes: Sequence[str], looks: Looks, taken: np.ndarray, *,
                fine: Callable[[int, int], float | None] | None = None,
                same_pixels: Callable[[int, int], bool] | None = None,
                burst_seconds: float = BURST_SECONDS) -> list[Group]:
    """Groups of copies and bursts among n pictures: their file hashes, their looks (in the
    same order), when each was taken (seconds, NaN: not known). fine(i, j): how alike two
    pictures look matched finely from their files (pamir.duplicates.looks.FineLooks; None: a file could
    not be read); without it, or where it says None, only a coarse match of COARSE_SURE
    makes a copy. same_pixels(i, j): whether two copies of one size hold the same pixels
    (decoded; None: never asked). Groups of two or more: copies, then bursts, largest
    first."""
    n = len(hashes)
    taken = np.asarray(taken, np.float64)
    pairs = candidate_pairs(hashes, looks, taken, burst_seconds)
    i, j = pairs[:, 0], pairs[:, 1]
    same_file = np.array([hashes[a] == hashes[b] for a, b in zip(i, j)], bool)
    coarse = np.ones(len(i), np.float32)
    coarse[~same_file] = looks.alike(i[~same_file], j[~same_file])
    dated = np.isfinite(taken[i]) & np.isfinite(taken[j])
    gap = np.where(dated, np.abs(taken[i] - taken[j]), 0.0)
    links = _Links(n, pairs, coarse, looks.sizes, fine, same_pixels, taken)
    copy, exact = links.copies(same_file | ((gap == 0) & (coarse >= COARSE_FLOOR)), same_file)
    burst = ~copy & dated & (gap > 0) & (gap <= burst_seconds) & (coarse >= BURST_ALIKE)
    return _groups(n, pairs, exact, copy, burst)


class _Links:
    """Which candidate pairs are copies, and exact ones: the pairs are taken from the most
    alike, and a pair whose pictures are already linked through others is not matched
    finely (nor decoded), which leaves about one fine match per copy. A group of copies is
    of one moment: a link that would join two different camera times (through an undated
    export of one of them) is not made, unless the files are the same."""

    def __init__(self, n, pairs, coarse, sizes, fine, same_pixels, taken):
        self.pairs, self.coarse, self.sizes = pairs, coarse, sizes
        self.fine, self.same_pixels = fine, same_pixels
        self.copy_of, self.exact_of = np.arange(n), np.arange(n)
        self.moment = np.asarray(taken, np.float64).copy()  # a group's time, at its root

    def copies(self, todo: np.ndarray, same_file: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(copy, exact) masks over the pairs, of the pairs in `todo` (same_file: exact)."""
        copy = np.zeros(len(self.pairs), bool)
        exact = np.zeros(len(self.pairs), bool)
        for k in np.flatnonzero(todo)[np.argsort(-self.coarse[todo], kind="stable")]:
            i, j = (int(x) for x in self.pairs[k])
            if same_file[k] or _root(self.exact_of, i) == _root(self.exact_of, j):
                copy[k] = exact[k] = True  # the same file, or already known the same
            elif self._two_moments(i, j):
                continue
            elif _root(self.copy_of, i) == _root(self.copy_of, j):
                copy[k] = True
                exact[k] = self._same_pixels(k, i, j, self.coarse[k])
            else:
                alike = self._alike(k, i, j)
                copy[k] = alike >= NEAR_ALIKE
                exact[k] = copy[k] and self._same_pixels(k, i, j, alike)
            if copy[k]:
                self._join(i, j)
            if exact[k]:
                _union(self.exact_of, i, j)
        return copy, exact

    def _two_moments(self, i: int, j: int) -> bool:
        a, b = self.moment[_root(self.copy_of, i)], self.moment[_root(self.copy_of, j)]
        return bool(np.isfinite(a) and np.isfinite(b) and a != b)

    def _join(self, i: int, j: int) -> None:
        a, b = _root(self.copy_of, i), _root(self.copy_of, j)
        moment = self.moment[a] if np.isfinite(self.moment[a]) else self.moment[b]
        _union(self.copy_of, i, j)
        self.moment[_root(self.copy_of, i)] = moment

    def _alike(self, k: int, i: int, j: int) -> float:
        """The fine match (the coarse one where there is none: a copy only if COARSE_SURE)."""
        score = None if self.fine is None else self.fine(i, j)
        if score is not None:
            return score
        return self.coarse[k] if self.coarse[k] >= COARSE_SURE else 0.0

    def _same_pixels(self, k: int, i: int, j: int, alike: float) -> bool:
        return (alike >= EXACT_FLOOR and self.same_pixels is not None
                and bool((self.sizes[i] == self.sizes[j]).all()) and self.same_pixels(i, j))


def _root(parent: np.ndarray, i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _union(parent: np.ndarray, i: int, j: int) -> None:
    parent[_root(parent, i)] = _root(parent, j)


def candidate_pairs(hashes: Sequence[str], looks: Looks, taken: np.ndarray,
                    burst_seconds: float = BURST_SECONDS) -> np.ndarray:
    """(m, 2) int64 pairs i < j worth comparing, each once (see the module's doc)."""
    found = [_same_hash(hashes), _neighbours(looks), _within(taken, burst_seconds)]
    pairs = np.concatenate([p for p in found if len(p)] or [np.zeros((0, 2), np.int64)])
    pairs = np.sort(pairs, axis=1)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    return np.unique(pairs, axis=0) if len(pairs) else pairs


def _same_hash(hashes: Sequence[str]) -> np.ndarray:
    by: dict[str, list[int]] = {}
    for k, h in enumerate(hashes):
        if h:
            by.setdefault(h, []).append(k)
    # a chain through the group links it whole: no need for every pair
    out = [(g[0], b) for g in by.values() if len(g) > 1 for b in g[1:]]
    return np.asarray(out, np.int64).reshape(-1, 2)


def _neighbours(looks: Looks) -> np.ndarray:
    """Each picture's NEIGHBOURS nearest by key (inner products of unit vectors) with a
    similarity of KEY_FLOOR or more."""
    import faiss  # noqa: PLC0415 - only when groups are looked for

    n = looks.n
    if n < 2:
        return np.zeros((0, 2), np.int64)
    keys = looks.keys()
    index = _key_index(faiss, keys)
    k = min(NEIGHBOURS + 1, n)
    out = []
    for start in range(0, n, 65536):
        sims, nbrs = index.search(keys[start:start + 65536], k)
        rows = np.repeat(np.arange(start, start + len(nbrs)), k)
        keep = (sims.ravel() >= KEY_FLOOR) & (nbrs.ravel() >= 0)
        out.append(np.stack([rows[keep], nbrs.ravel()[keep]], 1))
    return np.concatenate(out).astype(np.int64)


def _key_index(faiss, keys: np.ndarray):
    d = keys.shape[1]
    if len(keys) <= FLAT_MAX:
        index = faiss.IndexFlatIP(d)
    else:  # sqrt(n) lists, a few probed: near keys share a list far more often than not
        lists = int(4 * np.sqrt(len(keys)))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, lists, faiss.METRIC_INNER_PRODUCT)
        sample = np.random.default_rng(0).choice(len(keys), min(len(keys), 50 * lists),
                                                 replace=False)
        index.train(keys[np.sort(sample)])
        index.nprobe = 8
    index.add(keys)
    return index


def _within(taken: np.ndarray, seconds: float) -> np.ndarray:
    """Pairs of dated pictures taken 0 to `seconds` apart (each with its WINDOW_MAX next)."""
    dated = np.flatnonzero(np.isfinite(taken))
    if len(dated) < 2:
        return np.zeros((0, 2), np.int64)
    order = dated[np.argsort(taken[dated], kind="stable")]
    t = taken[order]
    out = []
    for step in range(1, min(WINDOW_MAX, len(order) - 1) + 1):
        close = t[step:] - t[:-step] <= seconds
        if not close.any():
            break
        out.append(np.stack([order[:-step][close], order[step:][close]], 1))
    return np.concatenate(out) if out else np.zeros((0, 2), np.int64)


def _groups(n: int, pairs: np.ndarray, exact: np.ndarray, copy: np.ndarray,
            burst: np.ndarray) -> list[Group]:
    """Connected components: exact sets, copies of one picture over them, bursts over
    those."""
    exact_of = _components(n, pairs[exact])
    copy_of = _components(n, pairs[copy | exact])
    burst_of = _components(n, pairs[copy | exact | burst])
    groups = []
    for members in _members(burst_of):
        shots = _members(copy_of, members)
        if len(shots) > 1:
            groups.append(Group("burst", members, shots))
            continue
        sets = _members(exact_of, members)
        groups.append(Group("exact" if len(sets) == 1 else "near", members, sets))
    # a burst's shots that have copies are groups of copies too
    groups += [Group("exact" if len(s := _members(exact_of, shot)) == 1 else "near", shot, s)
               for g in list(groups) if g.kind == "burst" for shot in g.parts if len(shot) > 1]
    return sorted(groups, key=lambda g: (KINDS.index(g.kind), -len(g.members), g.members[0]))


def _components(n: int, pairs: np.ndarray) -> np.ndarray:
    # start-up: scipy (0.3 s)
    from scipy.sparse import coo_matrix  # noqa: PLC0415
    from scipy.sparse.csgraph import connected_components  # noqa: PLC0415

    graph = coo_matrix((np.ones(len(pairs), np.int8), (pairs[:, 0], pairs[:, 1])),
                       shape=(n, n)) if len(pairs) else coo_matrix((n, n), dtype=np.int8)
    return connected_components(graph, directed=False)[1]


def _members(labels: np.ndarray, among: Sequence[int] | None = None) -> list[list[int]]:
    """The components of `labels` with two or more members (of `among` only, if given; then
    every component, singletons too), each sorted, by their first member."""
    idx = np.arange(len(labels)) if among is None else np.asarray(among, np.int64)
    order = idx[np.argsort(labels[idx], kind="stable")]
    cuts = np.flatnonzero(np.diff(labels[order])) + 1
    parts = [sorted(int(x) for x in p) for p in np.split(order, cuts)] if len(order) else []
    if among is None:
        parts = [p for p in parts if len(p) > 1]
    return sorted(parts, key=lambda p: p[0])


__all__ = ["BURST_ALIKE", "BURST_SECONDS", "Group", "KINDS", "NEAR_ALIKE", "candidate_pairs",
           "find_groups"]
