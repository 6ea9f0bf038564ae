"""Decoding pictures robustly into RGB uint8 arrays.

Whatever the file holds (grey, palette, alpha, CMYK, 16-bit, EXIF-rotated JPEG), `load_rgb`
returns an (H, W, 3) uint8 array in display orientation, optionally resized so its shorter
side has a given length. Anything that cannot be decoded (missing, unreadable, zero-byte,
truncated, not a picture, a decompression bomb) raises `ImageError` with a one-line reason,
so that a batch can skip the picture, count it and go on.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from . import heif
from ..formats import HEIF_SUFFIXES, RAW_SUFFIXES  # noqa: F401 - their home, named here too

#: A RAW's embedded preview smaller than this (short side) is a thumbnail: demosaic instead.
MIN_PREVIEW_SIDE = 256

#: Pictures with more pixels than this are refused as decompression bombs (Pillow's limit;
#: Pillow itself only warns below twice that).
MAX_PIXELS: int = Image.MAX_IMAGE_PIXELS or 89_478_485

#: Alpha is flattened onto this background.
BACKGROUND = (255, 255, 255)


class ImageError(Exception):
    """A picture that cannot be used; str(e) is a one-line reason."""


_registered = False


def register_formats() -> None:
    """Teach Pillow HEIC/HEIF (pillow-heif), once per process: every Image.open of pamir
    (features, thumbnails, uploads, metadata) then reads them as it reads a JPEG. AVIF is
    Pillow's own (since 11.3; pillow-heif 1.x leaves it to Pillow)."""
    global _registered
    if not _registered:
        import pillow_heif  # noqa: PLC0415 - only when a picture is opened

        pillow_heif.register_heif_opener()
        _registered = True


def looks_raw(data: bytes) -> bool:
    """Whether the bytes may be a camera RAW: Fuji's and Olympus's own headers, or TIFF's
    (DNG, CR2, NEF, ARW are TIFF files; LibRaw refuses a plain TIFF at once, which then goes
    to Pillow)."""
    return data[:4] in (b"II*\x00", b"MM\x00*", b"IIRO", b"IIRS", b"MMOR") or \
        data.startswith(b"FUJIFILMCCD-RAW")


def raw_image(data: bytes) -> Image.Image | None:
    """A RAW file as a Pillow image: its embedded preview when it is big enough (a JPEG the
    camera made, fast), else LibRaw's demosaic at half size; None if LibRaw cannot read it."""
    import rawpy  # noqa: PLC0415 - start-up: LibRaw (RAW files only)

    try:
        with rawpy.imread(io.BytesIO(data)) as raw:
            try:
                thumb = raw.extract_thumb()
            except (rawpy.LibRawNoThumbnailError, rawpy.LibRawUnsupportedThumbnailError):
                thumb = None
            if thumb is not None and thumb.format == rawpy.ThumbFormat.JPEG:
                im = Image.open(io.BytesIO(thumb.data))
                if min(im.size) >= MIN_PREVIEW_SIDE:
                    return im
            elif thumb is not None and min(thumb.data.shape[:2]) >= MIN_PREVIEW_SIDE:
                return Image.fromarray(thumb.data)
            return Image.fromarray(raw.postprocess(use_camera_wb=True, half_size=True,
                                                   output_bps=8))
    except rawpy.LibRawFileUnsupportedError:
        return None
    except rawpy.LibRawError as e:
        raise ImageError(f"corrupt RAW file ({e})") from None


def open_image(data: bytes) -> Image.Image:
    """Pillow's lazy image of encoded bytes, any format pamir reads (RAW through rawpy)."""
    register_formats()
    if looks_raw(data):
        im = raw_image(data)
        if im is not None:
            return im
    return Image.open(io.BytesIO(data))


def read_bytes(path: str | Path) -> bytes:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ImageError("file not found") from None
    except IsADirectoryError:
        raise ImageError("is a folder, not a picture") from None
    except PermissionError:
        raise ImageError("permission denied") from None
    except OSError as e:
        raise ImageError(f"unreadable ({e.strerror or e})") from None
    if not data:
        raise ImageError("empty file (0 bytes)")
    return data


