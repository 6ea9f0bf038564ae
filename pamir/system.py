"""A whole trained retrieval system in one directory: pictures -> features -> model -> text space.

    system = fit_system(load_collection("corel5k"), model="pamir")
    system.save("models/corel")                    # model.json + arrays.npz, no pickle
    system = System.load("models/corel")
    Z, ok, reasons = system.transform_paths(paths)  # (n x T) float32 text-space pictures
    q, unknown = system.query_vector("tiger grass")
    scores = Z @ q                                 # rank pictures by decreasing score
    system.annotate(Z[:3], k=5)                    # [[(word, score), ...], ...]

A System holds the visual pipeline (pamir.features, fitted on the protocol's training pictures
only), the vocabulary and the training idf (for query vectors), and any model of
pamir.models.MODELS: models that take bags of visterms get a VisualPipeline, those that take
block descriptors (`model.input == "blocks"`, BBNN) get a BlockPipeline (colour codebook +
block histograms). This API is what the product (index, search, server) builds on: keep it
stable.

Model selection (`fit_system`): every point of the model's validation grid is trained on the
training pictures (the model may early-stop on validation itself, as PAMIR does) and the one
with the best validation mean AvgP is kept; optionally the chosen settings are retrained on
train + validation. A model's grid is, first found: the class attribute `param_grid`, then
config.<KIND>_GRID (a dict), then config.<KIND>_<PARAM>_GRID for each of its parameters.
"""

from __future__ import annotations

import inspect
import itertools
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from . import config
from .data import Collection
from .evaluation import mean_average_precision
from .features.representation import Extracted, reasons_from_failures
from .models import model_class
from .models.base import TextSpaceModel, dense_float32, load_directory, save_directory
from .protocol import Protocol
from .text import idf as idf_weights
from .text import query_vector, tokenize, top_words

KIND = "system"
FORMAT_VERSION = 1


# ------------------------------------------------------------------------ feature pipelines

class BlockPipeline:
    """Pictures -> block descriptors (a BlockSet) for models that take blocks (BBNN).

    Only the colour codebook is learnt (on training pictures); the descriptors are the
    block histograms of pamir.features (uniform LBP + colour), cached by content hash.
    """

    kind = "block_pipeline"

    def __init__(self, settings=None, *, cache_dir=None, n_jobs: int = config.FEATURE_JOBS,
                 progress: bool = True):
        from .features import FeatureSettings

        self.settings = settings or FeatureSettings()
        self.cache_dir = cache_dir
        self.n_jobs = n_jobs
        self.progress = progress

    def fit(self, train_paths: Sequence) -> "BlockPipeline":
        from .features import ColourCodebook

        s = self.settings
        self.colour_codebook_ = ColourCodebook.fit(
            list(train_paths), s.n_colours, s.seed, pixels_per_picture=s.colour_pixels_per_picture,
            max_pictures=s.colour_max_pictures, short_side=s.short_side)
        return self

    def transform(self, paths: Sequence) -> Extracted:
        """(BlockSet, ok, reasons) of the pictures, in order."""
        from .features import extract_blocks

        paths = list(paths)
        blocks = extract_blocks(paths, self.settings, self.colour_codebook_,
                                cache_dir=self.cache_dir, n_jobs=self.n_jobs,
                                progress=self.progress)
        return Extracted(blocks, blocks.ok, reasons_from_failures(paths, blocks.ok,
                                                                  blocks.failures))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "version": 1, "settings": self.settings.to_dict()}

    def to_arrays(self) -> dict[str, np.ndarray]:
        return self.colour_codebook_.to_arrays()

    @classmethod
    def from_saved(cls, d: dict, arrays: dict, **kwargs) -> "BlockPipeline":
        from .features import ColourCodebook, FeatureSettings

        pipe = cls(FeatureSettings.from_dict(d["settings"]), **kwargs)
        pipe.colour_codebook_ = ColourCodebook.from_arrays(arrays)
        return pipe


def take(F, idx: np.ndarray):
    """Rows `idx` of a feature matrix: CSR bags, a dense array or a BlockSet."""
    idx = np.asarray(idx, dtype=np.int64)
    if hasattr(F, "descriptors") and hasattr(F, "offsets"):
        from .features import BlockSet

        starts, ends = F.offsets[idx], F.offsets[idx + 1]
        rows = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)]) if len(idx) else \
            np.zeros(0, np.int64)
        offsets = np.concatenate([[0], np.cumsum(ends - starts)]).astype(np.int64)
        return BlockSet(F.descriptors[rows], offsets, np.asarray(F.ok)[idx],
                        log_counts=F.log_counts)
    return F[idx]


# ------------------------------------------------------------------------------- System

