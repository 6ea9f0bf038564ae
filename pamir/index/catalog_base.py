"""What the catalogue's modules (pamir.index.catalog and its parts) share: which tables and
columns an open catalogue has (`Schema`), a path as the catalogue stores it and back (a name
that is not UTF-8 too), and the marks of an `IN (...)` list."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence

from .layout import METADATA_COLUMNS

_BASE_COLUMNS = "id, path, size, mtime_ns, hash, caption, state, reason, col"


class Schema:
    """The tables and columns an open catalogue has: an older one, opened read-only, may lack
    those of a later schema (`Catalog.upgrade` adds them when it is opened for writing)."""

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn
        self.forget()

    def forget(self) -> None:
        """Read them again (after an upgrade)."""
        self._columns: str | None = None
        self._has_facts: bool | None = None

    @property
    def columns(self) -> str:
        """The pictures columns read: a catalogue older than schema 3, opened read-only,
        reads NULL for the metadata it does not have."""
        if self._columns is None:
            have = {r[1] for r in self._conn.execute("PRAGMA table_info(pictures)")}
            self._columns = _BASE_COLUMNS + "".join(
                f", {c}" if c in have else f", NULL AS {c}" for c in METADATA_COLUMNS)
        return self._columns

    @property
    def has_facts(self) -> bool:
        """Whether the catalogue has its facts table (an index older than schema 4, opened
        read-only, has none: its queries find no facts)."""
        if self._has_facts is None:
            self._has_facts = self.has_table("facts")
        return self._has_facts

    def has_table(self, name: str) -> bool:
        return self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                  "name = ?", (name,)).fetchone() is not None


def marks(values: Sequence) -> str:
    """The placeholders of an `IN (...)` of these values: "?,?,?"."""
    return ",".join("?" * len(values))


def stored_path(path) -> str | bytes:
    """A path as the catalogue stores it: its text, or, for a name that is not UTF-8
    (os.fsdecode gives it lone surrogates, which SQLite's text cannot hold), its bytes as a
    BLOB, which `path_of` turns back into the same str. One path has one stored form, so
    lookups and the UNIQUE constraint work on either."""
    path = str(path)
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path)
    return path


def path_of(stored: str | bytes) -> str:
    return os.fsdecode(stored) if isinstance(stored, bytes) else stored
