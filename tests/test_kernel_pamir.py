import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import integrate, stats

from pamir.evaluation import mean_average_precision
from pamir.models import load_model
from pamir.models.base import TrainingQueries
from pamir.features.ragged import Ragged
from pamir.models.kernel_pamir import (ExpectedLikelihoodKernel, KernelPAMIR,
                                       LinearKernel, MatchKernel, match_grams, pa_updates,
                                       sample_triplets)


# ---------------------------------------------------------------------------- a toy world
def toy_world(n=120, T=5, d=6, seed=0):
    """Pictures whose blocks come from their caption words' prototypes plus background.

    Returns block lists, bags of visterms (block -> nearest prototype, L2 counts) and Y.
    """
    rng = np.random.default_rng(seed)
    protos = rng.normal(0, 3, size=(T + 2, d))  # T word prototypes + 2 background ones
    blocks, rows = [], []
    for _ in range(n):
        words = rng.choice(T, size=rng.integers(1, 3), replace=False)
        src = np.concatenate([rng.choice(words, size=6), rng.choice([T, T + 1], size=4)])
        blocks.append((protos[src] + rng.normal(0, 0.7, size=(len(src), d))).astype(np.float32))
        rows.append(words)
    Y = sp.lil_matrix((n, T))
    for i, words in enumerate(rows):
        Y[i, words] = 1
    bags = sp.lil_matrix((n, T + 2))
    for i, b in enumerate(blocks):
        nearest = ((b[:, None, :] - protos[None]) ** 2).sum(-1).argmin(1)
        for v in nearest:
            bags[i, v] += 1
    bags = sp.csr_matrix(bags)
    norms = np.sqrt(np.asarray(bags.multiply(bags).sum(1)).ravel())
    bags = sp.csr_matrix(sp.diags(1 / norms) @ bags)
    return blocks, bags, sp.csr_matrix(Y)


@pytest.fixture(scope="module")
def world():
    blocks, bags, Y = toy_world()
    tr, va, te = np.arange(70), np.arange(70, 95), np.arange(95, 120)
    return blocks, bags, Y, tr, va, te


def split_inputs(kernel, blocks, bags, idx):
    return bags[idx] if kernel == "linear" else [blocks[i] for i in idx]


def avgp_of(model, X, Y, train_Y):
    q = TrainingQueries(Y, idf_weights=TrainingQueries(train_Y).idf)
    return mean_average_precision(model.transform(X), q.vectors, q.relevance)


# ---------------------------------------------------------------------- the kernels by hand
def test_elk_matches_numerical_integration_in_1d():
    a = [np.array([[0.0], [1.0], [2.0]], np.float32)]
    b = [np.array([[3.0], [5.0]], np.float32)]
    ridge = 0.5
    for cov in ("diag", "full"):
        k = ExpectedLikelihoodKernel(covariance=cov, ridge=ridge, normalize=False,
                                     block_scaling="none")
        value = k(a, b)[0, 0]
        (m1, v1), (m2, v2) = (1.0, 2 / 3 + ridge), (4.0, 1.0 + ridge)  # ML variances + ridge
        numeric, _ = integrate.quad(lambda x: stats.norm.pdf(x, m1, math.sqrt(v1))
                                    * stats.norm.pdf(x, m2, math.sqrt(v2)), -30, 30)
        assert value == pytest.approx(numeric, rel=1e-7)
        # normalised: k(a, b) / sqrt(k(a, a) k(b, b)), and 1 on the diagonal
        kn = ExpectedLikelihoodKernel(covariance=cov, ridge=ridge, block_scaling="none")
        raw = k(a + b, a + b)
        assert kn(a, b)[0, 0] == pytest.approx(numeric / math.sqrt(raw[0, 0] * raw[1, 1]))
        assert np.allclose(np.diag(kn(a + b, a + b)), 1.0)


def test_elk_full_covariance_closed_form_in_2d():
    rng = np.random.default_rng(1)
    sets = [rng.normal(size=(8, 2)).astype(np.float32) @ [[1, 0.8], [0, 1]] for _ in range(3)]
    k = ExpectedLikelihoodKernel(covariance="full", ridge=0.1, normalize=False,
                                 block_scaling="none")
    G = k(sets, sets)
    for i in range(3):
        for j in range(3):
            mi, mj = sets[i].mean(0), sets[j].mean(0)
            Si = np.cov(sets[i].T, bias=True) + 0.1 * np.eye(2)
            Sj = np.cov(sets[j].T, bias=True) + 0.1 * np.eye(2)
            expected = stats.multivariate_normal.pdf(mi, mj, Si + Sj)
            assert G[i, j] == pytest.approx(expected, rel=1e-5)


