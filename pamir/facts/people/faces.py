"""Faces found in a picture and embedded, on the CPU, with dlib and the weights that the
`face-recognition-models` package installs (nothing is downloaded at run time).

- Detection: dlib's HOG + linear SVM frontal-face detector, on the picture shrunk so that its
  longer side is at most DETECT_SIDE pixels: a 24-megapixel photo costs what a 1-megapixel
  one does; a small picture is enlarged up to MAX_ENLARGE times, so that a face of about 64
  pixels is still found.
- Landmarks: the 5-point shape predictor (eyes' corners and nose), which aligns the face for
  the network. The package's 68-point model is never loaded (its training data, iBUG 300-W,
  is for research only; the 5-point model and the ResNet are public domain).
- Embedding: dlib's ResNet (99.38 % on LFW), 128 numbers per face; two faces of one person
  lie closer than about 0.6 (Euclidean distance), two people further apart.

benchmarks/results/faces.md gives the measurements behind each choice (HOG against dlib's
CNN detector, the detection size, embedding from the scaled picture against the full one).
"""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image

from ... import config
from ...extras import optional, package_folder
from ...features.images import ImageError, decode_rgb, displayed_size, read_bytes
from ...features.rasters import SLACK
from . import zoom
from .regions import iou

#: The longer side, in pixels, of the picture the detector sees (a larger one is shrunk).
#: HOG finds faces of about 80 pixels and more, so faces of 8 % of the picture's longer side
#: and more are found. On the benchmark's ten group photos 1024 found every face that 1600,
#: or 640 with 2x upsampling, found (35), in 63 ms a picture against their 148 and 103; 640
#: missed 5; dlib's CNN detector found one more at 5 s a picture
#: (benchmarks/results/faces.md).
DETECT_SIDE = 1024
#: The longer side, in pixels, of the picture the faces pass reads (a larger one is shrunk,
#: a 12-megapixel JPEG decoded at half scale): the detector sees it scaled to DETECT_SIDE,
#: and faces too small for that are looked for again in it (pamir.facts.people.zoom).
RASTER_SIDE = zoom.ZOOM_SIDE
#: A picture smaller than DETECT_SIDE is enlarged at most this much for detection, so that faces
#: smaller than HOG's 80 pixels are found (64 at 1.25x). HOG's time grows with the pixels it scans:
#: with 2x, `pamir index` of 1,000 of Corel 5k's 192 x 128 pictures took 1.78x as long with faces
#: as without (the target: at most 1.5x). Measured (benchmarks/results/people.md,
#: "Enlargement": one process, decode, detect, embed), at 2x / 1.5x / 1.25x / 1x: 10 / 6.1 / 4.5 /
#: 2.3 ms a Corel picture, and 4 / 1 / 1 / 0 faces in 1,000 of them; of the identity benchmark's 67
#: pictures under 1,024 px, 67 / 66 / 67 / 66 with their face found; in its 10 group photos 35 / 35
#: / 35 / 34 faces. In tests/data/faces/obama_and_biden.jpg (480 px) 1.25x and 1.5x find both
#: people, 1x neither, 2x a third, 43-px face too. At 1.25x `pamir index` of Corel 5k takes 1.23x
#: the time without faces (1.26x the CPU), the identity benchmark's mean AvgP is 0.951 as at 2x,
#: and no stranger is named (people.md).
MAX_ENLARGE = 1.25
#: HOG's detection threshold (dlib's own default, 0): a lower one finds more faces in
#: profile and more that are not faces.
DETECT_THRESHOLD = 0.0
#: Border around the aligned 150 x 150 face chip, as a fraction of the face (dlib's default,
#: the one the network was trained with).
CHIP_PADDING = 0.25
#: The embedding's length.
EMBEDDING_SIZE = 128

_LANDMARKS = "shape_predictor_5_face_landmarks.dat"
_NETWORK = "dlib_face_recognition_resnet_model_v1.dat"


@dataclass(frozen=True, eq=False)
class Face:
    """One face of a picture. box: (x0, y0, x1, y1) in [0, 1], fractions of the picture as
    shown (EXIF orientation applied); embedding: (128,) float32; score: the detector's
    confidence (HOG's SVM margin, above 0; NaN for a face embedded from a named region that
    no detection matched); size: the box's shorter side in the picture's own pixels (a small
    face's embedding is less sure)."""

    box: tuple[float, float, float, float]
    embedding: np.ndarray
    score: float
    size: int

    @property
    def quality(self) -> tuple[float, int]:
        return self.score, self.size


