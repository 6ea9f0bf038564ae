"""Issue 35: the memory levers of `pamir fit` (pictures prepared once for every fit, a
candidate's features let go during the grid) change no result."""

import numpy as np
import pytest
import scipy.sparse as sp

from pamir.training import selecting
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
    monkeypatch.setattr(selecting, "_hold_features", lambda inputs, candidates: True)
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
