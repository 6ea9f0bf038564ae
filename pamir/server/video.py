"""The web page's videos (pamir.facts.video): a video's file, served with HTTP range requests so
that the page's <video> element seeks to a hit's best frame (`#t=`), and its frame at a
time as a thumbnail."""

from __future__ import annotations

import io
import mimetypes
from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse
from PIL import Image

from ..jobs.feedback import NoSuchPicture, indexed_picture
from ..storage import atomic_write_bytes
from ..facts.video import VideoError, is_video, read_frame

router = APIRouter()

#: The types browsers play, by suffix (mimetypes lacks some on a bare system).
_TYPES = {".mp4": "video/mp4", ".m4v": "video/mp4", ".mov": "video/quicktime",
          ".webm": "video/webm", ".mkv": "video/x-matroska", ".avi": "video/x-msvideo"}


@router.get("/api/pictures/{picture_id}/video", summary="A video's file (HTTP ranges)",
            responses={200: {"content": {"video/mp4": {}}}, 206: {"description": "a range"}})
def video(picture_id: int, request: Request):
    """The video's bytes; a Range header gets its part (206), as a <video> element seeks."""
    try:
        p = indexed_picture(request.app.state.pamir.index, picture_id)
    except NoSuchPicture as e:
        raise HTTPException(404, str(e)) from None
    if not is_video(p.path):
        raise HTTPException(404, f"picture {picture_id} is not a video")
    if not Path(p.path).is_file():
        raise HTTPException(410, f"video {picture_id}'s file is gone; run `pamir index` again")
    suffix = Path(p.path).suffix.lower()
    return FileResponse(p.path, media_type=_TYPES.get(suffix) or mimetypes.guess_type(p.path)[0]
                        or "application/octet-stream")


def video_thumbnail(folder: Path, p, size: int, time: float | None) -> Path:
    """A JPEG of the video's frame at `time` (its first without one), cached in `folder`
    under its bytes' hash, size and time."""
    at = round(float(time or 0.0), 1)
    out = Path(folder) / f"{p.hash}-{size}-t{at:g}.jpg"
    if out.is_file():
        return out
    if not Path(p.path).is_file():
        raise HTTPException(410, f"video {p.id}'s file is gone; run `pamir index` again")
    try:
        frame = read_frame(p.path, at, short_side=size)
    except VideoError as e:
        raise HTTPException(422, str(e)) from None
    im = Image.fromarray(frame.rgb)
    im.thumbnail((size, size))
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=85)
    atomic_write_bytes(out, buf.getvalue())  # a reader never sees half a thumbnail
    return out


__all__ = ["router", "video_thumbnail"]
