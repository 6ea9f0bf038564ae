import numpy as np
import pytest
import scipy.sparse as sp

from pamir.evaluation import annotation_metrics, evaluate_model
from pamir.models import load_model
from pamir.models.cmrm import CMRM


def two_pictures():
    # J1: visterm 0 twice, word 0; J2: visterms 0 and 1, word 1.
    X = sp.csr_matrix([[2, 0], [1, 1]])
    Y = sp.csr_matrix([[1, 0], [0, 1]])
    return X, Y


def test_two_training_pictures_by_hand():
    # background: P(v|T) = (3/4, 1/4), P(w|T) = (1/2, 1/2); alpha = beta = 1/2:
    # P(v|J1) = (7/8, 1/8), P(v|J2) = (5/8, 3/8), P(w|J1) = (3/4, 1/4), P(w|J2) = (1/4, 3/4).
    # I = {v0, v1}: P(I|J1) = 7/64, P(I|J2) = 15/64;
    # P(w0, I) = 1/2 (3/4 7/64 + 1/4 15/64) = 9/128, P(w1, I) = 1/2 (1/4 7/64 + 3/4 15/64) = 13/128
    X, Y = two_pictures()
    m = CMRM(alpha=0.5, beta=0.5).fit(X, Y)
    I = sp.csr_matrix([[1, 1]])
    assert np.allclose(np.exp(m.log_joint(I)), [[9 / 128, 13 / 128]])
    assert np.allclose(m.transform(I), [[9 / 22, 13 / 22]])
    assert np.allclose(np.exp(m.log_picture_given_training(I)), [[7 / 64, 15 / 64]])
    # DRCMRM, query "w0": u = P(w0|J) normalised = (3/4, 1/4);
    # P(v|Q) = 3/4 (7/8, 1/8) + 1/4 (5/8, 3/8) = (13/16, 3/16); P(v|I) = (5/8, 3/8)
    pq = m.query_visterm_model(sp.csr_matrix([[1, 0]]))
    assert np.allclose(pq, [[13 / 16, 3 / 16]])
    neg_kl = (13 / 16) * np.log((5 / 8) / (13 / 16)) + (3 / 16) * np.log((3 / 8) / (3 / 16))
    assert np.allclose(m.negative_kl(sp.csr_matrix([[1, 0]]), I), [[neg_kl]])


def test_log_space_agrees_with_direct_products():
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.poisson(0.5, (6, 12)))
    Y = sp.csr_matrix((rng.random((6, 4)) < 0.4).astype(float))
    Y[0, 0] = 1
    m = CMRM(alpha=0.3, beta=0.2).fit(X, Y)
    test = rng.poisson(1.0, (3, 12))
    C, W = X.toarray(), Y.toarray()
    bg_v, bg_w = C.sum(0) / C.sum(), W.sum(0) / W.sum()
    PV = 0.8 * C / C.sum(1, keepdims=True) + 0.2 * bg_v
    PW = 0.7 * W / np.maximum(W.sum(1, keepdims=True), 1) + 0.3 * bg_w
    PW[W.sum(1) == 0] = bg_w
    direct = np.array([[np.mean(PW[:, w] * np.prod(PV ** t, axis=1)) for w in range(4)]
                       for t in test])
    assert np.allclose(np.exp(m.log_joint(sp.csr_matrix(test))), direct, rtol=1e-10)
    assert np.allclose(m.transform(test), direct / direct.sum(1, keepdims=True), atol=1e-6)


def test_no_underflow_with_many_blocks():
    rng = np.random.default_rng(1)
    X = sp.csr_matrix(rng.poisson(3, (20, 50)))
    Y = sp.csr_matrix((rng.random((20, 5)) < 0.3).astype(float))
    big = sp.csr_matrix(rng.poisson(40, (4, 50)))  # ~2,000 blocks: direct products are 0
    m = CMRM(alpha=0.1, beta=0.1).fit(X, Y)
    Z = m.transform(big)
    assert np.isfinite(Z).all() and np.allclose(Z.sum(1), 1, atol=1e-5)
    assert np.isfinite(m.log_joint(big)).all()


def test_modes_rank_and_annotate():
    X, Y = sp.csr_matrix([[2, 0], [0, 2]]), sp.csr_matrix([[1, 0], [0, 1]])
    pictures = sp.csr_matrix([[3, 0], [0, 3]])  # like J1, like J2
    Q = sp.csr_matrix([[1.0, 0], [0, 1.0]])
    for mode in ("pacmrm", "drcmrm", "dot"):
        S = CMRM(alpha=0.5, beta=0.5, mode=mode).fit(X, Y).score_queries(Q, pictures)
        assert S.shape == (2, 2) and S[0, 0] > S[0, 1] and S[1, 1] > S[1, 0], mode
    m = CMRM(alpha=0.5, beta=0.5).fit(X, Y)
    assert m.annotate(pictures, n_words=1).ravel().tolist() == [0, 1]
    ev = evaluate_model(m, pictures, Q, sp.csr_matrix(np.eye(2)))
    assert ev.mean("avgp") == 1.0
    ann = annotation_metrics(m.transform(pictures), np.eye(2), n_words=1)
    assert ann["mean_precision"] == 1.0 and ann["n_plus"] == 2


def test_pacmrm_is_the_query_likelihood():
    rng = np.random.default_rng(2)
    X = sp.csr_matrix(rng.poisson(1, (10, 8)))
    Y = sp.csr_matrix((rng.random((10, 3)) < 0.5).astype(float))
    m = CMRM(alpha=0.2, beta=0.3, mode="pacmrm").fit(X, Y)
    P = m.transform(X)
    S = m.score_queries(sp.csr_matrix([[0.6, 0, 0.8]]), X)
    assert np.allclose(S[0], np.log(P[:, 0]) + np.log(P[:, 2]), atol=1e-5)


def test_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(3)
    X = sp.csr_matrix(rng.poisson(1, (10, 8)))
    Y = sp.csr_matrix((rng.random((10, 3)) < 0.5).astype(float))
    m = CMRM(alpha=0.2, beta=0.3, mode="drcmrm").fit(X, Y)
    m.save(tmp_path / "cmrm")
    back = load_model(tmp_path / "cmrm")
    assert isinstance(back, CMRM) and back.get_params() == m.get_params()
    assert np.array_equal(back.transform(X), m.transform(X))
    Q = sp.csr_matrix([[1.0, 0, 1.0]])
    assert np.allclose(back.score_queries(Q, X), m.score_queries(Q, X))


def test_bad_input_is_named():
    X, Y = two_pictures()
    with pytest.raises(ValueError, match="beta"):  # parameters are checked in fit
        CMRM(beta=0).fit(X, Y)
    with pytest.raises(ValueError, match="mode"):
        CMRM(mode="kl").fit(X, Y)
    with pytest.raises(ValueError, match="non-negative"):
        CMRM().fit(sp.csr_matrix([[-1.0, 0], [1, 1]]), Y)
    with pytest.raises(ValueError, match="captions"):
        CMRM().fit(X, Y[:1])
    m = CMRM().fit(X, Y)
    with pytest.raises(ValueError, match="visterms"):
        m.transform(sp.csr_matrix([[1, 1, 1]]))
    with pytest.raises(RuntimeError, match="fit"):
        CMRM().transform(X)
