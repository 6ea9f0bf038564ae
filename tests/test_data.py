import json

import pytest
from PIL import Image

from pamir.data import DataError, load_captions_table, load_collection
from pamir.text import split_keywords, tokenize


def picture(path, colour=(200, 30, 30)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (24, 16), colour).save(path)
    return path


@pytest.fixture
def folder(tmp_path):
    for name in ("a.jpg", "b.png", "sub/c.jpg", "d.jpg"):
        picture(tmp_path / name)
    return tmp_path


def test_tsv_with_keywords_and_uncaptioned_pictures(folder):
    (folder / "captions.tsv").write_text("path\tkeywords\na.jpg\tSky, sea\nsub/c.jpg\tboat sea\n")
    c = load_captions_table(folder / "captions.tsv")
    assert c.captions[:2] == [("sky", "sea"), ("boat", "sea")]
    assert len(c) == 4  # b.png and d.jpg are kept as uncaptioned
    assert sorted(c.ids[2:]) == ["b.png", "d.jpg"] and c.captions[2:] == [None, None]


def test_csv_free_text_captions_are_tokenised(folder):
    (folder / "t.csv").write_text('file,caption\na.jpg,"A tiger, in the grass!"\n')
    c = load_captions_table(folder / "t.csv", include_uncaptioned=False)
    assert c.captions == [("tiger", "grass")]


def test_jsonl(folder):
    rows = [{"path": "a.jpg", "keywords": ["Sky", "sun"]}, {"path": "d.jpg", "caption": "sun"}]
    (folder / "t.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    c = load_collection(folder / "t.jsonl", include_uncaptioned=False)
    assert c.captions == [("sky", "sun"), ("sun",)]


def test_missing_table_and_folder(tmp_path):
    with pytest.raises(DataError, match="captions table not found"):
        load_captions_table(tmp_path / "nope.tsv")
    (tmp_path / "t.tsv").write_text("path\tkeywords\n")
    with pytest.raises(DataError, match="picture folder not found"):
        load_captions_table(tmp_path / "t.tsv", folder=tmp_path / "missing")


def test_missing_picture_names_file_and_line(folder):
    (folder / "t.tsv").write_text("path\tkeywords\na.jpg\tsky\ngone.jpg\tsea\n")
    with pytest.raises(DataError, match=r"t\.tsv:3: picture 'gone.jpg' not found"):
        load_captions_table(folder / "t.tsv")


def test_empty_path_cell(folder):
    (folder / "t.tsv").write_text("path\tkeywords\n\tsky\n")
    with pytest.raises(DataError, match=r"t\.tsv:2: empty path"):
        load_captions_table(folder / "t.tsv")


def test_empty_caption_is_reported_and_kept_uncaptioned(folder):
    (folder / "t.tsv").write_text("path\tkeywords\na.jpg\t\nd.jpg\tsky\n")
    c = load_captions_table(folder / "t.tsv", include_uncaptioned=False)
    assert c.captions == [None, ("sky",)]
    assert len(c.warnings) == 1 and "t.tsv:2: empty caption" in c.warnings[0]


def test_duplicated_ids(folder):
    (folder / "t.tsv").write_text("path\tkeywords\na.jpg\tsky\nd.jpg\tsea\na.jpg\tsun\n")
    with pytest.raises(DataError, match=r"t\.tsv:4: duplicated id 'a.jpg' \(first on line 2\)"):
        load_captions_table(folder / "t.tsv")


def test_non_utf8(folder):
    (folder / "t.tsv").write_bytes("path\tkeywords\na.jpg\tcaf\xe9\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"t\.tsv:2: not UTF-8"):
        load_captions_table(folder / "t.tsv")


def test_bad_json_and_missing_columns(folder):
    (folder / "t.jsonl").write_text('{"path": "a.jpg", "keywords": "sky"}\n{oops\n')
    with pytest.raises(DataError, match=r"t\.jsonl:2: not valid JSON"):
        load_captions_table(folder / "t.jsonl")
    (folder / "u.tsv").write_text("name\tkeywords\na.jpg\tsky\n")
    with pytest.raises(DataError, match="no path column"):
        load_captions_table(folder / "u.tsv")


def test_missing_corel_folder(tmp_path):
    with pytest.raises(DataError, match="Corel 5k not found"):
        load_collection(f"corel5k:{tmp_path}")


def test_tokenize_and_keywords():
    assert tokenize("The Tiger's den, near a river.") == ["tiger's", "den", "river"]
    assert tokenize("Sky and sea", stop_words=None) == ["sky", "and", "sea"]
    assert split_keywords("sky, Sky;sea  sun") == ["sky", "sea", "sun"]
