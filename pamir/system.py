"""A whole trained retrieval system in one directory: pictures -> features -> model -> text space.

    system = fit_system(load_collection("corel5k"), model="pamir")
    system.save("models/corel")                    # model.json + arrays.npz, no pickle
    system = System.load("models/corel")
    Z, ok, reasons = system.transform_paths(paths)  # (n x T) float32 text-space pictures
    q, unknown = system.query_vector("tiger grass")
    scores = Z @ q                                 # rank pictures by decreasing score
    system.annotate(Z[:3], k=5)                    # [[(word, score), ...], ...]

A System holds a representation (pamir.features.registry: visterms, blocks, cnn, sift, blobs,
blobs-arff or a combination, fitted on the protocol's training pictures only), the vocabulary and the training
idf (for query vectors), and any model of pamir.models.MODELS that reads that representation.
This API is what the product (index, search, server) builds on: keep it stable.

Training (`fit_system`): the representation is chosen on validation among candidates, and for
each the model's parameters by pamir.selection, the one selection loop; optionally the chosen
settings are retrained on train + validation.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from . import config
from .bridge import EmbeddingUnavailable, class_probabilities, imagenet_class_names
from .config import DEFAULT_REPRESENTATIONS
from .data import Collection
from .evaluation import evaluate_model, evaluate_text_space, query_scores
from .features import FeatureSettings, collection_features
from .features.registry import (Concatenation, make_representation, output_of, parse_name,
                                representation_from_saved, representation_name, takes)
from .features.representation import Extracted, take_rows
from .models import model_class
from .models.pa import deadline, out_of_time
from .models.pamir import FEEDBACK_EPOCHS, LEARN_MAX_UPDATES, LEARN_UPDATES_PER_PICTURE  # noqa: F401
from .models.base import TextSpaceModel, dense_float32, load_directory, save_directory
from .models.neighbours import (LabelTransfer, Neighbours, fit_projection, mix_stats, mixed,
                                view_of)
from .protocol import Protocol
from .selection import (FitDisplay, Race, Selection, check_points, default_point, fit_pool,
                        fit_workers, grid_points, guarded_choice, model_grid,
                        prepare_for_fits, progress_callback,
                        select, validation_avgp, validation_queries)
from .text import idf as idf_weights
from .text import query_vector, tokenize

KIND = "system"
FORMAT_VERSION = 1
#: Where fitting reports its steps unless given `log` (quiet unless logging is configured;
#: the CLI passes its own printer).
logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------ feature pipelines

# ------------------------------------------------------------------------------- System

class System:
    """Visual pipeline + vocabulary and idf + a fitted model (see the module docstring).

    vocabulary: the T words of the text space, in the order of the model's outputs.
    idf: (T,) the training idf of those words, for query vectors (TPAMI §IV-A).
    info: how it was made (data, chosen parameters, validation AvgP, seeds, seconds).
    neighbours: the label-transfer part mixed with the model's scores (issue 26;
    pamir.models.neighbours), or None: the model's scores alone.
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
        self.prior = None  # pamir.prior.Prior: ImageNet's classes mixed into its words' scores
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
        if self.prior is not None:  # the classes' part of each word (issue 37)
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
        """Each text-space row's words, best first, with their scores (pamir.annotation,
        which `pamir annotate` and the API use, adds the calibrated probabilities and
        ImageNet's words). k None: by the rule validation preferred, as `pamir annotate`
        gives them: the 5 best, or with per-word thresholds the words likely enough; k: the
        k best words."""
        from .calibration import annotate  # noqa: PLC0415  the rule's home

        rule = self.calibration if k is None else None  # an explicit k is a count
        return [[(word, score) for word, score, _ in row]
                for row in annotate(rule, Z_rows, self.vocabulary, k)]

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
            from .calibration import Calibration  # noqa: PLC0415

            system.calibration = Calibration.from_saved(
                head["calibration"], {k.partition("/")[2]: v for k, v in arrays.items()
                                      if k.startswith("calibration/")})
        if "prior" in head:  # models saved before issue 37 score with the model alone
            from .prior import Prior  # noqa: PLC0415

            system.prior = Prior.from_saved(head["prior"], {
                k.partition("/")[2]: v for k, v in arrays.items() if k.startswith("prior/")})
        return system


# ---------------------------------------------------------------- learning after training
# Issue 13: PA is an online algorithm, so a trained system keeps learning: from a person's
# feedback on a query's results (right / wrong pictures) and from new captioned pictures,
# new words included. These functions extend System without changing its API above; they
# need a model that is linear in the picture vector (PAMIR's W_, T x V).

# FEEDBACK_EPOCHS (PA-I passes over a feedback round's triplets) and LEARN_UPDATES_PER_PICTURE,
# LEARN_MAX_UPDATES (the updates `learn` draws) are PAMIR's (pamir.models.pamir), which does
# the learning: partial_fit, feedback_delta.
#: Feedback's neighbour term (`neighbour_scores`), chosen on the Corel 5k validation
#: queries by benchmarks/bench_search.py (its "feedback" grid): how sharply similarity
#: decays, and how far a right (wrong) picture's near pictures move, in standard deviations
#: of the query's scores.
FEEDBACK_SHARPNESS = 8.0
FEEDBACK_RIGHT_WEIGHT = 2.0
FEEDBACK_WRONG_WEIGHT = 1.0


def validation_cost(model) -> dict:
    """What the chosen fit's validation checkpoints cost: seconds and their share of the fit
    (updates + checkpoints; issue 24 bounds it at about 10 %); {} for a model that says not."""
    valid, train = getattr(model, "valid_seconds_", None), getattr(model, "train_seconds_", None)
    if valid is None or not train:
        return {}
    return {"seconds": round(valid, 6), "share": round(valid / (valid + train), 4)}


