"""Linear PAMIR: the PA-I step by hand and against numpy, ranking a toy problem, early stopping,
the text-eps margin, saving."""

import numpy as np
import pytest
import scipy.sparse as sp

from pamir.evaluation import mean_average_precision
from pamir.models import load_model
from pamir.models.base import TrainingQueries
from pamir.models.pamir import PAMIR, pa_updates
from pamir.text.vectors import text_vectors


def toy(n, seed, T=6, V=120, noise=2, most_words=2):
    """Each word owns 20 visterms; a picture shows 4 of each of its words' visterms + noise."""
    rng = np.random.default_rng(seed)
    X, Y = np.zeros((n, V)), np.zeros((n, T))
    for i in range(n):
        words = rng.choice(T, size=rng.integers(1, most_words + 1), replace=False)
        Y[i, words] = 1
        for w in words:
            X[i, rng.choice(np.arange(w * 20, (w + 1) * 20), 4)] += 1
        X[i, rng.integers(0, V, noise)] += 1
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return sp.csr_matrix(X), sp.csr_matrix(Y)


@pytest.fixture(scope="module")
def data():
    """Captions of 1-2 words: multi-word queries are only partly separable by a linear map."""
    return toy(300, 0), toy(80, 1), toy(80, 2)


@pytest.fixture(scope="module")
def one_word():
    """One word per picture: a linear map can rank every query perfectly."""
    return toy(300, 0, most_words=1), toy(80, 1, most_words=1), toy(80, 2, most_words=1)


def test_pa_step_by_hand():
    # One word, p+ = e1, p- = e2, q = (1): loss 1, ||q||^2 ||p+ - p-||^2 = 2.
    X, Q = sp.identity(2, format="csr"), sp.csr_matrix([[1.0]])
    W = np.zeros((1, 2))
    losses = pa_updates(W, X, Q, [[0, 0, 1]], c=1.0)
    assert losses[0] == pytest.approx(1.0)
    assert W == pytest.approx(np.array([[0.5, -0.5]]))  # tau = min(1, 1/2)
    assert pa_updates(W, X, Q, [[0, 0, 1]], c=1.0)[0] == 0.0  # margin met: passive
    W = np.zeros((1, 2))
    pa_updates(W, X, Q, [[0, 0, 1]], c=0.1)
    assert W == pytest.approx(np.array([[0.1, -0.1]]))  # tau capped by c


def numpy_pa(W, X, Q, triplets, c, margins):
    """PA-I of TPAMI eq. (10) written densely: v = q (p+ - p-)^T, tau = min(c, loss/||v||^2)."""
    X, Q = X.toarray(), Q.toarray()
    for (q, pos, neg), m in zip(triplets, margins):
        v = np.outer(Q[q], X[pos] - X[neg])
        loss = max(0.0, m - (v * W).sum())
        if loss > 0:
            W += min(c, loss / (v * v).sum()) * v
    return W


def test_numba_update_matches_numpy():
    rng = np.random.default_rng(3)
    X = sp.random(12, 30, density=0.2, random_state=4, format="csr")
    Q = sp.random(5, 7, density=0.4, random_state=5, format="csr")
    Q = Q[np.asarray(Q.sum(axis=1)).ravel() > 0]
    triplets = np.c_[rng.integers(0, Q.shape[0], 200), rng.integers(0, 12, (200, 2))]
    triplets = triplets[triplets[:, 1] != triplets[:, 2]]
    margins = rng.uniform(0.5, 1.5, len(triplets))
    W0 = rng.normal(size=(7, 30)) * 0.1
    W = W0.copy()
    pa_updates(W, X, Q, triplets, c=0.3, margins=margins)
    assert np.allclose(W, numpy_pa(W0.copy(), X, Q, triplets, 0.3, margins), atol=1e-10)


def test_ranks_a_toy_problem(one_word):
    (X, Y), (Xv, Yv), (Xt, Yt) = one_word
    model = PAMIR(n_updates=30_000, eval_every=3_000, patience=None).fit(X, Y, validation=(Xv, Yv))
    test = TrainingQueries(Yt, model.idf_)
    assert mean_average_precision(model.transform(Xt), test.vectors, test.relevance) > 0.95
    assert model.transform(Xt).dtype == np.float32 and model.W_.shape == (6, 120)


