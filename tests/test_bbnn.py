"""BBNN: the loss gradient, learning a tiny synthetic problem, and the save format."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from pamir.evaluation import mean_average_precision, query_scores
from pamir.models import load_model
from pamir.models.base import TrainingQueries
from pamir.models.bbnn import (BBNN, as_blocks, init_weights, margin_loss, pooled_margin_loss,
                              text_layer)


def synthetic(n=300, n_words=8, n_blocks=12, dim=20, seed=0):
    """Pictures whose blocks come from their caption words' prototypes, plus background.

    Each word owns a prototype descriptor; a picture of words {a, b} has blocks drawn around
    the prototypes of a and b or around a background one. Variable block counts exercise
    the offsets.
    """
    rng = np.random.default_rng(seed)
    protos = rng.normal(0, 1, (n_words + 1, dim)) * 2
    rows, desc, offsets = [], [], [0]
    for j in range(n):
        words = rng.choice(n_words, size=rng.integers(1, 3), replace=False)
        rows.append(words)
        k = n_blocks + int(rng.integers(-2, 3))
        which = np.where(rng.random(k) < 0.6, rng.choice(words, size=k), n_words)
        desc.append(protos[which] + rng.normal(0, 1, (k, dim)))
        offsets.append(offsets[-1] + k)
    Y = sp.lil_matrix((n, n_words), dtype=np.float32)
    for j, words in enumerate(rows):
        Y[j, words] = 1
    return (np.concatenate(desc).astype(np.float32), np.array(offsets)), Y.tocsr()


def _split(X, Y, a, b):
    desc, off = X
    return (desc[off[a]:off[b]], off[a:b + 1] - off[a]), Y[a:b]


@pytest.mark.parametrize("negatives", ["sampled", "pooled"])
def test_gradient_matches_finite_differences(negatives):
    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    w = init_weights(5, 4, 3, 6, seed=2, dtype=torch.float64)
    x = torch.from_numpy(rng.normal(size=(7, 5)))
    segment = torch.tensor([0, 0, 0, 1, 1, 2, 2])
    counts = torch.tensor([3.0, 2.0, 2.0], dtype=torch.float64)
    q = torch.from_numpy(rng.random((2, 6)))
    eps = torch.tensor([5.0, 5.0], dtype=torch.float64)  # large: both triplets violated

    pool_eps = torch.tensor([[5.0, 5.0], [0.5, 5.0]], dtype=torch.float64)
    negative = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=torch.float64)

    def loss():
        t = text_layer(w, x, segment, counts)
        if negatives == "pooled":
            return pooled_margin_loss(t[[0, 1]], t[[1, 2]], q, pool_eps, negative)
        return margin_loss(t[[0, 1]], t[[2, 0]], q, eps)

    for p in w.values():
        p.requires_grad_(True)
    grads = torch.autograd.grad(loss(), list(w.values()))
    h = 1e-6
    with torch.no_grad():
        for (name, p), g in zip(w.items(), grads):
            numeric = torch.zeros_like(p)
            flat, nflat = p.view(-1), numeric.view(-1)
            for i in range(flat.numel()):
                old = flat[i].item()
                flat[i] = old + h
                up = loss().item()
                flat[i] = old - h
                down = loss().item()
                flat[i] = old
                nflat[i] = (up - down) / (2 * h)
            assert torch.allclose(g, numeric, rtol=1e-5, atol=1e-8), name


def test_text_margin_loss_is_zero_when_the_margin_holds():
    q = torch.tensor([[1.0, 0.0]])
    t_pos, t_neg = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.5, 0.0]])
    assert margin_loss(t_pos, t_neg, q, torch.tensor([1.0])).item() == 0.0
    assert margin_loss(t_pos, t_neg, q, torch.tensor([2.0])).item() == pytest.approx(0.5)


@pytest.mark.parametrize("negatives", ["sampled", "pooled"])
def test_learns_a_tiny_synthetic_problem(negatives):
    X, Y = synthetic()
    Xtr, Ytr = _split(X, Y, 0, 200)
    Xva, Yva = _split(X, Y, 200, 250)
    Xte, Yte = _split(X, Y, 250, 300)
    model = BBNN(n_hidden1=16, n_hidden2=16, learning_rate=0.1, batch_size=8,
                 negatives=negatives, max_triplets=20_000, eval_every=5_000, patience=3,
                 random_state=0, n_threads=1)
    model.fit(Xtr, Ytr, validation=(Xva, Yva))
    assert model.history_ and "valid_avgp" in model.history_[0]
    tq = TrainingQueries(Yte, idf_weights=model.idf_)
    Z = model.transform(Xte)
    assert Z.shape == (50, 8) and Z.dtype == np.float32
    avgp = mean_average_precision(Z, tq.vectors, tq.relevance)
    chance = mean_average_precision(np.zeros_like(Z) + np.random.default_rng(0).random(Z.shape),
                                    tq.vectors, tq.relevance)
    assert avgp > 0.6 and avgp > chance + 0.3, (avgp, chance)


def test_save_load_round_trip_gives_identical_scores(tmp_path):
    X, Y = synthetic(n=80)
    model = BBNN(n_hidden1=6, n_hidden2=5, batch_size=4, max_triplets=400, eval_every=200,
                 random_state=3, n_threads=1).fit(X, Y)
    model.save(tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert isinstance(loaded, BBNN) and loaded.get_params() == model.get_params()
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))
    Q = TrainingQueries(Y).vectors
    np.testing.assert_array_equal(query_scores(loaded.transform(X), Q),
                                  query_scores(model.transform(X), Q))


def test_block_inputs_are_checked():
    with pytest.raises(TypeError, match="block descriptors"):
        as_blocks(sp.eye(3, format="csr"))
    with pytest.raises(ValueError, match="offsets"):
        as_blocks((np.zeros((4, 3), np.float32), np.array([0, 2, 5])))
    cube = np.ones((2, 3, 4), np.float32)
    assert len(as_blocks(cube)) == 2


def test_single_word_model_trains_on_single_word_queries(monkeypatch):
    import pamir.models.bbnn as bbnn
    X, Y = synthetic(n=80)
    seen = []
    real = bbnn.TrainingQueries

    def spy(*args, **kwargs):
        q = real(*args, **kwargs)
        seen.append(int(np.asarray(q.queries.presence().sum(axis=1)).max()))
        return q
    monkeypatch.setattr(bbnn, "TrainingQueries", spy)
    BBNN(n_hidden1=6, n_hidden2=5, batch_size=4, max_triplets=400, eval_every=200,
         max_query_words=1, n_threads=1).fit(X, Y, validation=(X, Y))
    assert seen == [1, 1]  # training and validation queries: one word each
    with pytest.raises(ValueError, match="max_query_words=0"):
        BBNN(max_query_words=0).fit(X, Y)


def test_count_blocks_are_read_as_their_logs():
    """pamir fit extracts counts, the benchmark log(1 + count) blocks: BBNN reads both alike."""
    from pamir.features import BlockSet

    counts = np.array([[0, 3], [8, 1], [2, 2]], np.float32)
    offsets = np.array([0, 2, 3])
    ok = np.ones(2, bool)
    raw = as_blocks(BlockSet(counts, offsets, ok))
    logged = as_blocks(BlockSet(np.log1p(counts), offsets, ok, log_counts=True))
    assert np.allclose(raw.descriptors, logged.descriptors)
