"""Visual features: blocks, uniform LBP + colour histograms, visterms, tf-idf bags.

    from pamir.features import FeatureSettings, VisualPipeline, corel5k_features
    collection, protocol, X = corel5k_features()          # cached under .cache/

Pictures -> (images) RGB -> (blocks) 77 blocks x (59 LBP + 50 colour counts) -> (visterms)
scaled, nearest of K codewords -> tf-idf bag, L2-normalised (scipy.sparse CSR).
"""

from .blobs import load_blobs
from .blocks import block_grid, block_histograms
from .collection import collection_features, corel5k_features
from .colour import ColourCodebook
from .extract import BlockSet, extract_blocks, iter_blocks
from .images import ImageError, decode_rgb, load_rgb
from .pipeline import PictureVisterms, VisualPipeline
from .settings import SCALINGS, FeatureSettings

__all__ = [
    "BlockSet", "ColourCodebook", "FeatureSettings", "ImageError", "PictureVisterms", "SCALINGS",
    "VisualPipeline", "block_grid", "block_histograms", "collection_features",
    "corel5k_features", "decode_rgb", "extract_blocks", "iter_blocks", "load_blobs", "load_rgb",
]
