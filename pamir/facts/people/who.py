"""Who each face of an index is, and what an editor may change about it: the one home of the
people an index keeps (the faces pass stores the faces, pamir.index.people the rows).

`identify(index)` runs after each faces pass and after each editor's decision. For each face,
first to last, the first that applies:

1. an editor's decision that the face is a person (naming or merging on the page);
2. the name its files give: a named region (MWG, MP), or the one People/ tag of a picture
   with one face;
3. a keyword of its picture that is a known person's name, on a picture with one face
   (pamir.facts.people.naming.keyword_names), a keyword and not a description's word (FREE_TEXT),
   and a face that looks like the person's faces named in 1-2, if they have some
   (KEYWORD_DISTANCE);
4. the name of the named person whose named faces (1-3) it is nearest to, within
   NAME_DISTANCE, with that distance's calibrated confidence, less for a small face
   (name_confidence);
5. else an unnamed person: faces grouped by Chinese whispers, faces already grouped keeping
   their group (pamir.facts.people.naming.group).

An editor's "not this person" on a face keeps it from that person at every step. Then each
picture's person facts (pamir.facts.fact, kind "person") are written from its named faces, so
that `pamir search alice`, `alice bob`, `alice beach` and `person:alice` find them through
the index's fact ranking: a fact's probability is FACT_PROBABILITY x its confidence.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..fact import fold
from .naming import (NAME_DISTANCE, group, keyword_names, name_confidence, person_distances,
                     person_facts)

#: How sure a name is that people gave (an editor, a region, a tag, a keyword): a fact
#: like a keyword people wrote.
GIVEN = 1.0
#: Caption sources that are free text (pamir.facts.metadata's), not keywords: a description names
#: the people of a scene, who may not be the face in the picture ("President Barack Obama
#: and Vice President Joe Biden stand with ...", on a picture where only Biden's face was
#: found, named him Obama in the benchmark, and carried the name to Biden's other picture).
FREE_TEXT = frozenset({"EXIF ImageDescription", "XMP dc:description", "IPTC Caption-Abstract"})
#: A keyword names a lone face only if that face is within this distance of one of the
#: person's faces named otherwise (a region, a tag, an editor), when they have some: dlib's
#: own threshold for two faces of one person (99.38 % on LFW), looser than NAME_DISTANCE,
#: since a keyword is a name people gave, but not so loose that it names a stranger.
KEYWORD_DISTANCE = 0.6


class PeopleError(ValueError):
    """A person or face that is not there, or a name that cannot be given; the message says
    what to do."""


@dataclass
class Identified:
    """What `identify` decided: faces per way they were named, people, pictures with
    person facts."""

    faces: int = 0
    named: int = 0      # named by an editor, a region, a tag or a keyword
    carried: int = 0    # given a name from the faces they look like
    unnamed: int = 0    # in an unnamed person
    people: int = 0     # named people with faces
    groups: int = 0     # unnamed people

    def as_dict(self) -> dict:
        return dict(self.__dict__)


#: Unnamed faces compared with the named ones at a time (a block of distances of this many
#: rows by the named faces: 100,000 named faces make 800 MB a block of 2,048).
BLOCK = 2048


def identify(index, everything: bool = False) -> Identified:
    """Decide who every face of `index` (a writable pamir.index.Index) is and write it, with
    the person facts of their pictures (the module's doc): the faces whose person changed
    and the facts of their pictures, or everything (a person's name changed)."""
    w = _Who.read(index)
    new_names: dict[str, tuple[str, list[int]]] = {}  # folded -> (shown, faces waiting)
    _given_names(w, new_names)                              # 1-2
    _make_people(index, new_names, w.people, w.by_name, w.person)
    _keyword_names(index, w, new_names)                     # 3
    _carried_names(w)                                       # 4
    _unnamed_people(index, w)                               # 5
    return _write(index, w, everything)


@dataclass
class _Who:
    """identify's work: the index's faces (with their embeddings E), its people ({id:
    (name, shown, same_as)}) and editors' decisions, and, for each face by its position,
    who it is becoming, how, how sure, and the people an editor said it is not."""

    faces: list
    people: dict
    decisions: dict
    E: np.ndarray
    person: list
    how: list
    confidence: list
    refused: list
    by_name: dict = field(default_factory=dict)  # folded name -> person id

    @classmethod
    def read(cls, index) -> "_Who":
        faces = index.faces(embeddings=True)
        n = len(faces)
        E = np.stack([f.embedding for f in faces]) if faces else np.zeros((0, 128), np.float32)
        w = cls(faces, index.all_people(), index.face_decisions(), E, [None] * n, [""] * n,
                [GIVEN] * n, [set() for _ in faces])
        w.by_name = {name: w.canonical(i) for i, (name, _, _) in w.people.items() if name}
        return w

    def canonical(self, pid):
        """The person `pid` is now (following merges), or None for one that is gone."""
        seen = set()
        while pid is not None and pid in self.people and self.people[pid][2] is not None \
                and pid not in seen:
            seen.add(pid)
            pid = self.people[pid][2]
        return pid if pid in self.people else None

    def per_picture(self) -> dict[int, list[int]]:
        out = defaultdict(list)
        for i, f in enumerate(self.faces):
            out[f.picture].append(i)
        return out


def _given_names(w: _Who, new_names) -> None:
    """Steps 1-2: an editor's "is" (unless they also said "not"), else the name the files
    give; every face's "not" decisions kept for the later steps."""
    for i, f in enumerate(w.faces):
        decided = w.decisions.get(f.id, ())
        w.refused[i].update(w.canonical(pid) for d, pid in decided if d == "not")
        said = [w.canonical(pid) for d, pid in decided if d == "is"]
        said = [pid for pid in said if pid is not None and pid not in w.refused[i]]
        if said:
            w.person[i], w.how[i] = said[0], "editor"
        elif f.written and fold(f.written):
            _name(i, f.written, "region" if f.written_how.startswith("region") else
                  f.written_how or "region", w.by_name, new_names, w.person, w.how, w.refused)


def _keyword_names(index, w: _Who, new_names) -> None:
    """Step 3: a keyword that is a known name names the lone face of its picture, if that
    face looks like the person's given faces."""
    if not w.by_name:
        return
    per_picture = w.per_picture()
    given = defaultdict(list)  # person -> faces named by an editor, a region, a tag
    for i, pid in enumerate(w.person):
        if pid is not None:
            given[pid].append(i)
    for picture, (words, source) in index.face_captions().items():
        lone = per_picture.get(picture, [])
        if len(lone) != 1 or w.person[lone[0]] is not None or source in FREE_TEXT:
            continue
        found = keyword_names(words, w.by_name)
        pid = w.by_name.get(found[0]) if len(found) == 1 else None
        if pid is not None and _looks_like(w.E, lone[0], given.get(pid, ())):
            _name(lone[0], found[0], "keyword", w.by_name, new_names, w.person, w.how,
                  w.refused)


def _carried_names(w: _Who) -> None:
    """Step 4: the faces still nobody take the name of the named faces they look like."""
    named_ids = {pid for pid, (n, _, same_as) in w.people.items() if n and same_as is None}
    seeds = [i for i in range(len(w.faces)) if w.person[i] in named_ids]
    rest = [i for i in range(len(w.faces)) if w.person[i] is None]
    if seeds and rest:
        ids = [str(w.person[i]) for i in seeds]
        for start in range(0, len(rest), BLOCK):
            _carry(rest[start:start + BLOCK], w.E, seeds, ids, w.person, w.how, w.confidence,
                   w.refused, [f.size for f in w.faces])


def _unnamed_people(index, w: _Who) -> None:
    """Step 5: the others grouped into unnamed people, a face already grouped keeping its
    group."""
    unnamed_ids = {pid for pid, (n, _, s) in w.people.items() if not n and s is None}
    members = [i for i in range(len(w.faces))
               if w.person[i] is None or w.person[i] in unnamed_ids]
    if not members:
        return
    for i, pid in zip(members, _groups(index, w.faces, members, w.E, w.person, w.refused,
                                       w.canonical, unnamed_ids)):
        if w.person[i] is None:
            w.person[i], w.how[i], w.confidence[i] = pid, "group", GIVEN


def _write(index, w: _Who, everything: bool) -> Identified:
    """Who changed, written with the person facts of their pictures (of every picture with
    faces, and of those that had some, with `everything`); what was decided, counted."""
    faces, person = w.faces, w.person
    now = index.all_people()  # with the people steps 1-5 made
    shown = {pid: s or n for pid, (n, s, _) in {**w.people, **now}.items()}
    names = {pid: n for pid, (n, _, _) in now.items() if n}
    changed = [i for i, f in enumerate(faces)
               if everything or (f.person, f.how, round(f.confidence, 4))
               != (person[i], w.how[i], round(w.confidence[i], 4))]
    pictures = {faces[i].picture for i in changed}
    with_faces = {f.picture for f in faces}
    facts = {p: [] for p in index.person_fact_pictures() if everything or p not in with_faces}
    facts.update({p: [] for p in pictures})
    for i, f in enumerate(faces):
        if f.picture in facts and person[i] in names:
            facts[f.picture].append((shown[person[i]], f.box, w.confidence[i]))
    facts = {p: person_facts(held) for p, held in facts.items()}
    index.set_who([(faces[i].id, person[i], w.how[i], w.confidence[i]) for i in changed],
                  facts)
    out = Identified(faces=len(faces))
    for i in range(len(faces)):
        if w.how[i] == "carried":
            out.carried += 1
        elif person[i] in names:
            out.named += 1
        else:
            out.unnamed += 1
    out.people = len({pid for pid in person if pid in names})
    out.groups = len({pid for pid in person if pid not in names})
    return out


def _make_people(index, new_names, people, by_name, person) -> None:
    """The people whose names the files give for the first time, made, and their faces
    given to them."""
    for name, (shown, waiting) in new_names.items():
        (pid,) = index.new_people([(name, shown)])
        people[pid] = (name, shown, None)
        by_name[name] = pid
        for i in waiting:
            person[i] = pid
    new_names.clear()


def _groups(index, faces, members, E, person, refused, canonical, unnamed_ids) -> list[int]:
    """The unnamed person of each face of `members`: a face an editor put in an unnamed
    person stays there, a face already grouped keeps its group (unless an editor said it is
    not that person), the others join the nearest group or make new ones (naming.group);
    new groups become new people."""
    local: dict[int, int] = {}  # person id -> a label from 0 for naming.group
    labels = []
    for i in members:
        pid = person[i]
        if pid is None and faces[i].how == "group":
            old = canonical(faces[i].person)
            pid = old if old in unnamed_ids and old not in refused[i] else None
        labels.append(local.setdefault(pid, len(local)) if pid is not None else -1)
    grouped = [int(g) for g in group(E[members], labels)]
    back = {label: pid for pid, label in local.items()}
    out = []
    for g, i in zip(grouped, members):
        pid = back.get(g)
        if pid is None or pid in refused[i]:
            pid = None
        out.append(pid if pid is not None else ("new", g if g not in back else -1 - i))
    fresh = sorted({p for p in out if isinstance(p, tuple)})
    made = dict(zip(fresh, index.new_people([(None, None)] * len(fresh))))
    return [made[p] if isinstance(p, tuple) else p for p in out]


def _name(i, name, how_named, by_name, new_names, person, how, refused) -> None:
    """Face i is the person called `name` (a known one, or one to make), unless an editor
    said it is not."""
    folded = fold(name)
    pid = by_name.get(folded)
    if pid is not None:
        if pid not in refused[i]:
            person[i], how[i] = pid, how_named
        return
    shown, waiting = new_names.setdefault(folded, (name.strip(), []))
    waiting.append(i)
    how[i] = how_named


def _looks_like(E, i: int, given) -> bool:
    """Whether face i is close enough to a person's given faces to take their name from a
    keyword (KEYWORD_DISTANCE; a person with none: yes)."""
    if not len(given):
        return True
    d = np.linalg.norm(E[list(given)] - E[i], axis=1)
    return float(d.min()) <= KEYWORD_DISTANCE


def _carry(rest, E, seeds, ids, person, how, confidence, refused, sizes) -> None:
    """Step 4 for the unnamed faces `rest`: the name of the nearest named person within
    NAME_DISTANCE (but one an editor refused), with its calibrated confidence, less for a
    small face (sizes: each face's, pamir.facts.people.naming.size_certainty)."""
    order, D = person_distances(E[rest], E[seeds], ids)
    for row, i in enumerate(rest):
        d = D[row]
        for k, pid in enumerate(order):
            if int(pid) in refused[i]:
                d[k] = np.inf
        k = int(d.argmin())
        if d[k] <= NAME_DISTANCE:
            person[i], how[i] = int(order[k]), "carried"
            confidence[i] = name_confidence(float(d[k]), sizes[i])


# ------------------------------------------------------------------------------ editing
def _person(index, person_id: int):
    p = index.person(int(person_id))
    if p is None or p.same_as is not None:
        raise PeopleError(f"no person {person_id} in the index (see `pamir people`)")
    return p


def name_person(index, person_id: int, name: str) -> dict:
    """An editor names a person (an unnamed one, or renames one): their faces are that
    person from now on (kept as decisions, so that a re-read keeps them). A name another
    person already has merges the two."""
    shown = " ".join(str(name).split())
    if not fold(shown) or not shown.isprintable() or _not_text(shown):
        raise PeopleError("give a name with at least one letter, of printable characters")
    p = _person(index, person_id)
    other = index.person_named(shown)
    if other is not None and other.id != p.id:
        return merge_people(index, p.id, other.id)
    index.decide([f.id for f in index.faces(person=p.id)], "is", p.id)
    index.rename_person(p.id, fold(shown), shown)
    return {"person": p.id, "name": shown, "identified": identify(index, everything=True).as_dict()}


def _not_text(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: no text SQLite can store
        return True
    return False


def merge_people(index, source: int, target: int) -> dict:
    """An editor says two people are one: `source`'s faces become `target`'s (kept as
    decisions); source's name, read again in files, means target."""
    a, b = _person(index, source), _person(index, target)
    if a.id == b.id:
        raise PeopleError(f"person {a.id} is already person {b.id}")
    index.decide([f.id for f in index.faces(person=a.id)], "is", b.id)
    index.merge_people(a.id, b.id)
    if b.name is None and a.name is not None:  # an unnamed person merged with a named one
        index.rename_person(a.id, None, None)
        index.rename_person(b.id, a.name, a.shown)
    return {"person": b.id, "merged": a.id,
            "identified": identify(index, everything=True).as_dict()}


def not_person(index, face_id: int, person_id: int | None = None) -> dict:
    """An editor says a face is not a person (default: the one it is now): it leaves them,
    and no step gives it back to them."""
    f = index.face(int(face_id))
    if f is None:
        raise PeopleError(f"no face {face_id} in the index")
    pid = f.person if person_id is None else int(person_id)
    if pid is None:
        raise PeopleError(f"face {face_id} is nobody yet: say who it is not")
    _person(index, pid)
    # an earlier "is" of this face goes: an editor changed their mind
    index.decide([f.id], "not", pid)
    return {"face": f.id, "not": pid, "identified": identify(index, everything=True).as_dict()}


def forget(index, name: str) -> dict:
    """`pamir people --forget NAME`: remove a person from the index, their faces and
    embeddings, their name and the person facts their faces gave; the other people are
    identified again. NAME: a name, or "person N" for an unnamed person."""
    text = " ".join(str(name).split())
    p = index.person_named(text)
    if p is None and fold(text).startswith("person "):
        number = fold(text).removeprefix("person ").strip()
        if number.isdigit():
            p = index.person(int(number))
    if p is None:
        raise PeopleError(f"no person called {text!r} in the index (`pamir people` lists "
                          "them)")
    removed = index.forget_person(p.id)
    identify(index, everything=True)
    return {"person": p.label, **removed}


__all__ = ["FREE_TEXT", "GIVEN", "KEYWORD_DISTANCE", "Identified", "PeopleError", "forget",
           "identify", "merge_people", "name_person", "not_person"]