def models_dir() -> Path:
    """The folder of the face-recognition-models package's weights. The package's own
    __init__ imports pkg_resources (gone from recent setuptools), so it is found, not
    imported."""
    folder = package_folder("face_recognition_models.models")
    if folder is None:
        with optional():
            raise ImportError("No module named 'face_recognition_models'",
                              name="face_recognition_models")
    return folder


def detector_file(dlib) -> Path | None:
    """dlib's frontal-face detector saved in pamir's cache (made once, from the detector
    compiled into dlib): loaded in 2 ms, where dlib.get_frontal_face_detector() decodes its
    weights from text for 0.7-1.1 s, in each process and each thread that detects. None
    where the cache cannot be written (each thread then builds its own)."""
    folder = config.default_cache_dir() / "faces"
    path = folder / f"frontal_face_detector-dlib{dlib.__version__}.svm"
    if path.is_file():
        return path
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".svm")
        os.close(fd)
        try:
            dlib.get_frontal_face_detector().save(tmp)
            os.replace(tmp, path)  # whole or not at all: another process may read it
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError:
        return None
    return path


def frontal_detector(dlib, path: Path | None):
    """A frontal-face detector of its own for the calling thread: from `path`
    (detector_file), or built (a cache file that cannot be read is made again)."""
    if path is not None:
        try:
            return dlib.fhog_object_detector(str(path))
        except RuntimeError:  # spoilt: dlib refuses it
            path.unlink(missing_ok=True)
    return dlib.get_frontal_face_detector()


def scale_for_detection(width: int, height: int, side: int = DETECT_SIDE) -> float:
    """The factor that brings the longer side to `side` (below 1 shrinks, above 1 enlarges,
    by MAX_ENLARGE at most)."""
    return min(side / max(width, height), MAX_ENLARGE)


