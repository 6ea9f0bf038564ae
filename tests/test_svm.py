"""Per-word SVMs: a small problem they learn, C chosen per word, normalisation, fusion, I/O."""

import numpy as np
import pytest
import scipy.sparse as sp

from pamir.evaluation import evaluate_model
from pamir.models import load_model
from pamir.models.base import TrainingQueries
from pamir.models.svm import WordSVM
from pamir.text.vectors import text_vectors


def word_pictures(n, T=6, V=60, seed=0):
    """Each word owns 10 visterms; a picture with the word shows them. L2 tf-idf-like bags."""
    rng = np.random.default_rng(seed)
    Y = (rng.random((n, T)) < 0.3).astype(np.float64)
    Y[Y.sum(axis=1) == 0, rng.integers(T)] = 1
    X = rng.random((n, V)) * (rng.random((n, V)) < 0.1)
    for t in range(T):
        X[:, 10 * t:10 * t + 10] += Y[:, [t]] * rng.random((n, 10)) * (rng.random((n, 10)) < .5)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return sp.csr_matrix(X), sp.csr_matrix(Y)


@pytest.fixture(scope="module")
def fitted():
    X, Y = word_pictures(300, seed=1)
    Xv, Yv = word_pictures(100, seed=2)
    return WordSVM(Cs=(0.1, 1.0, 10.0), n_jobs=2).fit(X, Y, validation=(Xv, Yv)), (X, Y), (Xv, Yv)


def test_learns_the_words(fitted):
    model, (X, Y), _ = fitted
    Xt, Yt = word_pictures(120, seed=3)
    q = TrainingQueries(Yt, idf_weights=TrainingQueries(Y).idf)
    ev = evaluate_model(model, Xt, q.vectors, q.relevance, curve=False)
    assert ev.mean("avgp") > 0.6


def test_scores_are_standardised_on_validation(fitted):
    model, _, (Xv, _) = fitted
    Z = model.transform(Xv)
    np.testing.assert_allclose(Z.mean(axis=0), 0, atol=1e-4)
    np.testing.assert_allclose(Z.std(axis=0), 1, atol=1e-3)


def test_C_is_chosen_per_word_on_validation(fitted):
    model, _, _ = fitted
    assert model.C_.shape == (6,) and set(model.C_) <= {0.1, 1.0, 10.0}
    best = np.array(model.Cs)[np.argmax(model.valid_avgp_, axis=1)]
    np.testing.assert_array_equal(model.C_, best)


def test_unlearnable_word_scores_constant():
    X, Y = word_pictures(80, seed=4)
    Y = sp.hstack([Y, sp.csr_matrix((80, 1))]).tocsr()  # a word no training picture has
    Xv, Yv = word_pictures(40, seed=5)
    Yv = sp.hstack([Yv, sp.csr_matrix((40, 1))]).tocsr()
    model = WordSVM(Cs=(1.0,), n_jobs=1).fit(X, Y, validation=(Xv, Yv))
    Z = model.transform(Xv)
    assert np.all(Z[:, -1] == 0)


def test_fusion_mean_averages_plainly_idf_weights(fitted):
    model, (X, Y), (Xv, _) = fitted
    Q = text_vectors(sp.csr_matrix(np.array([[1, 0, 1, 0, 0, 0]], float)),
                     np.array([1.0, 1, 3, 1, 1, 1]))
    Z = model.transform(Xv)
    np.testing.assert_allclose(model.score_queries(Q, Xv)[0], (Z[:, 0] + Z[:, 2]) / 2,
                               rtol=1e-5, atol=1e-5)
    idf_model = WordSVM(fusion="idf")
    idf_model._set_state(*model._state())
    np.testing.assert_allclose(idf_model.score_queries(Q, Xv)[0], (Q @ Z.T).ravel(),
                               rtol=1e-5, atol=1e-5)


def test_save_load_round_trip(fitted, tmp_path):
    model, _, (Xv, _) = fitted
    model.save(tmp_path / "svm")
    again = load_model(tmp_path / "svm")
    assert isinstance(again, WordSVM) and again.get_params() == model.get_params()
    np.testing.assert_array_equal(again.transform(Xv), model.transform(Xv))
    np.testing.assert_array_equal(again.C_, model.C_)


def test_bad_settings_are_named():
    X, Y = word_pictures(20)
    with pytest.raises(ValueError, match="fusion"):
        WordSVM(fusion="max").fit(X, Y)
    with pytest.raises(ValueError, match="Cs"):
        WordSVM(Cs=(0,)).fit(X, Y)
    with pytest.raises(RuntimeError, match="not fitted"):
        WordSVM().transform(X)
