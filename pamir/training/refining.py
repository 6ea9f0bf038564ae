"""The phases of `fit_system` after the selection: more seeds of the chosen PAMIR
(`grow_ensemble`), the neighbour part (`add_neighbours`, `choose_neighbours`), the
retraining on train + valid (`retrain_on_development`), and the system's ImageNet prior
(pamir.prior) and calibration (pamir.calibration), which read the validation scores of the
models trained on train only.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np

from .. import config
from ..features.registry import Concatenation, as_matrix
from ..features.representation import take_rows
from ..imagenet import imagenet_class_names
from ..models.base import dense_float32
from ..models.neighbours import (LabelTransfer, Neighbours, fit_projection, mix_stats, mixed,
                                 view_of)
from ..models.pa import out_of_time
from ..protocol import Protocol
from ..progress import progress_callback
from .selection import prepare_for_fits, validation_avgp, validation_queries
from ..system import System, cnn_part
from ..text import idf as idf_weights
from .plan import Fitting, Trained, Winner
from .refitting import REFIT_UPDATE_SHARE


def grow_ensemble(fitting: Fitting, winner: Winner, ensemble: int) -> Trained:
    """Phase 3: with `ensemble` > 1, the chosen PAMIR and ensemble - 1 more seeds, averaged
    (left out when the time budget is spent, or cut short during it)."""
    f, sel = fitting, winner.selection
    trained = Trained([sel.model], sel.valid_avgp, sel.params, f.protocol.idf)
    if ensemble > 1 and out_of_time():
        f.skipped.append("ensemble")
    elif ensemble > 1:
        started = time.perf_counter()
        f.display.phase("ensemble", fits=ensemble - 1, workers=min(f.workers, ensemble - 1))
        c = winner.candidate
        grown, grown_avgp = _seed_ensemble(sel, ensemble, c.pictures,
                                           f.protocol.presence(c.train),
                                           f.protocol.presence(c.valid), f.progress, f.say,
                                           f.pool)
        if any(getattr(m, "out_of_time_", False) for m in grown):
            f.skipped.append("ensemble")  # a member cut short: the chosen model alone
            f.say("time budget spent during the ensemble: keeping the chosen model alone")
        else:
            trained.members, trained.valid_avgp = grown, grown_avgp
        f.timing["ensemble"] = round(time.perf_counter() - started, 2)
    return trained


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


def add_neighbours(fitting: Fitting, winner: Winner, trained: Trained) -> None:
    """Phase 4: a PAMIR system on CNN views gets a neighbour part (`choose_neighbours`),
    kept where it beats the model alone on validation."""
    f, c = fitting, winner.candidate
    views = neighbour_views(c.rep)
    if not views:
        return
    started = time.perf_counter()
    members = trained.members
    part, knn_info = choose_neighbours(
        f.cls.average(members) if len(members) > 1 else members[0], c.F, f.protocol, c.train,
        c.valid, views, ids=[f.collection.ids[i] for i in c.train],
        paths=[str(f.collection.paths[i]) for i in c.train])
    f.timing["neighbours"] = round(time.perf_counter() - started, 2)
    f.say(f"neighbours: k {knn_info['k']}, temperature {knn_info['temperature']}, "
          f"weight {knn_info['alpha']}: validation AvgP {knn_info['valid_avgp']:.2f} "
          f"(the model alone {knn_info['model_valid_avgp']:.2f})"
          + ("" if part is not None else ": left out"))
    trained.neighbours, trained.knn_info = part, knn_info
    if part is not None:
        trained.valid_avgp = knn_info["valid_avgp"]


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
    from ..evaluation.retrieval import mean_average_precision  # noqa: PLC0415

    grid = {"k": config.NEIGHBOUR_K, "temperature": config.NEIGHBOUR_TEMPERATURE,
            "alpha": config.NEIGHBOUR_ALPHA} | dict(grid or {})
    Y_train, Y_valid = protocol.presence(train), protocol.presence(valid)
    X_valid = as_matrix(take_rows(F, valid))
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


def retrain_on_development(fitting: Fitting, winner: Winner, trained: Trained) -> None:
    """Phase 5: the chosen settings (plus where each member stopped) trained again on train +
    valid, each member; the neighbours then vote with the train + valid pictures, the
    choices made on validation kept. Cut short by the time budget: the models trained on
    train stay."""
    f, c, cls = fitting, winner.candidate, fitting.cls
    started = time.perf_counter()
    dev = np.sort(np.concatenate([c.train, c.valid]))
    warm = hasattr(cls, "starting_from")  # PAMIR: each member goes on from its own weights
    refits = [_retrain_params(m, warm) for m in trained.members]
    trained.params = refits[0]
    f.say(f"retraining on train + valid ({len(dev)} pictures) with {trained.params}"
          + (f" and {len(refits) - 1} more seeds" if len(refits) > 1 else "")
          + (", each from its weights on train" if warm else ""))
    f.display.phase("retraining", fits=len(refits), workers=min(f.workers, len(refits)))
    Y_dev = f.protocol.presence(dev)
    part = trained.neighbours
    # the neighbours' view first: the seeds then share one prepared copy of X_dev
    # all the retraining reads is X_dev (and the neighbours' V_dev): F is let go here, but
    # its parts live on in `rows` until X_dev is made from them (the parts and
    # X_dev together are the peak of a 100,000-picture fit, fit_memory_synthetic_blocks.md)
    rows = take_rows(c.F, dev)
    c.F = None
    V_dev = part.view(rows) if part is not None else None
    X_dev = prepare_for_fits(cls, rows, None)[0]
    del rows

    def refit(member, params):
        seed = params.get("random_state", "")
        start = {"coef_init": member.W_} if warm else {}
        with progress_callback(f"{f.model} train+valid {seed}", f.progress) as callback:
            return cls(**params).fit(X_dev, Y_dev, callback=callback, **start)

    refitted = [done.result() for done in
                [f.pool.submit(refit, m, p) for m, p in zip(trained.members, refits)]]
    if any(getattr(m, "out_of_time_", False) for m in refitted):
        f.skipped.append("retrain")  # cut short: the models trained on train stay
        trained.params = winner.selection.params
        f.say("time budget spent during the retraining: keeping the models trained on "
              "train")
    else:
        trained.members, trained.idf = refitted, idf_weights(Y_dev)
        f.retrain = {"start": "each member's weights on train" if warm else "zero",
                     "updates": int(refits[0]["n_updates"])}
        if part is not None:  # the choices made on validation stay
            part.transfer.fit(V_dev, Y_dev, [f.collection.ids[i] for i in dev],
                              [str(f.collection.paths[i]) for i in dev])
    f.timing["retrain"] = round(time.perf_counter() - started, 2)


def _retrain_params(member, warm: bool) -> dict:
    """A member's settings for the retraining: where it stopped on train (`refit_params_`),
    or with `warm` REFIT_UPDATE_SHARE of that, from its weights. Measured one
    level down on Corel 5k (benchmarks/results/retrain_warm.md: 3,500 training pictures
    grown by 500, judged on the 500 validation pictures), a quarter of the updates from the
    train-only weights did as well as all of them from zero, in a quarter of the time."""
    params = {**member.get_params(), **getattr(member, "refit_params_", {})}
    if warm:
        params["n_updates"] = max(int(params.get("eval_every") or 1),
                                  int(REFIT_UPDATE_SHARE * params["n_updates"]))
    return params


def trained_on_train(system: System, trained_on_train, trained_neighbours, cls
                     ) -> System | None:
    """The system as trained on train only, when it was retrained on train + validation (its
    validation scores are what validation choices read: the retrained ones are in-sample);
    None when it was not retrained."""
    if not system.info.get("retrained"):
        return None
    return System(system.pipeline, cls.average(trained_on_train)
                  if len(trained_on_train) > 1 else trained_on_train[0],
                  system.vocabulary, system.idf, system.info, trained_neighbours)


def fit_prior(system: System, scored: System | None, X_valid, valid, protocol, collection,
              say, classes=None, X_train=None, train=()) -> np.ndarray | None:
    """The zero-caption system as a prior (pamir.prior) of a system with an
    ImageNet CNN view, its weights chosen on the validation pictures, its spreads measured
    on them and on X_train (some training pictures' features: `spread_rows`), the global
    weight on the validation queries (captions weighted by `train`'s idf); returns the
    validation pictures' class probabilities (None where there is no prior). classes: the
    vocabulary's classes (`vocabulary_classes`, a Future of them from
    `start_vocabulary_classes`), computed here when None."""
    from ..prior import choose_prior  # noqa: PLC0415

    if not config.PRIOR or cnn_part(system.pipeline) is None or not len(valid):
        return None
    started = time.perf_counter()
    P_valid = system.class_probabilities([str(collection.paths[i]) for i in valid])
    classes = (vocabulary_classes(system.vocabulary) if classes is None
               else classes.result() if hasattr(classes, "result") else classes)
    model = scored or system
    Z_valid = model.transform_features(X_valid)
    Z_train = None if X_train is None else model.transform_features(X_train)
    system.prior = choose_prior(Z_valid, P_valid, protocol.presence(valid), classes,
                                Z_train=Z_train,
                                queries=validation_queries(protocol.presence(valid),
                                                           protocol.presence(train)))
    info = system.prior.info
    info["seconds"] = round(time.perf_counter() - started, 2)
    system.info["prior"] = info
    avgp = info.get("valid_single_word_avgp", {})
    say(f"ImageNet prior: global weight {info['global_weight']:g} on "
        f"{info['words_reaching_classes']} words reaching classes"
        + (f"; validation single-word AvgP {avgp['model']:.2f} -> {avgp['mixed']:.2f}"
           if avgp else ""))
    return P_valid


def spread_rows(candidate, train: np.ndarray):
    """The features of at most pamir.prior.SPREAD_PICTURES of the training pictures (a
    seeded draw), which the prior's spreads are measured on; None where the candidate's
    features were let go."""
    from ..prior import SPREAD_PICTURES  # noqa: PLC0415

    if candidate.F is None or not len(train):
        return None
    rng = np.random.default_rng(config.SEED)
    pick = np.sort(rng.choice(train, min(len(train), SPREAD_PICTURES), replace=False))
    return as_matrix(take_rows(candidate.F, pick))  # (column blocks: what a model reads)


def _classes_file(vocabulary) -> Path:
    """Where this machine keeps a vocabulary's classes (beside the class texts' embeddings):
    named by the vocabulary (and the embedding model) and the matching's settings."""
    from ..bridge import vocabulary_hash  # noqa: PLC0415
    from ..zeroshot import FLOOR, NEIGHBOURS, TEMPERATURE  # noqa: PLC0415

    key = f"{vocabulary_hash(list(vocabulary))}-{FLOOR:g}-{NEIGHBOURS}-{TEMPERATURE:g}"
    return config.default_cache_dir() / "class-words" / f"word-classes-{key}.npz"