def linear_map(system: System) -> np.ndarray:
    """The model's W (T x V); NotImplementedError for a model that is not linear PAMIR."""
    W = getattr(system.model, "W_", None)
    if W is None or getattr(system.model, "kind", "") != "pamir":
        kind = getattr(system.model, "kind", type(system.model).__name__)
        raise NotImplementedError(f"the {kind} model cannot learn online: feedback and "
                                  "`pamir learn` need a (linear) PAMIR model")
    return W


def feedback_delta(system: System, q: np.ndarray, positives, negatives, *, c: float | None = None,
                   epochs: int = FEEDBACK_EPOCHS, margin: float | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """One round of relevance feedback for the query vector q: (rows, delta), the model's
    PAMIR.feedback_delta (PA-I on every (q, right, wrong) triplet). Nothing is changed;
    `apply_delta` keeps the round."""
    linear_map(system)
    return system.model.feedback_delta(q, positives, negatives, c=c, epochs=epochs,
                                       margin=margin)


def feedback_scores(system: System, q: np.ndarray, rows: np.ndarray, delta: np.ndarray,
                    F) -> np.ndarray:
    """What `delta` adds to the scores q . W p of the pictures F (n x V): q_rows . delta p."""
    q = np.asarray(q, dtype=np.float64).ravel()
    if len(rows) == 0 or F.shape[0] == 0:
        return np.zeros(F.shape[0])
    D = np.asarray(F @ delta.T.astype(np.float64))  # (n x len(rows)), F sparse or dense
    return np.asarray(D, dtype=np.float64) @ q[rows]


def centred_cosine(A: np.ndarray, B: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """(len(A) x len(B)) cosine similarities of the rows of A and B, both centred on `mean`
    (as `Index.similar`: the words every picture scores high on do not make all alike)."""
    def unit(M):
        M = np.atleast_2d(np.asarray(M, dtype=np.float64)) - np.asarray(mean, np.float64)
        return M / np.maximum(np.linalg.norm(M, axis=1, keepdims=True), 1e-12)
    return unit(A) @ unit(B).T


def neighbour_scores(Z: np.ndarray, right: np.ndarray, wrong: np.ndarray, mean: np.ndarray,
                     scale: float, *, sharpness: float = FEEDBACK_SHARPNESS,
                     right_weight: float = FEEDBACK_RIGHT_WEIGHT,
                     wrong_weight: float = FEEDBACK_WRONG_WEIGHT) -> np.ndarray:
    """What a feedback round's judged pictures add to the scores of the pictures Z (n x T),
    all in the model's text space: scale x (right_weight x the similarity to the nearest
    right picture - wrong_weight x the similarity to the nearest wrong one), a similarity
    being exp(sharpness (cos - 1)) with the centred cosine (1 for the picture itself).

    Why, beside the PA step: a PA update moves the query's words' rows of W by a step
    bounded by its margin, and on Corel 5k validation it re-ranks the unjudged pictures
    barely at all; a picture near one marked right (or wrong) is what a person expects to
    rise (or sink). It also works with right pictures only, or wrong ones only, where PA
    has no pair to learn from. `scale`: the spread of the query's scores (their standard
    deviation over the collection), so that the weights do not depend on the model."""
    out = np.zeros(len(Z))
    for judged, weight in ((right, right_weight), (wrong, -wrong_weight)):
        if len(judged) and weight:
            near = np.exp(sharpness * (centred_cosine(Z, judged, mean) - 1.0)).max(axis=1)
            out += weight * scale * near
    return out


def apply_delta(system: System, rows: np.ndarray, delta: np.ndarray, *, right=None,
                paths: Sequence | None = None) -> None:
    """Fold a feedback round's change into the model's W (in memory; save to keep it).

    right: the model inputs of the pictures marked right (rows), which join the neighbours
    at once, captioned with the query's words (`rows`), and `paths` them (for `voters`)."""
    linear_map(system)
    system.model.apply_feedback(rows, delta)
    part = getattr(system, "neighbours", None)
    if part is not None and right is not None and right.shape[0] and len(rows):
        Y = sp.csr_matrix((np.ones(right.shape[0] * len(rows), np.float32),
                           (np.repeat(np.arange(right.shape[0]), len(rows)),
                            np.tile(np.asarray(rows, np.int64), right.shape[0]))),
                          shape=(right.shape[0], system.T))
        part.transfer.add(part.view(right), Y, paths=paths)
    system.info.setdefault("feedback_rounds", 0)
    system.info["feedback_rounds"] += 1


def add_words(system: System, words, idf_new: np.ndarray) -> list[str]:
    """Grow the vocabulary by `words` (new ones only, in order): W gains zero rows, the idf
    takes `idf_new` (the whole new vocabulary's). Returns the words added."""
    linear_map(system)
    added = [w for w in dict.fromkeys(words) if w not in system.word_index]
    T = len(system.vocabulary) + len(added)
    idf_new = np.asarray(idf_new, dtype=np.float64)
    if idf_new.shape != (T,):
        raise ValueError(f"idf for {idf_new.shape} words; the grown vocabulary has {T}")
    if added:
        system.model.grow_vocabulary(idf_new)
        system.vocabulary = system.vocabulary + added
        system.word_index = {w: k for k, w in enumerate(system.vocabulary)}
        if getattr(system, "neighbours", None) is not None:
            system.neighbours.transfer.grow_words(T)
        if getattr(system, "prior", None) is not None:
            system.prior.grow(T)
    system.idf = idf_new
    return added


def learn(system: System, F, captions, *, n_updates: int | None = None, seed: int = 0,
          c: float | None = None, init: dict | None = None, average: bool = True,
          paths: Sequence | None = None) -> dict:
    """Learn from new captioned pictures without refitting: new words join the vocabulary
    (W gains rows), the idf is updated with the new captions' counts, and PA-I updates run on
    triplets (q, p+, p-) drawn from the new pictures as in training (q: a word or a subset of
    a caption; p+ a picture with all of q's words, p- one without). F: the pictures' model
    inputs (n rows); captions: their words (tuples).

    init: {new word: [(vocabulary word, similarity)]}: a new word's row starts as the
    similarity-weighted mean of those words' rows (what pamir.bridge maps it to); otherwise
    (the default, and what `pamir learn` does) from zero. Measured, zero is much better:
    the neighbours' rows carry what the new pictures' negatives cannot unlearn (giraffe
    started from zebra keeps ranking zebras: test AvgP 15 against 86 from zero, Corel 5k,
    10 pictures; benchmarks/results/search*.md).
    average: keep the average of W over the updates (as PAMIR's training does), which
    steadies what a few pictures teach. paths: the pictures' (for `System.voters`).
    A system with neighbours (pamir.models.neighbours) adds the pictures to them: they vote
    from the next picture transformed on. Returns a report."""
    linear_map(system)
    captions = [tuple(dict.fromkeys(c or ())) for c in captions]
    keep = [i for i, c in enumerate(captions) if c]
    if not keep:
        raise ValueError("no captioned picture to learn from")
    F = take_rows(F, np.asarray(keep)) if len(keep) < F.shape[0] else F
    captions = [captions[i] for i in keep]
    paths = None if paths is None else [str(paths[i]) for i in keep]
    new_words = list(dict.fromkeys(w for c in captions for w in c
                                   if w not in system.word_index))
    # idf over the training pictures and the new ones: the training counts are recovered
    # from the stored idf (df = n exp(-idf)) and the new captions' counts added
    seen = system.info.get("pictures") or {}
    n_old = (int(seen.get("train", 0)) + (int(seen.get("valid", 0)) if system.info.get("retrained")
                                          else 0)
             + sum(int(r.get("pictures", 0)) for r in system.info.get("learned", [])))
    n_old = n_old or len(captions)
    vocab = system.vocabulary + new_words
    index = {w: k for k, w in enumerate(vocab)}
    df = np.concatenate([n_old * np.exp(-system.idf), np.zeros(len(new_words))])
    df = np.where(df < 0.75, 0.0, df)  # an unseen word's idf counts half a picture: none
    for caption in captions:
        for w in caption:
            df[index[w]] += 1
    n = n_old + len(captions)
    idf_new = -np.log(np.maximum(df, 0.5) / n)
    starts, started_from = {}, {}
    for w, near in (init or {}).items():
        near = [(index[v], float(s)) for v, s in near
                if v in system.word_index and v not in new_words]
        if w in new_words and near:
            starts[index[w]] = near
            started_from[w] = [vocab[t] for t, _ in near]
    rows, cols = zip(*[(i, index[w]) for i, cap in enumerate(captions) for w in cap])
    Y = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(captions), len(vocab)))
    # the model learns (PAMIR.partial_fit: new rows of W, PA updates); the system keeps the
    # vocabulary, the idf and the record
    system.model.partial_fit(F, Y, idf=idf_new, init=starts, n_updates=n_updates,
                             random_state=seed, c=c, average=average)
    add_words(system, new_words, idf_new)
    if getattr(system, "neighbours", None) is not None:  # they vote from now on
        system.neighbours.transfer.add(system.neighbours.view(F), Y, paths=paths)
    lonely = sorted({w for cap in captions for w in cap
                     if all(w in other for other in captions)})
    done = system.model.last_update_
    report = {"pictures": len(captions), "new_words": new_words, "vocabulary": len(vocab),
              "queries": done["queries"], "updates": done["updates"],
              "active": done["active"], "words_without_negatives": lonely,
              "started_from": started_from}
    if done["updates"]:
        system.info.setdefault("learned", []).append(
            {"pictures": len(captions), "new_words": new_words, "updates": done["updates"]})
    return report


