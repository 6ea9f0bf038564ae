"""Label transfer from the nearest captioned pictures, mixed with PAMIR.

    transfer = LabelTransfer(k=80, temperature=0.1).fit(V_train, Y_train, ids, paths)
    log_vote = transfer.transform(V)                 # (n x T) float32
    part = Neighbours(transfer, views, alpha=0.7, stats=...)
    Z = part.mix(pamir.transform(F), F)              # PAMIR's W x beside the vote

A picture's vote for a word is the weighted share of its k nearest captioned pictures that
carry the word, the weights a softmax of their cosine similarities over a temperature (the
distance-based weights of TagProp, Guillaumin et al., ICCV 2009, without its learnt metric:
the CNN views already give a good one). The vote enters the text space as its logarithm,
floored: a word none of the neighbours carries still ranks pictures by PAMIR's part.

Why beside PAMIR and not instead: a linear map scores a picture by what is common to all the
pictures of a word, the neighbours by the few pictures it resembles most; on Corel 5k the
vote alone is level with PAMIR on validation (48.4 against 46.6 AvgP) and the mix gains 5.3
there and 3.8 on test (benchmarks/results/knn.md).

The mix (`Neighbours.mix`) puts the vote in PAMIR's units before weighing it: both parts are
standardised with a mean and a spread measured once, on the validation pictures when the
system was fitted (`mix_stats`), and the vote is mapped onto PAMIR's mean and spread, so
alpha = 0 gives PAMIR's scores exactly and the index stores T numbers a picture as before.

The nearest pictures are found with faiss (exact inner products on unit vectors): the vectors
are stored as float16, only the global average of each CNN view is kept (`views`), and they
are compared on their 256 principal axes (NEIGHBOUR_DIMS), which keeps the model file and the
search small (on Corel 5k: 6 MiB more and 0.28 ms a picture; knn.md).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.sparse as sp

from ..features.registry import ColumnBlocks

KIND = "label-transfer"
#: Pictures searched per faiss call: bounds the (chunk x k) buffers and the dense view copy.
SEARCH_CHUNK = 4096


def unit_rows(V: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), float32 (written into `out` when
    given)."""
    V = np.asarray(V, dtype=np.float32)
    norms = np.linalg.norm(V, axis=1, keepdims=True)
    return np.divide(V, np.maximum(norms, 1e-12), out=out)


