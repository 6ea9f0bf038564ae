"""Text in pictures: the words written on a sign, a menu, a ticket, read as text facts.

    reader = TextReader()                      # the ONNX sessions, once per process/thread
    lines = reader.read("bakery.jpg")          # [TextLine("FRESH BREAD", 0.97, (x0,y0,x1,y1))]
    facts = text_facts(lines)                  # Fact("text", "fresh"), ("bread"), ("fresh bread")
    read_texts(paths)                          # [(facts | None, note)]: a plain function of
                                               # paths, never raises (a Dask task)

Recognition is RapidOCR's (the `rapidocr` package): PaddleOCR's PP-OCRv6 small detection (DB)
and recognition (CTC) networks, bundled in the package as ONNX files and run by ONNX Runtime
on the CPU. The reader names the bundled files itself, so rapidocr's downloader is never
reached: nothing is fetched at run time, and a rapidocr installed without them is an error
that says so.

Cost is what this module is about (`pamir index` within 1.5x of its time without
text). rapidocr at its defaults enlarges every picture to 736 pixels on its short side before
detection and runs an angle classifier on every line: about 300-700 ms a picture on this
machine, text or not. Here detection runs with the longest side bounded (never enlarged),
recognition only on the lines detected (the largest MAX_LINES of them), without the angle
classifier, on one intra-op thread. benchmarks/bench_ocr.py measures each setting on Corel
and on photo-sized pictures with and without painted words; the constants below are its
choice: about 13 ms a Corel picture and 31 ms a photo-sized one without text, 50x less than
rapidocr's defaults. The networks are called directly (rapidocr's pipeline read its settings
through omegaconf and normalised in float64 at every call), alike-sized pictures of a batch
are detected together, a picture's lines recognised together, and the index's pass runs one
reader per core (pamir.index.passes). The detection network, most of the cost, runs in int8,
quantized once per machine (pamir.facts.ocr_int8; DETECT_PRECISION). In `pamir index`'s
reading stage the reader is given each picture at DETECT_SIDE (reduced from the raster every
pass reads) and the picture's closer look, which it asks for only where it detected lines:
their text is cut out of the picture at READ_SIDE, as before, but a 12-MP JPEG is decoded at
that size (1/2) only for the few photos with lines, not for all (`TextReader.read_many`). The
fingerprint does not change with it: the same lines are read (results/profile_passes.md).

Longer than 600 lines: the reader, the settings it settles (`settled`) and the fingerprint
that names what it read stay in one module, so that a setting cannot change the reading
without changing the name.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, ImageOps

from pamir import config
from pamir.extras import MissingExtra, optional, package_folder
from pamir.facts.fact import Fact, fold
from pamir.features.images import (ImageError, decode_rgb, displayed_size, read_bytes,
                                   to_rgb)
from pamir.text.words import STOP_WORDS, tokenize

# ------------------------------------------------------------------------------ settings
# Measured by benchmarks/bench_ocr.py (results/ocr.md, 2026-11-26, AMD EPYC 2 cores, shared):
# ms a picture on 100 Corel pictures (192x128), on 40 photo-sized (1024x683) pictures with
# 112 painted words and on the same pictures with nothing painted, and the share of painted
# words read, for each setting tried. Chosen: the least cost on photo-sized pictures (one in
# ten with text) that reads at least 0.9 of the words: detection at 320, 106/112 words
# (0.946), 12.9 ms a Corel picture, 31.1 ms a photo-sized picture without text, 66.4 ms with
# (rapidocr's defaults: 661, 699 and 816 ms, 110/112 words).

#: Detection runs with the picture's longest side at most this (smaller pictures as they
#: are). rapidocr's default enlarges the short side to 736 (a Corel picture, 192x128, was
#: detected at 1104x736). Its cost grows with the pixels: 640 read 111/112 words at 119 ms
#: a photo-sized picture without text, 480 110/112 at 61 ms, 320 106/112 at 31 ms (beside
#: 640 it misses 1 of 5 words at 12 px, 1 of 17 at 16 px and 3 of 19 at 20 px: letters of
#: 1-2 % of the picture's width).
DETECT_SIDE = 320
#: The picture is decoded with its longest side at most this: the lines are cut out of it
#: for recognition (48 pixels high), so small text keeps more pixels than detection saw.
READ_SIDE = 1600
#: The height, in pixels, recognition reads a line at (PP-OCRv6's recogniser: 48 x up to 320):
#: a line is cut out of a picture with at least this many pixels of its height, where the
#: picture has them (`TextReader._closer`).
REC_HEIGHT = 48
#: At most this many lines are recognised, the largest first: a bound on the cost of a page
#: of small print (each line is one recognition, ~10-30 ms here), not a measured choice.
MAX_LINES = 24
#: Lines whose recognition score is below this are dropped (rapidocr's own text_score).
MIN_SCORE = 0.5
#: A detected region is a line when the detection map's mean over it is at least this (DB's
#: box_thresh; rapidocr's default is 0.5). A word of 2 % of a photo's height, tilted, is 4
#: pixels high at DETECT_SIDE and its mean stays under 0.5: at 0.5, 2 of 5 such words were
#: lost (results/text_sizes.md). 0.3 reads them without detecting at a larger size, which
#: would double the cost on photos (bench_ocr: 61 against 31 ms at 480); on Corel the
#: regions recognised grew by about a fifth (56 against 47 lines on 200 pictures) but the
#: cost did not measurably (40.3 against 41.9 ms a picture, results/text_sizes.md). It is
#: part of the reader's fingerprint: an index read at 0.5 reads its pictures' text again.
MIN_BOX_SCORE = 0.3
#: Lines detected less than this many pixels high (in the picture as read) are not read:
#: textures on photos without text give such slivers.
MIN_LINE_HEIGHT = 8
#: Lines of any height are read: a sign photographed close, its word filling a third of the
#: picture's height or more, is the most obvious text in it. (A bound at a third of the short
#: side, MAX_LINE_SHARE, was once kept for cost: on Corel pictures such tall detections were
#: textures, each costing a recognition; it also dropped every word that large. Without it
#: the cost is bounded as for any line, by MAX_LINES and MIN_LINE_HEIGHT;
#: benchmarks/bench_text_sizes.py measures both: results/text_sizes_per2.md.)
#: ONNX Runtime intra-op threads per session: one. Two threads on one reader were slower on
#: this shared 2-core machine (27.6 ms a Corel picture against 13.5: each operator waits for
#: the thread that was descheduled); run one reader per core instead, as the CNN features do
#: (pamir.features.cnn_engines.streams).
THREADS = 1
#: PP-OCR's angle classifier turns upside-down lines round; signs in photos are upright. On
#: it read no more painted words (111/112 either way) and fewer on scikit-image's scanned
#: page (14 of its 19 words against 19), and costs a pass over every line.
ANGLE_CLASSIFIER = False
#: A first, cheaper detection at this longest side decides whether a picture has text at
#: all; only then is it detected again at DETECT_SIDE (0: one detection). 320 then 640 read
#: 111/112 words at 57 ms a photo-sized picture without text and 183 ms with: dearer than
#: detecting at 320 alone, so off. The setting for a collection of small text, with
#: DETECT_SIDE = 640.
COARSE_SIDE = 0
#: ONNX Runtime's CPU memory arena, which rapidocr turns off: a detection's buffers are
#: then allocated afresh at each call. On: 8.1 ms against 8.8 for the detection network on
#: a Corel picture (192x128, one thread, 100 calls; this machine, 2026-11-26).
ARENA = True
#: Alike-sized pictures detected in one call of the detection network: 7.6-7.9 ms a Corel
#: picture (192x128, one thread) in batches of 2 to 8, against 8.0-8.7 one at a time (this
#: machine, 2026-11-26); 8 bounds the batch's memory (8 x 3 x 320 x 320 floats, 10 MB).
DETECT_BATCH = 8
#: rapidocr's pipeline pads a picture whose short side is at most this (its Global
#: min_height and min_side_len, 30) or whose width is over PIPELINE_MAX_RATIO times its
#: height (width_height_ratio) before detecting: such pictures go through it, the others
#: are detected directly (`TextReader._boxes`), alike.
PIPELINE_MIN_SIDE = 30
PIPELINE_MAX_RATIO = 8
#: The detection network's precision: "int8", quantized once per machine
#: (pamir.facts.ocr_int8; fp32 with a warning where it cannot be made), or "fp32", rapidocr's
#: graph as it ships. The environment's PAMIR_OCR_PRECISION overrides it. int8 because it
#: reads the same words (61/61 on benchmarks/bench_text_sizes.py) at a fifth of detection's
#: cost (results/text_sizes.md). Part of the reader's fingerprint.
DETECT_PRECISION = os.environ.get("PAMIR_OCR_PRECISION", "int8")
#: Multi-word phrases of up to this many words are facts of their own (`"fresh bread"`).
MAX_PHRASE_WORDS = 4

#: The ONNX files rapidocr 3.10 bundles (its default_models.yaml names the same).
BUNDLED_MODELS = {"det": "PP-OCRv6_det_small.onnx", "rec": "PP-OCRv6_rec_small.onnx",
                  "cls": "ch_ppocr_mobile_v2.0_cls_mobile.onnx"}


@dataclass(frozen=True)
class OcrSettings:
    """How the reader trades recognition for time (the module's constants by default)."""

    detect_side: int = DETECT_SIDE
    read_side: int = READ_SIDE
    max_lines: int = MAX_LINES
    min_score: float = MIN_SCORE
    min_box_score: float = MIN_BOX_SCORE
    min_line_height: int = MIN_LINE_HEIGHT
    #: lines taller than this share of the picture's short side are not read (None: any
    #: height; a bound kept for the benchmark's comparison)
    max_line_share: float | None = None
    threads: int = THREADS  # 0: ONNX Runtime's default (all cores)
    angle_classifier: bool = ANGLE_CLASSIFIER
    #: rapidocr as it comes (short side enlarged to 736, angle classifier, every line): the
    #: benchmark's reference point
    rapidocr_defaults: bool = False
    #: >0: a first detection with the longest side at most this; a picture where it finds
    #: nothing is not detected again at detect_side (0: one detection)
    coarse_side: int = COARSE_SIDE
    #: the networks called directly (`TextReader._boxes`); False: through rapidocr's
    #: pipeline, line by line (the benchmark's comparison)
    direct: bool = True
    #: ONNX Runtime's memory arena (rapidocr turns it off)
    arena: bool = ARENA
    #: the detection network's precision: "int8" (quantized, pamir.facts.ocr_int8) or "fp32"
    detect_precision: str = DETECT_PRECISION


@dataclass(frozen=True)
class TextLine:
    """A line of text read on a picture: the text as recognised, its recognition score in
    [0, 1], and its box as fractions of the picture's width and height (x0, y0, x1, y1)."""

    text: str
    confidence: float
    box: tuple[float, float, float, float]


class OcrUnavailable(RuntimeError):
    """rapidocr is installed without its bundled models; the message says what to do
    (rapidocr missing altogether is pamir.extras.MissingExtra, naming the [ocr] extra)."""


# ------------------------------------------------------------------------------ the reader

def bundled_models() -> dict[str, Path]:
    """The ONNX files shipped inside the installed rapidocr package."""
    folder = package_folder("rapidocr.models")
    if folder is None:
        raise MissingExtra("ocr", "rapidocr")
    paths = {task: folder / name for task, name in BUNDLED_MODELS.items()}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise OcrUnavailable(f"rapidocr's bundled models are missing ({', '.join(missing)}); "
                             "pamir downloads nothing: install rapidocr>=3.10, whose wheel "
                             "ships them")
    return paths


class TextReader:
    """RapidOCR's sessions, built once; `read` a picture's lines of text. One reader per
    thread (rapidocr keeps per-call switches on the engine): `read_texts` keeps one per
    thread of the process."""

    def __init__(self, settings: OcrSettings | None = None):
        self.settings = s = settings or OcrSettings()
        models = bundled_models()
        with optional():
            from rapidocr import RapidOCR  # noqa: PLC0415 - heavy, only when text is read

        params = {
            "Global.log_level": "critical",  # an empty detection is logged as a warning
            "Global.use_cls": s.angle_classifier,
            "Global.text_score": s.min_score,
            "Det.model_path": str(models["det"]),
            "Rec.model_path": str(models["rec"]),
            "Cls.model_path": str(models["cls"]),
        }
        if s.threads > 0:  # 0: ONNX Runtime's own choice (one thread per core)
            params.update({"EngineConfig.onnxruntime.intra_op_num_threads": s.threads,
                           "EngineConfig.onnxruntime.inter_op_num_threads": 1})
        if s.arena:
            params["EngineConfig.onnxruntime.enable_cpu_mem_arena"] = True
        self.coarse = None
        if not s.rapidocr_defaults:
            params.update({"Det.limit_type": "max", "Det.limit_side_len": s.detect_side,
                           "Det.box_thresh": s.min_box_score})
            if s.coarse_side:
                self.coarse = RapidOCR(params={**params, "Det.limit_side_len": s.coarse_side})
        self.engine = RapidOCR(params=params)
        # The networks themselves (rapidocr's TextDetector and TextRecognizer), called
        # directly where rapidocr's own pipeline would only add cost (see `_detect`); None on
        # a rapidocr without them, which then runs its whole pipeline for each call.
        self.detector = self.recogniser = None
        if s.direct and not s.rapidocr_defaults:
            try:
                self.detector = self.engine._load_det_model()
                self.recogniser = self.engine._load_rec_model()
            except AttributeError:  # another rapidocr: its public calls below
                self.detector = self.recogniser = None
        self.settings = settled(s)
        if self.settings.detect_precision == "int8":
            self._quantized_detector(models["det"])

    def _quantized_detector(self, det_path: Path) -> None:
        """The detector's session on the int8 graph (`settled` made it, once a process);
        where it cannot be, fp32 from then on, the settings saying so, and one line why."""
        s = self.settings
        reason = None
        if self.detector is None:
            reason = "rapidocr's detector is not at hand (direct=False, or another rapidocr)"
        else:
            try:
                # start-up: the quantizer, only where the int8 detector is made
                from pamir.facts.ocr_int8 import detector_session  # noqa: PLC0415

                self.detector.session.session = detector_session(
                    det_path, self._blob, fp32_reader, s.threads, s.arena)
            except Exception as e:  # noqa: BLE001 - ORT refused the graph
                reason = f"{type(e).__name__}: {e}"
        if reason is not None:
            _fp32_warning(reason)
            self.settings = dataclasses.replace(s, detect_precision="fp32")

    # -------------------------------------------------------------------- one picture
    def read(self, image) -> list[TextLine]:
        """The lines of text on a picture: a path, encoded bytes, a Pillow image or an
        (H, W, 3) uint8 RGB array. ImageError if the file cannot be decoded."""
        return self.read_many([self.prepare(image)])[0]

    def read_many(self, pictures: list[np.ndarray | None],
                  closer: list | None = None) -> list[list[TextLine]]:
        """The lines of text on each of several prepared pictures (`prepare`; None: none):
        alike-sized pictures are detected together, in batches of DETECT_BATCH. closer: for
        each picture, None or (look, full_long_side): look(read_side) -> the picture with
        more pixels (RGB, None where it cannot be had), full_long_side its file's longer
        side: a picture detected at fewer pixels than read_side (the reading stage's raster)
        has its lines cut out of that, only where it has lines."""
        if self.settings.rapidocr_defaults:
            return [self._whole(bgr) if bgr is not None else [] for bgr in pictures]
        closer = closer or [None] * len(pictures)
        out = []
        for bgr, boxes, more in zip(pictures, self._detect_many(pictures, closer), closer):
            if not boxes:
                out.append([])  # no line detected: nothing to recognise (most photos)
                continue
            bgr, boxes = self._closer(bgr, boxes, more)
            if self.recogniser is not None:
                out.append(self._recognise_lines(bgr, boxes))
            else:
                out.append([line for line in (self._recognise(bgr, box) for box in boxes)
                            if line])
        return out

    def _closer(self, bgr: np.ndarray, boxes: list[np.ndarray], more) -> tuple:
        """The picture the lines are cut out of, and the boxes in its pixels: the closer
        look at the size where its smallest line is REC_HEIGHT pixels high (recognition
        reads each line at that height: more pixels would be shrunk away), at most
        read_side, where that has more pixels than the picture detected; else that."""
        long = max(bgr.shape[:2])
        if more is None or long >= self.settings.read_side:
            return bgr, boxes
        smallest = min(_height(b) for b in boxes)
        side = min(self.settings.read_side, int(np.ceil(long * REC_HEIGHT / max(smallest, 1))))
        if side <= long:
            return bgr, boxes
        rgb = more[0](side)
        if rgb is None or rgb.shape[1] <= bgr.shape[1]:
            return bgr, boxes
        big = self.prepare(rgb)
        if big is None:
            return bgr, boxes
        fx, fy = big.shape[1] / bgr.shape[1], big.shape[0] / bgr.shape[0]
        return big, [b * np.array([fx, fy], np.float32) for b in boxes]

    def prepare(self, image) -> np.ndarray | None:
        """A picture as the reader reads it: decoded (`load`), its longest side bounded by
        read_side, as OpenCV's BGR; None for one too thin to hold a line of text (which
        rapidocr would refuse). ImageError if it cannot be decoded."""
        if isinstance(image, Image.Image):
            rgb = to_rgb(ImageOps.exif_transpose(image))
        else:
            rgb = image if isinstance(image, np.ndarray) else self.load(image)
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
            raise ImageError(f"not an RGB picture (array of shape {rgb.shape}, {rgb.dtype})")
        if min(rgb.shape[:2]) < self.settings.min_line_height:
            return None
        if max(rgb.shape[:2]) > self.settings.read_side:
            rgb = bounded(rgb, self.settings.read_side)
        return np.ascontiguousarray(rgb[:, :, ::-1])  # rapidocr reads arrays as OpenCV's BGR

    def load(self, source) -> np.ndarray:
        """A picture decoded by pamir's reader (HEIC, RAW, EXIF rotation, decompression
        bombs refused), its longest side bounded by read_side."""
        data = source if isinstance(source, bytes) else read_bytes(source)
        w, h = displayed_size(data)
        scale = min(1.0, self.settings.read_side / max(w, h, 1))
        return decode_rgb(data, short_side=max(1, round(min(w, h) * scale)))

    def _detect_many(self, pictures: list[np.ndarray | None],
                     closer: list | None = None) -> list[list[np.ndarray]]:
        """`_detect` of each picture (None: no lines); pictures that the detection network
        takes directly at the same size (`_direct_size`) are run through it together. A
        picture with a closer look (read_many) has its lines' heights measured as they will
        be read (`_read_scale`)."""
        closer = closer or [None] * len(pictures)
        out: list[list[np.ndarray]] = [[] for _ in pictures]
        alike: dict[tuple[int, int], list[int]] = {}
        for i, bgr in enumerate(pictures):
            if bgr is None:
                continue
            size = self._direct_size(bgr, self.settings.detect_side)
            if size is None or self.coarse is not None:
                out[i] = self._detect(bgr, self._read_scale(bgr, closer[i]))
            elif min(size) > 0:
                alike.setdefault(size, []).append(i)
        det = self.detector
        for size, members in alike.items():
            for lo in range(0, len(members), DETECT_BATCH):
                chunk = members[lo:lo + DETECT_BATCH]
                blob = np.concatenate([self._blob(pictures[i], size) for i in chunk])
                maps = det.session(blob)
                for j, i in enumerate(chunk):
                    h, w = pictures[i].shape[:2]
                    boxes, _ = det.postprocess_op(maps[j:j + 1], (h, w))
                    boxes = det.sorted_boxes(np.asarray(boxes)) if len(boxes) else boxes
                    out[i] = self._kept(boxes, pictures[i],
                                        self._read_scale(pictures[i], closer[i]))
        return out

    def _read_scale(self, bgr: np.ndarray, more) -> float:
        """How much larger a picture's lines are where they are read than where they are
        detected: read_side (at most the file's longer side) over its longer side where a
        closer look gives more pixels, else 1."""
        long = max(bgr.shape[:2])
        if more is None or long >= self.settings.read_side:
            return 1.0
        return max(1.0, min(self.settings.read_side, more[1]) / long)

    def _detect(self, bgr: np.ndarray, scale: float = 1.0) -> list[np.ndarray]:
        """The detected lines' quadrilaterals (4 x 2, pixels of bgr), the largest
        max_lines of those at least min_line_height high where they are read (`_kept`)."""
        s = self.settings
        if self.coarse is not None and max(bgr.shape[:2]) > s.coarse_side:
            if not len(self._boxes(bgr, s.coarse_side, self.coarse)):
                return []
        return self._kept(self._boxes(bgr, s.detect_side, self.engine), bgr, scale)

    def _kept(self, boxes, bgr: np.ndarray, scale: float = 1.0) -> list[np.ndarray]:
        """The quadrilaterals worth recognising, the largest first up to max_lines, back in
        reading order (see `_detect`); `scale`: the lines' size where they are read over
        their size in bgr."""
        s = self.settings
        if len(boxes) == 0:
            return []
        boxes = [np.asarray(b, dtype=np.float32) for b in boxes]
        heights = [scale * _height(b) for b in boxes]
        widths = [np.linalg.norm(b[0] - b[1]) for b in boxes]
        tallest = (s.max_line_share * scale * min(bgr.shape[:2]) if s.max_line_share
                   else np.inf)
        kept = [i for i, hgt in enumerate(heights) if s.min_line_height <= hgt <= tallest]
        kept.sort(key=lambda i: -heights[i] * widths[i])
        kept = sorted(kept[:s.max_lines])  # back to reading order (rapidocr's)
        return [boxes[i] for i in kept]

    def _direct_size(self, bgr: np.ndarray, side: int) -> tuple[int, int] | None:
        """(width, height) the detection network takes the picture at with its longest side
        at most `side` (rapidocr's resizing: multiples of 32; (0, x) for a picture it would
        not detect on), or None where it goes through rapidocr's pipeline instead: without
        the networks at hand, or for a picture the pipeline pads or enlarges first (short
        side under PIPELINE_MIN_SIDE, or banner-like: over PIPELINE_MAX_RATIO times as wide
        as high)."""
        h, w = bgr.shape[:2]
        if (self.detector is None or min(h, w) <= PIPELINE_MIN_SIDE
                or w > PIPELINE_MAX_RATIO * h):
            return None
        ratio = min(1.0, side / max(h, w))
        return (int(round(int(w * ratio) / 32) * 32), int(round(int(h * ratio) / 32) * 32))

    @staticmethod
    def _blob(bgr: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        """The picture as the detection network reads it: resized (bilinear) to `size`,
        (x - 127.5) / 127.5 -- rapidocr's (x / 255 - 0.5) / 0.5 -- as 1 x 3 x H x W."""
        return cv2.dnn.blobFromImage(bgr, 1 / 127.5, size, (127.5, 127.5, 127.5),
                                     swapRB=False, crop=False)

    def _boxes(self, bgr: np.ndarray, side: int, engine) -> np.ndarray:
        """The detected quadrilaterals (n x 4 x 2, pixels of bgr) with the longest side at
        most `side`: the detection network called directly, as rapidocr's pipeline calls it
        for such a picture (same resizing to multiples of 32, normalisation, DB
        post-processing and reading order), without its per-call costs (its settings read
        through omegaconf, the normalisation in float64); through the pipeline where
        `_direct_size` says so."""
        size = self._direct_size(bgr, side)
        if size is None:
            found = engine(bgr, use_det=True, use_cls=False, use_rec=False)
            boxes = getattr(found, "boxes", None)
            return np.zeros((0, 4, 2), np.float32) if boxes is None else np.asarray(boxes)
        if min(size) <= 0:
            return np.zeros((0, 4, 2), np.float32)
        det = self.detector
        boxes, _ = det.postprocess_op(det.session(self._blob(bgr, size)), bgr.shape[:2])
        if len(boxes) == 0:
            return np.zeros((0, 4, 2), np.float32)
        return det.sorted_boxes(np.asarray(boxes))

    def _recognise_lines(self, bgr: np.ndarray, boxes: list[np.ndarray]) -> list[TextLine]:
        """The lines in `boxes` recognised in batches (rapidocr's TextRecognizer: lines of
        alike widths together), as rapidocr's pipeline recognises the lines it detects."""
        from rapidocr.ch_ppocr_rec.typings import TextRecInput  # noqa: PLC0415 - the [ocr] extra
        from rapidocr.utils.process_img import get_rotate_crop_image  # noqa: PLC0415 - [ocr] extra

        crops = [get_rotate_crop_image(bgr, box.copy()) for box in boxes]
        keep = [i for i, c in enumerate(crops) if min(c.shape[:2]) >= 1]
        if not keep:
            return []
        out = self.recogniser(TextRecInput(img=[crops[i] for i in keep]))
        lines = []
        for i, text, score in zip(keep, out.txts or (), out.scores or ()):
            text, score = str(text).strip(), float(score)
            if text and score >= self.settings.min_score:
                lines.append(TextLine(text, round(min(1.0, max(0.0, score)), 4),
                                      normalised_box(boxes[i], bgr)))
        return lines

    def _recognise(self, bgr: np.ndarray, box: np.ndarray) -> TextLine | None:
        from rapidocr.utils.process_img import get_rotate_crop_image  # noqa: PLC0415 - [ocr] extra

        crop = get_rotate_crop_image(bgr, box.copy())
        if min(crop.shape[:2]) < 1:
            return None
        out = self.engine(crop, use_det=False, use_cls=self.settings.angle_classifier,
                          use_rec=True)
        texts, scores = getattr(out, "txts", None), getattr(out, "scores", None)
        if not texts:
            return None
        text, score = str(texts[0]).strip(), float(scores[0])
        if not text or score < self.settings.min_score:
            return None
        return TextLine(text, round(min(1.0, max(0.0, score)), 4), normalised_box(box, bgr))

    def _whole(self, bgr: np.ndarray) -> list[TextLine]:
        """rapidocr's own pipeline in one call (the reference setting)."""
        out = self.engine(bgr)
        if not getattr(out, "txts", None):
            return []
        return [TextLine(str(t).strip(), round(float(c), 4), normalised_box(np.asarray(b), bgr))
                for b, t, c in zip(out.boxes, out.txts, out.scores) if str(t).strip()]


def _height(quad: np.ndarray) -> float:
    """A detected line's height: the shorter of its quadrilateral's two sides across."""
    return float(min(np.linalg.norm(quad[0] - quad[3]), np.linalg.norm(quad[1] - quad[2])))


def bounded(rgb: np.ndarray, side: int) -> np.ndarray:
    """The picture with its longest side at most `side` (area resampling)."""
    h, w = rgb.shape[:2]
    scale = side / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return np.asarray(Image.fromarray(rgb).resize(size, Image.Resampling.BOX))


def normalised_box(quad: np.ndarray, image: np.ndarray) -> tuple[float, float, float, float]:
    """The bounding box of a quadrilateral (pixels) as fractions of the picture's size."""
    h, w = image.shape[:2]
    q = np.asarray(quad, dtype=np.float64).reshape(-1, 2)
    x0, y0 = q.min(axis=0)
    x1, y1 = q.max(axis=0)
    return tuple(round(float(min(1.0, max(0.0, v))), 4)
                 for v in (x0 / w, y0 / h, x1 / w, y1 / h))


def settled(settings: OcrSettings | None = None) -> OcrSettings:
    """The settings a reader reads with: fp32 detection for rapidocr's defaults (the
    reference, as it ships), for an unknown precision, and where the int8 detector cannot be
    made on this machine (said in one line, once a process). The text pass is named after
    these (pamir.jobs.fact_passes.text_pass_name), so that a pass read in fp32 is named so."""
    s = settings or OcrSettings()
    if s.rapidocr_defaults or s.detect_precision == "fp32":
        return dataclasses.replace(s, detect_precision="fp32")
    why = (f"unknown precision {s.detect_precision!r} (int8 or fp32)"
           if s.detect_precision != "int8" else _int8_unavailable(str(config.default_cache_dir())))
    if why:
        _fp32_warning(why)
        return dataclasses.replace(s, detect_precision="fp32")
    return s


@functools.lru_cache(maxsize=None)
def _int8_unavailable(cache_dir: str) -> str:
    """Why the int8 detector cannot be made in `cache_dir` ("" when it is, made the first
    time on this machine, pamir.facts.ocr_int8): tried once a process, not once a reader."""
    try:
        from pamir.facts.ocr_int8 import detector_graph  # noqa: PLC0415 - start-up: the quantizer

        detector_graph(bundled_models()["det"], TextReader._blob, fp32_reader)
    except Exception as e:  # noqa: BLE001 - no quantization tools, or ORT refused the graph
        return f"{type(e).__name__}: {e}"
    return ""


def fp32_reader() -> TextReader:
    """A reader detecting in fp32: what the int8 detector is checked against (ocr_int8)."""
    return TextReader(OcrSettings(detect_precision="fp32"))


@functools.lru_cache(maxsize=None)
def _fp32_warning(why: str) -> None:
    warnings.warn(f"int8 text detection unavailable ({why}); detecting in fp32 "
                  "(PAMIR_OCR_PRECISION=fp32 asks for fp32)", RuntimeWarning, stacklevel=3)


def fingerprint(settings: OcrSettings | None = None) -> str:
    """What a picture's text facts were read with: the rapidocr version, the models and the
    settings. A pass that stores it can tell pictures read by another reader (to read them
    again, or not)."""
    s = settings or OcrSettings()
    models = "+".join(Path(BUNDLED_MODELS[t]).stem for t in ("det", "rec"))
    # fp32 detection writes nothing: indexes read before int8 keep their fingerprint
    det = "" if s.detect_precision == "fp32" or s.rapidocr_defaults else f"-det{s.detect_precision}"
    return (f"rapidocr-{version('rapidocr')}/{models}/detect{s.detect_side}"
            f"-coarse{s.coarse_side}-read{s.read_side}-lines{s.max_lines}"
            f"-score{s.min_score}-box{s.min_box_score}-heights{s.min_line_height}:"
            f"{f'{s.max_line_share:.2f}' if s.max_line_share else 'any'}"
            f"-cls{int(s.angle_classifier)}"
            f"{'-defaults' if s.rapidocr_defaults else ''}"
            f"{'-direct' if s.direct and not s.rapidocr_defaults else ''}"
            f"{det}")


# ------------------------------------------------------------------------------ facts

def phrase(text: str) -> str:
    """A line as a phrase word, written as pamir.text.query writes a quoted phrase: its words
    (one-letter ones kept) without the stop words, folded, punctuation dropped: "Museum of
    Art!" -> "museum art", so that `"museum of art"` finds it."""
    return " ".join(fold(w) for w in tokenize(text, STOP_WORDS, min_length=1))


def text_facts(lines: list[TextLine]) -> list[Fact]:
    """A picture's text facts: each word of its lines (pamir.text.words.tokenize: stop words and
    one-letter tokens left out, a sign's "THE" is no fact; a hyphenated word and its
    parts), and each run of 2 to MAX_PHRASE_WORDS words of a line's `phrase` ("fresh bread"
    on a sign reading "Fresh bread daily"). A word read several times is one fact, with its
    best line's confidence; detail: that line's box and text as shown."""
    best: dict[str, tuple[float, str]] = {}

    def add(word: str, line: TextLine):
        if word and (word not in best or line.confidence > best[word][0]):
            best[word] = (line.confidence,
                          json.dumps({"box": list(line.box), "shown": line.text},
                                     ensure_ascii=False))

    for line in lines:
        for w in tokenize(line.text):
            add(fold(w), line)
            if "-" in w:  # "Coca-Cola" is found by "cola" too
                for part in tokenize(w.replace("-", " ")):
                    add(fold(part), line)
        words = phrase(line.text).split()
        for n in range(2, MAX_PHRASE_WORDS + 1):
            for i in range(len(words) - n + 1):
                add(" ".join(words[i:i + n]), line)
    return [Fact("text", w, c, d) for w, (c, d) in best.items()]


def lines_of(facts) -> list[TextLine]:
    """The lines of text a picture's text facts were read from (`text_facts` keeps each
    word's line, as shown, and its box in the fact's detail), each once, top to bottom
    then left to right: what the page outlines on the picture. Facts of other kinds, and
    details without a box, are left out."""
    best: dict[tuple, TextLine] = {}
    for f in facts:
        if getattr(f, "kind", None) != "text":
            continue
        try:
            d = json.loads(f.detail) if f.detail else {}
            box = tuple(float(v) for v in d["box"])
            shown = str(d.get("shown") or f.word)
        except (ValueError, KeyError, TypeError):
            continue
        if len(box) != 4:
            continue
        key = (shown, box)
        if key not in best or f.confidence > best[key].confidence:
            best[key] = TextLine(shown, float(f.confidence), box)
    return sorted(best.values(), key=lambda line: (line.box[1], line.box[0]))


# ------------------------------------------------------------------------------ batches

#: Readers not in use, by settings: kept for the process, so that a thread started later (the
#: reading stage's text stream, one per `pamir index` job; `pamir watch` runs one for each
#: update) takes a reader whose sessions are built rather than building its own (about half a
#: second each time). A reader is used by one thread at a time (rapidocr keeps per-call
#: switches on its engine).
_idle: dict[OcrSettings, list[TextReader]] = {}
_idle_lock = threading.Lock()


@contextmanager
def borrowed_reader(settings: OcrSettings | None = None):
    """A reader for `settings` for the time of the `with` block: an idle one, or one built
    now; it is kept for the next caller after."""
    settings = settings or OcrSettings()
    with _idle_lock:
        idle = _idle.setdefault(settings, [])
        reader = idle.pop() if idle else None
    if reader is None:
        reader = TextReader(settings)
    try:
        yield reader
    finally:
        with _idle_lock:
            _idle[settings].append(reader)


def shared_reader(settings: OcrSettings | None = None) -> TextReader:
    """A reader for `settings`, built on first use and kept for the process (a Dask worker or
    a pass builds its sessions once, not once a picture); for one thread's use at a time
    (`borrowed_reader`, as read_texts takes one)."""
    with borrowed_reader(settings) as reader:
        return reader


def read_texts(paths, settings: OcrSettings | None = None,
               pictures=None) -> list[tuple[list[Fact] | None, str]]:
    """(facts, note) for each path, in order: facts [] for a picture with no text; None,
    with a one-line note naming why, for a file that could not be read (missing, corrupt,
    a decompression bomb, anything the recogniser refuses). Never raises for a bad file;
    MissingExtra and OcrUnavailable (rapidocr or its models missing) are raised: they
    concern every file. pictures: each path's picture already decoded (an RGB array, its
    longest side best at READ_SIDE; a larger one is shrunk), or None to decode it here."""
    given = pictures if pictures is not None else [None] * len(paths)
    return read_text_rasters([(path, path if picture is None else picture)
                              for path, picture in zip(paths, given)], settings)


def read_text_rasters(pictures, settings: OcrSettings | None = None
                      ) -> list[tuple[list[Fact] | None, str]]:
    """read_texts of (path, picture) pairs, each picture what `TextReader.prepare` takes:
    the reading stage's raster (pamir.features.rasters, decoded once for every pass), or
    the path itself (decoded here); or of (path, raster, (width, height), closer) from the
    reading stage: closer(side) the picture's closer look (pamir.features.rasters.Item.detail),
    asked for only where the raster has lines (TextReader.read_many)."""
    shared_reader(settings)  # its models, or MissingExtra / OcrUnavailable: every file's
    with borrowed_reader(settings) as reader:
        return _read_rasters(reader, pictures)


def _read_rasters(reader: TextReader, pictures) -> list[tuple[list[Fact] | None, str]]:
    out: list[tuple[list[Fact] | None, str]] = [([], "")] * len(pictures)
    ready: list[tuple[int, np.ndarray | None, object]] = []  # decoded, read together
    for i, (path, picture, *more) in enumerate(pictures):
        try:
            ready.append((i, reader.prepare(picture),
                          (more[1], max(more[0])) if len(more) == 2 else None))
        except Exception as e:  # noqa: BLE001 - one hostile file must not end a batch
            out[i] = (None, _note(path, e))
    def read(bgrs, closer):  # closer looks passed only where there are (the stage's)
        return reader.read_many(bgrs, closer) if any(closer) else reader.read_many(bgrs)

    try:
        found: list = read([bgr for _, bgr, _ in ready], [more for _, _, more in ready])
    except Exception:  # noqa: BLE001 - one picture spoilt the batch: each alone, to name it
        found = []
        for _, bgr, more in ready:
            try:
                found.append(read([bgr], [more])[0])
            except Exception as e:  # noqa: BLE001
                found.append(e)
    for (i, _, _), lines in zip(ready, found):
        out[i] = ((None, _note(pictures[i][0], lines)) if isinstance(lines, Exception)
                  else (text_facts(lines), ""))
    return out


def _note(path, e: Exception) -> str:
    """Why a picture's text was not read, in one line naming it."""
    if isinstance(e, ImageError):
        return f"{path}: {e}"
    if isinstance(e, MemoryError):
        return f"{path}: too large to read for text (out of memory)"
    return f"{path}: text not read ({type(e).__name__}: {e})"


__all__ = ["BUNDLED_MODELS", "DETECT_SIDE", "MAX_LINES", "MIN_SCORE", "OcrSettings", "READ_SIDE",
           "OcrUnavailable", "TextLine", "TextReader", "bundled_models", "fingerprint",
           "borrowed_reader", "lines_of", "phrase", "read_text_rasters", "read_texts", "shared_reader",
           "text_facts"]
