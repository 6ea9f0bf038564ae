"""The index's people: the faces a pass found, who each one is, the people, and what editors
decided (the `faces`, `people` and `face_decisions` tables of pamir.index.layout). This is
the SQL and nothing of how faces are named: pamir.facts.people.who decides who each face is and
writes it here through `set_who`.

Face embeddings are biometric data: they are stored here, in the index folder, and only
read back by this process (pamir.facts.people, docs/usage.md "People").
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..facts.fact import Fact, fold
from . import layout
from .catalog import Catalog, IndexDirError, _path

#: A box is stored at this many decimals: the detector gives the same box for the same
#: pixels, so a face read again has the same key.
BOX_DECIMALS = 4
#: An editor's decision about a face applies to the face of its picture whose box overlaps
#: the decided box this much at least (intersection over union), the most: the detector gives
#: the same box for the same pixels, but another detection size moves it a little (a face of
#: tests/data/faces/obama_and_biden.jpg found at 2x and at 1.5x: IoU 0.77), while another
#: person's face hardly overlaps it.
DECISION_IOU = 0.5


def _iou(a, b) -> float:
    from ..facts.people.regions import iou  # noqa: PLC0415 - the one home of a box's overlap

    return iou(a, b)


def box_key(box) -> str:
    """A face's box as the catalogue stores it (JSON, BOX_DECIMALS)."""
    return json.dumps([round(float(v), BOX_DECIMALS) for v in box])


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


_FACE_COLUMNS = ("f.id, f.picture, f.box, f.score, f.size, f.written, f.written_how, f.person, "
                 "f.how, f.confidence")


def _face(row, embedding: bytes | None = None) -> FaceRow:
    fid, picture, box, score, size, written, written_how, person, how, confidence = row
    return FaceRow(int(fid), int(picture), tuple(json.loads(box)), score, int(size), written,
                   written_how, person, how, float(confidence),
                   None if embedding is None else np.frombuffer(embedding, np.float32).copy())


