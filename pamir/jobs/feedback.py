"""Relevance feedback on an index, as the web page and a script do it: a round's marks re-rank
a query's best pictures (`rerank_feedback`), and Keep folds the round into the model, saves it
with the previous one beside and rescores the index (`keep_feedback`); `feedback_round` is both
from a script. The PA updates and the neighbour term are pamir.training.online's.

Errors: WorkflowError (pamir.jobs.errors) and NoSuchPicture, which the server answers with
400 and 404; NotKept, a Keep that did not reach the disk.
"""

from __future__ import annotations

import contextlib
import sqlite3

import numpy as np

from ..features.representation import take_rows
from ..index import Hit, Index, IndexDirError, model_fingerprint
from .errors import WorkflowError
from .loading import load_system, rescore

#: A feedback round re-ranks this many of the query's best pictures (and the judged ones).
FEEDBACK_CANDIDATES = 200


class NoSuchPicture(WorkflowError):
    """An id that names no picture of the index (the server answers 404)."""


def indexed_picture(index: Index, picture_id: int):
    """The index's record of picture `picture_id`, or NoSuchPicture (also for a picture the
    index holds but could not read)."""
    # an id SQLite cannot hold (over 64 bits) is no picture, not an OverflowError
    p = index.picture(picture_id) if -(1 << 63) <= picture_id < (1 << 63) else None
    if p is None or p.state != "ok":
        raise NoSuchPicture(f"no picture {picture_id} in the index")
    return p


def marks(right, wrong) -> tuple[list[int], list[int]]:
    """A round's marks as the server reads them: each id once, a picture marked both ways
    counted right."""
    right = list(dict.fromkeys(int(i) for i in right))
    return right, [i for i in dict.fromkeys(int(i) for i in wrong) if i not in right]


def _round_marks(right, wrong, keep: bool) -> tuple[list[int], list[int]]:
    """marks(), or WorkflowError where the round has nothing to re-rank by (no mark) or,
    to keep, nothing to learn (PA needs a right and a wrong picture)."""
    right, wrong = marks(right, wrong)
    if not right and not wrong:
        raise WorkflowError("mark at least one picture right or wrong")
    if keep and not (right and wrong):
        raise WorkflowError("mark at least one picture right and one wrong to keep: PAMIR "
                            "learns from a right picture ranked above a wrong one")
    return right, wrong


def rerank_feedback(index: Index, system, query, right, wrong, *, k: int = 60,
                    keep_in=None, lock=None) -> dict:
    """A round of relevance feedback on an open index: the query's best FEEDBACK_CANDIDATES
    pictures and the judged ones re-ranked by q . (W + delta) p + the neighbour term.

    query: a parsed query (index.parse_query). right, wrong: index ids. delta: PA-I updates
    (pamir.training.online.feedback_delta) with the right pictures as positives and the wrong ones as
    negatives, where there are both; the neighbour term (pamir.training.online.neighbour_scores) lifts
    pictures near a right one and lowers those near a wrong one. keep_in: a model folder to
    keep the round in (keep_feedback: delta folded into the model, saved, the index
    rescored). lock: held while the round reads and changes the model, so that no other
    round's Keep comes between (a server's). Returns {"right", "wrong": the marks as read,
    "rows": the words PA changed, "candidates": how many pictures were re-ranked, "hits":
    the k best Hits, "kept": keep_feedback's report or None}.

    WorkflowError: no mark, or keep_in without a right and a wrong mark; NoSuchPicture: a
    marked id the index does not hold; NotImplementedError: a model that cannot learn online;
    NotKept: the Keep did not reach the disk."""
    right, wrong = _round_marks(right, wrong, keep=keep_in is not None)
    learns = bool(right and wrong)
    ids = list(dict.fromkeys([h.id for h in index.search(query, FEEDBACK_CANDIDATES)]
                             + right + wrong))
    pictures = [indexed_picture(index, i) for i in ids]
    where = {i: n for n, i in enumerate(ids)}
    at_right, at_wrong = [where[i] for i in right], [where[i] for i in wrong]
    scores = _scores_with_neighbours(index, query.vector, ids, at_right, at_wrong)
    # PA needs the pictures' model inputs (from the feature cache, or read again)
    F = system.features([p.path for p in pictures])[0] if learns else None
    rows, delta, kept = np.zeros(0, np.int64), None, None
    with lock or contextlib.nullcontext():
        if learns:
            # start-up: pamir.training loads scikit-learn, numba and scipy (1.4 s of `pamir
            # serve`'s start, which imports this module); a feedback round needs them
            from ..training.online import feedback_delta, feedback_scores  # noqa: PLC0415

            rows, delta = feedback_delta(system, query.vector, take_rows(F, at_right),
                                         take_rows(F, at_wrong))
            scores = scores + feedback_scores(system, query.vector, rows, delta, F)
        if keep_in is not None:
            right_pictures = (take_rows(F, at_right), [pictures[n].path for n in at_right])
            kept = keep_feedback(system, keep_in, index.directory, rows, delta,
                                 right=right_pictures)
    order = sorted(range(len(ids)), key=lambda n: (-scores[n], ids[n]))[:k]
    return {"right": right, "wrong": wrong, "rows": [index.vocabulary[t] for t in rows],
            "candidates": len(ids), "kept": kept,
            "hits": [Hit(ids[n], pictures[n].path, float(scores[n])) for n in order]}


