"""A picture's look, small enough to keep for every picture, and how alike two looks are: the
measure behind copies, near-copies and bursts (pamir.duplicates.groups groups pictures with it).

A look is the picture, as shown, squeezed to SIDE x SIDE RGB pixels (1.7 KB), with its size.
Two looks are compared by normalised cross-correlation of their colours (each channel's mean
taken off, so a brightness or contrast change does not count), over small crops of one
matched to the whole of the other: a copy "cropped a little" is found at the crop that best
fits it. Colour counts: on Corel 5k, grey alone called a grey plane on a blue sky a copy of
another on a white one. The stored looks are matched coarsely (COARSE); the pairs they find
alike are matched again from their files, finely (FINE), since at 24 pixels a crop's
resampling costs as much as another moment of one scene.

What the index held did not suffice (benchmarks/results/duplicates.md): the text-space rows
of a picture and of its copy can point to other words (cosine 0.03 at worst), and two
different pictures of one scene to the same (cosine 1.0); a 64-bit perceptual hash (DCT,
`imagehash.phash`) put copies up to 18 bits apart while two different pictures of one Corel
CD came as close as 10 bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
from PIL import Image

from ..facts.video import is_video

#: A look's side, in pixels.
SIDE = 24


@dataclass(frozen=True)
class Match:
    """How crops are matched: of a picture squeezed to `side` pixels, crops keeping each of
    `scales` of its sides' length at `positions` places per axis, compared at `compared`."""
    side: int
    compared: int
    scales: tuple[float, ...]
    positions: int


#: Stored looks, compared at once: on the benchmark's folder two copies of one picture
#: score 0.947 and up, and different pictures of one CD up to 0.946: too close to decide.
COARSE = Match(SIDE, 16, (1.0, 0.97, 0.95, 0.93, 0.9), 3)
#: The pairs COARSE finds alike, matched again from their files, finely: copies 0.969 and
#: up, different pictures of one CD 0.926 at most (benchmarks/results/duplicates.md).
FINE = Match(48, 32, tuple(np.round(np.arange(1.0, 0.885, -0.01), 2)), 5)
#: Two pictures whose shapes (log width / height) differ more than this are never alike: a
#: crop of "a little" keeps the shape, a portrait is not a copy of a landscape.
SHAPE_TOLERANCE = 0.1
#: Neighbours are searched on the looks averaged down to KEY_SIDE x KEY_SIDE (a divisor of
#: SIDE): 192 numbers, where crops and resizes hardly move a picture.
KEY_SIDE = 8
#: Pictures whose crops `Looks` keeps at once (126 KB each: 250 MB).
CACHED_CROPS = 2_000
_EXIF_IFD, _SHOT, _SUBSEC = 0x8769, 36867, 37521  # DateTimeOriginal, SubSecTimeOriginal
#: A version of the look and of the measure: a look read by another is read again.
VERSION = "rgb24-v1"


@dataclass
class Look:
    """A picture's look: pixels (SIDE, SIDE, 3) uint8, its size as shown, and when the camera
    shot it (seconds of its wall clock, EXIF DateTimeOriginal and SubSecTimeOriginal; None:
    not written. Not the catalogue's date taken, which falls back on the file's date: a
    copy made later is not another moment)."""
    pixels: np.ndarray
    width: int
    height: int
    shot: float | None = None

    @property
    def shape(self) -> float:
        return float(np.log(self.width / self.height))


#: The raster a look is squeezed from: its shorter side (as look_of decodes a file).
RASTER_SHORT_SIDE = 2 * SIDE
#: The longer side the reading stage hands the looks pass (pamir.index.stage): room for
#: RASTER_SHORT_SIDE on a panorama of 4:1.
RASTER_SIDE = 4 * RASTER_SHORT_SIDE


