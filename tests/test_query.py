"""The query grammar (pamir.text.query) and how the index answers it: exclusions, weights, phrases,
the score floor, sorting by date and folder filters."""

from __future__ import annotations

import os

import numpy as np
import pytest

from pamir.zeroshot import classes as zeroshot
from pamir.text.bridge import CLASS_MIX
from pamir.index import CLASS_SCALE, Index, QueryError
from pamir.text.query import QuerySyntaxError, parse, resolve
from pamir.text.vectors import query_vector

VOCAB = ["red", "green", "blue", "stripes", "polar_bear", "sky"]
IDF = np.array([1.0, 1.5, 2.0, 0.5, 3.0, 1.2])


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    """The grammar alone: words outside the vocabulary stay unknown (test_bridge maps them)."""
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def terms(text):
    return [(t.text, t.weight, t.phrase) for t in parse(text).terms]


def test_words_weights_exclusions_phrases():
    assert terms("a red flower in the garden") == [("red", 1, False), ("flower", 1, False),
                                                   ("garden", 1, False)]
    assert terms("-water tiger^2 3:sky +grass") == [("water", -1, False), ("tiger", 2, False),
                                                    ("sky", 3, False), ("grass", 1, False)]
    assert terms('"polar bear" -"dry grass"^1.5 "sky"') == [
        ("polar bear", 1, True), ("dry grass", -1.5, True), ("sky", 1, False)]
    assert terms("2:tiger^2") == [("tiger", 4, False)]
    assert terms("red red RED") == [("red", 1, False)]  # a word counts once
    assert terms('"unclosed phrase') == [("unclosed phrase", 1, True)]
    assert terms("t-shirt rock'n'roll") == [("t-shirt", 1, False), ("rock'n'roll", 1, False)]
    assert terms("0:red ^ - + :") == []  # zero weight, stray operators: nothing


def test_options():
    p = parse('tiger floor:0.25 sort:date in:holidays in:"/my pictures/2021"')
    assert [t.text for t in p.terms] == ["tiger"]
    assert p.floor == 0.25 and p.sort == "newest"
    assert p.folders == ["holidays", "/my pictures/2021"]
    assert parse("x sort:oldest min:-1").sort == "oldest" and parse("x min:-1").floor == -1
    assert parse("x").floor is None and parse("x").sort == "score"
    assert [t.text for t in parse("minimal:tiger").terms] == ["minimal", "tiger"]
    with pytest.raises(QuerySyntaxError, match="number"):
        parse("tiger floor:high")
    with pytest.raises(QuerySyntaxError, match="sort"):
        parse("tiger sort:size")
    with pytest.raises(QuerySyntaxError, match="finite"):
        parse("tiger floor:inf")


def test_plain_words_give_the_papers_query_vector():
    q = resolve(parse("red stripes"), VOCAB, IDF)
    np.testing.assert_allclose(q.vector, query_vector([0, 3], IDF), rtol=1e-6)
    assert q.words == ["red", "stripes"] and q.unknown == []


def test_weights_exclusions_phrases_in_the_vector():
    q = resolve(parse("red^2 -blue unicorn"), VOCAB, IDF)
    v = np.zeros(len(VOCAB))
    v[0], v[2] = 2 * IDF[0], -IDF[2]
    np.testing.assert_allclose(q.vector, v / np.linalg.norm(v), rtol=1e-6)
    assert q.unknown == ["unicorn"] and [m.how for m in q.matches] == ["vocabulary"] * 2 + [
        "unknown"]
    # a phrase that is a vocabulary entry; a phrase of known words is those words
    q = resolve(parse('"polar bear" "blue sky"'), VOCAB, IDF)
    assert q.words == ["polar_bear", "blue", "sky"]
    assert [m.describe() for m in q.matches] == ["polar bear -> polar_bear",
                                                 "blue sky -> blue sky"]
    assert resolve(parse("-red^3"), VOCAB, IDF).matches[0].describe() == "-red^3 -> red"


