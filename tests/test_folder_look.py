"""A bare folder's own look (pamir.zeroshot.folder, pamir.jobs.folder_look): each picture's
classes mixed with its most alike pictures', and the folder's keywords reaching the pictures
that carry none, chosen and calibrated on held-out tagged pictures, with no command."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from PIL import Image

from pamir.calibration import load_calibration
from pamir.index import Index
from pamir.index.layout import FOLDER_LOOK
from pamir.zeroshot import folder
from fakes import run


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    """Words reach ImageNet's classes through WordNet's table alone (the embedding model
    would take a test half a minute)."""
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def clusters(n: int, k: int, dim: int = 32, seed: int = 0, noise: float = 0.3):
    """n unit vectors around k centres (round robin), and each one's centre."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, dim))
    which = np.arange(n) % k
    X = centres[which] + noise * rng.normal(size=(n, dim))
    return (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32), which


def test_a_picture_takes_the_classes_of_its_series():
    X, which = clusters(40, 2)
    P = np.zeros((40, 1000), np.float32)
    P[which == 0, 1] = 1.0  # the first series: class 1, surely
    P[which == 1, 2] = 1.0
    P[0] = 0.001  # but the classifier was unsure of one of them
    smoothed = folder.smooth(P, X)
    assert smoothed[0].argmax() == 1
    assert smoothed[0, 1] == pytest.approx(0.3 * 0.001 + 0.7 * 1.0, abs=1e-4)  # 10 of its own
    np.testing.assert_allclose(smoothed.sum(axis=1), 1.0, rtol=1e-5)
    # among a handful of pictures, none is another's series
    few = folder.smooth(P[:5], X[:5])
    np.testing.assert_array_equal(few, P[:5])


