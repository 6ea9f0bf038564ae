"""A part of the catalogue (pamir.index.catalog.Catalog): the SQL that the places and the
kinds of facts read, the pictures' positions (pamir.facts.nearby, the map, the places pass) and
their place facts (the places tree)."""

from __future__ import annotations


class PlaceCatalog:
    """Catalog's reading of positions and of facts by kind (its `_conn`, `columns` and
    `has_facts` are Catalog's)."""

    def fact_kinds(self, word: str) -> set[str]:
        """The kinds of fact the scored pictures hold the folded `word` as."""
        if not self.has_facts:
            return set()
        rows = self._conn.execute(
            "SELECT DISTINCT f.kind FROM facts f JOIN pictures p ON p.id = f.picture "
            "WHERE f.word = ? AND p.col IS NOT NULL", (word,))
        return {r[0] for r in rows.fetchall()}

    @property
    def keeps_positions(self) -> bool:
        """Whether the pictures table has the position column (schema 3 and later)."""
        return "NULL AS position" not in self.columns

    def positions(self) -> list[tuple[int, int, str]]:
        """(id, column, "lat,lon") of the scored pictures whose files give a position."""
        if not self.keeps_positions:
            return []
        rows = self._conn.execute("SELECT id, col, position FROM pictures WHERE col IS NOT "
                                  "NULL AND position IS NOT NULL ORDER BY id")
        return rows.fetchall()

    def fact_rows(self, kind: str) -> list[tuple[int, str, str]]:
        """(picture id, word, detail) of every fact of one kind of the scored pictures."""
        if not self.has_facts:
            return []
        return self._conn.execute(
            "SELECT f.picture, f.word, f.detail FROM facts f JOIN pictures p ON p.id = "
            "f.picture WHERE f.kind = ? AND p.col IS NOT NULL", (kind,)).fetchall()
