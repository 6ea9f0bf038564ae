"""Who each face is: names from the files, names carried to faces that look alike, and
unnamed people.

1. `name_faces`: a picture's named regions name the detected faces they overlap; a region
   that overlaps none is embedded itself. A keyword (or People/ tag) that is a known
   person's name names the face of a picture with one face.
2. `assign`: an unnamed face takes the name of the nearest named person when the distance is
   within NAME_DISTANCE, chosen so that strangers are not given someone's name.
3. `group`: faces that match no name are grouped into unnamed people (Chinese whispers,
   chosen over DBSCAN by measurement), incrementally: faces already grouped keep their group.

benchmarks/results/faces.md gives the measurements behind each constant.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from ..fact import Fact, fold
from .faces import EMBEDDING_SIZE, Face
from .regions import Region, iou

#: A named region names the detected face it overlaps most, when their intersection over
#: union is at least this: a region drawn by a person (or a tool's detector) is larger or
#: smaller than HOG's tight box, a region 1.5 times as wide and high as the face box has
#: an IoU of 0.44; another person's face beside it has about none.
REGION_IOU = 0.3
#: An unnamed face takes a person's name when its distance to the nearest of that person's
#: named faces is at most this (Euclidean, dlib embeddings). Chosen on held-out named faces
#: (benchmarks/bench_faces.py, 117 pictures of 27 people, each person left out in turn as a
#: stranger): the largest threshold at which no stranger's face was given a name (0 of 585;
#: 0.52 named 0.7 %, 0.60, dlib's rule of thumb, 5.8 %), while 95 % of the named people's
#: other faces got the right name and none a wrong one.
NAME_DISTANCE = 0.50
#: Faces closer than this are linked when grouping unnamed faces into people (Chinese
#: whispers' edge threshold). On the benchmark's 117 faces of 27 people, pairwise precision
#: and recall 1.0 (DBSCAN, as Immich groups, at 0.55: precision 0.92, its single linkage
#: chaining people together; at 0.60, 0.76 against Chinese whispers' 0.92; below 0.55 the two
#: are alike, and Immich's min_samples=3 only loses recall).
GROUP_DISTANCE = 0.55
#: P(the name is right | distance d) = 1 / (1 + exp(NAME_SLOPE * (d - NAME_MIDPOINT))): a
#: logistic fit (scikit-learn's default regularisation, both sides weighted equally) of the
#: benchmark's named people's faces (the right name) against strangers' faces (any name is
#: wrong), at their distance to the nearest named person: 0.96 at 0.42, 0.75 at
#: NAME_DISTANCE.
NAME_SLOPE = 27.4
NAME_MIDPOINT = 0.542
#: A face at least this many pixels high (its box's shorter side in its picture) is named
#: with a portrait's certainty; dlib's network reads a 150 x 150 chip, which a smaller face
#: fills only by enlargement, so its name's confidence is scaled by size / SURE_FACE
#: (a 25-pixel face's by 0.31). On the benchmark's group photos (small_faces.md) the
#: distance of Obama's and Biden's faces to their portraits grew as the faces shrank.
SURE_FACE = 80
#: Longest person's name, in words, looked for among a picture's keywords.
MAX_NAME_WORDS = 4


@dataclass
class NamedFace:
    """A face and the name the files give it. name: as written ("Alice Smith"), None when
    the files do not say; how: "region (sidecar NAME.xmp, MWG)", "keyword", or ""."""

    face: Face
    name: str | None = None
    how: str = ""


def name_faces(faces: Sequence[Face], regions: Sequence[Region], keywords: Iterable[str] = (),
               known_names: Iterable[str] = (),
               embed: Callable[[tuple], Face] | None = None) -> list[NamedFace]:
    """The picture's faces with the names its files give them: the detected faces in their
    order, then one face for each named region that overlaps no detection (embedded by
    `embed(box)`, e.g. `lambda box: finder.embed(image, box)`; left out without it).

    Regions first: each region names the face it overlaps most (IoU at least REGION_IOU),
    pairs taken best first, each face and each region used once. Then keywords: on a picture
    with exactly one face, which no region named, a keyword (or phrase of consecutive
    keywords, or a People/ tag) that is a known person's name (folded) names it, when
    exactly one such name is found."""
    out = [NamedFace(f) for f in faces]
    pairs = sorted(((iou(f.box, r.box), i, j) for i, f in enumerate(faces)
                    for j, r in enumerate(regions)), reverse=True)
    used_faces, used_regions = set(), set()
    for overlap, i, j in pairs:
        if overlap < REGION_IOU:
            break
        if i in used_faces or j in used_regions:
            continue
        used_faces.add(i)
        used_regions.add(j)
        out[i].name, out[i].how = regions[j].name, f"region ({regions[j].source})"
    for j, r in enumerate(regions):
        if j not in used_regions and embed is not None:
            out.append(NamedFace(embed(r.box), r.name, f"region ({r.source}), embedded"))
    if len(out) == 1 and out[0].name is None:
        found = keyword_names(keywords, known_names)
        if len(found) == 1:
            out[0].name, out[0].how = found[0], "keyword"
    return out


def keyword_names(keywords: Iterable[str], known_names: Iterable[str]) -> list[str]:
    """The known names (folded) found among keywords: each keyword, and each run of up to
    MAX_NAME_WORDS consecutive keywords (a caption split into words keeps "alice smith" as
    "alice", "smith")."""
    known = {fold(n) for n in known_names if n and fold(n)}
    words = [fold(k) for k in keywords if k and fold(k)]
    found = []
    for i in range(len(words)):
        for n in range(1, MAX_NAME_WORDS + 1):
            phrase = " ".join(words[i:i + n])
            if i + n <= len(words) and phrase in known and phrase not in found:
                found.append(phrase)
    # a name that is part of a longer name found ("alice" in "alice smith") is that name
    return [f for f in found if not any(f != g and f" {f} " in f" {g} " for g in found)]


def person_distances(unnamed: np.ndarray, named: np.ndarray, names: Sequence[str]
                     ) -> tuple[list[str], np.ndarray]:
    """(people, D): the distinct names (folded, first-seen order) and the (n, P) distance
    from each unnamed face to the nearest named face of each person."""
    unnamed, named = _rows(unnamed), _rows(named)
    people = list(dict.fromkeys(fold(n) for n in names))
    D = np.full((len(unnamed), len(people)), np.inf, np.float32)
    if len(unnamed) and len(named):
        pair = _distances(unnamed, named)
        index = {p: k for k, p in enumerate(people)}
        for j, n in enumerate(names):
            k = index[fold(n)]
            D[:, k] = np.minimum(D[:, k], pair[:, j])
    return people, D


def assign(unnamed: np.ndarray, named: np.ndarray, names: Sequence[str],
           threshold: float = NAME_DISTANCE) -> list[tuple[str | None, float]]:
    """For each unnamed face, (name, distance): the nearest named person (folded name) when
    within threshold, else (None, distance to the nearest)."""
    people, D = person_distances(unnamed, named, names)
    if not people:
        return [(None, float("inf"))] * len(D)
    best = D.argmin(axis=1)
    out = []
    for i, k in enumerate(best):
        d = float(D[i, k])
        out.append((people[k] if d <= threshold else None, d))
    return out


def group(embeddings: np.ndarray, labels: Sequence[int] | None = None,
          threshold: float = GROUP_DISTANCE) -> np.ndarray:
    """Unnamed people: a group id per face (>= 0). labels: the groups faces already have
    (-1: a new face); those keep theirs, a new face within threshold of a grouped face joins
    the nearest one's group, and the other new faces are grouped among themselves by
    Chinese whispers (dlib), taking new ids."""
    X = _rows(embeddings)
    out = np.full(len(X), -1, np.int64) if labels is None else np.array(labels, np.int64)
    old = np.flatnonzero(out >= 0)
    new = np.flatnonzero(out < 0)
    if len(old) and len(new):
        d = _distances(X[new], X[old])
        near = d.argmin(axis=1)
        close = d[np.arange(len(new)), near] <= threshold
        out[new[close]] = out[old[near[close]]]
        new = new[~close]
    if len(new):
        start = int(out.max()) + 1 if len(old) else 0
        out[new] = start + chinese_whispers(X[new], threshold)
    return out


def chinese_whispers(X: np.ndarray, threshold: float = GROUP_DISTANCE) -> np.ndarray:
    """dlib's Chinese whispers over the graph of faces closer than threshold: ids from 0."""
    import dlib  # noqa: PLC0415 - the [faces] extra, as FaceFinder

    if len(X) == 1:
        return np.zeros(1, np.int64)
    vectors = [dlib.vector(row.astype(np.float64).tolist()) for row in X]
    ids = np.asarray(dlib.chinese_whispers_clustering(vectors, float(threshold)), np.int64)
    return np.unique(ids, return_inverse=True)[1]


