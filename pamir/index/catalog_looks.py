"""A part of the catalogue (pamir.index.catalog): the SQL of the `looks` table
(layout.LOOKS_SCHEMA), the pictures' looks and the groups of copies and bursts found with them.
How pictures are compared and grouped is pamir.duplicates'; what search folds, and the looks
as arrays, pamir.index.looks'. Writes run inside the caller's `Catalog.transaction()`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from .catalog_base import Schema, marks
from .layout import LOOKS_SCHEMA


class LookTables:
    """The looks of an open catalogue (`Catalog.looks`). The table is made when looks are
    first written: until then, reads find none."""

    def __init__(self, conn: sqlite3.Connection, schema: Schema):
        self._conn, self._schema = conn, schema

    def has_looks(self) -> bool:
        return self._schema.has_table("looks")

    def _make_table(self) -> None:
        for statement in LOOKS_SCHEMA:
            self._conn.execute(statement)

    # ------------------------------------------------------------------ writing
    def record(self, looks: Sequence[tuple], unreadable: Sequence[int]) -> None:
        """Pictures' looks, (picture, hash, width, height, shot, pixels bytes), and the
        pictures whose look could not be read (their old one goes)."""
        self._make_table()
        self._conn.executemany("DELETE FROM looks WHERE picture = ?",
                               [(int(i),) for i in unreadable])
        self._conn.executemany(
            "INSERT OR REPLACE INTO looks (picture, hash, width, height, shot, pixels) "
            "VALUES (?, ?, ?, ?, ?, ?)", looks)

    def set_groups(self, copies: dict[int, tuple[int, str]], bursts: dict[int, int]) -> None:
        """{picture: (its group, "exact" or "near")} of copies, {picture: its group} of
        bursts; every other picture in none."""
        self._make_table()
        self._conn.execute(
            "UPDATE looks SET copy_group = NULL, copy_kind = NULL, burst_group = NULL WHERE "
            "copy_group IS NOT NULL OR burst_group IS NOT NULL")
        self._conn.executemany("UPDATE looks SET copy_group = ?, copy_kind = ? WHERE picture = ?",
                               [(int(g), kind, int(i)) for i, (g, kind) in copies.items()])
        self._conn.executemany("UPDATE looks SET burst_group = ? WHERE picture = ?",
                               [(int(g), int(i)) for i, g in bursts.items()])

    def keep(self, picture_id: int, ids: Sequence[int]) -> None:
        """`picture_id` is kept of the group of pictures `ids`; the others are not."""
        self._conn.executemany("UPDATE looks SET kept = 0 WHERE picture = ?",
                               [(int(i),) for i in ids])
        self._conn.execute("UPDATE looks SET kept = 1 WHERE picture = ?", (int(picture_id),))

    # ------------------------------------------------------------------ reading
    def current(self) -> list[tuple]:
        """(id, stored path, hash, width, height, shot, pixels bytes) of the scored pictures'
        looks of their current bytes, by id."""
        if not self.has_looks():
            return []
        return self._conn.execute(
            "SELECT p.id, p.path, p.hash, l.width, l.height, l.shot, l.pixels "
            "FROM looks l JOIN pictures p ON p.id = l.picture AND p.hash = l.hash "
            "WHERE p.col IS NOT NULL ORDER BY p.id").fetchall()

    def groups_of(self, ids: Sequence[int]) -> dict[int, tuple[int | None, int | None]]:
        """{id: (its copy group, its burst group)} of these pictures that are in a group."""
        if not ids or not self.has_looks():
            return {}
        rows = self._conn.execute(
            f"SELECT picture, copy_group, burst_group FROM looks WHERE picture IN "
            f"({marks(ids)}) AND (copy_group IS NOT NULL OR burst_group IS NOT NULL)",
            list(ids)).fetchall()
        return {int(i): (c, b) for i, c, b in rows}

    def grouped(self) -> list[tuple]:
        """(picture, copy group, copy kind, burst group, kept) of the pictures of the current
        bytes that are in a group, by picture."""
        if not self.has_looks():
            return []
        return self._conn.execute(
            "SELECT l.picture, l.copy_group, l.copy_kind, l.burst_group, l.kept FROM "
            "looks l JOIN pictures p ON p.id = l.picture AND p.hash = l.hash WHERE "
            "l.copy_group IS NOT NULL OR l.burst_group IS NOT NULL ORDER BY l.picture"
        ).fetchall()

    def members(self, group: int, kind: str = "copy") -> list[int]:
        """The ids of a group's pictures ("copy" or "burst" group)."""
        column = {"copy": "copy_group", "burst": "burst_group"}[kind]
        if not self.has_looks():
            return []
        rows = self._conn.execute(f"SELECT picture FROM looks WHERE {column} = ? ORDER BY "
                                  "picture", (int(group),)).fetchall()
        return [int(r[0]) for r in rows]
