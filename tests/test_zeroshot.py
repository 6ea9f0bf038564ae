"""Search with no captions (pamir.zeroshot.classes): ImageNet's WordNet table, the bridge over the
classes' descriptions, the mass scores, and `pamir index FOLDER` / `pamir annotate` with no
model on real pictures through the real network."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import pamir.commands.index as product
from pamir.zeroshot import classes as zeroshot
from pamir.zeroshot.imagenet import imagenet_class_names
from pamir.index import Index
from fakes import run
from fakes import FakeEmbedder, FakeSystem, use_fake_embedder
from pictures import make_pictures

@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    """The table and inflections only, unless a test maps words (test_bridge runs the real
    model; embedding 1,000 class descriptions would take a test half a minute)."""
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def test_the_table_is_wordnet_over_imagenet():
    t = zeroshot.table()
    names = imagenet_class_names()
    assert len(t.synsets) == 1860 and len(t) == 3253
    # the first lines are the classes' own synsets, in the classifier's order
    assert all(list(t.synset_classes[k]) == [k] for k in range(1000))
    assert t.synsets[292][0] == "tiger" and names[292] == "tiger"
    assert len(t.classes["bird"]) == 59 and len(t.classes["dog"]) == 118
    assert set(t.classes["tiger"]) <= set(t.classes["feline"]) <= set(t.classes["animal"])
    assert len(t.classes["entity"]) == 1000


def test_words_reach_the_classes_by_table_compound_and_inflection():
    words = zeroshot.ClassWords(imagenet_class_names(), use_model=False)
    m = words.match("birds")
    assert m.how == "inflection" and m.words == [("bird", 1.0)]
    assert m.vector.sum() == 59 and set(np.flatnonzero(m.vector)) == set(
        zeroshot.table().classes["bird"])
    assert words.match("polar bear", ["polar", "bear"]).words == [("polar_bear", 1.0)]
    assert words.match("bear").how == "table"
    gone = words.match("democracy")
    assert gone.how == "unknown" and gone.vector is None


def test_the_embedding_bridge_weighs_the_nearest_classes(monkeypatch):
    use_fake_embedder(monkeypatch)
    names = FakeEmbedder.CLASSES + ["anything else"]
    words = zeroshot.ClassWords(names)  # not ImageNet's list: the names are the texts
    m = words.match("firetruck")
    assert m.how == "embedding" and m.words[0] == ("fire engine", pytest.approx(0.9, abs=1e-6))
    assert m.vector.sum() == pytest.approx(1) and m.vector.argmax() == 0
    assert m.vector[0] > 0.99  # a softmax at TEMPERATURE: the others weigh next to nothing
    far = words.match("crimson")  # near "red" only: no class
    assert far.how == "unknown" and "under the floor" in far.note


def test_mass_scores_are_bounded_and_monotone():
    m = np.array([0.0, 1e-4, 0.01, 0.3, 0.9, 1.0])
    s = zeroshot.mass_score(m)
    assert s[0] == 0 and s[-1] == pytest.approx(1) and np.all(np.diff(s) > 0)


def spread(P: np.ndarray, classes, mass: float) -> None:
    """Put `mass` of each row of P evenly on `classes`, the rest evenly elsewhere."""
    others = np.setdiff1d(np.arange(P.shape[1]), classes)
    P[:, :] = 0
    P[:, classes] = mass / len(classes)
    P[:, others] = (1 - mass) / len(others)


def test_a_hypernym_finds_the_pictures_its_classes_hold(tmp_path):
    """"bird" is no class: the picture whose probability lies on many bird classes, none of
    them high, comes first; a query's terms are an AND."""
    t = zeroshot.table()
    birds, tiger = t.classes["bird"], t.classes["tiger"]
    P = np.zeros((4, 1000), np.float32)
    spread(P[0:1], birds[:12], 0.6)              # 0.05 on each of 12 birds
    spread(P[1:2], np.array([281]), 0.3)         # a tabby cat at 0.3
    spread(P[2:3], np.concatenate([birds[:2], tiger]), 0.9)  # a tiger and birds
    P[3] = 1 / 1000                              # unsure
    with Index.create(tmp_path / "ix", [], np.zeros(0), classes=imagenet_class_names()) as ix:
        ids = ix.add([{"path": f"/p/{i}", "size": 1, "mtime_ns": 1, "hash": f"h{i}"}
                      for i in range(4)], P)
        hits = ix.search("bird", 4)
        assert [h.id for h in hits][:2] == [ids[0], ids[2]]
        assert all(0 <= h.score <= 1 for h in hits)
        assert hits[0].score == pytest.approx(zeroshot.mass_score(P[0, birds].sum()), abs=1e-5)
        assert ix.search("tiger birds", 1)[0].id == ids[2]  # both words: only picture 2
        assert ix.parse_query("birds").matches[0].describe() == "birds -> ImageNet: bird"


