"""Opening a large index reads its (column, id) map from a copy a reader of the same committed
state left (pamir.index.COLUMNS_PREFIX), never a stale one."""

from __future__ import annotations

import numpy as np

import pamir.index.lifecycle as index_mod
from pamir.index import Index
from pamir.index.catalog import Catalog

VOCAB = ["sky", "water", "tree"]


def _entries(start, n):
    return [{"path": f"/p/{i}.png", "size": 1, "mtime_ns": 1, "hash": f"h{i}"}
            for i in range(start, start + n)]


def test_the_columns_copy_is_used_only_for_its_own_state(tmp_path, monkeypatch):
    monkeypatch.setattr(index_mod, "COLUMNS_COPY_FROM", 1)
    rng = np.random.default_rng(0)
    with Index.create(tmp_path / "ix", VOCAB, np.ones(3)) as ix:
        ix.add(_entries(0, 30), rng.normal(size=(30, 3)).astype(np.float32))
    with Index.open(tmp_path / "ix") as reader:  # reads the catalogue, leaves the copy
        expected = reader.search(np.float32([1, 0, 0]), 5, method="brute")
    [copy] = (tmp_path / "ix").glob("columns-*.npy")

    def no_catalogue(self):
        raise AssertionError("read the catalogue")

    with monkeypatch.context() as m:
        m.setattr(Catalog, "live_columns", no_catalogue)
        with Index.open(tmp_path / "ix") as reader:  # the same state: from the copy
            assert reader.search(np.float32([1, 0, 0]), 5, method="brute") == expected
            assert len(reader) == 30
    with Index.open(tmp_path / "ix", writable=True) as ix:  # a new state
        ix.remove([expected[0].id])
    with Index.open(tmp_path / "ix") as reader:
        hits = reader.search(np.float32([1, 0, 0]), 5, method="brute")
        assert len(reader) == 29 and hits[0] == expected[1]
    assert [p.name for p in (tmp_path / "ix").glob("columns-*.npy")] != [copy.name]
    Index.destroy(tmp_path / "ix")
    assert not (tmp_path / "ix").exists()
