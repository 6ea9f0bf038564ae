"""The lexicon of precomputed word embeddings (pamir.text.lexicon): its mappings are the model's, a
word it holds is mapped without loading the model (no torch in `pamir search`), a word it
lacks still goes to the model, and `pamir index` builds it once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pamir.text.bridge as bridge_mod
from pamir.text import lexicon
from pamir.text.bridge import Bridge
from pamir.text.embedding import model_installed
from pamir.zeroshot.imagenet import imagenet_class_names
from pamir.zeroshot.imagenet import imagenet_class_names
from pamir.index import Index

#: the similarity floor the ImageNet class names were matched at before pamir.zeroshot.classes
CLASS_FLOOR = 0.6

needs_model = pytest.mark.skipif(not model_installed()[0], reason=model_installed()[1])

#: A Corel-like vocabulary (words of Corel 5k's 179).
VOCAB = ["water", "sky", "tree", "people", "grass", "buildings", "mountain", "flowers", "snow",
         "clouds", "rocks", "bear", "birds", "sand", "beach", "street", "boats", "field",
         "horses", "cat", "tiger", "plane", "jet", "car", "house", "garden", "leaf", "sun",
         "zebra", "caribou", "fish", "ocean", "city", "bridge", "church", "statue", "food"]
#: Query words new to that vocabulary (and the ImageNet class names for the class bridge).
SAMPLE = ["bird", "crimson", "giraffe", "automobile", "puppy", "forest", "lake", "river",
          "kitten", "truck", "airplane", "ship", "castle", "blossom", "desert", "leopard",
          "dolphin", "skyscraper", "meadow", "storm"]


@pytest.fixture
def small_lexicon(tmp_path, monkeypatch):
    """A lexicon of VOCAB, SAMPLE, 200 wordfreq words and the ImageNet class names, in a
    cache folder of its own; its size key is what $PAMIR_LEXICON_WORDS names."""
    monkeypatch.setenv("PAMIR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(lexicon.LEXICON_ENV, "200")
    texts = list(dict.fromkeys([*VOCAB, *SAMPLE,
                                 *lexicon.lexicon_texts(200, imagenet_class_names())]))
    lexicon.build(texts)
    return texts


def _mapping(bridge: Bridge, word: str) -> list[tuple[str, float]]:
    return bridge.neighbours(word)[0]


@needs_model
def test_the_lexicon_maps_as_the_model(small_lexicon, monkeypatch):
    lex = lexicon.lexicon()
    assert lex is not None and len(lex) == len(small_lexicon)
    E = np.asarray(lex.E)
    assert E.dtype == np.float16 and np.allclose(np.linalg.norm(E.astype(np.float32), axis=1),
                                                 1, atol=2e-3)
    words = [w for w in small_lexicon[len(VOCAB):len(VOCAB) + 220] if w not in VOCAB]
    by_lexicon = Bridge(VOCAB, neighbours=3)
    mapped = {w: _mapping(by_lexicon, w) for w in words}
    monkeypatch.setenv(lexicon.LEXICON_ENV, "0")  # the model itself, as without a lexicon
    assert lexicon.lexicon() is None
    by_model = Bridge(VOCAB, neighbours=3)
    compared = 0
    for w in words:
        s = by_model.similarities([w])[0]
        top = np.sort(s)[::-1][:by_model.k + 1]
        # neighbours (or a neighbour and the floor) within float16 rounding of each other may
        # legitimately swap: a word is compared where its answer is decided by more than that
        gaps = [a - b for a, b in zip(top, top[1:]) if a >= by_model.floor - 2e-3]
        if min(gaps, default=1) < 2e-3 or np.any(np.abs(top[:-1] - by_model.floor) < 2e-3):
            continue
        compared += 1
        expected = _mapping(by_model, w)
        assert [v for v, _ in mapped[w]] == [v for v, _ in expected], w
        np.testing.assert_allclose([x for _, x in mapped[w]], [x for _, x in expected],
                                   atol=2e-3, err_msg=w)
    assert compared >= 0.9 * len(words)
    # the ImageNet class bridge too: its class names' embeddings come from the lexicon
    monkeypatch.setenv(lexicon.LEXICON_ENV, "200")
    for w in ("tiger", "leopard", "automobile"):
        near = Bridge(imagenet_class_names(), floor=CLASS_FLOOR).nearest(w)[0]
        monkeypatch.setenv(lexicon.LEXICON_ENV, "0")
        expected = Bridge(imagenet_class_names(), floor=CLASS_FLOOR).nearest(w)[0]
        monkeypatch.setenv(lexicon.LEXICON_ENV, "200")
        assert [c for c, _ in near] == [c for c, _ in expected], w
        np.testing.assert_allclose([s for _, s in near], [s for _, s in expected], atol=2e-3)


def test_only_texts_outside_the_lexicon_go_to_the_model(tmp_path, monkeypatch):
    monkeypatch.setenv("PAMIR_CACHE", str(tmp_path))
    monkeypatch.setenv(lexicon.LEXICON_ENV, "2")
    words_file, vectors_file = lexicon.files()
    words_file.parent.mkdir(parents=True)
    np.save(vectors_file, np.eye(2, 4, dtype=np.float16))
    words_file.write_text("red\ngreen")
    asked = []

    class Fake:
        dim = 4

        def encode(self, texts):
            asked.append(list(texts))
            return np.tile(np.float32([0, 0, 1, 0]), (len(texts), 1))

    monkeypatch.setattr(bridge_mod, "embedder", lambda: Fake())
    E = bridge_mod.embed(["green", "red"])
    assert asked == [] and np.array_equal(E, np.eye(4, dtype=np.float32)[[1, 0]])
    E = bridge_mod.embed(["red", "blue"])
    assert asked == [["blue"]] and np.array_equal(E[1], [0, 0, 1, 0])
    monkeypatch.setenv(lexicon.LEXICON_ENV, "0")  # turned off: everything to the model
    bridge_mod.embed(["red"])
    assert asked[-1] == ["red"]


@needs_model
def test_search_of_a_word_in_the_lexicon_loads_no_model(small_lexicon, tmp_path):
    rng = np.random.default_rng(0)
    ix_dir = tmp_path / "ix"
    with Index.create(ix_dir, VOCAB, np.linspace(1, 2, len(VOCAB))) as ix:
        ix.add([{"path": f"/p/{i}.png", "size": 1, "mtime_ns": 1, "hash": f"h{i}"}
                for i in range(20)], rng.normal(size=(20, len(VOCAB))).astype(np.float32))
        ix.bridge.vocabulary_embeddings()  # as `pamir index` leaves it
    repo = str(Path(__file__).resolve().parents[1])
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": repo, "PAMIR_CACHE": str(tmp_path / "cache"),
           lexicon.LEXICON_ENV: "200", "PAMIR_EMBEDDINGS": "1", "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-X", "importtime", "-c",
                        "from pamir.cli import main; main()", "search", "giraffe", "-k", "3",
                        "--index", str(ix_dir)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "mapped: giraffe -> zebra" in r.stderr  # mapped by meaning...
    assert len(r.stdout.splitlines()) == 3
    imported = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines()
                if line.startswith("import time:")}
    assert "numpy" in imported  # the importtime lines were read
    heavy = {m for m in imported if m.split(".")[0] in ("torch", "sentence_transformers",
                                                        "transformers", "numba", "scipy")}
    assert heavy == set()  # ...with neither the model nor the top-k kernels


@needs_model
def test_pamir_index_builds_the_lexicon_once(tiny_system, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from pamir.cli import app

    _, model, pictures, _ = tiny_system
    monkeypatch.setenv("PAMIR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "1")
    monkeypatch.setenv(lexicon.LEXICON_ENV, "300")
    assert lexicon.missing()
    r = CliRunner().invoke(app, ["index", str(model), str(pictures), "--index",
                                 str(tmp_path / "ix")])
    assert r.exit_code == 0, r.output
    assert "building the lexicon" in r.output and not lexicon.missing()
    assert "water" in lexicon.lexicon() and "tiger shark" in lexicon.lexicon()
    assert list((tmp_path / "ix").glob("vocabulary-embeddings-*.npy"))
    r = CliRunner().invoke(app, ["index", str(model), str(pictures), "--index",
                                 str(tmp_path / "ix")])
    assert r.exit_code == 0 and "building the lexicon" not in r.output
