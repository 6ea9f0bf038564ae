"""The folder's own look: what a bare folder's pictures add to ImageNet's words, with no
model and no command (`pamir index FOLDER`; pamir.jobs.folder_look keeps it current).

Two things, both from what the look has computed already (each picture's pooled vector of the
zero-caption network, in the feature cache under the content hash the index keeps):

1. **Neighbours.** A picture's class probabilities are mixed with those of its SMOOTH_K most
   alike pictures of the folder (`smooth`: (1 - SMOOTH_WEIGHT) of its own, SMOOTH_WEIGHT of
   their mean): a tiger the classifier was unsure of, among ten it was sure of, ranks with
   them. The pictures a person keeps come in series (a trip, a burst, a shoot), as Corel's
   come in CDs, and the classifier is wrong on each picture in its own way. On Corel 5k's
   validation pictures, single-word AvgP with no caption rose from 23.5 to 25.6
   (benchmarks/results/zero_caption.md, "The folder's neighbours").
2. **The folder's keywords.** Where some pictures carry keywords in their files (IPTC, XMP,
   EXIF, sidecars: their captions as pamir.facts.metadata reads them, pamir's own `pamir|`
   guesses left out there), those words reach the look-alike pictures that carry none
   (`FolderWords`): a picture's score for a word is the vote of its nearest tagged pictures
   (pamir.models.neighbours.LabelTransfer: the share of its K nearest, weighted by a softmax
   of their cosines over a temperature, that carry the word), mixed with the word's ImageNet
   classes (pamir.zeroshot.prior) and calibrated (pamir.calibration), so that `p:0.5` keeps
   its meaning.

Why label transfer and not a fit: it needs nothing the look has not computed, so it is ready
seconds after the look; and every choice is made on held-out tagged pictures for free: each
tagged picture's vote is computed from the others (leave one out), which is how an untagged
picture meets them. What is chosen so (`fit_folder_words`): K and the temperature (the best
AvgP of the tagged pictures' queries), the mix with the classes (choose_prior) and the
calibration. The words come in only when they search the held-out pictures better than the
classes alone (`better`); once in, the index keeps them (its vocabulary only grows), and a
refit that loses to the classes gives every word the classes' weight instead.

The state (`FolderLook`) is a small folder inside the index (pamir.index.layout.FOLDER_LOOK:
model.json + arrays.npz, written atomically by pamir.models.base.save_directory), whose
calibration the index reads as a model's (pamir.calibration.load_calibration).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .. import config
from ..calibration import Calibration
from ..features.cnn_network import CHANNELS
from ..models.base import load_directory, save_directory, training_queries
from ..models.neighbours import LabelTransfer, unit_rows
from ..text.vectors import idf as idf_of
from ..text.bridge import lemmas
from .classes import WRITE_BARS, least_right_bar
from .classes import annotate as class_annotate
from .prior import Prior, choose_prior

#: Bumped when what a refresh makes changes: a look of another version is made again.
VERSION = 1
#: The folder's neighbours: each picture's class probabilities take SMOOTH_WEIGHT of the
#: mean of its SMOOTH_K nearest pictures'. Chosen on Corel 5k's validation pictures
#: (single-word AvgP, no caption, fp32 / int8): K 10-15 and a weight of 0.6-0.8 are a
#: plateau at 25.3-25.9 (10 and 0.7: 25.57 / 25.73), within the validation set's noise of
#: each other; 5 neighbours or a weight of 0.9 fall off it (benchmarks/results/zero_caption.md).
SMOOTH_K = 10
SMOOTH_WEIGHT = 0.7
#: Fewer pictures than this: no neighbours (a picture's nearest among a handful are no
#: series of it, and a cat would take a coffee cup's classes).
SMOOTH_MIN_PICTURES = 2 * SMOOTH_K
#: Tagged pictures needed before the folder's words are tried (fewer: ImageNet's words alone).
MIN_TAGGED = 10
#: Tagged pictures a word needs to enter the vocabulary (one picture cannot be held out and
#: still vote).
MIN_WORD_PICTURES = 2
#: The validation grid of the vote, on held-out tagged pictures (leave one out).
K_GRID = (10, 20, 40, 80)
TEMPERATURES = (0.05, 0.1, 0.2)
#: Added to the vote before its logarithm (pamir.models.neighbours.LabelTransfer.floor).
VOTE_FLOOR = 1e-3
#: A word's vote is kept where its held-out single-word AvgP is at least MIN_LIFT times a
#: random ranking's (the share of the pictures with the word); the others score by their
#: classes alone, or not at all. A word tags give pictures of everything ("corel" of a
#: keyword tree's root, a year, "holiday") votes for nothing: on 60 tagged Corel pictures,
#: "corel" at AvgP 0.11 held out for a share of 0.15, and the queries with it searched at
#: 31.7 with its vote, 37.0 without.
MIN_LIFT = 2.0
#: The most held-out tagged pictures the choices are made on (a seeded sample beyond).
MAX_HELD_OUT = 3000
#: The calibration (pamir.calibration.fitting.fit_calibration) is fitted on at most
#: CALIBRATION_QUERIES of their queries (a seeded sample beyond), on every relevant (query,
#: picture) pair and CALIBRATION_NEGATIVES of the others (a seeded sample, each weighing as
#: many as it stands for). Every pair of 1,000 queries (a million pairs, 0.2% relevant) took
#: 17-19 s of a refresh's 22-24 s on a library of 1,500 tagged pictures (30-51 s on a loaded
#: machine); 2,000 queries and 100,000 others take 1.3 s (3-4 s loaded), for a log loss and
#: calibration error over all 4,000 held-out queries no worse than the full fit's
#: (benchmarks/results/folder_calibration.md; the untagged pictures' in folder_look.md).
CALIBRATION_QUERIES = 2000
CALIBRATION_NEGATIVES = 100_000


# ------------------------------------------------------------------------------ the views
def views(pooled: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Unit rows of the square-rooted, standardised global part of pooled vectors: what the
    `cnn` representation makes of them at its default settings (pamir.features.cnn)."""
    X = np.sqrt(np.maximum(np.asarray(pooled, np.float32)[:, :CHANNELS], 0.0))
    return unit_rows((X - mean) / std)