def save_keeping_previous(system: System, path) -> Path:
    """Save the system over `path` atomically, the model that was there first copied to
    `PATH.previous` (replacing an older one): a bad update is one rename away from undone."""
    import shutil  # noqa: PLC0415

    path = Path(path).resolve()
    if (path / "model.json").is_file():
        previous = path.with_name(path.name + ".previous")
        tmp = path.with_name(f".{path.name}.previous-tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        try:  # file by file (a model folder holds files only): an error names its errno
            tmp.mkdir()
            for f in path.iterdir():
                shutil.copy2(f, tmp / f.name)
        except OSError as e:  # a full or failing disk: nothing half-copied is left
            shutil.rmtree(tmp, ignore_errors=True)
            raise OSError(e.errno, f"{path}: cannot save the model (copying the previous one "
                                   f"aside: {e.strerror or e}); the previous model is "
                                   "unchanged") from None
        shutil.rmtree(previous, ignore_errors=True)
        tmp.rename(previous)
    return system.save(path)


# ------------------------------------------------------------------------------ training

# DEFAULT_REPRESENTATIONS (pamir.config): the representations `pamir fit` chooses among.
COMBINATION_WEIGHTS = (0.5, 1.0)
#: Combinations of three or more parts are tried at these weights only (each point costs a
#: PAMIR fit on 18,000 to 24,000 dimensions): on Corel 5k cnn+cnn-lite2+visterms gave
#: validation AvgP 45.42 at (1, 1, 1) against 45.24 with cnn-lite2 at 0.7, and other
#: weights move it by less than a seed does (benchmarks/results/cnn_plateau.md).
WIDE_COMBINATION_WEIGHTS = (1.0,)

#: A folder with fewer captioned pictures than this fits only the richest default
#: representation (the last of DEFAULT_REPRESENTATIONS the model reads), not every
#: candidate (issue 35): on Corel 5k subsamples of 700 captioned pictures (5 seeds,
#: benchmarks/results/small_selection.md) it won the validation every time, each narrower
#: candidate scored below it on validation and on test, and choosing its c on validation
#: rather than keeping the default gained 0.15 test AvgP on average (sd over seeds 0.3-0.5).
#: The other candidates and the grid cannot pay there: one fit, the model's defaults.
SMALL_FOLDER_PICTURES = 1_000

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
                      cache_dir=None, progress: bool = True, log=logger.info):
    """(F, ok, representation): the features of every picture of `collection`, the
    representation fitted on protocol.train only. Everything is cached under cache_dir
    (visterm bags and pipelines by pamir.features.collection, CNN features per picture)."""
    cache_dir = config.default_cache_dir() if cache_dir is None else cache_dir
    parts = parse_name(representation)
    if len(parts) > 1:
        done = [collection_inputs(collection, protocol, part, feature_settings,
                                  cnn_settings=cnn_settings, cache_dir=cache_dir,
                                  progress=progress, log=log) for part in parts]
        rep = Concatenation([d[2] for d in done], weights or [1.0] * len(parts))
        ok = np.logical_and.reduce([d[1] for d in done])
        return rep.combine([d[0] for d in done]), ok, rep
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
                   "representation wins there on validation (Corel 5k subsamples of 700), so "
                   f"the {len(candidates) - 1} narrower candidates are skipped"}


