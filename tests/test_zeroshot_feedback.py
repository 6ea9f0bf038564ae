"""Issue 54: pseudo-relevance feedback for a bare folder's queries that ImageNet's classes
alone answer (pamir.zeroshot.feedback)."""

from __future__ import annotations

import numpy as np
import pytest

from pamir.index import Index
from pamir.zeroshot import classes as zeroshot
from pamir.zeroshot import feedback
from pamir.zeroshot.imagenet import imagenet_class_names

TIGER, GRASS, CUP = 292, 0, 968  # tiger, a stand-in for the grass a tiger lies in, a cup


def pictures() -> np.ndarray:
    """(8 x 1000): five tigers in grass, a picture of grass alone that the query misses,
    two cups; each row a distribution."""
    P = np.full((8, 1000), 1e-5, np.float32)
    for i, tiger in enumerate((0.6, 0.5, 0.45, 0.4, 0.35)):
        P[i, TIGER], P[i, GRASS] = tiger, 0.5 - tiger / 2
    P[5, GRASS] = 0.6
    P[6, CUP] = P[7, CUP] = 0.9
    return P / P.sum(axis=1, keepdims=True)


def test_the_best_pictures_other_classes_lift_their_look_alikes():
    P = pictures()
    scores = zeroshot.mass_score(P[:, TIGER]).astype(np.float32)
    scores[7] = -np.inf  # left out: stays out
    roots = np.sqrt(P).T
    again = feedback.rerank(scores, roots, k=3, weight=0.7)
    assert np.isneginf(again[7])
    # the grass picture, like the tigers in all but the tiger, passes the cup now
    assert abs(scores[5] - scores[6]) < 0.01 and again[5] > again[6] + 1
    assert list(np.argsort(-again)[:5]) == [0, 1, 2, 3, 4]
    # weight 0: the scores' own order
    assert list(np.argsort(-feedback.rerank(scores, roots, 3, 0.0))) == \
        list(np.argsort(-scores, kind="stable"))


def entries(n):
    return [{"path": f"/p/{i}.jpg", "size": 1, "mtime_ns": i, "hash": f"h{i}"}
            for i in range(n)]


@pytest.mark.parametrize("fingerprint", ["zero-caption/1/abc", "a fitted model"])
def test_a_bare_folders_class_query_is_fed_back(tmp_path, monkeypatch, fingerprint):
    """Through the index: a zero-caption index ranks a classes-only query by the feedback
    (what rerank gives of the scanned scores); another index, or PAMIR_FEEDBACK=0, by the
    classes alone."""
    P = pictures()
    with Index.create(tmp_path / "ix", [], np.zeros(0), classes=imagenet_class_names(),
                      fingerprint=fingerprint) as ix:
        ids = ix.add(entries(len(P)), P)
        hits = ix.search("tiger", 8)
        plain = zeroshot.mass_score(P[:, TIGER])
        if fingerprint.startswith("zero-caption"):
            want = feedback.rerank(plain.astype(np.float32), np.sqrt(P).T)
            assert [h.id for h in hits] == [ids[i] for i in np.argsort(-want, kind="stable")]
            assert [h.score for h in hits] == pytest.approx(np.sort(want)[::-1], abs=1e-5)
            monkeypatch.setenv(feedback.ENABLED_ENV, "0")
            hits = ix.search("tiger", 8)
        assert [h.score for h in hits] == pytest.approx(np.sort(plain)[::-1], abs=1e-5)