class System:
    """Visual pipeline + vocabulary and idf + a fitted model (see the module docstring).

    vocabulary: the T words of the text space, in the order of the model's outputs.
    idf: (T,) the training idf of those words, for query vectors (TPAMI §IV-A).
    info: how it was made (data, chosen parameters, validation AvgP, seeds, seconds).
    """

    def __init__(self, pipeline, model: TextSpaceModel, vocabulary: Sequence[str],
                 idf: np.ndarray, info: dict | None = None):
        self.pipeline = pipeline
        self.model = model
        self.vocabulary = list(vocabulary)
        self.word_index = {w: k for k, w in enumerate(self.vocabulary)}
        self.idf = np.asarray(idf, dtype=np.float64)
        self.info = dict(info or {})
        if len(self.idf) != len(self.vocabulary):
            raise ValueError(f"idf has {len(self.idf)} weights for {len(self.vocabulary)} words")

    @property
    def T(self) -> int:
        return len(self.vocabulary)

    @property
    def input(self) -> str:
        return getattr(self.model, "input", "bags")

    # ------------------------------------------------------------------------- pictures
    def features(self, paths: Sequence) -> Extracted:
        """(F, ok, reasons): what the model takes for each picture, ok per picture, and why
        each picture not ok could not be read."""
        return self.pipeline.transform(list(paths))

    def transform_features(self, F, ok: np.ndarray | None = None) -> np.ndarray:
        """(n x T) float32 text-space vectors; rows of pictures not ok are zeros."""
        n = F.shape[0] if sp.issparse(F) or isinstance(F, np.ndarray) else len(F)
        ok = np.ones(n, bool) if ok is None else np.asarray(ok, bool)
        Z = np.zeros((n, self.T), dtype=np.float32)
        if ok.any():
            keep = np.flatnonzero(ok)
            Z[keep] = dense_float32(self.model.transform(take(F, keep) if not ok.all() else F))
        return Z

    def transform_paths(self, paths: Sequence) -> tuple[np.ndarray, np.ndarray, list]:
        """(Z, ok, reasons): pictures as (n x T) float32 text-space vectors; unreadable ones
        are zero rows with ok False and reasons[i] the decoder's message."""
        F, ok, reasons = self.features(paths)
        return self.transform_features(F, ok), np.asarray(ok, bool), reasons

    # ---------------------------------------------------------------------------- text
    def query_vector(self, text: str) -> tuple[np.ndarray, list[str]]:
        """(q, unknown): the normalised idf vector (T,) float32 of a free-text query and the
        words that are not in the vocabulary (ignored; q is all zeros if none is known)."""
        words = tokenize(text)
        known = [self.word_index[w] for w in words if w in self.word_index]
        unknown = list(dict.fromkeys(w for w in words if w not in self.word_index))
        return query_vector(known, self.idf), unknown

    def annotate(self, Z_rows, k: int = config.ANNOTATION_WORDS) -> list[list[tuple[str, float]]]:
        """The k best words of each text-space row, best first, with their scores."""
        return top_words(Z_rows, self.vocabulary, k)

    # -------------------------------------------------------------------------- saving
    def save(self, path) -> Path:
        """One directory: model.json (kinds, settings, vocabulary, info) + arrays.npz."""
        meta, model_arrays = self.model._state()
        head = {
            "kind": KIND, "format_version": FORMAT_VERSION, "vocabulary": self.vocabulary,
            "info": self.info, "pipeline": self.pipeline.to_dict(),
            "model": {"kind": self.model.kind, "params": self.model.get_params(), "state": meta},
        }
        arrays = {"idf": self.idf}
        arrays |= {f"pipeline/{k}": v for k, v in self.pipeline.to_arrays().items()}
        arrays |= {f"model/{k}": v for k, v in model_arrays.items()}
        return save_directory(path, head, arrays)

    @classmethod
    def load(cls, path, *, cache_dir=None, progress: bool = True) -> "System":
        head, arrays = load_directory(path)
        if head.get("kind") != KIND:
            raise ValueError(f"{path}: holds a {head.get('kind')!r} model, not a whole system; "
                             "make one with `pamir fit`")
        if head.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path}: system format {head.get('format_version')} is not "
                             f"{FORMAT_VERSION}; retrain it with this version of pamir")
        part = {k.partition("/")[2]: v for k, v in arrays.items() if k.startswith("pipeline/")}
        pipe_cls = BlockPipeline if head["pipeline"].get("kind") == BlockPipeline.kind else None
        if pipe_cls is None:
            from .features import VisualPipeline as pipe_cls
        pipeline = pipe_cls.from_saved(head["pipeline"], part, cache_dir=cache_dir,
                                       progress=progress)
        m = head["model"]
        model = model_class(m["kind"])(**m["params"])
        model._set_state(m.get("state", {}),
                         {k.partition("/")[2]: v for k, v in arrays.items()
                          if k.startswith("model/")})
        return cls(pipeline, model, head["vocabulary"], arrays["idf"], head.get("info", {}))


