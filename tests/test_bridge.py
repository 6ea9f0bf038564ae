"""Words outside the vocabulary (pamir.text.bridge): inflections, then the real packaged
sentence-embedding model on a tiny vocabulary, its cache, and refusing when it is absent."""

from __future__ import annotations

import time

import numpy as np
import pytest

import pamir.text.embedding as embedding
from pamir.text.bridge import Bridge, Inflections, lemmas
from pamir.text.embedding import model_installed
from pamir.index import Index, QueryError
from pamir.text.query import parse, resolve

VOCAB = ["parrot", "eagle", "flower", "car", "water", "leaf", "run", "boxes", "sky"]
IDF = np.linspace(1.0, 2.0, len(VOCAB))


def test_inflections():
    infl = Inflections(VOCAB)
    cases = {"flowers": "flower", "leaves": "leaf", "running": "run", "cars": "car",
             "box": "boxes", "parrots": "parrot", "skies": "sky", "eagles": "eagle"}
    for word, lemma in cases.items():
        assert infl(word) == lemma, word
    for word in ("bird", "class", "bus", "carrot", "waters'"):
        assert infl(word) is None, word
    assert lemmas("swimming")[0] == "swim" and "dive" in lemmas("diving")
    assert "fly" in lemmas("flies") and lemmas("glass") == []


def test_inflection_without_the_model():
    b = Bridge(VOCAB, use_model=False)
    q = resolve(parse("flowers birds"), VOCAB, IDF, b)
    assert [m.describe() for m in q.matches] == ["flowers -> flower", "birds"]
    assert q.words == ["flower"] and q.unknown == ["birds"]


needs_model = pytest.mark.skipif(not model_installed()[0], reason=model_installed()[1])


@needs_model
def test_the_real_model_maps_unknown_words(tmp_path):
    b = Bridge(VOCAB, cache_dir=tmp_path)
    near, note = b.neighbours("bird")
    assert [w for w, _ in near][:2] == ["parrot", "eagle"] and note == ""
    assert all(s >= b.floor for _, s in near)
    assert near[0][1] > 0.6
    assert b.neighbours("automobile")[0][0][0] == "car"
    # a word with no neighbour above the floor: reported with the nearest and the floor
    near, note = b.neighbours("xylophone")
    assert near == [] and "floor" in note
    # the vocabulary's embeddings are cached in the folder, keyed by the vocabulary
    [cache] = tmp_path.glob("vocabulary-embeddings-*.npy")
    E = np.load(cache)
    assert E.shape[0] == len(VOCAB) and np.allclose(np.linalg.norm(E, axis=1), 1, atol=1e-4)
    assert Bridge(VOCAB, cache_dir=tmp_path).vocabulary_embeddings().shape == E.shape
    assert Bridge(VOCAB[:-1], cache_dir=tmp_path).cache_file != cache

    # resolved into a query: a weighted mix of the neighbours, shown to the person
    q = resolve(parse("bird -water"), VOCAB, IDF, b)
    m = q.matches[0]
    assert m.how == "embedding" and m.describe().startswith("bird -> parrot 0.")
    t = {w: VOCAB.index(w) for w, _ in m.words}
    v = np.zeros(len(VOCAB))
    for w, s in m.words:
        v[t[w]] += s * IDF[t[w]]
    v[VOCAB.index("water")] -= IDF[VOCAB.index("water")]
    np.testing.assert_allclose(q.vector, v / np.linalg.norm(v), rtol=1e-5)
    # a phrase is embedded whole
    q = resolve(parse('"sports car" "polar sky"'), VOCAB, IDF, b)
    assert q.matches[0].how == "embedding" and q.matches[0].words[0][0] == "car"

    # once loaded, mapping a new word costs milliseconds (the issue asks <= 20 ms)
    b.neighbours("warm up")
    took = []
    for w in ("lorry", "petal", "river", "hawk", "tulip"):
        t0 = time.perf_counter()
        b.neighbours(w)
        took.append(time.perf_counter() - t0)
    assert min(took) < 0.1  # generous: the machine is shared; benchmarks measure it


@needs_model
def test_the_index_maps_words_through_its_bridge(tmp_path, monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "1")
    rng = np.random.default_rng(0)
    with Index.create(tmp_path / "ix", VOCAB, IDF) as ix:
        ix.add([{"path": f"/p/{i}.png", "size": 1, "mtime_ns": 1, "hash": f"h{i}"}
                for i in range(5)], rng.normal(size=(5, len(VOCAB))).astype(np.float32))
        q = ix.parse_query("birds")  # no inflection of a vocabulary word: the model
        assert q.words[0] == "parrot" and q.mapped[0].how == "embedding"
        assert list((tmp_path / "ix").glob("vocabulary-embeddings-*.npy"))
        with pytest.raises(QueryError, match="floor"):
            ix.parse_query("xylophone")
        with pytest.raises(QueryError, match="vocabulary"):
            ix.parse_query("birds", mapping=False)
    Index.destroy(tmp_path / "ix")
    assert not (tmp_path / "ix").exists()  # the cache went with the index


def test_no_model_installed_refuses_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(embedding, "_embedder", None)
    monkeypatch.setattr(embedding, "_embedder_error", None)
    monkeypatch.setattr(embedding, "model_installed",
                        lambda: (False, "the word-embedding model is not installed (test)"))
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "1")
    b = Bridge(VOCAB)
    assert b.neighbours("bird") == ([], "the word-embedding model is not installed (test)")
    assert "not installed" in b.warm()
    with Index.create(tmp_path / "ix", VOCAB, IDF) as ix:
        with pytest.raises(QueryError, match="not installed") as e:
            ix.parse_query("bird")
        assert e.value.unknown == ["bird"]
        assert ix.parse_query("flowers").words == ["flower"]  # inflections still work
