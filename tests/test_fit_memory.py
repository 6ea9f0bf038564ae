"""Issue 35: the memory levers of `pamir fit` (pictures prepared once for every fit, a
candidate's features let go during the grid) change no result."""

import numpy as np
import pytest
import scipy.sparse as sp

from pamir.training import extraction
from pamir.features import FeatureSettings, registry
from pamir.features.registry import Concatenation
from pamir.models import pamir_core as pamir_module
from pamir.models.pamir import PAMIR, Pictures
from pamir.training import fit_system
from pictures import LOOKS, striped_collection, vectors

SETTINGS = FeatureSettings(short_side=48, n_visterms=24, n_colours=8, kmeans_iterations=5,
                           colour_max_pictures=60)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return striped_collection(tmp_path_factory.mktemp("pictures"), LOOKS, 90, (48, 72), 0, 3)


def test_prepared_pictures_train_the_same_model():
    Xt, Yt = vectors(200, 0)
    Xv, Yv = vectors(60, 1)
    params = dict(n_updates=3_000, eval_every=500)
    alone = PAMIR(**params).fit(Xt, Yt, validation=(Xv, Yv))
    shared_t, shared_v = PAMIR.prepare_pictures(Xt), PAMIR.prepare_pictures(Xv, "valid")
    shared = [PAMIR(**params).fit(shared_t, Yt, validation=(shared_v, Yv)) for _ in range(2)]
    for m in shared:
        assert np.array_equal(m.W_, alone.W_) and m.W_.dtype == np.float32
        assert m.history_[-1][:4] == alone.history_[-1][:4]
    with pytest.raises(ValueError, match="prepared for valid"):
        PAMIR(**params).fit(shared_v, Yt)
    assert Pictures.of(shared_t, "train") is shared_t


def test_letting_the_features_go_during_the_grid_changes_nothing(folder, tmp_path,
                                                                   monkeypatch):
    kw = dict(progress=False, cache_dir=tmp_path / "cache", log=None, ensemble=2,
              retrain=True, representation=["visterms", "visterms+visterms"])
    params = {"n_updates": 2_000, "eval_every": 500}
    let_go = fit_system(folder, "pamir", SETTINGS, params, **kw)
    monkeypatch.setattr(extraction, "_hold_features", lambda inputs, candidates: True)
    held = fit_system(folder, "pamir", SETTINGS, params, **kw)
    assert np.array_equal(let_go.model.W_, held.model.W_)
    for key in ("representation", "params", "valid_avgp", "ensemble", "retrained"):
        assert let_go.info[key] == held.info[key], key


def test_a_concatenation_combined_by_row_blocks_is_the_whole_stack(monkeypatch):
    rng = np.random.default_rng(0)
    monkeypatch.setattr(registry, "COMBINE_ROWS", 16)  # several blocks and a ragged last one
    n = 37
    dense = rng.normal(size=(n, 12)).astype(np.float32)
    dense[rng.random(dense.shape) < 0.2] = 0  # exact zeros are not stored
    bags = sp.random(n, 20, density=0.2, format="csr", dtype=np.float32, random_state=1)
    bags.data[::5] = 0  # stored zeros stay stored
    before = bags.copy()
    c = Concatenation.__new__(Concatenation)
    c.weights = [1.0, 0.5]
    whole = sp.hstack([sp.csr_matrix(M, dtype=np.float32) * w
                       for M, w in zip([dense, bags], c.weights)]).tocsr()
    got = c.combine([dense, bags])
    assert got.dtype == np.float32 and got.shape == whole.shape
    for a in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(got, a), getattr(whole, a)), a
    assert (bags != before).nnz == 0  # the parts are left as they were


def test_the_block_and_rest_split_by_row_blocks_is_the_whole_split(monkeypatch):
    rng = np.random.default_rng(1)
    dense = rng.normal(size=(45, 30)).astype(np.float32)
    bags = sp.random(45, 50, density=0.1, format="csr", dtype=np.float32, random_state=3)
    X = sp.hstack([sp.csr_matrix(dense), bags], format="csr")
    whole = pamir_module._dense_and_sparse(X)  # one block of rows
    monkeypatch.setattr(pamir_module, "SPLIT_ROWS", 8)
    split = pamir_module._dense_and_sparse(X)
    assert whole[0].shape[1] >= 30 and split[0].flags.c_contiguous
    for a, b in zip(whole, split):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    # a canonical float32 CSR is prepared without a copy of it, and left as it was
    before = X.copy()
    PAMIR.prepare_pictures(X)
    assert (X != before).nnz == 0