class FaceFinder:
    """Detects and embeds faces. Build one per process (it loads about 30 MB of weights)."""

    def __init__(self, detect_side: int = DETECT_SIDE, threshold: float = DETECT_THRESHOLD,
                 small_faces: bool = True):
        with optional():
            import dlib  # noqa: PLC0415 - the [faces] extra
        folder = models_dir()
        self.detect_side = detect_side
        self.threshold = threshold
        self.small_faces = small_faces  # the second look (pamir.facts.people.zoom)
        self._dlib = dlib
        self._landmarks = dlib.shape_predictor(str(folder / _LANDMARKS))
        self._network = dlib.face_recognition_model_v1(str(folder / _NETWORK))
        # threads share one finder (the reading stage's faces readers, a multi-threaded Dask
        # worker): the landmarks are read-only; the detector keeps the picture's feature
        # pyramid in itself while it scans (dlib's object_detector loads its scanner), and
        # dlib lets go of the GIL while it scans, so each thread has its own (`_detect`); the
        # network keeps its layers' outputs between calls, so threads take turns on it
        self._detector_file = detector_file(dlib)
        self._local = threading.local()
        self._network_lock = threading.Lock()

    def find(self, image: np.ndarray, full_size: tuple[int, int] | None = None,
             closer=None) -> list[Face]:
        """The faces of an (H, W, 3) uint8 RGB picture, in display orientation, any size
        (the detector sees it scaled to detect_side, and small faces are looked for again in
        the picture at up to ZOOM_SIDE, pamir.facts.people.zoom). full_size: (width, height)
        of the picture the array was scaled from, for the faces' sizes in its pixels
        (default: the array's own). closer(side): the picture with its longer side at up to
        `side` pixels (the reading stage's closer look), asked for only where the second look
        has somewhere to look (default: the array itself, shrunk to ZOOM_SIDE)."""
        scaled = self.scaled(image)
        h, w = scaled.shape[:2]
        rects, scores, _ = self._detect(scaled)
        full_w, full_h = full_size or (image.shape[1], image.shape[0])
        faces = []
        for rect, score in zip(rects, scores):
            box = _box(rect, 0, 0, 1.0, w, h)
            if box is not None:
                faces.append(Face(box, self._embed(scaled, rect), float(score),
                                  _short_side(box, full_w, full_h)))
        if self.small_faces:
            faces += self._look_again(image, scaled, faces, (full_w, full_h), closer)
        return faces

    def _look_again(self, image, scaled, found: list[Face], full_size,
                    closer=None) -> list[Face]:
        """The faces too small for the scaled picture, found by pamir.facts.people.zoom's looks at
        the skin-coloured blobs of a small face's size, cut from the picture at up to
        ZOOM_SIDE (made only once there is a cue); until the looks' pixels run out
        (zoom.budget, more for each face found)."""
        h, w = scaled.shape[:2]
        if zoom.budget(h * w) < zoom.look_pixels():
            return []  # a small picture: no look fits its budget (Corel's 192 x 128)
        # a face's skin (forehead, ears, neck) is at least its face box
        smallest = max(3.0, zoom.MIN_FACE * w / full_size[0])
        skip = [(f.box[0] * w, f.box[1] * h, f.box[2] * w, f.box[3] * h) for f in found]
        cues = zoom.cues(scaled, smallest, skip=skip)  # best first
        if not cues or (not found and cues[0].score < zoom.FIRST_SCORE):
            return []  # nowhere a small face may be: no closer look made
        larger = closer(zoom.ZOOM_SIDE) if closer is not None else None
        if larger is None:
            larger = bounded(image, zoom.ZOOM_SIDE)
        scale = w / larger.shape[1]
        left = zoom.budget(h * w)
        out: list[Face] = []
        for cue in cues:
            if left < zoom.look_pixels() or (not found and not out
                                             and cue.score < zoom.FIRST_SCORE):
                break  # the budget spent, or no face yet and no cue good enough left
            cut = zoom.look(larger, cue, scale)
            if cut is None:
                continue
            left -= cut.pixels.shape[0] * cut.pixels.shape[1]
            lh, lw = larger.shape[:2]
            rects, scores, _ = self._detect(cut.pixels)
            for rect, score in zip(rects, scores):
                box = _box(rect, cut.x0, cut.y0, cut.zoom, lw, lh)
                if box is None or any(iou(box, f.box) > 0.3 for f in (*found, *out)):
                    continue
                out.append(Face(box, self._embed(cut.pixels, rect), float(score),
                                _short_side(box, *full_size)))
                left += zoom.FOUND_LOOKS * zoom.look_pixels()
        return out

    def _detect(self, image: np.ndarray) -> tuple:
        """HOG's (rectangles, scores, filters) on a C-contiguous uint8 picture, by this
        thread's detector."""
        detector = getattr(self._local, "detector", None)
        if detector is None:
            detector = self._local.detector = frontal_detector(self._dlib, self._detector_file)
        return detector.run(image, 0, self.threshold)

    def embed(self, image: np.ndarray, box, full_size: tuple[int, int] | None = None) -> Face:
        """A face at a given box (x0, y0, x1, y1 in [0, 1]), as a named region gives one that
        no detection matched: landmarks and embedding are taken inside it."""
        scaled = self.scaled(image)
        h, w = scaled.shape[:2]
        x0, y0, x1, y1 = (min(max(float(v), 0.0), 1.0) for v in box)
        rect = self._dlib.rectangle(round(x0 * w), round(y0 * h),
                                    max(round(x1 * w) - 1, round(x0 * w)),
                                    max(round(y1 * h) - 1, round(y0 * h)))
        full_w, full_h = full_size or (image.shape[1], image.shape[0])
        return Face((x0, y0, x1, y1), self._embed(scaled, rect), float("nan"),
                    _short_side((x0, y0, x1, y1), full_w, full_h))

    def scaled(self, image: np.ndarray) -> np.ndarray:
        """The picture as the detector sees it: its longer side shrunk to detect_side pixels
        (a smaller one enlarged by MAX_ENLARGE at most; C-contiguous, as dlib wants)."""
        h, w = image.shape[:2]
        s = scale_for_detection(w, h, self.detect_side)
        if self.detect_side * (1 - SLACK) <= max(w, h) <= self.detect_side:
            # the reading stage's raster, read at about detect_side (a 12-MP photo's 1/4
            # JPEG decode, 1,008 px): scanned as it is, not resized by a percent or two
            return np.ascontiguousarray(image)
        k = round(1 / s)
        if k >= 2 and abs(max(w, h) / k - self.detect_side) <= 0.02 * self.detect_side:
            # within 2 % of an integer reduction (a 12-megapixel photo read at RASTER_SIDE,
            # 2016 px, to 1008): Pillow's reduce averages k x k pixels at a quarter of a box
            # resize's cost
            return np.ascontiguousarray(np.asarray(Image.fromarray(image).reduce(k)))
        if s != 1.0:
            size = (max(1, round(w * s)), max(1, round(h * s)))
            # Box filtering when shrinking avoids aliasing; bilinear when enlarging.
            resample = Image.Resampling.BOX if s < 1 else Image.Resampling.BILINEAR
            image = np.asarray(Image.fromarray(image).resize(size, resample))
        return np.ascontiguousarray(image)

    def _embed(self, image: np.ndarray, rect) -> np.ndarray:
        shape = self._landmarks(image, rect)
        with self._network_lock:
            v = self._network.compute_face_descriptor(image, shape, 0, CHIP_PADDING)
        return np.asarray(v, dtype=np.float32)