def update_budget(cls, params: dict, n_train: int) -> dict:
    """The update budget of a model's fits on n_train training pictures, as model.json
    records it: the model's own `update_budget` (PAMIR's grows with the pictures) for what
    the caller did not fix in `params`; {} for a model without one."""
    budget = getattr(cls, "update_budget", None)
    if budget is None:
        return {}
    scaled = budget(n_train)
    return {**{k: params.get(k, v) for k, v in scaled.items()}, "train_pictures": int(n_train),
            "scaled": sorted(k for k in scaled if k not in params)}


def grid_reading(cls, params: dict, grid, representation: str) -> list[dict]:
    """The sub-grids of `grid` (the model's own when None) whose models read the named
    representation:
    kernel PAMIR's block kernels are tried on blocks, its linear kernel on vectors."""
    subs = model_grid(cls, params) if grid is None else (grid if isinstance(grid, list)
                                                         else [grid])
    kept = [sub for sub in subs if takes(cls(**params, **{k: v[0] for k, v in sub.items()}).input,
                                         representation)]
    return kept or [{}]


def _check_collection(collection, protocol) -> None:
    """What would only fail after minutes of feature extraction, said at once."""
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
               model_params: dict | None = None, progress: bool = False, *,
               representation=None, retrain: bool = False, grid: dict | list | None = None,
               protocol: Protocol | None = None, inputs=None, seeds=None, cnn_settings=None,
               ensemble: int = 1, cache_dir=None, log=logger.info,
               time_budget: float | None = None, neighbours: bool | None = None) -> System:
    """Train a whole system on a captioned collection.

    For each representation candidate (`representation`: a name or a list of names; None:
    DEFAULT_REPRESENTATIONS the model can read), the features are fitted on protocol.train
    and pamir.selection.select chooses the model's parameters on validation (`grid`: the
    model's own when None, {} for none; `seeds`: random_state values averaged). The
    representation and parameters with the best validation mean AvgP win. With `retrain`, the
    winner's settings (plus where it stopped) are trained again on train + valid. With
    `ensemble` > 1 (PAMIR only), the winner is trained with that many seeds and the models are
    averaged (PAMIR.average), on train and, with `retrain`, each again on train + valid.
    `inputs` = (F, ok, representation) reuses features already computed for this collection
    and protocol. `log` takes one line per step (default: the pamir.system logger; None:
    silent); `progress` shows live progress bars on a terminal. cache_dir: where features
    are cached, None for config.default_cache_dir().

    Fits run concurrently (pamir.selection.fit_workers) and give the same system whatever
    the number of threads. `time_budget` (seconds, from the call): fits still running when it
    is spent stop at their next validation, keeping their best weights, and the ensemble and
    the retraining are left out if there is no time left for them; info["budget"] says what
    was cut (the result then depends on the machine's speed).

    `neighbours` (None: config.NEIGHBOURS): a PAMIR system on a representation with CNN
    views gets a label-transfer part (pamir.models.neighbours), its k, temperature and mix
    weight chosen on validation once PAMIR is trained (`choose_neighbours`); with `retrain`
    its neighbours are then the train + valid pictures, the choices kept.
    """
    say = log or (lambda *a: None)
    protocol = protocol or Protocol(collection)
    model_params = dict(model_params or {})
    cls = model_class(model)
    if ensemble < 1 or (ensemble > 1 and cls.kind != "pamir"):
        raise ValueError(f"an ensemble of {ensemble} seeds: give a count of 1 or more, and more "
                         "than 1 only with the pamir model (a linear model, whose models average "
                         "into one)")
    check_points(cls, model_params, grid_points(model_grid(cls, model_params)
                                                if grid is None else grid))
    _check_collection(collection, protocol)
    updates = update_budget(cls, model_params, len(protocol.train))
    model_params = {**{k: updates[k] for k in ("n_updates", "eval_every") if k in updates},
                    **model_params}
    candidates = ([(None, None)] if inputs is not None
                  else representation_candidates(model, representation, model_params))
    t0 = time.perf_counter()
    timing, skipped = {}, []
    left_out = small_folder_candidates(candidates, representation, inputs, protocol)
    if left_out:
        candidates = candidates[-1:]
        say(f"{left_out['why']}: fitting {candidates[0][0]} alone")
        # (the model's own grid: None, or as `pamir fit` passes it)
        own = model_grid(cls, model_params)
        if (grid is None or grid == own) and own != [{}]:
            grid = {}  # and its own parameters, not a grid (SMALL_FOLDER_PICTURES)
            left_out["what"].append("the parameter grid")
            left_out["why"] += "; so is the parameter grid (it moved test AvgP by 0.15 there)"
    workers = fit_workers(cls)
    seeds_per_point = 1 if seeds is None else len(list(seeds))
    with FitDisplay(progress, log) as display, fit_pool(workers) as pool, \
            deadline(time_budget):
        # 1. every candidate's features, one after another (extraction uses the cores itself)
        prepared = []
        for name, weights in candidates:
            started = time.perf_counter()
            F, ok, rep = inputs if inputs is not None else collection_inputs(
                collection, protocol, name, feature_settings, weights=weights,
                cnn_settings=cnn_settings, cache_dir=cache_dir, progress=progress, log=log)
            name = representation_name(rep) if name is None else name
            feature_seconds = time.perf_counter() - started
            train, valid = protocol.train[ok[protocol.train]], protocol.valid[ok[protocol.valid]]
            for split, idx, full in (("train", train, protocol.train),
                                     ("valid", valid, protocol.valid)):
                if len(idx) < len(full):
                    say(f"{len(full) - len(idx)} {split} pictures could not be read and are "
                        "left out")
            label = name + (f" (weights {', '.join(map(str, weights))})"
                            if weights and len(weights) > 1 else "")
            say(f"representation {label}: {feature_seconds:.1f} s of features")
            prepared.append(_Candidate(name, weights, label, F, ok, rep, train, valid,
                                       feature_seconds, _stored_per_row(F),
                                       _fit_pictures(cls, F, train, valid)))
            if not _hold_features(inputs, candidates):
                prepared[-1].F = None  # read again from the cache if it wins
            del F
        timing["features"] = round(time.perf_counter() - t0, 2)

        # 2. every candidate's grid on validation, all the fits sharing the threads
        started = time.perf_counter()
        sub_grids = [grid_reading(cls, model_params, grid, p.name) for p in prepared]
        n_fits = seeds_per_point * sum(len(grid_points(g)) for g in sub_grids)
        display.phase("selection", workers=workers, fits=n_fits)
        # every candidate's grid in one race (pamir.selection.Race), one seed per point
        racing = config.RACE and seeds_per_point == 1 and getattr(cls, "fits_in_threads", False)
        # a small validation split: the default point stays unless another beats it beyond
        # the noise (pamir.selection.guarded_choice), so it is never raced out
        flat = [(i, k) for i, g in enumerate(sub_grids) for k in range(len(grid_points(g)))]
        default = default_point([(prepared[i].name, prepared[i].weights or (1.0,),
                                  grid_points(sub_grids[i])[k]) for i, k in flat], cls)
        guard = len(protocol.valid) < config.SMALL_VALIDATION and default is not None
        default = flat[default] if guard else None
        race = Race(n_fits, workers, protect=[(*default, 0)] if guard else ()) if racing \
            else False

        def run(p, sub_grid, lane):
            X_fit, X_valid, X_valid_fit = p.pictures
            return select(cls, X_fit, protocol.presence(p.train), X_valid,
                          protocol.presence(p.valid), params=model_params,
                          seeds=seeds, log=log, progress=progress, grid=sub_grid,
                          executor=pool, label=p.label if len(prepared) > 1 else "",
                          race=race, race_lane=lane, guard=False, X_valid_fit=X_valid_fit)

        # the costliest candidates' fits are queued first (longest processing time first):
        # the widest fits, last in the candidate order, would otherwise end the phase alone
        # on one core. The order changes when a fit runs, never what it computes.
        costly_first = sorted(range(len(prepared)), key=lambda i: -prepared[i].stored_per_row)
        # (raced, every candidate's selection must run at once: its fits wait at the rungs
        # for the others')
        with fit_pool(len(prepared) if workers > 1 or race else 1) as candidates_pool:
            futures = {i: candidates_pool.submit(run, prepared[i], sub_grids[i], i)
                       for i in costly_first}
            selections = [futures[i].result() for i in range(len(prepared))]  # candidate order
        timing["selection"] = round(time.perf_counter() - started, 2)
        results, best = [], None
        for i, (p, sel) in enumerate(zip(prepared, selections)):
            results.append({"representation": p.name, "weights": list(p.weights or [1.0]),
                            "valid_avgp": round(sel.valid_avgp, 3),
                            "feature_seconds": round(p.feature_seconds, 2),
                            "grid": [t.as_dict() for t in sel.trials]})
            # (no model: every point was raced out by other candidates' fits)
            if sel.model is not None and (best is None or sel.valid_avgp > best[0].valid_avgp):
                best = (sel, i)
            if len(candidates) > 1:
                say(f"representation {p.label}: validation AvgP {sel.valid_avgp:.2f}"
                    + (" (raced out)" if sel.model is None else ""))
        if guard:
            default_name = prepared[default[0]].name
            default_params = selections[default[0]].trials[default[1]].params
            best = _guarded(prepared, selections, results, flat, default, say) or best
        sel, i = best
        chosen_one, winner = prepared[i], results[i]
        del prepared, selections  # the losers' features
        name, rep, train, valid = chosen_one.name, chosen_one.rep, chosen_one.train, \
            chosen_one.valid
        F = chosen_one.F if chosen_one.F is not None else collection_inputs(
            collection, protocol, name, feature_settings, weights=chosen_one.weights,
            cnn_settings=cnn_settings, cache_dir=cache_dir, progress=False, log=None)[0]
        members, valid_avgp = [sel.model], sel.valid_avgp
        if ensemble > 1 and out_of_time():
            skipped.append("ensemble")
        elif ensemble > 1:
            started = time.perf_counter()
            display.phase("ensemble", fits=ensemble - 1, workers=min(workers, ensemble - 1))
            grown, grown_avgp = _seed_ensemble(sel, ensemble, chosen_one.pictures,
                                               protocol.presence(train),
                                               protocol.presence(valid), progress, say, pool)
            if any(getattr(m, "out_of_time_", False) for m in grown):
                skipped.append("ensemble")  # a member cut short: the chosen model alone
                say("time budget spent during the ensemble: keeping the chosen model alone")
            else:
                members, valid_avgp = grown, grown_avgp
            timing["ensemble"] = round(time.perf_counter() - started, 2)
        chosen, system_idf = sel.params, protocol.idf
        use_neighbours = config.NEIGHBOURS if neighbours is None else neighbours
        views = neighbour_views(rep) if use_neighbours and cls.kind == "pamir" else []
        part, knn_info = None, None
        if views:
            started = time.perf_counter()
            part, knn_info = choose_neighbours(
                cls.average(members) if len(members) > 1 else members[0], F, protocol, train,
                valid, views, ids=[collection.ids[i] for i in train],
                paths=[str(collection.paths[i]) for i in train])
            timing["neighbours"] = round(time.perf_counter() - started, 2)
            say(f"neighbours: k {knn_info['k']}, temperature {knn_info['temperature']}, "
                f"weight {knn_info['alpha']}: validation AvgP {knn_info['valid_avgp']:.2f} "
                f"(the model alone {knn_info['model_valid_avgp']:.2f})"
                + ("" if part is not None else ": left out"))
            if part is not None:
                valid_avgp = knn_info["valid_avgp"]
        # what calibration reads (the validation pictures); the selection's prepared
        # pictures are done with (issue 35: each is let go as soon as it is)
        X_valid, chosen_one = chosen_one.pictures[1], None
        # calibration reads the train-only models' validation scores (not in-sample ones),
        # with the neighbours the training pictures made (the retraining refits them in place)
        trained_on_train = members
        trained_neighbours = (Neighbours.from_saved(*part.to_dict())
                              if retrain and part is not None else part)
        if retrain and out_of_time():
            skipped.append("retrain")
        elif retrain:
            started = time.perf_counter()
            dev = np.sort(np.concatenate([train, valid]))
            refits = [{**m.get_params(), **getattr(m, "refit_params_", {})} for m in members]
            chosen = refits[0]
            say(f"retraining on train + valid ({len(dev)} pictures) with {chosen}"
                + (f" and {len(refits) - 1} more seeds" if len(refits) > 1 else ""))
            display.phase("retraining", fits=len(refits), workers=min(workers, len(refits)))
            Y_dev = protocol.presence(dev)
            # the neighbours' view first: the seeds then share one prepared copy of X_dev
            # all the retraining reads is X_dev (and the neighbours' V_dev): F is let go
            # before X_dev is prepared, so that the two are never held with its rows
            rows = take_rows(F, dev)
            del F
            V_dev = part.view(rows) if part is not None else None
            X_dev = prepare_for_fits(cls, rows, None)[0]
            del rows

            def refit(params):
                seed = params.get("random_state", "")
                with progress_callback(f"{model} train+valid {seed}", progress) as callback:
                    return cls(**params).fit(X_dev, Y_dev, callback=callback)

            refitted = [f.result() for f in [pool.submit(refit, p) for p in refits]]
            if any(getattr(m, "out_of_time_", False) for m in refitted):
                skipped.append("retrain")  # cut short: the models trained on train stay
                chosen = sel.params
                say("time budget spent during the retraining: keeping the models trained on "
                    "train")
            else:
                members, system_idf = refitted, idf_weights(Y_dev)
                if part is not None:  # the choices made on validation stay
                    part.transfer.fit(V_dev, Y_dev,
                                      [collection.ids[i] for i in dev],
                                      [str(collection.paths[i]) for i in dev])
            timing["retrain"] = round(time.perf_counter() - started, 2)
    final = cls.average(members) if len(members) > 1 else members[0]
    scored = getattr(sel.model, "valid_queries_", None)
    info = {
        "data": collection.name, "model": model, "params": chosen,
        "representation": name, "representation_settings": rep.to_dict().get("settings"),
        "valid_avgp": round(valid_avgp, 3), "grid": winner["grid"],
        "ensemble": [int(m.random_state) for m in members] if len(members) > 1 else None,
        "representations": [{k: v for k, v in r.items() if k != "grid"}
                            | {"curves": [_curve(t) for t in r["grid"]]} for r in results],
        "retrained": retrain and "retrain" not in skipped, "seed": protocol.seed,
        "vocabulary_size": protocol.T,
        "pictures": {"train": int(len(train)), "valid": int(len(valid))},
        "valid_queries": None if scored is None else {
            "scored": scored[0], "all": scored[1], "seed": config.VALID_QUERY_SEED,
            **validation_cost(sel.model)},
        "fit_workers": workers, "timing": timing, "neighbours": knn_info, "updates": updates,
        "skipped": [left_out] if left_out else [],
        "selection_rule": ({"rule": "guarded", "alpha": config.GUARD_ALPHA,
                            "default": {"representation": default_name,
                                        "params": default_params}}
                           if guard else {"rule": "best validation mean"}),
        "raced": bool(race),
        "budget": None if time_budget is None else {
            "seconds": float(time_budget), "skipped": skipped,
            "fits_stopped": sum(bool(t.get("out_of_time")) for r in results for t in r["grid"]),
            "reached": bool(skipped) or any(t.get("out_of_time") for r in results
                                            for t in r["grid"])},
        "model_seconds": round(time.perf_counter() - t0, 2),
    }
    system = System(rep, final, protocol.vocabulary, system_idf, info, part)
    scored = _trained_on_train(system, trained_on_train, trained_neighbours, cls)
    P_valid = _fit_prior(system, scored, X_valid, valid, protocol, collection, say)
    _calibrate(system, scored, X_valid, valid, train, protocol, say, P_valid)
    return system


