"""HEIC/HEIF, AVIF and camera RAW pictures are read wherever a JPEG is: decoding (features
for fit, index and annotate; uploads), thumbnails, the folder scan and their metadata."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from pamir.facts.collection import load_folder
from pamir.features.images import ImageError, decode_rgb, displayed_size, register_formats

RED = (220, 30, 30)


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    """The server would load the real word-embedding model in the background otherwise, and
    could set it while a later test stands in a fake one."""
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def heic_bytes(size=(48, 32)) -> bytes:
    register_formats()
    buf = io.BytesIO()
    Image.new("RGB", size, RED).save(buf, "HEIF", quality=95)
    return buf.getvalue()


def avif_bytes(size=(48, 32)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, RED).save(buf, "AVIF", quality=95)
    return buf.getvalue()


def dng_file(path, h=64, w=96):
    """A real DNG (a 12-bit Bayer mosaic) written by pidng, which rawpy (LibRaw) reads:
    no preview inside, so it is demosaicked."""
    from pidng.core import RAW2DNG, DNGTags, Tag
    from pidng.defs import (CalibrationIlluminant, CFAPattern, DNGVersion, Orientation,
                            PhotometricInterpretation)

    rng = np.random.default_rng(0)
    mosaic = (rng.random((h, w)) * 4095).astype(np.uint16)
    t = DNGTags()
    for tag, value in ((Tag.ImageWidth, w), (Tag.ImageLength, h), (Tag.TileWidth, w),
                       (Tag.TileLength, h), (Tag.Orientation, Orientation.Horizontal),
                       (Tag.PhotometricInterpretation,
                        PhotometricInterpretation.Color_Filter_Array),
                       (Tag.SamplesPerPixel, 1), (Tag.BitsPerSample, 12),
                       (Tag.CFARepeatPatternDim, [2, 2]), (Tag.CFAPattern, CFAPattern.GBRG),
                       (Tag.BlackLevel, 0), (Tag.WhiteLevel, 4095),
                       (Tag.ColorMatrix1, [[1, 1], [0, 1], [0, 1], [0, 1], [1, 1], [0, 1],
                                           [0, 1], [0, 1], [1, 1]]),
                       (Tag.CalibrationIlluminant1, CalibrationIlluminant.D65),
                       (Tag.AsShotNeutral, [[1, 1], [1, 1], [1, 1]]),
                       (Tag.Make, "pamir"), (Tag.Model, "test"),
                       (Tag.DNGVersion, DNGVersion.V1_4),
                       (Tag.DNGBackwardVersion, DNGVersion.V1_2)):
        t.set(tag, value)
    r = RAW2DNG()
    r.options(t, path="", compress=False)
    r.convert(mosaic, filename=str(path.with_suffix("")))
    return path


@pytest.mark.parametrize("make", [heic_bytes, avif_bytes], ids=["heic", "avif"])
def test_heic_and_avif_decode_like_a_jpeg(make):
    data = make()
    rgb = decode_rgb(data)
    assert rgb.shape == (32, 48, 3)
    assert np.abs(rgb.reshape(-1, 3).mean(axis=0) - RED).max() < 12
    assert decode_rgb(data, short_side=16).shape == (16, 24, 3)
    assert displayed_size(data) == (48, 32)


def test_a_dng_is_demosaicked_and_a_broken_one_refused(tmp_path):
    data = dng_file(tmp_path / "raw.dng").read_bytes()
    rgb = decode_rgb(data)
    assert rgb.dtype == np.uint8 and rgb.shape == (32, 48, 3)  # LibRaw's half size
    with pytest.raises(ImageError):
        decode_rgb(data[:400])  # a truncated RAW: a reason, not a crash
    # a plain TIFF is not taken for a RAW: LibRaw refuses it, Pillow reads it
    buf = io.BytesIO()
    Image.new("RGB", (10, 6), RED).save(buf, "TIFF")
    assert decode_rgb(buf.getvalue()).shape == (6, 10, 3)


def test_new_formats_are_found_indexed_and_thumbnailed(tmp_path):
    from fastapi.testclient import TestClient

    from pamir.index import Index
    from pamir.server import create_app
    from fakes import VOCAB

    pics = tmp_path / "pics"
    pics.mkdir()
    (pics / "a.heic").write_bytes(heic_bytes())
    (pics / "b.avif").write_bytes(avif_bytes())
    dng_file(pics / "c.dng")
    assert load_folder(pics).ids == ["a.heic", "b.avif", "c.dng"]

    def transform(paths):  # the real decoder, one score a picture: its redness
        rows = []
        for p in paths:
            rgb = decode_rgb(open(p, "rb").read()).reshape(-1, 3).mean(axis=0)
            rows.append([rgb[0] / 255, 0, 0, 0, 0])
        return np.array(rows, np.float32), np.ones(len(paths), bool), [None] * len(paths)

    with Index.create(tmp_path / "ix", VOCAB, np.ones(len(VOCAB))) as ix:
        assert ix.update([pics], transform).added == 3
    with TestClient(create_app(tmp_path / "ix")) as c:
        for h in c.get("/api/search", params={"q": "red", "k": 3}).json()["hits"]:
            r = c.get(h["thumbnail"], params={"size": 64})
            assert r.status_code == 200, (h["name"], r.text)
            assert Image.open(io.BytesIO(r.content)).format == "JPEG"