@pytest.fixture
def packaged(tmp_path):
    """Pictures that scikit-image ships: a cat (chelsea), a cup of coffee, a rocket."""
    import skimage.data

    folder = tmp_path / "bare"
    folder.mkdir()
    for name in ("chelsea", "coffee", "rocket"):
        Image.fromarray(getattr(skimage.data, name)()).save(folder / f"{name}.png")
    return folder


def test_a_bare_folder_is_searched_and_annotated_with_no_model(packaged, tmp_path):
    ix = tmp_path / "ix"
    r = run("index", packaged, "--index", ix)
    assert "no model" in r.output and "3 pictures indexed" in r.output
    r = run("index", packaged, "--index", ix, "--json")  # again: the same zero-caption index
    assert json.loads(r.stdout)["unchanged"] == 3
    with Index.open(ix) as index:
        assert index.T == 0 and len(index.classes) == 1000
    # hypernyms only: no ImageNet class is called "feline" or "beverage"
    for word, first in (("feline", "chelsea.png"), ("beverage", "coffee.png")):
        assert word not in imagenet_class_names()
        body = json.loads(run("search", word, "--index", ix, "--json").stdout)
        assert Path(body["hits"][0]["path"]).name == first
        assert body["mapping"][0]["how"] == "classes"
    # the order is the classes' probability mass, through the real network
    system = zeroshot.ZeroCaptionSystem(tmp_path / "cache")
    paths = sorted(str(p) for p in packaged.iterdir())
    P, ok, _ = system.class_probabilities(paths)
    mass = P[:, zeroshot.table().classes["feline"]].sum(axis=1)
    body = json.loads(run("search", "feline", "--index", ix, "--json", "-k", "3").stdout)
    assert [h["path"] for h in body["hits"]] == [paths[j] for j in np.argsort(-mass)]
    np.testing.assert_allclose([h["score"] for h in body["hits"]],
                               np.sort(zeroshot.mass_score(mass))[::-1], rtol=1e-4)
    r = run("search", "democracy", "--index", ix, ok=False)
    assert r.exit_code == 2 and "ImageNet" in r.output
    r = run("annotate", packaged / "chelsea.png", "--json")
    words = json.loads(r.stdout)["keywords"]
    # the words a person uses: its class and "cat", not the distant "feline" (whose word the
    # classes' descriptions hardly use: pamir.zeroshot.classes.NAMED_SHARE)
    assert {"egyptian cat", "cat"} <= {w["word"] for w in words}
    assert "feline" not in {w["word"] for w in words}
    assert all(w["source"] == "imagenet" and 0 < w["probability"] <= 1 for w in words)
    check_the_server(ix, packaged / "chelsea.png", words)


def check_the_server(ix: Path, cat: Path, words: list[dict]) -> None:
    """`pamir serve` on a zero-caption index: search, a picture's and an upload's ImageNet
    keywords; feedback and explanations say that they need a model."""
    from fastapi.testclient import TestClient

    from pamir.server.app import create_app

    with TestClient(create_app(ix)) as client:
        hit = client.get("/api/search", params={"q": "feline"}).json()["hits"][0]
        assert hit["name"] == "chelsea.png"
        assert client.get(f"/api/pictures/{hit['id']}").json()["keywords"] == words
        r = client.post("/api/annotate", content=cat.read_bytes(),
                        headers={"content-type": "image/png"})
        assert r.status_code == 200 and r.json()["keywords"] == words
        r = client.get(f"/api/pictures/{hit['id']}/explain", params={"q": "feline"})
        assert r.status_code == 409 and "no model" in r.json()["detail"]
        r = client.post("/api/feedback", json={"q": "feline", "right": [hit["id"]]})
        assert r.status_code == 409
        assert client.get("/api/status").json()["feedback"] is False  # the page hides it


