"""The people routes of the API: the people with their counts and a face that shows
each, a face's crop, and what an editor may change: name a person, merge two, say a face is
not a person. A viewer reads; the changes need an editor's token and a server that is not
read-only (pamir.server.sharing). The work is pamir.facts.people.who's; a change opens the index
for writing for its moment, so it waits for no `pamir index` and is refused (409) while one
runs.

Faces are served by their id only, cropped from the indexed picture: no route takes a path.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path as PathParameter, Query, Request
from fastapi.responses import FileResponse
from PIL import Image, ImageOps, UnidentifiedImageError
from pydantic import BaseModel, Field

from ..facts.people import who
from ..facts.people.who import PeopleError
from ..features.images import ImageError, open_image
from ..index import Index, IndexDirError
from ..index.layout import face_crop_name
from ..storage import atomic_write_bytes
from .sharing import COOKIE, bearer

router = APIRouter()

#: A face's crop is its box grown by this fraction of its size on each side (hair, chin).
CROP_MARGIN = 0.3
CROP_SIZES = (64, 128, 256)
#: Ids are SQLite integers: a larger number is no person or face (404), never an overflow.
MAX_ID = 2**63 - 1
PersonId = Annotated[int, PathParameter(ge=0, le=MAX_ID, description="a person's id")]
FaceId = Annotated[int, PathParameter(ge=0, le=MAX_ID, description="a face's id")]
PictureId = Annotated[int, PathParameter(ge=0, le=MAX_ID, description="a picture's id")]


class Name(BaseModel):
    name: str = Field(..., min_length=1, max_length=200, description="the person's name")


class Merge(BaseModel):
    into: int = Field(..., ge=0, le=MAX_ID, description="the person the other one is")


class NotPerson(BaseModel):
    person: int | None = Field(None, ge=0, le=MAX_ID, description="who the face is not "
                               "(default: the person it is now)")


def _index(request: Request) -> Index:
    return request.app.state.pamir.index


def _require_editor(request: Request) -> None:
    """403 unless the request may change the index's people: an editor's token (when the
    server has tokens) on a server that is not read-only."""
    sharing = getattr(request.app.state, "sharing", None)
    if sharing is None:
        return
    if sharing.tokens:
        token = bearer(request.headers.get("authorization")) or request.cookies.get(COOKIE)
        if sharing.role_of(token) != "editor":
            raise HTTPException(403, "a viewer's token: naming, merging and correcting "
                                     "people need an editor's token")
    if sharing.read_only:
        raise HTTPException(403, "this server is read-only (`pamir serve --read-only`): "
                                 "nothing is kept")


def _change(request: Request, change) -> dict:
    """Run change(writable index) with the index opened for writing for its moment (the
    route's dependency checked the role first, before its body is read)."""
    index = _index(request)
    try:
        with Index.open(index.directory, writable=True) as writable:
            out = change(writable)
    except PeopleError as e:
        raise HTTPException(404 if str(e).startswith("no ") else 400, str(e)) from None
    except IndexDirError as e:
        raise HTTPException(409, f"{e}; try again when it is done") from None
    index.refresh()
    return out


def _person_json(p, cover: dict[int, int]) -> dict:
    return {"id": p.id, "name": p.shown, "label": p.label, "pictures": p.pictures,
            "faces": p.faces, "face": cover.get(p.id),
            "query": f'person:"{p.name}"' if p.name else None}


def _face_json(f, people: dict) -> dict:
    name, shown, _ = people.get(f.person, (None, None, None))
    return {"id": f.id, "picture": f.picture, "box": list(f.box), "person": f.person,
            "label": (shown or name or f"person {f.person}") if f.person is not None else None,
            "how": f.how, "confidence": round(f.confidence, 4)}


@router.get("/api/people", summary="The people in the pictures, with their counts")
def people(request: Request):
    index = _index(request)
    cover = index.cover_faces()
    return {"people": [_person_json(p, cover) for p in index.people() if p.faces]}


@router.get("/api/people/{person_id}", summary="A person and their faces")
def person(request: Request, person_id: PersonId):
    index = _index(request)
    p = index.person(person_id)
    if p is None or p.same_as is not None:
        raise HTTPException(404, f"no person {person_id}")
    everyone = index.all_people()
    return {**_person_json(p, index.cover_faces()),
            "face_list": [_face_json(f, everyone) for f in index.faces(person=p.id)]}


@router.get("/api/pictures/{picture_id}/faces", summary="The faces of a picture, and who")
def picture_faces(request: Request, picture_id: PictureId):
    index = _index(request)
    everyone = index.all_people()
    return {"faces": [_face_json(f, everyone) for f in index.faces(picture=picture_id)]}


@router.get("/api/faces/{face_id}/crop", summary="A face, cropped from its picture (JPEG)",
            response_class=FileResponse)
def face_crop(request: Request, face_id: FaceId, size: int = Query(128, ge=16, le=512)):
    index = _index(request)
    found = index.picture_of_face(face_id)
    f = index.face(face_id)
    if found is None or f is None:
        raise HTTPException(404, f"no face {face_id}")
    _, path, digest = found
    size = min((s for s in CROP_SIZES if s >= size), default=CROP_SIZES[-1])
    out = request.app.state.pamir.thumbnails / face_crop_name(digest, face_id, size)
    if not out.is_file():
        atomic_write_bytes(out, _crop(Path(path), f.box, size, face_id))
    return FileResponse(out, media_type="image/jpeg",
                        headers={"cache-control": "private, max-age=3600"})


def _crop(path: Path, box, size: int, face_id: int) -> bytes:
    try:
        with open_image(path.read_bytes()) as im:
            im = ImageOps.exif_transpose(im)  # boxes are of the picture as shown
            w, h = im.size
            x0, y0, x1, y1 = box
            mx, my = (x1 - x0) * CROP_MARGIN, (y1 - y0) * CROP_MARGIN
            crop = im.crop((max(0, round((x0 - mx) * w)), max(0, round((y0 - my) * h)),
                            min(w, round((x1 + mx) * w)), min(h, round((y1 + my) * h))))
            crop.thumbnail((size, size))
            buf = io.BytesIO()
            crop.convert("RGB").save(buf, "JPEG", quality=85)
            return buf.getvalue()
    except FileNotFoundError:
        raise HTTPException(410, f"face {face_id}'s picture is gone; run `pamir index` "
                                 "again") from None
    except (UnidentifiedImageError, OSError, ImageError, Image.DecompressionBombError) as e:
        raise HTTPException(422, f"face {face_id}'s picture cannot be decoded ({e})") from None


@router.post("/api/people/{person_id}/name", summary="Name a person (editor)",
             dependencies=[Depends(_require_editor)])
def name_person(request: Request, person_id: PersonId, body: Name):
    return _change(request, lambda ix: who.name_person(ix, person_id, body.name))


@router.post("/api/people/{person_id}/merge", summary="This person is another (editor)",
             dependencies=[Depends(_require_editor)])
def merge_people(request: Request, person_id: PersonId, body: Merge):
    return _change(request, lambda ix: who.merge_people(ix, person_id, body.into))


@router.post("/api/faces/{face_id}/not", summary="This face is not this person (editor)",
             dependencies=[Depends(_require_editor)])
def not_person(request: Request, face_id: FaceId, body: NotPerson):
    return _change(request, lambda ix: who.not_person(ix, face_id, body.person))


#: The routes only an editor may call (and none on a read-only server), as the router
#: declares them.
EDITOR_ROUTES = ("/api/people/{person_id}/name", "/api/people/{person_id}/merge",
                 "/api/faces/{face_id}/not")

__all__ = ["EDITOR_ROUTES", "router"]
