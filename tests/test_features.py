"""Visual features: LBP, block grid, colour codebook, tf-idf bags, cache, bad input."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from PIL import Image

from pamir.features import (BlockSet, ColourCodebook, FeatureSettings, VisualPipeline,
                            block_grid, block_histograms, extract_blocks, load_rgb)
from pamir.features import images
from pamir.features.lbp import local_binary_pattern
from pamir.features.visterms import fit_codebook as _fit
from pamir.features.visterms import term_frequencies, tfidf

PRIMARIES = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255]], dtype=np.float32)


def smooth_picture(rng, h=128, w=192) -> np.ndarray:
    """A picture with texture and a few colour regions (upsampled noise)."""
    small = rng.integers(0, 256, (h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
    big = Image.fromarray(small).resize((w, h), Image.Resampling.BILINEAR)
    noise = rng.integers(-20, 21, (h, w, 3))
    return np.clip(np.asarray(big).astype(int) + noise, 0, 255).astype(np.uint8)


def save(path, rgb, **kwargs):
    Image.fromarray(rgb).save(path, **kwargs)
    return path


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("pics")
    paths = []
    for i in range(12):
        h, w = (128, 192) if i % 3 else (192, 128)
        paths.append(save(folder / f"p{i}.jpg", smooth_picture(rng, h, w), quality=90))
    return paths


@pytest.fixture(scope="module")
def primaries():
    return ColourCodebook(PRIMARIES)


# --------------------------------------------------------------------------------- LBP

def test_flat_picture_puts_all_lbp_mass_on_one_code(primaries):
    settings = FeatureSettings(n_colours=3)
    rgb = np.zeros((128, 192, 3), np.uint8)
    rgb[..., 2] = 200  # flat blue
    counts, grid = block_histograms(rgb, settings, primaries)
    lbp, colour = counts[:, :59], counts[:, 59:]
    assert counts.shape == (77, 62)
    # every pixel of every block: all neighbours equal the centre -> the all-ones code
    assert (lbp[:, 57] == 32 * 32).all() and lbp.sum() == 77 * 32 * 32
    assert (colour[:, 2] == 32 * 32).all() and colour.sum() == 77 * 32 * 32


def test_lbp_matches_scikit_image_on_noise():
    from skimage.feature import local_binary_pattern as skimage_lbp

    grey = np.random.default_rng(1).integers(0, 256, (40, 56), dtype=np.uint8)
    expected = skimage_lbp(np.pad(grey, 2, mode="edge"), 8, 2, "nri_uniform")[2:-2, 2:-2]
    codes = local_binary_pattern(grey, 8, 2)
    assert (codes == expected).all()
    assert codes.max() <= 58 and len(np.unique(codes)) > 40


def test_vertical_edge_gives_edge_codes_only_near_it():
    grey = np.zeros((20, 20), np.uint8)
    grey[:, 10:] = 200
    codes = local_binary_pattern(grey)
    assert (codes[:, :7] == 57).all() and (codes[:, 13:] == 57).all()  # flat on both sides
    # bright pixels within 2 px of the dark side see darker neighbours: an edge code;
    # dark pixels see only neighbours >= themselves: still the all-ones code
    assert (codes[:, 10:12] != 57).all() and (codes[:, 8:10] == 57).all()


# ---------------------------------------------------------------------------- block grid

@pytest.mark.parametrize("h, w, settings, expected", [
    (128, 192, FeatureSettings(), 77),
    (192, 128, FeatureSettings(), 77),
    (256, 384, FeatureSettings(short_side=None), 77),          # the papers' 64 every 32
    (128, 192, FeatureSettings(block_size=32), 77),
    (128, 192, FeatureSettings(block_size=48, block_step=24), 28),  # 7 x 4
    (128, 192, FeatureSettings(block_fraction=1.0), 2),          # 128 every 64: 2 across
    (20, 20, FeatureSettings(block_size=32), 1),                 # smaller than a block
    (20, 100, FeatureSettings(block_size=32), 5),                # one row of blocks
])
def test_block_counts(h, w, settings, expected):
    grid = block_grid(h, w, settings)
    assert len(grid) == expected
    x, y, bw, bh = grid.T
    assert (x >= 0).all() and (y >= 0).all() and (x + bw <= w).all() and (y + bh <= h).all()


def test_block_size_is_relative_to_the_picture():
    assert block_grid(128, 192, FeatureSettings())[0, 2] == 32
    assert block_grid(256, 384, FeatureSettings(short_side=None))[0, 2] == 64
    big = block_grid(256, 384, FeatureSettings(short_side=None))
    assert np.diff(np.unique(big[:, 0]))[0] == 32  # step = half a block


def test_picture_smaller_than_a_block_is_one_block(primaries):
    rgb = np.full((10, 14, 3), 255, np.uint8)
    rgb[..., 1:] = 0  # red
    counts, grid = block_histograms(rgb, FeatureSettings(n_colours=3, block_size=32), primaries)
    assert grid.tolist() == [[0, 0, 14, 10]]
    assert counts[0, 59] == 140 and counts[0, :59].sum() == 140


# ------------------------------------------------------------------------ colour codebook

def test_colour_lookup_table_equals_nearest_centre():
    centres = np.random.default_rng(2).uniform(0, 255, (50, 3)).astype(np.float32)
    cb = ColourCodebook(centres)
    rgb = np.random.default_rng(3).integers(0, 256, (5000, 3), dtype=np.uint8)
    assert (cb.assign(rgb) == cb.assign_exact(rgb)).all()
    assert (cb.assign(centres.round().astype(np.uint8)) == np.arange(50)).all()


def test_colour_codebook_learns_the_colours_of_the_pictures(tmp_path):
    colours = np.array([[250, 10, 10], [10, 250, 10], [10, 10, 250]], np.uint8)
    paths = []
    for i in range(3):
        rgb = np.repeat(colours, [40, 40, 48], axis=0)[:, None, :].repeat(64, axis=1)
        paths.append(save(tmp_path / f"c{i}.png", np.roll(rgb, 20 * i, axis=0)))
    cb = ColourCodebook.fit(paths, n_colours=3, seed=0, short_side=None)
    order = np.argsort([np.argmax(c) for c in cb.centres])
    np.testing.assert_allclose(cb.centres[order], colours, atol=1)
    codes = cb.assign(colours)
    assert sorted(codes.tolist()) == [0, 1, 2]
    restored = ColourCodebook.from_arrays(cb.to_arrays())
    assert (restored.assign(colours) == codes).all()


# --------------------------------------------------------------------------- tf-idf bags

def test_tfidf_rows_unit_and_idf_from_training_fractions(pictures):
    settings = FeatureSettings(n_visterms=16, kmeans_iterations=5, n_colours=8)
    pipe = VisualPipeline(settings, progress=False)
    X, ok, _ = pipe.fit_transform(pictures)
    assert ok.all() and X.shape == (12, 16) and X.dtype == np.float32
    np.testing.assert_allclose(np.sqrt(X.multiply(X).sum(1)).A1, 1.0, rtol=1e-5)
    # idf_i = -log(fraction of training pictures with a block on visterm i)
    blocks = extract_blocks(pictures, settings, pipe.colour_codebook_, progress=False)
    ids = pipe.assign(blocks.descriptors)
    present = np.zeros((12, 16), bool)
    for i in range(12):
        present[i, ids[blocks.offsets[i]:blocks.offsets[i + 1]]] = True
    df = present.sum(0)
    np.testing.assert_allclose(pipe.idf_, -np.log(np.maximum(df, 1) / 12), rtol=1e-5)
    # and the bag is tf * idf, normalised
    tf = term_frequencies(ids, blocks.offsets, 16).toarray()
    expected = tf * pipe.idf_
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(X.toarray(), expected, atol=1e-6)
    np.testing.assert_allclose(pipe.transform_blocks(blocks).toarray(), expected, atol=1e-6)


def test_tfidf_keeps_empty_rows_empty():
    tf = term_frequencies(np.array([0, 0, 2]), np.array([0, 3, 3]), 3)
    X = tfidf(tf, np.array([1.0, 0.5, 2.0], np.float32))
    assert X[1].nnz == 0
    np.testing.assert_allclose(X[0].toarray(), [[2 / np.sqrt(8), 0, 2 / np.sqrt(8)]], rtol=1e-6)


def test_pipeline_round_trip_and_block_boxes(pictures, tmp_path):
    settings = FeatureSettings(n_visterms=40, kmeans_iterations=3, n_colours=6,
                               scaling="quarter")
    pipe = VisualPipeline(settings, progress=False).fit(pictures[:8])
    pipe.save(tmp_path / "m")
    again = VisualPipeline.load(tmp_path / "m", progress=False)
    assert json.loads((tmp_path / "m" / "features.json").read_text())["settings"]["scaling"] == "quarter"
    X1, _, _ = pipe.transform(pictures[8:])
    X2, _, _ = again.transform(pictures[8:])
    assert (X1 != X2).nnz == 0
    # a 384x256 picture, resized to 192x128 for the features: boxes back in its own pixels
    big = save(tmp_path / "big.png", np.asarray(Image.open(pictures[1]).resize((384, 256))))
    pv = pipe.picture_visterms(big)
    assert pv.size == (384, 256) and len(pv.visterms) == 77
    assert pv.boxes[0].tolist() == [0, 0, 64, 64] and pv.boxes[:, 0].max() == 320
    X3, _, _ = pipe.transform([big])
    weighted = pv.visterms[pipe.idf_[pv.visterms] > 0]  # idf 0: in every training picture
    assert len(weighted) and set(X3.indices) == set(weighted.tolist())


@pytest.mark.parametrize("scaling", ["none", "sqrt", "log1p", "sqrt_std"])
def test_every_scaling_fits(pictures, scaling):
    pipe = VisualPipeline(FeatureSettings(n_visterms=8, kmeans_iterations=2, n_colours=4,
                                          scaling=scaling), progress=False)
    X, ok, _ = pipe.fit_transform(pictures[:4])
    assert ok.all() and X.shape == (4, 8)


def test_settings_round_trip_and_validation():
    s = FeatureSettings(block_size=48, scaling="log1p")
    assert FeatureSettings.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert s.dim == 109
    with pytest.raises(ValueError, match="scaling"):
        FeatureSettings(scaling="cube")
    with pytest.raises(ValueError, match="unknown"):
        FeatureSettings.from_dict({"colours": 3})


# ------------------------------------------------------------------------------- cache

def test_second_run_extracts_nothing(pictures, primaries, tmp_path):
    settings = FeatureSettings(n_colours=3)
    first = extract_blocks(pictures, settings, primaries, cache_dir=tmp_path, progress=False)
    assert first.n_extracted == 12 and first.n_cached == 0
    second = extract_blocks(pictures, settings, primaries, cache_dir=tmp_path, progress=False)
    assert second.n_extracted == 0 and second.n_cached == 12
    assert np.array_equal(first.descriptors, second.descriptors)
    assert np.array_equal(first.offsets, second.offsets)
    # the key is the content: a copy under another name hits, other settings miss
    copy = tmp_path / "copy.jpg"
    copy.write_bytes(pictures[0].read_bytes())
    assert extract_blocks([copy], settings, primaries, cache_dir=tmp_path,
                          progress=False).n_cached == 1
    other = extract_blocks(pictures[:2], settings.replace(block_size=48), primaries,
                           cache_dir=tmp_path, progress=False)
    assert other.n_extracted == 2


def test_codebook_and_settings_must_agree(pictures, primaries):
    with pytest.raises(ValueError, match="3 colours"):
        extract_blocks(pictures[:1], FeatureSettings(n_colours=50), primaries, progress=False)


def test_damaged_cache_entries_are_recomputed(pictures, primaries, tmp_path):
    settings = FeatureSettings(n_colours=3)
    first = extract_blocks(pictures[:2], settings, primaries, cache_dir=tmp_path, progress=False)
    entries = sorted((tmp_path / "blocks").rglob("*.npy"))
    entries[0].write_bytes(b"garbage")
    np.save(entries[1], np.zeros((77, 5), np.uint16))  # wrong shape
    again = extract_blocks(pictures[:2], settings, primaries, cache_dir=tmp_path, progress=False)
    assert again.n_extracted == 2 and np.array_equal(again.descriptors, first.descriptors)


def test_log_counts_for_bbnn(pictures, primaries):
    counts = extract_blocks(pictures[:2], FeatureSettings(n_colours=3), primaries, progress=False)
    logs = extract_blocks(pictures[:2], FeatureSettings(n_colours=3, log_counts=True),
                          primaries, progress=False)
    assert logs.log_counts and logs.descriptors.dtype == np.float32
    np.testing.assert_allclose(logs.descriptors, np.log1p(counts.descriptors), rtol=1e-6)
    assert np.array_equal(logs.counts(), counts.descriptors)


# ---------------------------------------------------------------------------- bad input

@pytest.fixture
def bad_files(tmp_path, pictures):
    good = pictures[0].read_bytes()
    files = {
        "truncated": tmp_path / "truncated.jpg",
        "corrupt": tmp_path / "corrupt.jpg",
        "zero": tmp_path / "zero.jpg",
        "text": tmp_path / "notes.jpg",
        "missing": tmp_path / "missing.jpg",
        "folder": tmp_path / "folder.jpg",
    }
    files["truncated"].write_bytes(good[: len(good) // 2])
    files["corrupt"].write_bytes(good[:20] + bytes(np.random.default_rng(0).integers(0, 256, 3000, dtype=np.uint8)))
    files["zero"].write_bytes(b"")
    files["text"].write_text("not a picture\n")
    files["folder"].mkdir()
    return files


def test_bad_files_are_skipped_and_counted(pictures, primaries, bad_files, caplog):
    paths = [pictures[0], *bad_files.values(), pictures[1]]
    blocks = extract_blocks(paths, FeatureSettings(n_colours=3), primaries, progress=False)
    assert blocks.ok.tolist() == [True] + [False] * len(bad_files) + [True]
    assert blocks.n_skipped == len(bad_files) and blocks.n_failed == 0
    assert blocks.n_blocks.tolist() == [77] + [0] * len(bad_files) + [77]
    reasons = dict(blocks.failures)
    assert "truncated" in reasons[str(bad_files["truncated"])]
    assert "0 bytes" in reasons[str(bad_files["zero"])]
    assert "not a picture" in reasons[str(bad_files["text"])]
    assert "not found" in reasons[str(bad_files["missing"])]
    assert len([r for r in caplog.records if "skipped" in r.getMessage()]) == len(bad_files)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_skipped(pictures, primaries, tmp_path):
    locked = tmp_path / "locked.jpg"
    locked.write_bytes(pictures[0].read_bytes())
    locked.chmod(0)
    blocks = extract_blocks([locked], FeatureSettings(n_colours=3), primaries, progress=False)
    assert blocks.n_skipped == 1 and "permission" in blocks.failures[0][1]


def test_decompression_bomb_is_skipped(pictures, primaries, monkeypatch):
    monkeypatch.setattr(images, "MAX_PIXELS", 100 * 100)
    blocks = extract_blocks(pictures[:1], FeatureSettings(n_colours=3), primaries, progress=False)
    assert blocks.n_skipped == 1 and "decompression bomb" in blocks.failures[0][1]


def test_bad_pictures_get_empty_bags(pictures, bad_files):
    pipe = VisualPipeline(FeatureSettings(n_visterms=8, kmeans_iterations=2, n_colours=4),
                          progress=False)
    X, ok, _ = pipe.fit_transform([*pictures[:4], bad_files["zero"]])
    assert ok.tolist() == [True] * 4 + [False] and X[4].nnz == 0 and pipe.n_train_ == 4


# ------------------------------------------------------------------------ picture modes

def test_picture_modes_become_rgb(tmp_path):
    rgb = smooth_picture(np.random.default_rng(5), 32, 48)
    grey = np.asarray(Image.fromarray(rgb).convert("L"))
    cases = {
        "grey.png": Image.fromarray(grey),
        "palette.png": Image.fromarray(rgb).convert("P"),
        "cmyk.jpg": Image.fromarray(rgb).convert("CMYK"),
        "one-bit.png": Image.fromarray(grey).convert("1"),
        "grey16.png": Image.fromarray(grey.astype(np.uint16) * 257),
        "rgba.png": Image.fromarray(np.dstack([rgb, np.full(grey.shape, 255, np.uint8)])),
    }
    for name, im in cases.items():
        im.save(tmp_path / name)
        out = load_rgb(tmp_path / name)
        assert out.shape == (32, 48, 3) and out.dtype == np.uint8, name
    g16 = load_rgb(tmp_path / "grey16.png")
    assert np.abs(g16[..., 0].astype(int) - grey).max() <= 1  # scaled, not clipped to 255
    assert np.array_equal(load_rgb(tmp_path / "rgba.png"), rgb)
    # transparent pixels lie on white
    clear = np.zeros((8, 8, 4), np.uint8)
    Image.fromarray(clear).save(tmp_path / "clear.png")
    assert (load_rgb(tmp_path / "clear.png") == 255).all()


def test_exif_orientation_is_applied(tmp_path):
    rgb = smooth_picture(np.random.default_rng(6), 32, 48)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    Image.fromarray(rgb).save(tmp_path / "rot.jpg", exif=exif, quality=95)
    out = load_rgb(tmp_path / "rot.jpg")
    assert out.shape == (48, 32, 3)
    assert images.displayed_size((tmp_path / "rot.jpg").read_bytes()) == (32, 48)


def test_short_side_resizes_both_ways(tmp_path):
    rgb = smooth_picture(np.random.default_rng(7), 64, 96)
    save(tmp_path / "small.png", rgb)
    assert load_rgb(tmp_path / "small.png", 128).shape == (128, 192, 3)
    assert load_rgb(tmp_path / "small.png", 32).shape == (32, 48, 3)


def test_blockset_concatenate_offsets():
    a = BlockSet(np.ones((3, 2), np.float32), np.array([0, 1, 3]), np.array([True, True]))
    b = BlockSet(np.zeros((0, 2), np.float32), np.array([0, 0]), np.array([False]))
    c = BlockSet.concatenate([a, b, a], 2)
    assert c.offsets.tolist() == [0, 1, 3, 3, 4, 6] and c.ok.tolist() == [1, 1, 0, 1, 1]


def test_codebook_fitted_on_a_capped_sample_of_blocks(pictures, monkeypatch):
    from pamir.features import extract

    monkeypatch.setattr(extract, "CHUNK_PICTURES", 1)  # stream picture by picture
    fitted = []
    monkeypatch.setattr("pamir.features.pipeline.fit_codebook",
                        lambda x, k, **kw: fitted.append(len(x)) or _fit(x, k, **kw))
    settings = FeatureSettings(n_visterms=8, kmeans_iterations=2, n_colours=4,
                               kmeans_max_blocks=100)
    pipe = VisualPipeline(settings, progress=False)
    X, ok, _ = pipe.fit_transform(pictures)
    assert fitted == [100]  # 2 pictures' blocks read (154), 100 of them drawn for k-means
    assert ok.all() and X.shape == (12, 8) and pipe.n_train_ == 12  # all 12 get bags
    assert np.isfinite(pipe.objective_).all()


def test_a_codebook_on_few_blocks_a_centre_fits_quietly(capfd):
    # the default visterm codebook has 10 blocks a centre by choice: faiss's "please provide
    # at least 39 x k training points" must not reach the person's terminal
    x = np.random.default_rng(0).random((400, 8)).astype(np.float32)
    centres, objective, _ = _fit(x, 40, n_iter=3, seed=0)
    assert centres.shape == (40, 8) and len(objective) == 3
    assert "WARNING" not in capfd.readouterr().err