def test_a_first_model_rebuilds_a_zero_caption_index(packaged, tmp_path, monkeypatch):
    ix = tmp_path / "ix"
    run("index", packaged, "--index", ix)
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.json").write_text('{"fake": 1}')
    monkeypatch.setattr(product, "load_system", lambda path: FakeSystem())
    pictures = tmp_path / "pictures"
    make_pictures(pictures)
    r = run("index", model, pictures, "--index", ix)
    assert "answered with no captions so far: rebuilding" in r.output
    with Index.open(ix) as index:
        assert index.T == len(FakeSystem().vocabulary) and index.model_dir
    # with no MODEL, the index keeps the model it has
    r = run("index", pictures, "--index", ix, "--json")
    assert json.loads(r.stdout)["unchanged"] == 9


def test_a_models_own_words_that_name_classes_reach_them(tmp_path, monkeypatch):
    """TABLE_WORDS (off by default): a vocabulary word in ImageNet's table ("tiger") is
    scored by the model and by its classes, mixed; a word outside the table ("sky") by the
    model alone."""
    import pamir.index.queries

    vocabulary = ["sky", "tiger"]
    Z = np.zeros((3, 2 + 1000), np.float32)
    Z[:, :2] = [[1.0, 0.2], [0.0, 0.4], [0.5, 0.3]]  # the model: picture 1 best for tiger
    Z[:, 2:] = 1 / 1000
    Z[2, 2 + zeroshot.table().classes["tiger"]] = 0.9  # the classifier: picture 2 a tiger
    monkeypatch.setattr(pamir.index.queries, "TABLE_WORDS", True)
    with Index.create(tmp_path / "ix", vocabulary, np.ones(2),
                      classes=imagenet_class_names()) as ix:
        ids = ix.add([{"path": f"/p/{i}", "size": 1, "mtime_ns": 1, "hash": f"h{i}"}
                      for i in range(3)], Z)
        q = ix.parse_query("tiger")
        assert q.words == ["tiger"] and len(q.class_terms) == 1
        assert q.matches[0].classes == [("tiger", 1.0)]
        assert ix.search(q, 1)[0].id == ids[2]  # the classes' certainty outweighs 0.1
        assert ix.parse_query("sky").class_terms == []
        monkeypatch.setattr(pamir.index.queries, "TABLE_WORDS", False)
        q = ix.parse_query("tiger")
        assert q.class_terms == [] and ix.search(q, 1)[0].id == ids[1]


def test_a_word_the_class_table_knows_reaches_its_classes_not_the_nearest_words():
    """Issue 37: "fish", outside a vocabulary of penguins and signs, went to the nearest words
    by meaning (penguin 0.42, language 0.41): WordNet's table names its classes, so those
    answer it; a word the table does not know still goes to the nearest words."""
    from pamir.text.query import parse, resolve

    class Near:  # the embedding bridge: any word is near "penguin"
        def inflection(self, word):
            return None

        def neighbours(self, word):
            return [("penguin", 0.42), ("language", 0.41)], ""

    classes = zeroshot.ClassWords(imagenet_class_names(), use_model=False)
    vocabulary = ["penguin", "language"]
    q = resolve(parse("fish"), vocabulary, np.ones(2), Near(), classes=classes, class_mix=0.5)
    assert q.words == [] and q.matches[0].how == "classes" and len(q.class_terms) == 1
    assert q.matches[0].classes == [("fish", 1.0)]
    q = resolve(parse("democracy"), vocabulary, np.ones(2), Near(), classes=classes,
                class_mix=0.5)
    assert q.words == ["penguin", "language"] and q.matches[0].how == "embedding"


def test_the_class_table_takes_plurals_not_verb_forms():
    """ImageNet's classes are nouns: "birds" is a bird, "flying" is not a fly."""
    classes = zeroshot.ClassWords(imagenet_class_names(), use_model=False)
    assert classes.lookup(["birds"]) == "bird" and classes.lookup(["mice"]) == "mouse"
    assert classes.lookup(["flying"]) is None and classes.lookup(["flew"]) is None


