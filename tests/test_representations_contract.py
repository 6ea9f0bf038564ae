"""The contract every registered representation keeps (pamir.features.representation), run
over the registry's whole table as scikit-learn's check_estimator runs over estimators: fit on
a few generated pictures, transform, save as a model saves it (JSON + npz, no pickle), load,
the same output; an unreadable picture gets an empty row and a reason, never an exception."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from PIL import Image

from pamir.data import load_corel5k
from pamir.features import FeatureSettings
from pamir.features.blobs import BlobSettings
from pamir.features.registry import (OUTPUTS, REPRESENTATIONS, make_representation,
                                     output_kind, representation_from_saved,
                                     representation_name)
from pictures import fake_corel

SMALL = FeatureSettings(short_side=48, n_visterms=8, n_colours=8, kmeans_iterations=4,
                        colour_max_pictures=8)


def pictures(folder, n: int = 6) -> list:
    """n small pictures: two colours, a stripe where the seed says."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        a = np.zeros((40, 56, 3), np.uint8)
        a[:] = (200, 40 + 30 * i, 30)
        a[rng.integers(5, 30):, rng.integers(5, 40):] = (30, 90, 200 - 20 * i)
        a[:, (np.arange(56) // 4) % 2 == 0] += 40
        Image.fromarray(a).save(folder / f"{i}.png")
        out.append(folder / f"{i}.png")
    return out


def dense_rows(X) -> np.ndarray:
    """Each picture's numbers as one comparable array (blocks: the ragged descriptors)."""
    if hasattr(X, "offsets"):
        return np.concatenate([np.asarray(X.offsets, np.float64),
                               np.asarray(X.descriptors, np.float64).ravel()])
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def empty_row(X, i: int) -> bool:
    if hasattr(X, "offsets"):
        return X.offsets[i + 1] == X.offsets[i]
    row = X[i]
    return (row.nnz == 0) if sp.issparse(row) else not np.asarray(row).any()


def saved_and_loaded(rep, tmp_path):
    """Through the files a model is saved in: model.json's dict and arrays.npz."""
    d = json.loads(json.dumps(rep.to_dict()))
    with open(tmp_path / "arrays.npz", "wb") as f:
        np.savez(f, **rep.to_arrays())
    with np.load(tmp_path / "arrays.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return representation_from_saved(d, arrays, cache_dir=tmp_path / "cache-2", progress=False)


@pytest.mark.parametrize("name", list(REPRESENTATIONS))
def test_every_representation_keeps_the_contract(name, tmp_path):
    from pamir.features.cnn import CNNSettings  # the CNN's settings: eager torch, no export

    entry = REPRESENTATIONS[name]
    if name == "blobs-arff":  # Duygulu's blobs exist for Corel 5k's pictures only
        root = fake_corel(tmp_path / "corel", ["7", "3", "5"], ["9", "2"])
        paths, unreadable = list(load_corel5k(root).paths), tmp_path / "not-corel.png"
        Image.new("RGB", (20, 20)).save(unreadable)
    else:
        paths, unreadable = pictures(tmp_path / "pictures"), tmp_path / "broken.png"
        unreadable.write_bytes(b"\x89PNG but not a picture")
    rep = make_representation(name, feature_settings=SMALL, sift_visterms=4,
                              cnn_settings=CNNSettings(engine="torch", short_side=64, n_jobs=1),
                              blob_settings=BlobSettings(n_blobs=4),
                              cache_dir=tmp_path / "cache", progress=False)
    assert (rep.kind, output_kind(rep), representation_name(rep)) == (entry.kind, entry.output,
                                                                       name)
    rep.fit(paths)
    X, ok, reasons = rep.transform(paths + [unreadable])
    assert np.asarray(ok).tolist() == [True] * len(paths) + [False]
    assert all(r is None for r in reasons[:-1]) and isinstance(reasons[-1], str) and reasons[-1]
    assert empty_row(X, len(paths)) and not all(empty_row(X, i) for i in range(len(paths)))
    again = saved_and_loaded(rep, tmp_path)
    assert representation_name(again) == name
    X2, ok2, _ = again.transform(paths + [unreadable])
    assert np.array_equal(ok2, ok)
    np.testing.assert_allclose(dense_rows(X2), dense_rows(X), rtol=1e-5, atol=1e-6)


def test_the_table_is_the_one_list_of_names():
    """The CLI help, `features extract` and the registry's derived tables read the table."""
    from pamir.commands import features, fit as train  # noqa: F401  (their help is built at import)
    from pamir.features import registry

    assert list(registry.NAMES) == list(REPRESENTATIONS)
    assert set(registry.CNN_PRESETS) == {"cnn-lite1", "cnn-lite2"}
    assert features.REPRESENTATIONS == registry.EXTRACTABLE
    assert all(name in registry.names_help() for name in REPRESENTATIONS)
    assert {e.output for e in REPRESENTATIONS.values()} <= set(OUTPUTS)
    assert {n for n, e in REPRESENTATIONS.items() if e.explains == "blocks"} == {"visterms"}
    for entry in REPRESENTATIONS.values():
        assert registry.representation_class(entry.kind).kind == entry.kind
