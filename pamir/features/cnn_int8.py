"""int8 CNN views: the exported EfficientNet-Lite trunk quantized by ONNX Runtime.

    source = int8_graph("lite0")      # the quantized trunk (a cached path, or its bytes)
    key = int8_key("lite0")           # what the quantized graph depends on: in cache keys
    int8_available()                  # None, or why quantization cannot run here
    quantize_graph(fp32, feeds)       # any ONNX graph, calibrated on feeds: pamir's one
                                      # quantizer (text detection's too: pamir.facts.ocr_int8)

Static QDQ quantization, per channel: weights int8 per output channel, activations uint8
per tensor with ranges calibrated once (MinMax) on CALIBRATION, a fixed set of pictures.
EfficientNet-Lite was made for it (ReLU6, no squeeze-excite). The graph is made once per
machine and kept beside the fp32 export (cnn_network.onnx_path), its name keyed by
`int8_key`: the weights, the export and quantization code, ONNX Runtime's version and the
calibration pictures' bytes, all that the quantized file depends on; on one machine the same
key gives the same bytes (tests/test_cnn_int8.py).

Why uint8 activations (U8S8) and not int8 ones (S8S8, ORT's default for QDQ): on the 2-core
AMD EPYC with AVX-512 VNNI that runs the benchmarks, lite0 at a 224-px short side, one
picture a call, one thread: fp32 43.1 pictures/s, S8S8 48.6, U8S8 70.3, their pooled vectors
equally close to fp32's (cosine 0.991 on average on 200 Corel pictures, 0.96 at the worst).
ORT's note on U8S8: on x86 CPUs without VNNI its AVX2 kernel may saturate; there the
features would still be what this machine computes (the feature cache is per machine), and
`precision = "fp32"` keeps the reference.

Why a fixed calibration set, and this one: the zero-caption path (`pamir index FOLDER`) has
no training pictures, and calibrating on a folder's pictures would make the quantized graph,
and so every cached vector, depend on the folder. scikit-image (a base dependency) ships six
photographs in its wheel; their crops and mirror images give 72 pictures. Measured against
64 random Corel 5k pictures as the calibration set (the earlier probe): cosine to
fp32 0.9909 mean / 0.961 worst against 0.9913 / 0.966, on 200 other Corel pictures.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from .cnn_network import EXPORT_VERSION, MODELS, cache_bytes, cpu_session, export_onnx, \
    onnx_path, weights_digest

log = logging.getLogger(__name__)

#: The precisions a CNN view runs at (pamir.features.cnn.CNNSettings.precision).
PRECISIONS = ("fp32", "int8")

#: Bumped when the quantization code changes the quantized graph: part of `int8_key`.
QUANT_VERSION = 1

#: The calibration pictures: scikit-image's packaged photographs (files of skimage.data).
CALIBRATION = ("astronaut.png", "coffee.png", "chelsea.png", "rocket.jpg",
               "motorcycle_left.png", "motorcycle_right.png")
#: Each photograph calibrates whole, as its four corner crops of 2/3 of its sides and its
#: centre crop of 2/3, each also mirrored: 6 x 6 x 2 = 72 pictures, resized to the model's
#: own resolution (its shorter side), as pictures are before the network.
CROP = 2 / 3


class Int8Unavailable(RuntimeError):
    """Quantization cannot run here (its package, the calibration pictures or the graph)."""


def int8_available() -> str | None:
    """None when ONNX Runtime's quantization tools import, else why not (one line)."""
    try:
        import onnxruntime.quantization  # noqa: F401, PLC0415
    except Exception as e:  # noqa: BLE001 - any failure to import means no int8 here
        return f"onnxruntime.quantization does not import ({type(e).__name__}: {e})"
    return None


# ------------------------------------------------------------------------ calibration

def _calibration_files() -> list[tuple[str, bytes]]:
    import importlib.resources  # noqa: PLC0415

    folder = importlib.resources.files("skimage.data")
    try:
        return [(name, (folder / name).read_bytes()) for name in CALIBRATION]
    except OSError as e:
        raise Int8Unavailable(f"scikit-image's calibration photographs are missing ({e})") \
            from None


@lru_cache(maxsize=None)
def calibration_digest() -> str:
    """Content hash of the calibration photographs (and of how they are cropped)."""
    h = hashlib.blake2b(f"crop={CROP}".encode(), digest_size=16)
    for name, data in _calibration_files():
        h.update(name.encode())
        h.update(data)
    return h.hexdigest()


