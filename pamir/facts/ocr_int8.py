"""The text detection network in int8: PP-OCR's DB detector quantized once per machine.

    choice = detector_choice(det_path, blob)  # the variant kept on this processor, and why
    source = detector_graph(det_path, blob)   # the quantized detector (a cached path, or its
                                              # bytes); Int8Unavailable if it cannot be made,
                                              # Unfaithful if no variant reads as fp32 does
    key = detector_key(det_path, blob)        # what the quantized graph depends on

Detection was most of the reader's cost (about 24 of 34 ms a Corel picture on one thread,
recognition being rare), and the detector is a small convolutional network, as the CNN views
are: it is quantized by the same quantizer (pamir.features.cnn_int8.quantize_graph: static
QDQ, weights int8 per channel, activations uint8, MinMax ranges). On the benchmarks' Intel
Xeon (AVX-512 VNNI) the network alone takes 4.9 against 24 ms a Corel picture, the reader
14.8 against 34.6 ms, reading the same painted words (benchmarks/results/text_sizes_per2.md,
ocr_int8.md).

Checked where it is made, as the CNN views are (pamir.features.cnn_int8's
`checked_graph`: the fastest variant that stays faithful, else fp32): each variant's reader
reads the calibration pictures beside the fp32 reader, and is kept when it reads at least
FAITHFUL_READS of the painted words that fp32 reads, in boxes within BOX_TOLERANCE of fp32's
(shares of the picture's sides). Where none does, the reader detects in fp32 and says why.

Calibration: pictures the code makes itself, so that the graph depends on no folder and no
test picture. scikit-image's photographs cropped as for the CNN (cnn_int8.calibration_pictures),
at the detector's size, with a word painted on every other one in Pillow's own scalable font:
photographs alone leave the ranges of a map that holds text uncalibrated, and text is what
the detector is for.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import PIL
from PIL import Image, ImageDraw, ImageFont

from pamir import config
from pamir.features.cnn_int8 import (
    Choice,
    Int8Unavailable,
    Unfaithful,
    calibration_digest,
    calibration_pictures,
    checked_graph,
)
from pamir.features.cnn_network import cpu_session

#: Bumped when the quantized detector's making changes (calibration, painting, quantizer,
#: the check: 2, issue 51).
QUANT_VERSION = 2
#: A variant is kept when it reads at least this share of the words painted on the
#: calibration pictures that the fp32 detector reads, their boxes within BOX_TOLERANCE of
#: fp32's (on this Xeon with VNNI each variant reads all 36 of 36; the unpainted
#: photographs' stray one-letter reads differ on 7-9 of 72 pictures, and are not counted).
FAITHFUL_READS = 0.97
#: The largest difference between a line's box and fp32's, as a share of the picture's
#: width or height, for the two to be the same read (tests/test_ocr_int8.py's tolerance).
BOX_TOLERANCE = 0.03
#: The calibration pictures' longest side: the reader's DETECT_SIDE, where the map's ranges
#: are what they are when pamir reads (kept here: this module cannot import the reader).
SIDE = 320
#: Words painted on the calibration pictures, as signs and labels show them.
WORDS = ("OPEN", "Bakery", "EXIT 12", "Museum of Art", "SALE -50%", "Hotel", "coffee",
         "STATION", "Pharmacy", "No parking", "TAXI", "Menu")
#: The painted words' letter heights, as shares of the picture's height: small to large.
HEIGHTS = (0.05, 0.08, 0.12, 0.2, 0.3, 0.45)


def detector_choice(det_path: Path, blob, reader=None, make: bool = True) -> Choice | None:
    """The variant of the quantized detector kept on this processor (made and checked
    against fp32 the first time, about 20-40 s on 2 cores), with its graph and fidelity;
    make=False: None where that has not been done.
    `blob(bgr, (w, h))`: a picture as the detector reads it (pamir.facts.ocr.TextReader._blob);
    reader(): a reader detecting in fp32 (pamir.facts.ocr.fp32_reader), for the check.
    Raises Int8Unavailable (or the quantizer's error) when it cannot be made."""
    base = {"detector": _digest(str(det_path)), "detector_quantization": QUANT_VERSION,
            "calibration": calibration_digest(), "side": SIDE, "words": WORDS,
            "heights": HEIGHTS, "pillow": PIL.__version__,
            "fidelity": [FAITHFUL_READS, BOX_TOLERANCE]}
    pictures = lru_cache(maxsize=None)(calibration_bgr)  # made only where the check runs
    measure = lru_cache(maxsize=None)(lambda: read_fidelity(pictures(), reader))  # fp32 once
    return checked_graph(config.default_cache_dir() / "onnx", det_path.stem,
                         "the text detection network", base, det_path.read_bytes,
                         lambda: [{"x": blob(bgr, _size(bgr))} for bgr in pictures()],
                         lambda graph: measure()(graph), make)


def detector_key(det_path: Path, blob, reader=None) -> str:
    """What the quantized detector depends on, hashed, the variant kept and its fidelity
    included: part of its file name."""
    choice = detector_choice(det_path, blob, reader)
    if choice.graph is None:
        raise Unfaithful(choice.says())
    return choice.key


@lru_cache(maxsize=None)
def _digest(path: str) -> str:
    return hashlib.blake2b(Path(path).read_bytes(), digest_size=16).hexdigest()


def detector_graph(det_path: Path, blob, reader=None) -> str | bytes:
    """The quantized detector for an ONNX Runtime session, made, checked and cached the
    first time on this processor (`detector_choice`). Raises Unfaithful where no variant
    reads as fp32 does here, Int8Unavailable (or the quantizer's error) when it cannot be
    made."""
    choice = detector_choice(det_path, blob, reader)
    if choice.graph is None:
        raise Unfaithful(choice.says())
    return choice.graph


def detector_session(det_path: Path, blob, reader, threads: int, arena: bool):
    """An ONNX Runtime session on the quantized detector (`detector_graph`): `threads`
    intra-op threads (0: ONNX Runtime's choice), its memory arena on or off."""
    return cpu_session(detector_graph(det_path, blob, reader), threads, arena)


def read_fidelity(pictures: list[np.ndarray], reader):
    """measure(graph) for `checked_graph`: of the words painted on the calibration
    `pictures` (BGR, `calibration_bgr`) that the fp32 reader reads, the share that a reader
    detecting with `graph` reads too, in a line whose box is within BOX_TOLERANCE of fp32's
    (`same_word`); and, for the record, on how many pictures all its lines are fp32's.
    reader(): a reader detecting in fp32 (pamir.facts.ocr.fp32_reader)."""
    if reader is None:
        raise Int8Unavailable("no fp32 reader to check the int8 detector against")
    reader = reader()
    if reader.detector is None:
        raise Int8Unavailable("rapidocr's detector is not at hand (another rapidocr)")
    reference = reader.read_many(pictures)
    fp32_session = reader.detector.session.session
    words = [painted_word(i) for i in range(len(pictures))]
    read = [i for i, w in enumerate(words) if w and _line_of(reference[i], w)]

    def measure(graph: bytes) -> dict:
        reader.detector.session.session = cpu_session(graph)
        try:
            reads = reader.read_many(pictures)
        finally:
            reader.detector.session.session = fp32_session
        same = sum(same_word(reads[i], reference[i], words[i]) for i in read)
        share = round(same / max(1, len(read)), 4)
        return {"words": len(read), "same": same, "share": share,
                "same_pictures": sum(same_lines(a, b) for a, b in zip(reads, reference)),
                "pictures": len(pictures), "faithful": share >= FAITHFUL_READS,
                "says": f"reads had {same} of the {len(read)} painted words fp32 reads"}

    return measure


def same_lines(lines: list, reference: list) -> bool:
    """All of a picture's lines read as in `reference`: the same texts in the same order,
    each box within BOX_TOLERANCE of the reference's (the confidences may differ)."""
    return [x.text for x in lines] == [y.text for y in reference] and all(
        float(np.abs(np.subtract(x.box, y.box)).max()) <= BOX_TOLERANCE
        for x, y in zip(lines, reference))


def painted_word(i: int) -> str | None:
    """The word painted on the calibration picture `i` (`calibration_bgr`), or None."""
    return WORDS[(i // 2) % len(WORDS)] if i % 2 else None


def _line_of(lines: list, word: str):
    """The first of `lines` whose words (lower case, letters and digits) hold `word`'s, in
    order, or None."""
    return next((line for line in lines if _words(word) in _words(line.text)), None)


def _words(text: str) -> str:
    return " " + " ".join(re.findall(r"\w+", text.lower())) + " "


def same_word(lines: list, reference: list, word: str) -> bool:
    """`word` is read in `lines` as in `reference` (fp32's): in a line whose box is within
    BOX_TOLERANCE of the reference line's (as shares of the picture's sides)."""
    a, b = _line_of(lines, word), _line_of(reference, word)
    return a is not None and b is not None and \
        float(np.abs(np.subtract(a.box, b.box)).max()) <= BOX_TOLERANCE


def _size(bgr: np.ndarray) -> tuple[int, int]:
    """(width, height) in multiples of 32, the longest side at most SIDE, as the reader
    sizes a picture for the detector."""
    h, w = bgr.shape[:2]
    r = min(1.0, SIDE / max(h, w))
    return max(32, round(w * r / 32) * 32), max(32, round(h * r / 32) * 32)


def calibration_bgr() -> list[np.ndarray]:
    """The calibration pictures (72, BGR uint8, their short side about 2/3 of SIDE), a word
    of WORDS painted on every other one (odd indices), its size and place seeded."""
    rng = np.random.default_rng(0)
    out = []
    for i, rgb in enumerate(calibration_pictures(round(SIDE * 2 / 3))):
        if painted_word(i):
            rgb = painted(rgb, painted_word(i), HEIGHTS[(i // 2) % len(HEIGHTS)], rng)
        out.append(np.ascontiguousarray(rgb[:, :, ::-1]))
    return out


def painted(rgb: np.ndarray, word: str, height: float, rng) -> np.ndarray:
    """`word` painted on the picture, its letters `height` of the picture's height, dark on
    a light plate or light on a dark one, at a seeded place (kept inside the picture)."""
    im = Image.fromarray(rgb)
    h, w = rgb.shape[:2]
    font = ImageFont.load_default(max(6, round(height * h)))
    x0, y0, x1, y1 = font.getbbox(word)
    while x1 - x0 > 0.9 * w and font.size > 6:  # a long word on a narrow picture
        font = ImageFont.load_default(font.size - 2)
        x0, y0, x1, y1 = font.getbbox(word)
    pad = max(2, font.size // 5)
    bw, bh = x1 - x0 + 2 * pad, y1 - y0 + 2 * pad
    left = int(rng.integers(0, max(1, w - bw)))
    top = int(rng.integers(0, max(1, h - bh)))
    dark = bool(rng.integers(2))
    ink, plate = ((20, 20, 20), (240, 235, 210)) if dark else ((255, 255, 255), (30, 60, 140))
    draw = ImageDraw.Draw(im)
    draw.rectangle((left, top, left + bw, top + bh), fill=plate)
    draw.text((left + pad - x0, top + pad - y0), word, font=font, fill=ink)
    return np.asarray(im)


__all__ = ["BOX_TOLERANCE", "FAITHFUL_READS", "HEIGHTS", "Int8Unavailable", "QUANT_VERSION",
           "SIDE", "WORDS", "calibration_bgr", "detector_choice", "detector_graph",
           "detector_key", "detector_session", "painted", "painted_word", "read_fidelity",
           "same_lines", "same_word"]