@dataclass
class _Candidate:
    """One representation candidate of fit_system: its features and the pictures its fits
    read (`pictures`: X_train and X_valid prepared for the fits, and X_valid as given, to
    score them). F, every picture's features, is dropped while the grid runs (None) unless
    it cannot be read again (`_hold_features`): the winner's is read again from the cache."""

    name: str
    weights: tuple | None
    label: str
    F: object
    ok: np.ndarray
    rep: object
    train: np.ndarray
    valid: np.ndarray
    feature_seconds: float
    stored_per_row: float
    pictures: tuple


def _fit_pictures(cls, F, train, valid) -> tuple:
    """(X_train, X_valid, X_valid_fit): a candidate's rows as its fits read them
    (pamir.selection.prepare_for_fits, once for every fit), and X_valid as given."""
    X_valid = take_rows(F, valid)
    X_fit, X_valid_fit = prepare_for_fits(cls, take_rows(F, train), X_valid)
    return X_fit, X_valid, X_valid_fit


def _hold_features(inputs, candidates) -> bool:
    """Whether fit_system keeps every candidate's features through the grid: when they were
    given (`inputs`: nothing to read them again from) or there is one candidate. Otherwise
    each candidate's F (every picture, all its parts: 0.4 GB for Corel 5k's widest) is let
    go once its fits' pictures are prepared, and the winner's read again from the feature
    cache (issue 35: holding all six was 2 GB of the peak)."""
    return inputs is not None or len(candidates) == 1


