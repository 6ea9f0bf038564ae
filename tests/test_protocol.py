import numpy as np

from pamir.protocol import Protocol, generate_queries
from pamir.data import Collection
from pathlib import Path


def test_corel_collection_counts(corel_protocol):
    c = corel_protocol.collection
    assert len(c.indices("train")) == 4500
    assert len(c.indices("test")) == 499  # the duplicated 161092 line is kept once
    assert c.ids.count("161092") == 1
    assert "121060" in c.ids and c.captions[c.ids.index("121060")] is None
    assert all(p.is_file() for p in c.paths[:50])


def test_corel_test_protocol_matches_tpami_table_1(corel_protocol):
    stats = corel_protocol.stats()
    assert stats["vocabulary"] == 179
    t = stats["test"]
    assert (t["pictures"], t["queries"], t["single_word_queries"]) == (499, 2241, 179)
    assert t["relevant_per_query"] == 2.37 and t["words_per_query"] == 2.51
    assert stats["train"]["pictures"] == 4000 and stats["valid"]["pictures"] == 500
    assert abs(stats["train"]["queries"] - 7220) < 150  # "~7,220" within split noise
    assert abs(stats["valid"]["queries"] - 1990) < 100


def test_jeon_protocol_counts(corel_protocol):
    qs = corel_protocol.queries("test")
    keep = qs.n_relevant >= 2
    counts = [int(((qs.n_words == k) & keep).sum()) for k in (1, 2, 3, 4)]
    assert counts == [179, 385, 176, 24]


def test_split_is_seeded_and_disjoint(corel_protocol):
    p = corel_protocol
    assert not set(p.train) & set(p.valid)
    again = Protocol(p.collection, seed=p.seed)
    assert np.array_equal(again.valid, p.valid)
    other = Protocol(p.collection, seed=p.seed + 1)
    assert not np.array_equal(other.valid, p.valid)


def test_query_subsets(corel_protocol):
    p = corel_protocol
    qs = p.queries("test")
    m = p.query_subsets(qs)
    assert m["single-word"].sum() == 179
    assert (m["easy"] | m["difficult"]).all() and not (m["easy"] & m["difficult"]).any()
    train_terms = set(p.queries("train").terms)
    unseen = [q for q, u in zip(qs.terms, m["unseen"]) if u]
    assert unseen and not set(unseen) & train_terms


def test_generate_queries_hand_case():
    caps = [np.array([0, 1]), np.array([1]), np.array([1, 2])]
    qs = generate_queries(caps, ["a", "b", "c"], np.arange(3))
    assert qs.words == [("a",), ("b",), ("c",), ("a", "b"), ("b", "c")]
    assert qs.relevance.toarray().tolist() == [
        [1, 0, 0], [1, 1, 1], [0, 0, 1], [1, 0, 0], [0, 0, 1]]
    capped = generate_queries(caps, ["a", "b", "c"], np.arange(3), max_words=1)
    assert len(capped) == 3


def test_query_vectors_are_normalised_idf(corel_protocol):
    p = corel_protocol
    qs = p.queries("test")
    Q = p.query_vectors(qs)
    norms = np.sqrt(np.asarray(Q.multiply(Q).sum(axis=1)).ravel())
    assert np.allclose(norms, 1, atol=1e-5)
    two = [i for i, q in enumerate(qs.terms) if len(q) == 2][0]
    a, b = qs.terms[two]
    row = Q[two].toarray().ravel()
    assert np.isclose(row[a] / row[b], p.idf[a] / p.idf[b], rtol=1e-4)


def test_user_collection_without_split_uses_min_count_vocabulary(tmp_path):
    caps = [("sky", "sea"), ("sky",), ("sea", "boat"), ("sky", "boat")] * 5
    coll = Collection("t", tmp_path, [str(i) for i in range(20)], [Path("x")] * 20,
                      caps, [""] * 20)
    p = Protocol(coll)
    assert len(p.valid) == 2 and len(p.train) == 18 and not len(p.test)
    assert p.vocabulary == ["boat", "sea", "sky"]
