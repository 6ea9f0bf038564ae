"""Bags of visterms for a whole collection, fitted on its training pictures and cached.

    collection, protocol, X = corel5k_features()     # X: (5,000 x 10,000) CSR, rows unit L2

The pipeline is fitted on the training pictures only (protocol.train: 4,000 on Corel 5k, never
validation or test) and transforms every picture of the collection. Pipeline and bags are
cached under cache_dir/pipelines/<key>/, the key made of the settings and the training
pictures' ids, so every model and baseline reuses them without recomputing.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .. import config
from ..data import Collection, load_corel5k
from ..protocol import Protocol
from .colour import ColourCodebook
from .cache import atomic_write, csr_from_arrays, csr_to_arrays, load_npz, save_npz
from .pipeline import VisualPipeline
from .settings import JOBS, FeatureSettings

log = logging.getLogger(__name__)


def _ids_digest(ids: list[str]) -> str:
    return hashlib.blake2b("\n".join(ids).encode(), digest_size=8).hexdigest()


def pipeline_key(settings: FeatureSettings, train_ids: list[str]) -> str:
    return settings.digest(_ids_digest(train_ids))


def training_pictures(collection: Collection) -> np.ndarray:
    """The pictures features are learnt on: the protocol's train split, or every picture of
    a collection without captions to split."""
    try:
        return Protocol(collection).train
    except ValueError:
        return np.arange(len(collection))


def colour_codebook_for(
    collection: Collection, train: np.ndarray, settings: FeatureSettings,
    *, cache_dir: str | Path | None = None,
) -> ColourCodebook:
    """The colour codebook of these training pictures, cached (cache_dir/colours/<key>.npz)."""
    fields = {k: getattr(settings, k) for k in (
        "n_colours", "short_side", "colour_pixels_per_picture", "colour_max_pictures", "seed")}
    key = _ids_digest([json.dumps(fields, sort_keys=True)] + [collection.ids[i] for i in train])
    path = Path(cache_dir) / "colours" / f"{key}.npz" if cache_dir is not None else None
    codebook = None
    if path is not None and path.exists():
        try:
            codebook = ColourCodebook.from_arrays(load_npz(path))
        except (OSError, ValueError, KeyError):
            pass  # damaged: learn it again
    if codebook is None:
        codebook = ColourCodebook.fit(
            [collection.paths[i] for i in train], settings.n_colours, settings.seed,
            pixels_per_picture=settings.colour_pixels_per_picture,
            max_pictures=settings.colour_max_pictures, short_side=settings.short_side)
        if path is not None:
            save_npz(path, codebook.to_arrays())
    if path is not None:
        codebook.cache_lut(path.parent)
    return codebook


def collection_features(
    collection: Collection,
    train: np.ndarray,
    settings: FeatureSettings | None = None,
    *,
    cache_dir: str | Path | None = None,
    n_jobs: int = JOBS,
    progress: bool = True,
    refit: bool = False,
) -> tuple[sp.csr_matrix, np.ndarray, VisualPipeline]:
    """(X, ok, pipeline): bags of every picture of `collection`, fitted on `train` indices.

    Read from cache_dir when there (refit: fit again and replace the cached entry)."""
    settings = settings or FeatureSettings()
    train = np.asarray(train, dtype=np.int64)
    folder = None
    if cache_dir is not None:
        key = pipeline_key(settings, [collection.ids[i] for i in train])
        folder = Path(cache_dir) / "pipelines" / key
        cached = None if refit else _load(folder, collection, n_jobs=n_jobs, progress=progress,
                                          cache_dir=cache_dir)
        if cached is not None:
            return cached
    pipe = VisualPipeline(settings, cache_dir=cache_dir, n_jobs=n_jobs, progress=progress)
    colours = colour_codebook_for(collection, train, settings, cache_dir=cache_dir)
    X_train, ok_train, _ = pipe.fit_transform([collection.paths[i] for i in train],
                                           colour_codebook=colours)
    rest = np.setdiff1d(np.arange(len(collection)), train)
    X_rest, ok_rest, _ = pipe.transform([collection.paths[i] for i in rest])
    order = np.concatenate([train, rest])
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    X = sp.vstack([X_train, X_rest]).tocsr()[inverse]
    ok = np.concatenate([ok_train, ok_rest])[inverse]
    if folder is not None:
        _save(folder, pipe, X, ok, collection)
    return X, ok, pipe


def corel5k_features(
    settings: FeatureSettings | None = None,
    cache_dir: str | Path | None = None,
    *,
    n_jobs: int = JOBS,
    progress: bool = True,
) -> tuple[Collection, Protocol, sp.csr_matrix]:
    """(collection, protocol, X) for Corel 5k: X (5,000 x K) bags, rows in collection order,
    the pipeline fitted on protocol.train. cache_dir defaults to config.default_cache_dir()."""
    collection = load_corel5k()
    protocol = Protocol(collection)
    cache_dir = config.default_cache_dir() if cache_dir is None else cache_dir
    X, ok, _ = collection_features(collection, protocol.train, settings, cache_dir=cache_dir,
                                   n_jobs=n_jobs, progress=progress)
    if not ok.all():
        log.warning("corel5k: %d pictures could not be read", int((~ok).sum()))
    return collection, protocol, X


def _save(folder: Path, pipe: VisualPipeline, X, ok, collection: Collection) -> None:
    save_npz(folder / "bags.npz", {**csr_to_arrays(X), "ok": ok})
    pipe.save(folder)
    # Written last: its presence says the folder is complete.
    index = {"collection": collection.name, "ids": collection.ids}
    atomic_write(folder / "bags.json", lambda f: f.write(json.dumps(index).encode()))


def _load(folder: Path, collection: Collection, **kwargs):
    if not (folder / "bags.json").exists():
        return None
    try:
        index = json.loads((folder / "bags.json").read_text())
        if index["ids"] != collection.ids:
            return None  # same training pictures, different collection: recompute its bags
        arrays = load_npz(folder / "bags.npz")
        pipe = VisualPipeline.load(folder, **kwargs)
    except (OSError, ValueError, KeyError) as e:
        log.warning("%s: unusable cache entry (%s); recomputing", folder, e)
        return None
    return csr_from_arrays(arrays), arrays["ok"].astype(bool), pipe