class LabelTransfer:
    """The softmax-weighted vote of a picture's k nearest captioned pictures, per word.

    k: neighbours a picture asks; temperature: of the softmax over their cosine similarities
    (small: the nearest few decide); floor: added to the vote before its logarithm (the vote
    of a word no neighbour carries is log(floor)).

    Fitted state: vectors_ (N x d float16, unit rows: the captioned pictures' views),
    presence_ (N x T CSR, their captions), ids_ and paths_ (N strings: who voted).
    """

    kind = KIND

    def __init__(self, k: int = 80, temperature: float = 0.1, floor: float = 1e-3):
        self.k = k
        self.temperature = temperature
        self.floor = floor

    # ------------------------------------------------------------------------- fitting
    def _check_params(self) -> None:
        if not (isinstance(self.k, (int, np.integer)) and self.k >= 1):
            raise ValueError(f"label transfer: k={self.k!r} must be a whole number >= 1")
        if not self.temperature > 0:
            raise ValueError(f"label transfer: temperature={self.temperature!r} must be > 0")
        if not self.floor > 0:
            raise ValueError(f"label transfer: floor={self.floor!r} must be > 0")

    def fit(self, V, Y, ids: Sequence | None = None, paths: Sequence | None = None
            ) -> "LabelTransfer":
        """V: (N x d) the captioned pictures' views; Y: (N x T) their caption presence."""
        self._check_params()
        V = np.asarray(V)
        Y = sp.csr_matrix(Y, dtype=np.float32)
        if V.ndim != 2 or V.shape[0] != Y.shape[0]:
            raise ValueError(f"label transfer: {V.shape[0] if V.ndim else 0} picture vectors "
                             f"for {Y.shape[0]} captions")
        self.vectors_ = unit_rows(V).astype(np.float16)
        self.presence_ = Y
        self.ids_ = _strings(ids, len(V), "id")
        self.paths_ = _strings(paths, len(V), "")
        self._index = None
        return self

    def add(self, V, Y, ids: Sequence | None = None, paths: Sequence | None = None) -> None:
        """More captioned pictures: they vote from the next search on (`pamir learn`)."""
        self._check_fitted()
        V = unit_rows(np.asarray(V)).astype(np.float16)
        Y = sp.csr_matrix(Y, dtype=np.float32)
        if V.shape[1] != self.vectors_.shape[1] or V.shape[0] != Y.shape[0]:
            raise ValueError(f"label transfer: {V.shape} vectors with {Y.shape[0]} captions do "
                             f"not match the {self.vectors_.shape[1]} dimensions it holds")
        self.grow_words(Y.shape[1])
        Y = sp.hstack([Y, sp.csr_matrix((Y.shape[0], self.T - Y.shape[1]))]).tocsr()
        self.vectors_ = np.vstack([self.vectors_, V])
        self.presence_ = sp.vstack([self.presence_, Y], format="csr", dtype=np.float32)
        self.ids_ += _strings(ids if ids is not None else paths, len(V),
                              f"learnt-{len(self.ids_)}-")
        self.paths_ += _strings(paths, len(V), "")
        if self._index is not None:
            self._index.add(V.astype(np.float32))

    def keep_first(self, n: int) -> None:
        """Forget the pictures added after the first n (a kept feedback that could not be
        saved: the model in memory stays as on disk)."""
        if n < len(self):
            self.vectors_, self.presence_ = self.vectors_[:n], self.presence_[:n]
            self.ids_, self.paths_ = self.ids_[:n], self.paths_[:n]
            self._index = None  # the faiss index is built again on the next search

    def grow_words(self, T: int) -> None:
        """New words (pamir learn): the captioned pictures carry none of them yet."""
        if T > self.T:
            self.presence_ = sp.hstack([self.presence_, sp.csr_matrix(
                (self.presence_.shape[0], T - self.T), dtype=np.float32)], format="csr")

    @property
    def T(self) -> int:
        return self.presence_.shape[1]

    def __len__(self) -> int:
        return self.vectors_.shape[0]

    # ------------------------------------------------------------------------- voting
    def _faiss(self):
        import faiss  # noqa: PLC0415  faiss: 0.2 s; only a system with neighbours needs it

        if getattr(self, "_index", None) is None:
            self._index = faiss.IndexFlatIP(self.vectors_.shape[1])
            self._index.add(self.vectors_.astype(np.float32))
        return self._index

    def search(self, V) -> tuple[np.ndarray, np.ndarray]:
        """(similarities, neighbours): each picture's k nearest captioned pictures, nearest
        first ((n x k') float32 cosines and int64 rows, k' = min(k, N))."""
        self._check_fitted()
        V = unit_rows(np.asarray(V))
        k = min(int(self.k), len(self))
        return self._faiss().search(np.ascontiguousarray(V), k)

    def weights(self, sims: np.ndarray) -> np.ndarray:
        """Softmax over a picture's neighbours of cosine / temperature."""
        logits = sims.astype(np.float64) / float(self.temperature)
        w = np.exp(logits - logits.max(axis=1, keepdims=True))
        return w / w.sum(axis=1, keepdims=True)

    def vote(self, V) -> np.ndarray:
        """(n x T) float32: the weighted share of each picture's neighbours with each word."""
        self._check_fitted()
        V = np.asarray(V)
        out = np.zeros((V.shape[0], self.T), np.float32)
        for start in range(0, V.shape[0], SEARCH_CHUNK):
            sims, nbrs = self.search(V[start:start + SEARCH_CHUNK])
            out[start:start + len(sims)] = self.vote_of(sims, nbrs)
        return out

    def vote_of(self, sims: np.ndarray, nbrs: np.ndarray) -> np.ndarray:
        """The vote of pictures whose neighbours `search` found (the first k of them)."""
        sims, nbrs = sims[:, :self.k], nbrs[:, :self.k]
        w = self.weights(sims)
        rows = np.repeat(np.arange(len(w)), w.shape[1])
        keep = nbrs.ravel() >= 0  # faiss marks missing neighbours with -1
        M = sp.csr_matrix((w.ravel()[keep], (rows[keep], nbrs.ravel()[keep])),
                          shape=(len(w), len(self)))
        return (M @ self.presence_).toarray().astype(np.float32)

    def log_vote(self, vote: np.ndarray) -> np.ndarray:
        return np.log(vote + np.float32(self.floor)).astype(np.float32)

    def transform(self, V) -> np.ndarray:
        """(n x T) float32: log(vote + floor)."""
        return self.log_vote(self.vote(V))

    def voters(self, V, words: Sequence[int] | None = None, top: int = 5) -> list[list[dict]]:
        """Who voted, for each picture of V: its `top` heaviest neighbours that carry any of
        `words` (vocabulary indices; None: any word), heaviest first, each {"id", "path",
        "weight" (its share of the vote), "similarity", "words" (indices of its caption)}."""
        sims, nbrs = self.search(V)
        w = self.weights(sims)
        wanted = None if words is None else np.asarray(list(words), dtype=np.int64)
        out = []
        for i in range(len(nbrs)):
            found = []
            for j, weight, sim in zip(nbrs[i], w[i], sims[i]):
                caption = self.presence_.indices[self.presence_.indptr[j]:
                                                 self.presence_.indptr[j + 1]]
                if wanted is not None and not np.isin(caption, wanted).any():
                    continue
                found.append({"id": self.ids_[j], "path": self.paths_[j],
                              "weight": float(weight), "similarity": float(sim),
                              "words": [int(t) for t in caption]})
                if len(found) == top:
                    break
            out.append(found)
        return out

    def _check_fitted(self) -> None:
        if not hasattr(self, "vectors_"):
            raise RuntimeError("LabelTransfer is not fitted: call fit() first")

    # ------------------------------------------------------------------------- saving
    def set_params(self, **params) -> "LabelTransfer":
        for name, value in params.items():
            if name not in ("k", "temperature", "floor"):
                raise ValueError(f"label transfer: unknown parameter {name!r}")
            setattr(self, name, value)
        self._check_params()
        return self

    def get_params(self) -> dict:
        return {"k": int(self.k), "temperature": float(self.temperature),
                "floor": float(self.floor)}

    def _state(self) -> tuple[dict, dict[str, np.ndarray]]:
        self._check_fitted()
        Y = self.presence_
        return ({"ids": self.ids_, "paths": self.paths_, "words": int(Y.shape[1])},
                {"vectors": self.vectors_, "presence_indptr": Y.indptr.astype(np.int64),
                 "presence_indices": Y.indices.astype(np.int32)})

    def _set_state(self, meta: dict, arrays: dict) -> None:
        V = np.asarray(arrays["vectors"])
        indptr, indices = arrays["presence_indptr"], arrays["presence_indices"]
        n, T = V.shape[0], int(meta["words"])
        if (V.ndim != 2 or len(indptr) != n + 1 or len(meta["ids"]) != n
                or (len(indices) and (indices.min() < 0 or indices.max() >= T))):
            raise ValueError(f"label transfer: stored neighbours are inconsistent ({n} vectors, "
                             f"{len(indptr) - 1} captions, {len(meta['ids'])} ids)")
        self.vectors_ = V.astype(np.float16, copy=False)
        self.presence_ = sp.csr_matrix((np.ones(len(indices), np.float32), indices, indptr),
                                       shape=(n, T))
        self.ids_, self.paths_ = list(meta["ids"]), list(meta["paths"])
        self._index = None


