"""A second look for faces too small for the detector's scaled picture.

dlib's HOG detector scans an 80-pixel window: on a 12-megapixel photo scaled to DETECT_SIDE
(1024) it finds faces of about 250 pixels and more at the photo's own resolution, while most
faces of a group photo are 30-150 pixels. Scanning the whole photo enlarged until a 20-pixel
face fills the window would cost 50-200 times as much; instead:

1. cues: skin-coloured blobs (YCrCb, Chai and Ngan's ranges) of a small face's size on the
   scaled picture, alone in their surroundings (a face between hair and background, not a
   patch of sand or wood) and with darker eyes and brows, best first;
2. looks: each cue's neighbourhood cut out of a larger picture (the photo with its longer
   side at most ZOOM_SIDE), enlarged until the blob is LOOK_SIDE pixels, and given to the
   same HOG detector; what it finds there is a face.

The looks' cost is bounded by pixels: at most LOOK_BUDGET times the scaled picture's
pixels on a picture where no look finds a face (most photos without faces pay that share
of their detection again); each face a look finds buys FOUND_LOOKS more (a group photo is
looked at until its faces run out). And until a face is found, only cues scoring FIRST_SCORE
or more are looked at: most photos without faces look no closer at all, and the closer
raster the looks are cut from is made only for a picture that has such a cue (pamir.features.
rasters.Item.detail). benchmarks/results/small_faces.md measures it.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image

#: The longer side, in pixels, of the picture the looks are cut from (a 12-megapixel photo
#: decoded at half scale by libjpeg, 2016 x 1512): a 20-pixel face of the photo is 10 pixels
#: there, a 30-pixel one 15. On the benchmark's group photos, looks cut from the
#: full-resolution photo found 20-pixel faces a little more often (small_faces.md); the
#: full decode costs twice the half one.
ZOOM_SIDE = 2048
#: The smallest face looked for, in the photo's own pixels.
MIN_FACE = 20
#: Blobs larger than this on the detector's scaled picture are left to the detector itself:
#: a face's skin (forehead, ears, neck) is 1.5-2 times HOG's tight face box, and HOG finds
#: faces of about 64-80 pixels and more.
MAX_BLOB = 160
#: The cue's blob is scaled to this many pixels (its longer side) for a look: HOG's window
#: is 80, and a face's box is 0.5-0.8 of its blob; the look's pyramid finds faces from 80
#: pixels up to the cut-out's side.
LOOK_SIDE = 170
#: The cut-out around a blob, as a multiple of the blob's longer side (the face lies within
#: its skin).
LOOK_MARGIN = 1.3
#: Pixels looked at on a picture where no look has found a face, as a share of the scaled
#: picture's pixels: the looks then cost about 0.4 of the detection itself, and the whole
#: faces pass on a 12-megapixel photo without faces (decode, detect, cues, looks) stays
#: within 1.5x of its cost without looks (1.47x; 0.5 measured 1.50x; small_faces.md).
LOOK_BUDGET = 0.4
#: Each face a look finds allows this many more looks (a group photo's faces come together).
FOUND_LOOKS = 4
#: On a picture where no face is found yet (by the detector or a look), only cues scoring at
#: least this are looked at (the best first: the others wait for a face to be found): most
#: photos without faces then make no look, and no closer raster for one. Chosen on 24 group
#: photos and 80 camera photos without faces (seeds apart from bench_small_faces.py's): the
#: looks that found a face had cue scores from 0.23 (5th percentile) to a median of 0.42; the
#: faceless photos' cues a median of 0.24, 90th percentile 0.41. At 0.35 the faces of 30 px
#: and more found stayed the same, the faceless photos looked closer at 0.36 of them instead
#: of 0.85 (0.70 looks a photo instead of 2.81); 0.4 lost 20-px faces (10 of 36 found
#: against 14). results/small_faces.md measures it on the benchmark's photos.
FIRST_SCORE = 0.35
#: A blob whose surroundings (a ring as wide as half the blob) are more than this share
#: skin-coloured is part of a larger skin-coloured surface, not a face.
MAX_RING_SKIN = 0.5
#: A blob filling less than this share of its box is a scatter of texture.
MIN_FILL = 0.3
#: A blob whose eye band's darkest pixel (`darkness`) is less than this share darker than
#: its median has no eyes or brows. On the benchmark's group photos and photos without faces
#: (benchmarks/bench_small_faces.py: 84 faces' blobs, 944 other skin-coloured blobs), 0.2
#: kept 0.99 of the faces and 0.24 of the others (0.3: 0.92 and 0.13); a patch of sand or
#: wood is even.
MIN_DARK = 0.2
#: The openings (square kernels, pixels of the scaled picture) that cut a face's skin from
#: a skin-coloured backdrop it touches: a 3-pixel one keeps the smallest faces' blobs, a
#: 9-pixel one cuts a large face's thicker bridges.
OPENINGS = (3, 9)
#: A blob's height over its width: a face (0.8-1.5), a face and neck (up to 3).
ASPECT = (0.6, 3.0)


@dataclass(frozen=True)
class Cue:
    """A place where a small face may be: box (x0, y0, x1, y1) in the scaled picture's
    pixels, and how face-like the blob is (higher first)."""

    box: tuple[int, int, int, int]
    score: float


def skin(rgb: np.ndarray) -> np.ndarray:
    """The skin-coloured pixels (uint8, 1 or 0) of an (H, W, 3) uint8 RGB picture: Cr in
    [133, 173], Cb in [77, 127] (Chai and Ngan, 1999), a range that holds light and dark
    skins alike under daylight; coloured light (a sunset, stage lights) moves faces out."""
    ycrcb = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2YCrCb)
    return cv2.inRange(ycrcb, (0, 133, 77), (255, 173, 127)) // 255


def cues(rgb: np.ndarray, smallest: float, largest: float = MAX_BLOB,
         skip=()) -> list[Cue]:
    """The skin-coloured blobs of `rgb` whose longer side is between smallest and largest
    pixels, face-shaped (ASPECT, MIN_FILL), alone (MAX_RING_SKIN) and with eyes (MIN_DARK),
    best first; the skin of the faces in `skip` (boxes in pixels: faces already found) left
    out."""
    mask = skin(rgb)
    gray = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)
    out: list[Cue] = []
    for k in OPENINGS:
        # an opening cuts the bridges, thinner than k pixels, that join a face to a
        # skin-coloured backdrop (a blob it leaves whole is the one found at a smaller k)
        opened = cv2.morphologyEx(mask, cv2.MORPH_OPEN, np.ones((k, k), np.uint8))
        out += [c for c in _blobs(opened, gray, smallest, largest, skip)
                if not _found(*c.box[:2], c.box[2] - c.box[0], c.box[3] - c.box[1],
                              [d.box for d in out], share=0)]
    out.sort(key=lambda c: -c.score)
    return out


def _blobs(mask, gray, smallest, largest, skip) -> list[Cue]:
    """`cues` on one opened mask."""
    _, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=4)
    x, y, bw, bh, area = (stats[1:, i].astype(np.int64) for i in range(5))
    side = np.maximum(bw, bh)
    keep = ((side >= smallest) & (side <= largest) & (bh >= ASPECT[0] * bw)
            & (bh <= ASPECT[1] * bw) & (area >= MIN_FILL * bw * bh))
    x, y, bw, bh, area, side = (a[keep] for a in (x, y, bw, bh, area, side))
    if not len(x):
        return []
    integral = cv2.integral(mask)  # (H + 1, W + 1) sums
    h, w = mask.shape
    pad = np.maximum(1, side // 2)
    y0, y1 = np.maximum(0, y - pad), np.minimum(h, y + bh + pad)
    x0, x1 = np.maximum(0, x - pad), np.minimum(w, x + bw + pad)
    around = _sums(integral, y0, y1, x0, x1) - _sums(integral, y, y + bh, x, x + bw)
    ring_skin = around / np.maximum((y1 - y0) * (x1 - x0) - bw * bh, 1)
    out = []
    for i in range(len(x)):
        if ring_skin[i] > MAX_RING_SKIN or _found(x[i], y[i], bw[i], bh[i], skip):
            continue
        dark = darkness(gray[y[i]:y[i] + bh[i], x[i]:x[i] + bw[i]])
        if dark >= MIN_DARK:
            out.append(Cue((int(x[i]), int(y[i]), int(x[i] + bw[i]), int(y[i] + bh[i])),
                           float(dark * area[i] / (bw[i] * bh[i]) * (1 - ring_skin[i]))))
    return out


def _found(x, y, w, h, boxes, share: float = 1 / 3) -> bool:
    """Whether a blob is the skin of a face already found (or a cue already made): its
    centre in the box, and its size at least `share` of the box's (a smaller blob inside a
    large box, which may be a detection of something else, is still looked at)."""
    cx, cy = x + w / 2, y + h / 2
    return any(a <= cx <= c and b <= cy <= d and max(w, h) >= (c - a) * share
               for a, b, c, d in boxes)


def darkness(gray: np.ndarray) -> float:
    """How much darker than its median the darkest pixel of a blob's eye band is (a face's
    eyes and brows), as a share of the median: the band is the middle 60 % of the blob's
    box across and 15-60 % of it down, inside the face whatever its shape (the box's
    corners are its surroundings)."""
    h, w = gray.shape
    band = gray[int(0.15 * h):max(int(0.6 * h), int(0.15 * h) + 1),
                int(0.2 * w):max(int(0.8 * w), int(0.2 * w) + 1)]
    median = float(np.median(band))
    return (median - float(band.min())) / (median + 1.0)


def _sums(integral, y0, y1, x0, x1) -> np.ndarray:
    return (integral[y1, x1] - integral[y0, x1] - integral[y1, x0]
            + integral[y0, x0]).astype(np.float64)


@dataclass(frozen=True)
class Look:
    """A cut-out of the larger picture, enlarged: pixels (uint8 RGB, C-contiguous), where
    it was cut (x0, y0 in the larger picture's pixels) and by how much it was enlarged."""

    pixels: np.ndarray
    x0: int
    y0: int
    zoom: float


def look(larger: np.ndarray, cue: Cue, scale: float) -> Look | None:
    """The cut-out of `larger` around a cue found on a picture `scale` times larger's size
    (the scaled picture's pixels x 1/scale = larger's), scaled so that the blob's longer side
    is LOOK_SIDE pixels."""
    x0, y0, x1, y1 = (v / scale for v in cue.box)
    side = max(x1 - x0, y1 - y0)
    half = side * LOOK_MARGIN / 2
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    h, w = larger.shape[:2]
    a, b = max(0, int(cx - half)), max(0, int(cy - half))
    c, d = min(w, int(np.ceil(cx + half))), min(h, int(np.ceil(cy + half)))
    if c - a < 2 or d - b < 2:
        return None
    zoom = LOOK_SIDE / side
    size = (max(1, round((c - a) * zoom)), max(1, round((d - b) * zoom)))
    resample = Image.Resampling.BILINEAR if zoom > 1 else Image.Resampling.BOX
    crop = np.asarray(Image.fromarray(larger[b:d, a:c]).resize(size, resample))
    return Look(np.ascontiguousarray(crop), a, b, zoom)


def budget(scaled_pixels: int) -> int:
    """Pixels the looks may cost on a picture where none has found a face yet."""
    return int(LOOK_BUDGET * scaled_pixels)


def look_pixels() -> int:
    """What one look costs, in pixels scanned (its cut-out, enlarged)."""
    return int((LOOK_SIDE * LOOK_MARGIN) ** 2)


__all__ = ["ASPECT", "Cue", "FIRST_SCORE", "FOUND_LOOKS", "LOOK_BUDGET", "LOOK_MARGIN", "LOOK_SIDE", "Look",
           "MAX_BLOB", "MAX_RING_SKIN", "MIN_DARK", "MIN_FACE", "MIN_FILL", "OPENINGS",
           "ZOOM_SIDE", "budget", "cues", "darkness", "look", "look_pixels", "skin"]
