"""The index workflow, one home for the CLI, the server and a script: open an index for a
model (create, reopen, rebuild or rescore it), the steps of indexing folders (which
pamir.jobs.indexing runs as one job), learn new captioned pictures, and keep a feedback round.
The CLI parses and prints around these; the server speaks HTTP.

    import pamir
    report = pamir.learn_captions("models/mine", "new.tsv", index_dirs=["my-index"])

Errors are exceptions with a message for a person (IndexDirError, WorkflowError, OSError);
notes along the way go to `say` (default: this module's logger).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
from pathlib import Path

import numpy as np

from .. import config
from ..index import BATCH_SIZE, Hit, Index, IndexDirError, model_fingerprint
from ..index.place_pass import name_places
from ..zeroshot.classes import is_zero_caption, zero_caption_base

logger = logging.getLogger(__name__)


class WorkflowError(ValueError):
    """What a person must change before the step can run (the message says what)."""


def default_index_dir() -> Path:
    """--index, else $PAMIR_INDEX, else $XDG_DATA_HOME/pamir/index (~/.local/share/...)."""
    if os.environ.get("PAMIR_INDEX"):
        return Path(os.environ["PAMIR_INDEX"])
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "pamir" / "index"


def load_system(model_dir, *, vocabulary=None, cache_dir=None, progress: bool = False):
    """The trained system in model_dir, the one way the CLI, the server, the Dask workers and
    a script load one: features cached in cache_dir (default: the default cache, so that
    rescoring after `pamir learn` and re-indexing a moved folder hash pictures instead of
    decoding them again), no progress bars unless asked. With vocabulary (an index's), a
    model with another vocabulary is a WorkflowError."""
    from ..system import System  # noqa: PLC0415  heavy: the models and torch

    cache_dir = config.default_cache_dir() if cache_dir is None else cache_dir
    system = System.load(model_dir, cache_dir=cache_dir, progress=progress)
    if vocabulary is not None:
        check_vocabulary(system, vocabulary, model_dir)
    return system


def check_vocabulary(system, vocabulary, model_dir) -> None:
    """WorkflowError unless the system's vocabulary is the index's (its words, in order)."""
    if list(system.vocabulary) != list(vocabulary):
        raise WorkflowError(f"the model in {model_dir} has another vocabulary than the index")


def text_side(system) -> tuple[list[str], np.ndarray]:
    """The vocabulary and idf that the system builds query vectors with."""
    return list(system.vocabulary), np.asarray(system.idf, dtype=np.float64)


def word_scales(system) -> np.ndarray | None:
    """The spread of the system's scores of each word (its prior's), which the index
    measures a query's words by (Index.create); None without a prior."""
    prior = getattr(system, "prior", None)
    return None if prior is None else prior.spreads


# ------------------------------------------------------------------------------ open
def open_index(index_dir, model_dir, system, fingerprint: str, rebuild: bool = False, *,
               say=logger.info) -> Index:
    """The index at index_dir for this model (model_dir None: the zero-caption system),
    writable: created, reopened, or rebuilt. An index built with no captions is rebuilt for
    a first model; one whose model folder has learnt since (same vocabulary up front) is
    rescored; one built with another model is a WorkflowError (rebuild=True recomputes it).
    """
    from ..system import class_names_of, index_transform  # noqa: PLC0415  heavy: numba, scipy

    index_dir = Path(index_dir)
    model = None if model_dir is None else Path(model_dir)
    vocabulary, idf = text_side(system)
    new = {"model_dir": model, "fingerprint": fingerprint, "classes": class_names_of(system),
           "scales": word_scales(system)}
    if rebuild:
        return Index.rebuild(index_dir, vocabulary, idf, **new)
    if not Index.exists(index_dir):
        return Index.create(index_dir, vocabulary, idf, **new)
    index = Index.open(index_dir, writable=True)
    built = zero_caption_base(index.model_fingerprint)  # its folder's look is the system's
    if built != fingerprint and is_zero_caption(index.model_fingerprint):
        # a first model after searching with none: nothing of a person's is lost, and
        # the classifier's pooled vectors are in the feature cache
        index.close()
        say(f"{index_dir} answered with no captions so far: rebuilding it for "
            f"{model or 'the new zero-caption system'}")
        return Index.rebuild(index_dir, vocabulary, idf, **new)
    if built != fingerprint:
        if (model is not None and index.model_dir == str(model.resolve())
                and list(vocabulary[: index.T]) == index.vocabulary):
            # the same model folder has learnt since (`pamir learn`, feedback kept): bring
            # every picture's scores up to date, features from the cache
            say(f"{model} has changed since {index_dir} was built (pamir learn, feedback "
                "kept): rescoring its pictures")
            index.rescore(vocabulary, idf, index_transform(system, bool(index.classes)),
                          model_dir=model, fingerprint=fingerprint,
                          scales=word_scales(system))
            return index
        index.close()
        if model is not None and index.model_dir == str(model.resolve()):
            # the same model folder fitted again (`pamir fit -o` it, a refit): its words
            # changed, so its scores are new; the features come from the cache, and what
            # editors decided about people is carried over (Index.rebuild)
            say(f"{model} was fitted again since {index_dir} was built (its words changed): "
                "rebuilding the index for it")
            return Index.rebuild(index_dir, vocabulary, idf, **new)
        raise WorkflowError(f"{index_dir} was built with another model ({index.model_dir}"
                            + _representations_differ(index.model_dir, system)
                            + "); add --rebuild to recompute it for this one, or choose "
                            "another --index")
    if model is not None and index.model_dir != str(model.resolve()):
        index.set_model(model, fingerprint)  # same model, moved
    if model is None:  # the folder's own look, where it has one (pamir.jobs.folder_look)
        from .folder_look import attach  # noqa: PLC0415

        attach(system, index, say=say)
    return index