def _box(rect, x0: int, y0: int, zoom_by: float, w: int, h: int):
    """A detection in a picture cut at (x0, y0) from one of w x h pixels and enlarged by
    zoom_by, as (x0, y0, x1, y1) in [0, 1] of the w x h picture (None: empty)."""
    box = (max(rect.left() / zoom_by + x0, 0) / w, max(rect.top() / zoom_by + y0, 0) / h,
           min((rect.right() + 1) / zoom_by + x0, w) / w,
           min((rect.bottom() + 1) / zoom_by + y0, h) / h)
    return box if box[2] > box[0] and box[3] > box[1] else None


def bounded(image: np.ndarray, side: int) -> np.ndarray:
    """The picture with its longer side at most `side` (box filter; as it is if smaller)."""
    h, w = image.shape[:2]
    if max(h, w) <= side:
        return image
    s = side / max(h, w)
    size = (max(1, round(w * s)), max(1, round(h * s)))
    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.BOX))


def _short_side(box, width: int, height: int) -> int:
    return int(round(min((box[2] - box[0]) * width, (box[3] - box[1]) * height)))


def fingerprint() -> str:
    """What the faces pass is named after (pamir.index.passes): the detector, its size and
    threshold and the networks; another setting reads every picture again. The looks'
    FIRST_SCORE and the reading stage's rasters (a 12-MP photo's detector input decoded at
    1/4 rather than shrunk from 1/2) are not in it: they make the pass cheaper, not other
    (results/small_faces.md), and a library read before is not read again for them."""
    return (f"dlib-hog{DETECT_SIDE}x{MAX_ENLARGE:g}t{DETECT_THRESHOLD:g}-resnet-v1-5pt"
            f"-zoom{zoom.ZOOM_SIDE}:{zoom.MIN_FACE}:{zoom.LOOK_BUDGET:g}")


@cache
def face_finder() -> FaceFinder:
    """The process's FaceFinder, built on first use (a Dask worker builds it once)."""
    return FaceFinder()


def load_for_detection(path, side: int = RASTER_SIDE) -> tuple[np.ndarray, tuple[int, int]]:
    """A picture decoded for detection, its longer side at most `side`, and its full (width,
    height) as shown: a big JPEG is decoded at a reduced scale by libjpeg (pamir's one image
    reader; at exactly 1/2, 1/4 or 1/8 where that is at most `side`, so that nothing is
    decoded larger only to be shrunk), so its cost does not grow with its megapixels."""
    data = read_bytes(path)
    width, height = displayed_size(data)
    long, short = max(width, height), min(width, height)
    if long > side:
        factor = next((f for f in (2, 4, 8) if long / f <= side), None)
        short = short // factor if factor else max(1, round(short * side / long))
        return decode_rgb(data, short), (width, height)
    return decode_rgb(data), (width, height)


def find_faces(paths) -> list[tuple[list[Face] | None, str]]:
    """Each picture's faces, and a note: (faces, "") or (None, why it was skipped). A plain
    function over paths, to run as a Dask task; a file that is missing, corrupt or not a
    picture gives its reason, never an exception."""
    finder = face_finder()
    out = []
    for path in paths:
        try:
            image, full = load_for_detection(path)
            out.append((finder.find(image, full), ""))
        except ImageError as e:
            out.append((None, f"{path}: {e}"))
        except Exception as e:  # noqa: BLE001 - one bad picture never stops a batch
            out.append((None, f"{path}: faces not read ({type(e).__name__}: {e})"))
    return out


__all__ = ["CHIP_PADDING", "DETECT_SIDE", "DETECT_THRESHOLD", "EMBEDDING_SIZE", "Face",
           "FaceFinder", "MAX_ENLARGE", "RASTER_SIDE", "bounded", "face_finder", "find_faces",
           "fingerprint", "load_for_detection", "models_dir"]