# ------------------------------------------------------------------------------ training

def model_grid(kind: str, params: dict | None = None) -> dict[str, list]:
    """The validation grid of a model kind (see the module docstring); `params` given by the
    user are fixed and drop out of the grid."""
    cls = model_class(kind)
    prefix = kind.upper().replace("-", "_")
    grid = getattr(cls, "param_grid", None)
    if grid is None:
        grid = getattr(config, f"{prefix}_GRID", None)
    if grid is None:
        names = cls().get_params()
        grid = {}
        for name in names:
            values = getattr(config, f"{prefix}_{name.upper()}_GRID", None)
            if values is not None:
                grid[name] = values
    fixed = set(params or {})
    return {k: list(v) for k, v in dict(grid).items() if k not in fixed}


def grid_points(grid: dict[str, list]) -> list[dict]:
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[k] for k in keys))]


def collection_inputs(collection: Collection, protocol: Protocol, kind: str,
                      feature_settings=None, *, model_params: dict | None = None,
                      cache_dir=None, progress: bool = True):
    """(F, ok, pipeline): the features of every picture of `collection`, the pipeline fitted
    on protocol.train only. Bags are cached under cache_dir by pamir.features."""
    from .features import FeatureSettings, collection_features

    settings = feature_settings or FeatureSettings()
    cache_dir = config.default_cache_dir() if cache_dir is None else cache_dir
    if getattr(model_class(kind)(**(model_params or {})), "input", "bags") == "blocks":
        pipe = BlockPipeline(settings, cache_dir=cache_dir, progress=progress)
        pipe.fit([collection.paths[i] for i in protocol.train])
        F, ok, _ = pipe.transform(collection.paths)
        return F, np.asarray(ok, bool), pipe
    X, ok, pipe = collection_features(collection, protocol.train, settings,
                                      cache_dir=cache_dir, progress=progress)
    return X, np.asarray(ok, bool), pipe


def _check_before_features(collection, protocol, model, cls, model_params, points) -> None:
    """What would only fail after minutes of feature extraction, said at once."""
    for point in points:
        try:
            cls(**{**model_params, **point})
        except TypeError as e:
            known = ", ".join(inspect.signature(cls).parameters)
            raise ValueError(f"{model}: {e}; its parameters are {known}") from None
    if protocol.T == 0:
        rule = (f"in at least {config.COREL_MIN_TEST_PICTURES} test pictures"
                if len(protocol.test) else
                f"in at least {config.MIN_WORD_PICTURES} training pictures")
        raise ValueError(
            f"{collection.name}: no caption word is {rule} ({len(protocol.train)} training "
            "pictures), so there is nothing to learn; caption more pictures")
    if len(protocol.valid) == 0:
        raise ValueError(
            f"{collection.name}: {len(protocol.development)} captioned pictures leave none "
            "for validation; caption at least 10")


