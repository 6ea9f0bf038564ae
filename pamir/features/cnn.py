"""Pictures -> one dense vector each from an ImageNet EfficientNet-Lite trunk ("cnn").

    rep = CNNRepresentation(CNNSettings())            # lite0, short side 224, ONNX Runtime
    X_train, ok, reasons = rep.fit_transform(train)   # per-dimension standardisation: train only
    X, ok, reasons = rep.transform(paths)             # (n x 1280) float32, rows unit L2
    logits, ok, _ = rep.class_scores(paths)           # (n x 1000) ImageNet class logits

The representation of pamir.features.representation with `output = "dense"`. The network's
weights and its cached ONNX export are pamir.features.cnn_network's, the network in torch
pamir.features.cnn_torch's, the engines that run it and the batching
pamir.features.cnn_engines'; torch is imported when a network is first needed, not here.

What a picture goes through:
1. decoded by pamir.features.images (grey, alpha, CMYK, 16-bit, EXIF rotation handled
   there), centre-cropped to at most MAX_ASPECT : 1 if it is longer than that, then resized
   so its shorter side has `short_side` pixels, aspect kept (no square crop: the whole
   picture is seen, as PAMIR's blocks see it);
2. normalised as the weights expect and run through the trunk of EfficientNet-Lite (stem,
   MBConv blocks, 1x1 head conv to 1,280 channels; no classifier);
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
are redone from the cache. Under `pamir fit --workers` the pooled vectors are Dask tasks
(`pooled_task`, through pamir.distributed).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import warnings
from contextlib import closing
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import config
from ..distributed import active_cluster, cluster_chunks, once_per_worker
from ..progress import Bar, report
from ..storage import atomic_write
from .cnn_engines import (
    ENGINES,
    OnnxEngine,
    ShapeBatches,
    pooled_batch,
    read_ahead,
    streams,
    threads_per_stream,
    torch_threads_kept,
)
from .cnn_int8 import PRECISIONS, int8_choice, int8_key

# tests/test_cnn.py reaches onnx_path through this module (cnn.onnx_path)
from .cnn_network import (  # noqa: F401
    CHANNELS,
    MODELS,
    WeightsMissing,
    classifier,
    onnx_path,
    weights_digest,
)
from .images import ImageError, content_hash, displayed_size, read_bytes, resize_short_side
from .rasters import rgb_for, shared_item, shared_path
from .representation import Extracted
from .settings import JOBS, SettingsRecord

log = logging.getLogger(__name__)

KIND = "cnn"
VERSION = 1

#: Bumped when a change of code changes the pooled vectors (decoding, crop, resize,
#: normalisation, pooling): it is part of the feature cache key.
FEATURES_VERSION = 1

#: Pictures longer than MAX_ASPECT times their width (or the reverse) are centre-cropped to
#: that ratio before the resize: a 5 x 300 strip would otherwise become 224 x 13,440 pixels
#: of interpolated nothing (and a 1 x 100,000 one several GB). 3:1 keeps every usual format
#: whole (3:2, 4:3, 16:9, 21:9, 3:1 panoramas).
MAX_ASPECT = 3.0

REGIONS = (0, 2)


# -------------------------------------------------------------------------- settings

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
    precision: "int8" (the network quantized once per machine, pamir.features.cnn_int8; the
        onnx engine only) or "fp32"; by default config.CNN_PRECISION (PAMIR_CNN_PRECISION).
        Where int8 cannot run (no quantization tools, the torch engine, a graph ONNX Runtime
        cannot quantize), or where no int8 variant computes what fp32 does on this processor
        (the check of pamir.features.cnn_int8: x86 without VNNI), the representation runs
        fp32 and says so in one line (`precision_says`).
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
    precision: str = field(default_factory=lambda: config.CNN_PRECISION)
    batch_size: int = 2
    n_jobs: int = JOBS

    what = "CNN settings"

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"model={self.model!r}: use one of {', '.join(MODELS)}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine={self.engine!r}: use one of {', '.join(ENGINES)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision={self.precision!r}: use one of {', '.join(PRECISIONS)} "
                             "(PAMIR_CNN_PRECISION sets the default)")
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
        ~1e-4; not batching, threads or the post-processing). int8 adds the quantized
        graph's key (cnn_int8.int8_key); fp32's key is what it was before int8 existed, so
        caches made then are still read."""
        key = {"model": self.model, "short_side": self.short_side, "regions": self.regions,
               "flip": self.flip}
        if self.precision == "int8":
            key.update(precision="int8", quantization=int8_key(self.model))
        return key


