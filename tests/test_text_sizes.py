"""Text of every size and angle (pamir.facts.ocr): a word filling half the picture's height is
read (the most obvious text of a sign photographed close), and so are words tilted by 20
degrees either way."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

pytest.importorskip("rapidocr")

from pamir.facts.ocr import OcrSettings, TextReader, fingerprint, text_facts  # noqa: E402
from pictures import PAINTED_SIZE, backdrop, font, paint  # noqa: E402


@pytest.fixture(scope="module")
def reader():
    return TextReader()


def big_word(text: str, share: float, face: str = "DejaVuSans-Bold.ttf") -> np.ndarray:
    """`text` in dark letters on a light plate, its ink `share` of the picture's height,
    centred on a backdrop."""
    height = round(share * PAINTED_SIZE[1])
    f = font(face, 100)
    left, top, right, bottom = f.getbbox(text)
    f = font(face, round(100 * height / (bottom - top)))
    left, top, right, bottom = f.getbbox(text)
    pad = height // 10
    sign = Image.new("RGB", (right - left + 2 * pad, bottom - top + 2 * pad), (240, 232, 205))
    ImageDraw.Draw(sign).text((pad - left, pad - top), text, font=f, fill=(20, 20, 20))
    assert sign.width <= PAINTED_SIZE[0] and sign.height <= PAINTED_SIZE[1]
    im = backdrop(5)
    im.paste(sign, ((im.width - sign.width) // 2, (im.height - sign.height) // 2))
    return np.asarray(im)


def words(reader, rgb) -> set[str]:
    return {f.word for f in text_facts(reader.read(rgb))}


def test_a_word_filling_half_the_picture_is_read(reader):
    picture = big_word("INN", 0.5, "DejaVuSans.ttf")
    assert "inn" in words(reader, picture)
    # the bound it had on a line's height (a third of the short side) dropped it
    assert "inn" not in words(TextReader(OcrSettings(max_line_share=1 / 3)), picture)


@pytest.mark.parametrize("tilt", [-20, 20])
def test_a_word_tilted_by_20_degrees_is_read(reader, tilt):
    picture = paint("BAKERY", "DejaVuSans-Bold.ttf", 48, (20, 20, 20), (240, 232, 205), tilt,
                    where=(150, 100))
    assert "bakery" in words(reader, picture)


def test_lines_of_any_height_are_a_setting_of_their_own():
    assert fingerprint() != fingerprint(OcrSettings(max_line_share=1 / 3))
    assert ":any" in fingerprint()


def test_the_pass_reader_takes_pictures_decoded_once(tmp_path):
    """read_texts over paths, and over the same pictures decoded beforehand (as a reader
    that decodes each picture once for every pass gives them), read the same facts."""
    from pamir.facts.ocr import READ_SIDE, read_texts  # noqa: PLC0415

    picture = paint("FRESH BREAD", "DejaVuSans-Bold.ttf", 48, (20, 20, 20), (240, 232, 205), 0)
    Image.fromarray(picture).save(tmp_path / "sign.png")
    paths = [tmp_path / "sign.png", tmp_path / "missing.jpg"]
    assert max(picture.shape) <= READ_SIDE
    by_path, given = read_texts(paths), read_texts(paths, pictures=[picture, None])
    assert {f.word for f in by_path[0][0]} == {f.word for f in given[0][0]} >= {"fresh"}
    assert by_path[1][0] is None and given[1][0] is None


def small_tilted_word(text: str, tilt: float) -> np.ndarray:
    """`text` in white regular letters on a blue plate, its ink 2 % of a photo-sized
    picture's height (14 of 683 px), turned by `tilt` degrees: 4 px high at detection."""
    size, ink = (1024, 683), 14
    f = font("DejaVuSans.ttf", 100)
    left, top, right, bottom = f.getbbox(text)
    f = font("DejaVuSans.ttf", round(100 * ink / (bottom - top)))
    left, top, right, bottom = f.getbbox(text)
    sign = Image.new("RGBA", (right - left + 4, bottom - top + 4), (20, 60, 140, 255))
    ImageDraw.Draw(sign).text((2 - left, 2 - top), text, font=f, fill=(255, 255, 255, 255))
    sign = sign.rotate(tilt, expand=True, resample=Image.Resampling.BICUBIC)
    im = backdrop(5).resize(size, Image.Resampling.BICUBIC)
    im.paste(sign, (400, 300), sign)
    return np.asarray(im)


def test_a_small_tilted_word_is_read(reader):
    picture = small_tilted_word("COFFEE", -20)
    assert "coffee" in words(reader, picture)
    # at DB's usual box threshold (rapidocr's 0.5) its faint detection was dropped
    assert "coffee" not in words(TextReader(OcrSettings(min_box_score=0.5)), picture)
    assert fingerprint() != fingerprint(OcrSettings(min_box_score=0.5))
