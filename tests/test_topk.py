"""Exact top-k from sorted lists (threshold algorithm) against the brute-force reference."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pamir.index.tuning as scores_mod
from pamir.index import Index

WORDS = [f"w{t}" for t in range(6)]


@pytest.fixture
def small_shards(monkeypatch):
    """Shards of 64 columns, segments from 8 columns on: a few hundred pictures exercise
    several shards, segments, tails and dead columns."""
    monkeypatch.setattr(scores_mod, "SHARD_COLUMNS", 64)
    monkeypatch.setattr(scores_mod, "MIN_CAPACITY", 16)
    monkeypatch.setattr(scores_mod, "SEAL_MIN", 8)
    monkeypatch.setattr(scores_mod, "SEAL_AT", 48)
    monkeypatch.setattr(scores_mod, "MAX_SEGMENTS", 3)
    monkeypatch.setattr(scores_mod, "TA_DEPTH_DIVISOR", 1)
    monkeypatch.setattr(scores_mod, "BLOCK", 4)


def entries(start, n):
    return [{"path": f"/p{i % 3}/{i}.jpg", "size": 1, "mtime_ns": (i * 7) % 11, "hash": f"h{i}"}
            for i in range(start, start + n)]


# Scores from a few values, so that ties are common, or from a continuous spread.
score_values = st.sampled_from([np.float32(v) for v in (-1, -0.5, 0, 0.25, 0.5, 1, 2)])


@st.composite
def collections(draw):
    """Batches of pictures (each batch an indexing run: added, maybe sealed), removals and
    compactions in between."""
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, 90))
        if draw(st.booleans()):
            Z = np.array(draw(st.lists(st.lists(score_values, min_size=6, max_size=6),
                                       min_size=n, max_size=n)), np.float32)
        else:
            Z = np.random.default_rng(draw(st.integers(0, 2**31))).standard_normal(
                (n, 6)).astype(np.float32)
        steps.append(("add", Z, draw(st.booleans())))
        if draw(st.booleans()):
            steps.append(("remove", draw(st.lists(st.integers(0, 400), max_size=30))))
        if draw(st.integers(0, 4)) == 0:
            steps.append(("compact",))
    return steps


queries = st.tuples(
    st.dictionaries(st.integers(0, 5), st.sampled_from([-2.0, -1.0, -0.3, 0.5, 1.0, 1.5]),
                    min_size=1, max_size=6),
    st.integers(1, 30),
    st.one_of(st.none(), st.sampled_from([-1.0, 0.0, 0.5, 1.5])),
    st.sampled_from([(), ("/p0",), ("/p1", "/p2")]),
    st.sampled_from(["score", "score", "newest"]))


def build(directory: Path, steps) -> Index:
    index = Index.create(directory, WORDS, np.ones(len(WORDS)))
    added = 0
    for step in steps:
        if step[0] == "add":
            index.add(entries(added, len(step[1])), step[1])
            added += len(step[1])
            if step[2]:
                index.seal()  # the end of an indexing run
        elif step[0] == "remove":
            index.remove(step[1])
        else:
            index.compact()
    return index


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=collections(), qs=st.lists(queries, min_size=1, max_size=4),
       boot=st.sampled_from([0, 1, 4]))
def test_top_k_equals_brute_force_ties_included(small_shards, monkeypatch, steps, qs, boot):
    """Every path, the block-bounded scan included: a short TA (boot steps per result; 0:
    none, the bounds alone) leaves most of it to the scan of the blocks."""
    monkeypatch.setattr(scores_mod, "BOOT_STEPS_PER_RESULT", boot)
    with tempfile.TemporaryDirectory() as tmp:
        with build(Path(tmp) / "idx", steps) as index:
            for weights, k, floor, folders, sort in qs:
                q = np.zeros(len(WORDS), np.float32)
                for t, w in weights.items():
                    q[t] = w
                options = {"floor": floor, "folders": folders, "sort": sort}
                ref = [(h.id, h.score) for h in index.search(q, k, method="brute", **options)]
                for method in ("auto", "ta", "scan"):
                    got = [(h.id, h.score) for h in index.search(q, k, method=method,
                                                                 **options)]
                    assert got == ref, (method, weights, k, options)


def test_segments_compaction_and_reopening_keep_results(small_shards, tmp_path):
    rng = np.random.default_rng(3)
    index = Index.create(tmp_path / "idx", WORDS, np.ones(len(WORDS)))
    for run in range(4):  # four indexing runs: four segments in the first shard, a tail
        index.add(entries(40 * run, 40), rng.standard_normal((40, 6)).astype(np.float32))
        index.seal()
    index.remove(list(range(1, 160, 7)))
    status = index.status()
    assert status["shards"] == 3 and status["segments"] >= 3
    qs = [rng.standard_normal(6).astype(np.float32) * (rng.random(6) < 0.5) for _ in range(20)]
    qs = [q if q.any() else np.eye(6, dtype=np.float32)[0] for q in qs]

    def answers(ix):
        return [[(h.id, h.score) for h in ix.search(q, 17)] for q in qs]

    before = answers(index)
    assert before == [[(h.id, h.score) for h in index.search(q, 17, method="brute")]
                      for q in qs]
    assert index.compact()
    status = index.status()
    assert status["segments"] == status["shards"] and status["unsorted"] == 0
    assert not index.compact()  # nothing left to merge
    assert answers(index) == before
    # a freed column is reused only after the compaction took it out of the lists
    new = index.add(entries(1000, 1), np.full((1, 6), 9, np.float32))
    assert index.picture(new[0]).col < 160
    assert index.search(np.eye(6, dtype=np.float32)[2], 1)[0].id == new[0]
    index.close()
    with Index.open(tmp_path / "idx") as reopened:
        assert answers(reopened)[1:] == answers(index if False else reopened)[1:]
        assert reopened.search(np.eye(6, dtype=np.float32)[2], 1)[0].id == new[0]