def make_engine(model: str, engine: str, threads: int = 1, precision: str = "fp32"):
    """The engine asked for; "onnx" falls back to "torch" (with a warning) when the fp32
    trunk cannot be exported or loaded here: both give the same pooled vectors, so the
    feature cache holds the same numbers either way. The int8 trunk has no such fallback
    (its vectors differ, and are cached apart): CNNRepresentation decides before it asks."""
    if engine != "torch":
        if precision == "int8":
            return OnnxEngine(model, threads, precision)
        try:
            return OnnxEngine(model, threads)
        except WeightsMissing:
            raise
        except Exception as e:  # onnx or onnxruntime missing or failing: the same numbers
            warnings.warn(f"ONNX engine unavailable ({type(e).__name__}: {e}); using eager "
                          "torch", RuntimeWarning, stacklevel=2)
    # the [cnn] extra (torch: 1 s to import; the ONNX engine runs without it)
    from .cnn_torch import TorchEngine  # noqa: PLC0415
    return TorchEngine(model, threads)


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

def prepare_picture(data: bytes, short_side: int, digest: str | None = None) -> np.ndarray:
    """(H, W, 3) uint8 as the network sees it: decoded, at most MAX_ASPECT : 1 (centre crop),
    shorter side = short_side. Raises ImageError with the decoder's reason. digest: the
    bytes' content hash, by which the reading stage's raster is taken instead of a decode
    (pamir.features.rasters)."""
    item = shared_item(digest)
    if item is not None and item.ok:
        return _from_raster(item.rgb, short_side)
    try:
        w, h = displayed_size(data)  # the header only
    except ImageError:
        w = h = 1  # let the decoder give its reason below
    if max(w, h) <= MAX_ASPECT * min(w, h):
        return rgb_for(data, digest, short_side)
    return _from_raster(rgb_for(data, digest, None), short_side)


def _from_raster(rgb: np.ndarray, short_side: int) -> np.ndarray:
    """A decoded picture as the network sees it: at most MAX_ASPECT : 1, then resized (a
    raster at full size gives what decode_rgb(data, short_side) gives, bit for bit)."""
    h, w = rgb.shape[:2]
    if max(w, h) <= MAX_ASPECT * min(w, h):
        return resize_short_side(rgb, short_side)
    x, y, cw, ch = (int(v) for v in crop_box(w, h))
    return resize_short_side(np.ascontiguousarray(rgb[y:y + ch, x:x + cw]), short_side)