def standardisation(pooled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) of the square-rooted global part of pooled vectors (a constant channel
    is centred, not blown up: pamir.features.cnn's rule)."""
    X = np.sqrt(np.maximum(np.asarray(pooled, np.float64)[:, :CHANNELS], 0.0))
    std = X.std(axis=0) if len(X) else np.ones(X.shape[1])
    mean = X.mean(axis=0) if len(X) else np.zeros(X.shape[1])
    return mean.astype(np.float32), np.where(std > 1e-6, std, 1.0).astype(np.float32)


def nearest(X: np.ndarray, k: int, rows: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """(sims, nbrs): each of `rows`' (all by default) k nearest among X's other rows (unit
    rows: cosines), nearest first; itself left out (found first, or among exact copies;
    else the last is dropped)."""
    import faiss  # noqa: PLC0415 - with the [cnn] extra, as the neighbours

    rows = np.arange(len(X)) if rows is None else np.asarray(rows)
    k = min(k + 1, len(X))
    if k < 2:
        return np.zeros((len(rows), 0), np.float32), np.zeros((len(rows), 0), np.int64)
    index = faiss.IndexFlatIP(X.shape[1])
    index.add(np.ascontiguousarray(X, np.float32))
    sims, nbrs = index.search(np.ascontiguousarray(X[rows], np.float32), k)
    keep = nbrs != rows[:, None]
    keep[keep.all(axis=1), -1] = False
    return sims[keep].reshape(len(rows), k - 1), nbrs[keep].reshape(len(rows), k - 1)


def smooth(P: np.ndarray, X: np.ndarray, k: int = SMOOTH_K, weight: float = SMOOTH_WEIGHT
           ) -> np.ndarray:
    """(n x C) float32: class probabilities P (n x C) of pictures whose views are X (unit
    rows), each mixed with the mean of its k nearest pictures' (the module's doc); as they
    are for fewer than SMOOTH_MIN_PICTURES pictures."""
    P = np.asarray(P, np.float32)
    if len(P) < SMOOTH_MIN_PICTURES:
        return P.copy()
    _, nbrs = nearest(X, k)
    if not nbrs.shape[1]:
        return P.copy()
    return ((1 - weight) * P + weight * P[nbrs].mean(axis=1)).astype(np.float32)


# ------------------------------------------------------------------------------ the words
@dataclass
class FolderWords:
    """The folder's words: vocabulary (T) and idf, the vote (`transfer`, a LabelTransfer
    fitted on the tagged pictures' views) and each word's centre and spread of its logarithm
    over the held-out pictures (an infinite spread: a vote left out, `lifted`), the classes'
    prior and the calibration; held_out: how they were chosen (`fit_folder_words`).

    Why the vote is standardised: the prior mixes a word's score with its classes by the
    spread of the score (pamir.zeroshot.prior), and the log-votes' spreads differ from word
    to word far more than a fitted model's (a word of 2 pictures against one of 200), so a
    query of several words summed them unevenly: on 60 tagged Corel pictures, the mix with
    the classes alone searched their queries at 32.1 held out against 37.0 for the classes
    with no vote at all."""

    vocabulary: list[str]
    idf: np.ndarray
    transfer: object  # pamir.models.neighbours.LabelTransfer, fitted
    centre: np.ndarray
    spread: np.ndarray
    prior: object  # pamir.zeroshot.prior.Prior
    calibration: object | None = None  # pamir.calibration.Calibration
    held_out: dict = field(default_factory=dict)

    def standard(self, vote: np.ndarray) -> np.ndarray:
        """(n x T) the standard scores of votes (n x T)."""
        return ((self.transfer.log_vote(vote) - self.centre) / self.spread).astype(np.float32)

    @property
    def T(self) -> int:
        return len(self.vocabulary)

    def rows(self, X: np.ndarray, P: np.ndarray) -> np.ndarray:
        """(n x T) float32: the words of pictures with views X (unit rows) and class
        probabilities P (n x 1000)."""
        n = len(X)
        vote = (self.transfer.vote(X) if n and len(self.transfer)
                else np.zeros((n, self.T), np.float32))
        return self.prior.mix(self.standard(vote), P)


def caption_words(caption: Sequence[str] | None) -> list[str]:
    """A picture's caption as vocabulary entries, each once (pamir.facts.metadata has read a
    keyword "polar bear" as its words already)."""
    return list(dict.fromkeys(w for w in caption or () if w))


def vocabulary_of(captions: Sequence[Sequence[str]], before: Sequence[str] = ()) -> list[str]:
    """The words: `before` (an index's vocabulary only grows), then the words of at least
    MIN_WORD_PICTURES captions, sorted."""
    counts = Counter(w for c in captions for w in caption_words(c))
    kept = set(before)
    return list(before) + sorted(w for w, n in counts.items()
                                 if n >= MIN_WORD_PICTURES and w not in kept)


def presence(captions: Sequence[Sequence[str]], vocabulary: Sequence[str]):
    """(n x T) CSR: which vocabulary words each caption has."""
    where = {w: t for t, w in enumerate(vocabulary)}
    pairs = [(i, where[w]) for i, c in enumerate(captions) for w in caption_words(c)
             if w in where]
    rows, cols = zip(*pairs) if pairs else ((), ())
    return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)),
                         shape=(len(captions), len(vocabulary)))


