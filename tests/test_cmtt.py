import numpy as np
import pytest
import scipy.sparse as sp

from pamir.models import load_model
from pamir.models.cmtt import CMTT


def paired_data(n=60, seed=0):
    """Word k comes with visterms 2k and 2k+1 (plus noise visterms 6..9)."""
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 3, n)
    X = rng.poisson(0.3, (n, 10)).astype(float)
    X[np.arange(n), 2 * words] += 3
    X[np.arange(n), 2 * words + 1] += 2
    Y = np.zeros((n, 3))
    Y[np.arange(n), words] = 1
    return sp.csr_matrix(X), sp.csr_matrix(Y), words


@pytest.mark.parametrize("normalise", ["terms", "visterms"])
def test_table_and_word_distributions_sum_to_one(normalise):
    X, Y, _ = paired_data()
    m = CMTT(n_components=3, normalise=normalise).fit(X, Y)
    table = m.translation_table
    assert table.shape == (10, 3) and (table >= 0).all()
    axis = 1 if normalise == "terms" else 0  # P(t|v) rows, or sim(t, .) over the visterms
    assert np.allclose(table.sum(axis=axis), 1)
    Z = m.transform(X)
    assert Z.dtype == np.float32 and np.allclose(Z.sum(1), 1, atol=1e-5)


def test_translation_finds_the_paired_words():
    X, Y, words = paired_data()
    m = CMTT(n_components=3).fit(X, Y)
    best = m.translation_table[:6].argmax(axis=1)
    assert best.tolist() == [0, 0, 1, 1, 2, 2]
    assert (m.transform(X).argmax(1) == words).mean() > 0.9


def test_empty_picture_gets_the_word_prior():
    X, Y, _ = paired_data()
    m = CMTT(n_components=3).fit(X, Y)
    prior = np.asarray(Y.sum(0)).ravel() / Y.sum()
    assert np.allclose(m.transform(sp.csr_matrix((1, 10))), prior[None], atol=1e-6)


def test_save_load_round_trip(tmp_path):
    X, Y, _ = paired_data()
    m = CMTT(n_components=2, normalise="visterms", l2_pictures=False).fit(X, Y)
    m.save(tmp_path / "cmtt")
    back = load_model(tmp_path / "cmtt")
    assert isinstance(back, CMTT) and back.get_params() == m.get_params()
    assert np.array_equal(back.transform(X), m.transform(X))


def test_bad_input_is_named():
    X, Y, _ = paired_data()
    with pytest.raises(ValueError, match="n_components"):  # parameters are checked in fit
        CMTT(n_components=0).fit(X, Y)
    with pytest.raises(ValueError, match="normalise"):
        CMTT(normalise="rows").fit(X, Y)
    with pytest.raises(ValueError, match="visterms"):
        CMTT(n_components=2).fit(X, Y).transform(sp.csr_matrix((1, 4)))
    with pytest.raises(RuntimeError, match="fit"):
        CMTT().transform(X)
