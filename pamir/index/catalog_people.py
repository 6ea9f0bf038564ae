"""A part of the catalogue (pamir.index.catalog): the SQL of the `faces`, `people` and
`face_decisions` tables (layout.FACES_SCHEMA), and the rows they are read into. Who each face
is, and how an editor's decision finds its face again, are pamir.index.people's and
pamir.facts.people's; this is the statements. Writes run inside the caller's
`Catalog.transaction()`.

Face embeddings are biometric data: they are stored here, in the index folder, and only
read back by this process (pamir.facts.people, docs/usage.md "People").
"""

from __future__ import annotations

import sqlite3
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .catalog_base import Schema, marks, path_of


@dataclass
class FaceRow:
    """One face of the index. box: (x0, y0, x1, y1) in [0, 1] of the picture as shown;
    score, size: its quality (score None for a named region no detection matched); written:
    the name its files give (written_how: "region (...)", "tag"); person: who it is now
    (None: not yet decided), how and confidence: why and how sure."""

    id: int
    picture: int
    box: tuple[float, float, float, float]
    score: float | None
    size: int
    written: str | None
    written_how: str
    person: int | None
    how: str
    confidence: float
    embedding: np.ndarray | None = None


@dataclass
class PersonRow:
    """A person: id, name (folded; None for an unnamed person), shown (as written), same_as
    (the person this one was merged into), and how many faces and pictures they are in."""

    id: int
    name: str | None
    shown: str | None
    same_as: int | None = None
    faces: int = 0
    pictures: int = 0

    @property
    def label(self) -> str:
        """What a person is called where they are listed: their name, or "person 3"."""
        return self.shown or self.name or f"person {self.id}"


@dataclass(frozen=True)
class Decisions:
    """What editors decided about people, as an index's catalogue keeps it, to carry into a
    new index of the same pictures (`pamir index --rebuild`): the decisions (hash, path,
    box, "is" | "not", person) and the rows (id, name, shown, same_as) of the people they
    name and of those merged into them. The people keep their ids, which the decisions and
    `same_as` refer to; the faces pass of the new index finds the same faces at the same
    boxes (or nearly: pamir.index.people.DECISION_IOU), and pamir.facts.people.who reads the
    decisions as it reads them in any index."""

    people: tuple[tuple, ...] = ()
    decisions: tuple[tuple, ...] = ()


_FACE_COLUMNS = ("f.id, f.picture, f.box, f.score, f.size, f.written, f.written_how, f.person, "
                 "f.how, f.confidence")
_PERSON_COUNTS = ("SELECT p.id, p.name, p.shown, p.same_as, count(f.id), count(DISTINCT "
                  "f.picture) FROM people p LEFT JOIN faces f ON f.person = p.id ")


def _face(row, embedding: bytes | None = None) -> FaceRow:
    fid, picture, box, score, size, written, written_how, person, how, confidence = row
    return FaceRow(int(fid), int(picture), tuple(json.loads(box)), score, int(size), written,
                   written_how, person, how, float(confidence),
                   None if embedding is None else np.frombuffer(embedding, np.float32).copy())