def content_hash(data: bytes) -> str:
    """The picture's identity in the feature cache: same bytes, same features."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def decode_rgb(data: bytes, short_side: int | None = None) -> np.ndarray:
    """(H, W, 3) uint8 RGB from encoded bytes, EXIF orientation applied.

    short_side: resize so that min(H, W) == short_side (None: keep the size).
    """
    rgb = decode_reduced(data, short_side)
    if short_side:
        rgb = resize_short_side(rgb, short_side)
    return rgb


def decode_reduced(data: bytes, short_side: int | None = None) -> np.ndarray:
    """(H, W, 3) uint8 RGB from encoded bytes, EXIF orientation applied, decoded no larger
    than needed for a shorter side of at least `short_side` where the format can reduce
    while it decodes (JPEG: libjpeg's 1/2, 1/4, 1/8 scales); not resized further. Every
    decode of pamir's goes through here (pamir.features.rasters counts them)."""
    try:
        with warnings.catch_warnings():
            # Between MAX_PIXELS and twice that Pillow only warns: make it an error too.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with open_image(data) as im:
                w, h = im.size
                if w * h > MAX_PIXELS:
                    raise ImageError(
                        f"decompression bomb: {w}x{h} pixels exceeds the limit of {MAX_PIXELS:,}"
                    )
                if w == 0 or h == 0:
                    raise ImageError(f"empty picture ({w}x{h})")
                if short_side and im.format == "HEIF":
                    # a phone's HEIC: its tiles decoded by FFmpeg, made at the size asked
                    # from the decoded planes (pamir.features.heif; None: pillow-heif's way)
                    rgb = _heif_reduced(data, w, h, short_side)
                    if rgb is not None:
                        return rgb
                if short_side and im.format == "JPEG":
                    # Let libjpeg decode at 1/2, 1/4 or 1/8 scale: big photos decode 10x faster.
                    # draft never decodes smaller than asked, so ask for no more than the
                    # size wanted: exactly half a photo is then decoded at 1/2, not whole.
                    scale = short_side / min(w, h)
                    im.draft("RGB", (max(1, int(w * scale + 1e-6)),
                                     max(1, int(h * scale + 1e-6))))
                im.load()
                im = ImageOps.exif_transpose(im)
                rgb = to_rgb(im)
    except ImageError:
        raise
    except UnidentifiedImageError:
        raise ImageError("not a picture (unrecognised format)") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise ImageError(f"decompression bomb: {e}") from None
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        # Truncated and corrupt files surface as OSError/SyntaxError/ValueError in Pillow.
        raise ImageError(f"corrupt or truncated ({e})") from None
    return rgb


def _heif_reduced(data: bytes, width: int, height: int, short_side: int) -> np.ndarray | None:
    """A HEIC decoded at the largest even reduction that keeps its shorter side at least
    short_side (the planes' chroma is at half resolution: an even factor averages it
    whole), by pamir.features.heif; None where it reduces by less than 2 or leaves the file
    to pillow-heif."""
    factor = min(width, height) // max(1, short_side)
    factor -= factor % 2
    return heif.decode_tiles(data, factor) if factor >= 2 else None


def redecoded_cheaply(data: bytes) -> bool:
    """Whether the bytes decode again at a reduced size for a fraction of their first decode:
    a JPEG (libjpeg's DCT scaling); other formats are decoded whole (pamir.features.rasters
    keeps their closer look from the one decode)."""
    return data[:3] == b"\xff\xd8\xff"


def displayed_size(data: bytes) -> tuple[int, int]:
    """(width, height) of the picture as shown, EXIF orientation applied, without decoding."""
    try:
        with open_image(data) as im:
            w, h = im.size
            # EXIF orientations 5-8 are rotations by 90 degrees: width and height swap.
            return (h, w) if im.getexif().get(0x0112, 1) in (5, 6, 7, 8) else (w, h)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise ImageError(f"not a readable picture ({e})") from None


def load_rgb(path: str | Path, short_side: int | None = None) -> np.ndarray:
    return decode_rgb(read_bytes(path), short_side)


def to_rgb(im: Image.Image) -> np.ndarray:
    """Any Pillow mode -> (H, W, 3) uint8 RGB."""
    mode = im.mode
    if mode == "RGB":
        return np.asarray(im)
    if mode in ("I", "I;16", "I;16B", "I;16L", "I;16N", "F"):
        return _grey_from_wide(np.asarray(im), mode)
    if mode == "P" and "transparency" in im.info:
        im, mode = im.convert("RGBA"), "RGBA"
    if mode in ("RGBA", "LA", "PA", "La", "RGBa"):
        rgba = im.convert("RGBA")
        canvas = Image.new("RGBA", rgba.size, BACKGROUND + (255,))
        return np.asarray(Image.alpha_composite(canvas, rgba).convert("RGB"))
    # L, 1, P, CMYK, YCbCr, LAB, HSV...: Pillow's converters
    return np.asarray(im.convert("RGB"))


def _grey_from_wide(a: np.ndarray, mode: str) -> np.ndarray:
    """16-bit, 32-bit integer and float pictures -> 8-bit grey, scaled not clipped."""
    a = a.astype(np.float64)
    if mode == "F":
        top = 1.0 if a.max(initial=0) <= 1.0 else 255.0
    elif mode.startswith("I;16"):
        top = 65535.0
    else:  # "I": 16-bit PNGs decode to it; scale by the range the values fit in
        top = 255.0 if a.max(initial=0) <= 255 else 65535.0
    g = np.clip(a * (255.0 / top) + 0.5, 0, 255).astype(np.uint8)
    return np.repeat(g[:, :, None], 3, axis=2)


def resize_short_side(rgb: np.ndarray, short_side: int) -> np.ndarray:
    h, w = rgb.shape[:2]
    if min(h, w) == short_side:
        return rgb
    scale = short_side / min(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    if h <= w:
        size = (size[0], short_side)
    else:
        size = (short_side, size[1])
    # Box/area filtering when shrinking avoids aliasing; bilinear when enlarging.
    resample = Image.Resampling.BOX if scale < 1 else Image.Resampling.BILINEAR
    return np.asarray(Image.fromarray(rgb).resize(size, resample))
