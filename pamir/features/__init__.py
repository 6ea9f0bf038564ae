"""Visual features: blocks, uniform LBP + colour histograms, visterms, tf-idf bags.

    from pamir.features import FeatureSettings, VisualPipeline, corel5k_features
    collection, protocol, X = corel5k_features()          # cached under .cache/

Pictures -> (images) RGB -> (blocks) 77 blocks x (59 LBP + 50 colour counts) -> (visterms)
scaled, nearest of K codewords -> tf-idf bag, L2-normalised (scipy.sparse CSR).
"""

import importlib

#: Where each name lives: imported on first use (PEP 562), so that `pamir.features.settings`
#: and the `pamir` command's help do not pay for numba, scipy and OpenCV.
_HOMES = {
    "load_blobs": "blobs", "block_grid": "blocks", "block_histograms": "blocks",
    "collection_features": "collection", "corel5k_features": "collection",
    "ColourCodebook": "colour", "BlockSet": "extract", "extract_blocks": "extract",
    "iter_blocks": "extract", "ImageError": "images", "decode_rgb": "images",
    "load_rgb": "images", "PictureVisterms": "pipeline", "VisualPipeline": "pipeline",
    "SCALINGS": "settings", "FeatureSettings": "settings",
}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "BlockSet", "ColourCodebook", "FeatureSettings", "ImageError", "PictureVisterms", "SCALINGS",
    "VisualPipeline", "block_grid", "block_histograms", "collection_features",
    "corel5k_features", "decode_rgb", "extract_blocks", "iter_blocks", "load_blobs", "load_rgb",
]
