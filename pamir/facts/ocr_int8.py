"""The text detection network in int8: PP-OCR's DB detector quantized once per machine.

    source = detector_graph(det_path, blob)   # the quantized detector (a cached path, or
                                              # its bytes); Int8Unavailable if it cannot be made
    key = detector_key(det_path)              # what the quantized graph depends on

Detection was most of the reader's cost (about 24 of 34 ms a Corel picture on one thread,
recognition being rare), and the detector is a small convolutional network, as the CNN views
are: it is quantized by the same quantizer (pamir.features.cnn_int8.quantize_graph: static
QDQ, weights int8 per channel, activations uint8, MinMax ranges). On the benchmarks' Intel
Xeon (AVX-512 VNNI) the network alone takes 4.9 against 24 ms a Corel picture, the reader
14.8 against 34.6 ms, reading the same painted words (benchmarks/results/text_sizes_per2.md,
ocr_int8.md).

Calibration: pictures the code makes itself, so that the graph depends on no folder and no
test picture. scikit-image's photographs cropped as for the CNN (cnn_int8.calibration_pictures),
at the detector's size, with a word painted on every other one in Pillow's own scalable font:
photographs alone leave the ranges of a map that holds text uncalibrated, and text is what
the detector is for.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from pamir import config
from pamir.features.cnn_network import cpu_session
from pamir.features.cnn_int8 import (Int8Unavailable, onnxruntime_version, cached_graph,
                                     calibration_digest, calibration_pictures, quantize_graph)

#: Bumped when the quantized detector's making changes (calibration, painting, quantizer).
QUANT_VERSION = 1
#: The calibration pictures' longest side: the reader's DETECT_SIDE, where the map's ranges
#: are what they are when pamir reads (kept here: this module cannot import the reader).
SIDE = 320
#: Words painted on the calibration pictures, as signs and labels show them.
WORDS = ("OPEN", "Bakery", "EXIT 12", "Museum of Art", "SALE -50%", "Hotel", "coffee",
         "STATION", "Pharmacy", "No parking", "TAXI", "Menu")
#: The painted words' letter heights, as shares of the picture's height: small to large.
HEIGHTS = (0.05, 0.08, 0.12, 0.2, 0.3, 0.45)


def detector_key(det_path: Path) -> str:
    """What the quantized detector depends on, hashed: part of its file name."""
    import PIL  # noqa: PLC0415 - the painted words' font and rendering

    what = {"detector": _digest(str(det_path)), "quantization": QUANT_VERSION,
            "calibration": calibration_digest(), "side": SIDE, "words": WORDS,
            "heights": HEIGHTS, "pillow": PIL.__version__,
            "onnxruntime": onnxruntime_version()}
    return hashlib.blake2b(json.dumps(what, sort_keys=True).encode(), digest_size=8).hexdigest()


@lru_cache(maxsize=None)
def _digest(path: str) -> str:
    return hashlib.blake2b(Path(path).read_bytes(), digest_size=16).hexdigest()


def detector_path(det_path: Path) -> Path:
    """Where the quantized detector is cached: with the CNN's ONNX graphs."""
    return (config.default_cache_dir() / "onnx"
            / f"{det_path.stem}-int8-{detector_key(det_path)}.onnx")


def detector_graph(det_path: Path, blob) -> str | bytes:
    """The quantized detector for an ONNX Runtime session, made and cached the first time on
    this machine (about 10-30 s on 2 cores). `blob(bgr, (w, h))`: a picture as the detector
    reads it (pamir.facts.ocr.TextReader._blob). Raises Int8Unavailable (or the quantizer's
    error) when it cannot be made."""
    return cached_graph(detector_path(det_path), lambda: quantize_detector(det_path, blob),
                        "the text detection network")


def detector_session(det_path: Path, blob, threads: int, arena: bool):
    """An ONNX Runtime session on the quantized detector (`detector_graph`): `threads`
    intra-op threads (0: ONNX Runtime's choice), its memory arena on or off."""
    return cpu_session(detector_graph(det_path, blob), threads, arena)


def quantize_detector(det_path: Path, blob) -> bytes:
    """The detector quantized, calibrated on `calibration_bgr`; checked to load and to
    give a finite map before it is returned."""
    feeds = [blob(bgr, _size(bgr)) for bgr in calibration_bgr()]
    data = quantize_graph(det_path.read_bytes(), ({"x": x} for x in feeds))
    _check(data, feeds[1])
    return data


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
        if i % 2:
            rgb = painted(rgb, WORDS[(i // 2) % len(WORDS)],
                          HEIGHTS[(i // 2) % len(HEIGHTS)], rng)
        out.append(np.ascontiguousarray(rgb[:, :, ::-1]))
    return out


def painted(rgb: np.ndarray, word: str, height: float, rng) -> np.ndarray:
    """`word` painted on the picture, its letters `height` of the picture's height, dark on
    a light plate or light on a dark one, at a seeded place (kept inside the picture)."""
    from PIL import Image, ImageDraw, ImageFont  # noqa: PLC0415

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


def _check(data: bytes, x: np.ndarray) -> None:
    detection_map = cpu_session(data).run(None, {"x": x})[0]
    if not np.isfinite(detection_map).all() or detection_map.max() <= 0:
        raise Int8Unavailable("the quantized text detector gives no usable map")


__all__ = ["HEIGHTS", "Int8Unavailable", "QUANT_VERSION", "SIDE", "WORDS", "calibration_bgr",
           "detector_graph", "detector_key", "detector_path", "detector_session", "painted",
           "quantize_detector"]
