"""pamir.index_folders reads what `pamir index` reads: the text in the pictures where the
[ocr] extra is installed, said and left out where it is not, an error only when asked for."""

from __future__ import annotations

import pytest
from PIL import Image

from pamir.extras import MissingExtra
from pamir.facts import ocr
from pamir.jobs.indexing import index_folders
from pictures import backdrop, paint


@pytest.fixture
def signs(tmp_path, monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")
    folder = tmp_path / "pictures"
    folder.mkdir()
    Image.fromarray(paint("BAKERY", "DejaVuSans-Bold.ttf", 48, (20, 20, 20), (240, 232, 205),
                          0)).save(folder / "sign.jpg", quality=92)
    backdrop(1).save(folder / "plain.jpg", quality=92)
    return folder


def test_the_library_reads_text_by_default(signs, tmp_path):
    report = index_folders(None, [signs], index=tmp_path / "ix", faces=False)
    assert report.added == 2
    assert report.text is not None and report.text["with_facts"] == 1
    assert index_folders(None, [signs], index=tmp_path / "bare", text=False,
                         faces=False).text is None


def test_a_missing_reader_is_said_unless_asked_for(signs, tmp_path, monkeypatch):
    def missing(*args, **kwargs):
        raise MissingExtra("ocr", "rapidocr")

    monkeypatch.setattr(ocr, "shared_reader", missing)
    said = []
    report = index_folders(None, [signs], index=tmp_path / "ix", faces=False, say=said.append)
    assert report.added == 2 and report.text is None
    assert any("pamir[ocr]" in line for line in said)
    with pytest.raises(MissingExtra, match=r"pamir\[ocr\]"):
        index_folders(None, [signs], index=tmp_path / "asked", text=True, faces=False)
