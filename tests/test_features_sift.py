"""SIFT visterms (optional representation of AMR 2006)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from pamir.features.sift import SiftVisterms, extract_sift, sift_descriptors


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sift")
    rng = np.random.default_rng(0)
    paths = []
    for i in range(6):
        small = rng.integers(0, 256, (12, 18, 3), dtype=np.uint8)  # blobs and corners
        Image.fromarray(small).resize((192, 128), Image.Resampling.NEAREST).save(folder / f"{i}.png")
        paths.append(folder / f"{i}.png")
    (folder / "empty.png").write_bytes(b"")
    return paths + [folder / "empty.png"]


def test_flat_picture_has_no_keypoint():
    assert sift_descriptors(np.full((64, 64, 3), 128, np.uint8)).shape == (0, 128)


def test_extract_caches_and_skips(pictures, tmp_path):
    first = extract_sift(pictures, cache_dir=tmp_path)
    assert first.ok.tolist() == [True] * 6 + [False] and first.n_skipped == 1
    assert (first.n_blocks[:6] > 10).all() and first.descriptors.shape[1] == 128
    second = extract_sift(pictures, cache_dir=tmp_path)
    assert second.n_cached == 6 and np.array_equal(first.descriptors, second.descriptors)


def test_sift_bags_unit_rows_and_round_trip(pictures):
    model = SiftVisterms(n_visterms=8, n_iter=3)
    X, ok, reasons = model.fit_transform(pictures)
    assert X.shape == (7, 8) and ok.sum() == 6 and X[6].nnz == 0
    assert reasons[6] and model.keypoints_per_picture_ > 10
    norms = np.sqrt(X.multiply(X).sum(1)).A1[:6]
    np.testing.assert_allclose(norms[norms > 0], 1.0, rtol=1e-5)
    again = SiftVisterms.from_saved(model.to_dict(), model.to_arrays())
    assert (again.transform(pictures)[0] != X).nnz == 0