def test_a_fit_on_column_blocks_is_the_fit_on_their_csr(monkeypatch):
    """Issue 35: a fit's features held as their parts (ColumnBlocks: the dense views at 4
    bytes a number, rows taken without a copy) prepare the same pictures, train the same
    model and give the neighbours the same views as their combined CSR."""
    from pamir.features.registry import ColumnBlocks, as_matrix
    from pamir.features.representation import take_rows
    from pamir.models.neighbours import view_of

    monkeypatch.setattr(registry, "COMBINE_ROWS", 16)
    monkeypatch.setattr(pamir_module, "SPLIT_ROWS", 8)  # several row blocks, a ragged last
    Xd, Y = vectors(70, 2)
    rng = np.random.default_rng(3)
    Xd[:, 5] = 0  # a channel that never fires: not stored by the CSR
    Xd[rng.random(Xd.shape) < 0.05] = 0
    bags = sp.random(70, 40, density=0.15, format="csr", dtype=np.float32, random_state=4)
    c = Concatenation.__new__(Concatenation)
    c.weights = [1.0, 0.5]
    blocks = c.stack([Xd, bags])
    csr = c.combine([Xd, bags])
    assert isinstance(blocks, ColumnBlocks) and blocks.shape == csr.shape
    assert blocks.nnz == csr.nnz
    train, valid = np.arange(0, 70, 3), np.setdiff1d(np.arange(70), np.arange(0, 70, 3))
    rows = take_rows(blocks, train)
    assert rows.rows is not None and rows.matrices[0] is Xd  # no copy of the parts
    for a, b in zip(rows.tocsr().__dict__.values(), take_rows(csr, train).__dict__.values()):
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b)
    mine, theirs = Pictures(rows), Pictures(take_rows(csr, train))
    assert np.array_equal(mine.Xsq, theirs.Xsq)
    for a, b in zip(mine.parts, theirs.parts):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    params = dict(n_updates=2_000, eval_every=500)
    X_valid = as_matrix(take_rows(blocks, valid))
    fitted = [PAMIR(**params).fit(X, Y[train], validation=(X_valid, Y[valid]))
              for X in (rows, take_rows(csr, train))]
    assert np.array_equal(fitted[0].W_, fitted[1].W_)
    views = [(0, 10), (10, 24)]
    assert np.array_equal(view_of(rows, views), view_of(take_rows(csr, train), views))


def test_fit_system_on_column_blocks_is_fit_system_on_the_csr(folder, tmp_path, monkeypatch):
    from pamir import config

    monkeypatch.setattr(config, "PRIOR", False)  # (its embedding model: a minute, no views)
    kw = dict(progress=False, cache_dir=tmp_path / "cache", log=None, ensemble=2,
              retrain=True, representation="cnn+visterms", grid={}, neighbours=True)
    params = {"n_updates": 2_000, "eval_every": 500}
    compact = fit_system(folder, "pamir", SETTINGS, params, **kw)
    monkeypatch.setattr(Concatenation, "stack", lambda self, matrices: self.combine(matrices))
    combined = fit_system(folder, "pamir", SETTINGS, params, **kw)
    assert np.array_equal(compact.model.W_, combined.model.W_)
    assert compact.info["neighbours"]["grid"]  # the neighbours were chosen on the views
    for key in ("valid_avgp", "neighbours", "retrained", "calibration"):
        assert compact.info.get(key) == combined.info.get(key), key


def test_the_priors_spread_pictures_are_a_matrix_from_column_blocks():
    """The prior's spreads read some training pictures of the winner's features
    (training.prior.spread_rows): held as column blocks, they come as the CSR a model
    reads, the same rows as the combined CSR's."""
    from types import SimpleNamespace

    from pamir.training.prior import spread_rows

    Xd, _ = vectors(40, 5)
    bags = sp.random(40, 30, density=0.2, format="csr", dtype=np.float32, random_state=6)
    c = Concatenation.__new__(Concatenation)
    c.weights = [1.0, 1.0]
    train = np.arange(0, 40, 2)
    got = spread_rows(SimpleNamespace(F=c.stack([Xd, bags])), train)
    want = spread_rows(SimpleNamespace(F=c.combine([Xd, bags])), train)
    assert sp.issparse(got) and got.shape == (20, Xd.shape[1] + 30)
    assert np.array_equal(got.toarray(), want.toarray())


def test_the_training_pictures_are_let_go_before_the_neighbours_and_the_retraining(
        folder, tmp_path, monkeypatch):
    """Issue 35: the prepared training pictures the selection's and the ensemble's fits read
    are let go before the neighbours' views and the retraining's block are made (at 100,000
    pictures each of the three is gigabytes: held together they passed 16 GB)."""
    import gc
    import weakref

    from pamir import config
    from pamir.training import neighbours, retraining

    monkeypatch.setattr(config, "PRIOR", False)
    prepared, alive = [], {}
    fit_pictures = extraction._fit_pictures

    def recorded(*args):
        pictures = fit_pictures(*args)
        prepared.append(weakref.ref(pictures[0]))
        return pictures

    def watched(phase, step):
        def run(*args, **kwargs):
            gc.collect()
            alive[phase] = [ref() is not None for ref in prepared]
            return step(*args, **kwargs)
        return run

    monkeypatch.setattr(extraction, "_fit_pictures", recorded)
    monkeypatch.setattr(neighbours, "choose_neighbours",
                        watched("neighbours", neighbours.choose_neighbours))
    monkeypatch.setattr(retraining, "prepare_for_fits",
                        watched("retraining", retraining.prepare_for_fits))
    system = fit_system(folder, "pamir", SETTINGS, {"n_updates": 2_000, "eval_every": 500},
                        progress=False, cache_dir=tmp_path / "cache", log=None, ensemble=2,
                        retrain=True, representation="cnn+visterms", grid={}, neighbours=True)
    assert system.info["retrained"] and system.info["neighbours"]["grid"]
    assert prepared  # (every candidate's: here two weights of cnn+visterms)
    assert alive == {"neighbours": [False] * len(prepared),
                     "retraining": [False] * len(prepared)}
