"""The zero-caption system as a prior inside a fitted one (pamir.zeroshot.prior): the weights are chosen
on validation per word, shrunk toward a global weight, kept with the model, and mixed into the
scores the index stores, so that a model fitted on a handful of pictures searches a word at
least as well as ImageNet's classes alone."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from pamir.zeroshot import prior as prior_mod
from pamir.evaluation.metrics import average_precision
from pamir.zeroshot.prior import Prior, choose_prior


def synthetic(n=200, seed=0):
    """Validation pictures of three words: the model knows "tiger" (its score is the truth
    plus a little noise) and not "bird" (noise), whose classes the classifier sees; "sky"
    reaches no class. Five more words make the global weight choosable."""
    rng = np.random.default_rng(seed)
    T, C = 8, 20
    Y = rng.random((n, T)) < 0.2
    Z = rng.normal(0, 1, (n, T))
    Z[:, 0] += 3 * Y[:, 0]                      # tiger: the model is right
    P = np.full((n, C), 0.01)
    for t in range(1, T):                        # the classifier sees the other words
        P[Y[:, t], t] += 0.5
    P /= P.sum(axis=1, keepdims=True)
    classes = np.zeros((T, C))
    for t in range(T):
        classes[t, t] = 1.0
    classes[2] = 0.0                             # sky: no class
    return Z, P, sp.csr_matrix(Y.astype(np.float32)), sp.csr_matrix(classes)


def test_weights_follow_what_validation_says_of_each_word():
    """With a finite shrinkage, each word's own choice counts (validation chose none for
    pamir's default: test_the_default_gives_every_word_the_global_weight)."""
    Z, P, Y, classes = synthetic()
    prior = choose_prior(Z, P, Y, classes, shrink=10.0)
    w = prior.weights
    assert w[2] == 0.0                           # no classes: the model alone
    assert w[0] < 0.4 < 0.8 < w[1]                # tiger: the model; bird: the classes
    info = prior.info
    assert info["validation_words"] == 7 and info["words_reaching_classes"] == 7
    avgp = info["valid_single_word_avgp"]
    assert avgp["mixed"] > avgp["model"] + 20


def test_few_validation_pictures_shrink_a_word_to_the_global_weight():
    Z, P, Y, classes = synthetic()
    many = choose_prior(Z, P, Y, classes, shrink=10.0).weights[0]
    few = choose_prior(Z, P, Y, classes, shrink=1e6).weights[0]
    assert few == pytest.approx(choose_prior(Z, P, Y, classes).info["global_weight"], abs=1e-3)
    assert many < few
    # too few validation words: the default weight, not a choice made on noise
    small = choose_prior(Z[:, :3], P, Y[:, :3], classes[:3])
    assert small.info["global_weight"] == prior_mod.DEFAULT_WEIGHT


def test_a_global_weight_chosen_on_few_pictures_settles_toward_the_default():
    """a = (n a* + SETTLE DEFAULT_WEIGHT) / (n + SETTLE) for n validation pictures: with 200
    the choice stands nearly whole, with 10 the default weighs twice as much."""
    Z, P, Y, classes = synthetic()
    d, settle = prior_mod.DEFAULT_WEIGHT, prior_mod.SETTLE
    for n in (200, 10):
        info = choose_prior(Z[:n], P[:n], Y[:n], classes).info
        best = info["global_best_on_validation"]
        assert info["global_weight"] == pytest.approx((n * best + settle * d) / (n + settle),
                                                      abs=1e-3)
    assert choose_prior(Z, P, Y, classes, settle=0).info["global_weight"] == \
        choose_prior(Z, P, Y, classes).info["global_best_on_validation"]


def test_the_global_weight_is_the_one_that_searches_the_queries_best():
    """Given the validation queries (word sets, as the selection scores fits on), the global
    weight is their best, not the single words' best."""
    from pamir.training.selection import validation_queries

    Z, P, Y, classes = synthetic()
    queries = validation_queries(Y, Y)
    prior = choose_prior(Z, P, Y, classes, queries=queries, settle=0)
    reach = np.flatnonzero(np.asarray(classes.sum(axis=1)).ravel() > 0)
    curve = prior_mod.query_avgp(np.asarray(Z), prior.class_scores(P, reach), prior.spreads,
                                 reach, queries, prior_mod.WEIGHTS)
    assert prior.info["global_weight"] == prior_mod.WEIGHTS[int(np.argmax(curve))]
    assert prior.info["valid_query_avgp"]["mixed_global"] == pytest.approx(curve.max(), abs=0.01)
    assert curve.max() > curve[0] + 5  # the classes help "bird" and the rest


