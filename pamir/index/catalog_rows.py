"""What the catalogue's modules (pamir.index.catalog and its parts) share: a path as the
catalogue stores it and back (a name that is not UTF-8 too), and the marks of an `IN (...)`
list."""

from __future__ import annotations

import os
from collections.abc import Sequence


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