def _representations_differ(built_with: str, system) -> str:
    """", which reads pictures as X; this model reads them as Y" when the index's model folder
    still records another picture representation than `system` (the usual reason an index
    cannot take a model's scores), else ""."""
    try:
        head = json.loads((Path(built_with) / "model.json").read_text(encoding="utf-8"))
        old = head["info"]["representation"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""  # moved, deleted or not a system: the folder is all there is to name
    new = getattr(system, "info", {}).get("representation")
    if not new or old == new:
        return ""
    return f", which reads pictures as {old}; this model reads them as {new}"


def picture_folders(folders) -> list[Path]:
    """The folders to index, each checked: a WorkflowError names one that is not a folder."""
    folders = [Path(f).expanduser() for f in folders]
    for f in folders:
        if not f.is_dir():
            raise WorkflowError(f"{f}: not a folder; give folders of pictures to index")
    return folders


def indexing_system(model_dir, *, load=load_system) -> tuple:
    """(system, fingerprint) that an index of model_dir is built with: the trained system
    (loaded by `load`), or for model_dir None the zero-caption system (ImageNet's words)."""
    if model_dir is None:
        system = zero_caption_system()
        return system, system.fingerprint
    return load(model_dir), model_fingerprint(model_dir)


def zero_caption_system(cache_dir=None):
    """The zero-caption system (pamir.zeroshot.classes: ImageNet's words, no model), the one way the
    CLI, the server and the Dask workers build it: features cached in cache_dir (default:
    the default cache)."""
    from ..zeroshot.classes import ZeroCaptionSystem  # noqa: PLC0415  (the [cnn] extra)

    return ZeroCaptionSystem(config.default_cache_dir() if cache_dir is None else cache_dir)


def update_index(index: Index, system, folders, transform=None, *, captions=None,
                 batch_size: int | None = None, progress=None):
    """Bring `index` up to date with the pictures under `folders` (Index.update): each
    picture through `transform` (default: in this process, what the index takes from the
    system, pamir.system.index_transform), batch_size at a time (default: BATCH_SIZE)."""
    if transform is None:
        from ..system import index_transform  # noqa: PLC0415  heavy: numba, scipy

        transform = index_transform(system, bool(index.classes))
    if getattr(transform, "map_batches", None) is not None and len(system.vocabulary) != index.T:
        # the workers' zero-caption system has no folder look (pamir.jobs.folder_look)
        raise WorkflowError(f"{index.directory} answers with its folder's own words, which "
                            "the Dask workers do not have: index it without --workers")
    report = index.update(folders, transform, captions=captions,
                          batch_size=batch_size or BATCH_SIZE, progress=progress)
    name_places(index)  # places named by an older rule: named again from their positions
    return report


# ------------------------------------------------------------------------ rescore, learn
def update_indexes(model: Path, system, index_dirs) -> list[dict]:
    """Rescore the indexes built with `model` (the given ones, else the default one if it
    was built with it) for the model as it is now: one {"index", "status", ...} each."""
    from ..system import index_transform  # noqa: PLC0415

    model = Path(model)
    explicit = bool(index_dirs)
    dirs = list(index_dirs or [default_index_dir()])
    out = []
    fingerprint = model_fingerprint(model)
    vocabulary, idf = text_side(system)
    for d in dirs:
        if not Index.exists(d):
            if explicit:
                out.append({"index": str(d), "status": "no index there"})
            continue
        try:
            index = Index.open(d, writable=True)
        except IndexDirError as e:
            out.append({"index": str(d), "status": f"not updated: {e}"})
            continue
        with index:
            if index.model_dir != str(model.resolve()):
                if explicit:
                    out.append({"index": str(d), "status": "built with another model "
                                f"({index.model_dir}): left alone"})
                continue
            try:
                r = index.rescore(vocabulary, idf, index_transform(system, bool(index.classes)),
                                  model_dir=model, fingerprint=fingerprint,
                                  scales=word_scales(system))
            except IndexDirError as e:
                out.append({"index": str(d), "status": f"needs a rebuild: {e}"})
                continue
            except (OSError, sqlite3.OperationalError) as e:
                # a full or failing disk: the rescoring's one transaction did not commit
                out.append({"index": str(d), "status": f"not updated, its previous scores "
                            f"kept: cannot write the index ({e}); free some space (or check "
                            f"the disk) and run `pamir index {model} FOLDER --index {d}`"})
                continue
            kept = f", {len(r['kept'])} unreadable kept their old scores" if r["kept"] else ""
            out.append({"index": str(d), "status": f"rescored {r['rescored']:,} pictures "
                        f"for {len(vocabulary)} words{kept}", **r})
    return out


def learn_pictures(model, system, pairs, *, index_dirs=None, n_updates: int | None = None
                   ) -> dict:
    """Teach the system new captioned pictures, pairs of (path, words): PA updates
    (pamir.training.online.learn), the model saved over `model` (the previous one kept as
    MODEL.previous), then the indexes built with it rescored (update_indexes). Returns
    learn's report with "skipped" [(path, reason)], "model", "previous" and "indexes"."""
    from ..features.representation import take_rows  # noqa: PLC0415
    from ..training.online import learn, save_keeping_previous  # noqa: PLC0415

    model = Path(model)
    if not pairs:
        raise WorkflowError("no captioned picture to learn from")
    F, ok, reasons = system.features([str(p) for p, _ in pairs])
    ok = np.asarray(ok, dtype=bool)
    skipped = [(str(p), why or "could not be read")
               for (p, _), good, why in zip(pairs, ok, reasons) if not good]
    kept = [c for (_, c), good in zip(pairs, ok) if good]
    report = learn(system, take_rows(F, np.flatnonzero(ok)), kept, n_updates=n_updates,
                   paths=[str(p) for (p, _), good in zip(pairs, ok) if good])
    save_keeping_previous(system, model)
    report["skipped"] = skipped
    report["model"] = str(model)
    report["previous"] = str(model.resolve().with_name(model.resolve().name + ".previous"))
    report["indexes"] = update_indexes(model, system, index_dirs)
    return report


def learn_captions(model_dir, captions, *, index_dirs=None, n_updates: int | None = None
                   ) -> dict:
    """`pamir learn` as a call: the captioned pictures of the table `captions` taught to
    the system in model_dir (see learn_pictures)."""
    from ..data import load_captions_table  # noqa: PLC0415

    coll = load_captions_table(captions, include_uncaptioned=False)
    pairs = [(p, c) for p, c in zip(coll.paths, coll.captions) if c]
    if not pairs:
        raise WorkflowError(f"{captions}: no captioned picture to learn from")
    return learn_pictures(model_dir, load_system(model_dir), pairs, index_dirs=index_dirs,
                          n_updates=n_updates)


# ------------------------------------------------------------------------- feedback, keep
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
    from ..features.representation import take_rows  # noqa: PLC0415
    from ..training.online import feedback_delta, feedback_scores  # noqa: PLC0415

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
    from ..training.online import neighbour_scores  # noqa: PLC0415

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


# -------------------------------------------------------------------------------- keep
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
    from ..training.online import apply_delta, linear_map, save_keeping_previous  # noqa: PLC0415
    from ..system import index_transform  # noqa: PLC0415

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
            report = writer.rescore(system.vocabulary, system.idf,
                                    index_transform(system, bool(writer.classes)),
                                    model_dir=model_dir, scales=word_scales(system),
                                    fingerprint=model_fingerprint(model_dir))
        except (OSError, sqlite3.OperationalError) as e:
            # the model is saved; the rescoring's one transaction did not commit, so the
            # index keeps its previous scores, whole
            raise NotKept(507, f"the model was saved in {model_dir}, but the index could "
                               f"not be rescored ({e}); free some space (or check the "
                               f"disk) and run `pamir index {model_dir} FOLDER`") from None
    return {"model": str(model_dir), "previous": str(model_dir).rstrip("/") + ".previous",
            "rescored": report["rescored"]}


__all__ = ["FEEDBACK_CANDIDATES", "NoSuchPicture", "NotKept", "WorkflowError", "check_vocabulary",
           "default_index_dir", "feedback_round", "indexed_picture",
           "indexing_system", "keep_feedback", "learn_captions", "learn_pictures", "load_system",
           "marks", "open_index", "picture_folders",
           "rerank_feedback", "text_side", "update_index", "update_indexes",
           "zero_caption_system"]
