"""The representations `pamir fit` chooses among, and their features: which candidates a
model is tried on (DEFAULT_REPRESENTATIONS, the combinations' weights, the small-folder
rule), and every picture's features under one of them, fitted on the training pictures only
(`collection_inputs`, cached). pamir.training's first phase runs these; the benchmarks read
features the same way.
"""

from __future__ import annotations

import logging

import numpy as np

from .. import config
from ..config import DEFAULT_REPRESENTATIONS
from ..data import Collection
from ..features import FeatureSettings, collection_features
from ..features.registry import Concatenation, make_representation, output_of, parse_name, takes
from ..models import model_class
from ..protocol import Protocol

#: Where the candidates' steps go unless given `log` (quiet unless logging is configured).
logger = logging.getLogger(__name__)

# DEFAULT_REPRESENTATIONS (pamir.config): the representations `pamir fit` chooses among.
COMBINATION_WEIGHTS = (0.5, 1.0)
#: Combinations of three or more parts are tried at these weights only (each point costs a
#: PAMIR fit on 18,000 to 24,000 dimensions): on Corel 5k cnn+cnn-lite2+visterms gave
#: validation AvgP 45.42 at (1, 1, 1) against 45.24 with cnn-lite2 at 0.7, and other
#: weights move it by less than a seed does (benchmarks/results/cnn_plateau.md).
WIDE_COMBINATION_WEIGHTS = (1.0,)

#: A folder with fewer captioned pictures than this fits only the richest default
#: representation (the last of DEFAULT_REPRESENTATIONS the model reads), not every
#: candidate: on Corel 5k subsamples of 700 captioned pictures (5 seeds,
#: benchmarks/results/small_selection.md) it won the validation every time, each narrower
#: candidate scored below it on validation and on test, and choosing its c on validation
#: rather than keeping the default gained 0.15 test AvgP on average (sd over seeds 0.3-0.5).
#: At 1,500 (3 seeds of Corel's training pictures, benchmarks/results/folder_rule.md) the
#: one fit did as well on Corel's 500 validation pictures, which neither path saw: the race
#: chose the same point twice, and once a narrower one that did 0.77 worse; 27 s against
#: 81 s. At 2,000 and 4,000 the race chose the richest too (fit_memory.md, fit_speed.md).
#: The other candidates and the grid cannot pay there: one fit, the model's defaults.
SMALL_FOLDER_PICTURES = 2_000

#: A visterm codebook needs several training blocks per visterm; a small collection gets
#: the largest size it supports, at most this many blocks per visterm (k-means with fewer
#: points than centres cannot run, and with barely more each visterm is one block).
MIN_BLOCKS_PER_VISTERM = 10


def representation_candidates(model: str, names=None, model_params: dict | None = None
                              ) -> list[tuple[str, tuple]]:
    """(name, weights) pairs to try for a model: `names` (one name or several) or the
    defaults, kept to what the model reads."""
    model_input = model_class(model)(**(model_params or {})).input
    asked = [names] if isinstance(names, str) else list(names or ())
    pool = asked or ([r for r in DEFAULT_REPRESENTATIONS] if model_input != "blocks"
                     else ["blocks"])
    out = []
    for name in pool:
        parts = parse_name(name)
        if not takes(model_input, name):
            if asked:
                raise ValueError(f"{model} reads {model_input}, and the {name} representation "
                                 f"gives {output_of(name)}; choose another representation")
            continue
        if len(parts) == 1:
            out.append((name, (1.0,)))
        else:
            weights = COMBINATION_WEIGHTS if len(parts) == 2 else WIDE_COMBINATION_WEIGHTS
            out += [(name, (1.0,) + (w,) * (len(parts) - 1)) for w in weights]
    return out


def collection_inputs(collection: Collection, protocol: Protocol, representation: str = "visterms",
                      feature_settings=None, *, weights=None, cnn_settings=None,
                      cache_dir=None, progress: bool = True, log=logger.info,
                      compact: bool = False):
    """(F, ok, representation): the features of every picture of `collection`, the
    representation fitted on protocol.train only. Everything is cached under cache_dir
    (visterm bags and pipelines by pamir.features.collection, CNN features per picture).
    compact: a combination's F is its parts side by side (ColumnBlocks, what fit_system
    reads), not their CSR."""
    cache_dir = config.default_cache_dir() if cache_dir is None else cache_dir
    parts = parse_name(representation)
    if len(parts) > 1:
        done = [collection_inputs(collection, protocol, part, feature_settings,
                                  cnn_settings=cnn_settings, cache_dir=cache_dir,
                                  progress=progress, log=log) for part in parts]
        rep = Concatenation([d[2] for d in done], weights or [1.0] * len(parts))
        ok = np.logical_and.reduce([d[1] for d in done])
        matrices = [d[0] for d in done]
        return (rep.stack(matrices) if compact else rep.combine(matrices)), ok, rep
    settings = feature_settings or FeatureSettings()
    train_paths = [collection.paths[i] for i in protocol.train]
    if representation == "visterms":
        settings = supported_codebook(settings, len(train_paths), log)
        X, ok, pipe = collection_features(collection, protocol.train, settings,
                                          cache_dir=cache_dir, progress=progress)
        return X, np.asarray(ok, bool), pipe
    rep = make_representation(representation, feature_settings=settings,
                              cnn_settings=cnn_settings, cache_dir=cache_dir, progress=progress)
    rep.fit(train_paths)
    F, ok, _ = rep.transform(collection.paths)
    return F, np.asarray(ok, bool), rep


def supported_codebook(settings, n_train: int, log=logger.info):
    """The settings with a visterm codebook the training pictures can support (see
    MIN_BLOCKS_PER_VISTERM), said when it is smaller than asked."""
    blocks = n_train * settings.blocks_per_picture_estimate
    most = max(1, int(blocks // MIN_BLOCKS_PER_VISTERM))
    if settings.n_visterms <= most:
        return settings
    if log:
        log(f"{n_train} training pictures (~{blocks:,} blocks) support {most:,} visterms, not "
            f"{settings.n_visterms:,}: using {most:,} (caption more pictures for more)")
    return settings.replace(n_visterms=most)


def small_folder_candidates(candidates, representation, inputs, protocol) -> dict | None:
    """What a small folder leaves out of the default candidates (SMALL_FOLDER_PICTURES):
    {"what", "why"}, or None when every candidate runs (representations named by the
    caller, features given, or enough captioned pictures)."""
    n = len(protocol.development)
    if representation is not None or inputs is not None or len(candidates) < 2 \
            or n >= SMALL_FOLDER_PICTURES:
        return None
    return {"what": [name for name, _ in candidates[:-1]],
            "why": f"{n:,} captioned pictures (under {SMALL_FOLDER_PICTURES:,}): the richest "
                   "representation does as well there (Corel 5k subsamples of 700 and "
                   f"1,500), so the {len(candidates) - 1} narrower candidates are skipped"}


__all__ = ["COMBINATION_WEIGHTS", "DEFAULT_REPRESENTATIONS", "MIN_BLOCKS_PER_VISTERM",
           "SMALL_FOLDER_PICTURES", "WIDE_COMBINATION_WEIGHTS", "collection_inputs",
           "representation_candidates", "small_folder_candidates", "supported_codebook"]
