"""Duygulu's blobs for Corel 5k, from mulan's sparse ARFF files."""

from __future__ import annotations

import pytest

from pamir.data import DataError
from pamir.facts.collection import load_collection
from pamir.features.blobs import N_BLOBS, load_blobs, read_sparse_arff


def test_read_sparse_arff_keeps_the_first_columns(tmp_path):
    path = tmp_path / "x.arff"
    path.write_text("@relation x\n@attribute a {0,1}\n@attribute b {0,1}\n@attribute l {0,1}\n"
                    "@data\n{0 1,2 1}\n{}\n{1 1}\n")
    M = read_sparse_arff(path, 2)
    assert M.toarray().tolist() == [[1, 0], [0, 0], [0, 1]]
    (tmp_path / "bad.arff").write_text("@relation x\n")
    with pytest.raises(ValueError, match="no @data"):
        read_sparse_arff(tmp_path / "bad.arff", 2)


def test_corel5k_blobs_align_with_the_collection():
    try:
        collection = load_collection("corel5k")
    except DataError:
        pytest.skip("Corel 5k not here")
    B, ok = load_blobs(collection)
    assert B.shape == (5000, N_BLOBS) and ok.sum() == 4999
    assert collection.ids[int((~ok).nonzero()[0][0])] == "121060"  # labelled nowhere
    assert B[~ok].nnz == 0 and set(B.data.tolist()) == {1.0}
    assert 5 < B[ok].getnnz(axis=1).mean() < 12  # a handful of regions per picture
