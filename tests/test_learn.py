"""Learning after training (issue 13): a round of relevance feedback, `pamir learn` teaching a
new word from a few captioned pictures, and indexes rescored for the grown vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from typer.testing import CliRunner

from pamir.cli import app
from pamir.index import Index, IndexDirError
from pamir.models.pamir import PAMIR
from pamir.training.online import (add_words, apply_delta, feedback_delta, feedback_scores, learn,
                                   neighbour_scores)
from pictures import COLOURS, coloured_pictures

runner = CliRunner()


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


class Linear(PAMIR):
    """A PAMIR (c = 0.1, epsilon = 1) with a given W: the learning is the model's own."""

    def __init__(self, W):
        super().__init__()
        self.W_ = W
        self.idf_ = np.ones(W.shape[0])
        self.T_, self.V_ = W.shape


class Tiny:
    """Just what the learning functions read of a System."""

    def __init__(self, T=4, V=12, seed=0):
        rng = np.random.default_rng(seed)
        self.model = Linear(rng.normal(0, 0.1, (T, V)).astype(np.float32))
        self.vocabulary = [f"w{t}" for t in range(T)]
        self.word_index = {w: t for t, w in enumerate(self.vocabulary)}
        self.idf = np.ones(T)
        self.info = {"pictures": {"train": 100, "valid": 20}}


def test_a_feedback_round_puts_right_above_wrong():
    s = Tiny()
    rng = np.random.default_rng(1)
    F = sp.csr_matrix(rng.random((10, 12)).astype(np.float32))
    q = np.array([0.6, 0.0, 0.8, 0.0])
    before = np.asarray(F @ s.model.W_.T) @ q
    right, wrong = [int(np.argmin(before))], [int(np.argmax(before)), 3]
    W0 = s.model.W_.copy()
    rows, delta = feedback_delta(s, q, F[right], F[wrong])
    assert list(rows) == [0, 2] and delta.shape == (2, 12)
    assert np.array_equal(s.model.W_, W0)  # nothing changed until applied
    after = before + feedback_scores(s, q, rows, delta, F)
    assert after[right[0]] > max(after[wrong]) + 0.99  # PA-I: the margin is met
    apply_delta(s, rows, delta)
    np.testing.assert_allclose(np.asarray(F @ s.model.W_.T) @ q, after, rtol=1e-4, atol=1e-5)
    assert np.array_equal(s.model.W_[[1, 3]], W0[[1, 3]])  # other words' rows untouched
    # no right (or no wrong) picture: nothing to learn from
    rows, delta = feedback_delta(s, q, F[:0], F[wrong])
    assert not delta.any()


def test_neighbour_scores_lift_pictures_near_a_right_one():
    rng = np.random.default_rng(3)
    centres = rng.normal(0, 1, (2, 5))
    Z = np.vstack([c + rng.normal(0, 0.05, (4, 5)) for c in centres])  # two tight groups
    mean = Z.mean(axis=0)
    add = neighbour_scores(Z, Z[[0]], Z[:0], mean, scale=2.0, right_weight=1.5)
    assert add[0] == pytest.approx(3.0)  # the picture itself: similarity 1, x weight x scale
    assert add[1:4].min() > 10 * add[4:].max()  # its group rises, the other barely
    sink = neighbour_scores(Z, Z[:0], Z[[4]], mean, scale=1.0, wrong_weight=0.5)
    assert sink[4] == pytest.approx(-0.5) and sink[5:].max() < 10 * sink[:4].max()
    # with no judged picture, nothing changes
    assert not neighbour_scores(Z, Z[:0], Z[:0], mean, scale=1.0).any()


def test_learn_adds_a_word_from_one_picture():
    s = Tiny()
    rng = np.random.default_rng(2)
    F = sp.csr_matrix(rng.random((6, 12)).astype(np.float32))
    captions = [("w0", "zebra"), ("w1",), ("w0",), ("w2", "w1"), ("w3",), ("w0", "w3")]
    report = learn(s, F, captions, n_updates=600)
    assert report["new_words"] == ["zebra"] and s.vocabulary[-1] == "zebra"
    assert s.model.W_.shape == (5, 12) and len(s.idf) == 5 and len(s.model.idf_) == 5
    assert s.idf[-1] == pytest.approx(-np.log(1 / 106))  # 1 picture of 100 training + 6
    z = np.asarray(F @ s.model.W_.T)[:, -1]
    assert np.argmax(z) == 0  # the zebra picture ranks first for "zebra"
    assert report["updates"] == 600 and s.info["learned"][0]["new_words"] == ["zebra"]
    with pytest.raises(ValueError, match="idf"):
        add_words(s, ["x"], np.ones(3))
    # a new word may start from the words the bridge maps it to
    s = Tiny()
    W = s.model.W_.copy()
    report = learn(s, F, captions, n_updates=0, init={"zebra": [("w0", 0.6), ("w3", 0.2)]})
    np.testing.assert_allclose(s.model.W_[-1], 0.75 * W[0] + 0.25 * W[3], rtol=1e-6)
    assert report["started_from"] == {"zebra": ["w0", "w3"]} and report["updates"] == 0