@pytest.fixture
def index(tmp_path):
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(40, len(VOCAB))).astype(np.float32)
    with Index.create(tmp_path / "ix", VOCAB, IDF) as ix:
        entries = [{"path": f"/pics/{'beach' if i % 2 else 'city'}/{i:02d}.png", "size": 1,
                    "mtime_ns": (i * 7919) % 40, "hash": f"h{i}"} for i in range(40)]
        ids = ix.add(entries, Z)
        yield ix, Z, ids


def test_negative_weights_are_exact_in_the_index(index):
    ix, Z, ids = index
    q = ix.parse_query("green -stripes^2 sky")
    hits = ix.search(q, 40)
    expected = Z @ q.vector
    assert [h.id for h in hits] == [ids[j] for j in np.argsort(-expected, kind="stable")]
    np.testing.assert_allclose([h.score for h in hits], np.sort(expected)[::-1], rtol=1e-5)
    assert q.vector[3] < 0


def test_floor_can_leave_nothing(index):
    ix, Z, ids = index
    q = ix.parse_query("red")
    s = Z @ q.vector
    hits = ix.search("red floor:0.5", 40)
    assert len(hits) == int((s >= 0.5).sum()) > 0 and all(h.score >= 0.5 for h in hits)
    assert ix.search("red floor:100", 10) == []  # "nothing relevant" is an answer
    assert ix.search(q, 40, floor=100) == []


def test_sort_by_date_and_folders(index):
    ix, Z, ids = index
    when = {ids[i]: (i * 7919) % 40 for i in range(40)}
    top = ix.search("blue", 5)
    newest = ix.search("blue sort:date", 5)
    assert {h.id for h in newest} == {h.id for h in top}  # the same 5 best, by date
    assert [when[h.id] for h in newest] == sorted((when[h.id] for h in top), reverse=True)
    oldest = ix.search("blue sort:oldest floor:0", 40)  # every picture over the floor
    assert [when[h.id] for h in oldest] == sorted(when[h.id] for h in oldest)
    assert len(oldest) == int((Z @ ix.parse_query("blue").vector >= 0).sum())
    beach = ix.search("blue in:beach", 40)
    assert len(beach) == 20 and all("/beach/" in h.path for h in beach)
    assert len(ix.search("blue in:/pics/city", 40)) == 20
    assert ix.search("blue in:/pics/ci", 40) == []  # a folder, not a prefix of a name
    assert ix.search("blue in:nowhere", 5) == []


def test_errors(index):
    ix, _, _ = index
    for text, needle in [("", "empty"), ("the of", "stop words"), ("unicorn", "vocabulary"),
                         ("red floor:x", "number"), ("red sort:size", "sort"),
                         ("floor:1", "no words")]:
        with pytest.raises(QueryError, match=needle):
            ix.parse_query(text)
    with pytest.raises(QueryError) as e:
        ix.parse_query("unicorn dragon")
    assert e.value.unknown == ["unicorn", "dragon"]
    assert os.environ["PAMIR_EMBEDDINGS"] == "0"


def test_more_like_this_is_centred_cosine(index):
    ix, Z, ids = index
    hits = ix.similar(Z[3], 5, exclude=[ids[3]])
    Zc = Z - Z.mean(axis=0)
    cos = Zc @ Zc[3] / (np.linalg.norm(Zc, axis=1) * np.linalg.norm(Zc[3]))
    cos[3] = -np.inf
    assert [h.id for h in hits] == [ids[j] for j in np.argsort(-cos)[:5]]
    np.testing.assert_allclose([h.score for h in hits], np.sort(cos)[::-1][:5], rtol=1e-4)
    assert ix.id_of_path("/pics/beach/03.png") == ids[3]