class IndexPeople:
    """The people part of `Index` (a mixin over its catalogue and lock)."""

    # ------------------------------------------------------------------ reading
    def _sql(self):
        return self._catalog._conn  # this package's own catalogue connection

    def _has_faces(self) -> bool:
        """Whether the catalogue has the faces tables (an index older than schema 5, opened
        read-only, has none: it has no people)."""
        return self._sql().execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                   "name = 'faces'").fetchone() is not None

    def faces(self, *, picture: int | None = None, person: int | None = None,
              ids: Iterable[int] | None = None, embeddings: bool = False) -> list[FaceRow]:
        """The index's faces (of one picture, one person, or these ids), by id; with their
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
            where.append(f"f.id IN ({','.join('?' * len(ids))})")
            args += ids
        sql = (f"SELECT {_FACE_COLUMNS}{', f.embedding' if embeddings else ''} FROM faces f"
               + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY f.id")
        with self._lock:
            if not self._has_faces():
                return []
            rows = self._sql().execute(sql, args).fetchall()
        return [_face(r[:10], r[10] if embeddings else None) for r in rows]

    def face(self, face_id: int) -> FaceRow | None:
        found = self.faces(ids=[face_id])
        return found[0] if found else None

    def people(self) -> list[PersonRow]:
        """Every person (merged ones left out) with their faces' and pictures' counts,
        most pictures first; those without faces too."""
        with self._lock:
            if not self._has_faces():
                return []
            rows = self._sql().execute(
                "SELECT p.id, p.name, p.shown, p.same_as, count(f.id), "
                "count(DISTINCT f.picture) FROM people p LEFT JOIN faces f ON f.person = p.id "
                "WHERE p.same_as IS NULL GROUP BY p.id "
                "ORDER BY count(DISTINCT f.picture) DESC, p.name IS NULL, p.name, p.id").fetchall()
        return [PersonRow(*r) for r in rows]

    def cover_faces(self) -> dict[int, int]:
        """{person id: the face that shows them}: one an editor or the files named, else the
        detector's surest, the largest at a tie."""
        with self._lock:
            if not self._has_faces():
                return {}
            rows = self._sql().execute(
                "SELECT person, id FROM faces WHERE person IS NOT NULL ORDER BY "
                "how IN ('editor', 'region', 'tag', 'keyword') DESC, score IS NULL, "
                "score DESC, size DESC, id").fetchall()
        out: dict[int, int] = {}
        for person, fid in rows:
            out.setdefault(int(person), int(fid))
        return out

    def person(self, person_id: int) -> PersonRow | None:
        with self._lock:
            if not self._has_faces():
                return None
            row = self._sql().execute(
                "SELECT p.id, p.name, p.shown, p.same_as, count(f.id), "
                "count(DISTINCT f.picture) FROM people p LEFT JOIN faces f ON f.person = p.id "
                "WHERE p.id = ? GROUP BY p.id", (int(person_id),)).fetchone()
        return None if row is None else PersonRow(*row)

    def person_named(self, name: str) -> PersonRow | None:
        """The person of this name (folded; a merged person's name leads to the one it was
        merged into), or None."""
        with self._lock:
            if not self._has_faces():
                return None
            row = self._sql().execute("SELECT id, same_as FROM people WHERE name = ?",
                                      (fold(name),)).fetchone()
        if row is None:
            return None
        return self.person(row[1] if row[1] is not None else row[0])

    def all_people(self) -> dict[int, tuple[str | None, str | None, int | None]]:
        """{id: (name, shown, same_as)} of every person row, merged ones included."""
        with self._lock:
            if not self._has_faces():
                return {}
            rows = self._sql().execute("SELECT id, name, shown, same_as FROM people")
            return {int(i): (n, s, a) for i, n, s, a in rows.fetchall()}

    def face_decisions(self) -> dict[int, list[tuple[str, int]]]:
        """{face id: [(decision, person)]}: an editor's decisions, matched to the faces of
        today's pictures by the picture's bytes or path and the face's box: each decision to
        the face of its picture whose box overlaps the decision's most (DECISION_IOU), so
        that a face found again at a slightly other box (another detection size) keeps it."""
        with self._lock:
            if not self._has_faces():
                return {}
            rows = self._sql().execute(
                "SELECT DISTINCT f.id, f.picture, f.box, d.box, d.decision, d.person "
                "FROM faces f JOIN pictures p ON p.id = f.picture JOIN face_decisions d "
                "ON d.hash = p.hash OR d.path = p.path").fetchall()
        best: dict[tuple, tuple[float, int]] = {}  # (picture, box, decision, person) -> face
        for fid, picture, box, decided_box, decision, person in rows:
            overlap = 1.0 if box == decided_box else _iou(json.loads(box),
                                                          json.loads(decided_box))
            key = (picture, decided_box, decision, int(person))
            if overlap >= DECISION_IOU and overlap > best.get(key, (0.0, 0))[0]:
                best[key] = (overlap, int(fid))
        out: dict[int, list[tuple[str, int]]] = {}
        for (_, _, decision, person), (_, fid) in sorted(best.items()):
            if (decision, person) not in out.setdefault(fid, []):
                out[fid].append((decision, person))
        return out

    def face_captions(self) -> dict[int, tuple[tuple[str, ...], str]]:
        """{picture id: (its caption words, where they came from)} of the pictures that have
        faces (their keywords may name a known person)."""
        with self._lock:
            if not self._has_faces():
                return {}
            source = "NULL" if "NULL AS source" in self._catalog.columns else "p.source"
            rows = self._sql().execute(
                f"SELECT p.id, p.caption, {source} FROM pictures p WHERE p.caption IS NOT NULL AND "
                "EXISTS (SELECT 1 FROM faces f WHERE f.picture = p.id)").fetchall()
        return {int(i): (tuple(c.split()), source or "") for i, c, source in rows}

    def picture_of_face(self, face_id: int) -> tuple[int, str, str] | None:
        """(picture id, path, hash) of a face's picture."""
        with self._lock:
            row = self._sql().execute(
                "SELECT p.id, p.path, p.hash FROM faces f JOIN pictures p ON p.id = f.picture "
                "WHERE f.id = ?", (int(face_id),)).fetchone()
        return None if row is None else (int(row[0]), _path(row[1]), row[2])

    # ------------------------------------------------------------------ writing
    def record_faces(self, name: str, kinds: Sequence[str], found: dict[int, list | None],
                     done: Sequence[tuple[int, str]]) -> None:
        """A batch of the faces pass (pamir.index.passes.run_pass's `record`): each picture's
        faces replaced by those found ({id: [pamir.facts.people.NamedFace], None: not readable}),
        and the record that the pass read them, in one commit; its person facts go until
        pamir.facts.people.who says who the faces are. A face found at the box it had keeps the
        unnamed person it was grouped into, so that unnamed people keep their numbers."""
        self._require_writable()
        with self._lock, self._catalog.transaction():
            sql = self._sql()
            for picture_id, faces in found.items():
                old = {box: (person, how) for box, person, how in sql.execute(
                    "SELECT box, person, how FROM faces WHERE picture = ? AND how = 'group'",
                    (int(picture_id),))}
                sql.execute("DELETE FROM faces WHERE picture = ?", (int(picture_id),))
                self._catalog.set_facts(picture_id, ("person",), ())
                rows = []
                for named in faces or ():
                    f = named.face
                    key = box_key(f.box)
                    person, how = old.get(key, (None, ""))
                    rows.append((int(picture_id), key,
                                 np.asarray(f.embedding, np.float32).tobytes(),
                                 None if f.score != f.score else float(f.score), int(f.size),
                                 named.name, named.how, person, how))
                sql.executemany(
                    "INSERT INTO faces (picture, box, embedding, score, size, written, "
                    "written_how, person, how) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            self._catalog.pass_done(name, done)

    def new_people(self, names: Sequence[tuple[str | None, str | None]]) -> list[int]:
        """Insert people (name folded or None, shown) in one commit; their ids."""
        self._require_writable()
        with self._lock, self._catalog.transaction():
            return [int(self._sql().execute(
                "INSERT INTO people (name, shown) VALUES (?, ?) RETURNING id",
                (n, s)).fetchone()[0]) for n, s in names]

    def set_who(self, who: Sequence[tuple[int, int | None, str, float]],
                facts: dict[int, list[Fact]]) -> None:
        """Who each face is, (face id, person, how, confidence), and the person facts of
        every picture that has faces or had person facts ({picture id: its Facts}), in one
        commit; people left with no face, no decision and nobody merged into them go."""
        self._require_writable()
        with self._lock, self._catalog.transaction():
            sql = self._sql()
            sql.executemany("UPDATE faces SET person = ?, how = ?, confidence = ? WHERE id = ?",
                            [(p, h, float(c), int(f)) for f, p, h, c in who])
            for picture_id, held in facts.items():
                self._catalog.set_facts(picture_id, ("person",), held)
            sql.execute("DELETE FROM people WHERE id NOT IN (SELECT person FROM faces WHERE "
                        "person IS NOT NULL) AND id NOT IN (SELECT person FROM face_decisions) "
                        "AND id NOT IN (SELECT same_as FROM people WHERE same_as IS NOT NULL)")

    def person_fact_pictures(self) -> list[int]:
        """The pictures that hold person facts (so that facts of people gone are cleared)."""
        with self._lock:
            if not self._catalog.has_facts:
                return []
            rows = self._sql().execute("SELECT DISTINCT picture FROM facts WHERE kind = 'person'")
            return [int(r[0]) for r in rows.fetchall()]

    def decide(self, face_ids: Iterable[int], decision: str, person: int) -> int:
        """An editor's decision on faces: each "is" or is "not" `person`, kept by the face's
        picture (bytes and path) and box, so that it survives a re-read; an "is" replaces the
        face's earlier "is". Returns how many faces it was recorded for."""
        if decision not in ("is", "not"):
            raise ValueError(f"decision {decision!r}: 'is' or 'not'")
        self._require_writable()
        n = 0
        with self._lock, self._catalog.transaction():
            sql = self._sql()
            for fid in face_ids:
                row = sql.execute("SELECT p.hash, p.path, f.box FROM faces f JOIN pictures p "
                                  "ON p.id = f.picture WHERE f.id = ?", (int(fid),)).fetchone()
                if row is None:
                    continue
                digest, path, box = row
                # the face's earlier decisions, at its box or one it was found at before
                for old, old_decision, old_person in sql.execute(
                        "SELECT box, decision, person FROM face_decisions WHERE hash = ? OR "
                        "path = ?", (digest, path)).fetchall():
                    if ((old_person == int(person) or old_decision == decision == "is")
                            and (old == box or _iou(json.loads(old), json.loads(box))
                                 >= DECISION_IOU)):
                        sql.execute("DELETE FROM face_decisions WHERE box = ? AND decision = ? "
                                    "AND person = ? AND (hash = ? OR path = ?)",
                                    (old, old_decision, old_person, digest, path))
                sql.execute("INSERT INTO face_decisions VALUES (?, ?, ?, ?, ?)",
                            (digest, path, box, decision, int(person)))
                n += 1
        return n

    def rename_person(self, person_id: int, name: str | None, shown: str | None) -> None:
        self._require_writable()
        with self._lock, self._catalog.transaction():
            self._sql().execute("UPDATE people SET name = ?, shown = ? WHERE id = ?",
                                (name, shown, int(person_id)))

    def merge_people(self, source: int, target: int) -> None:
        """`source` is `target`: its faces and decisions move to target, and its row is kept
        pointing there (so that its name, read again in files, means target)."""
        self._require_writable()
        with self._lock, self._catalog.transaction():
            sql = self._sql()
            sql.execute("UPDATE faces SET person = ? WHERE person = ?", (target, source))
            sql.execute("UPDATE OR REPLACE face_decisions SET person = ? WHERE person = ?",
                        (target, source))
            sql.execute("UPDATE people SET same_as = ? WHERE same_as = ? OR id = ?",
                        (target, source, source))

    def forget_person(self, person_id: int) -> dict:
        """Remove a person from the index: their faces (embeddings included), the decisions
        about them, their name (the rows of people merged into them too) and the person facts
        their faces gave, in one commit; then their faces' crops in the thumbnail cache.
        Returns {"faces", "pictures"} removed from."""
        self._require_writable()
        with self._lock:
            sql = self._sql()
            # deleted rows are overwritten (the writer's secure_delete, Catalog.open)
            with self._catalog.transaction():
                ids = [int(person_id)] + [int(r[0]) for r in sql.execute(
                    "SELECT id FROM people WHERE same_as = ?", (int(person_id),))]
                marks = ",".join("?" * len(ids))
                pictures = [int(r[0]) for r in sql.execute(
                    f"SELECT DISTINCT picture FROM faces WHERE person IN ({marks})", ids)]
                faces = [int(r[0]) for r in sql.execute(
                    f"SELECT id FROM faces WHERE person IN ({marks})", ids)]
                sql.execute(f"DELETE FROM faces WHERE person IN ({marks})", ids)
                sql.execute(f"DELETE FROM face_decisions WHERE person IN ({marks})", ids)
                sql.execute(f"DELETE FROM people WHERE id IN ({marks})", ids)
                # their pictures' person facts; pamir.facts.people.who writes the others' again
                sql.execute(f"DELETE FROM facts WHERE kind = 'person' AND picture IN "
                            f"({','.join('?' * len(pictures))})", pictures)
            # and out of the write-ahead log, into the (zeroed) catalogue
            self._catalog.checkpoint()
        for face in faces:  # their crops in the page's thumbnail cache
            for crop in layout.face_crops(self.directory, face):
                crop.unlink(missing_ok=True)
        return {"faces": len(faces), "pictures": len(pictures)}


@dataclass(frozen=True)
class Decisions:
    """What editors decided about people, as an index's catalogue keeps it, to carry into a
    new index of the same pictures (`pamir index --rebuild`): the decisions (hash, path,
    box, "is" | "not", person) and the rows (id, name, shown, same_as) of the people they
    name and of those merged into them. The people keep their ids, which the decisions and
    `same_as` refer to; the faces pass of the new index finds the same faces at the same
    boxes (or nearly: DECISION_IOU), and pamir.facts.people.who reads the decisions as it reads
    them in any index."""

    people: tuple[tuple, ...] = ()
    decisions: tuple[tuple, ...] = ()


def read_decisions(directory: str | Path) -> Decisions:
    """The editors' decisions of the index in `directory`; none where there is no index, or
    one with no people (older than schema 5), or a catalogue that cannot be read (a damaged
    index is rebuilt without them)."""
    try:
        catalog = Catalog.open(Path(directory), writable=False)
    except (IndexDirError, sqlite3.Error, OSError):
        return Decisions()
    try:
        sql = catalog._conn
        with catalog.snapshot():
            if sql.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                           "name = 'face_decisions'").fetchone() is None:
                return Decisions()
            decisions = sql.execute("SELECT hash, path, box, decision, person FROM "
                                    "face_decisions").fetchall()
            people = sql.execute("SELECT id, name, shown, same_as FROM people").fetchall()
    except sqlite3.Error:
        return Decisions()
    finally:
        catalog.close()
    return Decisions(_people_decided(people, {d[4] for d in decisions}), tuple(decisions))


