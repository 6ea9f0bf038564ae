"""PAMIR trained from features on disk (100,000 pictures and beyond): the chunk store
(FeatureChunks) and a PAMIR trained by visits of its chunks (`fit_chunks`), so that memory
holds one chunk, not the training set.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..storage import atomic_write, atomic_write_bytes
from ..text.vectors import text_vectors
from .base import TrainingQueries
from .pamir_core import (
    Pictures,
    _csr,
    _dense,
    _dense_and_sparse,
    _parts,
    _row_norms_sq,
    _train_steps,
)

# ------------------------------------------------------------- training from disk, in chunks

class FeatureChunks:
    """Captioned pictures stored on disk in chunks, for training past the size of memory.

        store = FeatureChunks.create("/data/train", dim=256, words=T)
        store.append(X_chunk, Y_chunk)        # (n x dim) float32, (n x T) caption presence
        model = fit_chunks(PAMIR(), FeatureChunks("/data/train"), validation=(Xv, Yv))

    folder/chunks.json lists the chunks; each is X-NNNNN.npy (dense float32 pictures, read
    back memory-mapped: only the pages training touches come into memory, and they are
    the kernel's to drop) or X-NNNNN.npz (CSR bags, loaded whole while its chunk is
    trained on), and Y-NNNNN.npz (the captions, CSR). No pickle anywhere.
    """

    MANIFEST = "chunks.json"

    def __init__(self, folder):
        self.folder = Path(folder)
        head = json.loads((self.folder / self.MANIFEST).read_text())
        if head.get("kind") != "pamir-feature-chunks":
            raise ValueError(f"{folder}: not a folder of feature chunks")
        self.dim, self.words, self.chunks = int(head["dim"]), int(head["words"]), head["chunks"]

    @classmethod
    def create(cls, folder, dim: int, words: int) -> "FeatureChunks":
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        cls._write_manifest(folder, {"kind": "pamir-feature-chunks", "version": 1,
                                     "dim": int(dim), "words": int(words), "chunks": []})
        return cls(folder)

    @classmethod
    def _write_manifest(cls, folder, head) -> None:
        atomic_write_bytes(folder / cls.MANIFEST, json.dumps(head, indent=1).encode())

    def append(self, X, Y) -> None:
        """Write one more chunk: pictures X (n x dim, dense or sparse) and captions Y."""
        Y = sp.csr_matrix(Y)
        if X.shape[0] != Y.shape[0] or X.shape[1] != self.dim or Y.shape[1] != self.words:
            raise ValueError(f"chunk X {X.shape}, Y {Y.shape}; the store holds {self.dim} "
                             f"dimensions and {self.words} words")
        k = len(self.chunks)
        if sp.issparse(X):
            X = _csr(X, name="X")
            name = f"X-{k:05d}.npz"
            atomic_write(self.folder / name, lambda f: np.savez(
                f, data=X.data, indices=X.indices, indptr=X.indptr,
                shape=np.asarray(X.shape)))
        else:
            X = _dense(X, "X")
            name = f"X-{k:05d}.npy"
            atomic_write(self.folder / name, lambda f: np.save(f, X, allow_pickle=False))
        atomic_write(self.folder / f"Y-{k:05d}.npz", lambda f: np.savez(
            f, indices=Y.indices.astype(np.int32), indptr=Y.indptr.astype(np.int64),
            shape=np.asarray(Y.shape)))
        self.chunks.append({"X": name, "Y": f"Y-{k:05d}.npz", "pictures": int(X.shape[0])})
        self._write_manifest(self.folder, {"kind": "pamir-feature-chunks", "version": 1,
                                           "dim": self.dim, "words": self.words,
                                           "chunks": self.chunks})

    def __len__(self) -> int:
        return len(self.chunks)

    @property
    def pictures(self) -> int:
        return sum(c["pictures"] for c in self.chunks)

    def X(self, k: int):
        """Chunk k's pictures: a read-only memory map (dense) or a CSR matrix."""
        path = self.folder / self.chunks[k]["X"]
        if path.suffix == ".npy":
            return np.load(path, mmap_mode="r", allow_pickle=False)
        with np.load(path, allow_pickle=False) as z:
            return sp.csr_matrix((z["data"], z["indices"], z["indptr"]),
                                 shape=tuple(z["shape"]))

    def Y(self, k: int) -> sp.csr_matrix:
        with np.load(self.folder / self.chunks[k]["Y"], allow_pickle=False) as z:
            ind = z["indices"]
            return sp.csr_matrix((np.ones(len(ind)), ind, z["indptr"]), shape=tuple(z["shape"]))

    def idf(self) -> np.ndarray:
        """The training idf over every chunk's captions (pamir.text.vectors.idf, summed by chunk)."""
        df, n = np.zeros(self.words), 0
        for k in range(len(self)):
            Y = self.Y(k)
            df += np.bincount(Y.indices, minlength=self.words)
            n += Y.shape[0]
        return -np.log(np.maximum(df, 0.5) / max(n, 1))


