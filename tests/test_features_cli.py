"""`pamir features extract` and the collection-level feature cache."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from pamir.commands.features import app
from pamir.data import load_captions_table
from pamir.features import FeatureSettings, VisualPipeline, collection_features

WORDS = ["sky sea", "sky tree", "tree grass", "sea sand", "grass sky"]


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(0)
    rows = ["path\tkeywords"]
    for i, words in enumerate(WORDS):
        small = rng.integers(0, 256, (9, 13, 3), dtype=np.uint8)
        Image.fromarray(small).resize((192, 128)).save(tmp_path / f"p{i}.jpg")
        rows.append(f"p{i}.jpg\t{words}")
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "notes.jpg").write_text("not a picture")
    rows += ["empty.jpg\tsky", "notes.jpg\tsea"]
    path = tmp_path / "captions.tsv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_extract_counts_done_skipped_and_then_cached(table, tmp_path):
    runner = CliRunner()
    args = ["extract", str(table), "--json", "--cache-dir", str(tmp_path / "cache")]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stdout[first.stdout.index("{"):])
    assert (summary["pictures"], summary["done"], summary["skipped"], summary["failed"]) == (7, 5, 2, 0)
    assert summary["extracted"] == 5 and summary["blocks"] == 5 * 77
    out = runner.invoke(app, args).stdout
    second = json.loads(out[out.index("{"):])
    assert second["extracted"] == 0 and second["cached"] == 5


def test_extract_limit_and_text_summary(table, tmp_path):
    result = CliRunner().invoke(app, ["extract", str(table), "--limit", "2", "--no-cache"])
    assert result.exit_code == 0, result.output
    assert "2 pictures, 2 done" in result.stdout and "pictures/s" in result.stdout


def test_extract_reports_a_missing_table(tmp_path):
    result = CliRunner().invoke(app, ["extract", str(tmp_path / "nope.tsv")])
    assert result.exit_code == 2 and "not found" in result.output


def test_collection_features_are_cached(table, tmp_path, monkeypatch):
    collection = load_captions_table(table)
    settings = FeatureSettings(n_visterms=8, kmeans_iterations=3, n_colours=5)
    train = np.arange(len(collection))
    X, ok, pipe = collection_features(collection, train, settings, cache_dir=tmp_path / "c",
                                      progress=False)
    assert X.shape == (7, 8) and ok.sum() == 5

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted again despite the cache")

    monkeypatch.setattr(VisualPipeline, "fit_transform", no_fit)
    X2, ok2, pipe2 = collection_features(collection, train, settings, cache_dir=tmp_path / "c",
                                         progress=False)
    assert (X2 != X).nnz == 0 and np.array_equal(ok, ok2)
    assert np.array_equal(pipe2.codebook_, pipe.codebook_)
    with pytest.raises(AssertionError, match="fitted again"):  # other settings: another key
        collection_features(collection, train, settings.replace(n_visterms=6),
                            cache_dir=tmp_path / "c", progress=False)


def test_extract_cnn_counts_and_then_reads_the_cache(table, tmp_path, monkeypatch):
    monkeypatch.setenv("PAMIR_CACHE", str(tmp_path / "default-cache"))  # the exported .onnx
    runner = CliRunner()
    args = ["extract", str(table), "--representation", "cnn", "--json",
            "--cache-dir", str(tmp_path / "cache")]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stdout[first.stdout.index("{"):])
    assert summary["representation"] == "cnn" and summary["dim"] == 1280
    assert (summary["pictures"], summary["done"], summary["extracted"], summary["cached"],
            summary["skipped"], summary["failed"]) == (7, 5, 5, 0, 2, 0)
    assert summary["pictures_per_second"] > 0 and summary["engine"] == "onnx"
    assert summary["settings"]["model"] == "lite0"
    out = runner.invoke(app, args + ["--limit", "3"]).stdout
    second = json.loads(out[out.index("{"):])
    assert (second["pictures"], second["extracted"], second["cached"]) == (3, 0, 3)
    assert second["engine"] is None  # no network was built


def test_extract_refuses_an_unknown_representation(table):
    result = CliRunner().invoke(app, ["extract", str(table), "--representation", "sift"])
    assert result.exit_code == 2 and "visterms, cnn" in result.output
