"""The reading stage's pictures: each file decoded once, at the size that the passes which
run on every picture need, and every pass's input made from that one raster; more pixels
only for the pictures where a pass found something to look at closer.

    needs = [Need("look", short=224), Need("text", long=320, slack=SLACK),
             Need("faces", long=1024, slack=SLACK)]
    item = read_item(path, needs, detail=2048)     # one decode (JPEG: libjpeg's DCT scaling)
    with sharing([item]):                          # the CNN views and the visterms take
        Z, ok, reasons = system.transform_paths([path])   # their input from it, by content hash
    text_input = item.reduced(320)                 # longest side at most 320 pixels
    closer = item.detail(1600)                     # the text pass found lines: more pixels

An item is one or more frames (time, raster): a picture is one frame at time None; a video
(pamir.facts.video) is a frame every few seconds, each fed to the same passes.

Each pass declares the raster it reads every picture at (one constant per pass: the CNN's
short side, the text detector's DETECT_SIDE, the face detector's DETECT_SIDE, the
thumbnails' largest size, the copies' look) and, apart, the raster of its closer look (the
text recognition's READ_SIDE, the small faces' ZOOM_SIDE). The item is decoded at the
largest of the first: a JPEG at the smallest of libjpeg's 1/8, 1/4, 1/2 and 1 scales that
covers them (within SLACK for a pass that scans a scaled picture anyway: a 4032-px photo's
1/4, 1008 px, serves a detector of 1,024), other formats (HEIC, AVIF, PNG, RAW) at their
full size, then reduced by a whole factor (Pillow's reduce). The closer look (`Item.detail`)
is made only when a pass asks for it, for the pictures where it found lines or face cues: a
JPEG is decoded again at the scale it needs (its bytes read again and checked against the
item's hash), a format decoded whole keeps that reduction from its one decode (it cannot be
decoded smaller). Why not decode at the closer look's size once for all: on a 12-MP JPEG the
1/2 decode costs 1.3x the 1/4 one, and each pass's reduction of its 4x larger raster about as
much again (results/profile_passes.md), for the few pictures that have text or faces.

Why share by content hash rather than pass rasters down: a representation reads its input by
path, hashes the bytes for its feature cache anyway, and may run on a Dask worker that holds
no raster; the registry is a look-up that falls back to its own decode, so nothing above the
representation changes. A picture that needs no reduction (Corel's 384x256) is decoded at its
full size here, so the CNN's input is what `prepare_picture` makes of the file, bit for bit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from . import images
from .images import ImageError, content_hash, displayed_size, read_bytes, resize_short_side


#: libheif's threads for one HEIC/AVIF decode while the reading stage decodes one picture
#: per core: on this 2-core machine, 4 12-MP HEICs two at a time took 1.45 s a photo with
#: 1 thread each, 1.56 s with 2 and 1.92 s with 4 (pillow-heif's default), one at a time
#: 1.76 / 1.82 / 2.13 s (while other work loaded the machine: relative figures only).
HEIF_THREADS = 1


def heif_threads(n: int) -> int:
    """Set libheif's decoding threads (pillow-heif's process-wide option); the old value."""
    import pillow_heif  # noqa: PLC0415 - start-up: libheif (HEIC only)

    old = pillow_heif.options.DECODE_THREADS
    pillow_heif.options.DECODE_THREADS = int(n)
    return old


#: A need with slack is met by a raster this much short of it: a pass that scans a scaled
#: picture (the face detector at 1,024 px, the text detector at 320) reads a 12-MP photo's
#: 1/4 JPEG decode (1,008 px) rather than its 1/2 one, and its small faces' closer look (2,048)
#: the 1/2 decode (2,016) rather than the whole photo.
SLACK = 0.02


@dataclass(frozen=True)
class Need:
    """What one pass needs of a picture: a shorter side of at least `short` pixels, or a
    longer side of at least `long` (None for both: the picture at its full size), less
    `slack` (a share: SLACK for a pass that scans the picture at about that size)."""

    name: str
    short: int | None = None
    long: int | None = None
    slack: float = 0.0

    def scale(self, width: int, height: int) -> float:
        """The fraction of the full picture this need asks for (at most 1)."""
        if self.short is not None:
            wanted = self.short / max(1, min(width, height))
        elif self.long is not None:
            wanted = self.long / max(1, width, height)
        else:
            return 1.0
        return min(1.0, wanted * (1.0 - self.slack))


@dataclass
class Frame:
    """One raster of an item: time in seconds (None for a still picture) and (H, W, 3) uint8
    RGB, in display orientation."""

    time: float | None
    rgb: np.ndarray


class Detail:
    """A picture's closer look, made on first use (`Item.detail`): from the raster read
    where that has the pixels asked (`kept`: the raster every pass reads, or a larger one
    a format decoded whole, or a picture read ahead, kept), else the file decoded again at
    the scale asked, its bytes checked against the content hash the item was read as (a
    file changed since gives None: the pass reads it again once the index has its new
    bytes). The largest raster made is kept for the next pass that asks (text and faces
    share it). asked(): called once, the first time a pass asks for more pixels than the
    raster every pass reads (`read_long` on its longer side): the reading stage counts how
    many pictures need their closer look (pamir.index.stage.AHEAD_SHARE)."""

    def __init__(self, path: str, digest: str | None, size: tuple[int, int],
                 kept: np.ndarray | None = None, read_long: int = 0,
                 asked: Callable[[], None] | None = None):
        self.path, self.digest, self.size = path, digest, size
        self._rgb = kept
        self.read_long = read_long
        self._asked = asked
        self._lock = threading.Lock()

    @property
    def pixels(self) -> int:
        """The pixels it holds now (a kept or made closer look)."""
        rgb = self._rgb
        return 0 if rgb is None else rgb.shape[0] * rgb.shape[1]

    def __call__(self, long_side: int) -> np.ndarray | None:
        target = min(long_side, max(self.size))
        with self._lock:
            if self._asked is not None and target * (1 - SLACK) > self.read_long:
                self._asked()  # more than every pass reads: counted once a picture
                self._asked = None
            rgb = self._rgb
            if rgb is None or max(rgb.shape[:2]) < target * (1 - SLACK):
                rgb = self._decode(long_side)
                if rgb is None:
                    return None
                self._rgb = rgb
        return rgb if max(rgb.shape[:2]) <= long_side else bounded(rgb, long_side)

    def _decode(self, long_side: int) -> np.ndarray | None:
        try:
            data = read_bytes(self.path)
            if content_hash(data) != self.digest:
                return None  # changed since it was read
            width, height = self.size
            short = decode_short_side(width, height, [Need("detail", long=long_side,
                                                           slack=SLACK)])
            return images.decode_reduced(data, short)
        except Exception:  # noqa: BLE001 - gone or spoilt since: the pass reads what it has
            return None


@dataclass
class Item:
    """A file as the reading stage read it: its path, content hash, displayed (width,
    height) at full size, and frames; `reason` (frames empty) when it could not be read;
    `closer`: its closer look (`detail`), None where the raster is the picture at full
    size."""

    path: str
    digest: str | None
    size: tuple[int, int] = (0, 0)
    frames: list[Frame] = field(default_factory=list)
    reason: str | None = None
    closer: Detail | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None and bool(self.frames)

    @property
    def rgb(self) -> np.ndarray:
        """The first frame's raster (a picture's only one)."""
        return self.frames[0].rgb

    def reduced(self, long_side: int | None, frame: int = 0) -> np.ndarray:
        """A frame with its longer side at most long_side (area resampling; None: as read)."""
        rgb = self.frames[frame].rgb
        if long_side is None or max(rgb.shape[:2]) <= long_side:
            return rgb
        return bounded(rgb, long_side)

    def detail(self, long_side: int) -> np.ndarray | None:
        """The picture with its longer side at most long_side, at least that where the file
        has the pixels (less SLACK): the raster read where it has them, else its closer
        look, made now (`Detail`); None where the file changed since it was read, or where
        an item without frames (`without_frames`: what a pass holds beside its own raster,
        which is then the picture as read) has no closer look."""
        if not self.frames:
            return self.closer(long_side) if self.closer is not None else None
        if self.closer is None or max(self.rgb.shape[:2]) >= long_side * (1 - SLACK):
            return self.reduced(long_side)
        return self.closer(long_side)

    def without_frames(self) -> Item:
        """What a pass keeps of the item beside its own raster: no frames, the closer look
        shared."""
        return Item(self.path, self.digest, self.size, closer=self.closer)

    def for_pass(self, side: int | None, detail: int | None = None) -> tuple[Item, np.ndarray]:
        """(what a pass keeps of the item, its raster with the longer side at most `side`):
        a pass that looks closer (`detail` pixels) at a picture read larger than its raster
        but at less than that keeps the raster read as its closer look (a 1,024-px picture's
        text, detected at 320, is read on the 1,024)."""
        rgb = self.reduced(side)
        kept = self.without_frames()
        if (detail is not None and kept.closer is None and self.frames
                and max(self.rgb.shape[:2]) > max(rgb.shape[:2])):
            kept.closer = Detail(self.path, self.digest, self.size, self.reduced(detail),
                                 max(rgb.shape[:2]))
        return kept, rgb


def bounded(rgb: np.ndarray, side: int) -> np.ndarray:
    """The raster with its longer side at most `side` (box filter: no aliasing)."""
    h, w = rgb.shape[:2]
    scale = side / max(h, w)
    if scale >= 1:
        return rgb
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return np.asarray(Image.fromarray(rgb).resize(size, Image.Resampling.BOX))


def decode_short_side(width: int, height: int, needs: Iterable[Need]) -> int | None:
    """The shorter side to decode a width x height picture at so that every need is met
    (None: its full size)."""
    scale = max((n.scale(width, height) for n in needs), default=1.0)
    if scale >= 1.0:
        return None
    return max(1, int(np.ceil(min(width, height) * scale)))


def read_item(path: str | Path, needs: Sequence[Need], detail: int | None = None, *,
              ahead: bool = False, asked: Callable[[], None] | None = None) -> Item:
    """The file at `path` read once (see the module's doc): decoded for `needs`, its closer
    look at `detail` pixels (the longer side; None: no pass looks closer) made on demand, or
    with `ahead` made now (a JPEG decoded at the closer look's scale and reduced for the
    needs: cheaper than a second decode where most pictures ask for it; a format decoded
    whole always is); asked: Detail's. Never raises for a bad file: the item then has its
    reason."""
    path = str(path)
    try:
        data = read_bytes(path)
    except ImageError as e:
        return Item(path, None, reason=str(e))
    digest = content_hash(data)
    try:
        try:
            width, height = displayed_size(data)  # the header only
        except ImageError:
            width = height = 0  # the decoder below gives its reason
        decoded, whole = needs, ahead or not images.redecoded_cheaply(data)
        if detail is not None and whole:
            # a format decoded whole (HEIC), or read ahead: its closer look from this decode
            decoded = [*needs, Need("detail", long=detail, slack=SLACK)]
        short = decode_short_side(width, height, decoded) if width and height else None
        rgb = images.decode_reduced(data, short)
    except ImageError as e:
        return Item(path, digest, reason=str(e))
    except Exception as e:  # noqa: BLE001 - a bug or an exhausted resource: skip the file
        return Item(path, digest, reason=f"{type(e).__name__}: {e}")
    if not (width and height):
        height, width = rgb.shape[:2]
    kept = None
    if whole:  # else a JPEG decoded at the scale asked (libjpeg's DCT scaling)
        rgb, kept = _whole_reduced(rgb, (width, height), needs, detail)
    closer = None
    if detail is not None and max(rgb.shape[:2]) < min(detail, max(width, height)) * (1 - SLACK):
        closer = Detail(path, digest, (width, height), rgb if kept is None else kept,
                        max(rgb.shape[:2]), asked)
    return Item(path, digest, (width, height), [Frame(None, rgb)], closer=closer)


def _whole_reduced(rgb: np.ndarray, size: tuple[int, int], needs: Sequence[Need],
                   detail: int | None) -> tuple[np.ndarray, np.ndarray | None]:
    """A raster decoded larger than the needs ask (a format decoded whole: PNG; a HEIC at its
    closer look's size) reduced by the largest whole factor that still meets them (Pillow's
    reduce: a box average, as libjpeg's DCT scaling), and the closer look at `detail` pixels
    kept from it (None where it is not larger than the raster)."""
    factor = _factor(rgb, size, needs)
    if factor < 2:
        return rgb, None
    kept = None
    if detail is not None:
        k = _factor(rgb, size, [Need("detail", long=detail, slack=SLACK)])
        kept = rgb if k < 2 else _reduce(rgb, k)
    return _reduce(rgb, factor), kept


def _factor(rgb: np.ndarray, size: tuple[int, int], needs: Sequence[Need]) -> int:
    """The largest whole factor the raster may be reduced by and still meet the needs."""
    short = decode_short_side(size[0], size[1], needs)
    if short is None:
        return 1
    return max(1, min(rgb.shape[:2]) // short)


def _reduce(rgb: np.ndarray, factor: int) -> np.ndarray:
    return np.asarray(Image.fromarray(rgb).reduce(factor))


def look_needs(representation) -> list[Need]:
    """What a system's representation needs of a picture: the largest short side of its
    views (the CNN's short_side, the visterms' short_side; a view at native size, or one
    that does not say, needs the full picture)."""
    sides = []
    for part in getattr(representation, "parts", [representation]):
        side = getattr(getattr(part, "settings", None), "short_side", None)
        if side is None:
            return [Need("look")]
        sides.append(int(side))
    return [Need("look", short=max(sides))] if sides else [Need("look")]


# --------------------------------------------------------------- sharing with the views
_shared: dict[str, Item] = {}
_by_path: dict[str, Item] = {}
_lock = threading.Lock()


@contextmanager
def sharing(items: Iterable[Item]):
    """While inside, `shared_rgb` gives the items' rasters to whoever reads their bytes (by
    content hash): the representations' decoders look here first."""
    mine = {it.digest: it for it in items if it.digest}
    with _lock:
        _shared.update(mine)
        _by_path.update({it.path: it for it in mine.values()})
    try:
        yield
    finally:
        with _lock:
            for digest, it in mine.items():
                if _shared.get(digest) is it:
                    del _shared[digest]
                if _by_path.get(it.path) is it:
                    del _by_path[it.path]


def shared_item(digest: str | None) -> Item | None:
    """The item the reading stage shares for these bytes, if any."""
    if not digest or not _shared:
        return None
    with _lock:
        return _shared.get(digest)


def shared_path(path) -> Item | None:
    """The item the reading stage shares for the file at `path` (read moments ago), if any:
    its content hash then need not be computed again."""
    if not _shared:
        return None
    with _lock:
        return _by_path.get(str(path))


def rgb_for(data: bytes, digest: str | None, short_side: int | None) -> np.ndarray:
    """decode_rgb(data, short_side), from the reading stage's raster of the same bytes when
    it holds one large enough (an item it could not read: ImageError with its reason)."""
    item = shared_item(digest)
    if item is not None:
        if not item.ok:
            raise ImageError(item.reason or "could not be read")
        rgb, full = item.rgb, item_full_size(item)
        if short_side is None and full:
            return rgb
        if short_side is not None and (full or min(rgb.shape[:2]) >= short_side):
            return resize_short_side(rgb, short_side)
    return images.decode_rgb(data, short_side)


def item_full_size(item: Item) -> bool:
    """Whether the item's raster is the picture at its full size (nothing reduced)."""
    h, w = item.rgb.shape[:2]
    return (w, h) == tuple(item.size)


__all__ = ["HEIF_THREADS", "SLACK", "Detail", "Frame", "Item", "Need", "bounded",
           "decode_short_side", "heif_threads", "look_needs", "read_item", "rgb_for",
           "shared_item", "shared_path", "sharing"]