def neighbour_views(rep) -> list[tuple[int, int]]:
    """[start, stop) column ranges of the CNN views in the model's input, for the
    neighbours: the global average of each (config.NEIGHBOUR_GLOBAL_VIEWS) or all of it. Only
    the CNN parts before any other part are used (their widths are known without reading
    the pictures); [] when the representation starts with none."""
    parts = rep.parts if isinstance(rep, Concatenation) else [rep]
    views, at = [], 0
    for p in parts:
        if getattr(p, "kind", None) != "cnn":
            break
        width = p.dim // (1 + p.settings.regions ** 2) if config.NEIGHBOUR_GLOBAL_VIEWS else p.dim
        views.append((at, at + width))
        at += p.dim
    return views


def choose_neighbours(model, F, protocol: Protocol, train: np.ndarray, valid: np.ndarray,
                      views, *, ids=None, paths=None, grid: dict | None = None
                      ) -> tuple[Neighbours | None, dict]:
    """The neighbour part for a fitted model: the training pictures vote, and k, the
    temperature and the mix weight alpha are chosen on the validation pictures' AvgP (grid:
    {"k", "temperature", "alpha"} lists, config.NEIGHBOUR_* by default; the first best
    wins). The mix's statistics are measured on the validation pictures too. Returns (the
    part, or None where alpha = 0 wins; what was tried)."""
    from .evaluation.retrieval import mean_average_precision  # noqa: PLC0415

    grid = {"k": config.NEIGHBOUR_K, "temperature": config.NEIGHBOUR_TEMPERATURE,
            "alpha": config.NEIGHBOUR_ALPHA} | dict(grid or {})
    Y_train, Y_valid = protocol.presence(train), protocol.presence(valid)
    X_valid = take_rows(F, valid)
    queries = validation_queries(Y_valid, Y_train)
    P = dense_float32(model.transform(X_valid))

    def avgp(Z):
        return 100 * mean_average_precision(Z, queries.vectors, queries.relevance)

    V_train = view_of(take_rows(F, train), views)
    projection = (fit_projection(V_train, config.NEIGHBOUR_DIMS, config.SEED)
                  if config.NEIGHBOUR_DIMS else None)
    shape = Neighbours(LabelTransfer(), views, 0.0, {}, projection)  # the views it compares
    transfer = LabelTransfer(k=max(grid["k"]), floor=config.NEIGHBOUR_FLOOR).fit(
        shape.project(V_train), Y_train, ids, paths)
    sims, nbrs = transfer.search(shape.view(X_valid))
    alone = avgp(P)
    trials, best = [], None
    for k in grid["k"]:
        for temperature in grid["temperature"]:
            transfer.set_params(k=k, temperature=temperature)
            L = transfer.log_vote(transfer.vote_of(sims, nbrs))
            stats = mix_stats(P, L)
            for alpha in grid["alpha"]:
                value = alone if alpha == 0 else avgp(mixed(P, L, alpha, stats))
                trials.append({"k": k, "temperature": temperature, "alpha": alpha,
                               "valid_avgp": round(float(value), 3)})
                if best is None or value > best[0]:
                    best = (value, k, temperature, alpha, stats)
    value, k, temperature, alpha, stats = best
    transfer.set_params(k=k, temperature=temperature)
    info = {"k": k, "temperature": temperature, "alpha": alpha, "floor": transfer.floor,
            "valid_avgp": round(float(value), 3), "model_valid_avgp": round(float(alone), 3),
            "views": [list(v) for v in views], "dims": int(transfer.vectors_.shape[1]),
            "stats": stats, "grid": trials}
    return (Neighbours(transfer, views, alpha, stats, projection) if alpha > 0 else None), info