def fit_folder_words(X: np.ndarray, captions: Sequence[Sequence[str]], P: np.ndarray,
                     classes_of, *, before: Sequence[str] = (), seed: int = 0
                     ) -> FolderWords | None:
    """The folder words of tagged pictures: their views X (unit rows), captions and class
    probabilities P (n x 1000); classes_of(vocabulary) -> (T x 1000) each word's classes
    (pamir.training.prior.vocabulary_classes). before: the index's vocabulary, which the new
    one extends. None where no held-out picture has a word of it (fewer than
    MIN_WORD_PICTURES pictures a word)."""
    vocabulary = vocabulary_of(captions, before)
    if not vocabulary:
        return None
    Y = presence(captions, vocabulary)
    idf = idf_of(Y)
    transfer = LabelTransfer(floor=VOTE_FLOOR).fit(X, Y)
    rows = np.arange(len(X))
    if len(rows) > MAX_HELD_OUT:
        rows = np.sort(np.random.default_rng(seed).choice(len(rows), MAX_HELD_OUT,
                                                          replace=False))
    Y_held = Y[rows]
    queries = training_queries(Y_held, idf_weights=idf).sample()
    if not len(queries):  # no caption of a word with pictures to hold out
        return None
    sims, nbrs = nearest(X, max(K_GRID), rows)
    held_out = choose_vote(transfer, sims, nbrs, queries)
    Z_held = transfer.log_vote(transfer.vote_of(sims, nbrs))
    centre, spread = Z_held.mean(axis=0), Z_held.std(axis=0)
    spread = np.where(spread > 1e-6, spread, 1.0).astype(np.float32)
    keep = lifted(Z_held, Y_held)
    spread = np.where(keep, spread, np.inf).astype(np.float32)  # a standard score of 0
    Z_held = ((Z_held - centre) / spread).astype(np.float32)
    held_out["words_voting"] = int(keep.sum())
    # every tagged picture is held out: the weight chosen on them is not settled toward the
    # default that a fit's small validation split is (pamir.zeroshot.prior.SETTLE)
    prior = choose_prior(Z_held, P[rows], Y_held, classes_of(vocabulary), queries=queries,
                         settle=0)
    mixed = prior.mix(Z_held, P[rows])
    held_out.update(pictures=int(len(rows)), queries=int(len(queries)),
                    avgp=_avgp(mixed, queries),
                    classes_alone_avgp=_avgp(prior.class_scores(P[rows]), queries),
                    global_weight=prior.info.get("global_weight"))
    calibration = None
    # start-up: scikit-learn's logistic, scipy's optimiser and numba (about 1 s), which a
    # search of a folder's index, reading its folder words, does not need
    from ..calibration import fitting  # noqa: PLC0415
    try:
        few = queries.sample(CALIBRATION_QUERIES, seed)
        calibration = fitting.fit_calibration(mixed, few.vectors, _terms(few), few.relevance,
                                              Y_held, seed=seed, negatives=CALIBRATION_NEGATIVES,
                                              info={"scored_by": "held-out tagged pictures"})
        # the held-out pictures' word probabilities, as the rule was chosen on them
        P_held = fitting.choose_annotation_rule(calibration, mixed, Y_held, seed=seed)
        held_out["write"] = write_bar(P_held, Y_held)
        held_out["write"]["imagenet"] = imagenet_bar(P[rows], [captions[i] for i in rows])
    except ValueError as e:  # too few captions to fit one: raw scores, no probability
        held_out["calibration"] = str(e)
    return FolderWords(vocabulary, idf, transfer, centre.astype(np.float32), spread, prior,
                       calibration, held_out)