def test_the_class_bridge_of_a_cnn_index(tmp_path, monkeypatch):
    """An index of a CNN representation also stores the classifier's class probabilities; a
    word outside the vocabulary that names a class is answered with them."""
    from pamir.system import index_transform
    from fakes import FakeEmbedder, use_fake_embedder

    use_fake_embedder(monkeypatch)
    vocab = ["red", "green", "blue", "sky", "stripes"]
    # as with ImageNet's 1,000 classes, most of a picture's probability is on other classes
    classes = FakeEmbedder.CLASSES + ["anything else"]
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(20, 5)).astype(np.float32)
    P = np.tile(np.float32([0.01, 0.01, 0.98]), (20, 1))
    P[7] = [0.9, 0.01, 0.09]  # picture 7: a fire engine, says the classifier
    P[3] = [0.01, 0.8, 0.19]  # picture 3: a zebra

    class CNN:
        def class_scores(self, paths):
            logits = np.log(P[[int(p) for p in paths]])
            return logits, np.ones(len(paths), bool), [None] * len(paths)

    class System:
        pipeline = type("Concat", (), {"parts": [object(), CNN()]})()

        def transform_paths(self, paths):
            return Z[[int(p) for p in paths]], np.ones(len(paths), bool), [None] * len(paths)

    transform = index_transform(System(), classes=True)
    Zc, ok, _ = transform([str(i) for i in range(20)])
    assert Zc.shape == (20, 8) and ok.all()
    np.testing.assert_allclose(Zc[:, 5:].sum(axis=1), 1, rtol=1e-5)  # probabilities
    with Index.create(tmp_path / "ix", vocab, np.ones(5), classes=classes) as ix:
        ids = ix.add([{"path": f"/p/{i}", "size": 1, "mtime_ns": 1, "hash": f"h{i}"}
                      for i in range(20)], Zc)
        q = ix.parse_query("firetruck")
        assert q.words == [] and q.matches[0].how == "classes"
        assert q.mapped[0].describe() == "firetruck -> ImageNet: fire engine 0.90"
        assert ix.search(q, 1)[0].id == ids[7]
        q = ix.parse_query("zebras red")  # a vocabulary word and a mapped one: mixed
        assert "ImageNet: zebra 0.90" in q.matches[0].describe()
        assert q.class_mix == pytest.approx(CLASS_MIX / 2)  # zebras is half of the query
        s = ix.scores(q.vector)  # the text part alone is z . q, on the words' rows
        np.testing.assert_allclose(s, Z @ q.vector, rtol=1e-5)

        def std(x):
            return (x - x.mean()) / x.std()

        # the class part: the term's mass score, in [0, 1], CLASS_SCALE deviations at most
        (w, v), = q.class_terms
        expected = (1 - q.class_mix) * std(Z @ q.vector) + q.class_mix * CLASS_SCALE * (
            w * zeroshot.mass_score(Zc[:, 5:] @ v))
        hits = ix.search(q, 20)
        assert [h.id for h in hits] == [ids[j] for j in np.argsort(-expected)]
        np.testing.assert_allclose([h.score for h in hits], np.sort(expected)[::-1],
                                   rtol=1e-4, atol=1e-5)
        assert ix.search("zebras", 1)[0].id == ids[3]
        assert ix.parse_query("crimson").class_terms == []  # names no class
        assert ix.vector(ids[7]).shape == (5,) and ix.vector(ids[7], classes=True).shape == (8,)
        assert ix.similar(Z[7], 1, exclude=[ids[7]])[0].id != ids[7]
        # a learnt model's grown vocabulary keeps the class rows after the words
        ix.rescore(vocab + ["zebra"], np.ones(6), lambda paths: (
            np.hstack([Z[[int(p[3:]) for p in paths]], np.zeros((len(paths), 1)),
                       P[[int(p[3:]) for p in paths]]]), np.ones(len(paths), bool),
            [None] * len(paths)))
        assert ix.rows == 9 and ix.search("firetruck", 1)[0].id == ids[7]