def test_the_shipped_class_text_embeddings_are_the_models():
    """The 1,000 class texts' embeddings shipped with the package (issue 35: 40 s of CPU on a
    first fit or index) are what the installed model makes of them, to float16's precision."""
    from pamir.text.bridge import display_text
    from pamir.text.embedding import embedder, model_installed

    E = zeroshot.packaged_class_embeddings()
    if not model_installed()[0]:
        assert E is None
        pytest.skip("the embedding model is not installed")
    assert E is not None and E.shape == (1000, 384) and E.dtype == np.float32
    texts = [display_text(t) for t in zeroshot.imagenet_texts()]
    some = [0, 1, 292, 555, 999]  # tench, goldfish, tiger, fire engine, toilet tissue
    fresh = embedder().encode([texts[i] for i in some])
    assert np.abs(E[some] - fresh).max() < 2e-3
    assert (np.einsum("ij,ij->i", E[some], fresh) > 0.9999).all()
    words = zeroshot.ClassWords(imagenet_class_names())
    assert words.bridge.vocabulary_embeddings() is E  # read, not computed


def test_shipped_embeddings_for_other_weights_are_not_used(monkeypatch):
    import pamir.text.embedding as embedding

    zeroshot.packaged_class_embeddings.cache_clear()
    monkeypatch.setattr(embedding, "model_identity", lambda: "0.2.0 123")
    try:
        assert zeroshot.packaged_class_embeddings() is None
    finally:
        zeroshot.packaged_class_embeddings.cache_clear()


def test_damaged_shipped_embeddings_are_not_used(tmp_path, monkeypatch):
    """A damaged file in the package is computed around, never a crash."""
    (tmp_path / zeroshot.EMBEDDINGS).write_bytes(b"PK\x03\x04 not a zip")

    class Files:
        @staticmethod
        def files(package):
            return tmp_path

    zeroshot.packaged_class_embeddings.cache_clear()
    monkeypatch.setattr(zeroshot, "resources", Files)
    try:
        assert zeroshot.packaged_class_embeddings() is None
    finally:
        zeroshot.packaged_class_embeddings.cache_clear()


def test_annotate_xmp_with_no_model_writes_the_words_likely_enough_and_says_why(packaged,
                                                                              tmp_path):
    """`pamir annotate --xmp` with no model: ImageNet's words whose calibrated probability
    reaches its bar (0.4, chosen on Corel's validation pictures) go under `pamir|`, each with
    why; a picture with none says so."""
    from pamir.facts.metadata import read_metadata

    cat, rocket = packaged / "chelsea.png", packaged / "rocket.png"
    r = run("annotate", cat, rocket, "--xmp", "--index", tmp_path / "none")
    said = [x.strip() for x in r.output.splitlines() if x.strip().startswith("XMP:")]
    assert any(" cat (0." in x and "a word of 7 ImageNet classes" in x for x in said)
    assert any("no word written: none reaches its bar" in x for x in said)  # rocket
    assert "ImageNet's words of probability 0.4 or more" in r.output
    xmp = (packaged / "chelsea.png.xmp").read_text()
    assert "pamir|cat" in xmp and "feline" not in xmp
    assert not (packaged / "rocket.png.xmp").exists()
    # pamir's own words are never read back as the person's
    assert read_metadata(cat).caption is None
    body = json.loads(run("annotate", cat, "--xmp", "--json", "--index", tmp_path / "none").stdout)
    assert "cat" in body["xmp_words"]


def test_the_bar_is_the_least_right_half_the_time_by_a_standard_error():
    bars = (0.3, 0.4, 0.5)
    # 0.3: 52 of 100 right, under 0.5 by a standard error (0.05); 0.4: 60 of 100
    assert zeroshot.least_right_bar(bars, [52, 60, 40], [100, 100, 50]) == (0.4, 0.6)
    assert zeroshot.least_right_bar(bars, [0, 1, 1], [10, 3, 2]) == (None, None)
    assert zeroshot.least_right_bar(bars, [0, 0, 5], [0, 0, 5]) == (0.5, 1.0)  # none written
