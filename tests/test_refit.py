"""Issue 35: `pamir fit` on a folder whose model exists, with a few more pictures tagged,
refits it (its representation and parameters kept, PAMIR started from its weights) instead
of running the full selection again; the full selection comes back when the folder changed
a lot, or on --reselect."""

import shutil

import numpy as np
import pytest

from pamir.facts.collection import load_collection
from pamir.features import FeatureSettings
from pamir.models.pamir import PAMIR
from pamir.system import System
from pamir.training import (REFIT_MAX_GROWTH, fit_or_refit, fit_system, refit_system,
                            reselect_reason)
from pamir.training.refitting import refit_protocol, starting_weights
from pictures import LOOKS, striped_collection

SETTINGS = FeatureSettings(short_side=48, n_visterms=24, n_colours=8, kmeans_iterations=5,
                           colour_max_pictures=60)
#: colour words on plain or striped pictures: colour histograms (visterms) tell them apart,
#: grey-level gradients (sift) cannot: the answer is clear
CANDIDATES = ["visterms", "sift"]
TAGGED_FIRST, TAGGED_THEN = 100, 120  # 20 more pictures tagged, within REFIT_MAX_GROWTH


def _fit(collection, cache):
    return fit_system(collection, "pamir", SETTINGS, {"patience": 3}, progress=False,
                      cache_dir=cache, log=None, representation=CANDIDATES)


def _tag(root, lines, n):
    (root / "captions.tsv").write_text("\n".join(lines[:n + 1]) + "\n")
    return load_collection(root / "captions.tsv")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """(folder, the table's lines, a model fitted on its first TAGGED_FIRST pictures, the
    feature cache)."""
    root = tmp_path_factory.mktemp("pictures")
    striped_collection(root, LOOKS, TAGGED_THEN, (48, 72), 0, 3)
    lines = (root / "captions.tsv").read_text().splitlines()
    cache = tmp_path_factory.mktemp("cache")
    model = root.parent / (root.name + "-model")
    _fit(_tag(root, lines, TAGGED_FIRST), cache).save(model)
    return root, lines, model, cache


def test_an_incremental_refit_equals_a_full_refits_choice(folder):
    root, lines, model, cache = folder
    grown = _tag(root, lines, TAGGED_THEN)
    old = System.load(model)
    assert old.info["representation"] == "visterms"
    assert reselect_reason(old, grown, "pamir") is None  # 20 more: a refit will do
    refitted = refit_system(old, grown, cache_dir=cache)
    full = _fit(grown, cache)
    assert refitted.info["representation"] == full.info["representation"] == "visterms"
    assert refitted.model.c == full.model.c == old.model.c
    # what it reused, and that it started from the model: the codebook is the model's
    # own (not refitted on the grown training pictures), its validation pictures kept
    refit = refitted.info["refit"]
    assert refit["reused"] == {"representation": "visterms", "params": {"c": old.model.c}}
    assert refit["start"] == "the model's weights"
    assert refit["development"] == {"model": TAGGED_FIRST, "now": TAGGED_THEN}
    assert refitted.model.n_updates < full.model.n_updates
    assert refitted.pipeline is old.pipeline
    assert set(old.info["split"]["valid"]) == set(refitted.info["split"]["valid"])
    assert refitted.info["pictures"]["train"] == TAGGED_THEN - len(old.info["split"]["valid"])
    assert refitted.info["valid_avgp"] >= full.info["valid_avgp"] - 5


def test_the_full_selection_comes_back_when_the_folder_changed_a_lot(folder):
    root, lines, model, _ = folder
    old = System.load(model)
    fewer = int(TAGGED_FIRST * (1 - REFIT_MAX_GROWTH)) - 1
    assert "more than 25%" in reselect_reason(old, _tag(root, lines, fewer), "pamir")
    assert "cmrm" in reselect_reason(old, _tag(root, lines, TAGGED_THEN), "cmrm")
    # a new word in every picture's caption: the vocabulary changed by more than a tenth
    renamed = [lines[0]] + [line.replace("sun", "sunshine") for line in lines[1:]]
    why = reselect_reason(old, _tag(root, renamed, TAGGED_FIRST), "pamir")
    assert "words came or went" in why
    old.info.pop("split")
    assert "validation pictures" in reselect_reason(old, _tag(root, lines, TAGGED_THEN), "pamir")


def test_a_refit_keeps_the_models_validation_pictures_and_word_rows(folder):
    root, lines, model, _ = folder
    old = System.load(model)
    grown = _tag(root, lines, TAGGED_THEN)
    protocol = refit_protocol(old, grown)
    assert sorted(grown.ids[i] for i in protocol.valid) == sorted(old.info["split"]["valid"])
    words = old.vocabulary[::-1] + ["zebra"]  # another order, and a new word
    W = starting_weights(old, words)
    assert np.array_equal(W[: len(old.vocabulary)], old.model.W_[::-1])
    assert not W[-1].any()


