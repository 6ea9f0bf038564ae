"""Issue 37: a query whose terms reach ImageNet classes is a top-k over the class rows' block
bounds (pamir.index.class_topk), and it answers exactly what scoring every picture does."""

from __future__ import annotations

import numpy as np
import pytest

import pamir.index.tuning as tuning
from pamir.index import Index
from pamir.index import class_topk
from pamir.text.query import Query

WORDS = ["sky", "sea", "tree"]
CLASSES = [f"class{c}" for c in range(12)]


def entries(n, start=0):
    return [{"path": f"/p/{'ab'[i % 2]}/{i}.jpg", "size": 1, "mtime_ns": i, "hash": f"h{i}"}
            for i in range(start, start + n)]


def columns(n, T, seed=3):
    """n pictures: T word scores, then class probabilities (a softmax, rounded so that
    pictures tie; some classes absent)."""
    rng = np.random.default_rng(seed)
    Z = np.round(rng.standard_normal((n, T)), 1)
    logits = 3 * rng.standard_normal((n, len(CLASSES)))
    P = np.exp(logits)
    P /= P.sum(axis=1, keepdims=True)
    P = np.round(P, 2)
    return np.hstack([Z, P]).astype(np.float32)


def class_query(rng, T, mixed: bool) -> Query:
    terms = []
    for _ in range(rng.integers(1, 4)):
        v = np.zeros(len(CLASSES), np.float32)
        v[rng.choice(len(CLASSES), rng.integers(1, 4), replace=False)] = rng.random(3)[:1]
        v /= v.sum()
        terms.append((float(rng.choice([1.0, 1.0, 2.0, -1.0])), v))
    vector = np.zeros(T, np.float32)
    if mixed:
        vector[rng.integers(0, T)] = 1.0
        if rng.random() < 0.5:
            vector[rng.integers(0, T)] -= 0.5
    words = [WORDS[t] for t in np.flatnonzero(vector)]
    return Query("q", vector, words, [], [], class_terms=terms,
                 class_mix=float(rng.choice([0.5, 1.0])) if words else 0.0)


def answers(ix, q, k, **kw):
    fast = [(h.id, h.score) for h in ix.search(q, k, **kw)]
    scan = [(h.id, h.score) for h in ix.search(q, k, method="brute", **kw)]
    return fast, scan


@pytest.mark.parametrize("T", [len(WORDS), 0])
def test_the_bounded_top_k_equals_the_scan(tmp_path, monkeypatch, T):
    """A model's index (words, then classes) and a zero-caption one (classes alone), in
    segments, with a tail, removed pictures, folder filters, floors and ties."""
    monkeypatch.setattr(tuning, "BLOCK", 4)
    monkeypatch.setattr(class_topk, "FIRST_BLOCKS", 2)
    words = WORDS[:T]
    n = 400
    M = columns(n + 60, T)
    calls = []
    real_top = class_topk.top
    monkeypatch.setattr(class_topk, "top", lambda *a, **kw: calls.append(1) or real_top(*a, **kw))
    with Index.create(tmp_path / f"idx{T}", words, np.ones(T), classes=CLASSES) as ix:
        ix.add(entries(n), M[:n])
        ix.compact()  # one ordered segment with the class rows' bounds
        ix.add(entries(60, n), M[n:])  # a tail the bounds do not cover
        ix.remove([3, 50, 401])
        rng = np.random.default_rng(0)
        for i in range(60):
            q = class_query(rng, T, mixed=bool(T) and i % 2 == 0)
            for k in (1, 7, 40):
                fast, scan = answers(ix, q, k)
                assert fast == scan and len(fast) == k
            fast, scan = answers(ix, q, 10, folders=["a"])
            assert fast == scan
            floor = scan[5][1] if len(scan) > 5 else None
            fast, scan = answers(ix, q, 10, floor=floor)
            assert fast == scan
    assert calls, "the bounded path was not taken"


def test_an_index_without_class_bounds_is_scanned(tmp_path):
    """Segments written before the class rows had bounds: the scan answers."""
    M = columns(100, len(WORDS))
    with Index.create(tmp_path / "idx", WORDS, np.ones(3), classes=CLASSES) as ix:
        ix.add(entries(100), M)
        ix.compact()
        for sh in ix._matrix.shards:
            for seg in sh.segments:
                seg.cmax = None
        v = np.zeros(len(CLASSES), np.float32)
        v[2] = 1.0
        assert class_topk.top(ix._matrix, [(1.0, v)], ix.T, 5) is None
        q = Query("q", np.zeros(3, np.float32), [], [], [], class_terms=[(1.0, v)])
        fast, scan = answers(ix, q, 5)
        assert fast == scan