def look_of(path: str) -> Look:
    """The look of the picture at `path`; pamir.features.images.ImageError if it cannot be
    decoded (JPEG decoded at 1/8 scale where that is enough: a 12-MP photo in ~10 ms)."""
    from ..features.images import decode_rgb, read_bytes  # noqa: PLC0415  (numpy-heavy)

    data = read_bytes(path)
    rgb = decode_rgb(data, short_side=RASTER_SHORT_SIDE)
    width, height, shot = _size_and_shot(data, rgb)
    return _squeezed(rgb, width, height, shot)


def _squeezed(rgb: np.ndarray, width: int, height: int, shot: float | None) -> Look:
    small = Image.fromarray(rgb).resize((SIDE, SIDE), Image.BOX)
    return Look(np.asarray(small, np.uint8).copy(), width, height, shot)


def look_of_raster(path: str, rgb: np.ndarray, size: tuple[int, int]) -> Look:
    """The look of a picture the reading stage decoded (pamir.index.stage): its raster
    brought to look_of's RASTER_SHORT_SIDE first, so that a look is the same whichever
    path made it, its shown size, and the camera's time from the file's header (read, not
    decoded)."""
    # start-up: Pillow's plugins (15 ms)
    from ..features.images import resize_short_side  # noqa: PLC0415

    if min(rgb.shape[:2]) > RASTER_SHORT_SIDE:
        rgb = resize_short_side(rgb, RASTER_SHORT_SIDE)
    try:
        with Image.open(path) as im:
            exif = im.getexif().get_ifd(_EXIF_IFD)
        shot = _seconds(exif.get(_SHOT), exif.get(_SUBSEC))
    except Exception:  # noqa: BLE001 - a picture with broken EXIF has no time, not no look
        shot = None
    return _squeezed(rgb, *size, shot)


def read_look_rasters(pictures) -> list[tuple[Look | None, str | None]]:
    """read_looks of (path, raster, shown (width, height)) triples from the reading stage."""
    return [(look_of_raster(path, rgb, size), None) for path, rgb, size in pictures]


def _size_and_shot(data: bytes, rgb: np.ndarray) -> tuple[int, int, float | None]:
    # start-up: Pillow's plugins (15 ms)
    from ..features.images import displayed_size, open_image  # noqa: PLC0415

    try:
        width, height = displayed_size(data)
    except Exception:  # noqa: BLE001 - decoded already: its decoded shape is enough
        width, height = rgb.shape[1], rgb.shape[0]
    try:
        with open_image(data) as im:
            exif = im.getexif().get_ifd(_EXIF_IFD)
        return width, height, _seconds(exif.get(_SHOT), exif.get(_SUBSEC))
    except Exception:  # noqa: BLE001 - a picture with broken EXIF has no time, not no look
        return width, height, None


def _seconds(text, subsec) -> float | None:
    """Seconds of 'YYYY:MM:DD HH:MM:SS' (+ its fraction '123') as a wall clock, or None."""
    try:
        when = datetime.strptime(str(text).strip()[:19], "%Y:%m:%d %H:%M:%S")
    except ValueError:
        return None
    try:
        extra = float(f"0.{str(subsec).strip()}") if subsec is not None else 0.0
    except ValueError:
        extra = 0.0
    return when.replace(tzinfo=timezone.utc).timestamp() + extra


def read_looks(paths: Sequence[str]) -> list[tuple[Look | None, str | None]]:
    """A pass's reader (pamir.index.passes): for each path its Look, or None and why. A
    video has none ([]: read, nothing found): copies are found among pictures."""
    # start-up: Pillow's plugins (15 ms)
    from ..features.images import ImageError  # noqa: PLC0415

    out = []
    for path in paths:
        if is_video(path):
            out.append(([], None))
            continue
        try:
            out.append((look_of(path), None))
        except ImageError as e:
            out.append((None, f"{path}: {e}"))
    return out


def _normalised(x: np.ndarray) -> np.ndarray:
    """(m, 3 * k) float32 of m crops (m, 3, k), channel-major: each channel less its mean,
    then unit length (in place)."""
    x -= x.mean(2, keepdims=True)
    x = x.reshape(len(x), -1)
    x /= np.linalg.norm(x, axis=1, keepdims=True) + 1e-6
    return x


