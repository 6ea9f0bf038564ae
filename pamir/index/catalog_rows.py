"""How values become the catalogue's columns and back, for the catalogue's modules
(pamir.index.catalog and its parts): paths that are not UTF-8, display text, captions, an
entry's metadata, and the marks of an `IN (...)` list."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence


def marks(values: Sequence) -> str:
    """"?,?,?": the placeholders of an `IN (...)` of these values."""
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


def path_like(pattern: str) -> tuple[str, list]:
    """SQL for `path LIKE pattern`. A pattern that is not UTF-8 (a folder whose name is
    not), which LIKE cannot compare, is matched on the stored bytes instead: the patterns
    `folder_patterns` makes are a literal prefix (`L%`) or a literal run (`%L%`)."""
    stored = stored_path(pattern)
    if isinstance(stored, str):
        return "path LIKE ? ESCAPE '\\'", [stored]
    inner = pattern[1:] if pattern.startswith("%") else pattern
    literal = re.sub(r"\\(.)", r"\1", inner[:-1] if inner.endswith("%") else inner)
    raw = os.fsencode(literal)
    if pattern.startswith("%"):
        return "instr(CAST(path AS BLOB), ?) > 0", [raw]
    return "substr(CAST(path AS BLOB), 1, ?) = ?", [len(raw), raw]


def text(value: str | None) -> str | None:
    """Text for display (a reason, a caption) that SQLite can store: lone
    surrogates (from a name that is not UTF-8) written as escapes."""
    if value is None:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return value


def caption_text(caption: Sequence[str] | None) -> str | None:
    return text(" ".join(caption)) if caption else None


def metadata_of(entry: dict) -> tuple:
    """(taken, source, sidecars, position) of an entry; sidecars None when its metadata was
    not read (an entry made without pamir.facts.metadata: the next update reads it)."""
    position = entry.get("position")
    return (entry.get("taken"), text(entry.get("source")),
            text(entry["sidecars"]) if entry.get("sidecars") is not None else None,
            f"{position[0]:.6f},{position[1]:.6f}" if position else None)