def _guarded(prepared, selections, results, flat, default, say):
    """The `best` of fit_system under the small-validation guard (config.SMALL_VALIDATION):
    the default point unless another beats it beyond the noise; None if the fitted models
    needed are not there (a model refitted after a shortened selection)."""
    per_query = [selections[i].trials[k].per_query if selections[i].models[k] is not None
                 else None for i, k in flat]
    d = flat.index(default)
    if per_query[d] is None:
        return None
    i, k = flat[guarded_choice(per_query, d)]
    sel, trial = selections[i], selections[i].trials[k]
    di, dk = default
    say(f"{len(prepared[i].valid)} validation pictures: the default point ({prepared[di].label}, "
        f"{selections[di].trials[dk].params}) is kept unless another beats it beyond the noise "
        f"(paired Wilcoxon, alpha {config.GUARD_ALPHA}): chose {prepared[i].label}, "
        f"{trial.params}, validation AvgP {trial.valid_avgp:.2f}")
    model = sel.models[k]
    chosen = Selection(model, model.get_params(), trial.valid_avgp, sel.trials, sel.models)
    return (chosen, i)


def _trained_on_train(system: System, trained_on_train, trained_neighbours, cls
                      ) -> System | None:
    """The system as trained on train only, when it was retrained on train + validation (its
    validation scores are what validation choices read: the retrained ones are in-sample);
    None when it was not retrained."""
    if not system.info.get("retrained"):
        return None
    return System(system.pipeline, cls.average(trained_on_train)
                  if len(trained_on_train) > 1 else trained_on_train[0],
                  system.vocabulary, system.idf, system.info, trained_neighbours)


