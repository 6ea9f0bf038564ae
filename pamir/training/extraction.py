"""The features phase of `fit_system`: every candidate's features (`candidate_features`),
fitted on the training pictures only, the pictures its fits read and their captions, and
the winner's features read again (`read_features`); and every picture's features under
one representation (`collection_inputs`, cached), which the benchmarks read the same way.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import scipy.sparse as sp

from .. import config
from ..data import Collection
from ..features import FeatureSettings, collection_features
from ..features.registry import (ColumnBlocks, Concatenation, as_matrix, make_representation,
                                 parse_name, release_networks, representation_name)
from ..features.representation import take_rows
from ..protocol import Protocol
from .plan import Candidate, Fitting
from .selection import prepare_for_fits

#: Where the extraction's steps go unless given `log` (quiet unless logging is configured).
logger = logging.getLogger(__name__)

#: A visterm codebook needs several training blocks per visterm; a small collection gets
#: the largest size it supports, at most this many blocks per visterm (k-means with fewer
#: points than centres cannot run, and with barely more each visterm is one block).
MIN_BLOCKS_PER_VISTERM = 10


def candidate_features(fitting: Fitting, collection: Collection) -> list[Candidate]:
    """The features phase: every candidate's features, one after another (extraction uses
    the cores itself), the pictures its fits read, and their captions."""
    f, s, protocol = fitting, fitting.settings, fitting.protocol
    inputs, prepared = s.inputs, []
    hold = _hold_features(inputs, f.candidates)
    for name, weights in f.candidates:
        started = time.perf_counter()
        F, ok, rep = inputs if inputs is not None else collection_inputs(
            collection, protocol, name, s.feature_settings, weights=weights,
            cnn_settings=s.cnn_settings, cache_dir=s.cache_dir, progress=s.progress, log=s.log,
            compact=True)
        name = representation_name(rep) if name is None else name
        release_networks(rep)
        feature_seconds = time.perf_counter() - started
        train, valid = protocol.train[ok[protocol.train]], protocol.valid[ok[protocol.valid]]
        for split, idx, full in (("train", train, protocol.train),
                                 ("valid", valid, protocol.valid)):
            if len(idx) < len(full):
                f.say(f"{len(full) - len(idx)} {split} pictures could not be read and are "
                      "left out")
        label = name + (f" (weights {', '.join(map(str, weights))})"
                        if weights and len(weights) > 1 else "")
        f.say(f"representation {label}: {feature_seconds:.1f} s of features")
        prepared.append(Candidate(name, weights, label, F, ok, rep, train, valid,
                                  feature_seconds, _stored_per_row(F),
                                  _fit_pictures(f.cls, F, train, valid),
                                  f.presence(train), f.presence(valid)))
        if not hold:
            prepared[-1].F = None  # read again from the cache if it wins
        del F
    f.timing["features"] = round(time.perf_counter() - f.started, 2)
    return prepared


def read_features(fitting: Fitting, collection: Collection, candidate: Candidate) -> None:
    """The winner's features again (from the feature cache) when they were let go during
    the grid (`_hold_features`)."""
    if candidate.F is None:
        s = fitting.settings
        candidate.F = collection_inputs(
            collection, fitting.protocol, candidate.name, s.feature_settings,
            weights=candidate.weights, cnn_settings=s.cnn_settings, cache_dir=s.cache_dir,
            progress=False, log=None, compact=True)[0]


def _fit_pictures(cls, F, train, valid) -> tuple:
    """(X_train, X_valid, X_valid_fit): a candidate's rows as its fits read them
    (selection.prepare_for_fits, once for every fit), and X_valid as given."""
    X_valid = as_matrix(take_rows(F, valid))
    X_fit, X_valid_fit = prepare_for_fits(cls, take_rows(F, train), X_valid)
    return X_fit, X_valid, X_valid_fit


def _hold_features(inputs, candidates) -> bool:
    """Whether fit_system keeps every candidate's features through the grid: when they were
    given (`inputs`: nothing to read them again from) or there is one candidate. Otherwise
    each candidate's F (every picture, all its parts: 0.4 GB for Corel 5k's widest) is let
    go once its fits' pictures are prepared, and the winner's read again from the feature
    cache (holding all six was 2 GB of the peak)."""
    return inputs is not None or len(candidates) == 1


def _stored_per_row(F) -> float:
    """Numbers stored per picture: what one PA update of a representation costs, roughly."""
    if sp.issparse(F) or isinstance(F, ColumnBlocks):
        return F.nnz / max(F.shape[0], 1)
    return float(np.prod(F.shape[1:])) if hasattr(F, "shape") else 0.0


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
    return _one_representation(collection, protocol.train, representation,
                               feature_settings or FeatureSettings(), cnn_settings, cache_dir,
                               progress, log)


def _one_representation(collection: Collection, train: np.ndarray, representation: str,
                        settings, cnn_settings, cache_dir, progress: bool, log):
    """collection_inputs of one representation (not a combination): fitted on the pictures
    `train`, every picture read."""
    if representation == "visterms":
        settings = supported_codebook(settings, len(train), log)
        X, ok, pipe = collection_features(collection, train, settings, cache_dir=cache_dir,
                                          progress=progress)
        return X, np.asarray(ok, bool), pipe
    rep = make_representation(representation, feature_settings=settings,
                              cnn_settings=cnn_settings, cache_dir=cache_dir, progress=progress)
    rep.fit([collection.paths[i] for i in train])
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


__all__ = ["MIN_BLOCKS_PER_VISTERM", "candidate_features", "collection_inputs",
           "read_features", "supported_codebook"]