def _strings(values, n: int, prefix: str) -> list[str]:
    if values is None:
        return [f"{prefix}{i}" if prefix else "" for i in range(n)]
    values = [str(v) for v in values]
    if len(values) != n:
        raise ValueError(f"label transfer: {len(values)} names for {n} pictures")
    return values


# ---------------------------------------------------------------------------------- the mix

def view_of(F, views: Sequence[Sequence[int]]) -> np.ndarray:
    """(n x d) float32: the columns [start, stop) of each view of the model's input F (dense
    or CSR), each view's rows scaled to unit norm, side by side and divided by sqrt(views):
    a dot product of two such rows is the mean of the views' cosines.

    Built in its place, one view's columns at a time: the views, their unit rows, their
    stack and its scaling were four copies (1.6 GB each for 100,000 pictures of
    the README winner). The same numbers: each is divided by its row's norm, then by
    sqrt(views), in float32, as before."""
    widths = [stop - start for start, stop in views]
    out = np.empty((F.shape[0], sum(widths)), np.float32)
    scale, at = np.float32(np.sqrt(len(views))), 0
    for (start, stop), width in zip(views, widths):
        into = out[:, at:at + width]
        unit_rows(_columns(F, start, stop), out=into)
        into /= scale
        at += width
    return out


def _columns(F, start: int, stop: int) -> np.ndarray:
    """Dense columns [start, stop) of F. A CSR concatenation whose leading block is dense
    (the CNN parts: every row stores its first `stop` columns) is read straight from its
    data, 10x faster than scipy's column slicing, which cost as much as the search."""
    if isinstance(F, ColumnBlocks):  # a fit's features: the dense view itself
        dense = F.columns(start, stop)
        if dense is not None:
            return dense
        F = F.tocsr()
    if not sp.issparse(F):
        return np.asarray(F[:, start:stop])
    F = sp.csr_matrix(F)
    if not F.has_sorted_indices:
        return F[:, start:stop].toarray()
    first = F.indptr[:-1].astype(np.int64)
    whole = np.diff(F.indptr) >= stop  # rows that store all of [0, stop): sorted, so
    whole[whole] = F.indices[first[whole] + stop - 1] == stop - 1  # their stop-th is stop - 1
    out = np.empty((F.shape[0], stop - start), F.dtype)
    data = F.data
    for i in np.flatnonzero(whole):  # contiguous runs: a copy each, faster than a gather
        out[i] = data[first[i] + start:first[i] + stop]
    if not whole.all():  # a CNN number that is exactly 0 is not stored
        out[~whole] = F[np.flatnonzero(~whole)][:, start:stop].toarray()
    return out