class PeopleTables:
    """The faces, people and decisions of an open catalogue (`Catalog.people`). A catalogue
    older than schema 5, opened read-only, has none of these tables: its reads find nobody."""

    def __init__(self, conn: sqlite3.Connection, schema: Schema):
        self._conn, self._schema = conn, schema

    def has_faces(self) -> bool:
        return self._schema.has_table("faces")

    # ------------------------------------------------------------------ reading
    def faces(self, *, picture: int | None = None, person: int | None = None,
              ids: Iterable[int] | None = None, embeddings: bool = False) -> list[FaceRow]:
        """The faces (of one picture, one person, or these ids), by id; with their
        embeddings when asked."""
        where, args = [], []
        if picture is not None:
            where.append("f.picture = ?")
            args.append(int(picture))
        if person is not None:
            where.append("f.person = ?")
            args.append(int(person))
        if ids is not None:
            ids = [int(i) for i in ids]
            where.append(f"f.id IN ({marks(ids)})")
            args += ids
        if not self.has_faces():
            return []
        rows = self._conn.execute(
            f"SELECT {_FACE_COLUMNS}{', f.embedding' if embeddings else ''} FROM faces f"
            + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY f.id",
            args).fetchall()
        return [_face(r[:10], r[10] if embeddings else None) for r in rows]

    def people(self) -> list[PersonRow]:
        """Every person (merged ones left out) with their faces' and pictures' counts,
        most pictures first; those without faces too."""
        if not self.has_faces():
            return []
        rows = self._conn.execute(
            _PERSON_COUNTS + "WHERE p.same_as IS NULL GROUP BY p.id ORDER BY "
            "count(DISTINCT f.picture) DESC, p.name IS NULL, p.name, p.id").fetchall()
        return [PersonRow(*r) for r in rows]

    def person(self, person_id: int) -> PersonRow | None:
        if not self.has_faces():
            return None
        row = self._conn.execute(_PERSON_COUNTS + "WHERE p.id = ? GROUP BY p.id",
                                 (int(person_id),)).fetchone()
        return None if row is None else PersonRow(*row)

    def named(self, name: str) -> tuple[int, int | None] | None:
        """(id, same_as) of the person of this folded name, or None."""
        if not self.has_faces():
            return None
        return self._conn.execute("SELECT id, same_as FROM people WHERE name = ?",
                                  (name,)).fetchone()

    def all_people(self) -> dict[int, tuple[str | None, str | None, int | None]]:
        """{id: (name, shown, same_as)} of every person row, merged ones included."""
        if not self.has_faces():
            return {}
        rows = self._conn.execute("SELECT id, name, shown, same_as FROM people")
        return {int(i): (n, s, a) for i, n, s, a in rows.fetchall()}

    def cover_faces(self) -> dict[int, int]:
        """{person id: the face that shows them}: one an editor or the files named, else the
        detector's surest, the largest at a tie."""
        if not self.has_faces():
            return {}
        rows = self._conn.execute(
            "SELECT person, id FROM faces WHERE person IS NOT NULL ORDER BY "
            "how IN ('editor', 'region', 'tag', 'keyword') DESC, score IS NULL, "
            "score DESC, size DESC, id").fetchall()
        out: dict[int, int] = {}
        for person, fid in rows:
            out.setdefault(int(person), int(fid))
        return out

    def decided_faces(self) -> list[tuple]:
        """(face id, picture, its box, the decided box, decision, person) of each decision
        and each face of a picture with the decision's bytes or path."""
        if not self.has_faces():
            return []
        return self._conn.execute(
            "SELECT DISTINCT f.id, f.picture, f.box, d.box, d.decision, d.person "
            "FROM faces f JOIN pictures p ON p.id = f.picture JOIN face_decisions d "
            "ON d.hash = p.hash OR d.path = p.path").fetchall()

    def face_captions(self) -> dict[int, tuple[tuple[str, ...], str]]:
        """{picture id: (its caption words, where they came from)} of the pictures that have
        faces."""
        if not self.has_faces():
            return {}
        source = "NULL" if "NULL AS source" in self._schema.columns else "p.source"
        rows = self._conn.execute(
            f"SELECT p.id, p.caption, {source} FROM pictures p WHERE p.caption IS NOT NULL AND "
            "EXISTS (SELECT 1 FROM faces f WHERE f.picture = p.id)").fetchall()
        return {int(i): (tuple(c.split()), source or "") for i, c, source in rows}

    def picture_of_face(self, face_id: int) -> tuple[int, str, str] | None:
        """(picture id, path, hash) of a face's picture."""
        row = self._conn.execute(
            "SELECT p.id, p.path, p.hash FROM faces f JOIN pictures p ON p.id = f.picture "
            "WHERE f.id = ?", (int(face_id),)).fetchone()
        return None if row is None else (int(row[0]), path_of(row[1]), row[2])

    def face_key(self, face_id: int) -> tuple[str, str, str] | None:
        """(hash, stored path, box) a decision about this face is kept by."""
        return self._conn.execute("SELECT p.hash, p.path, f.box FROM faces f JOIN pictures p "
                                  "ON p.id = f.picture WHERE f.id = ?", (int(face_id),)).fetchone()

    def decisions_at(self, digest: str, path) -> list[tuple[str, str, int]]:
        """(box, decision, person) of the decisions about a picture's faces (its bytes or
        its stored path)."""
        return self._conn.execute("SELECT box, decision, person FROM face_decisions WHERE "
                                  "hash = ? OR path = ?", (digest, path)).fetchall()

    def kept_decisions(self) -> Decisions | None:
        """The decisions and every person row, as `Decisions` (inside a snapshot); None for a
        catalogue without the decisions table."""
        if not self._schema.has_table("face_decisions"):
            return None
        decisions = self._conn.execute("SELECT hash, path, box, decision, person FROM "
                                       "face_decisions").fetchall()
        people = self._conn.execute("SELECT id, name, shown, same_as FROM people").fetchall()
        return Decisions(tuple(people), tuple(decisions))

    # ------------------------------------------------------------------ writing
    def replace_faces(self, picture_id: int, rows: Sequence[tuple]) -> None:
        """The picture's faces become `rows` (box key, embedding bytes, score, size, written,
        written_how). A face found at the box it had keeps the unnamed person it was grouped
        into, so that unnamed people keep their numbers."""
        old = {box: (person, how) for box, person, how in self._conn.execute(
            "SELECT box, person, how FROM faces WHERE picture = ? AND how = 'group'",
            (int(picture_id),))}
        self._conn.execute("DELETE FROM faces WHERE picture = ?", (int(picture_id),))
        self._conn.executemany(
            "INSERT INTO faces (picture, box, embedding, score, size, written, "
            "written_how, person, how) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(int(picture_id), *row, *old.get(row[0], (None, ""))) for row in rows])

    def new_people(self, names: Sequence[tuple[str | None, str | None]]) -> list[int]:
        return [int(self._conn.execute(
            "INSERT INTO people (name, shown) VALUES (?, ?) RETURNING id",
            (n, s)).fetchone()[0]) for n, s in names]

    def set_who(self, who: Sequence[tuple[int, int | None, str, float]]) -> None:
        """Who each face is: (face id, person, how, confidence)."""
        self._conn.executemany("UPDATE faces SET person = ?, how = ?, confidence = ? WHERE "
                               "id = ?", [(p, h, float(c), int(f)) for f, p, h, c in who])

    def drop_unused_people(self) -> None:
        """People left with no face, no decision and nobody merged into them go."""
        self._conn.execute(
            "DELETE FROM people WHERE id NOT IN (SELECT person FROM faces WHERE person IS NOT "
            "NULL) AND id NOT IN (SELECT person FROM face_decisions) AND id NOT IN (SELECT "
            "same_as FROM people WHERE same_as IS NOT NULL)")

    def drop_decision(self, digest: str, path, box: str, decision: str, person: int) -> None:
        self._conn.execute("DELETE FROM face_decisions WHERE box = ? AND decision = ? AND "
                           "person = ? AND (hash = ? OR path = ?)",
                           (box, decision, person, digest, path))

    def add_decision(self, digest: str, path, box: str, decision: str, person: int) -> None:
        self._conn.execute("INSERT INTO face_decisions VALUES (?, ?, ?, ?, ?)",
                           (digest, path, box, decision, int(person)))

    def rename(self, person_id: int, name: str | None, shown: str | None) -> None:
        self._conn.execute("UPDATE people SET name = ?, shown = ? WHERE id = ?",
                           (name, shown, int(person_id)))

    def merge(self, source: int, target: int) -> None:
        """`source` is `target`: its faces and decisions move to target, and its row is kept
        pointing there."""
        self._conn.execute("UPDATE faces SET person = ? WHERE person = ?", (target, source))
        self._conn.execute("UPDATE OR REPLACE face_decisions SET person = ? WHERE person = ?",
                           (target, source))
        self._conn.execute("UPDATE people SET same_as = ? WHERE same_as = ? OR id = ?",
                           (target, source, source))

    def forget(self, person_id: int) -> tuple[list[int], list[int]]:
        """Delete a person, the people merged into them, their faces and the decisions about
        them; (the faces' ids, their pictures' ids)."""
        ids = [int(person_id)] + [int(r[0]) for r in self._conn.execute(
            "SELECT id FROM people WHERE same_as = ?", (int(person_id),))]
        pictures = [int(r[0]) for r in self._conn.execute(
            f"SELECT DISTINCT picture FROM faces WHERE person IN ({marks(ids)})", ids)]
        faces = [int(r[0]) for r in self._conn.execute(
            f"SELECT id FROM faces WHERE person IN ({marks(ids)})", ids)]
        self._conn.execute(f"DELETE FROM faces WHERE person IN ({marks(ids)})", ids)
        self._conn.execute(f"DELETE FROM face_decisions WHERE person IN ({marks(ids)})", ids)
        self._conn.execute(f"DELETE FROM people WHERE id IN ({marks(ids)})", ids)
        return faces, pictures

    def restore(self, kept: Decisions) -> None:
        """Write decisions read by `kept_decisions` (and the people they name) into a new,
        empty catalogue."""
        self._conn.executemany("INSERT INTO people (id, name, shown, same_as) VALUES "
                               "(?, ?, ?, ?)", kept.people)
        self._conn.executemany("INSERT OR IGNORE INTO face_decisions VALUES (?, ?, ?, ?, ?)",
                               kept.decisions)