def calibration_pictures(short_side: int) -> list[np.ndarray]:
    """The 72 calibration pictures, (H, W, 3) uint8 with shorter side `short_side`."""
    from .images import decode_rgb, resize_short_side  # noqa: PLC0415

    pictures = []
    for _, data in _calibration_files():
        rgb = decode_rgb(data)
        h, w = rgb.shape[:2]
        ch, cw = int(h * CROP), int(w * CROP)
        crops = [rgb, rgb[:ch, :cw], rgb[:ch, w - cw:], rgb[h - ch:, :cw], rgb[h - ch:, w - cw:],
                 rgb[(h - ch) // 2:(h - ch) // 2 + ch, (w - cw) // 2:(w - cw) // 2 + cw]]
        for crop in crops:
            for picture in (crop, crop[:, ::-1]):
                pictures.append(resize_short_side(np.ascontiguousarray(picture), short_side))
    return pictures


# -------------------------------------------------------------------------- the graph

def int8_key(model: str) -> str:
    """What the quantized graph of `model` depends on, hashed: part of its file name and of
    the int8 feature cache's key, so int8 vectors never mix with fp32 ones or with another
    quantization's."""
    what = {"model": model, "weights": weights_digest(model), "export": EXPORT_VERSION,
            "quantization": QUANT_VERSION, "calibration": calibration_digest(),
            "onnxruntime": onnxruntime_version()}
    return hashlib.blake2b(json.dumps(what, sort_keys=True).encode(), digest_size=8).hexdigest()


def onnxruntime_version() -> str | None:
    """The installed ONNX Runtime's version (whichever build: onnxruntime, -gpu, ...)."""
    try:
        import onnxruntime  # noqa: PLC0415
        return onnxruntime.__version__
    except Exception:  # noqa: BLE001 - no ONNX Runtime: int8 cannot run, the key is moot
        return None


def int8_path(model: str) -> Path:
    """Where the quantized trunk of `model` is cached: beside its fp32 export."""
    fp32 = onnx_path(model)
    return fp32.with_name(f"{fp32.stem}-int8-{int8_key(model)}.onnx")


def quantize(model: str) -> bytes:
    """The quantized trunk of `model`, made from its fp32 export (exported first if need
    be) by `quantize_graph`, calibrated on CALIBRATION. Checked to load and give finite
    vectors before it is returned."""
    pictures = calibration_pictures(MODELS[model].resolution)
    fp32 = onnx_path(model)
    data = quantize_graph(fp32.read_bytes() if fp32.is_file() else _export(model),
                          ({"pixels": picture[None]} for picture in pictures))
    _check(data, pictures[0])
    return data


def quantize_graph(fp32: bytes, feeds) -> bytes:
    """pamir's one int8 quantizer: ONNX Runtime's pre-processing, then static QDQ
    quantization, per channel (weights int8 per output channel, activations uint8 per
    tensor: see the module's docstring), ranges calibrated by MinMax on `feeds` (an iterable
    of the graph's input dicts). A graph of an opset before 13 is converted to 13 first:
    per-channel DequantizeLinear needs it."""
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod,  # noqa: PLC0415
                                          QuantFormat, QuantType, quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process  # noqa: PLC0415

    class Feeds(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter(feeds)

        def get_next(self):
            return next(self.feeds, None)

    with tempfile.TemporaryDirectory(prefix="pamir-int8-") as tmp:
        source, prepared, out = (Path(tmp) / n for n in ("fp32.onnx", "pre.onnx", "int8.onnx"))
        source.write_bytes(_opset13(fp32))
        # shape inference and graph fusions first, as ORT advises for static quantization;
        # the batch, height and width stay dynamic (no symbolic shape inference needed)
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
        quantize_static(str(prepared), str(out), Feeds(),
                        quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax)
        return out.read_bytes()


def _opset13(data: bytes) -> bytes:
    """The graph as it is where its default opset is 13 or later, else converted to 13."""
    import onnx  # noqa: PLC0415
    from onnx import version_converter  # noqa: PLC0415

    graph = onnx.load_from_string(data)
    if max((o.version for o in graph.opset_import if o.domain in ("", "ai.onnx")),
           default=13) >= 13:
        return data
    return version_converter.convert_version(graph, 13).SerializeToString()


def _export(model: str) -> bytes:
    data = export_onnx(model)
    cache_bytes(onnx_path(model), data)
    return data


def _check(data: bytes, picture: np.ndarray) -> None:
    pooled = cpu_session(data).run(None, {"pixels": picture[None]})[0]
    if not np.isfinite(pooled).all() or not pooled.any():
        raise Int8Unavailable("the quantized network gives no usable vectors")


_LOCK = threading.Lock()
#: Quantized graphs that could not be kept in the cache (a read-only cache), by file.
_IN_MEMORY: dict[Path, bytes] = {}


def int8_graph(model: str) -> str | bytes:
    """The quantized trunk of `model` for an ONNX Runtime session: the cached file's path,
    made (quantize, about 5-20 s for a model on 2 cores) and cached the first time on this
    machine. Raises Int8Unavailable (or the quantizer's error) when it cannot be made."""
    return cached_graph(int8_path(model), lambda: quantize(model), f"the {model} network")


def cached_graph(path: Path, make, what: str) -> str | bytes:
    """A quantized graph for an ONNX Runtime session: `path` if it is there, else made by
    `make()` (once per machine: logged) and kept at `path`; its bytes where the cache cannot
    keep it. Raises Int8Unavailable (or the quantizer's error) when it cannot be made."""
    reason = int8_available()
    if reason:
        raise Int8Unavailable(reason)
    with _LOCK:
        if path.is_file():
            return str(path)
        if path in _IN_MEMORY:
            return _IN_MEMORY[path]
        log.info("quantizing %s to int8 (once on this machine)", what)
        data = make()
        cache_bytes(path, data)
        if path.is_file():
            return str(path)
        _IN_MEMORY[path] = data
        return data


__all__ = ["CALIBRATION", "Int8Unavailable", "PRECISIONS", "QUANT_VERSION", "cached_graph",
           "calibration_digest", "calibration_pictures", "int8_available", "int8_graph",
           "int8_key", "int8_path", "onnxruntime_version", "quantize", "quantize_graph"]