def test_match_kernel_hand_case():
    A = [np.array([[0.0], [1.0]]), np.array([[0.0], [3.0]])]
    K = MatchKernel(sigma=1.0, block_scaling="none")(A, A)
    # A0 -> A1: block 0 matches 0 (1), block 1 matches 0 (e^-1/2); A1 -> A0: 0 (1), 3 -> 1 (e^-2)
    expected = 0.5 * ((1 + math.exp(-0.5)) / 2 + (1 + math.exp(-2)) / 2)
    assert K[0, 1] == pytest.approx(expected)
    assert K[1, 0] == pytest.approx(expected)
    assert np.allclose(np.diag(K), 1.0)


def brute_match(A, B, sigma):
    def khat(P, Q):
        d2 = ((P[:, None, :] - Q[None, :, :]) ** 2).sum(-1)
        return np.exp(-d2 / (2 * sigma ** 2)).max(1).mean()
    return np.array([[0.5 * (khat(a, b) + khat(b, a)) for b in B] for a in A])


def test_match_grams_chunks_padding_and_several_sigmas():
    rng = np.random.default_rng(2)
    A = [rng.random((int(rng.integers(1, 6)), 4)).astype(np.float32) for _ in range(7)]
    B = [rng.random((int(rng.integers(1, 6)), 4)).astype(np.float32) for _ in range(5)]
    k = MatchKernel(block_scaling="none")
    SA, SB = k.prepare(A), k.prepare(B)
    for sym in (False, True):
        other = SA if sym else SB
        grams = match_grams(SA, other, [0.3, 1.0], chunk_a=2, chunk_b=3)
        for sigma, G in zip([0.3, 1.0], grams):
            assert np.allclose(G, brute_match(A, A if sym else B, sigma), atol=1e-5)


def test_empty_picture_scores_zero_and_bad_input_is_named():
    A = [np.ones((3, 2), np.float32), np.zeros((0, 2), np.float32)]
    assert np.allclose(MatchKernel(block_scaling="none")(A, A), [[1, 0], [0, 0]])
    assert np.allclose(ExpectedLikelihoodKernel(block_scaling="none")(A, A), [[1, 0], [0, 0]])
    with pytest.raises(ValueError, match="picture 1"):
        MatchKernel()([np.ones((3, 2)), np.ones(3)], [np.ones((3, 2))])
    with pytest.raises(ValueError, match="ridge"):
        ExpectedLikelihoodKernel(ridge=0)
    with pytest.raises(ValueError, match="kernel='rbf'"):  # checked in fit, as every model
        KernelPAMIR(kernel="rbf").fit(sp.eye(3, format="csr"), sp.eye(3, format="csr"))
    with pytest.raises(ValueError, match="caption rows"):
        KernelPAMIR().fit(sp.eye(4, 3, format="csr"), sp.eye(3, format="csr"))


def test_triplets_are_relevant_then_non_relevant(world):
    _, _, Y, tr, _, _ = world
    q = TrainingQueries(Y[tr])
    trip = sample_triplets(q, 2000, np.random.default_rng(0))
    R = q.relevance.toarray()
    assert np.all(R[trip[:, 0], trip[:, 1]] == 1)
    assert np.all(R[trip[:, 0], trip[:, 2]] == 0)


# ------------------------------------------------------------------ the PA step, two forms
def linear_pa(X, Q, triplets, c):
    """Plain linear PAMIR (W is T x V), the reference for the kernel form."""
    X, Q = X.toarray(), Q.toarray()
    W = np.zeros((Q.shape[1], X.shape[1]))
    for qi, pos, neg in triplets:
        q, v = Q[qi], X[pos] - X[neg]
        loss = 1 - q @ W @ v
        if loss > 0 and v @ v > 0:
            tau = min(c, loss / ((q @ q) * (v @ v)))
            W += tau * np.outer(q, v)
    return W


def test_linear_kernel_equals_linear_pamir_on_the_same_triplets(world):
    _, bags, Y, tr, _, te = world
    q = TrainingQueries(Y[tr])
    triplets = sample_triplets(q, 1500, np.random.default_rng(3))
    for c in (0.05, 10.0):
        W = linear_pa(bags[tr], q.vectors, triplets, c)
        lin = LinearKernel()
        alpha = np.zeros((Y.shape[1], len(tr)))
        pa_updates(alpha, lin(bags[tr], bags[tr]), q.vectors, triplets, c)
        Z_kernel = lin(bags[te], bags[tr]) @ alpha.T
        Z_linear = bags[te] @ W.T
        assert np.allclose(Z_kernel, Z_linear, atol=1e-9)
        assert np.allclose(alpha @ bags[tr].toarray(), W, atol=1e-9)  # W = sum_j alpha_j p_j
        Qt = TrainingQueries(Y[te]).vectors
        assert np.array_equal(np.argsort(-(Qt @ Z_kernel.T), 1, kind="stable"),
                              np.argsort(-(Qt @ Z_linear.T), 1, kind="stable"))