def words_of(which, names, noise_word=None, seed=1):
    rng = np.random.default_rng(seed)
    captions = [[names[w]] for w in which]
    if noise_word:  # a word of a keyword tree's root: on pictures of every kind
        for i in rng.choice(len(captions), len(captions) // 4, replace=False):
            captions[i].append(noise_word)
    return captions


def test_the_folders_words_reach_look_alike_pictures_and_say_how_sure():
    X, which = clusters(90, 3, seed=2)
    names = ["kiwi", "lemur", "fjord"]
    tagged = np.arange(60)
    captions = words_of(which[tagged], names, noise_word="archive")
    P = np.full((90, 1000), 1e-3, np.float32)
    classes = lambda vocabulary: sp.csr_matrix((len(vocabulary), 1000))  # noqa: E731
    words = folder.fit_folder_words(X[tagged], captions, P[tagged], classes)
    assert words.vocabulary == ["archive", "fjord", "kiwi", "lemur"]
    assert folder.better(words) and words.held_out["words_voting"] == 3  # not "archive"
    rows = words.rows(X[60:], P[60:])
    for t, name in enumerate(words.vocabulary[1:], start=1):
        truth = which[60:] == names.index(name)
        assert rows[truth, t].min() > rows[~truth, t].max()  # its pictures first
    assert np.ptp(rows[:, 0]) == 0  # a word that votes for nothing ranks nothing
    # calibrated: a picture of the word is likely, another one is not
    q = np.zeros(words.T, np.float32)
    q[words.vocabulary.index("kiwi")] = 1
    p = words.calibration.probability(rows[:, words.vocabulary.index("kiwi")], q,
                                      [words.vocabulary.index("kiwi")])
    kiwi = which[60:] == 0
    assert p[kiwi].min() > 0.5 > p[~kiwi].max()
    # a vocabulary only grows: the index's words stay first, in their order
    grown = folder.fit_folder_words(X[tagged], captions, P[tagged], classes,
                                    before=["zebra", "kiwi"])
    assert grown.vocabulary[:2] == ["zebra", "kiwi"] and "lemur" in grown.vocabulary


def test_a_folder_look_is_saved_whole_and_read_back(tmp_path):
    X, which = clusters(60, 3, seed=3)
    captions = words_of(which, ["kiwi", "lemur", "fjord"])
    P = np.full((60, 1000), 1e-3, np.float32)
    words = folder.fit_folder_words(X, captions, P,
                                    lambda v: sp.csr_matrix((len(v), 1000)))
    look = folder.FolderLook(np.zeros(1280, np.float32), np.ones(1280, np.float32),
                             np.array([f"{i:032x}" for i in range(60)]), "sig", words)
    look.save(tmp_path / FOLDER_LOOK)
    back = folder.FolderLook.load(tmp_path / FOLDER_LOOK)
    assert back.vocabulary == words.vocabulary and back.signature == "sig"
    assert back.changed([f"{i:032x}" for i in range(1, 61)]) == 2
    np.testing.assert_allclose(back.words.rows(X, P), words.rows(X, P), rtol=1e-5)
    # the index reads its calibration as a model's
    assert load_calibration(tmp_path / FOLDER_LOOK).T == words.T
    (tmp_path / FOLDER_LOOK / "arrays.npz").write_bytes(b"damaged")
    with pytest.raises((OSError, ValueError)):
        folder.FolderLook.load(tmp_path / FOLDER_LOOK)


# ------------------------------------------------------------------ `pamir index FOLDER`
COLOURS = {"red": (220, 30, 30), "green": (40, 180, 50), "blue": (40, 60, 210)}


def tagged_folder(folder_path: Path, n: int = 45, untagged=range(36, 45), seed: int = 4):
    """Red, green and blue pictures, plain or striped; all but `untagged` carry their colour
    in a Google Takeout sidecar (NAME.EXT.json), as a person's folder does. Returns
    {name: colour} of the untagged ones."""
    rng = np.random.default_rng(seed)
    folder_path.mkdir(parents=True)
    names = list(COLOURS)
    bare = {}
    for i in range(n):
        colour = names[i % 3]
        a = np.clip(np.array(COLOURS[colour], np.float32) + rng.normal(0, 14, (40, 48, 3)), 0, 255)
        if (i // 3) % 2:
            a[:, ::4] = 250
        name = f"p{i:03d}.png"
        Image.fromarray(a.astype(np.uint8)).save(folder_path / name)
        if i in untagged:
            bare[name] = colour
        else:
            (folder_path / f"{name}.json").write_text(json.dumps({"description": colour}))
    return bare


def search(ix, query, k=9):
    body = json.loads(run("search", query, "--index", ix, "--json", "-k", k).stdout)
    return body


def test_a_bare_folders_keywords_reach_its_untagged_pictures(tmp_path):
    pictures, ix = tmp_path / "pictures", tmp_path / "ix"
    bare = tagged_folder(pictures)
    r = run("index", pictures, "--index", ix, "--no-text", "--no-faces")
    assert "words of 36 tagged pictures" in r.output
    with Index.open(ix) as index:
        assert {"red", "green", "blue"} <= set(index.vocabulary)
        assert index.calibration is not None
        assert (ix / FOLDER_LOOK / "model.json").is_file()
    for colour in COLOURS:
        body = search(ix, colour, 15)
        hits = [Path(h["path"]).name for h in body["hits"]]
        untagged = [h for h in hits if h in bare]
        # the 12 tagged pictures hold the word as a fact and come first; then the untagged
        # pictures of the colour, by the folder's words alone (ImageNet has no "blue")
        assert untagged[:3] == sorted((n for n in bare if bare[n] == colour),
                                      key=untagged.index)[:3]
        assert all(bare[h] == colour for h in untagged[:3])
        likely = [h for h in body["hits"] if Path(h["path"]).name in bare
                  and h.get("probability") is not None and h["probability"] >= 0.5]
        assert likely and all(bare[Path(h["path"]).name] == colour for h in likely)
    # again, nothing changed: the look is current, the index as it was
    r = run("index", pictures, "--index", ix, "--no-text", "--no-faces")
    assert "folder's look" not in r.output
    # `pamir annotate` with no model gives an indexed picture the folder's words, calibrated
    name, colour = next(iter(bare.items()))
    body = json.loads(run("annotate", pictures / name, "--index", ix, "--json").stdout)
    own = [w for w in body["keywords"] if w.get("source") == "folder"]
    assert own[0]["word"] == colour and 0 < own[0]["probability"] <= 1
    # --xmp writes the folder's words at the bar its held-out tagged pictures chose, and
    # says it
    chosen = folder.FolderLook.load(ix / FOLDER_LOOK).words.held_out["write"]
    assert chosen["bar"] in folder.WRITE_BARS and chosen["precision"] >= 0.5
    r = run("annotate", pictures / name, "--index", ix, "--xmp")
    assert f"the folder's words of probability {chosen['bar']:g} or more" in r.output
    # ImageNet's words, judged by the folder's own tags (colours: never one of them), are not
    assert chosen["imagenet"]["bar"] is None and "none of ImageNet's words" in r.output
    if own[0]["probability"] >= chosen["bar"]:
        assert f"pamir|{colour}" in (pictures / f"{name}.xmp").read_text()
    # and so does `pamir index --write-xmp`, from the index's rows, for every untagged picture
    r = run("index", pictures, "--index", ix, "--no-text", "--no-faces", "--write-xmp")
    written = [n for n, c in bare.items() if (pictures / f"{n}.xmp").is_file()
               and f"pamir|{c}" in (pictures / f"{n}.xmp").read_text(encoding="utf-8")]
    assert len(written) >= len(bare) // 2, written
    # and so does the server, for the picture and for an upload of it
    from fastapi.testclient import TestClient

    from pamir.server.app import create_app

    with TestClient(create_app(ix)) as client:
        r = client.post("/api/annotate", content=(pictures / name).read_bytes(),
                        headers={"content-type": "image/png"})
        assert r.status_code == 200 and r.json()["keywords"][0]["word"] == colour


def test_tags_that_change_are_learnt_and_pamirs_own_words_never(tmp_path):
    pictures, ix = tmp_path / "pictures", tmp_path / "ix"
    tagged_folder(pictures)
    run("index", pictures, "--index", ix, "--no-text", "--no-faces")
    # the person adds a word to some pictures; pamir's own guess `pamir|bright` (what
    # `pamir annotate --xmp` writes) is on others, as an XMP sidecar
    for i in range(0, 12, 3):
        (pictures / f"p{i:03d}.png.json").write_text(json.dumps({"description": "red crimson"}))
    for i in range(1, 12, 3):
        (pictures / f"p{i:03d}.png.xmp").write_text(GUESS.replace("WORD", "bright"))
    r = run("index", pictures, "--index", ix, "--no-text", "--no-faces")
    assert "folder's look" in r.output
    with Index.open(ix) as index:
        assert index.vocabulary[:3] == ["blue", "green", "red"]  # grown at its end
        assert "crimson" in index.vocabulary and "bright" not in index.vocabulary
    # a model later: the index is rebuilt for it, its folder look gone with the old index
    assert (ix / FOLDER_LOOK).is_dir()
    Index.destroy(ix)
    assert not ix.exists()


GUESS = """<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF
 xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
 xmlns:dc="http://purl.org/dc/elements/1.1/"
 xmlns:lr="http://ns.adobe.com/lightroom/1.0/">
 <rdf:Description rdf:about="">
  <dc:subject><rdf:Bag><rdf:li>WORD</rdf:li></rdf:Bag></dc:subject>
  <lr:hierarchicalSubject><rdf:Bag><rdf:li>pamir|WORD</rdf:li></rdf:Bag></lr:hierarchicalSubject>
 </rdf:Description></rdf:RDF></x:xmpmeta>"""


def test_the_folder_look_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("PAMIR_FOLDER_LOOK", "0")
    pictures, ix = tmp_path / "pictures", tmp_path / "ix"
    tagged_folder(pictures)
    run("index", pictures, "--index", ix, "--no-text", "--no-faces")
    with Index.open(ix) as index:
        assert index.T == 0 and not (ix / FOLDER_LOOK).exists()


def test_pamir_watch_keeps_the_folders_words_current(tmp_path):
    from pamir.jobs.watch import watch_in_thread, watcher_of_index

    pictures, ix = tmp_path / "pictures", tmp_path / "ix"
    bare = tagged_folder(pictures)
    run("index", pictures, "--index", ix, "--no-text", "--no-faces")
    lines = []
    watcher = watcher_of_index(ix, [pictures], say=lines.append, text=False, faces=False,
                               quiet=0.2, max_delay=3.0, poll=0.2)
    thread, stop = watch_in_thread(watcher, say=lines.append)

    def vocabulary():
        with Index.open(ix) as index:
            return index.vocabulary

    def wait_for(condition, what, timeout=90.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if condition():
                return
            time.sleep(0.1)
        raise AssertionError(f"waited {timeout} s for {what}: {lines}")

    try:
        wait_for(lambda: watcher.updates >= 1, "the catch-up")
        # the person tags red pictures with a new word while pamir watches; pamir's own
        # guess (`pamir|bright`, what `pamir annotate --xmp` writes) lands on others
        for i in range(0, 12, 3):
            (pictures / f"p{i:03d}.png.json").write_text(json.dumps({"description": "red crimson"}))
        for i in range(1, 12, 3):
            (pictures / f"p{i:03d}.png.xmp").write_text(GUESS.replace("WORD", "bright"))
        wait_for(lambda: "crimson" in vocabulary(), "the new word in the folder's words")
        assert "bright" not in vocabulary()
        assert any("folder's look" in x for x in lines)
        # the new word reaches untagged red pictures through the folder's words
        body = search(ix, "crimson", 45)
        untagged = [Path(h["path"]).name for h in body["hits"] if Path(h["path"]).name in bare]
        assert untagged and bare[untagged[0]] == "red"
    finally:
        stop.set()
        thread.join(timeout=20)
    assert not thread.is_alive()
