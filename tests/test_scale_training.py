"""PAMIR trained from features on disk in chunks (pamir_chunks.fit_chunks, FeatureChunks)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from pamir.evaluation import mean_average_precision
from pamir.models.base import TrainingQueries
from pamir.models.pamir import PAMIR
from pamir.models.pamir_chunks import FeatureChunks, fit_chunks


def planted(n: int, T: int = 12, D: int = 24, seed: int = 0, noise: float = 0.5):
    """Pictures whose features are a low-rank map of their caption words plus noise."""
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, T + 1) ** 0.7
    p /= p.sum()
    rows, cols = [], []
    for i in range(n):
        words = rng.choice(T, rng.integers(1, 4), replace=False, p=p)
        rows += [i] * len(words)
        cols += list(words)
    Y = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, T))
    M = np.random.default_rng(99).normal(size=(T, 4)) @ np.random.default_rng(98).normal(
        size=(4, D))
    X = Y @ M + noise * rng.normal(size=(n, D)) * np.abs(M).mean()
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X.astype(np.float32), Y


def avgp(W, X, Y, idf):
    q = TrainingQueries(Y, idf_weights=idf)
    return 100 * mean_average_precision(X @ W.T, q.vectors, q.relevance)


def test_one_chunk_is_fit_exactly(tmp_path):
    """With one chunk and one visit the sampling is fit's: the same W, bit for bit."""
    X, Y = planted(600)
    Xv, Yv = planted(200, seed=1)
    params = dict(n_updates=4_000, eval_every=1_000, random_state=3)
    ref = PAMIR(**params).fit(X, Y, validation=(Xv, Yv))
    store = FeatureChunks.create(tmp_path / "chunks", dim=X.shape[1], words=Y.shape[1])
    store.append(X, Y)
    got = fit_chunks(PAMIR(**params), FeatureChunks(tmp_path / "chunks"),
                     validation=(Xv, Yv), visit_updates=10**9)
    np.testing.assert_array_equal(got.W_, ref.W_)
    np.testing.assert_array_equal(got.idf_, ref.idf_)
    assert got.history_ == [h[:4] + [got.history_[i][4]] for i, h in enumerate(ref.history_)]


def test_chunks_memory_mapped_and_learnt(tmp_path):
    X, Y = planted(3_000, seed=2)
    Xv, Yv = planted(400, seed=3)
    store = FeatureChunks.create(tmp_path / "c", dim=X.shape[1], words=Y.shape[1])
    for lo in range(0, 3_000, 1_000):
        store.append(X[lo:lo + 1_000], Y[lo:lo + 1_000])
    store = FeatureChunks(tmp_path / "c")
    assert len(store) == 3 and store.pictures == 3_000
    assert isinstance(store.X(1), np.memmap)  # read from disk, not loaded
    np.testing.assert_allclose(store.idf(), TrainingQueries(Y).idf)
    work = tmp_path / "work"
    model = fit_chunks(PAMIR(n_updates=30_000, eval_every=2_000, patience=None), store,
                       validation=(Xv, Yv), work_dir=work)
    assert model.chunk_visits_ == 15  # 30k updates, one visit of 2k each
    assert sorted(p.name for p in work.iterdir()) == [f"chunk-{k:05d}" for k in range(3)]
    learnt = avgp(model.W_, Xv, Yv, model.idf_)
    chance = avgp(np.random.default_rng(0).normal(size=model.W_.shape), Xv, Yv, model.idf_)
    assert learnt > chance + 20, (learnt, chance)
    # as good as training on everything in memory, within a few points
    full = PAMIR(n_updates=30_000, eval_every=2_000, patience=None).fit(X, Y)
    assert learnt > avgp(full.W_, Xv, Yv, full.idf_) - 5


def test_sparse_chunks_and_checks(tmp_path):
    X, Y = planted(300, seed=4)
    store = FeatureChunks.create(tmp_path / "s", dim=X.shape[1], words=Y.shape[1])
    store.append(sp.csr_matrix(X), Y)
    assert sp.issparse(store.X(0))
    with pytest.raises(ValueError, match="dimensions"):
        store.append(X[:, :5], Y)
    model = fit_chunks(PAMIR(n_updates=2_000, eval_every=1_000), FeatureChunks(tmp_path / "s"))
    assert model.W_.shape == (Y.shape[1], X.shape[1]) and np.abs(model.W_).sum() > 0
