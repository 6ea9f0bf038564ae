"""The JPEG thumbnails the page shows, one home for the indexer and the server.

`pamir index` makes them from the reading stage's raster while it indexes (no decode of
their own), so that the first page of any search shows at once; the server makes a missing
one (an index built before, a size asked for that the indexer does not make) from the file
when it is asked for. Both write `<folder>/<content hash>-<size>.jpg` atomically: a reader
never sees half a thumbnail, and a picture's bytes name its thumbnails wherever it moves.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from ..storage import atomic_write
from .images import open_image

#: The sizes the server makes (the longer side at most this), a size asked for rounded up.
SIZES = (128, 256, 512)
#: The sizes the indexer makes: the page's grid (256) and the picture's detail (512); the
#: voters' 128 is made on request (rare).
INDEXED_SIZES = (256, 512)
#: JPEG quality of a thumbnail (a 256-pixel one is about 15 KB).
QUALITY = 85


def size_for(asked: int) -> int:
    """The thumbnail size that serves a request for `asked` pixels."""
    return min((s for s in SIZES if s >= asked), default=SIZES[-1])


def thumbnail_path(folder: str | Path, digest: str, size: int) -> Path:
    return Path(folder) / f"{digest}-{size}.jpg"


def _jpeg(im: Image.Image, size: int) -> bytes:
    im.thumbnail((size, size))  # on the file's lazy image: JPEG's DCT scaling
    buf = io.BytesIO()
    im.convert("RGB").save(buf, "JPEG", quality=QUALITY)
    return buf.getvalue()


def write_from_raster(folder: str | Path, digest: str, rgb: np.ndarray,
                      sizes: Sequence[int] = INDEXED_SIZES) -> None:
    """The thumbnails of a picture from its decoded raster (display orientation), each
    written unless it is there already."""
    im = None
    for size in sorted(sizes, reverse=True):  # each from the larger one: cheaper
        out = thumbnail_path(folder, digest, size)
        if out.is_file():
            continue
        if im is None:
            im = Image.fromarray(rgb)
        im.thumbnail((size, size))
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=QUALITY)
        _write(out, buf.getvalue())


def write_from_file(folder: str | Path, digest: str, path: str | Path, size: int) -> Path:
    """The thumbnail of the picture at `path` (any format pamir reads), made and written if
    it is not there yet. Raises what opening the file raises (FileNotFoundError, ImageError,
    Pillow's errors)."""
    out = thumbnail_path(folder, digest, size)
    if out.is_file():
        return out
    with open_image(Path(path).read_bytes()) as im:  # HEIC, AVIF, RAW too
        data = _jpeg(ImageOps.exif_transpose(im), size)
    _write(out, data)
    return out


def _write(path: Path, data: bytes) -> None:
    """Atomically, not fsynced: a thumbnail is a cache, which a crash may lose but never
    leaves half-written."""
    atomic_write(path, lambda f: f.write(data))


__all__ = ["INDEXED_SIZES", "SIZES", "size_for", "thumbnail_path", "write_from_file",
           "write_from_raster"]