def write_bar(P: np.ndarray, Y) -> dict:
    """The least probability of the folder's words that `pamir annotate --xmp` writes,
    chosen on the held-out tagged pictures (their words' calibrated probabilities P, n x T,
    each one's best other picture the reference's top, as
    pamir.calibration.fitting.choose_annotation_rule gives them, and tags Y): the least
    of WRITE_BARS at which the words it would write of them (at most ANNOTATION_WORDS a
    picture) are in their tags WRITE_PRECISION of the time, by a standard error
    (pamir.zeroshot.classes.least_right_bar). {bar (None: no bar is, and no folder word is
    written), precision, pictures_with_a_word (their share at the bar), grid: {bar: [right,
    written]}}."""
    R = sp.csr_matrix(Y).toarray() > 0
    probability = np.nan_to_num(P, nan=-1.0)
    # a picture's words as they are written: its ANNOTATION_WORDS most likely at most
    top = np.argsort(-probability, axis=1, kind="stable")[:, :config.ANNOTATION_WORDS]
    rows = np.arange(len(P))[:, None]
    p, r = probability[rows, top], R[rows, top]
    right = [int((r & (p >= bar)).sum()) for bar in WRITE_BARS]
    written = [int((p >= bar).sum()) for bar in WRITE_BARS]
    bar, precision = least_right_bar(WRITE_BARS, right, written)
    share = None if bar is None else round(float((p >= bar).any(axis=1).mean()), 3)
    return {"bar": bar, "precision": precision, "pictures_with_a_word": share,
            "grid": {f"{b:g}": [n, w] for b, n, w in zip(WRITE_BARS, right, written)}}