def crop_box(width: int, height: int) -> tuple[float, float, float, float]:
    """(x, y, w, h) of the part of a width x height displayed picture that the network sees:
    all of it, or the centred MAX_ASPECT : 1 crop of a longer one (the one home of the rule:
    prepare_picture crops by it, pamir.features.cnn_maps places the cells with it)."""
    if max(width, height) <= MAX_ASPECT * min(width, height):
        return 0.0, 0.0, float(width), float(height)
    if width > height:
        keep = max(1, int(MAX_ASPECT * height))
        return float((width - keep) // 2), 0.0, float(keep), float(height)
    keep = max(1, int(MAX_ASPECT * width))
    return 0.0, float((height - keep) // 2), float(width), float(keep)


class _Tally:
    """One run's pooled vectors as they come in (P, ok, reasons), its counts, the feature
    cache's copies of what the network computed, and the progress bar."""

    def __init__(self, n: int, settings: CNNSettings, cache: PooledCache | None, show: bool):
        self.P = np.zeros((n, settings.dim), np.float32)
        self.ok = np.zeros(n, bool)
        self.reasons: list = [None] * n
        self.counts = dict.fromkeys(("extracted", "cached", "skipped", "failed"), 0)
        self.cache, self.done, self.start = cache, 0, time.perf_counter()
        self.bar = Bar(f"cnn {settings.model}", n, enabled=show, unit="pictures", rate=True)
        self.console = self.bar.console if show else None  # else unreadable ones go to the log

    def __enter__(self) -> "_Tally":
        self.bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.__exit__(*exc)

    def cached(self, i: int, vector: np.ndarray) -> None:
        self.P[i], self.ok[i] = vector, True
        self.counts["cached"] += 1
        self._advance(1)

    def computed(self, items: list, rows: np.ndarray) -> None:
        """A batch back from the network: items are (position, content hash)."""
        index = [i for i, _ in items]
        self.P[index] = rows
        self.ok[index] = True
        self.counts["extracted"] += len(items)
        if self.cache is not None:
            for i, digest in items:
                self.cache.put(digest, self.P[i])
        self._advance(len(items))

    def unreadable(self, i: int, path, status: str, reason: str) -> None:
        self.counts[status] += 1
        self.reasons[i] = reason
        _report(f"{status} {path}: {reason}", self.console)
        self._advance(1)

    def _advance(self, k: int) -> None:
        self.done += k
        if self.done % 16 < k or self.done == len(self.ok):
            self.bar.update(completed=self.done)

    def stats(self) -> dict:
        n, seconds = len(self.ok), time.perf_counter() - self.start
        return {"pictures": n, "done": self.counts["extracted"] + self.counts["cached"],
                **self.counts, "seconds": round(seconds, 3),
                "pictures_per_second": round(n / seconds, 1) if seconds > 0 else None}


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
        self._precision_says: str | None = None
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
                                       threads_per_stream(), self.settings.precision)
            self._engine_seconds = time.perf_counter() - t0
        return self._engine

    def release_network(self) -> None:
        """Let go of the network (its ONNX Runtime session holds about 340 MB for an int8
        EfficientNet-Lite at Corel's sizes): a fit calls it once its features are made, so
        that the three views' sessions are not held through the training (they
        were most of the 1 GB a fit from an empty cache held beyond a warm one). Built
        again on the next use."""
        self._engine = None

    # ------------------------------------------------------------------------ pooled
    def pooled(self, paths: Sequence[str | Path]) -> Extracted:
        """(P, ok, reasons): the pooled, pre-standardisation vectors ((n x dim) float32, zero
        rows where ok is False), from the cache where they are there; while
        pamir.distributed.on_cluster is active (`pamir fit --workers`), computed by Dask
        tasks on the cluster's workers."""
        paths = list(paths)
        self.resolve_precision()
        if active_cluster() is not None:
            return self._pooled_on_cluster(paths)
        s = self.settings
        cache = (PooledCache(self.cache_dir, s, weights_digest(s.model))
                 if self.cache_dir else None)
        self._engine_seconds = 0.0
        n_streams = streams()
        window = (n_streams + 2) * s.batch_size + 2 * s.n_jobs  # decoded pictures, at most
        with torch_threads_kept(lambda: self._engine), \
                _Tally(len(paths), s, cache, self.progress) as tally, \
                ShapeBatches(self._network, s.batch_size, tally.computed, n_streams) as batches, \
                closing(read_ahead(enumerate(paths), partial(self._load, cache=cache),
                                   s.n_jobs, window)) as loaded:
            for (i, path), (status, payload, digest, reason) in loaded:
                if status == "cached":
                    tally.cached(i, payload)
                elif status == "decoded":
                    batches.add((i, digest), payload)
                else:
                    tally.unreadable(i, path, status, reason)
                batches.collect()
            batches.finish()
        self.stats_ = {**tally.stats(), "precision": s.precision,
                       "engine": self._engine.name if self._engine is not None else None,
                       # building the network (and exporting it, the first time) in this run
                       "engine_seconds": round(self._engine_seconds, 3)}
        return Extracted(tally.P, tally.ok, tally.reasons)

    def resolve_precision(self) -> str:
        """Settle whether int8 runs here, before a cache key or a network depends on it: the
        quantized graph is found (or made and checked against fp32, the first time on this
        processor: pamir.features.cnn_int8) now. Where no int8 variant is faithful here, or
        int8 cannot run at all, the representation runs fp32 from then on, its settings
        saying so (and so its saved model and its cache); `precision_says` says why (and a
        warning where int8 could not run at all)."""
        s = self.settings
        if self._precision_says is not None:
            return s.precision
        if s.precision != "int8":
            self._precision_says = f"{s.precision} (asked for: PAMIR_CNN_PRECISION or the " \
                                   "model's settings)"
            return s.precision
        reason = None
        if s.engine != "onnx":
            reason = f"the {s.engine} engine runs fp32 only"
        else:
            try:
                self._precision_says = int8_choice(s.model).says()
            except WeightsMissing:
                raise
            except Exception as e:  # noqa: BLE001 - no quantization, or ORT refused the graph
                reason = f"{type(e).__name__}: {e}"
        if reason is not None:
            warnings.warn(f"int8 {s.model} network unavailable ({reason}); running it in fp32 "
                          f"(PAMIR_CNN_PRECISION=fp32 asks for fp32)", RuntimeWarning,
                          stacklevel=3)
            self._precision_says = f"fp32: int8 unavailable ({reason})"
        if not self._precision_says.startswith("int8"):  # no faithful variant: fp32
            self.settings = s.replace(precision="fp32")
            log.info("cnn %s: %s", s.model, self._precision_says)
        return self.settings.precision

    def precision_says(self) -> str:
        """One line: the precision this view's network runs at on this processor and why
        ("lite0: int8: its vectors 0.992 of fp32's ...", "lite1: fp32: the int8 graph's
        vectors 0.930 of fp32's ...: this processor has no VNNI")."""
        self.resolve_precision()
        return f"{self.settings.model}: {self._precision_says}"

    def _load(self, item: tuple, cache: PooledCache | None) -> tuple:
        """(status, payload, digest, reason) of the picture item = (position, path): its
        cached vector, or its pixels for the network; never raises."""
        try:
            if (shared := shared_path(item[1])) is not None and shared.ok:
                # the reading stage read the file moments ago: its hash and its raster
                digest = shared.digest
                if cache is not None and (hit := cache.get(digest)) is not None:
                    return "cached", hit, digest, None
                return ("decoded", _from_raster(shared.rgb, self.settings.short_side), digest,
                        None)
            data = read_bytes(item[1])
            digest = content_hash(data)
            if cache is not None and (hit := cache.get(digest)) is not None:
                return "cached", hit, digest, None
            return ("decoded", prepare_picture(data, self.settings.short_side, digest), digest,
                    None)
        except ImageError as e:
            return "skipped", None, None, str(e)
        except Exception as e:  # a bug or an exhausted resource: count it, keep going
            return "failed", None, None, f"{type(e).__name__}: {e}"

    def _network(self):
        """What a stream runs on a batch; the engine is built here, in the caller's thread."""
        return partial(pooled_batch, self.engine, flip=self.settings.flip, dim=self.dim)

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
        # representations saved before `power` existed used the pooled numbers as they are,
        # before `precision` existed the fp32 network
        rep = cls(CNNSettings.from_dict({"power": 1.0, "precision": "fp32", **d["settings"]}),
                  **kwargs)
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


# ------------------------------------------------------------------ on a Dask cluster

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
    if rep.settings.precision != settings.get("precision", rep.settings.precision):
        # this worker could not run the int8 network: its fp32 vectors must not join int8 ones
        raise RuntimeError(f"a Dask worker cannot run the int8 {rep.settings.model} network "
                           "(its warning says why): set PAMIR_CNN_PRECISION=fp32 everywhere, or "
                           "install onnxruntime's quantization tools on the workers")
    return [(P[i] if ok[i] else None, reasons[i]) for i in range(len(paths))]


_report = partial(report, log=log)  # _report(line, console or None)


def cnn_views(rep) -> list[CNNRepresentation]:
    """The CNN views of a representation (itself, or the parts of a combination), or of a
    system (its pipeline): what `precision_says` is asked of."""
    rep = getattr(rep, "pipeline", rep)
    return [part for part in getattr(rep, "parts", [rep]) if isinstance(part, CNNRepresentation)]


__all__ = ["CNNRepresentation", "CNNSettings", "MAX_ASPECT", "PooledCache", "crop_box",
           "make_engine", "pooled_task", "prepare_picture"]