def fit_system(collection: Collection, model: str = "pamir", feature_settings=None,
               model_params: dict | None = None, progress: bool = True, *,
               retrain: bool = False, grid: dict | None = None, protocol: Protocol | None = None,
               inputs=None, cache_dir=None, log=print) -> System:
    """Train a whole system on a captioned collection.

    Features are fitted on protocol.train; each point of the validation grid (`grid`, or the
    model's grid from config; {} for none) is trained on train with validation data for early
    stopping, the point with the best validation mean AvgP is kept, and with `retrain` its
    settings (plus what the model learnt to stop at: `refit_params_`) are trained again on
    train + valid. `inputs` = (F, ok, pipeline) reuses features already computed for this
    collection and protocol. `log` prints one line per step (None: silent).
    """
    say = log or (lambda *a: None)
    protocol = protocol or Protocol(collection)
    model_params = dict(model_params or {})
    grid = model_grid(model, model_params) if grid is None else grid
    points = grid_points(grid)
    cls = model_class(model)
    _check_before_features(collection, protocol, model, cls, model_params, points)
    t0 = time.perf_counter()
    if inputs is None:
        inputs = collection_inputs(collection, protocol, model, feature_settings,
                                   model_params=model_params, cache_dir=cache_dir,
                                   progress=progress)
    F, ok, pipeline = inputs
    feature_seconds = time.perf_counter() - t0
    train, valid = protocol.train[ok[protocol.train]], protocol.valid[ok[protocol.valid]]
    for name, idx, full in (("train", train, protocol.train), ("valid", valid, protocol.valid)):
        if len(idx) < len(full):
            say(f"{len(full) - len(idx)} {name} pictures could not be read and are left out")
    Y_train, Y_valid = protocol.presence(train), protocol.presence(valid)
    F_train, F_valid = take(F, train), take(F, valid)
    vq = protocol.queries(valid)
    Q_valid, R_valid = protocol.query_vectors(vq), vq.relevance

    results, best, best_score = [], None, -np.inf
    t0 = time.perf_counter()
    for k, point in enumerate(points, 1):
        params = {**model_params, **point}
        m = cls(**params)
        started = time.perf_counter()
        with _progress(m, progress, f"{model} {_fmt(point)} ({k}/{len(points)})"):
            m.fit(F_train, Y_train, F_valid, Y_valid)
        score = mean_average_precision(m.transform(F_valid), Q_valid, R_valid)
        seconds = time.perf_counter() - started
        results.append({"params": point, "valid_avgp": round(100 * score, 3),
                        "seconds": round(seconds, 2)} | _stopping(m))
        say(f"{model} {_fmt(point) or 'defaults'}: validation AvgP {100 * score:.2f} "
            f"({seconds:.1f} s)")
        if score > best_score:
            best, best_score = m, score
    chosen = {k: v for k, v in best.get_params().items()}
    system_idf = protocol.idf
    if retrain:
        dev = np.sort(np.concatenate([train, valid]))
        refit = {**best.get_params(), **getattr(best, "refit_params_", {})}
        say(f"retraining on train + valid ({len(dev)} pictures) with {_fmt(refit)}")
        final = cls(**refit)
        Y_dev = protocol.presence(dev)
        with _progress(final, progress, f"{model} train+valid"):
            final.fit(take(F, dev), Y_dev)
        system_idf = idf_weights(Y_dev)
        chosen = refit
    else:
        final = best
    info = {
        "data": collection.name, "model": model, "params": chosen,
        "valid_avgp": round(100 * best_score, 3), "grid": results, "retrained": retrain,
        "seed": protocol.seed, "vocabulary_size": protocol.T,
        "pictures": {"train": int(len(train)), "valid": int(len(valid))},
        "feature_seconds": round(feature_seconds, 2),
        "model_seconds": round(time.perf_counter() - t0, 2),
    }
    return System(pipeline, final, protocol.vocabulary, system_idf, info)


def evaluate_system(system: System, collection: Collection, split: str = "test", *,
                    scores: bool = False) -> dict:
    """Evaluate a system on the queries of one split of a collection (TPAMI Tables IX-XII).

    The pictures go through the system's own pipeline (features are cached by pamir.features)
    and queries are weighted with the system's idf. Returns {"evaluation": Evaluation (per
    query, with the subsets all / single-word / multi-word / easy / difficult / unseen),
    "qids", "docids", "relevance", and with `scores` the (n_queries x n_pictures) scores}.
    """
    from .evaluation import evaluate_model, evaluate_text_space, query_scores

    protocol = Protocol(collection, seed=system.info.get("seed", config.SEED),
                        vocabulary=system.vocabulary)
    idx = protocol.split(split)
    if len(idx) == 0:
        raise ValueError(f"{collection.name}: no captioned {split} pictures to evaluate on")
    qs = protocol.queries(idx)
    Q = qs.vectors(system.idf)
    subsets = protocol.query_subsets(qs)
    F, ok, _ = system.features([collection.paths[i] for i in idx])
    if hasattr(system.model, "score_queries"):  # a model that does not rank by Z q
        evaluation = evaluate_model(system.model, F, Q, qs.relevance, subsets)
        S = np.asarray(system.model.score_queries(Q, F)) if scores else None
    else:
        Z = system.transform_features(F, ok)
        evaluation = evaluate_text_space(Z, Q, qs.relevance, subsets)
        S = query_scores(Z, Q) if scores else None
    return {"evaluation": evaluation, "qids": qs.qids(),
            "docids": [collection.ids[i] for i in idx], "relevance": qs.relevance,
            "scores": S, "unreadable": int((~np.asarray(ok, bool)).sum())}


def _stopping(model) -> dict:
    out = {}
    for key in ("best_update_", "n_updates_", "best_valid_avgp_"):
        if getattr(model, key, None) is not None:
            out[key.rstrip("_")] = getattr(model, key)
    return out


def _fmt(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


@contextmanager
def _progress(model, enabled: bool, label: str):
    """A progress bar while `model` trains (PAMIR reports (updates, total, valid AvgP) through
    `model.progress`; other models get a bar without steps)."""
    if not enabled:
        yield
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done, total, score):
            extra = f"  valid AvgP {100 * score:.2f}" if score is not None else ""
            bar.update(task, total=total, completed=done, description=f"{label}{extra}")

        if model.kind == "pamir":
            model.progress = update
        try:
            yield
        finally:
            if model.kind == "pamir":
                model.progress = None


__all__ = ["BlockPipeline", "System", "collection_inputs", "evaluate_system", "fit_system",
           "model_grid", "take"]