def test_early_stopping_keeps_the_best_point(data):
    (X, Y), (Xv, Yv), _ = data
    model = PAMIR(n_updates=20_000, eval_every=1_000, patience=None, average=False)
    model.fit(X, Y, validation=(Xv, Yv))
    scores = [h[1] for h in model.history_]
    best = int(np.argmax(scores))
    assert model.best_update_ == model.history_[best][0] < model.n_updates_ == 20_000
    assert model.best_valid_avgp_ == pytest.approx(scores[best], abs=1e-6)
    # the same triplet stream stopped at the best point gives the kept W
    again = PAMIR(n_updates=model.best_update_, average=False).fit(X, Y)
    assert np.array_equal(again.W_, model.W_)
    # ... which ranks validation as recorded, better than where training ended
    q = TrainingQueries(Yv, model.idf_)
    kept = mean_average_precision(model.transform(Xv), q.vectors, q.relevance)
    assert kept == pytest.approx(scores[best], abs=1e-5)
    last = PAMIR(n_updates=20_000, average=False).fit(X, Y)
    assert kept >= mean_average_precision(last.transform(Xv), q.vectors, q.relevance)


def test_patience_stops_training(data):
    (X, Y), (Xv, Yv), _ = data
    model = PAMIR(n_updates=200_000, eval_every=1_000, patience=2).fit(X, Y, validation=(Xv, Yv))
    assert model.n_updates_ < 200_000
    assert model.n_updates_ == model.history_[-1][0]
    assert len(model.history_) - 1 - int(np.argmax([h[1] for h in model.history_])) == 2


def test_text_margin():
    # Captions: p0 {0, 1}, p1 {1}, p2 {1}, p3 {} -- query {1} is relevant to every captioned
    # picture but not p3; pictures are the unit vectors, so W = tau q (p+ - p-)^T tells which
    # triplet was drawn, and a very aggressive update (c large) lands exactly on the margin.
    Y = sp.csr_matrix(np.array([[1, 1], [0, 1], [0, 1], [0, 0]], float))
    X = sp.identity(4, format="csr")
    idf = TrainingQueries(Y).idf
    C = text_vectors(Y, idf).toarray()
    for seed in range(6):
        model = PAMIR(n_updates=1, c=100.0, margin="text", epsilon=0.01, average=False,
                      random_state=seed).fit(X, Y)
        W = model.W_.astype(np.float64)
        words = np.flatnonzero(np.abs(W).sum(axis=1))
        pos, neg = np.flatnonzero(W.sum(axis=0) > 0)[0], np.flatnonzero(W.sum(axis=0) < 0)[0]
        q = np.zeros(2)
        q[words] = idf[words]
        q /= np.linalg.norm(q)
        expected = max(0.01, q @ C[pos] - q @ C[neg])
        assert q @ W @ (X[pos] - X[neg]).toarray().ravel() == pytest.approx(expected, rel=1e-5)
    constant = PAMIR(n_updates=1, c=100.0, average=False).fit(X, Y)
    W = constant.W_.astype(np.float64)
    assert np.abs(W).sum() > 0


def test_text_margin_ranks_the_toy_problem(one_word):
    (X, Y), (Xv, Yv), (Xt, Yt) = one_word
    model = PAMIR(n_updates=20_000, eval_every=2_000, margin="text", epsilon=0.1)
    model.fit(X, Y, validation=(Xv, Yv))
    test = TrainingQueries(Yt, model.idf_)
    assert mean_average_precision(model.transform(Xt), test.vectors, test.relevance) > 0.9


def test_averaging_is_the_mean_of_the_iterates(data):
    (X, Y), _, _ = data
    last = [PAMIR(n_updates=n, average=False).fit(X, Y).W_.astype(np.float64)
            for n in range(1, 6)]
    averaged = PAMIR(n_updates=5, average=True).fit(X, Y).W_
    assert np.allclose(averaged, np.mean(last, axis=0), atol=1e-6)