def test_linear_kernel_agrees_with_the_project_linear_pamir(world):
    linear = pytest.importorskip("pamir.models.pamir")
    _, bags, Y, tr, _, te = world
    q = TrainingQueries(Y[tr])
    triplets = sample_triplets(q, 1500, np.random.default_rng(4))
    W = np.zeros((Y.shape[1], bags.shape[1]))
    linear.pa_updates(W, bags[tr], q.vectors, triplets, 0.1)
    lin = LinearKernel()
    alpha = np.zeros((Y.shape[1], len(tr)))
    pa_updates(alpha, lin(bags[tr], bags[tr]), q.vectors, triplets, 0.1)
    # agreement to rounding (its core sums in another order), and the same test rankings
    Z_kernel, Z_linear = lin(bags[te], bags[tr]) @ alpha.T, bags[te] @ W.T
    assert np.allclose(Z_kernel, Z_linear, atol=1e-6)
    Qt = TrainingQueries(Y[te]).vectors
    assert np.array_equal(np.argsort(-(Qt @ Z_kernel.T), 1), np.argsort(-(Qt @ Z_linear.T), 1))


def test_pa_step_hand_case():
    # One word, pictures e1 and e2 (linear kernel: K = I), q = (1): loss 1, ||v||^2 = 2.
    K, Q = np.eye(2), sp.csr_matrix([[1.0]])
    alpha = np.zeros((1, 2))
    assert pa_updates(alpha, K, Q, np.array([[0, 0, 1]]), c=10.0) == (1, 1.0)
    assert np.allclose(alpha, [[0.5, -0.5]])  # tau = 1/2: the margin is now exactly 1
    assert pa_updates(alpha, K, Q, np.array([[0, 0, 1]]), c=10.0) == (0, 0.0)  # passive
    alpha[:] = 0
    pa_updates(alpha, K, Q, np.array([[0, 0, 1]]), c=0.1)
    assert np.allclose(alpha, [[0.1, -0.1]])  # clipped at c


# ----------------------------------------------------------------------- learning, saving
@pytest.mark.parametrize("kernel", ["linear", "elk", "match"])
def test_learns_the_toy_problem_and_round_trips(world, kernel, tmp_path):
    blocks, bags, Y, tr, va, te = world
    X = lambda idx: split_inputs(kernel, blocks, bags, idx)  # noqa: E731
    model = KernelPAMIR(kernel=kernel, c=1.0, n_updates=3000, eval_every=500, patience=3,
                        sigma=2.0, ridge=4.0, block_scaling="none", random_state=0)
    model.fit(X(tr), Y[tr], validation=(X(va), Y[va]))
    assert model.input == ("vectors" if kernel == "linear" else "blocks")
    # random scores: 0.28; the block kernels see noisy blocks, the visterms the prototypes
    assert avgp_of(model, X(te), Y[te], Y[tr]) > (0.8 if kernel == "linear" else 0.65)
    # early stopping kept the best validation point
    best = max(row[1] for row in model.history_)  # [updates, valid AvgP, ...] (pamir.models.pa)
    assert model.best_valid_avgp_ == pytest.approx(best, abs=1e-6)  # history rounds to 1e-6
    assert avgp_of(model, X(va), Y[va], Y[tr]) == pytest.approx(best)
    assert model.best_update_ <= model.n_updates_
    Z = model.transform(X(te))
    model.save(tmp_path / "m")
    again = load_model(tmp_path / "m")
    assert isinstance(again, KernelPAMIR) and again.get_params() == model.get_params()
    assert np.array_equal(again.transform(X(te)), Z)
    assert Z.dtype == np.float32 and Z.shape == (len(te), Y.shape[1])


def test_support_set_is_the_pictures_with_a_coefficient(world):
    _, bags, Y, tr, _, _ = world
    model = KernelPAMIR(c=0.1, n_updates=20, eval_every=20).fit(bags[tr], Y[tr])
    assert 0 < len(model.support_) <= 40  # two pictures per step at most
    assert np.all(np.any(model.alpha_ != 0, axis=0))
    assert model.best_valid_avgp_ is None and model.n_updates_ == 20
    assert isinstance(model.support_rep_, sp.csr_matrix)


def test_precomputed_gram_gives_the_same_model(world):
    blocks, _, Y, tr, va, te = world
    k = MatchKernel(sigma=2.0, block_scaling="none")
    Xtr, Xva = k.prepare([blocks[i] for i in tr]), k.prepare([blocks[i] for i in va])
    params = dict(kernel="match", sigma=2.0, block_scaling="none", n_updates=1000,
                  eval_every=250)
    a = KernelPAMIR(**params).fit(Xtr, Y[tr], validation=(Xva, Y[va]))
    b = KernelPAMIR(**params).fit(Xtr, Y[tr], validation=(Xva, Y[va]), gram=k.gram(Xtr, Xtr),
                                  gram_valid=k.gram(Xva, Xtr))
    assert np.array_equal(a.alpha_, b.alpha_)
    assert isinstance(Xtr, Ragged)