def _scores_with_neighbours(index: Index, q: np.ndarray, ids, at_right, at_wrong) -> np.ndarray:
    """The pictures' indexed scores q . z plus the neighbour term of the judged ones (at_right,
    at_wrong: their places in ids), scaled by the spread of the query's scores over the
    whole index."""
    from ..training.online import neighbour_scores  # noqa: PLC0415 - start-up (rerank_feedback)

    Z = np.stack([index.vector(i) for i in ids]).astype(np.float64)
    every = index.scores(q)
    spread = float(np.std(every[np.isfinite(every)]))
    return Z @ q + neighbour_scores(Z, Z[at_right], Z[at_wrong], index.mean_vector(), spread)


def feedback_round(model_dir, index_dir, query: str, right, wrong, *, keep: bool = True,
                   k: int = 60, system=None) -> dict:
    """A round of relevance feedback from a script, as the web page does it: the pictures
    `right` and `wrong` (index ids) judged for `query` re-rank its results (rerank_feedback),
    and with keep the round's PA change is folded into the model in model_dir, saved, and the
    index rescored, as the page's Keep. Returns rerank_feedback's report: "rows" the changed
    words, "hits" the k re-ranked pictures, "kept" keep_feedback's report or None."""
    _round_marks(right, wrong, keep)  # before anything is loaded
    system = system or load_system(model_dir)
    with Index.open(index_dir) as index:
        return rerank_feedback(index, system, index.parse_query(query), right, wrong, k=k,
                               keep_in=model_dir if keep else None)


class NotKept(Exception):
    """A kept feedback round that did not reach the disk: status is what the server answers
    (409: the index is busy or damaged, 507: the disk refused), message why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def keep_feedback(system, model_dir, index_dir, rows, delta, right=(None, None)) -> dict:
    """Fold a feedback round (rows, delta from pamir.training.online.feedback_delta) into the system's
    model, save it over model_dir (the previous one kept as MODEL.previous) and rescore the
    index at index_dir. If the save fails the model in memory is put back as it was.
    right: (model inputs, paths) of the pictures marked right, which join the neighbours of a
    system that has them (pamir.training.online.apply_delta)."""
    # start-up: pamir.training (see rerank_feedback)
    from ..training.online import apply_delta, linear_map, save_keeping_previous  # noqa: PLC0415

    try:
        writer = Index.open(index_dir, writable=True)
    except IndexDirError as e:
        raise NotKept(409, f"not kept: {e}") from None
    with writer:
        W = linear_map(system)
        rows = np.asarray(rows, dtype=np.int64)
        before, info = W[rows].copy(), dict(system.info)
        part = getattr(system, "neighbours", None)
        voters = len(part.transfer) if part is not None else 0
        apply_delta(system, rows, delta, right=right[0], paths=right[1])  # they vote too
        try:
            save_keeping_previous(system, model_dir)
        except OSError as e:  # a full or failing disk: the model in memory as on disk
            W[rows], system.info = before, info
            if part is not None:
                part.transfer.keep_first(voters)
            raise NotKept(507, f"not kept: {e}") from None
        try:
            report = rescore(writer, system, model_dir, model_fingerprint(model_dir))
        except (OSError, sqlite3.OperationalError) as e:
            # the model is saved; the rescoring's one transaction did not commit, so the
            # index keeps its previous scores, whole
            raise NotKept(507, f"the model was saved in {model_dir}, but the index could "
                               f"not be rescored ({e}); free some space (or check the "
                               f"disk) and run `pamir index {model_dir} FOLDER`") from None
    return {"model": str(model_dir), "previous": str(model_dir).rstrip("/") + ".previous",
            "rescored": report["rescored"]}