def _fit_prior(system: System, scored: System | None, X_valid, valid, protocol, collection,
               say) -> np.ndarray | None:
    """Issue 37: the zero-caption system as a prior (pamir.prior) of a system with an
    ImageNet CNN view, its weights chosen on the validation pictures; returns their class
    probabilities (None where there is no prior)."""
    from .prior import choose_prior, word_classes  # noqa: PLC0415
    from .zeroshot import ClassWords  # noqa: PLC0415

    if not config.PRIOR or cnn_part(system.pipeline) is None or not len(valid):
        return None
    started = time.perf_counter()
    P_valid = system.class_probabilities([str(collection.paths[i]) for i in valid])
    words = ClassWords(imagenet_class_names(), cache_dir=config.default_cache_dir() /
                       "class-words")
    if words.warm() is not None:  # no embedding model: WordNet's table alone
        words = ClassWords(imagenet_class_names(), use_model=False)
    Z_valid = (scored or system).transform_features(X_valid)
    system.prior = choose_prior(Z_valid, P_valid, protocol.presence(valid),
                                word_classes(system.vocabulary, words))
    info = system.prior.info
    info["seconds"] = round(time.perf_counter() - started, 2)
    system.info["prior"] = info
    avgp = info.get("valid_single_word_avgp", {})
    say(f"ImageNet prior: global weight {info['global_weight']:g} on "
        f"{info['words_reaching_classes']} words reaching classes"
        + (f"; validation single-word AvgP {avgp['model']:.2f} -> {avgp['mixed']:.2f}"
           if avgp else ""))
    return P_valid


def _calibrate(system: System, scored: System | None, X_valid, valid, train, protocol, say,
               P_valid: np.ndarray | None = None) -> None:
    """Issue 26: fit the system's calibrated probabilities of relevance on the validation
    pictures, from the scores of the models trained on train only when the system was
    retrained on train + validation (pamir.calibration), its prior mixed in."""
    from .calibration import calibrate_system  # noqa: PLC0415

    system.calibration = calibrate_system(system, X_valid,
                                          protocol.presence(valid), protocol.presence(train),
                                          scored=scored, log=say, P_valid=P_valid)
    if system.calibration is not None:
        system.info["calibration"] = system.calibration.info


def _curve(trial: dict) -> dict:
    """A grid point's validation AvgP after each evaluation (percent), to study how early a
    race between candidates could be decided (benchmarks/bench_fit_speed.py)."""
    return ({"params": trial["params"], "valid_avgp": trial["valid_avgp"],
             "curve": trial.get("curve", [])}
            | ({"raced_out": trial["raced_out"]} if trial.get("raced_out") else {}))


def _stored_per_row(F) -> float:
    """Numbers stored per picture: what one PA update of a representation costs, roughly."""
    if sp.issparse(F):
        return F.nnz / max(F.shape[0], 1)
    return float(np.prod(F.shape[1:])) if hasattr(F, "shape") else 0.0


def _seed_ensemble(sel, n: int, pictures, Y_train, Y_valid, progress, say, pool):
    """The chosen PAMIR and n - 1 more trained with the next seeds (concurrently, on `pool`),
    each early-stopped on validation; returns (the models, the validation AvgP of their
    average, percent). pictures: the selection's (X_train, X_valid, X_valid) as the fits
    read them (`_fit_pictures`), shared by every member."""
    first, cls = int(sel.params.get("random_state", 0)), type(sel.model)
    X_fit, X_valid, X_valid_fit = pictures

    def member(seed):
        with progress_callback(f"pamir seed {seed}", progress) as callback:
            return cls(**{**sel.params, "random_state": seed}).fit(
                X_fit, Y_train, validation=(X_valid_fit, Y_valid), callback=callback)

    futures = [pool.submit(member, seed) for seed in range(first + 1, first + n)]
    members = [sel.model] + [f.result() for f in futures]
    queries = validation_queries(Y_valid, Y_train, sel.params.get("max_valid_queries",
                                                                  config.VALID_MAX_QUERIES))
    scores = [100 * validation_avgp(m, X_valid, queries) for m in members]
    averaged = 100 * validation_avgp(cls.average(members), X_valid, queries)
    say(f"ensemble of seeds {first}-{first + n - 1}: validation AvgP {averaged:.2f} (each "
        f"{', '.join(f'{v:.2f}' for v in scores)})")
    return members, averaged


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
# A system is this module's System or the zero-caption one (pamir.zeroshot): these read
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


__all__ = ["DEFAULT_REPRESENTATIONS", "System", "add_words", "apply_delta", "class_names_of",
           "cnn_part", "collection_inputs", "evaluate_system", "feedback_delta",
           "feedback_scores", "fit_system", "index_transform", "learn", "linear_map",
           "representation_candidates", "save_keeping_previous"]