def crops(pixels: np.ndarray, match: Match = COARSE) -> np.ndarray:
    """(crops, D): the whole picture (match.side square) first, then its crops, each resized
    to match.compared and normalised."""
    return crops_of_many(pixels[None], match)[0]


def crops_of_many(pixels: np.ndarray, match: Match = COARSE) -> np.ndarray:
    """(n, crops, D) of n pictures (n, side, side, 3): `crops` of each. A crop resized is
    linear in the pixels: one matrix per axis and crop position (`_resampling`) makes all of
    them in two products, instead of a resize per crop."""
    n, c = len(pixels), match.compared
    # channel-major (n, 1, 3, side, side): a channel's pixels in a row for _normalised
    x = np.ascontiguousarray(np.asarray(pixels, np.float32).transpose(0, 3, 1, 2))[:, None]
    out = []
    for a in _resampling(match):  # (P, c, side): the positions along an axis at one scale
        p = len(a)
        rows = a[None, :, None] @ x  # rows resampled: (n, P, 3, c, side)
        both = rows[:, :, None] @ a.transpose(0, 2, 1)[None, None, :, None]  # (n, P, Q, 3, c, c)
        out.append(both.reshape(n, p * p, 3, c * c))
    allc = np.concatenate(out, axis=1)
    return _normalised(allc.reshape(-1, 3, c * c)).reshape(n, allc.shape[1], -1)


_RESAMPLING: dict[Match, list[np.ndarray]] = {}


def _resampling(match: Match) -> list[np.ndarray]:
    """Per scale, (positions, compared, side) float32: row o of matrix p resamples a window
    of scale x side pixels at the p-th start to output pixel o, with a triangle filter as
    wide as the reduction (Pillow's BILINEAR)."""
    if match not in _RESAMPLING:
        mats = []
        for s in match.scales:
            w = match.side * s
            starts = np.linspace(0, match.side - w, match.positions if s < 1 else 1)
            mats.append(np.stack([_window(x0, w, match.side, match.compared) for x0 in starts]))
        _RESAMPLING[match] = mats
    return _RESAMPLING[match]


def _window(start: float, width: float, side: int, out: int) -> np.ndarray:
    step = width / out
    support = max(1.0, step)
    centres = start + (np.arange(out) + 0.5) * step  # in pixel edges
    pixel = np.arange(side) + 0.5
    w = np.maximum(0.0, 1.0 - np.abs(pixel[None] - centres[:, None]) / support)
    return (w / w.sum(1, keepdims=True)).astype(np.float32)