def vocabulary_classes(vocabulary):
    """(T x 1000, sparse) each vocabulary word's ImageNet classes (pamir.prior.word_classes
    through pamir.zeroshot.ClassWords), read from this machine's cache (`_classes_file`) or
    computed and cached; without the embedding model, the word table's alone (not cached)."""
    import scipy.sparse as sp  # noqa: PLC0415

    from ..prior import word_classes  # noqa: PLC0415
    from ..storage import atomic_write  # noqa: PLC0415
    from ..zeroshot import ClassWords  # noqa: PLC0415

    path = _classes_file(vocabulary)
    try:
        return sp.load_npz(path).tocsr()  # (numpy arrays only: no pickle is read)
    except (OSError, ValueError):
        pass  # not there yet, or damaged: computed again
    words = ClassWords(imagenet_class_names(), cache_dir=path.parent)
    if words.warm() is not None:  # no embedding model: WordNet's table alone
        return word_classes(vocabulary, ClassWords(imagenet_class_names(), use_model=False))
    classes = word_classes(vocabulary, words).astype(np.float32)
    try:
        atomic_write(path, lambda f: sp.save_npz(f, classes))
    except OSError:
        pass  # a read-only cache: computed again next time
    return classes


class ClassesInChild:
    """`vocabulary_classes` computed by a child process (`start_vocabulary_classes`);
    `result()` waits for it and reads what it cached, or computes them here if it failed."""

    def __init__(self, vocabulary):
        import subprocess  # noqa: PLC0415
        import sys  # noqa: PLC0415

        self.vocabulary = list(vocabulary)
        # a new interpreter, not multiprocessing's spawn: that re-runs the caller's main
        # module, which a person's script (`import pamir`) need not guard
        env = dict(os.environ)
        here = str(Path(__file__).resolve().parents[2])  # this pamir, wherever it lives
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        self.child = subprocess.Popen(
            [sys.executable, "-c", "from pamir.training.refining import _classes_child; "
             "_classes_child()"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, env=env)
        self.child.stdin.write(json.dumps(self.vocabulary).encode())
        self.child.stdin.close()

    def result(self):
        import scipy.sparse as sp  # noqa: PLC0415

        err = self.child.stderr.read().decode(errors="replace")
        self.child.stderr.close()
        if self.child.wait() == 0:
            try:
                return sp.load_npz(_classes_file(self.vocabulary)).tocsr()
            except (OSError, ValueError):
                pass  # a read-only cache: the child could not leave them
        elif err.strip():
            logging.getLogger(__name__).warning("the ImageNet classes of the vocabulary: %s",
                                                err.strip().splitlines()[-1])
        return vocabulary_classes(self.vocabulary)


def _classes_child() -> None:
    """The child's work: the vocabulary (JSON on stdin) to its classes, cached."""
    import sys  # noqa: PLC0415

    vocabulary_classes(json.loads(sys.stdin.read()))


def start_vocabulary_classes(vocabulary):
    """`vocabulary_classes`, or something whose `result()` gives them: from the cache at
    once, else computed by a child process started now, before the fit holds its features
    (the sentence-embedding model, loaded in the fit's own process, stayed
    resident and raised the README command's peak from 2.57 to 3.31 GB; a child's memory is
    given back when it ends)."""
    import scipy.sparse as sp  # noqa: PLC0415

    try:
        return sp.load_npz(_classes_file(vocabulary)).tocsr()
    except (OSError, ValueError):
        return ClassesInChild(vocabulary)


def calibrate(system: System, scored: System | None, X_valid, valid, train, protocol, say,
              P_valid: np.ndarray | None = None) -> None:
    """Fit the system's calibrated probabilities of relevance on the validation
    pictures, from the scores of the models trained on train only when the system was
    retrained on train + validation (pamir.calibration), its prior mixed in."""
    from ..calibration import calibrate_system  # noqa: PLC0415

    system.calibration = calibrate_system(system, X_valid,
                                          protocol.presence(valid), protocol.presence(train),
                                          scored=scored, log=say, P_valid=P_valid)
    if system.calibration is not None:
        system.info["calibration"] = system.calibration.info


__all__ = ["add_neighbours", "calibrate", "choose_neighbours", "fit_prior", "grow_ensemble",
           "neighbour_views", "retrain_on_development", "spread_rows",
           "start_vocabulary_classes", "trained_on_train", "vocabulary_classes"]
