"""PLSA: EM never lowers the likelihood, fold-in, a small topic problem, save/load."""

import numpy as np
import pytest
import scipy.sparse as sp

from pamir.evaluation import mean_average_precision
from pamir.models import load_model
from pamir.models.base import TrainingQueries
from pamir.models.plsa import PLSA


def topic_pictures(n, n_topics=4, words_per_topic=3, visterms_per_topic=20, blocks=30, seed=0):
    """Pictures drawn from a few topics: each topic owns some words and some visterms
    (plus 20% shared visual noise). Returns visterm counts X (n x V) and captions Y (n x T)."""
    rng = np.random.default_rng(seed)
    V, T = n_topics * visterms_per_topic + 10, n_topics * words_per_topic
    topics = rng.integers(n_topics, size=n)
    X = np.zeros((n, V))
    Y = np.zeros((n, T))
    for i, z in enumerate(topics):
        own = z * visterms_per_topic + rng.integers(visterms_per_topic, size=blocks)
        noise = rng.integers(V, size=blocks // 5)
        np.add.at(X[i], np.concatenate([own[: blocks - len(noise)], noise]), 1)
        words = z * words_per_topic + rng.choice(words_per_topic, size=2, replace=False)
        Y[i, words] = 1
    return sp.csr_matrix(X), sp.csr_matrix(Y)


def test_em_never_lowers_the_likelihood():
    X, Y = topic_pictures(60, seed=1)
    model = PLSA(n_aspects=6, n_iter_text=40, n_iter_visual=40, n_iter_fold=40,
                 tol=0).fit(X, Y)
    for step in ("text", "visual"):
        ll = np.array(model.loglik_[step])
        assert len(ll) == 41
        assert np.all(np.diff(ll) >= -1e-9 * np.abs(ll[:-1])), step
        assert ll[-1] > ll[0]
    _, fold = model.fold_in(X)
    assert np.all(np.diff(fold) >= -1e-9 * np.abs(np.array(fold[:-1])))


def test_fold_in_gives_distributions_and_recovers_the_topic():
    X, Y = topic_pictures(120, seed=2)
    model = PLSA(n_aspects=4, random_state=0).fit(X, Y)
    theta, _ = model.fold_in(X[:10])
    assert theta.shape == (10, 4)
    np.testing.assert_allclose(theta.sum(axis=1), 1, atol=1e-9)
    Z = model.transform(X)
    np.testing.assert_allclose(Z.sum(axis=1), 1, atol=1e-5)  # P(t|p) over the vocabulary
    # The most probable word belongs to the picture's topic for nearly every picture.
    topic_of_word = np.arange(Y.shape[1]) // 3
    truth = topic_of_word[Y.toarray().argmax(axis=1)]
    assert (topic_of_word[Z.argmax(axis=1)] == truth).mean() > 0.9


def test_learns_a_small_retrieval_problem():
    X, Y = topic_pictures(200, seed=3)
    Xt, Yt = topic_pictures(80, seed=4)
    model = PLSA(n_aspects=8).fit(X, Y)
    train_q = TrainingQueries(Y)
    test_q = TrainingQueries(Yt, idf_weights=train_q.idf)
    assert mean_average_precision(model.transform(Xt), test_q.vectors, test_q.relevance) > 0.5


def test_unknown_visterms_and_empty_pictures_are_harmless():
    X, Y = topic_pictures(50, seed=5)
    X = sp.hstack([X, sp.csr_matrix((50, 3))]).tocsr()  # 3 visterms never seen in training
    model = PLSA(n_aspects=3).fit(X, Y)
    new = sp.csr_matrix(np.r_[np.zeros((1, X.shape[1])), np.eye(X.shape[1])[-1:]])
    Z = model.transform(new)
    assert np.isfinite(Z).all()
    np.testing.assert_allclose(Z[0], Z[1])  # both uniform mixtures


def test_save_load_round_trip(tmp_path):
    X, Y = topic_pictures(60, seed=6)
    model = PLSA(n_aspects=5, n_iter_fold=20).fit(X, Y)
    model.save(tmp_path / "plsa")
    again = load_model(tmp_path / "plsa")
    assert isinstance(again, PLSA) and again.get_params() == model.get_params()
    np.testing.assert_array_equal(again.transform(X), model.transform(X))
    assert again.loglik_ == model.loglik_


def test_bad_input_is_named():
    X, Y = topic_pictures(20)
    with pytest.raises(ValueError, match="non-negative"):
        PLSA(n_aspects=2).fit(-X, Y)
    with pytest.raises(ValueError, match="pictures"):
        PLSA(n_aspects=2).fit(X[:10], Y)
    model = PLSA(n_aspects=2).fit(X, Y)
    with pytest.raises(ValueError, match="codebook"):
        model.transform(X[:, :5])
    with pytest.raises(RuntimeError, match="not fitted"):
        PLSA().transform(X)


def test_log_output_is_the_log_of_p_t_given_p():
    X, Y = topic_pictures(60, seed=7)
    model = PLSA(n_aspects=4).fit(X, Y)
    P = model.transform(X)
    model.output = "log"
    np.testing.assert_allclose(model.transform(X), np.log(np.maximum(P, 1e-12)), atol=1e-4)
    model.output = "odds"
    with pytest.raises(ValueError, match="output"):
        model.transform(X)
