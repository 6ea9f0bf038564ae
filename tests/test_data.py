import json

import pytest

from pamir.data import DataError, load_captions_table
from pamir.facts.collection import load_collection
from pamir.text.words import split_keywords, tokenize
from pictures import picture  # the tests' one picture writer


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


@pytest.mark.parametrize("bad, says", [
    ("a\x00.jpg", "cannot name a file"),      # the fuzzer's find: realpath raised ValueError
    ("x" * 300 + ".jpg", "cannot name a file"),  # ENAMETOOLONG from stat
    ("../outside.jpg", "lies outside"),
])
def test_paths_that_cannot_be_pictures_of_the_folder(tmp_path, bad, says):
    folder = tmp_path / "pics"
    picture(folder / "a.jpg")
    picture(tmp_path / "outside.jpg")
    (folder / "t.jsonl").write_text(json.dumps({"path": bad, "keywords": "sky"}))
    with pytest.raises(DataError, match=rf"t\.jsonl:1: .*{says}"):
        load_captions_table(folder / "t.jsonl")


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


def test_bom_in_a_spreadsheet_csv(folder):
    (folder / "t.csv").write_bytes("\ufeffpath,keywords\na.jpg,sky\n".encode("utf-8"))
    assert load_captions_table(folder / "t.csv", include_uncaptioned=False).captions == [("sky",)]


def test_unlisted_picture_whose_path_is_another_rows_id(folder):
    (folder / "t.tsv").write_text("id\tpath\tkeywords\nd.jpg\ta.jpg\tsky\n")
    with pytest.raises(DataError, match=r"d\.jpg: not in the table, but the table uses its path"):
        load_captions_table(folder / "t.tsv")


def fake_corel(root, train="1001 1\n1002 2\n", test="2001 1 2\n2001 1 2\n", pictures=None):
    """A Corel-5k-shaped folder: labels/ (words, training_label, test_label) and images/."""
    (root / "labels").mkdir(parents=True)
    (root / "labels" / "words").write_text("sky\nsea\n")
    (root / "labels" / "training_label").write_text(train)
    (root / "labels" / "test_label").write_text(test)
    for pid in pictures if pictures is not None else ("1001", "1002", "2001", "1003"):
        picture(root / "images" / f"{int(pid) // 1000 * 1000}" / f"{pid}.jpeg")
    return root


def test_corel_repeated_test_line_kept_once_and_unlabelled_picture_kept(tmp_path):
    c = load_collection(f"corel5k:{fake_corel(tmp_path)}")
    assert c.ids == ["1001", "1002", "2001", "1003"]
    assert c.splits == ["train", "train", "test", ""] and c.captions[3] is None
    assert len(c.warnings) == 1 and "test_label:2: picture 2001 repeats line 1" in c.warnings[0]


def test_corel_repeated_id_with_another_caption(tmp_path):
    root = fake_corel(tmp_path, test="2001 1 2\n2001 1\n")
    with pytest.raises(DataError, match=r"test_label:2: picture 2001 already listed in "
                                        r"test_label:1"):
        load_collection(f"corel5k:{root}")


def test_corel_missing_pictures_and_folder(tmp_path):
    root = fake_corel(tmp_path / "a", pictures=("1001", "2001"))
    with pytest.raises(DataError, match=r"1 labelled pictures are missing .*1002\.jpeg"):
        load_collection(f"corel5k:{root}")
    root = fake_corel(tmp_path / "b", pictures=())
    with pytest.raises(DataError, match=r"images: folder not found"):
        load_collection(f"corel5k:{root}")


def test_corel_non_utf8_label_file(tmp_path):
    root = fake_corel(tmp_path)
    (root / "labels" / "words").write_bytes("sky\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"words:2: not UTF-8"):
        load_collection(f"corel5k:{root}")


def test_text_vectors_binary_by_default_tf_as_an_option():
    import numpy as np
    import scipy.sparse as sp

    from pamir.text.vectors import bag_of_words, idf, text_vectors
    counts = bag_of_words([["sky", "sky", "sea"]], {"sky": 0, "sea": 1})
    assert counts.toarray().tolist() == [[2, 1]]
    w = idf(sp.csr_matrix([[1, 1], [1, 0], [0, 1], [1, 0]]))  # sky in 3 of 4, sea in 2 of 4
    assert np.allclose(w, [-np.log(0.75), -np.log(0.5)])
    binary = text_vectors(counts, w).toarray()[0]
    tf = text_vectors(counts, w, tf=True).toarray()[0]
    assert np.allclose(binary, w / np.linalg.norm(w))
    assert np.allclose(tf, [2, 1] * w / np.linalg.norm([2, 1] * w))
