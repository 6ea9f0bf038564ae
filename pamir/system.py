"""A whole trained retrieval system in one directory: pictures -> features -> model -> text space.

    system = fit_system(load_collection("corel5k"), model="pamir")   # pamir.training
    system.save("models/corel")                    # model.json + arrays.npz, no pickle
    system = System.load("models/corel")
    Z, ok, reasons = system.transform_paths(paths)  # (n x T) float32 text-space pictures
    q, unknown = system.query_vector("tiger grass")
    scores = Z @ q                                 # rank pictures by decreasing score
    system.annotate(Z[:3], k=5)                    # [[(word, score), ...], ...]

A System holds a representation (pamir.features.registry: visterms, blocks, cnn, sift, blobs,
blobs-arff or a combination, fitted on the protocol's training pictures only), the
vocabulary and the training idf (for query vectors), and any model of pamir.models.MODELS
that reads that representation; with it, the parts a fit may add (neighbours, calibration,
the ImageNet prior). This API is what the product (index, search, server) builds on: keep
it stable.

How a system is trained is pamir.training (`fit_system`, in phases); how a trained one
keeps learning (feedback, new captioned pictures) is pamir.training.online. Here: the system itself,
saving and loading it, evaluating it, and what an index takes from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from . import config
from .calibration import Calibration, annotate
from .data import Collection
from .evaluation import evaluate_model, evaluate_text_space, query_scores
from .features.registry import representation_from_saved
from .features.representation import Extracted, take_rows
from .models import model_class
from .models.base import TextSpaceModel, dense_float32, load_directory, save_directory
from .models.neighbours import Neighbours
from .protocol import Protocol
from .text.embedding import EmbeddingUnavailable
from .text.vectors import query_vector
from .text.words import tokenize
from .zeroshot.imagenet import class_probabilities, imagenet_class_names
from .zeroshot.prior import Prior

KIND = "system"
FORMAT_VERSION = 1


# ------------------------------------------------------------------------------- System

class System:
    """Visual pipeline + vocabulary and idf + a fitted model (see the module docstring).

    vocabulary: the T words of the text space, in the order of the model's outputs.
    idf: (T,) the training idf of those words, for query vectors (TPAMI §IV-A).
    info: how it was made (data, chosen parameters, validation AvgP, seeds, seconds).
    neighbours: the label-transfer part mixed with the model's scores
    (pamir.models.neighbours), or None: the model's scores alone.
    """

    def __init__(self, pipeline, model: TextSpaceModel, vocabulary: Sequence[str],
                 idf: np.ndarray, info: dict | None = None, neighbours: Neighbours | None = None):
        self.pipeline = pipeline
        self.model = model
        self.neighbours = neighbours
        self.vocabulary = list(vocabulary)
        self.word_index = {w: k for k, w in enumerate(self.vocabulary)}
        self.idf = np.asarray(idf, dtype=np.float64)
        self.info = dict(info or {})
        self.calibration = None  # pamir.calibration.Calibration: probabilities of relevance
        self.prior = None  # pamir.zeroshot.prior.Prior: ImageNet's classes mixed into its words' scores
        if len(self.idf) != len(self.vocabulary):
            raise ValueError(f"idf has {len(self.idf)} weights for {len(self.vocabulary)} words")

    def with_model(self, model: TextSpaceModel, neighbours: Neighbours | None) -> "System":
        """This system (its representation, vocabulary, idf and info) with another model and
        neighbour part: the one trained on train only, say, whose validation scores are not
        in-sample."""
        return System(self.pipeline, model, self.vocabulary, self.idf, self.info, neighbours)

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
            F = take_rows(F, keep) if not ok.all() else F
            Zk = dense_float32(self.model.transform(F))
            Z[keep] = self.neighbours.mix(Zk, F) if self.neighbours is not None else Zk
        return Z

    def voters(self, F, words: Sequence[str] | None = None, top: int = 5) -> list[list[dict]]:
        """Who voted for each picture of F (the model's inputs): its `top` heaviest
        captioned neighbours carrying any of `words` (None: any), heaviest first, each {"id",
        "path", "weight" (its share of the picture's vote), "similarity" (cosine), "words"}.
        Empty lists for a system without neighbours."""
        n = F.shape[0] if hasattr(F, "shape") else len(F)
        if self.neighbours is None:
            return [[] for _ in range(n)]
        wanted = None if words is None else [self.word_index[w] for w in words
                                             if w in self.word_index]
        found = self.neighbours.transfer.voters(self.neighbours.view(F), wanted, top)
        for row in found:
            for v in row:
                v["words"] = [self.vocabulary[t] for t in v["words"] if t < self.T]
        return found

    def transform_paths(self, paths: Sequence) -> tuple[np.ndarray, np.ndarray, list]:
        """(Z, ok, reasons): pictures as (n x T) float32 text-space vectors; unreadable ones
        are zero rows with ok False and reasons[i] the decoder's message."""
        F, ok, reasons = self.features(paths)
        Z = self.transform_features(F, ok)
        if self.prior is not None:  # the classes' part of each word
            Z = self.prior.mix(Z, self.class_probabilities(paths))
            Z[~np.asarray(ok, bool)] = 0.0
        return Z, np.asarray(ok, bool), reasons

    def class_probabilities(self, paths: Sequence) -> np.ndarray:
        """(n x 1000) the ImageNet classifier's probabilities of the pictures, from the
        system's CNN view (its pooled vectors are cached with the features)."""
        logits, _, _ = cnn_part(self.pipeline).class_scores(list(paths))
        return class_probabilities(logits).astype(np.float32)

    # ---------------------------------------------------------------------------- text
    def query_vector(self, text: str) -> tuple[np.ndarray, list[str]]:
        """(q, unknown): the normalised idf vector (T,) float32 of a free-text query and the
        words that are not in the vocabulary (ignored; q is all zeros if none is known)."""
        words = tokenize(text)
        known = [self.word_index[w] for w in words if w in self.word_index]
        unknown = list(dict.fromkeys(w for w in words if w not in self.word_index))
        return query_vector(known, self.idf), unknown

    def annotate(self, Z_rows, k: int | None = None) -> list[list[tuple[str, float]]]:
        """Each text-space row's words, best first, with their scores: the model's words as
        `pamir annotate` gives them (pamir.jobs.annotation, which adds the calibrated
        probabilities and ImageNet's words). k None: by the rule validation preferred, the 5
        best or with per-word thresholds the words likely enough; k: the k best words, as
        `pamir annotate -k`."""
        return [[(word, score) for word, score, _ in row]
                for row in annotate(self.calibration, Z_rows, self.vocabulary, k,
                                    count=k is not None)]

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
        if self.neighbours is not None:  # absent from older models: they load as before
            head["neighbours"], part = self.neighbours.to_dict()
            arrays |= {f"neighbours/{k}": v for k, v in part.items()}
        if self.calibration is not None:
            head["calibration"], cal_arrays = self.calibration.to_saved()
            arrays |= {f"calibration/{k}": v for k, v in cal_arrays.items()}
        if self.prior is not None:
            head["prior"], prior_arrays = self.prior.to_saved()
            arrays |= {f"prior/{k}": v for k, v in prior_arrays.items()}
        return save_directory(path, head, arrays)

    @classmethod
    def load(cls, path, *, cache_dir=None, progress: bool = False) -> "System":
        """cache_dir: where features are cached, None for config.default_cache_dir() (as in
        fit_system)."""
        cache_dir = config.default_cache_dir() if cache_dir is None else cache_dir
        head, arrays = load_directory(path)
        if head.get("kind") != KIND:
            raise ValueError(f"{path}: holds a {head.get('kind')!r} model, not a whole system; "
                             "make one with `pamir fit`")
        if head.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path}: system format {head.get('format_version')} is not "
                             f"{FORMAT_VERSION}; retrain it with this version of pamir")
        part = {k.partition("/")[2]: v for k, v in arrays.items() if k.startswith("pipeline/")}
        pipeline = representation_from_saved(head["pipeline"], part, cache_dir=cache_dir,
                                             progress=progress)
        m = head["model"]
        model = model_class(m["kind"])(**m["params"])
        model._set_state(m.get("state", {}),
                         {k.partition("/")[2]: v for k, v in arrays.items()
                          if k.startswith("model/")})
        neighbours = None
        if head.get("neighbours"):
            neighbours = Neighbours.from_saved(
                head["neighbours"], {k.partition("/")[2]: v for k, v in arrays.items()
                                     if k.startswith("neighbours/")})
        system = cls(pipeline, model, head["vocabulary"], arrays["idf"], head.get("info", {}),
                     neighbours)
        if head.get("calibration"):  # models saved before calibration load without one
            system.calibration = Calibration.from_saved(
                head["calibration"], {k.partition("/")[2]: v for k, v in arrays.items()
                                      if k.startswith("calibration/")})
        if "prior" in head:  # models saved before the prior existed score with the model alone
            system.prior = Prior.from_saved(head["prior"], {
                k.partition("/")[2]: v for k, v in arrays.items() if k.startswith("prior/")})
        return system


def evaluate_system(system: System, collection: Collection, split: str = "test", *,
                    scores: bool = False) -> dict:
    """Evaluate a system on the queries of one split of a collection (TPAMI Tables IX-XII).

    The pictures go through the system's own pipeline (features are cached by pamir.features)
    and queries are weighted with the system's idf. Returns {"evaluation": Evaluation (per
    query, with the subsets all / single-word / multi-word / easy / difficult / unseen),
    "qids", "docids", "relevance", and with `scores` the (n_queries x n_pictures) scores}.
    """
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
        if system.prior is not None:
            Z = system.prior.mix(Z, system.class_probabilities([collection.paths[i]
                                                                for i in idx]))
        evaluation = evaluate_text_space(Z, Q, qs.relevance, subsets)
        S = query_scores(Z, Q) if scores else None
    return {"evaluation": evaluation, "qids": qs.qids(),
            "docids": [collection.ids[i] for i in idx], "relevance": qs.relevance,
            "scores": S, "unreadable": int((~np.asarray(ok, bool)).sum())}


# ------------------------------------------------------------------ what an index takes
# A system is this module's System or the zero-caption one (pamir.zeroshot.classes): these read
# either by what it has, so that the index never needs to know which.

def cnn_part(pipeline):
    """The ImageNet CNN representation in a system's pipeline (itself or a part of a
    combination), or None."""
    if hasattr(pipeline, "class_scores"):
        return pipeline
    return next((p for p in getattr(pipeline, "parts", ()) if hasattr(p, "class_scores")), None)


def class_names_of(system) -> list[str]:
    """The class names an index of this system stores probabilities for: ImageNet's when
    its representation is an ImageNet CNN (and the names are installed), else none."""
    if cnn_part(getattr(system, "pipeline", None)) is None:
        return []
    try:
        return imagenet_class_names()
    except EmbeddingUnavailable:
        return []


def index_transform(system, classes: bool):
    """What an index takes from a system for each picture (pamir.index.sync.Transform): its
    text-space vector (T,), then, for an index with classes, the CNN classifier's
    probabilities (C,)."""
    if not classes:
        return system.transform_paths
    part = cnn_part(system.pipeline)

    def transform(paths):
        Z, ok, reasons = system.transform_paths(paths)
        logits, class_ok, _ = part.class_scores(paths)  # the pooled vectors are cached
        ok = np.asarray(ok, bool) & np.asarray(class_ok, bool)
        P = class_probabilities(logits).astype(np.float32)
        P[~ok] = 0.0
        return np.hstack([np.asarray(Z, np.float32), P]), ok, reasons

    return transform


__all__ = ["System", "class_names_of", "cnn_part", "evaluate_system", "index_transform"]
