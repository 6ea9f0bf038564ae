"""The prior phase of `fit_system`: a system with an ImageNet CNN view gets the
zero-caption system as a prior (pamir.zeroshot.prior, `fit_prior`), chosen on the
validation scores of the models trained on train only. The vocabulary's ImageNet classes
it reads are started first (`start_classes`), in a child process, before the fit holds its
features.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .. import config
from ..features.registry import as_matrix, parse_name
from ..features.representation import take_rows
from ..storage import atomic_write
from ..system import System, cnn_part
from ..text.bridge import vocabulary_hash
from ..zeroshot.classes import FLOOR, HUB_WEIGHT, NEIGHBOURS, TEMPERATURE, ClassWords
from ..zeroshot.imagenet import imagenet_class_names
from ..zeroshot.prior import SPREAD_PICTURES, choose_prior, word_classes
from .plan import Candidate, Fitting
from .selection import validation_queries


def start_classes(fitting: Fitting):
    """The vocabulary's ImageNet classes for the prior, started now in a child process
    (`start_vocabulary_classes`) where the winner may have a CNN view; else None."""
    if config.PRIOR and _may_read_cnn(fitting.candidates, fitting.settings.inputs):
        return start_vocabulary_classes(fitting.protocol.vocabulary)
    return None


def _may_read_cnn(candidates, inputs) -> bool:
    """Whether the winner may have a CNN view (and so an ImageNet prior)."""
    if inputs is not None:
        return cnn_part(inputs[2]) is not None
    return any(part.startswith("cnn") for name, _ in candidates for part in parse_name(name))


def fit_prior(fitting: Fitting, candidate: Candidate, system: System, scored: System | None,
              classes=None) -> np.ndarray | None:
    """The prior phase: the zero-caption system as a prior (pamir.zeroshot.prior) of a system with
    an ImageNet CNN view, its weights chosen on the candidate's validation pictures, its
    spreads measured on them and on some training pictures (`spread_rows`), the global
    weight on the validation queries (captions weighted by the training pictures' idf);
    returns the validation pictures' class probabilities (None where there is no prior).
    scored: the system as trained on train only (None: not retrained). classes: the
    vocabulary's classes (`vocabulary_classes`, a Future of them from
    `start_vocabulary_classes`), computed here when None."""
    c = candidate
    if not config.PRIOR or cnn_part(system.pipeline) is None or not len(c.valid):
        return None
    X_train = spread_rows(c, c.train)
    started = time.perf_counter()
    model = scored or system  # the model's scores, then the classes' probabilities
    Z_valid = model.transform_features(c.X_valid)
    Z_train = None if X_train is None else model.transform_features(X_train)
    P_valid = system.class_probabilities([fitting.paths[i] for i in c.valid])
    classes = (vocabulary_classes(system.vocabulary) if classes is None
               else classes.result() if hasattr(classes, "result") else classes)
    system.prior = choose_prior(Z_valid, P_valid, c.Y_valid, classes, Z_train=Z_train,
                                queries=validation_queries(c.Y_valid, c.Y_train))
    info = system.prior.info
    info["seconds"] = round(time.perf_counter() - started, 2)
    system.info["prior"] = info
    avgp = info.get("valid_single_word_avgp", {})
    fitting.say(f"ImageNet prior: global weight {info['global_weight']:g} on "
        f"{info['words_reaching_classes']} words reaching classes"
        + (f"; validation single-word AvgP {avgp['model']:.2f} -> {avgp['mixed']:.2f}"
           if avgp else ""))
    return P_valid


def spread_rows(candidate, train: np.ndarray):
    """The features of at most pamir.zeroshot.prior.SPREAD_PICTURES of the training pictures (a
    seeded draw), which the prior's spreads are measured on; None where the candidate's
    features were let go."""
    if candidate.F is None or not len(train):
        return None
    rng = np.random.default_rng(config.SEED)
    pick = np.sort(rng.choice(train, min(len(train), SPREAD_PICTURES), replace=False))
    return as_matrix(take_rows(candidate.F, pick))  # (column blocks: what a model reads)


def _classes_file(vocabulary) -> Path:
    """Where this machine keeps a vocabulary's classes (beside the class texts' embeddings):
    named by the vocabulary (and the embedding model) and the matching's settings."""
    key = (f"{vocabulary_hash(list(vocabulary))}-{FLOOR:g}-{NEIGHBOURS}-{TEMPERATURE:g}"
           f"-hub{HUB_WEIGHT:g}")
    return config.default_cache_dir() / "class-words" / f"word-classes-{key}.npz"


def vocabulary_classes(vocabulary):
    """(T x 1000, sparse) each vocabulary word's ImageNet classes (pamir.zeroshot.prior.word_classes
    through pamir.zeroshot.classes.ClassWords), read from this machine's cache (`_classes_file`) or
    computed and cached; without the embedding model, the word table's alone (not cached)."""
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
        self.vocabulary = list(vocabulary)
        # a new interpreter, not multiprocessing's spawn: that re-runs the caller's main
        # module, which a person's script (`import pamir`) need not guard
        env = dict(os.environ)
        here = str(Path(__file__).resolve().parents[2])  # this pamir, wherever it lives
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        self.child = subprocess.Popen(
            [sys.executable, "-c", "from pamir.training.prior import _classes_child; "
             "_classes_child()"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, env=env)
        self.child.stdin.write(json.dumps(self.vocabulary).encode())
        self.child.stdin.close()

    def result(self):
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
    vocabulary_classes(json.loads(sys.stdin.read()))


def start_vocabulary_classes(vocabulary):
    """`vocabulary_classes`, or something whose `result()` gives them: from the cache at
    once, else computed by a child process started now, before the fit holds its features
    (the sentence-embedding model, loaded in the fit's own process, stayed
    resident and raised the README command's peak from 2.57 to 3.31 GB; a child's memory is
    given back when it ends)."""
    try:
        return sp.load_npz(_classes_file(vocabulary)).tocsr()
    except (OSError, ValueError):
        return ClassesInChild(vocabulary)


__all__ = ["fit_prior", "spread_rows", "start_classes", "start_vocabulary_classes",
           "vocabulary_classes"]
