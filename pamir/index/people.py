"""The index's people, a part of `Index`: the faces a pass found, who each one is, the
people, and what editors decided, read and written through the catalogue
(pamir.index.catalog_people holds the SQL and the rows). How faces are named is not here:
pamir.facts.people.who decides who each face is and writes it here through `set_who`.

Face embeddings are biometric data: they are stored in the index folder, and only read back
by this process (pamir.facts.people, docs/usage.md "People").
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..facts.fact import Fact, fold
from . import layout
from .catalog import Catalog, IndexDirError
from .catalog_people import Decisions, FaceRow, PersonRow

if TYPE_CHECKING:
    from .lifecycle import IndexFolder

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


def _same_box(a: str, b: str) -> float:
    """How much two stored boxes overlap (1 for the same key)."""
    return 1.0 if a == b else _iou(json.loads(a), json.loads(b))


def box_key(box) -> str:
    """A face's box as the catalogue stores it (JSON, BOX_DECIMALS)."""
    return json.dumps([round(float(v), BOX_DECIMALS) for v in box])


class People:
    """The faces and people of an open index (its folder's catalogue, under its lock); each
    change refuses an index opened read-only."""

    def __init__(self, folder: IndexFolder):
        self._folder = folder
        self._catalog, self._lock = folder._catalog, folder._lock

    # ------------------------------------------------------------------ reading
    def faces(self, *, picture: int | None = None, person: int | None = None,
              ids: Iterable[int] | None = None, embeddings: bool = False) -> list[FaceRow]:
        """The index's faces (of one picture, one person, or these ids), by id; with their
        embeddings when asked."""
        with self._lock:
            return self._catalog.people.faces(picture=picture, person=person, ids=ids,
                                              embeddings=embeddings)

    def face(self, face_id: int) -> FaceRow | None:
        found = self.faces(ids=[face_id])
        return found[0] if found else None

    def people(self) -> list[PersonRow]:
        """Every person (merged ones left out) with their faces' and pictures' counts,
        most pictures first; those without faces too."""
        with self._lock:
            return self._catalog.people.people()

    def cover_faces(self) -> dict[int, int]:
        """{person id: the face that shows them}: one an editor or the files named, else the
        detector's surest, the largest at a tie."""
        with self._lock:
            return self._catalog.people.cover_faces()

    def person(self, person_id: int) -> PersonRow | None:
        with self._lock:
            return self._catalog.people.person(person_id)

    def person_named(self, name: str) -> PersonRow | None:
        """The person of this name (folded; a merged person's name leads to the one it was
        merged into), or None."""
        with self._lock:
            row = self._catalog.people.named(fold(name))
        if row is None:
            return None
        return self.person(row[1] if row[1] is not None else row[0])

    def all_people(self) -> dict[int, tuple[str | None, str | None, int | None]]:
        """{id: (name, shown, same_as)} of every person row, merged ones included."""
        with self._lock:
            return self._catalog.people.all_people()

    def face_decisions(self) -> dict[int, list[tuple[str, int]]]:
        """{face id: [(decision, person)]}: an editor's decisions, matched to the faces of
        today's pictures by the picture's bytes or path and the face's box: each decision to
        the face of its picture whose box overlaps the decision's most (DECISION_IOU), so
        that a face found again at a slightly other box (another detection size) keeps it."""
        with self._lock:
            rows = self._catalog.people.decided_faces()
        best: dict[tuple, tuple[float, int]] = {}  # (picture, box, decision, person) -> face
        for fid, picture, box, decided_box, decision, person in rows:
            overlap = _same_box(box, decided_box)
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
            return self._catalog.people.face_captions()

    def picture_of_face(self, face_id: int) -> tuple[int, str, str] | None:
        """(picture id, path, hash) of a face's picture."""
        with self._lock:
            return self._catalog.people.picture_of_face(face_id)

    def person_fact_pictures(self) -> list[int]:
        """The pictures that hold person facts (so that facts of people gone are cleared)."""
        with self._lock:
            return self._catalog.facts.pictures_holding("person")

    # ------------------------------------------------------------------ writing
    def record_faces(self, name: str, kinds: Sequence[str], found: dict[int, list | None],
                     done: Sequence[tuple[int, str]]) -> None:
        """A batch of the faces pass (pamir.index.passes.run_pass's `record`): each picture's
        faces replaced by those found ({id: [pamir.facts.people.NamedFace], None: not readable}),
        and the record that the pass read them, in one commit; its person facts go until
        pamir.facts.people.who says who the faces are. A face found at the box it had keeps the
        unnamed person it was grouped into, so that unnamed people keep their numbers."""
        self._folder.require_writable()
        with self._lock, self._catalog.transaction():
            for picture_id, faces in found.items():
                self._catalog.facts.replace(picture_id, ("person",), ())
                self._catalog.people.replace_faces(picture_id,
                                                   [_face_row(named) for named in faces or ()])
            self._catalog.facts.pass_done(name, done)

    def new_people(self, names: Sequence[tuple[str | None, str | None]]) -> list[int]:
        """Insert people (name folded or None, shown) in one commit; their ids."""
        self._folder.require_writable()
        with self._lock, self._catalog.transaction():
            return self._catalog.people.new_people(names)

    def set_who(self, who: Sequence[tuple[int, int | None, str, float]],
                facts: dict[int, list[Fact]]) -> None:
        """Who each face is, (face id, person, how, confidence), and the person facts of
        every picture that has faces or had person facts ({picture id: its Facts}), in one
        commit; people left with no face, no decision and nobody merged into them go."""
        self._folder.require_writable()
        with self._lock, self._catalog.transaction():
            self._catalog.people.set_who(who)
            for picture_id, held in facts.items():
                self._catalog.facts.replace(picture_id, ("person",), held)
            self._catalog.people.drop_unused_people()

    def decide(self, face_ids: Iterable[int], decision: str, person: int) -> int:
        """An editor's decision on faces: each "is" or is "not" `person`, kept by the face's
        picture (bytes and path) and box, so that it survives a re-read; an "is" replaces the
        face's earlier "is". Returns how many faces it was recorded for."""
        if decision not in ("is", "not"):
            raise ValueError(f"decision {decision!r}: 'is' or 'not'")
        self._folder.require_writable()
        tables = self._catalog.people
        n = 0
        with self._lock, self._catalog.transaction():
            for fid in face_ids:
                key = tables.face_key(fid)
                if key is None:
                    continue
                digest, path, box = key
                # the face's earlier decisions, at its box or one it was found at before
                for old, old_decision, old_person in tables.decisions_at(digest, path):
                    if ((old_person == int(person) or old_decision == decision == "is")
                            and _same_box(old, box) >= DECISION_IOU):
                        tables.drop_decision(digest, path, old, old_decision, old_person)
                tables.add_decision(digest, path, box, decision, person)
                n += 1
        return n

    def rename_person(self, person_id: int, name: str | None, shown: str | None) -> None:
        self._folder.require_writable()
        with self._lock, self._catalog.transaction():
            self._catalog.people.rename(person_id, name, shown)

    def merge_people(self, source: int, target: int) -> None:
        """`source` is `target`: its faces and decisions move to target, and its row is kept
        pointing there (so that its name, read again in files, means target)."""
        self._folder.require_writable()
        with self._lock, self._catalog.transaction():
            self._catalog.people.merge(source, target)

    def forget_person(self, person_id: int) -> dict:
        """Remove a person from the index: their faces (embeddings included), the decisions
        about them, their name (the rows of people merged into them too) and the person facts
        their faces gave, in one commit; then their faces' crops in the thumbnail cache.
        Returns {"faces", "pictures"} removed from."""
        self._folder.require_writable()
        with self._lock:
            # deleted rows are overwritten (the writer's secure_delete, Catalog.open)
            with self._catalog.transaction():
                faces, pictures = self._catalog.people.forget(person_id)
                # their pictures' person facts; pamir.facts.people.who writes the others' again
                self._catalog.facts.drop_kind("person", pictures)
            # and out of the write-ahead log, into the (zeroed) catalogue
            self._catalog.checkpoint()
        for face in faces:  # their crops in the page's thumbnail cache
            for crop in layout.face_crops(self._folder.directory, face):
                crop.unlink(missing_ok=True)
        return {"faces": len(faces), "pictures": len(pictures)}


