"""Shards: search runs on every shard and merges; the on-disk format is versioned."""

from __future__ import annotations

import json
import sqlite3

import numpy as np

import pamir.index.scores as scores_mod
from pamir.index import Index

WORDS = ["sky", "sea", "tree", "sand", "cat"]


def entries(n):
    return [{"path": f"/p/{i}.jpg", "size": 1, "mtime_ns": i, "hash": f"h{i}"}
            for i in range(n)]


def pictures(n, seed=5):
    rng = np.random.default_rng(seed)
    Z = np.round(rng.standard_normal((n, len(WORDS))), 1).astype(np.float32)  # ties
    return Z


def test_many_shards_answer_as_one(tmp_path, monkeypatch):
    Z = pictures(300)
    with Index.create(tmp_path / "one", WORDS, np.ones(5)) as one:
        one.add(entries(300), Z)
        one.compact()
        assert one.status()["shards"] == 1
        rng = np.random.default_rng(0)
        qs = [rng.uniform(-1, 1, 5).astype(np.float32) * (rng.random(5) < 0.6)
              for _ in range(30)]
        qs = [q for q in qs if q.any()]
        expected = [[(h.id, h.score) for h in one.search(q, 25)] for q in qs]
    monkeypatch.setattr(scores_mod, "SHARD_COLUMNS", 32)
    monkeypatch.setattr(scores_mod, "MIN_CAPACITY", 32)
    with Index.create(tmp_path / "many", WORDS, np.ones(5)) as many:
        for start in range(0, 300, 70):  # batches crossing shard boundaries
            many.add(entries(300)[start:start + 70], Z[start:start + 70])
        many.compact()
        assert many.status()["shards"] == 10
        assert many.status()["segments"] == 10 and many.status()["unsorted"] == 0
        for q, exp in zip(qs, expected):
            assert [(h.id, h.score) for h in many.search(q, 25)] == exp
            assert [(h.id, h.score) for h in many.search(q, 25, method="brute")] == exp
        for i in (1, 33, 299):
            np.testing.assert_array_equal(many.vector(i), Z[i - 1])


def test_version_1_index_is_read_and_upgraded(tmp_path):
    Z = pictures(40)
    with Index.create(tmp_path / "idx", WORDS, np.ones(5)) as ix:
        ix.add(entries(40), Z)
        q = np.array([1, 0, 0.5, 0, 0], np.float32)
        expected = [(h.id, h.score) for h in ix.search(q, 10)]
        shard = ix._matrix.layout()["shards"][0]
    # what pamir wrote before shards: one matrix file named in meta.matrix, no lists
    conn = sqlite3.connect(tmp_path / "idx" / "catalog.sqlite")
    with conn:
        conn.execute("DELETE FROM meta WHERE key = 'shards'")
        conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                         [("schema_version", "1"), ("matrix", json.dumps(shard["matrix"])),
                          ("capacity", json.dumps(shard["capacity"]))])
    conn.close()
    with Index.open(tmp_path / "idx") as old:
        assert [(h.id, h.score) for h in old.search(q, 10)] == expected
        assert old.status()["unsorted"] == 40
    with Index.open(tmp_path / "idx", writable=True) as upgraded:
        assert upgraded.compact()
        assert [(h.id, h.score) for h in upgraded.search(q, 10)] == expected
    conn = sqlite3.connect(tmp_path / "idx" / "catalog.sqlite")
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "2"