def name_confidence(distance: float, size: int | None = None) -> float:
    """How sure a name carried at this distance is, in [0, 1] (NAME_SLOPE's fit), for a face
    `size` pixels high (its box's shorter side in its picture; None: a portrait's): a face
    smaller than SURE_FACE is as much less sure as it is smaller."""
    z = NAME_SLOPE * (float(distance) - NAME_MIDPOINT)
    p = 1.0 / (1.0 + math.exp(min(z, 700.0)))
    return p * size_certainty(size)


def size_certainty(size: int | None) -> float:
    """How far a face's size lets its embedding be trusted, in (0, 1]: 1 from SURE_FACE
    pixels on, size / SURE_FACE below."""
    if size is None or size >= SURE_FACE:
        return 1.0
    return max(float(size), 1.0) / SURE_FACE


def person_facts(named: Iterable[tuple[str, tuple, float]]) -> list[Fact]:
    """A picture's person facts from its named faces, (name as written, box, confidence):
    the name as a phrase ("alice smith") and each of its words ("alice", "smith"), so that
    either finds the person; one fact per word, at its surest face, its detail the name as
    written and the boxes of the faces."""
    best: dict[str, tuple[float, str, list]] = {}
    for name, box, confidence in named:
        phrase = fold(name)
        if not phrase:
            continue
        for word in dict.fromkeys([phrase, *phrase.split()]):
            c, shown, boxes = best.get(word, (0.0, name, []))
            boxes.append([round(float(v), 4) for v in box])
            best[word] = (max(c, float(confidence)), shown if c >= confidence else name, boxes)
    return [Fact("person", w, round(min(max(c, 0.0), 1.0), 4),
                 json.dumps({"shown": shown, "boxes": boxes}, ensure_ascii=False))
            for w, (c, shown, boxes) in best.items()]


def _rows(x) -> np.ndarray:
    """Embeddings as an (n, 128) float32 array (n may be 0)."""
    a = np.asarray(x, np.float32)
    return a.reshape(-1, EMBEDDING_SIZE) if a.size else np.zeros((0, EMBEDDING_SIZE), np.float32)


def _distances(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """(len(A), len(B)) Euclidean distances."""
    A = A.astype(np.float32)
    B = B.astype(np.float32)
    d2 = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
    return np.sqrt(np.maximum(d2, 0.0))


__all__ = ["GROUP_DISTANCE", "NAME_DISTANCE", "NamedFace", "REGION_IOU", "SURE_FACE", "assign",
           "chinese_whispers", "group", "iou", "keyword_names", "name_confidence", "name_faces",
           "person_distances", "person_facts", "size_certainty"]