def fit_chunks(model, chunks: FeatureChunks, *, validation=None, callback=None,
               visit_updates: int | None = None, work_dir=None):
    """Train a PAMIR `model` on captioned pictures stored on disk in chunks (FeatureChunks),
    so that the number of pictures is bounded by the disk, not by memory: only the chunk
    being trained on is open (memory-mapped when dense), with its queries. Returns the
    model.

    The updates are PAMIR's (same PA-I step, margins, averaging, early stopping on
    `validation`, held in memory); what differs from `PAMIR.fit` is the sampling: each visit
    of a chunk draws `visit_updates` triplets (default: eval_every) among that chunk's
    pictures, the chunks visited in a seeded random order. The idf is the whole
    store's. work_dir: where each chunk's queries are kept between visits (default: a
    temporary folder, removed at the end).
    """
    model._check_params()
    model.valid_queries_ = None
    if len(chunks) == 0:
        raise ValueError("PAMIR: no chunk to train on")
    model.idf_ = chunks.idf()
    model.V_, model.T_ = chunks.dim, chunks.words
    valid = None
    if validation is not None:
        X_valid, Y_valid = validation
        vq = model._validation_queries(Y_valid)
        valid = (Pictures.of(X_valid, "valid", "X_valid"), vq.vectors, vq.relevance)
    W = np.zeros((model.T_, model.V_), dtype=np.float32)
    A = np.zeros(W.shape) if model.average else np.zeros((0, 0))
    rng = np.array([(int(model.random_state) * 0x2545F4914F6CDD1D + 1) % 2**64],
                   dtype=np.uint64)
    own = work_dir is None
    work = Path(tempfile.mkdtemp(prefix="pamir-chunks-") if own else work_dir)
    try:
        model.dual_ = False
        steps = _ChunkVisits(model, chunks, W, A, rng, visit_updates or model.eval_every,
                             work)
        model.W_ = model._run(steps, lambda done: model._current(W, A, done),
                              model._scorer(valid), callback)
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
    model.chunk_visits_ = steps.visits
    return model


class _ChunkVisits:
    """PAMIR's update steps over a FeatureChunks: the chunks are visited in a seeded random
    order (each once per pass), `visit_updates` updates per visit, triplets drawn within the
    visited chunk. A chunk's queries, relevance and captions are computed on its first
    visit and kept on disk (work_dir) for the next ones; only the visited chunk is open."""

    def __init__(self, model, chunks: FeatureChunks, W, A, rng, visit_updates: int, work_dir):
        self.m, self.chunks, self.W, self.A, self.rng = model, chunks, W, A, rng
        self.visit_updates = int(visit_updates)
        self.work_dir = work_dir
        self.order = np.random.default_rng(model.random_state)
        self.queue: list[int] = []
        self.current, self.left = None, 0
        self.visits = 0

    def _prepared(self, k: int) -> tuple:
        folder = self.work_dir / f"chunk-{k:05d}"
        names = ("Qp", "Qi", "Qd", "Rp", "Ri", "Cp", "Ci", "Cd", "sample", "Xsq")
        if not (folder / "done").exists():
            Y = self.chunks.Y(k)
            queries = TrainingQueries(Y, idf_weights=self.m.idf_)
            Q = _csr(queries.vectors, name="query vectors")
            R = sp.csr_matrix(queries.relevance)
            caps = _csr(text_vectors(Y, self.m.idf_), name="captions")
            n_rel = np.diff(R.indptr)
            sample = np.flatnonzero((n_rel > 0) & (n_rel < Y.shape[0])).astype(np.int64)
            X = self.chunks.X(k)
            arrays = (*_parts(Q), R.indptr.astype(np.int64), R.indices.astype(np.int64),
                      *_parts(caps), sample, _row_norms_sq(X))
            folder.mkdir(parents=True, exist_ok=True)
            for name, a in zip(names, arrays):
                np.save(folder / f"{name}.npy", a, allow_pickle=False)
            (folder / "done").touch()
        return tuple(np.load(folder / f"{n}.npy", mmap_mode="r") for n in names)

    def _open(self, k: int) -> None:
        X = self.chunks.X(k)
        if isinstance(X, np.ndarray):  # a memory map: numba reads it as it is
            X = np.asarray(X)
            if X.dtype != np.float32 or not X.flags.c_contiguous:
                raise ValueError(f"chunk {k}: pictures must be C-ordered float32")
        Qp, Qi, Qd, Rp, Ri, Cp, Ci, Cd, sample, Xsq = (np.asarray(a)
                                                       for a in self._prepared(k))
        self.current = (_dense_and_sparse(X), Xsq, Qp, Qi, Qd, Rp, Ri, Cp, Ci, Cd, sample)
        self.left = self.visit_updates if len(sample) else 0
        self.visits += 1

    def __call__(self, done: int, k: int) -> tuple[int, float]:
        active, loss = 0, 0.0
        while k > 0:
            if self.left == 0:
                if not self.queue:
                    self.queue = list(self.order.permutation(len(self.chunks)))
                self.current = None  # let the last chunk's map go first
                self._open(int(self.queue.pop(0)))
                continue
            n = min(k, self.left)
            pictures, Xsq, Qp, Qi, Qd, Rp, Ri, Cp, Ci, Cd, sample = self.current
            a, l_ = _train_steps(self.W, self.A, done, n, self.rng, float(self.m.c),
                                 float(self.m.epsilon), self.m.margin == "text", *pictures,
                                 Xsq, Qp, Qi, Qd, Rp, Ri, Cp, Ci, Cd, sample)
            active, loss, done, k, self.left = active + a, loss + l_, done + n, k - n, self.left - n
        return active, loss


__all__ = ["FeatureChunks", "fit_chunks"]
