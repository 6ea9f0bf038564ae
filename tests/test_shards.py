"""Shards: search runs on every shard and merges; the on-disk format is versioned."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

import pamir.index.tuning as scores_mod
from pamir.index import SCHEMA_VERSION, Index
from fakes import run

pytestmark = pytest.mark.usefixtures("no_embedding_model")

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
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_segments_without_block_bounds_are_read_and_get_them_at_compaction(tmp_path):
    """Segments written before the block bounds (their meta has no "block") are searched as
    before (a full scan where the TA is not sure); a compaction writes them with bounds."""
    Z = pictures(200)
    qs = [np.array(q, np.float32) for q in ([1, 0.5, -0.3, 0, 0], [0, 1, 1, 1, -1],
                                            [0.2, 0, 0, 0, 1])]
    with Index.create(tmp_path / "idx", WORDS, np.ones(5)) as ix:
        ix.add(entries(200), Z)
        ix.compact()
        expected = [[(h.id, h.score) for h in ix.search(q, 15, method="brute")] for q in qs]
        layout = ix._matrix.layout()
    assert all("block" in g for sh in layout["shards"] for g in sh["segments"])
    for sh in layout["shards"]:  # the meta pamir wrote before the bounds
        for g in sh["segments"]:
            del g["block"], g["blocks"]
    conn = sqlite3.connect(tmp_path / "idx" / "catalog.sqlite")
    with conn:
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('shards', ?)",
                     (json.dumps(layout["shards"]),))
    conn.close()
    with Index.open(tmp_path / "idx", writable=True) as old:
        assert all(g.block == 0 for sh in old._matrix.shards for g in sh.segments)
        assert [[(h.id, h.score) for h in old.search(q, 15)] for q in qs] == expected
        old.remove([3, 4])  # a change, so that the compaction rebuilds the lists
        assert old.compact()
        assert all(g.block for sh in old._matrix.shards for g in sh.segments)
        expected = [[(h.id, h.score) for h in old.search(q, 15, method="brute")] for q in qs]
        assert [[(h.id, h.score) for h in old.search(q, 15)] for q in qs] == expected


def test_cli_compact_leaves_results_unchanged(fake, tmp_path, monkeypatch):
    """`pamir index --compact` (the stand-in system of test_product): two indexing runs make
    two segments, a removal a dead column; compacting leaves every answer as it was."""
    monkeypatch.setattr(scores_mod, "SEAL_MIN", 2)
    model, pictures = fake
    ix = tmp_path / "ix"
    first = sorted(pictures.rglob("*.png"))
    hidden = first[: len(first) // 2]
    for p in hidden:  # the first run sees half of the pictures
        p.rename(p.with_suffix(".png.hidden"))
    run("index", model, pictures, "--index", ix)
    for p in hidden:
        p.with_suffix(".png.hidden").rename(p)
    first[-1].unlink()
    run("index", model, pictures, "--index", ix)

    queries = ["red", "red stripes", "blue -red", "green stripes blue"]

    def answers():
        return [json.loads(run("search", q, "--index", ix, "-k", "5", "--json").stdout)["hits"]
                for q in queries]

    with Index.open(ix) as index:
        before_status = index.status()
    assert before_status["segments"] == 2
    before = answers()
    r = run("index", model, pictures, "--index", ix, "--compact", "--json")
    status = json.loads(r.stdout)["status"]
    assert status["segments"] == status["shards"] == 1 and status["unsorted"] == 0
    assert answers() == before


def test_compaction_puts_alike_pictures_in_the_same_blocks(tmp_path):
    """Pictures of 8 kinds, added interleaved: compaction moves them so that each block of
    the bounds holds one kind (tight bounds), while ids, vectors and answers stay."""
    rng = np.random.default_rng(3)
    n, kinds, words = 2048, 8, [f"w{t}" for t in range(12)]
    means = rng.normal(0, 3, (kinds, len(words)))
    Z = (means[np.arange(n) % kinds] + rng.normal(0, 0.3, (n, len(words)))).astype(np.float32)
    qs = [rng.uniform(-1, 1, len(words)).astype(np.float32) * (rng.random(len(words)) < 0.3)
          for _ in range(20)]
    qs = [q for q in qs if q.any()]
    block = scores_mod.BLOCK

    def pure_blocks(ix):
        ids = ix._matrix.ids_of(np.arange(n))
        kind = (ids - 1) % kinds  # ids are given in insertion order, from 1
        return np.mean([len(set(kind[b:b + block])) == 1 for b in range(0, n, block)])

    with Index.create(tmp_path / "ix", words, np.ones(len(words))) as ix:
        ix.add(entries(n), Z)
        ix.seal()
        before = [[(h.id, h.score) for h in ix.search(q, 10)] for q in qs]
        assert pure_blocks(ix) == 0  # interleaved: every block mixes the kinds
        with Index.open(tmp_path / "ix") as reader:  # its state predates the move
            reader.search(qs[0], 10)
            assert ix.compact()
            assert pure_blocks(ix) > 0.9
            assert not ix.compact()  # ordered already: nothing to do
            np.testing.assert_array_equal(reader.vector(5), Z[4])  # not another's column
            for q, exp in zip(qs, before):
                assert [(h.id, h.score) for h in ix.search(q, 10)] == exp
                assert [(h.id, h.score) for h in reader.search(q, 10)] == exp
        for i in (1, 2, 1000, n):
            np.testing.assert_array_equal(ix.vector(i), Z[i - 1])
    with Index.open(tmp_path / "ix") as again:  # the catalogue recorded the new columns
        assert pure_blocks(again) > 0.9
        assert [(h.id, h.score) for h in again.search(qs[1], 10)] == before[1]


def test_a_compaction_whose_commit_fails_leaves_the_writer_as_it_was(tmp_path, monkeypatch):
    from pamir.index.catalog import Catalog

    Z = pictures(300)
    with Index.create(tmp_path / "ix", WORDS, np.ones(5)) as ix:
        ix.add(entries(300), Z)
        q = np.array([1, 0.5, 0, 0, -0.3], np.float32)
        before = [(h.id, h.score) for h in ix.search(q, 10)]

        def disk_full(self, old, new):
            raise OSError("database or disk is full")

        monkeypatch.setattr(Catalog, "move_columns", disk_full)
        with pytest.raises(OSError, match="disk is full"):
            ix.compact()
        monkeypatch.undo()
        assert [(h.id, h.score) for h in ix.search(q, 10)] == before
        np.testing.assert_array_equal(ix.vector(7), Z[6])
        ix.add(entries(310)[300:], pictures(310)[300:])  # a later commit of the layout
        assert ix.compact()
    with Index.open(tmp_path / "ix", writable=True) as again:
        np.testing.assert_array_equal(again.vector(7), Z[6])
        assert [(h.id, h.score) for h in again.search(q, 10, method="brute")] == \
            [(h.id, h.score) for h in again.search(q, 10)]


def test_compacting_twice_moves_nothing_the_second_time(tmp_path, monkeypatch):
    monkeypatch.setattr(scores_mod, "SHARD_COLUMNS", 32)
    monkeypatch.setattr(scores_mod, "MIN_CAPACITY", 32)
    with Index.create(tmp_path / "ix", WORDS, np.ones(5)) as ix:
        ix.add(entries(64), pictures(64))
        ix.remove(range(1, 33))  # the first shard has no picture left
        assert ix.compact()
        moves = ix._catalog.meta("moves")
        assert not ix.compact() and ix._catalog.meta("moves") == moves