def test_save_load_round_trip(tmp_path, data):
    (X, Y), (Xv, Yv), (Xt, _) = data
    model = PAMIR(n_updates=5_000, eval_every=1_000, c=0.5, margin="text", epsilon=0.2)
    model.fit(X, Y, validation=(Xv, Yv))
    model.save(tmp_path / "m")
    again = load_model(tmp_path / "m")
    assert isinstance(again, PAMIR) and again.get_params() == model.get_params()
    assert np.array_equal(again.transform(Xt), model.transform(Xt))
    assert again.best_update_ == model.best_update_ and again.history_ == model.history_


def test_reproducible_from_the_seed(data):
    (X, Y), _, _ = data
    a, b = (PAMIR(n_updates=3_000, random_state=7).fit(X, Y) for _ in range(2))
    c = PAMIR(n_updates=3_000, random_state=8).fit(X, Y)
    assert np.array_equal(a.W_, b.W_) and not np.array_equal(a.W_, c.W_)


def test_bad_input_says_what_is_wrong(data):
    (X, Y), _, _ = data
    with pytest.raises(ValueError, match="aggressiveness"):
        PAMIR(c=0).fit(X, Y)
    with pytest.raises(ValueError, match="margin"):
        PAMIR(margin="big").fit(X, Y)
    with pytest.raises(ValueError, match="pictures but Y has"):
        PAMIR().fit(X[:10], Y)
    with pytest.raises(ValueError, match="nothing to rank"):
        PAMIR(n_updates=10).fit(X[:3], sp.csr_matrix(np.ones((3, 2))))
    model = PAMIR(n_updates=100).fit(X, Y)
    with pytest.raises(ValueError, match="visterms"):
        model.transform(X[:, :50])
    with pytest.raises(RuntimeError, match="not fitted"):
        PAMIR().transform(X)


