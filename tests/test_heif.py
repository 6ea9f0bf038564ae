"""A HEIC decoded by its tiles with FFmpeg (pamir.features.heif): the same picture as
pillow-heif's decode, reduced, in every EXIF orientation (written as irot/imir), for a grid of
tiles and a single picture; anything it does not read with certainty left to pillow-heif."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageOps

from pamir.features import heif, images

pytest.importorskip("av")
pillow_heif = pytest.importorskip("pillow_heif")


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    """A 1024 x 680 picture with colours and edges in every corner (a turn or a mirror
    shows)."""
    rng = np.random.default_rng(0)
    a = np.zeros((680, 1024, 3), np.uint8)
    a[..., 0] = np.linspace(0, 255, 1024)[None, :]
    a[..., 1] = np.linspace(0, 255, 680)[:, None]
    a[:200, :300, 2] = 255
    a[500:, 800:] = (250, 250, 20)
    return np.clip(a.astype(int) + rng.integers(-6, 7, a.shape), 0, 255).astype(np.uint8)


def heic(rgb: np.ndarray, orientation: int = 1, **options) -> bytes:
    images.register_formats()
    exif = Image.Exif()
    exif[0x0112] = orientation
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "HEIF", quality=90, exif=exif.tobytes(), **options)
    return buf.getvalue()


def pillow_heif_reduced(data: bytes, factor: int) -> np.ndarray:
    """What pamir decoded before: pillow-heif's whole picture, EXIF-transposed, reduced."""
    images.register_formats()
    with Image.open(io.BytesIO(data)) as im:
        rgb = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
    return np.asarray(Image.fromarray(rgb).reduce(factor))


@pytest.mark.parametrize("orientation", range(1, 9))
def test_every_orientation_of_a_grid_is_pillow_heif_s_picture(photo, orientation):
    data = heic(photo, orientation, tile_size=256)
    ours, theirs = heif.decode_tiles(data, 2), pillow_heif_reduced(data, 2)
    assert ours is not None and ours.shape == theirs.shape
    assert np.abs(ours.astype(int) - theirs.astype(int)).mean() < 1.0


def test_a_single_picture_and_factors_of_two_and_four(photo):
    data = heic(photo)
    for factor in (2, 4):
        ours, theirs = heif.decode_tiles(data, factor), pillow_heif_reduced(data, factor)
        assert ours.shape == theirs.shape
        assert np.abs(ours.astype(int) - theirs.astype(int)).mean() < 1.0


def test_what_it_does_not_read_with_certainty_is_left_to_pillow_heif(photo, tmp_path):
    data = heic(photo)
    assert heif.decode_tiles(data, 1) is None  # full size: pillow-heif's own way
    assert heif.decode_tiles(data[: len(data) // 2], 2) is None  # truncated
    assert heif.decode_tiles(b"\xff\xd8\xff\xe0 a JPEG", 2) is None
    ten_bits = io.BytesIO()
    pillow_heif.from_bytes("RGB;16", (64, 48), np.full((48, 64, 3), 30000, np.uint16)
                           .tobytes()).save(ten_bits, quality=90)
    assert heif.decode_tiles(ten_bits.getvalue(), 2) is None
    avif = io.BytesIO()
    Image.fromarray(photo).save(avif, "AVIF", quality=80)
    assert heif.decode_tiles(avif.getvalue(), 2) is None


def test_the_stage_reads_a_heic_by_its_tiles_once(photo, tmp_path, monkeypatch):
    """pamir's decoder takes the tiles' way for a reduced HEIC: no pillow-heif decode."""
    calls = []
    real = heif.decode_tiles
    monkeypatch.setattr(heif, "decode_tiles", lambda d, k: calls.append(k) or real(d, k))
    rgb = images.decode_reduced(heic(photo, tile_size=256), 170)
    assert calls == [4] and rgb.shape == (170, 256, 3)
