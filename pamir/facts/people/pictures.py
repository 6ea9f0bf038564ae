"""One picture's people, as a Dask task computes them: faces found and embedded, the names
its files give (regions matched to faces, a region that matches no face embedded itself),
its People tags. What needs the whole collection (keywords that are known names, names
carried to unnamed faces, unnamed people) is left to the index's writer (pamir.facts.people.naming).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...features.images import ImageError
from .faces import face_finder, load_for_detection
from .naming import NamedFace, name_faces
from .regions import read_people


@dataclass
class PicturePeople:
    """faces: the picture's faces with the names its regions give (None: not read, see
    note); tags: the names of its People/ keywords; notes: what could not be read."""

    faces: list[NamedFace] | None
    tags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def find_people(paths, pictures=None) -> list[PicturePeople]:
    """Each picture's faces, region names and People tags. A plain function over paths, to
    run as a Dask task; a bad file gives a note, never an exception. pictures: each path's
    picture already decoded, (RGB array, (width, height) of the file as shown[, closer]),
    closer(side) its closer look (the reading stage's Item.detail), or None to decode it
    here."""
    finder = face_finder()
    out = []
    for i, path in enumerate(paths):
        try:
            written = read_people(path)
            given = pictures[i] if pictures is not None else None
            image, full, *closer = given if given is not None else load_for_detection(path)
            faces = finder.find(image, full, closer[0] if closer else None)
            named = name_faces(faces, written.regions,
                               embed=lambda box: finder.embed(image, box, full))
            out.append(PicturePeople(named, written.tags, written.notes))
        except ImageError as e:
            out.append(PicturePeople(None, notes=[f"{path}: {e}"]))
        except Exception as e:  # noqa: BLE001 - one bad picture never stops a batch
            out.append(PicturePeople(None, notes=[f"{path}: people not read "
                                                  f"({type(e).__name__}: {e})"]))
    return out


def read_faces(paths, pictures=None) -> list[tuple[list[NamedFace] | None, str]]:
    """The faces pass's reader (pamir.index.passes): each picture's faces with the names its
    files give, (faces, "") or (None, why it could not be read). A picture with one face
    that no region names, and one People/ tag, has that face named by the tag (a tag is a
    name: it needs no known person). A plain function over paths, to run as a Dask task;
    pictures: as `find_people`'s (decoded once for every pass)."""
    out = []
    for path, found in zip(paths, find_people(paths, pictures)):
        if found.faces is None:
            out.append((None, "; ".join(found.notes) or f"{path}: faces not read"))
            continue
        faces = found.faces
        if len(faces) == 1 and faces[0].name is None and len(found.tags) == 1:
            faces[0].name, faces[0].how = found.tags[0], "tag"
        out.append((faces, ""))
    return out


def read_face_rasters(pictures) -> list[tuple[list[NamedFace] | None, str]]:
    """read_faces of (path, RGB raster, full (width, height)[, closer]) from the reading
    stage (pamir.features.rasters; closer: Item.detail)."""
    return read_faces([p for p, *_ in pictures], [tuple(rest) for _, *rest in pictures])


__all__ = ["PicturePeople", "find_people", "read_face_rasters", "read_faces"]