def test_dense_pictures_train_as_their_sparse_copy():
    """CNN features come dense and take the SIMD path; it must draw the same triplets and
    make the same updates as the sparse path does on the same numbers."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 16)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    Y = sp.csr_matrix((rng.random((60, 5)) < 0.3).astype(float))
    dense = PAMIR(n_updates=2_000, patience=None, margin="text").fit(X, Y)
    sparse = PAMIR(n_updates=2_000, patience=None, margin="text").fit(sp.csr_matrix(X), Y)
    assert np.abs(dense.W_).max() > 0
    assert np.allclose(dense.W_, sparse.W_, atol=1e-5)
    assert np.allclose(dense.transform(X), sparse.transform(sp.csr_matrix(X)), atol=1e-5)
    with pytest.raises(ValueError, match="NaN"):
        PAMIR().fit(np.full((3, 2), np.nan), sp.eye(3, format="csr"))


def test_a_dense_block_beside_sparse_bags_trains_as_all_sparse(monkeypatch):
    """[CNN vector, visterm bag] rows are split into a dense block and a sparse rest; the
    updates must be those of walking every entry through the sparse indices."""
    import pamir.models.pamir_core as core

    rng = np.random.default_rng(4)
    dense = rng.normal(size=(60, 20)).astype(np.float32)
    dense[0, 3] = dense[5, 0] = 0  # exact zeros, which CSR does not store
    bags = sp.random(60, 30, density=0.1, random_state=4, format="csr", dtype=np.float32)
    X = sp.hstack([sp.csr_matrix(dense), bags]).tocsr()
    Y = sp.csr_matrix((rng.random((60, 5)) < 0.3).astype(float))
    block, Xp, Xi, Xd = core._dense_and_sparse(X)
    assert block.shape == (60, 20) and Xi.min() >= 20
    np.testing.assert_array_equal(block, dense)
    split = PAMIR(n_updates=2_000, patience=None).fit(X, Y)
    monkeypatch.setattr(core, "MIN_DENSE_BLOCK", 10**9)  # no block: all through the indices
    walked = PAMIR(n_updates=2_000, patience=None).fit(X, Y)
    assert np.allclose(split.W_, walked.W_, atol=1e-5)


def dense_and_bags(n, seed):
    """[dense block, sparse bag] rows, as a CNN view beside visterms, with 4 words."""
    rng = np.random.default_rng(seed)
    dense = rng.normal(size=(n, 24)).astype(np.float32)
    bags = sp.random(n, 200, density=0.05, random_state=seed, format="csr", dtype=np.float32)
    X = sp.hstack([sp.csr_matrix(dense), bags]).tocsr()
    return X, sp.csr_matrix((rng.random((n, 4)) < 0.35).astype(float))


@pytest.mark.parametrize("average, margin", [(True, "constant"), (False, "text")])
@pytest.mark.parametrize("form", ["bags", "dense", "block and bags"])
def test_the_dual_form_makes_the_primal_model(data, average, margin, form):
    """The dual form draws the same triplets and makes the same updates, held as alpha over
    the training pictures: the same early stopping and the same W up to float rounding."""
    if form == "bags":
        (X, Y), (Xv, Yv), _ = data
    elif form == "dense":
        (X, Y), (Xv, Yv) = ((np.asarray(M.toarray(), np.float32), Y) for M, Y in data[:2])
    else:
        (X, Y), (Xv, Yv) = dense_and_bags(50, 1), dense_and_bags(30, 2)
    kw = dict(n_updates=6_000, eval_every=500, average=average, margin=margin, c=0.5)
    primal = PAMIR(dual=False, **kw).fit(X, Y, validation=(Xv, Yv))
    dual = PAMIR(dual=True, **kw).fit(X, Y, validation=(Xv, Yv))
    assert (primal.dual_, dual.dual_) == (False, True)
    assert np.abs(primal.W_).max() > 0.1
    np.testing.assert_allclose(dual.W_, primal.W_, atol=1e-5)
    assert dual.best_update_ == primal.best_update_
    # validation AvgP at each checkpoint; the active share may differ by a triplet whose
    # loss is 0 but for rounding (one an uncapped step has just fixed)
    d, p = np.array(dual.history_, float), np.array(primal.history_, float)
    np.testing.assert_allclose(d[:, :2], p[:, :2], atol=1e-5)
    np.testing.assert_allclose(d[:, 2], p[:, 2], atol=0.01)


def test_the_dual_form_warm_starts_as_the_primal(data):
    """From coef_init W0: W = W0 + alpha X, its running average included."""
    (X, Y), (Xv, Yv), _ = data
    W0 = PAMIR(n_updates=2_000, dual=False).fit(X, Y).W_
    kw = dict(n_updates=3_000, eval_every=500, random_state=4)
    primal = PAMIR(dual=False, **kw).fit(X, Y, validation=(Xv, Yv), coef_init=W0)
    dual = PAMIR(dual=True, **kw).fit(X, Y, validation=(Xv, Yv), coef_init=W0)
    np.testing.assert_allclose(dual.W_, primal.W_, atol=1e-5)
    assert dual.best_update_ == primal.best_update_


def test_dual_auto_takes_the_dual_form_for_few_pictures_of_many_dimensions(monkeypatch, data):
    import pamir.models.pamir as pamir_module

    (X, Y), _, _ = data  # 300 pictures of 120 visterms: primal
    assert not PAMIR(n_updates=100).fit(X, Y).dual_
    assert PAMIR(n_updates=100).fit(X[:50], Y[:50]).dual_  # 2 x 50 <= 120
    monkeypatch.setattr(pamir_module, "DUAL_MAX_PICTURES", 49)
    assert not PAMIR(n_updates=100).fit(X[:50], Y[:50]).dual_
    with pytest.raises(ValueError, match="dual must be"):
        PAMIR(dual="yes").fit(X, Y)


def test_inner_products_of_blocks_of_different_widths():
    """Training and validation pictures each find their own dense block; X X_valid^T must
    not depend on where each block ends."""
    from pamir.models.pamir import Pictures

    X, _ = dense_and_bags(40, 5)
    Xv, _ = dense_and_bags(12, 6)
    Xv = Xv.tolil()
    Xv[:8, 20:24] = 0  # columns 20-23 are stored in too few validation rows: no longer block
    Xv = Xv.tocsr()
    Xv.eliminate_zeros()
    train, valid = Pictures(X), Pictures(Xv, "valid")
    assert train.columns()[0].shape[1] == 24 and valid.columns()[0].shape[1] == 20
    np.testing.assert_allclose(train.cross(valid), (X @ Xv.T).toarray(), atol=1e-5)
    G, diagonal = train.gram()
    np.testing.assert_allclose(G, (X @ X.T).toarray(), atol=1e-5)
    assert train.gram()[0] is G and np.allclose(diagonal, np.diagonal(G))