def test_rescore_grows_the_vocabulary(tmp_path):
    with Index.create(tmp_path / "ix", ["a", "b"], np.ones(2)) as ix:
        ix.add([{"path": f"/p/{i}", "size": 1, "mtime_ns": 1, "hash": f"h{i}"}
                for i in range(3)], np.arange(6, dtype=np.float32).reshape(3, 2))

        def transform(paths):
            n = len(paths)
            return np.tile([1, 2, 3], (n, 1)).astype(np.float32), np.ones(n, bool), [None] * n

        report = ix.rescore(["a", "b", "c"], [1, 1, 2], transform, fingerprint="new")
        assert report == {"rescored": 3, "kept": []}
        assert ix.vocabulary == ["a", "b", "c"] and ix.model_fingerprint == "new"
        assert [h.score for h in ix.search("c", 3)] == [3, 3, 3]
        with pytest.raises(IndexDirError, match="rebuild"):
            ix.rescore(["x", "b"], [1, 1], transform)
    with Index.open(tmp_path / "ix") as ix:  # committed: reopened as it was left
        assert ix.T == 3 and len(list((tmp_path / "ix").glob("scores-*.f32"))) == 1


def test_pamir_learn_teaches_a_new_word(tmp_path, monkeypatch):
    """The real thing: a PAMIR system fitted without the word "stripes" learns it with
    `pamir learn` from 10 new captioned pictures, and the index answers "stripes"; the
    rescoring reads the indexed pictures' features from the cache, decoding none again."""
    import pamir.features.extract as extract
    from pamir.facts.collection import load_collection
    from pamir.features import FeatureSettings
    from pamir.system import System
    from pamir.training import fit_system

    table = coloured_pictures(tmp_path / "pictures", n=48, digits=2)
    lines = table.read_text().splitlines()
    (tmp_path / "pictures" / "train.tsv").write_text("\n".join(
        [lines[0]] + [line.replace(" stripes", "") for line in lines[1:]]) + "\n")
    settings = FeatureSettings(short_side=48, n_visterms=24, n_colours=8, kmeans_iterations=5,
                               colour_max_pictures=48)
    system = fit_system(load_collection(tmp_path / "pictures" / "train.tsv"), "pamir",
                        settings, {"n_updates": 4_000, "eval_every": 1_000}, progress=False,
                        representation="visterms", cache_dir=tmp_path / "cache", log=None,
                        grid={})
    assert "stripes" not in system.vocabulary
    model = tmp_path / "model"
    system.save(model)
    ix = tmp_path / "ix"
    r = runner.invoke(app, ["index", str(model), str(tmp_path / "pictures"), "--index", str(ix)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["search", "stripes", "--index", str(ix)])
    assert r.exit_code == 2 and "vocabulary" in r.output, r.output

    new = coloured_pictures(tmp_path / "new", n=10, digits=2)  # captioned with "stripes"
    computed = []
    histograms = extract.block_histograms
    monkeypatch.setattr(extract, "block_histograms",
                        lambda *a, **k: computed.append(1) or histograms(*a, **k))
    r = runner.invoke(app, ["learn", str(model), str(new), "--index", str(ix), "--json"])
    assert r.exit_code == 0, r.output
    # every picture comes from the cache `pamir index` filled (the 10 new ones are the first
    # 10 again: the same generator and seed), so none is decoded
    assert not computed, f"{len(computed)} pictures decoded again instead of read from the cache"
    report = json.loads(r.stdout)
    assert report["new_words"] == ["stripes"] and report["updates"] > 0
    assert "rescored 48 pictures" in report["indexes"][0]["status"]
    assert (tmp_path / "model.previous" / "model.json").is_file()
    learnt = System.load(model, progress=False)
    assert learnt.vocabulary[-1] == "stripes" and learnt.model.W_.shape[0] == learnt.T

    captions = dict(line.split("\t") for line in lines[1:])
    r = runner.invoke(app, ["search", "stripes", "--index", str(ix), "-k", "8", "-f"])
    assert r.exit_code == 0, r.output
    tops = [Path(p).name for p in r.stdout.split()]
    assert sum("stripes" in captions[t] for t in tops) >= 7, tops
    # the index follows the model: indexing again computes nothing
    r = runner.invoke(app, ["index", str(model), str(tmp_path / "pictures"), "--index", str(ix),
                            "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["added"] == 0
    assert set(COLOURS) <= set(learnt.vocabulary)