def _face_row(named) -> tuple:
    """A found face (pamir.facts.people.NamedFace) as PeopleTables.replace_faces stores it:
    (box key, embedding bytes, score (None: a named region no detection matched), size,
    written, written_how)."""
    f = named.face
    return (box_key(f.box), np.asarray(f.embedding, np.float32).tobytes(),
            None if f.score != f.score else float(f.score), int(f.size), named.name, named.how)


def read_decisions(directory: str | Path) -> Decisions:
    """The editors' decisions of the index in `directory`; none where there is no index, or
    one with no people (older than schema 5), or a catalogue that cannot be read (a damaged
    index is rebuilt without them)."""
    try:
        catalog = Catalog.open(Path(directory), writable=False)
    except (IndexDirError, sqlite3.Error, OSError):
        return Decisions()
    try:
        with catalog.snapshot():
            kept = catalog.people.kept_decisions()
    except sqlite3.Error:
        return Decisions()
    finally:
        catalog.close()
    if kept is None:
        return Decisions()
    return Decisions(_people_decided(kept.people, {d[4] for d in kept.decisions}),
                     kept.decisions)


def _people_decided(people: Sequence[tuple], decided: set[int]) -> tuple[tuple, ...]:
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
            catalog.people.restore(kept)
    finally:
        catalog.close()


__all__ = ["BOX_DECIMALS", "DECISION_IOU", "Decisions", "FaceRow", "IndexDirError", "People",
           "PersonRow", "box_key", "read_decisions", "write_decisions"]
