"""The index's looks and the groups of copies and bursts found with them (the `looks` table of
pamir.index.layout): the SQL and nothing of how pictures are compared (pamir.duplicates.looks) or grouped
(pamir.duplicates.grouping); pamir.duplicates.groups reads them here and writes the groups back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..duplicates.looks import SIDE as _SIDE
from .catalog import _path
from .layout import LOOKS_SCHEMA


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


class IndexLooks:
    """The looks part of `Index` (a mixin over its catalogue and lock)."""

    def _folded(self, run, k: int, collapse: str) -> list:
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

    @property
    def writable(self) -> bool:
        """Whether this process opened the index for writing (it holds the writer lock)."""
        return bool(self._writable)

    def _has_looks(self) -> bool:
        """Whether the catalogue has the looks table (it is made when looks are first read)."""
        return self._catalog._conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'looks'"
        ).fetchone() is not None

    def record_looks(self, name: str, kinds: Sequence[str], found: dict,
                     done: Sequence[tuple[int, str]]) -> None:
        """A batch of the looks pass (pamir.index.passes.run_pass's `record`): each picture's
        look ({id: pamir.duplicates.looks.Look, or [] where it could not be read}) and the record that
        the pass read it, in one commit."""
        self._require_writable()
        digests = dict(done)
        with self._lock, self._catalog.transaction():
            sql = self._catalog._conn
            for statement in LOOKS_SCHEMA:
                sql.execute(statement)
            sql.executemany("DELETE FROM looks WHERE picture = ?",
                            [(int(i),) for i, look in found.items() if not look])
            sql.executemany(
                "INSERT OR REPLACE INTO looks (picture, hash, width, height, shot, pixels) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(int(i), digests[i], int(look.width), int(look.height), look.shot,
                  np.ascontiguousarray(look.pixels, np.uint8).tobytes())
                 for i, look in found.items() if look])
            self._catalog.pass_done(name, done)

    def look_rows(self) -> LookRows:
        """The looks of the scored pictures, read as they are now (a look of other bytes, a
        picture changed since, is left out until the pass reads it again)."""
        rows = []
        with self._lock:
            if self._has_looks():
                rows = self._catalog._conn.execute(
                    "SELECT p.id, p.path, p.hash, l.width, l.height, l.shot, l.pixels "
                    "FROM looks l JOIN pictures p ON p.id = l.picture AND p.hash = l.hash "
                    "WHERE p.col IS NOT NULL ORDER BY p.id").fetchall()
        n = len(rows)
        pixels = np.frombuffer(b"".join(r[6] for r in rows), np.uint8).reshape(
            n, _SIDE, _SIDE, 3) if n else np.zeros((0, _SIDE, _SIDE, 3), np.uint8)
        return LookRows(np.array([r[0] for r in rows], np.int64), [_path(r[1]) for r in rows],
                        [r[2] for r in rows], pixels,
                        np.array([(r[3], r[4]) for r in rows], np.int64).reshape(n, 2),
                        np.array([np.nan if r[5] is None else r[5] for r in rows], np.float64))

    def set_groups(self, copies: dict[int, tuple[int, str]], bursts: dict[int, int]) -> None:
        """The groups found, in one commit: {picture id: (its group, "exact" or "near")} for
        copies, {picture id: its group} for bursts (a group named by its smallest id); every
        other picture in none."""
        self._require_writable()
        with self._lock, self._catalog.transaction():
            sql = self._catalog._conn
            for statement in LOOKS_SCHEMA:
                sql.execute(statement)
            sql.execute("UPDATE looks SET copy_group = NULL, copy_kind = NULL, burst_group = "
                        "NULL WHERE copy_group IS NOT NULL OR burst_group IS NOT NULL")
            sql.executemany("UPDATE looks SET copy_group = ?, copy_kind = ? WHERE picture = ?",
                            [(int(g), kind, int(i)) for i, (g, kind) in copies.items()])
            sql.executemany("UPDATE looks SET burst_group = ? WHERE picture = ?",
                            [(int(g), int(i)) for i, g in bursts.items()])

    def groups_of(self, ids: Iterable[int]) -> dict[int, tuple[int | None, int | None]]:
        """{id: (its copy group, its burst group)} of these pictures that are in a group."""
        ids = [int(i) for i in ids]
        with self._lock:
            if not ids or not self._has_looks():
                return {}
            rows = self._catalog._conn.execute(
                "SELECT picture, copy_group, burst_group FROM looks WHERE picture IN "
                f"({','.join('?' * len(ids))}) AND (copy_group IS NOT NULL OR "
                "burst_group IS NOT NULL)", ids).fetchall()
        return {int(i): (c, b) for i, c, b in rows}

    def stored_groups(self) -> list[dict]:
        """The groups as last found: [{"kind": "exact" | "near" | "burst", "group": its id,
        "ids": [...], "kept": the id an editor chose or None}], copies first."""
        with self._lock:
            if not self._has_looks():
                return []
            rows = self._catalog._conn.execute(
                "SELECT l.picture, l.copy_group, l.copy_kind, l.burst_group, l.kept FROM "
                "looks l JOIN pictures p ON p.id = l.picture AND p.hash = l.hash WHERE "
                "l.copy_group IS NOT NULL OR l.burst_group IS NOT NULL ORDER BY l.picture"
            ).fetchall()
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

    def keep_picture(self, picture_id: int, ids: Iterable[int]) -> None:
        """An editor keeps `picture_id` of the group of pictures `ids`: the others are no
        longer kept (pamir.duplicates.groups moves them aside when asked; nothing is deleted)."""
        self._require_writable()
        ids = [int(i) for i in ids]
        with self._lock, self._catalog.transaction():
            sql = self._catalog._conn
            sql.executemany("UPDATE looks SET kept = 0 WHERE picture = ?", [(i,) for i in ids])
            sql.execute("UPDATE looks SET kept = 1 WHERE picture = ?", (int(picture_id),))

    def group_members(self, group: int, kind: str = "copy") -> list[int]:
        """The ids of a group's pictures ("copy" or "burst" group)."""
        column = {"copy": "copy_group", "burst": "burst_group"}[kind]
        with self._lock:
            if not self._has_looks():
                return []
            rows = self._catalog._conn.execute(
                f"SELECT picture FROM looks WHERE {column} = ? ORDER BY picture",
                (int(group),)).fetchall()
        return [int(r[0]) for r in rows]


__all__ = ["COLLAPSE", "IndexLooks", "LookRows"]