def fit_projection(V: np.ndarray, dims: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(mean (d,), components (d x dims)) float32: the principal axes of the captioned
    pictures' views, which the neighbours are compared in (a smaller model file and a faster
    search; knn.md measures what it costs in AvgP)."""
    # sklearn: about 0.5 s; only a fit projects (every system loads this module)
    from sklearn.decomposition import PCA  # noqa: PLC0415

    V = np.asarray(V, dtype=np.float32)
    dims = int(min(dims, V.shape[0], V.shape[1]))
    pca = PCA(n_components=dims, svd_solver="randomized", random_state=seed).fit(V)
    return pca.mean_.astype(np.float32), np.ascontiguousarray(pca.components_.T, np.float32)


def mix_stats(pamir_scores: np.ndarray, log_votes: np.ndarray) -> dict:
    """Mean and spread of each part's scores over reference pictures (all words together):
    what the mix standardises with."""
    return {"pamir_mean": float(np.mean(pamir_scores)), "pamir_std": float(np.std(pamir_scores)),
            "vote_mean": float(np.mean(log_votes)), "vote_std": float(np.std(log_votes))}


def mixed(pamir_scores: np.ndarray, log_votes: np.ndarray, alpha: float, stats: dict
          ) -> np.ndarray:
    """(1 - alpha) PAMIR + alpha (the vote in PAMIR's units): the z-scored mix, rescaled so
    that alpha = 0 is PAMIR's scores exactly."""
    if alpha == 0:
        return np.asarray(pamir_scores, dtype=np.float32)
    scale = stats["pamir_std"] / max(stats["vote_std"], 1e-12)
    vote = (log_votes - stats["vote_mean"]) * scale + stats["pamir_mean"]
    return ((1.0 - alpha) * pamir_scores + alpha * vote).astype(np.float32)


class Neighbours:
    """The neighbour part of a System: where its view lies in the model's input (`views`:
    [start, stop) column ranges), the label transfer, and the mix weight and statistics."""

    def __init__(self, transfer: LabelTransfer, views, alpha: float, stats: dict,
                 projection: tuple[np.ndarray, np.ndarray] | None = None):
        self.transfer = transfer
        self.views = [(int(a), int(b)) for a, b in views]
        self.alpha = float(alpha)
        self.stats = {k: float(v) for k, v in stats.items()}
        self.projection = projection
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"neighbours: alpha={alpha!r} must lie in [0, 1]")
        width = sum(b - a for a, b in self.views)
        if projection is not None and projection[1].shape[0] != width:
            raise ValueError(f"neighbours: a projection of {projection[1].shape[0]} dimensions "
                             f"for views of {width}")

    def view(self, F) -> np.ndarray:
        """(n x d) what the neighbours compare of the pictures F: their views, projected on
        the principal axes where there are some."""
        return self.project(view_of(F, self.views))

    def project(self, V: np.ndarray) -> np.ndarray:
        if self.projection is None:
            return V
        mean, components = self.projection
        return (V - mean) @ components

    def mix(self, pamir_scores: np.ndarray, F) -> np.ndarray:
        """The text-space vectors of the pictures F given PAMIR's scores for them."""
        if self.alpha == 0:
            return np.asarray(pamir_scores, dtype=np.float32)
        return mixed(pamir_scores, self.transfer.transform(self.view(F)), self.alpha, self.stats)

    def to_dict(self) -> tuple[dict, dict[str, np.ndarray]]:
        meta, arrays = self.transfer._state()
        if self.projection is not None:
            arrays |= {"projection_mean": self.projection[0],
                       "projection_components": self.projection[1]}
        return ({"kind": KIND, "params": self.transfer.get_params(), "views": self.views,
                 "alpha": self.alpha, "stats": self.stats, "state": meta}, arrays)

    @classmethod
    def from_saved(cls, d: dict, arrays: dict) -> "Neighbours":
        if d.get("kind") != KIND:
            raise ValueError(f"unknown neighbour part {d.get('kind')!r}: was the model made by "
                             "a newer pamir?")
        transfer = LabelTransfer(**d["params"])
        transfer._set_state(d["state"], arrays)
        projection = None
        if "projection_components" in arrays:
            projection = (np.asarray(arrays["projection_mean"], np.float32),
                          np.asarray(arrays["projection_components"], np.float32))
        return cls(transfer, d["views"], d["alpha"], d["stats"], projection)


__all__ = ["LabelTransfer", "Neighbours", "fit_projection", "mix_stats", "mixed", "unit_rows", "view_of"]