def imagenet_bar(P: np.ndarray, captions: Sequence[Sequence[str]]) -> dict:
    """ImageNet's words' bar in this folder (`write_bar`'s rule), judged by the held-out
    tagged pictures' own tags (their class probabilities P, the neighbours' mixed in): a
    word is right where the picture's tags hold it or its singular. A person whose tags use
    other words than ImageNet's ("polar" and "bear", not "ice bear"; no "television" ever)
    gets the folder's words alone: on the tagged library of 1,500 Corel pictures, ImageNet's
    words written on its untagged pictures were 25 % in their captions, the folder's 54 %.
    {bar (None: not written), precision, grid}."""
    words = class_annotate(P, config.ANNOTATION_WORDS, min(WRITE_BARS))
    right, written = np.zeros(len(WRITE_BARS), int), np.zeros(len(WRITE_BARS), int)
    for found, caption in zip(words, captions):
        tags = set(caption_words(caption))
        tags |= {f for w in tags for f in lemmas(w, nouns=True)}
        for a in found:
            at = np.array(WRITE_BARS) <= a.probability
            written += at
            right += at * (a.word in tags or a.word.replace(" ", "_") in tags)
    bar, precision = least_right_bar(WRITE_BARS, right.tolist(), written.tolist())
    return {"bar": bar, "precision": precision,
            "grid": {f"{b:g}": [int(n), int(w)] for b, n, w in zip(WRITE_BARS, right, written)}}


def lifted(Z: np.ndarray, Y) -> np.ndarray:
    """(T,) whether each word's held-out scores Z (n x T) rank its pictures (Y) at least
    MIN_LIFT times better than chance (AvgP over the share of the pictures with it)."""
    # pamir.evaluation imports numba (0.7 s): only where the words are learnt, not wherever
    # the folder look is read (`pamir annotate --xmp`, `pamir serve`)
    from ..evaluation.metrics import average_precision  # noqa: PLC0415

    R = sp.csc_matrix(Y).toarray().T > 0
    share = R.mean(axis=1)
    ap = average_precision(np.asarray(Z, np.float64).T, R)
    return (share > 0) & (ap >= MIN_LIFT * share)


def choose_vote(transfer, sims: np.ndarray, nbrs: np.ndarray, queries) -> dict:
    """Set the transfer's (K, temperature) to the point of K_GRID x TEMPERATURES whose
    held-out votes search the tagged pictures' queries best; {k, temperature, vote_avgp,
    grid}."""
    grid = {}
    for k in K_GRID:
        for t in TEMPERATURES:
            transfer.k, transfer.temperature = k, t
            grid[(k, t)] = _avgp(transfer.log_vote(transfer.vote_of(sims, nbrs)), queries)
    (k, t), best = max(grid.items(), key=lambda kv: (kv[1], -kv[0][0], kv[0][1]))
    transfer.k, transfer.temperature = k, t
    return {"k": int(k), "temperature": float(t), "vote_avgp": best,
            "grid": {f"{k}/{t:g}": v for (k, t), v in grid.items()}}


