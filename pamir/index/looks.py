"""The index's looks and the groups of copies and bursts found with them, a part of `Index`:
the looks as arrays, the groups as pamir.duplicates.groups reads and writes them, and a
search's hits with each group folded into one. The SQL is the catalogue's
(pamir.index.catalog_looks); how pictures are compared is pamir.duplicates.looks', how they
are grouped pamir.duplicates.grouping's. The index keeps the looks it is given and imports
nothing of pamir.duplicates, which works over it (a layer above: docs/architecture.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .catalog_base import path_of

if TYPE_CHECKING:
    from .lifecycle import IndexFolder


@dataclass
class LookRows:
    """The current looks of the index's scored pictures, in id order: ids (n,), paths,
    hashes, pixels (n, side, side, 3) uint8, sizes (n, 2) (width, height as shown), shot (n,)
    seconds (NaN: not written)."""
    ids: np.ndarray
    paths: list[str]
    hashes: list[str]
    pixels: np.ndarray
    sizes: np.ndarray
    shot: np.ndarray


#: How search folds groups: "none", "copies" (the default: a picture and its copies are one
#: hit), "bursts" (a burst too).
COLLAPSE = ("none", "copies", "bursts")
#: How often search asks for more pictures when folding left fewer than asked for.
_REFILLS = 4


class Looks:
    """The looks and groups of an open index (its folder's catalogue, under its lock)."""

    def __init__(self, folder: IndexFolder):
        self._folder = folder
        self._catalog, self._lock = folder._catalog, folder._lock

    # ------------------------------------------------------------------ search
    def folded(self, run: Callable[[int], list], k: int, collapse: str) -> list:
        """run(n)'s hits (the n best, pamir.index.Hit) with each group folded into its first
        hit (`Hit.folded`: the group's other pictures), k of them, asking run for more while
        folding leaves fewer than k."""
        if collapse not in COLLAPSE:
            raise ValueError(f"collapse {collapse!r}: one of {', '.join(COLLAPSE)}")
        n = k
        for _ in range(_REFILLS):
            hits = run(n)
            if collapse == "none" or not hits:
                return hits
            shown = self._fold(hits, collapse)
            if len(shown) >= k or len(hits) < n:
                return shown[:k]
            n = n + 2 * (k - len(shown)) + k
        return shown[:k]

    def _fold(self, hits: list, collapse: str) -> list:
        groups = self.groups_of(h.id for h in hits)
        first: dict[tuple, object] = {}
        shown = []
        for h in hits:
            copy, burst = groups.get(h.id, (None, None))
            key = ("burst", burst) if collapse == "bursts" and burst is not None else \
                ("copy", copy) if copy is not None else None
            if key is None:
                shown.append(h)
            elif key not in first:
                first[key] = h
                h.folded = [i for i in self.group_members(key[1], key[0]) if i != h.id]
                shown.append(h)
        return shown

    # ------------------------------------------------------------------ writing
    def record_looks(self, name: str, kinds: Sequence[str], found: dict,
                     done: Sequence[tuple[int, str]]) -> None:
        """A batch of the looks pass (pamir.index.passes.run_pass's `record`): each picture's
        look ({id: pamir.duplicates.looks.Look, or [] where it could not be read}) and the record that
        the pass read it, in one commit."""
        self._folder.require_writable()
        digests = dict(done)
        looks = [(int(i), digests[i], int(look.width), int(look.height), look.shot,
                  np.ascontiguousarray(look.pixels, np.uint8).tobytes())
                 for i, look in found.items() if look]
        with self._lock, self._catalog.transaction():
            self._catalog.looks.record(looks, [i for i, look in found.items() if not look])
            self._catalog.facts.pass_done(name, done)

    def set_groups(self, copies: dict[int, tuple[int, str]], bursts: dict[int, int]) -> None:
        """The groups found, in one commit: {picture id: (its group, "exact" or "near")} for
        copies, {picture id: its group} for bursts (a group named by its smallest id); every
        other picture in none."""
        self._folder.require_writable()
        with self._lock, self._catalog.transaction():
            self._catalog.looks.set_groups(copies, bursts)

    def keep_picture(self, picture_id: int, ids: Iterable[int]) -> None:
        """An editor keeps `picture_id` of the group of pictures `ids`: the others are no
        longer kept (pamir.duplicates.groups moves them aside when asked; nothing is deleted)."""
        self._folder.require_writable()
        ids = [int(i) for i in ids]
        with self._lock, self._catalog.transaction():
            self._catalog.looks.keep(picture_id, ids)

    # ------------------------------------------------------------------ reading
    def look_rows(self) -> LookRows:
        """The looks of the scored pictures, read as they are now (a look of other bytes, a
        picture changed since, is left out until the pass reads it again)."""
        with self._lock:
            rows = self._catalog.looks.current()
        n = len(rows)
        # the side the looks were read at (pamir.duplicates.looks.SIDE), from their bytes
        side = math.isqrt(len(rows[0][6]) // 3) if n else 0
        pixels = np.frombuffer(b"".join(r[6] for r in rows), np.uint8).reshape(
            n, side, side, 3)
        return LookRows(np.array([r[0] for r in rows], np.int64), [path_of(r[1]) for r in rows],
                        [r[2] for r in rows], pixels,
                        np.array([(r[3], r[4]) for r in rows], np.int64).reshape(n, 2),
                        np.array([np.nan if r[5] is None else r[5] for r in rows], np.float64))

    def groups_of(self, ids: Iterable[int]) -> dict[int, tuple[int | None, int | None]]:
        """{id: (its copy group, its burst group)} of these pictures that are in a group."""
        ids = [int(i) for i in ids]
        with self._lock:
            return self._catalog.looks.groups_of(ids)

    def stored_groups(self) -> list[dict]:
        """The groups as last found: [{"kind": "exact" | "near" | "burst", "group": its id,
        "ids": [...], "kept": the id an editor chose or None}], copies first."""
        with self._lock:
            rows = self._catalog.looks.grouped()
        groups: dict[tuple, dict] = {}
        for picture, copy, kind, burst, kept in rows:
            for key, group_kind in (((copy, "copy"), kind), ((burst, "burst"), "burst")):
                if key[0] is None:
                    continue
                g = groups.setdefault(key, {"kind": group_kind, "group": key[0], "ids": [],
                                            "kept": None})
                g["ids"].append(int(picture))
                if kept and g["kept"] is None:
                    g["kept"] = int(picture)
        order = {"exact": 0, "near": 1, "burst": 2}
        return sorted(groups.values(), key=lambda g: (order[g["kind"]], g["group"]))

    def group_members(self, group: int, kind: str = "copy") -> list[int]:
        """The ids of a group's pictures ("copy" or "burst" group)."""
        with self._lock:
            return self._catalog.looks.members(group, kind)


__all__ = ["COLLAPSE", "LookRows", "Looks"]
