"""A part of the catalogue (pamir.index.catalog): the SQL of the `facts` and `passes` tables
(layout.FACTS_SCHEMA). A fact (pamir.facts.fact) is a word a picture holds for certain, of a
kind (a keyword, a place, text read on it, a person, its camera), with a confidence; a pass
that reads pictures for facts records the bytes it read, so that a changed picture is read
again. Writes run inside the caller's `Catalog.transaction()`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

import numpy as np

from ..facts.fact import Fact
from .catalog_base import Schema, marks, path_of


class FactTables:
    """The facts and passes of an open catalogue (`Catalog.facts`)."""

    def __init__(self, conn: sqlite3.Connection, schema: Schema):
        self._conn, self._schema = conn, schema

    # ------------------------------------------------------------------ writing
    def replace(self, picture_id: int, kinds: Sequence[str], facts: Iterable[Fact]) -> None:
        """The picture's facts of these kinds become `facts` (each of one of the kinds)."""
        kinds = list(kinds)
        self._conn.execute(f"DELETE FROM facts WHERE picture = ? AND kind IN ({marks(kinds)})",
                           (int(picture_id), *kinds))
        rows = [(int(picture_id), f.kind, f.word, float(f.confidence), f.detail)
                for f in facts if f.kind in kinds]
        # a word read twice (a sign's word on two lines) keeps its best confidence
        self._conn.executemany(
            "INSERT INTO facts VALUES (?, ?, ?, ?, ?) ON CONFLICT (word, kind, picture) DO "
            "UPDATE SET confidence = max(confidence, excluded.confidence)", rows)

    def drop_kind(self, kind: str, pictures: Sequence[int]) -> None:
        """These pictures' facts of one kind go."""
        self._conn.execute(f"DELETE FROM facts WHERE kind = ? AND picture IN "
                           f"({marks(pictures)})", (kind, *pictures))

    # ------------------------------------------------------------------ reading
    def columns(self, word: str, kinds: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray]:
        """(columns, confidences) of the scored pictures that hold the folded `word` as a
        fact (of one of `kinds`; any kind when empty), a column's best confidence."""
        if not self._schema.has_facts:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        kind_sql = f" AND f.kind IN ({marks(kinds)})" if kinds else ""
        rows = self._conn.execute(
            "SELECT p.col, max(f.confidence) FROM facts f JOIN pictures p ON p.id = f.picture "
            f"WHERE f.word = ?{kind_sql} AND p.col IS NOT NULL GROUP BY p.col",
            (word, *kinds)).fetchall()
        return (np.array([r[0] for r in rows], np.int64),
                np.array([r[1] for r in rows], np.float32))

    def count(self, word: str) -> int:
        """How many scored pictures hold the folded `word` as a fact (of any kind)."""
        if not self._schema.has_facts:
            return 0
        (n,) = self._conn.execute(
            "SELECT count(DISTINCT f.picture) FROM facts f JOIN pictures p ON p.id = f.picture "
            "WHERE f.word = ? AND p.col IS NOT NULL", (word,)).fetchone()
        return int(n)

    def kinds(self, word: str) -> set[str]:
        """The kinds of fact the scored pictures hold the folded `word` as."""
        if not self._schema.has_facts:
            return set()
        rows = self._conn.execute(
            "SELECT DISTINCT f.kind FROM facts f JOIN pictures p ON p.id = f.picture "
            "WHERE f.word = ? AND p.col IS NOT NULL", (word,))
        return {r[0] for r in rows.fetchall()}

    def of(self, ids: Iterable[int]) -> dict[int, list[Fact]]:
        """{id: its facts, by kind then word} of these pictures (none: left out)."""
        ids = [int(i) for i in ids]
        if not ids or not self._schema.has_facts:
            return {}
        out: dict[int, list[Fact]] = {}
        rows = self._conn.execute(
            "SELECT picture, kind, word, confidence, detail FROM facts WHERE picture IN "
            f"({marks(ids)}) ORDER BY picture, kind, word", ids)
        for pid, kind, word, confidence, detail in rows.fetchall():
            out.setdefault(pid, []).append(Fact(kind, word, confidence, detail))
        return out

    def rows(self, kind: str) -> list[tuple[int, str, str]]:
        """(picture id, word, detail) of every fact of one kind of the scored pictures."""
        if not self._schema.has_facts:
            return []
        return self._conn.execute(
            "SELECT f.picture, f.word, f.detail FROM facts f JOIN pictures p ON p.id = "
            "f.picture WHERE f.kind = ? AND p.col IS NOT NULL", (kind,)).fetchall()

    def words(self, kind: str, limit: int = 100) -> list[tuple[str, str, int]]:
        """`counts` with a detail each word is stored with: (word, detail, pictures), the
        most common first (the page's places: the form shown, the level)."""
        if not self._schema.has_facts:
            return []
        rows = self._conn.execute(
            "SELECT f.word, max(f.detail), count(*) AS n FROM facts f "
            "JOIN pictures p ON p.id = f.picture WHERE f.kind = ? AND p.col IS NOT NULL "
            "GROUP BY f.word ORDER BY n DESC, f.word LIMIT ?", (kind, int(limit)))
        return [(w, d or "", int(n)) for w, d, n in rows.fetchall()]

    def counts(self, kind: str, limit: int = 100) -> list[tuple[str, int]]:
        """The most common words of one kind of fact, with how many scored pictures hold
        each (the page's places, people)."""
        return [(word, n) for word, _, n in self.words(kind, limit)]

    def pictures_holding(self, kind: str) -> list[int]:
        """The pictures that hold facts of one kind (scored or not)."""
        if not self._schema.has_facts:
            return []
        rows = self._conn.execute("SELECT DISTINCT picture FROM facts WHERE kind = ?", (kind,))
        return [int(r[0]) for r in rows.fetchall()]

    # ------------------------------------------------------------------ passes
    def pass_todo(self, name: str) -> list[tuple[int, str, str]]:
        """(id, path, hash) of the scored pictures a pass has not read as they are now."""
        rows = self._conn.execute(
            "SELECT p.id, p.path, p.hash FROM pictures p LEFT JOIN passes s ON s.picture = p.id "
            "AND s.pass = ? WHERE p.col IS NOT NULL AND (s.hash IS NULL OR s.hash != p.hash) "
            "ORDER BY p.id", (name,))
        return [(int(i), path_of(path), digest) for i, path, digest in rows.fetchall()]

    def pass_done(self, name: str, done: Iterable[tuple[int, str]]) -> None:
        """A pass has read these pictures (id, the hash of the bytes it read)."""
        self._conn.executemany("INSERT OR REPLACE INTO passes VALUES (?, ?, ?)",
                               [(int(i), name, digest) for i, digest in done])

    def forget_passes(self, picture_id: int, prefixes: Sequence[str]) -> None:
        """The passes named "<prefix> ..." read the picture again (its files changed)."""
        for prefix in prefixes:
            self._conn.execute("DELETE FROM passes WHERE picture = ? AND pass LIKE ?",
                               (int(picture_id), f"{prefix} %"))