def classes_only(vocabulary: Sequence[str], classes, dim: int) -> FolderWords:
    """Words with no tagged picture to vote: each scored by its classes alone (a word they
    do not reach scores alike everywhere), no probability. What an index that has its
    folder's words keeps when none of its pictures carries a tag any more."""
    T = len(vocabulary)
    transfer = LabelTransfer(floor=VOTE_FLOOR).fit(np.zeros((0, dim), np.float32),
                                                   sp.csr_matrix((0, T), dtype=np.float32))
    reach = np.asarray(abs(sp.csr_matrix(classes)).sum(axis=1)).ravel() > 0
    prior = Prior(reach.astype(np.float32), np.ones(T, np.float32), classes,
                  {"global_weight": 1.0, "why": "no tagged picture votes"})
    return FolderWords(list(vocabulary), np.zeros(T), transfer, np.zeros(T, np.float32),
                       np.ones(T, np.float32), prior)


def better(words: FolderWords | None) -> bool:
    """Whether the folder words search the held-out tagged pictures better than the
    classes alone (the condition of their first swap into an index)."""
    h = (words.held_out if words is not None else None) or {}
    return bool(h) and h["avgp"] > h["classes_alone_avgp"]


def _avgp(Z: np.ndarray, queries) -> float:
    from ..evaluation.retrieval import mean_average_precision  # noqa: PLC0415 - as `lifted`

    if not queries.vectors.shape[0]:
        return math.nan
    return round(100 * float(mean_average_precision(np.asarray(Z, np.float32),
                                                    queries.vectors, queries.relevance)), 2)


def _terms(queries) -> list:
    """Each query's word indices (a sampled query set keeps its vectors alone)."""
    Q = queries.vectors.tocsr()
    return [tuple(Q.indices[Q.indptr[i]:Q.indptr[i + 1]].tolist()) for i in range(Q.shape[0])]


# ------------------------------------------------------------------------------ the state
@dataclass
class FolderLook:
    """What the folder's pictures add to the look: the standardisation of their views
    (mean, std), the neighbours' settings, the pictures it was made of (`hashes`, their
    content hashes, and `signature`, of their tags too) and the words (None: no keyword
    reaches other pictures)."""

    mean: np.ndarray
    std: np.ndarray
    hashes: np.ndarray
    signature: str
    words: FolderWords | None = None
    info: dict = field(default_factory=dict)

    @property
    def vocabulary(self) -> list[str]:
        return [] if self.words is None else list(self.words.vocabulary)

    @property
    def T(self) -> int:
        return len(self.vocabulary)

    def views(self, pooled: np.ndarray) -> np.ndarray:
        return views(pooled, self.mean, self.std)

    def rows(self, pooled: np.ndarray, P: np.ndarray) -> np.ndarray:
        """(n x T) the words of pictures with pooled vectors `pooled` and class
        probabilities P ((n x 0) without words)."""
        if self.words is None:
            return np.zeros((len(pooled), 0), np.float32)
        return self.words.rows(self.views(pooled), P)

    def changed(self, hashes: Sequence[str]) -> int:
        """How many pictures were added or removed since it was made."""
        return len(set(hashes).symmetric_difference(self.hashes.astype(str).tolist()))

    # -------------------------------------------------------------------------- saving
    def save(self, directory) -> Path:
        """model.json + arrays.npz in `directory`, swapped in atomically; the words'
        calibration where pamir.calibration.load_calibration reads a model's."""
        head = {"kind": KIND, "version": VERSION, "signature": self.signature,
                "info": self.info, "vocabulary": self.vocabulary}
        arrays = {"mean": self.mean, "std": self.std,
                  "hashes": np.asarray(self.hashes, dtype="S32")}
        w = self.words
        if w is not None:
            t = w.transfer
            head["vote"] = {"k": int(t.k), "temperature": float(t.temperature),
                            "floor": float(t.floor)}
            head["held_out"] = w.held_out
            arrays |= {"idf": w.idf, "vectors": t.vectors_, "centre": w.centre,
                       "spread": w.spread,
                       **_sparse("presence", t.presence_)}
            head["prior"], prior_arrays = w.prior.to_saved()
            arrays |= {f"prior/{k}": v for k, v in prior_arrays.items()}
            if w.calibration is not None:
                head["calibration"], cal_arrays = w.calibration.to_saved()
                arrays |= {f"calibration/{k}": v for k, v in cal_arrays.items()}
        return save_directory(directory, head, arrays)

    @classmethod
    def load(cls, directory) -> "FolderLook":
        """The folder look saved in `directory`; ValueError (or OSError) where there is none,
        or it is not whole, or of another version."""
        head, arrays = load_directory(directory)
        if head.get("kind") != KIND or head.get("version") != VERSION:
            raise ValueError(f"{directory}: not a folder look of version {VERSION}")

        def part(prefix):
            return {k.partition("/")[2]: v for k, v in arrays.items()
                    if k.startswith(prefix + "/")}

        words = None
        if head["vocabulary"]:
            transfer = LabelTransfer(**head["vote"])
            transfer.vectors_ = arrays["vectors"]
            transfer.presence_ = _from_sparse(part("presence"))
            transfer.ids_ = transfer.paths_ = [""] * len(transfer.vectors_)
            transfer._index = None
            calibration = (Calibration.from_saved(head["calibration"], part("calibration"))
                           if head.get("calibration") else None)
            words = FolderWords(list(head["vocabulary"]), arrays["idf"], transfer,
                                arrays["centre"], arrays["spread"],
                                Prior.from_saved(head["prior"], part("prior")), calibration,
                                head.get("held_out", {}))
            if transfer.presence_.shape[1] != words.T or words.prior.T != words.T:
                raise ValueError(f"{directory}: its parts disagree on the number of words")
        return cls(arrays["mean"], arrays["std"], arrays["hashes"], head["signature"], words,
                   head.get("info", {}))


