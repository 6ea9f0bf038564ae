"""The copies-and-bursts routes of the API: the groups as last found (`pamir index`, `pamir
duplicates`), and an editor's choice of the picture to keep in a group. Nothing is deleted
here: `pamir duplicates --move-to DIR` moves the others aside, keeping the editor's choice.
The work is pamir.duplicates.groups'; a choice needs an editor's token and a server that is not
read-only, as the people's changes do (pamir.server.people).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, Field

from ..duplicates.groups import stored_duplicates
from ..storage import shown_path
from .people import MAX_ID, _change, _index, _require_editor

router = APIRouter()


class Keep(BaseModel):
    picture: int = Field(..., ge=0, le=MAX_ID, description="the picture to keep")
    burst: bool = Field(False, description="of its burst (default: of its copies)")


def _group_json(g) -> dict:
    shown = [shown_path(p) for p in g.paths]  # a name that is not UTF-8, as the API gives it
    return {"kind": g.kind, "keep": g.keep, "chosen": g.chosen,
            "pictures": [{"id": i, "path": p, "name": p.rsplit("/", 1)[-1],
                          "thumbnail": f"/api/pictures/{i}/thumbnail"}
                         for i, p in zip(g.ids, shown)]}


@router.get("/api/duplicates", summary="Groups of copies and bursts, and the one to keep")
def duplicates(request: Request):
    """Each group: its kind ("exact", "near" or "burst"), its pictures, the one to keep
    (`chosen`: an editor chose it; else the largest)."""
    return {"groups": [_group_json(g) for g in stored_duplicates(_index(request))]}


@router.post("/api/duplicates/keep", summary="Keep this picture of its group (editor)",
             dependencies=[Depends(_require_editor)])
def keep(request: Request, body: Keep):
    """The picture an editor keeps of its group of copies (or of its burst): `pamir
    duplicates --move-to DIR` then moves the others aside."""
    def change(index):
        kinds = ("burst",) if body.burst else ("exact", "near")
        for g in stored_duplicates(index):
            if g.kind in kinds and body.picture in g.ids:
                index.keep_picture(body.picture, g.ids)
                return {"group": _group_json(g) | {"keep": body.picture, "chosen": True}}
        raise HTTPException(404, f"picture {body.picture} is in no group of "
                                 f"{'bursts' if body.burst else 'copies'}")

    return _change(request, change)


#: The routes only an editor may call (and none on a read-only server).
EDITOR_ROUTES = ("/api/duplicates/keep",)

__all__ = ["EDITOR_ROUTES", "router"]
