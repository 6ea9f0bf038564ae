"""Keeping a bare folder's index answering with its own look (pamir.zeroshot.folder): its
pictures' neighbours and, where some carry keywords, the folder's words, with no command.

`pamir index FOLDER` (no model) and `pamir watch` call `refresh` once the look has committed
every picture (pamir.jobs.indexing.run_index): when the folder's tags changed, or enough
pictures came or went (RESMOOTH_SHARE), the folder look is made again from what the look
computed (each picture's pooled vector, from the feature cache under the content hash the
index keeps: no picture is decoded again) and the index's scores are rewritten in one
transaction (Index.rescore): a search sees the old scores or the new ones, never a mix, and is
never blocked (readers go on with the committed state while it runs). `attach`
(pamir.jobs.opening.open_index) gives the zero-caption system the index's folder look, so
that the pictures a later run adds get the folder's words from their first look.

    import pamir.jobs.folder_look as folder_look
    folder_look.refresh(index, system)          # after the look, with the index writable

Turned off by PAMIR_FOLDER_LOOK=0 (the index keeps ImageNet's words alone, as before).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from .. import config
from ..facts.video import is_video
from ..features.cnn import PooledCache
from ..features.cnn_network import weights_digest
from ..index import embeddings_enabled
from ..index.layout import FOLDER_LOOK
from ..text.bridge import display_text
from ..text.lexicon import lexicon
from ..zeroshot import folder
from ..zeroshot.classes import ClassWords, ZeroCaptionSystem
from ..zeroshot.folder import FolderLook
from ..zeroshot.imagenet import class_probabilities, imagenet_class_names

logger = logging.getLogger(__name__)

#: 0 (or off, no, false) turns the folder's look off.
ENABLED_ENV = "PAMIR_FOLDER_LOOK"
#: The folder look is made again when this share of the pictures came or went since it was
#: (or any tag changed): the pictures in between are ranked by their own classes until then
#: (and by the folder's words, which they get from their first look).
RESMOOTH_SHARE = 0.02


def enabled() -> bool:
    return os.environ.get(ENABLED_ENV, "1").strip().lower() not in ("0", "no", "off", "false")


def folder_dir(index):
    return index.directory / FOLDER_LOOK


def folder_words(index):
    """The folder's words of an index's folder look (pamir.zeroshot.folder.FolderWords),
    None where it has none or it cannot be read."""
    try:
        return FolderLook.load(folder_dir(index)).words
    except (OSError, ValueError, KeyError):
        return None


def attach(system, index, *, say=logger.info, writable: bool = True) -> None:
    """Give the zero-caption system (pamir.zeroshot.classes.ZeroCaptionSystem; another system is
    left alone) the folder look of `index`, so that its transform gives the index's words. An
    index whose words' state is lost or damaged gets it made again (`refresh`) when writable;
    a reader's stays without (its uploads then score ImageNet's words alone)."""
    if not isinstance(system, ZeroCaptionSystem):
        return
    system.folder = None
    if not index.classes:
        return
    try:
        look = FolderLook.load(folder_dir(index))
    except (OSError, ValueError, KeyError):
        look = None
    if look is not None and look.vocabulary == index.vocabulary:
        system.folder = look
    elif index.vocabulary and writable:
        say(f"{index.directory}: the folder's words are missing or damaged; making them again")
        refresh(index, system, say=say, force=True)


def refresh(index, system, *, say=logger.info, force: bool = False) -> dict | None:
    """Make the folder look of an open, writable zero-caption index again where its tags or
    pictures changed (the module's doc); force: whatever changed. Returns what it did
    ({"seconds", "pictures", "tagged", "words", "held_out"}), or None where nothing was to
    do (another system, the look off or current). Never raises for what it cannot do: the
    index keeps its scores and the reason is said."""
    if not enabled() or not isinstance(system, ZeroCaptionSystem) or not index.classes:
        return None
    try:
        return _refresh(index, system, say, force)
    except (OSError, ValueError, MemoryError) as e:
        say(f"the folder's look was not made again ({type(e).__name__}: {e}); the index "
            "keeps its scores")
        return None


def _refresh(index, system, say, force: bool) -> dict | None:
    started = time.perf_counter()
    pictures = [p for p in index.pictures("ok") if not is_video(p.path)]
    tagged = [k for k, p in enumerate(pictures) if p.caption]
    signature = folder.signature(system.fingerprint,
                                 [(pictures[k].hash, pictures[k].caption) for k in tagged])
    old = system.folder
    hashes = [p.hash for p in pictures]
    if not force and old is not None and old.signature == signature and \
            old.changed(hashes) < max(1.0, RESMOOTH_SHARE * len(old.hashes)):
        return None
    if len(pictures) < 2 and not index.vocabulary:
        return None
    say(f"the folder's look: {len(pictures):,} pictures' neighbours"
        + (f" and the words of {len(tagged):,} tagged pictures" if tagged else ""))
    pooled = pooled_of(system, pictures)
    mean, std = folder.standardisation(pooled)
    X = folder.views(pooled, mean, std)
    P = folder.smooth(system_probabilities(system, pooled), X)
    neighbours = time.perf_counter() - started
    words = _words(index, X[tagged], [pictures[k].caption for k in tagged], P[tagged], say)
    look = folder.FolderLook(mean, std, np.asarray(hashes), signature, words,
                             {"pictures": len(pictures), "tagged": len(tagged),
                              "made": time.strftime("%Y-%m-%d %H:%M:%S")})
    learnt = time.perf_counter() - started - neighbours
    _swap(index, system, look, pictures, pooled, X, P)
    seconds = round(time.perf_counter() - started, 1)
    say(f"{folder.describe(look)}; {seconds:g} s (the neighbours {neighbours:.1f} s, the "
        f"words {learnt:.1f} s, the scores rewritten {seconds - neighbours - learnt:.1f} s)")
    return {"seconds": seconds, "neighbours_seconds": round(neighbours, 1),
            "words_seconds": round(learnt, 1), "pictures": len(pictures),
            "tagged": len(tagged), "words": look.T,
            "held_out": words.held_out if words is not None else None}


def _words(index, X, captions, P, say):
    """The folder words of the tagged pictures (X, captions, P: theirs), extending the
    index's vocabulary; None where the index has none and they would not search its tagged
    pictures better than ImageNet's words alone (then it keeps those)."""
    if len(captions) >= (2 if index.vocabulary else folder.MIN_TAGGED):
        words = folder.fit_folder_words(X, captions, P, classes_of, before=index.vocabulary)
    else:
        words = None
    if index.vocabulary and words is None:
        # no tagged picture left to vote: the index keeps its words, scored by their classes
        return folder.classes_only(index.vocabulary, classes_of(index.vocabulary),
                                   X.shape[1])
    if not index.vocabulary and not folder.better(words):
        if words is not None:
            h = words.held_out
            say(f"the folder's {len(captions):,} tagged pictures: their words searched them "
                f"no better than ImageNet's words held out (AvgP {h['avgp']:.1f} against "
                f"{h['classes_alone_avgp']:.1f}); kept ImageNet's words alone")
        return None
    return words


def classes_of(vocabulary):
    """(T x 1000, sparse) each word's ImageNet classes, as a query's words reach them
    (pamir.zeroshot.classes.ClassWords: WordNet's table, then the embedding bridge), but for
    the words outside the table that this machine's lexicon of word embeddings does not
    hold (pamir.text.lexicon; a name, a rare word), which get none: loading the embedding
    model for them cost `pamir index` on a folder of 80 pictures 17 of its 20 s (they still
    vote, and a query reaches their classes through the model); the table alone where the
    embedding model is turned off ($PAMIR_EMBEDDINGS=0)."""
    words = ClassWords(imagenet_class_names(), cache_dir=config.default_cache_dir() /
                       "class-words", use_model=embeddings_enabled())
    lex = lexicon() if embeddings_enabled() else None
    rows = np.zeros((len(vocabulary), len(words.names)), np.float32)
    for t, w in enumerate(vocabulary):
        tokens = w.split("_")
        if words.lookup(tokens) is None and (lex is None or display_text(w) not in lex):
            continue  # neither in the table nor in the lexicon: no model loaded for it
        match = words.match(display_text(w), tokens)
        if match.vector is not None:
            rows[t] = match.vector
    return sp.csr_matrix(rows)


def _swap(index, system, look, pictures, pooled, X, P) -> None:
    """Save the look, then rewrite the index's scores with it in one transaction; the system
    takes it (the previous one back if the rewrite fails)."""
    old = system.folder
    look.save(folder_dir(index))
    system.folder = look
    rows = look.words.rows(X, P) if look.words is not None else np.zeros((len(X), 0))
    at = {p.path: k for k, p in enumerate(pictures)}
    try:
        # the index reads the words' calibration from its folder look (no model folder:
        # commands take an index's model_dir for a fitted model)
        index.rescore(look.vocabulary, system.idf, KnownRows(at, rows, P, system),
                      fingerprint=f"{system.fingerprint}+folder-look/{look.signature[:16]}"
                                  f"-{len(look.hashes)}",
                      scales=system.prior.spreads if system.prior is not None else None)
    except BaseException:
        system.folder = old
        raise


class KnownRows:
    """An index transform (pamir.index.sync.Transform) for a rescore: the rows the refresh
    made, by path; a path it did not make (a video's frames) through the system."""

    def __init__(self, at: dict[str, int], words: np.ndarray, P: np.ndarray, system):
        self.at, self.words, self.P, self.system = at, words, P, system

    def __call__(self, paths: Sequence[str]) -> tuple:
        paths = [str(p) for p in paths]
        k = [self.at.get(p) for p in paths]
        if any(i is None for i in k):
            # pamir.system imports numba (0.6 s): only for a path the refresh did not make
            from ..system import index_transform  # noqa: PLC0415

            return index_transform(self.system, True)(paths)
        return (np.hstack([self.words[k], self.P[k]]).astype(np.float32),
                np.ones(len(paths), bool), [None] * len(paths))


def pooled_of(system, pictures) -> np.ndarray:
    """(n x dim) the pictures' pooled vectors of the system's network: from the feature cache
    by the content hash the index keeps, those it lacks computed (their files read)."""
    rep = system.pipeline
    rep.resolve_precision()
    cache = (PooledCache(rep.cache_dir, rep.settings, weights_digest(rep.settings.model))
             if rep.cache_dir else None)
    out = np.zeros((len(pictures), rep.dim), np.float32)
    missing = []
    for k, p in enumerate(pictures):
        v = cache.get(p.hash) if cache is not None else None
        if v is None:
            missing.append(k)
        else:
            out[k] = v
    if missing:
        got, _, _ = rep.pooled([pictures[k].path for k in missing])  # unreadable: zero rows
        out[missing] = got
    return out


def system_probabilities(system, pooled: np.ndarray) -> np.ndarray:
    """(n x 1000) float32 the classifier's probabilities of pooled vectors."""
    return class_probabilities(system.logits(pooled)).astype(np.float32)


__all__ = ["ENABLED_ENV", "RESMOOTH_SHARE", "attach", "enabled", "folder_words", "pooled_of",
           "refresh"]