def test_the_bounds_skip_most_blocks(tmp_path, monkeypatch):
    """The point of the bounds: a one-class query scores a few blocks, not every column."""
    n = 4096
    rng = np.random.default_rng(1)
    P = np.full((n, len(CLASSES)), 0.01, np.float32)
    P[rng.choice(n, 30, replace=False), 5] = 0.9  # thirty pictures of class 5
    M = np.hstack([np.zeros((n, len(WORDS)), np.float32), P])
    scored = []
    real = class_topk.class_part

    def counting(matrix, terms, start, cols=None):
        scored.append(matrix._width if cols is None else len(cols))
        return real(matrix, terms, start, cols)

    monkeypatch.setattr(class_topk, "class_part", counting)
    monkeypatch.setattr(class_topk, "FIRST_BLOCKS", 4)
    with Index.create(tmp_path / "idx", WORDS, np.ones(3), classes=CLASSES) as ix:
        ix.add(entries(n), M)
        ix.compact()
        v = np.zeros(len(CLASSES), np.float32)
        v[5] = 1.0
        q = Query("q", np.zeros(3, np.float32), [], [], [], class_terms=[(1.0, v)])
        hits = ix.search(q, 20)
    assert len(hits) == 20 and all(h.score == hits[0].score for h in hits)
    assert sum(scored) < n / 8  # at most the 30 pictures' blocks, and the first round's


def test_a_querys_words_are_measured_by_the_models_spread(tmp_path):
    """With the prior's spreads (`scales`) a mixed query's words are a standard score in the
    model's units: minus their mean over the pictures, over ||q x scales||, so that they weigh
    what a class term weighs; an index without scales keeps the pictures' own spread. The
    scales survive reopening, a rescore replaces them, and wrong ones are refused."""
    n, T = 40, len(WORDS)
    X = columns(n, T)
    scales = np.array([0.5, 2.0, 1.0])
    q = Query("q", np.array([0.6, 0.8, 0.0], np.float32), ["sky", "sea"], [], [],
              class_terms=[(1.0, np.eye(len(CLASSES), dtype=np.float32)[0])], class_mix=0.5)
    with Index.create(tmp_path / "scaled", WORDS, np.ones(T), classes=CLASSES,
                      scales=scales) as ix:
        ix.add(entries(n), X)
    with Index.open(tmp_path / "scaled", writable=True) as ix:
        assert ix.scales == pytest.approx(scales)
        s = ix.scores(q.vector).astype(np.float64)  # the words' part, column by column
        live = np.isfinite(s)
        z = s[live]
        assert np.sort(z) == pytest.approx(np.sort(X[:, :T] @ q.vector), abs=1e-5)
        base, mult = ix._searcher.class_mix(q)
        sigma = np.linalg.norm(q.vector * scales)  # 0.6 x 0.5, 0.8 x 2.0: 1.628
        assert base[live] == pytest.approx(0.5 * (z - z.mean()) / sigma, abs=1e-5)
        assert mult == pytest.approx(0.5 * 3.0)
        ix.rescore(WORDS, np.ones(T), lambda paths: (X[[int(p.split("/")[-1][:-4])
                                                         for p in paths]],
                                                       np.ones(len(paths), bool), []))
        assert ix.scales is None  # a model without a prior: the pictures' spread again
        s = ix.scores(q.vector).astype(np.float64)  # (a rescore may move the columns)
        live = np.isfinite(s)
        z = s[live]
        base, _ = ix._searcher.class_mix(q)
        assert base[live] == pytest.approx(0.5 * (z - z.mean()) / z.std(), abs=1e-5)
    with pytest.raises(ValueError, match="2 word scales for 3 words"):
        Index.create(tmp_path / "bad", WORDS, np.ones(T), classes=CLASSES, scales=[1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        Index.create(tmp_path / "bad", WORDS, np.ones(T), classes=CLASSES, scales=[1, 0, 1])
    assert not (tmp_path / "bad").exists()  # nothing half-made is left
