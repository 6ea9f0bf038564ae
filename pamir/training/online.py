"""Learning after training: PA is an online algorithm, so a trained system keeps
learning, from a person's feedback on a query's results (right and wrong pictures) and from
new captioned pictures, new words included; and the one way a learnt system is saved over
its folder, the previous model kept beside.

    rows, delta = feedback_delta(system, q, right, wrong)   # a feedback round, nothing changed
    apply_delta(system, rows, delta)                         # kept: W moves
    learn(system, F, captions)                               # `pamir learn`
    save_keeping_previous(system, "models/mine")

These extend pamir.system.System without changing it; they need a model that is linear in
the picture vector (PAMIR's W_, T x V), which does the learning itself (PAMIR.partial_fit,
feedback_delta, apply_feedback). pamir.jobs.learning and pamir.jobs.feedback run them on a model folder and its indexes.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from ..features.representation import take_rows
from ..models import pamir_feedback
from ..models.pamir_feedback import FEEDBACK_EPOCHS
from ..system import System

# FEEDBACK_EPOCHS (PA-I passes over a feedback round's triplets) is the feedback's
# (pamir.models.pamir_feedback, which does it); LEARN_UPDATES_PER_PICTURE, LEARN_MAX_UPDATES
# (the updates `learn` draws) are PAMIR's (pamir.models.pamir: partial_fit).
#: Feedback's neighbour term (`neighbour_scores`), chosen on the Corel 5k validation
#: queries by benchmarks/bench_search.py (its "feedback" grid): how sharply similarity
#: decays, and how far a right (wrong) picture's near pictures move, in standard deviations
#: of the query's scores.
FEEDBACK_SHARPNESS = 8.0
FEEDBACK_RIGHT_WEIGHT = 2.0
FEEDBACK_WRONG_WEIGHT = 1.0


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
    pamir_feedback.feedback_delta (PA-I on every (q, right, wrong) triplet). Nothing is
    changed; `apply_delta` keeps the round."""
    linear_map(system)
    return pamir_feedback.feedback_delta(system.model, q, positives, negatives, c=c,
                                         epochs=epochs, margin=margin)


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
    pamir_feedback.apply_feedback(system.model, rows, delta)
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
    similarity-weighted mean of those words' rows (what pamir.text.bridge maps it to); otherwise
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


__all__ = ["FEEDBACK_RIGHT_WEIGHT", "FEEDBACK_SHARPNESS", "FEEDBACK_WRONG_WEIGHT", "add_words",
           "apply_delta", "centred_cosine", "feedback_delta", "feedback_scores", "learn",
           "linear_map", "neighbour_scores", "save_keeping_previous"]
