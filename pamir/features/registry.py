"""Which representations exist, by name, and how a saved one is rebuilt.

    rep = make_representation("cnn+visterms", weights=(1.0, 0.5))
    rep = representation_from_saved(d, arrays)        # d, arrays from rep.to_dict/to_arrays

Names a user gives (`pamir fit --representation`): "visterms" (the papers' bags of visterms),
"blocks" (per-block descriptors, for BBNN and the block kernels), "cnn" (EfficientNet-Lite
features, pamir.features.cnn; lite0 at a 224-px short side by default), "cnn-lite2" (the
larger EfficientNet-Lite2 at 260 px with its 2x2 regions: a second view that pamir fit
concatenates with "cnn" and the visterms), the 2006 papers' "sift" (bags of DoG/SIFT visterms,
pamir.features.sift), "blobs" (Duygulu et al.'s Blobs made here for any picture) and
"blobs-arff" (Duygulu's own blobs, Corel 5k only; pamir.features.blobs), and
concatenations such as "cnn+visterms" or "blobs+sift". docs/representations.md describes
each with its costs and measured figures.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .pipeline import BlockPipeline, VisualPipeline
from .representation import Extracted
from .settings import FeatureSettings

#: What each name is made of, and what it gives ("bags": non-negative visterm bags;
#: "vectors": any picture matrix; "blocks": per-block descriptors).
NAMES = {"visterms": "bags", "blocks": "blocks", "cnn": "vectors", "cnn-lite1": "vectors",
         "cnn-lite2": "vectors", "sift": "bags", "blobs": "bags", "blobs-arff": "bags"}

#: CNN representations with settings of their own: the CNNSettings given for "cnn" with
#: these changed. Validation (PAMIR, Corel 5k, square-rooted features): cnn+visterms 43.90,
#: cnn+cnn-lite2+visterms 45.42; cnn-lite2+visterms alone 43.27; the three networks with the
#: visterms (cnn+cnn-lite1+cnn-lite2+visterms) 46.66 (benchmarks/results/cnn.md).
CNN_PRESETS = {"cnn-lite1": {"model": "lite1", "short_side": 240, "regions": 2},
               "cnn-lite2": {"model": "lite2", "short_side": 260, "regions": 2}}

#: The user-facing name of each saved representation `kind`.
KIND_NAMES = {"visual_pipeline": "visterms", "block_pipeline": "blocks",
              "sift_visterms": "sift", "blobs_arff": "blobs-arff"}


def parse_name(name: str) -> list[str]:
    parts = [p.strip() for p in str(name).split("+")]
    bad = [p for p in parts if p not in NAMES]
    if bad or not parts:
        raise ValueError(f"representation {name!r}: use one of {', '.join(NAMES)} or a "
                         "combination such as cnn+visterms or blobs+sift")
    if len(parts) > 1 and "blocks" in parts:
        raise ValueError(f"representation {name!r}: blocks cannot be combined")
    return parts


def output_of(name: str) -> str:
    """What a named representation gives its model."""
    parts = parse_name(name)
    return NAMES[parts[0]] if len(parts) == 1 else "vectors"


def takes(model_input: str, name: str) -> bool:
    """Whether a model whose `input` is model_input can read the representation `name`."""
    out = output_of(name)
    return out == model_input or (model_input == "vectors" and out == "bags")


def make_representation(name: str, *, feature_settings: FeatureSettings | None = None,
                        cnn_settings=None, weights=None, cache_dir=None, progress=True,
                        sift_visterms: int | None = None, blob_settings=None):
    """An unfitted representation of that name (weights: one per part of a combination;
    sift_visterms: the SIFT codebook size, SIFT_VISTERMS by default; blob_settings: a
    pamir.features.blobs.BlobSettings)."""
    parts = []
    for part in parse_name(name):
        if part == "sift":
            from .sift import SIFT_VISTERMS, SiftVisterms  # noqa: PLC0415

            parts.append(SiftVisterms(sift_visterms or SIFT_VISTERMS, cache_dir=cache_dir,
                                      progress=progress))
        elif part == "blobs":
            from .blobs import SegmentedBlobs  # noqa: PLC0415

            parts.append(SegmentedBlobs(blob_settings, cache_dir=cache_dir, progress=progress))
        elif part == "blobs-arff":
            from .blobs import ArffBlobs  # noqa: PLC0415

            parts.append(ArffBlobs(cache_dir=cache_dir, progress=progress))
        elif part == "visterms":
            parts.append(VisualPipeline(feature_settings, cache_dir=cache_dir,
                                        progress=progress))
        elif part == "blocks":
            parts.append(BlockPipeline(feature_settings, cache_dir=cache_dir,
                                       progress=progress))
        else:
            from .cnn import CNNRepresentation, CNNSettings  # heavy: torch, onnxruntime

            settings = cnn_settings or CNNSettings()
            if part in CNN_PRESETS:
                settings = settings.replace(**CNN_PRESETS[part])
            parts.append(CNNRepresentation(settings, cache_dir=cache_dir, progress=progress))
    if len(parts) == 1:
        return parts[0]
    return Concatenation(parts, weights or [1.0] * len(parts))


class Concatenation:
    """Representations side by side, each scaled by its weight: [w_1 x_1, w_2 x_2, ...].

    Each part keeps its own normalisation (unit L2 rows for visterms and cnn), so a weight is
    the share of the part in a dot product; the weights are chosen on validation
    (`pamir fit` tries COMBINATION_WEIGHTS for the second part). The result is CSR: the
    sparse bags stay sparse beside the dense part, which is what PAMIR's updates walk.
    """

    kind = "concatenation"
    output = "vectors"

    def __init__(self, parts, weights):
        if len(parts) != len(weights) or len(parts) < 2:
            raise ValueError("a combination needs two or more representations, one weight each")
        if any(p.output == "blocks" for p in parts):
            raise ValueError("block descriptors cannot be concatenated with picture vectors")
        self.parts = list(parts)
        self.weights = [float(w) for w in weights]

    @property
    def name(self) -> str:
        return "+".join(representation_name(p) for p in self.parts)

    def combine(self, matrices) -> sp.csr_matrix:
        return sp.hstack([sp.csr_matrix(M, dtype=np.float32) * w
                          for M, w in zip(matrices, self.weights)]).tocsr()

    def fit(self, train_paths) -> "Concatenation":
        for p in self.parts:
            p.fit(train_paths)
        return self

    def transform(self, paths) -> Extracted:
        paths = list(paths)
        done = [p.transform(paths) for p in self.parts]
        ok = np.logical_and.reduce([d.ok for d in done])
        reasons = [next((d.reasons[i] for d in done if d.reasons[i]), None) if not ok[i]
                   else None for i in range(len(paths))]
        return Extracted(self.combine([d.X for d in done]), ok, reasons)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "weights": self.weights,
                "parts": [p.to_dict() for p in self.parts]}

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {f"{i}/{k}": v for i, p in enumerate(self.parts)
                for k, v in p.to_arrays().items()}

    @classmethod
    def from_saved(cls, d: dict, arrays: dict, **kwargs) -> "Concatenation":
        parts = []
        for i, part in enumerate(d["parts"]):
            mine = {k.partition("/")[2]: v for k, v in arrays.items() if k.startswith(f"{i}/")}
            parts.append(representation_from_saved(part, mine, **kwargs))
        return cls(parts, d["weights"])


def representation_class(kind: str):
    """The class of a saved representation's `kind`. The CNN is imported only when asked
    for: torch and onnxruntime are heavy optional dependencies of the picture side."""
    if kind == "cnn":
        from .cnn import CNNRepresentation  # heavy optional dependency: torch, onnxruntime

        return CNNRepresentation
    from .blobs import ArffBlobs, SegmentedBlobs  # noqa: PLC0415
    from .sift import SiftVisterms  # noqa: PLC0415

    classes = {VisualPipeline.kind: VisualPipeline, BlockPipeline.kind: BlockPipeline,
               Concatenation.kind: Concatenation, SiftVisterms.kind: SiftVisterms,
               SegmentedBlobs.kind: SegmentedBlobs, ArffBlobs.kind: ArffBlobs}
    if kind not in classes:
        raise ValueError(f"unknown representation kind {kind!r}; this pamir knows "
                         f"{', '.join([*classes, 'cnn'])}: was the model made by a newer one?")
    return classes[kind]


def representation_from_saved(d: dict, arrays: dict, **kwargs):
    return representation_class(d.get("kind")).from_saved(d, arrays, **kwargs)


def representation_name(rep) -> str:
    """The user-facing name: visterms, blocks, cnn, cnn-lite2, sift, blobs, cnn+visterms, ..."""
    if isinstance(rep, Concatenation):
        return rep.name
    for name, preset in CNN_PRESETS.items():
        if rep.kind == "cnn" and all(getattr(rep.settings, k) == v for k, v in preset.items()):
            return name
    return KIND_NAMES.get(rep.kind, rep.kind)


__all__ = ["CNN_PRESETS", "Concatenation", "KIND_NAMES", "NAMES", "make_representation",
           "output_of", "parse_name",
           "representation_class", "representation_from_saved", "representation_name", "takes"]
