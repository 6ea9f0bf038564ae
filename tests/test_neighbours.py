"""Neighbours beside PAMIR (issue 26): the label-transfer vote, its mix with PAMIR's scores,
its choice on validation in fit_system, saving, and `pamir learn` / kept feedback adding
pictures to the neighbours at once."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from pamir.data import Collection
from pamir.features.cnn import CNNSettings
from pamir.models.neighbours import LabelTransfer, Neighbours, mix_stats, mixed, view_of
from pamir.training.online import apply_delta, learn
from pamir.system import System
from pamir.training import fit_system, neighbour_views

WORDS = ["sky", "sea", "sand", "snow"]


def clusters(n_per: int = 40, dim: int = 16, seed: int = 0, noise: float = 0.15):
    """Pictures around 8 centres, +e_i and -e_i for i < 4; both of a pair carry word i: a
    word no linear map can score (its pictures average to nothing), neighbours can."""
    rng = np.random.default_rng(seed)
    X, captions = [], []
    for i in range(4):
        for sign in (1.0, -1.0):
            centre = np.zeros(dim)
            centre[i] = sign
            X.append(centre + rng.normal(0, noise, (n_per, dim)))
            captions += [(WORDS[i],)] * n_per
    X = np.vstack(X).astype(np.float32)
    order = rng.permutation(len(X))
    return X[order], [captions[j] for j in order]


def presence(captions, vocabulary=WORDS) -> sp.csr_matrix:
    index = {w: t for t, w in enumerate(vocabulary)}
    rows = [(i, index[w]) for i, c in enumerate(captions) for w in c]
    r, c = zip(*rows)
    return sp.csr_matrix((np.ones(len(r), np.float32), (r, c)),
                         shape=(len(captions), len(vocabulary)))


def test_the_vote_is_the_softmax_weighted_share_of_the_nearest_pictures():
    rng = np.random.default_rng(1)
    V = rng.normal(size=(30, 5)).astype(np.float32)
    Y = sp.csr_matrix(rng.random((30, 4)) < 0.3, dtype=np.float32)
    lt = LabelTransfer(k=7, temperature=0.2, floor=1e-3).fit(V, Y)
    q = rng.normal(size=(3, 5)).astype(np.float32)
    got = lt.vote(q)
    unit = V / np.linalg.norm(V, axis=1, keepdims=True)
    for i in range(3):  # by hand: the 7 largest cosines, softmax over cos / 0.2
        cos = unit @ (q[i] / np.linalg.norm(q[i]))
        near = np.argsort(-cos)[:7]
        w = np.exp(cos[near] / 0.2)
        np.testing.assert_allclose(got[i], (w / w.sum()) @ Y.toarray()[near], atol=2e-3)
    assert got.min() >= 0 and got.max() <= 1 + 1e-6
    np.testing.assert_allclose(lt.transform(q), np.log(got + 1e-3), rtol=1e-5)
    # k beyond the pictures held: all of them vote
    assert LabelTransfer(k=500).fit(V, Y).vote(q).shape == (3, 4)


def test_voters_name_the_pictures_that_carry_the_words():
    X, caps = clusters()
    lt = LabelTransfer(k=10).fit(X, presence(caps), ids=[f"p{i}" for i in range(len(X))],
                                 paths=[f"/pics/p{i}.jpg" for i in range(len(X))])
    probe = np.zeros((1, X.shape[1]), np.float32)
    probe[0, 2] = -1.0  # near the -e_2 pictures: "sand"
    found = lt.voters(probe, [WORDS.index("sand")], top=3)[0]
    assert len(found) == 3
    assert all(caps[int(v["id"][1:])] == ("sand",) and v["path"].endswith(".jpg")
               for v in found)
    assert [v["weight"] for v in found] == sorted((v["weight"] for v in found), reverse=True)
    assert lt.voters(probe, [WORDS.index("snow")], top=3) == [[]]  # no neighbour has snow


def test_a_mix_weight_of_zero_gives_the_model_scores_exactly():
    rng = np.random.default_rng(2)
    P = rng.normal(size=(20, 4)).astype(np.float32)
    L = np.log(rng.random((20, 4)) + 1e-3).astype(np.float32)
    stats = mix_stats(P, L)
    assert np.array_equal(mixed(P, L, 0.0, stats), P)
    assert not np.allclose(mixed(P, L, 0.5, stats), P)
    # alpha = 1 is the vote alone, standardised onto the model's mean and spread
    Z = mixed(P, L, 1.0, stats)
    assert np.mean(Z) == pytest.approx(stats["pamir_mean"], abs=1e-5)
    assert np.std(Z) == pytest.approx(stats["pamir_std"], rel=1e-4)
    with pytest.raises(ValueError, match="alpha"):
        Neighbours(LabelTransfer(), [(0, 4)], 1.5, stats)


def test_views_are_unit_cnn_columns_side_by_side():
    F = sp.csr_matrix(np.hstack([np.full((2, 3), 2.0), np.full((2, 2), 5.0),
                                 np.ones((2, 4))]).astype(np.float32))
    V = view_of(F, [(0, 3), (3, 5)])
    assert V.shape == (2, 5)
    np.testing.assert_allclose(np.linalg.norm(V, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(V[0, :3], 1 / np.sqrt(3) / np.sqrt(2), rtol=1e-6)
    # a CSR concatenation read from its data, rows with a dropped zero included
    rng = np.random.default_rng(4)
    dense = rng.normal(size=(6, 9)).astype(np.float32)
    dense[2, 1] = 0.0  # not stored in CSR: that row goes the slow way
    dense[:, 7:] *= rng.random((6, 2)) < 0.5  # a sparse part after the views
    M = sp.csr_matrix(dense)
    for views in ([(0, 3), (4, 6)], [(2, 7)]):
        np.testing.assert_allclose(view_of(M, views), view_of(dense, views), rtol=1e-6)


def test_views_built_in_place_are_the_stacked_unit_rows_to_the_bit():
    """Issue 35: view_of writes each view's unit rows into one array (one copy, not four);
    the numbers are those of the stack of unit rows divided by sqrt(views), bit for bit,
    from a dense array, a CSR and column blocks (rows taken), a zero row included."""
    from pamir.features.registry import Concatenation
    from pamir.models.neighbours import _columns, unit_rows

    rng = np.random.default_rng(5)
    dense = rng.normal(size=(40, 12)).astype(np.float32)
    dense[rng.random(dense.shape) < 0.1] = 0
    dense[3] = 0
    bags = sp.random(40, 8, density=0.2, format="csr", dtype=np.float32, random_state=6)
    c = Concatenation.__new__(Concatenation)
    c.weights = [0.7, 1.0]
    views = [(0, 4), (4, 9), (9, 12)]
    for F in (dense, sp.csr_matrix(dense), c.stack([dense, bags])[np.arange(0, 40, 3)]):
        stacked = np.hstack([unit_rows(_columns(F, a, b)) for a, b in views]) / np.float32(
            np.sqrt(len(views)))
        got = view_of(F, views)
        assert got.dtype == np.float32 and got.flags.c_contiguous
        assert np.array_equal(got.view(np.uint32), stacked.view(np.uint32))


class FakeCNN:
    """What fit_system reads of a CNN representation when it is given the features."""

    kind = "cnn"
    output = "dense"

    def __init__(self, dim):
        self.dim, self.settings = dim, CNNSettings()

    def to_dict(self):
        return {"kind": "cnn", "settings": self.settings.to_dict()}


def xor_collection(n_per: int = 40):
    X, caps = clusters(n_per)
    n = len(X)
    splits = ["train"] * (n - 64) + ["test"] * 64
    coll = Collection("xor", None, [f"x{i}" for i in range(n)], [f"/x/{i}.jpg" for i in range(n)],
                      list(caps), splits)
    return coll, X


@pytest.fixture(scope="module")
def xor_system():
    coll, X = xor_collection()
    system = fit_system(coll, "pamir", model_params={"n_updates": 4_000, "eval_every": 1_000},
                        grid={}, inputs=(X, np.ones(len(X), bool), FakeCNN(X.shape[1])),
                        progress=False, log=None, retrain=True)
    return coll, X, system


def test_fit_chooses_the_neighbours_on_validation_and_retrains_them(xor_system):
    coll, X, system = xor_system
    knn = system.info["neighbours"]
    assert system.neighbours is not None and knn["alpha"] > 0
    # a word no linear map scores: the neighbours win it on validation by far
    assert knn["valid_avgp"] > knn["model_valid_avgp"] + 10
    assert system.info["valid_avgp"] == knn["valid_avgp"]
    assert len(knn["grid"]) > 1 and knn["views"] == [[0, X.shape[1]]]
    # retrained: the train + valid pictures vote, with the choices made on validation
    from pamir.protocol import Protocol
    p = Protocol(coll)
    assert len(system.neighbours.transfer) == len(p.train) + len(p.valid)
    assert system.neighbours.transfer.k == knn["k"] and system.neighbours.alpha == knn["alpha"]
    Z = system.transform_features(X[p.test])
    hits = np.mean([Z[i, system.word_index[coll.captions[j][0]]] == Z[i].max()
                    for i, j in enumerate(p.test)])
    assert hits > 0.9


def test_no_neighbours_when_asked_or_without_a_cnn_view(xor_system):
    coll, X, _ = xor_system
    kw = dict(model_params={"n_updates": 2_000, "eval_every": 1_000}, grid={}, progress=False,
              log=None)
    alone = fit_system(coll, "pamir", inputs=(X, np.ones(len(X), bool), FakeCNN(X.shape[1])),
                       neighbours=False, **kw)
    assert alone.neighbours is None and alone.info["neighbours"] is None
    assert neighbour_views(object()) == []  # visterms, blobs...: no CNN view


def test_learn_and_kept_feedback_add_voters_at_once(xor_system):
    coll, X, fitted_system = xor_system
    system = System(fitted_system.pipeline, fitted_system.model, fitted_system.vocabulary,
                    fitted_system.idf, dict(fitted_system.info),
                    Neighbours.from_saved(*fitted_system.neighbours.to_dict()))
    system.model.W_ = system.model.W_.copy()
    rng = np.random.default_rng(5)
    centre = np.zeros(X.shape[1], np.float32)
    centre[6] = 1.0  # a place no captioned picture is near
    new = (centre + rng.normal(0, 0.1, (6, X.shape[1]))).astype(np.float32)
    probe = (centre + rng.normal(0, 0.1, (1, X.shape[1]))).astype(np.float32)
    before = len(system.neighbours.transfer)
    learn(system, new[:3], [("comet",)] * 3, n_updates=50,
          paths=[f"/new/{i}.jpg" for i in range(3)])
    assert len(system.neighbours.transfer) == before + 3
    who = system.voters(probe, ["comet"], top=5)[0]
    assert [v["path"] for v in who] and {v["path"] for v in who} <= {f"/new/{i}.jpg"
                                                                     for i in range(3)}
    assert who[0]["words"] == ["comet"]
    t = system.word_index["comet"]
    vote = system.neighbours.transfer.vote(system.neighbours.view(probe))
    assert vote[0, t] > 0.99  # every near picture is a new one
    # a kept feedback round: the pictures marked right vote for the query's words
    sea = system.word_index["sea"]
    apply_delta(system, np.array([sea]), np.zeros((1, X.shape[1]), np.float32),
                right=new[3:], paths=["/right.jpg"] * 3)
    vote = system.neighbours.transfer.vote(system.neighbours.view(probe))[0]
    assert vote[sea] > 0.3 and len(system.neighbours.transfer) == before + 6
    # a Keep that could not be saved forgets its voters: the vote is the learnt one again
    system.neighbours.transfer.keep_first(before + 3)
    again = system.neighbours.transfer.vote(system.neighbours.view(probe))[0]
    assert len(system.neighbours.transfer) == before + 3 and again[sea] < 0.01


def test_save_and_load_keep_the_neighbours(looks_system, tmp_path):
    collection, system, cache = looks_system
    F, ok, _ = system.features(collection.paths[:30])
    plain = system.transform_features(F, ok)
    # a visterm system has no CNN view; any columns make a view for this round trip
    Y = presence([c or ("x",) for c in collection.captions[:30]],
                 sorted({w for c in collection.captions[:30] for w in (c or ("x",))}))
    Y = sp.csr_matrix((Y.toarray()[:, :system.T] if Y.shape[1] >= system.T else
                       np.hstack([Y.toarray(), np.zeros((30, system.T - Y.shape[1]))])),
                      dtype=np.float32)
    views = [(0, 10)]
    lt = LabelTransfer(k=5).fit(view_of(F, views), Y, ids=collection.ids[:30],
                                paths=[str(p) for p in collection.paths[:30]])
    L = lt.transform(view_of(F, views))
    part = Neighbours(lt, views, 0.4, mix_stats(plain, L))
    with_knn = System(system.pipeline, system.model, system.vocabulary, system.idf, system.info,
                      part)
    Z = with_knn.transform_features(F, ok)
    assert not np.allclose(Z, plain)
    with_knn.save(tmp_path / "m")
    again = System.load(tmp_path / "m", cache_dir=cache, progress=False)
    np.testing.assert_array_equal(again.transform_features(F, ok), Z)
    assert again.neighbours.transfer.ids_ == collection.ids[:30]
    assert again.neighbours.transfer.vectors_.dtype == np.float16
    # a model without neighbours (every model before issue 26) loads and scores as before
    system.save(tmp_path / "old")
    old = System.load(tmp_path / "old", cache_dir=cache, progress=False)
    assert old.neighbours is None
    np.testing.assert_array_equal(old.transform_features(F, ok), plain)
    # alpha = 0 in a system: the model's scores exactly
    part.alpha = 0.0
    np.testing.assert_array_equal(with_knn.transform_features(F, ok), plain)