def test_the_spreads_include_the_training_pictures():
    """A spread measured on a handful of validation pictures is noise: the training
    pictures' scores count too, and a word with no spread takes the usual one."""
    Z, P, Y, classes = synthetic()
    Z_train = np.random.default_rng(5).normal(0, 4, (300, Z.shape[1]))
    Z_train[:, 3] = 0.0
    Z_few = Z[:5].copy()
    Z_few[:, 3] = 0.0  # word 3 never varies, here or in training
    spreads = choose_prior(Z_few, P[:5], Y[:5], classes, Z_train=Z_train).spreads
    both = np.vstack([Z_few, Z_train]).std(axis=0)
    assert spreads[0] == pytest.approx(both[0], rel=1e-5) and spreads[0] > 3
    assert spreads[3] == pytest.approx(np.median(both[both > 0]), rel=1e-5)


def test_the_default_gives_every_word_the_global_weight():
    Z, P, Y, classes = synthetic()
    prior = choose_prior(Z, P, Y, classes)
    g = prior.info["global_weight"]
    assert prior.info["shrink"] is None and g > 0
    np.testing.assert_allclose(prior.weights, np.where(np.arange(8) == 2, 0.0, g), rtol=1e-6)


def test_the_mix_ranks_as_the_chosen_weights_and_survives_saving():
    Z, P, Y, classes = synthetic(seed=1)
    prior = choose_prior(Z, P, Y, classes, shrink=10.0)
    mixed = prior.mix(Z, P)
    assert mixed.dtype == np.float32 and mixed.shape == Z.shape
    np.testing.assert_allclose(mixed[:, 2], Z[:, 2], rtol=1e-6)  # sky untouched
    rel = Y.toarray().T > 0
    assert average_precision(mixed.T, rel)[1] > average_precision(Z.T, rel)[1] + 0.3
    again = Prior.from_saved(*prior.to_saved())
    np.testing.assert_array_equal(again.mix(Z, P), mixed)
    again.grow(10)
    assert again.T == 10 and again.weights[-1] == 0 and again.mix(
        np.zeros((2, 10)), P[:2])[:, -2:].sum() == 0


def test_a_fitted_cnn_system_keeps_its_prior_and_scores_with_it(tmp_path):
    """Through the real network on packaged pictures: a system fitted on six captioned
    pictures gets a prior, saves and loads it, and its pictures' vectors are mixed."""
    import skimage.data
    from PIL import Image

    from pamir.facts.collection import load_collection
    from pamir.features.cnn import CNNSettings
    from pamir.system import System
    from pamir.training import fit_system

    folder = tmp_path / "pics"
    folder.mkdir()
    rows = ["path\tkeywords"]
    names = ("chelsea", "coffee", "rocket", "astronaut", "camera", "horse", "coins", "page")
    for i, name in enumerate(names * 3):
        a = getattr(skimage.data, name)()
        a = np.roll(a, 7 * i, axis=1)  # not the same bytes twice
        Image.fromarray(a).convert("RGB").save(folder / f"{name}{i}.png")
        words = {"chelsea": "cat animal", "horse": "horse animal"}.get(name, "thing")
        rows.append(f"{name}{i}.png\t{words}")
    (folder / "captions.tsv").write_text("\n".join(rows) + "\n")
    system = fit_system(load_collection(folder / "captions.tsv"), "pamir",
                        model_params={"n_updates": 500, "eval_every": 250}, grid={},
                        representation="cnn", cnn_settings=CNNSettings(short_side=64),
                        cache_dir=tmp_path / "cache", progress=False, log=None)
    assert system.prior is not None and system.info["prior"]["global_weight"] >= 0
    assert system.prior.weights[system.word_index["cat"]] > 0  # "cat" is an ImageNet word
    system.save(tmp_path / "model")
    loaded = System.load(tmp_path / "model", cache_dir=tmp_path / "cache")
    np.testing.assert_array_equal(loaded.prior.weights, system.prior.weights)
    paths = [str(folder / f"{n}{j}.png") for j, n in enumerate(names)]
    Z, ok, _ = loaded.transform_paths(paths)
    raw = loaded.transform_features(loaded.features(paths)[0])
    assert ok.all() and not np.allclose(Z, raw)
    np.testing.assert_allclose(Z, loaded.prior.mix(raw, loaded.class_probabilities(paths)),
                               rtol=1e-5)
    # the index measures a mixed query's words by the prior's spreads (Searcher.class_mix)
    from pamir.jobs import opening
    with opening.open_index(tmp_path / "index", tmp_path / "model", loaded, "fp") as ix:
        np.testing.assert_allclose(ix.scales, loaded.prior.spreads, rtol=1e-6)