#: model.json's kind.
KIND = "folder-look"


def _sparse(name: str, M) -> dict[str, np.ndarray]:
    return {f"{name}/data": M.data, f"{name}/indices": M.indices, f"{name}/indptr": M.indptr,
            f"{name}/shape": np.asarray(M.shape, np.int64)}


def _from_sparse(p: dict):
    return sp.csr_matrix((p["data"], p["indices"], p["indptr"]),
                         shape=tuple(int(x) for x in p["shape"]))


def signature(system_fingerprint: str, tagged: Sequence[tuple[str, Sequence[str]]]) -> str:
    """What the folder's words are made of: the look's network, VERSION and every tagged
    picture's (content hash, caption); a change of any tag changes it."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{system_fingerprint}\0{VERSION}".encode())
    for digest, caption in sorted((d, tuple(c)) for d, c in tagged):
        h.update(("\0" + digest + "\0" + " ".join(caption)).encode())
    return h.hexdigest()


def describe(look: FolderLook) -> str:
    """One line for a person: what the folder's pictures add to the look."""
    n = len(look.hashes)
    line = (f"the folder's look: {n:,} pictures, each ranked with its {SMOOTH_K} most alike"
            if n >= SMOOTH_MIN_PICTURES else f"the folder's look: {n:,} pictures")
    w = look.words
    if w is None:
        return line
    h = w.held_out
    if not h:
        return line + f"; {w.T:,} words with no tagged picture left: ImageNet's words alone"
    return (line + f"; {w.T:,} words of {look.info.get('tagged', 0):,} tagged pictures reach "
            f"the others (held-out AvgP {h['avgp']:.1f}, ImageNet's words alone "
            f"{h['classes_alone_avgp']:.1f})")


__all__ = ["FolderLook", "FolderWords", "MIN_TAGGED", "SMOOTH_K", "SMOOTH_WEIGHT", "better",
           "classes_only", "describe", "fit_folder_words", "signature", "smooth", "views"]