def test_pamir_warm_started_stays_where_it_started():
    rng = np.random.default_rng(0)
    X = rng.random((40, 6)).astype(np.float32)
    Y = np.zeros((40, 3))
    Y[np.arange(40), np.arange(40) % 3] = 1
    W0 = rng.normal(size=(3, 6)).astype(np.float32)
    # steps of at most c = 1e-9: the weights are the start's, the running average included
    m = PAMIR(c=1e-9, n_updates=200, eval_every=100).fit(X, Y, coef_init=W0)
    assert np.allclose(m.W_, W0, atol=1e-6)
    cold = PAMIR(c=1e-9, n_updates=200, eval_every=100).fit(X, Y)
    assert np.abs(cold.W_).max() < 1e-6
    # the class starting_from makes: every fit of it warm-starts; saved as PAMIR
    warm = PAMIR.starting_from(W0)(c=1e-9, n_updates=200, eval_every=100).fit(X, Y)
    assert np.allclose(warm.W_, W0, atol=1e-6) and warm.kind == "pamir"
    with pytest.raises(ValueError, match="coef_init has shape"):
        PAMIR(n_updates=10).fit(X, Y, coef_init=W0[:2])


def test_pamir_fit_refits_the_model_already_there(folder, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from pamir.cli import app

    root, lines, model, cache = folder
    monkeypatch.setenv("PAMIR_CACHE", str(cache))
    _tag(root, lines, TAGGED_THEN)
    out = tmp_path / "m"
    shutil.copytree(model, out)
    runner = CliRunner()
    done = runner.invoke(app, ["fit", str(root / "captions.tsv"), "-o", str(out), "-q"])
    assert done.exit_code == 0, done.output
    assert "refit: reusing visterms and c=" in done.output
    assert System.load(out).info["refit"]["development"]["now"] == TAGGED_THEN
    # --reselect: the full selection (its candidates: the defaults, here the small-folder
    # rule's one)
    done = runner.invoke(app, ["fit", str(root / "captions.tsv"), "-o", str(out), "-q",
                               "--reselect", "-r", "visterms", "--visterms", "24"])
    assert done.exit_code == 0, done.output
    assert "refit: reusing" not in done.output and "refit" not in System.load(out).info


def test_the_vocabularys_classes_are_cached_per_machine(tmp_path, monkeypatch):
    """Issue 35: the prior's word classes are computed once per vocabulary and machine (by a
    child process in a fit: the embedding model never enters the fit's own memory)."""
    import scipy.sparse as sp

    from pamir.training import prior as prior_phase

    monkeypatch.setenv("PAMIR_CACHE", str(tmp_path))
    calls = []

    class Words:
        def __init__(self, names, **kw):
            self.names = names

        def warm(self):
            return None

    def word_classes(vocabulary, words):
        calls.append(list(vocabulary))
        return sp.csr_matrix(np.eye(len(vocabulary), 1000, dtype=np.float32))

    # (the names as the prior phase imported them)
    monkeypatch.setattr(prior_phase, "ClassWords", Words)
    monkeypatch.setattr(prior_phase, "word_classes", word_classes)
    first = prior_phase.vocabulary_classes(["sun", "sea"])
    again = prior_phase.vocabulary_classes(["sun", "sea"])
    started = prior_phase.start_vocabulary_classes(["sun", "sea"])  # cached: no child
    assert calls == [["sun", "sea"]]
    assert isinstance(started, sp.csr_matrix)
    for m in (again, started):
        assert (m != first).nnz == 0 and m.shape == (2, 1000)
    prior_phase.vocabulary_classes(["sun", "grass"])  # another vocabulary: its own
    assert calls[-1] == ["sun", "grass"]


def test_fit_or_refit_decides_as_pamir_fit_does(folder, tmp_path):
    """The library's one call for `pamir fit DATA -o OUTPUT`: a refit where OUTPUT holds a
    model of the collection, the full selection on reselect, on other model parameters, or
    where OUTPUT holds none."""
    root, lines, model, cache = folder
    grown = _tag(root, lines, TAGGED_THEN)
    common = dict(feature_settings=SETTINGS, cache_dir=cache, representation=CANDIDATES)
    said = []
    refitted = fit_or_refit(grown, model, log=said.append, **common)
    assert refitted.info["refit"]["development"] == {"model": TAGGED_FIRST, "now": TAGGED_THEN}
    assert any(line.startswith("refit: reusing visterms") for line in said)
    for full in (fit_or_refit(grown, model, reselect=True, log=None, **common),
                 fit_or_refit(grown, model, model_params={"patience": 3}, log=None, **common),
                 fit_or_refit(grown, tmp_path / "none", log=None, **common)):
        assert "refit" not in full.info
    said.clear()
    assert "refit" not in fit_or_refit(grown, model, "cmrm", log=said.append, **common).info
    assert any("the full selection runs" in line and "cmrm" in line for line in said)