class Looks:
    """Many looks, ready to compare. `keys` (n, KEY_SIDE^2 x 3) float32, unit length: the whole
    look, small, on which neighbours are searched; `alike` matches crops of candidate pairs,
    made as they are needed (a picture's crops take 126 KB: never all of them at once)."""

    def __init__(self, pixels: np.ndarray, sizes: np.ndarray):
        self.pixels = np.asarray(pixels, np.uint8).reshape(-1, SIDE, SIDE, 3)
        self.n = len(self.pixels)
        self.sizes = np.asarray(sizes, np.int64).reshape(-1, 2)  # (width, height) as shown
        self.shapes = np.log(np.maximum(self.sizes[:, 0], 1) / np.maximum(self.sizes[:, 1], 1))
        self._cache: dict[int, np.ndarray] = {}

    def prepare(self, pictures) -> None:
        """Make the crops of these pictures (indices) at once, before `alike` needs them."""
        todo = sorted({int(i) for i in pictures} - self._cache.keys())[:CACHED_CROPS]
        if len(self._cache) + len(todo) > CACHED_CROPS:
            self._cache.clear()
        for start in range(0, len(todo), 256):
            part = todo[start:start + 256]
            self._cache.update(zip(part, crops_of_many(self.pixels[part])))

    def keys(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """(stop - start, KEY_SIDE^2 * 3) float32 unit vectors: the whole looks at KEY_SIDE."""
        stop = self.n if stop is None else stop
        out = np.empty((max(0, stop - start), KEY_SIDE * KEY_SIDE * 3), np.float32)
        for a in range(start, stop, 65536):  # bounded float copies of the pixels
            b = min(stop, a + 65536)
            out[a - start:b - start] = keys_of(self.pixels[a:b])
        return out

    def _crops_of(self, i: int) -> np.ndarray:
        c = self._cache.get(i)
        if c is None:
            if len(self._cache) > CACHED_CROPS:
                self._cache.clear()
            c = self._cache[i] = crops(self.pixels[i])
        return c

    def alike(self, i, j) -> np.ndarray:
        """How alike pictures i[k] and j[k] look, in [-1, 1]: the best correlation of a crop
        of either with the whole of the other; -1 for shapes too different."""
        i, j = np.asarray(i, np.int64).ravel(), np.asarray(j, np.int64).ravel()
        out = np.full(len(i), -1.0, np.float32)
        same_shape = np.flatnonzero(np.abs(self.shapes[i] - self.shapes[j]) <= SHAPE_TOLERANCE)
        for start in range(0, len(same_shape), 512):
            ks = same_shape[start:start + 512]
            self.prepare(np.concatenate([i[ks], j[ks]]))  # made together: one product
            ca = np.stack([self._crops_of(a) for a in i[ks].tolist()])
            cb = np.stack([self._crops_of(b) for b in j[ks].tolist()])
            out[ks] = np.maximum(np.einsum("kcd,kd->kc", ca, cb[:, 0]).max(1),
                                 np.einsum("kcd,kd->kc", cb, ca[:, 0]).max(1))
        return out


def best_match(ca: np.ndarray, cb: np.ndarray) -> float:
    """The best correlation of a crop of either picture with the whole of the other."""
    return max(float((ca @ cb[0]).max()), float((cb @ ca[0]).max()))


class FineLooks:
    """Pictures matched finely (FINE) from their files, each file decoded once."""

    def __init__(self):
        self._cache: dict[str, np.ndarray | None] = {}

    def _crops_of(self, path: str) -> np.ndarray | None:
        if path not in self._cache:
            if len(self._cache) > CACHED_CROPS // 8:
                self._cache.clear()
            self._cache[path] = _fine_crops(path)
        return self._cache[path]

    def alike(self, a: str, b: str) -> float | None:
        """How alike the pictures at paths a and b look, finely; None if one cannot be read
        (moved, on a drive unplugged)."""
        ca, cb = self._crops_of(a), self._crops_of(b)
        return None if ca is None or cb is None else best_match(ca, cb)


def _fine_crops(path: str) -> np.ndarray | None:
    # start-up: Pillow's plugins (15 ms)
    from ..features.images import ImageError, load_rgb  # noqa: PLC0415

    try:
        rgb = load_rgb(path, short_side=2 * FINE.side)
    except ImageError:
        return None
    side = (FINE.side, FINE.side)
    return crops(np.asarray(Image.fromarray(rgb).resize(side, Image.BOX)), FINE)


def keys_of(pixels: np.ndarray) -> np.ndarray:
    """(n, KEY_SIDE^2 * 3) float32: looks (n, SIDE, SIDE, 3) averaged down to KEY_SIDE, each
    channel less its mean, unit length: what neighbours are searched on."""
    n = len(pixels)
    f = SIDE // KEY_SIDE
    x = pixels.reshape(n, KEY_SIDE, f, KEY_SIDE, f, 3).astype(np.float32).mean((2, 4))
    x = x.reshape(n, -1, 3)
    x -= x.mean(1, keepdims=True)
    x = x.reshape(n, -1)
    return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-6)


__all__ = ["COARSE", "FINE", "FineLooks", "Look", "Looks", "Match", "SIDE", "VERSION", "best_match", "crops", "keys_of", "look_of", "read_looks"]
