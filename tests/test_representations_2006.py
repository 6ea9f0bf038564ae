"""The 2006 papers' representations on tiny self-made data: Blobs segmentation, SIFT
keypoints, ARFF blob rows, and `pamir fit` with each representation."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from pamir.data import load_corel5k
from pamir.facts.collection import load_collection
from pamir.features.blobs import ArffBlobs, BlobSettings, SegmentedBlobs, load_blobs
from pamir.features.registry import make_representation, representation_name
from pamir.features.segmentation import N_FEATURES, region_features, segment
from pamir.features.sift import sift_descriptors
from pictures import BLUE, RED, fake_corel, two_colours


def test_a_two_colour_picture_is_two_regions_of_the_right_colours():
    rgb = two_colours()
    labels = segment(rgb)
    assert labels.max() == 1 and (labels >= 0).all()  # two regions, largest first
    F = region_features(rgb, labels)
    assert F.shape == (2, N_FEATURES)
    np.testing.assert_allclose(F[0, :3] * 255, BLUE, atol=1)  # the larger one is blue
    np.testing.assert_allclose(F[1, :3] * 255, RED, atol=1)
    np.testing.assert_allclose(F[:, 30], [2 / 3, 1 / 3], atol=0.01)  # area fraction
    assert F[0, 31] > 0.5 > F[1, 31]  # centroid x: blue on the right


def test_a_flat_picture_is_one_region_and_no_sift_keypoint():
    flat = np.full((64, 96, 3), 90, np.uint8)
    assert segment(flat).max() == 0
    assert sift_descriptors(flat).shape == (0, 128)


def test_sift_finds_keypoints_at_corners():
    a = np.full((128, 128, 3), 255, np.uint8)
    for y in range(16, 112, 32):
        for x in range(16, 112, 32):
            a[y:y + 16, x:x + 16] = 0  # 9 black squares: 36 corners
    assert len(sift_descriptors(a)) >= 9


def test_arff_rows_are_mapped_to_picture_ids(tmp_path):
    root = fake_corel(tmp_path / "corel", ["7", "3", "5"], ["9", "9", "2"])  # 9 twice
    collection = load_corel5k(root)
    B, ok = load_blobs(collection, root)
    rows = {pid: set(B[k].indices.tolist()) for k, pid in enumerate(collection.ids)}
    assert rows == {"7": {0}, "3": {1}, "5": {2}, "9": {10}, "2": {12}} and ok.all()
    rep = ArffBlobs().fit([collection.paths[k] for k in range(3)])
    X, good, reasons = rep.transform(list(collection.paths) + [tmp_path / "other.jpeg"])
    assert good.tolist() == [True] * 5 + [False] and "Corel 5k" in reasons[-1]
    assert X[-1].nnz == 0 and X.shape == (6, 499)


def test_saved_representations_round_trip(tmp_path):
    from pamir.features.registry import representation_from_saved

    paths = []
    rng = np.random.default_rng(0)
    for i in range(8):
        a = two_colours()
        a[rng.integers(0, 40):, rng.integers(0, 60):] = (30 + 25 * i, 200, 40)
        Image.fromarray(a).save(tmp_path / f"{i}.png")
        paths.append(tmp_path / f"{i}.png")
    (tmp_path / "bad.png").write_bytes(b"not a picture")
    rep = make_representation("blobs+sift", weights=(1.0, 0.5), cache_dir=tmp_path / "c",
                              blob_settings=BlobSettings(n_blobs=4), sift_visterms=4)
    rep.fit(paths)
    X, ok, reasons = rep.transform(paths + [tmp_path / "bad.png"])
    assert ok.tolist() == [True] * 8 + [False] and reasons[-1] and X[-1].nnz == 0
    again = representation_from_saved(rep.to_dict(), rep.to_arrays(), cache_dir=tmp_path / "c")
    assert representation_name(again) == "blobs+sift"
    assert abs(again.transform(paths)[0] - X[:8]).max() < 1e-6
    assert isinstance(rep.parts[0], SegmentedBlobs) and rep.parts[0].regions_per_picture_ >= 2


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """48 pictures: a word is a colour (one region) or a chequerboard (corners for SIFT)."""
    root = tmp_path_factory.mktemp("pictures")
    rng = np.random.default_rng(0)
    lines = ["path\tkeywords"]
    for i in range(48):
        word = ("sun", "sea", "grid")[i % 3]
        a = np.zeros((48, 72, 3), np.float64)
        a[:] = {"sun": (230, 200, 30), "sea": (20, 60, 200), "grid": (128, 128, 128)}[word]
        if word == "grid":
            a[(np.arange(48)[:, None] // 8 + np.arange(72)[None] // 8) % 2 == 0] = 20
        a[rng.integers(0, 24):, rng.integers(0, 36):] = (40, 170, 40)  # a grass corner
        a += rng.normal(0, 6, a.shape)
        Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(root / f"p{i:02d}.png")
        lines.append(f"p{i:02d}.png\t{word} grass")
    (root / "captions.tsv").write_text("\n".join(lines) + "\n")
    return root


@pytest.mark.parametrize("name", ["sift", "blobs", "blobs+sift"])
def test_pamir_fit_with_each_representation(folder, tmp_path, monkeypatch, name):
    from typer.testing import CliRunner

    from pamir.cli import app
    from pamir.system import System

    monkeypatch.setenv("PAMIR_CACHE", str(folder.parent / "cache"))
    out = tmp_path / "model"
    r = CliRunner().invoke(app, ["fit", str(folder / "captions.tsv"), "-o", str(out), "-q",
                                 "-r", name, "-p", "n_updates=2000", "-p", "eval_every=500",
                                 "-p", "c=0.1"])
    assert r.exit_code == 0, r.output
    system = System.load(out)
    assert representation_name(system.pipeline) == system.info["representation"] == name


def test_blobs_arff_refuses_pictures_outside_corel(folder, tmp_path):
    from pamir.training import fit_system

    with pytest.raises(ValueError, match="blobs-arff|ARFF"):
        fit_system(load_collection(folder / "captions.tsv"), "pamir", progress=False,
                   log=None, representation="blobs-arff", cache_dir=tmp_path)