def _people_decided(people: list[tuple], decided: set[int]) -> tuple[tuple, ...]:
    """The rows of the people decided about, of those merged into them and of those they
    were merged into (the same_as links, followed both ways until none is left)."""
    keep = set(decided)
    while True:
        more = {i for i, _, _, same_as in people if same_as in keep}
        more |= {same_as for i, _, _, same_as in people if i in keep and same_as is not None}
        if more <= keep:
            return tuple(row for row in people if row[0] in keep)
        keep |= more


def write_decisions(directory: str | Path, kept: Decisions) -> None:
    """Write decisions read by `read_decisions` into the new, empty catalogue in
    `directory` (Index.rebuild, before the new index is moved into place), in one commit."""
    if not kept.decisions:
        return
    catalog = Catalog.open(Path(directory), writable=True)
    try:
        with catalog.transaction():
            sql = catalog._conn
            sql.executemany("INSERT INTO people (id, name, shown, same_as) VALUES (?, ?, ?, ?)",
                            kept.people)
            sql.executemany("INSERT OR IGNORE INTO face_decisions VALUES (?, ?, ?, ?, ?)",
                            kept.decisions)
    finally:
        catalog.close()


__all__ = ["BOX_DECIMALS", "DECISION_IOU", "Decisions", "FaceRow", "IndexDirError",
           "IndexPeople", "PersonRow", "box_key", "read_decisions", "write_decisions"]
