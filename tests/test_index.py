"""The index: word-major scores, search, incremental update, crash safety, bad input."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import pamir.index.tuning as scores_mod
from pamir.index import Index, IndexDirError, QueryError, model_fingerprint

VOCAB = ["red", "green", "blue", "stripes"]
IDF = np.array([1.0, 1.0, 2.0, 0.5])


class ColourTransform:
    """A stand-in system: a picture's mean colour as its text-space vector; counts calls.
    Like System.transform_paths it gives (Z, ok, reasons)."""

    def __init__(self):
        self.seen: list[str] = []

    def __call__(self, paths):
        Z = np.zeros((len(paths), len(VOCAB)), np.float32)
        ok = np.zeros(len(paths), bool)
        reasons = [None] * len(paths)
        for i, p in enumerate(paths):
            self.seen.append(str(p))
            try:
                with Image.open(p) as im:
                    rgb = np.asarray(im.convert("RGB"), np.float32).mean(axis=(0, 1)) / 255
            except Exception as e:
                reasons[i] = f"not a picture ({type(e).__name__})"
                continue
            Z[i, :3] = rgb
            Z[i, 3] = 0.1
            ok[i] = True
        return Z, ok, reasons


def picture(path, colour):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (16, 12), colour).save(path)
    return path


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    """Words outside the vocabulary stay unknown here (test_bridge maps them)."""
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "pics"
    picture(root / "red.png", (250, 0, 0))
    picture(root / "green.png", (0, 240, 0))
    picture(root / "sub" / "blue.png", (0, 0, 230))
    picture(root / "purple.png", (200, 0, 200))
    (root / "broken.jpg").write_bytes(b"not a jpeg at all")
    (root / "notes.txt").write_text("not a picture suffix")
    return root


@pytest.fixture
def index(tmp_path):
    with Index.create(tmp_path / "idx", VOCAB, IDF) as ix:
        yield ix


def test_search_matches_brute_force_and_is_word_major(index):
    rng = np.random.default_rng(0)
    Z = rng.random((50, 4), dtype=np.float32)
    entries = [{"path": f"/p/{i}.png", "size": 1, "mtime_ns": 1, "hash": f"h{i}"}
               for i in range(50)]
    ids = index.add(entries, Z)
    q = index.parse_query("red stripes").vector
    expected = Z @ q
    hits = index.search(q, k=7)
    assert [h.id for h in hits] == [ids[j] for j in np.argsort(-expected)[:7]]
    np.testing.assert_allclose([h.score for h in hits], np.sort(expected)[::-1][:7], rtol=1e-6)
    assert hits[0].path == f"/p/{np.argmax(expected)}.png"
    # Stored word-major: row t of the file is word t's scores over the pictures.
    raw = np.fromfile(index._matrix.path, np.float32)
    raw = raw.reshape(len(VOCAB), -1)
    cols = [index.picture(i).col for i in ids]
    np.testing.assert_array_equal(raw[:, cols], Z.T)
    assert index.search("red", k=1000)[-1].score == pytest.approx(Z[:, 0].min())


def test_query_vector_is_normalised_idf_and_reports_unknown_words(index):
    q = index.parse_query("Blue, red and unicorns!")
    assert q.words == ["blue", "red"] and q.unknown == ["unicorns"]
    expected = np.array([1.0, 0, 2.0, 0]) / np.sqrt(5)
    np.testing.assert_allclose(q.vector, expected, rtol=1e-6)
    with pytest.raises(QueryError, match="empty"):
        index.parse_query("   ")
    with pytest.raises(QueryError, match="vocabulary") as e:
        index.parse_query("unicorns dragons")
    assert e.value.unknown == ["unicorns", "dragons"]
    with pytest.raises(QueryError, match="stop words"):
        index.parse_query("the and of")
    with pytest.raises(ValueError, match="at least one"):
        index.search("red", k=0)


def test_remove_frees_columns_for_reuse(index):
    Z = np.eye(4, dtype=np.float32)
    ids = index.add([{"path": f"/p/{i}", "size": 1, "mtime_ns": 1, "hash": str(i)}
                     for i in range(4)], Z)
    assert index.remove([ids[0], 12345]) == 1
    assert [h.id for h in index.search("red", k=10)][0] != ids[0]
    assert len(index) == 3
    new = index.add([{"path": "/p/new", "size": 1, "mtime_ns": 1, "hash": "n"}],
                     np.array([[9, 0, 0, 0]], np.float32))
    assert index.picture(new[0]).col == 0  # the freed slot is used again
    assert index.search("red", k=1)[0].id == new[0]


def test_matrix_grows_and_keeps_scores(index, monkeypatch):
    monkeypatch.setattr(scores_mod, "MIN_CAPACITY", 2)
    rng = np.random.default_rng(1)
    Z = rng.random((11, 4), dtype=np.float32)
    for i in range(11):
        index.add([{"path": f"/p/{i}", "size": 1, "mtime_ns": 1, "hash": str(i)}], Z[i:i + 1])
    files = list(index.directory.glob("scores-*.f32"))
    assert len(files) == 1  # old generations deleted
    reopened = Index.open(index.directory)
    for i, p in enumerate(reopened.pictures()):
        np.testing.assert_array_equal(reopened.vector(p.id), Z[i])


def test_update_incremental(folder, index):
    t = ColourTransform()
    r = index.update([folder], t)
    assert (r.added, r.removed, r.unchanged) == (4, 0, 0)
    assert [os.path.basename(p) for p, _ in r.failed] == ["broken.jpg"]
    assert r.failed[0][1] == "not a picture (UnidentifiedImageError)"  # the transform's reason
    assert index.search("red", k=1)[0].path.endswith("red.png")
    assert index.search("blue", k=1)[0].path.endswith("blue.png")
    assert index.status()["failed"] == 1

    # Nothing changed: nothing computed; the failure is still reported.
    t.seen.clear()
    r = index.update([folder], t)
    assert t.seen == [] and r.unchanged == 5 and len(r.failed) == 1

    # Rename and copy are recognised by content hash: no recomputation.
    (folder / "red.png").rename(folder / "sub" / "scarlet.png")
    (folder / "copy.png").write_bytes((folder / "green.png").read_bytes())
    red_id = next(p.id for p in index.pictures() if p.path.endswith("red.png"))
    r = index.update([folder], t)
    assert t.seen == [] and (r.renamed, r.copied, r.removed) == (1, 1, 0)
    assert index.picture(red_id).path.endswith("scarlet.png")

    # A changed file is recomputed; a deleted one dropped; touching alone changes nothing.
    picture(folder / "green.png", (0, 0, 255))
    (folder / "purple.png").unlink()
    os.utime(folder / "sub" / "blue.png", ns=(1, 1))
    r = index.update([folder], t)
    assert [os.path.basename(p) for p in t.seen] == ["green.png"]
    assert (r.changed, r.removed, r.added) == (1, 1, 0)
    assert {os.path.basename(p.path) for p in index.pictures("ok")} == {
        "scarlet.png", "green.png", "blue.png", "copy.png"}
    top = [os.path.basename(h.path) for h in index.search("blue", k=2)]
    assert set(top) == {"green.png", "blue.png"}

    # Repairing the broken file makes it indexed.
    picture(folder / "broken.jpg", (10, 200, 10))
    r = index.update([folder], t)
    assert r.changed == 1 and r.failed == [] and index.status()["failed"] == 0


def test_update_skips_an_index_inside_the_folder(tmp_path):
    root = tmp_path / "pics"
    picture(root / "a.png", (255, 0, 0))
    with Index.create(root / "my-index", VOCAB, IDF) as ix:
        picture(root / "my-index" / "thumbnails" / "x.jpg", (1, 2, 3))
        r = ix.update([root], ColourTransform())
        assert r.added == 1 and [p.path for p in ix.pictures()] == [str(root / "a.png")]


def test_update_only_drops_pictures_under_the_given_folders(tmp_path, index):
    a, b = tmp_path / "a", tmp_path / "b"
    picture(a / "x.png", (255, 0, 0))
    picture(b / "y.png", (0, 255, 0))
    index.update([a, b], ColourTransform())
    r = index.update([a], ColourTransform())
    assert r.removed == 0 and len(index) == 2
    with pytest.raises(IndexDirError, match="not a folder"):
        index.update([tmp_path / "missing"], ColourTransform())


def test_update_resumes_after_interruption(tmp_path, index):
    root = tmp_path / "many"
    for i in range(7):
        picture(root / f"{i}.png", (i * 30, 0, 0))

    class Interrupted(ColourTransform):
        def __call__(self, paths):
            if self.seen:
                raise KeyboardInterrupt
            return super().__call__(paths)

    with pytest.raises(KeyboardInterrupt):
        index.update([root], Interrupted(), batch_size=3)
    index.close()
    resumed = Index.open(index.directory, writable=True)
    assert len(resumed) == 3  # the first batch was committed
    t = ColourTransform()
    r = resumed.update([root], t, batch_size=3)
    assert len(t.seen) == 4 and r.added == 4 and r.unchanged == 3 and len(resumed) == 7
    resumed.close()


def test_crash_leftovers_are_harmless(tmp_path, index):
    index.add([{"path": "/p/a", "size": 1, "mtime_ns": 1, "hash": "a"}],
              np.ones((1, 4), np.float32))
    d = index.directory
    index.close()
    (d / "scores-99.f32").write_bytes(b"\0" * 64)  # a grow that never committed
    ix = Index.open(d, writable=True)
    assert not (d / "scores-99.f32").exists()
    assert ix.search("red", k=5)[0].path == "/p/a"
    ix.close()
    # A creation that crashed leaves only a hidden sibling, never a half-made index.
    assert not any(p.name.startswith(".idx.creating") for p in d.parent.iterdir())


def test_bad_index_dirs(tmp_path, index):
    with pytest.raises(IndexDirError, match="no index there"):
        Index.open(tmp_path / "nowhere")
    with pytest.raises(IndexDirError, match="already exists"):
        Index.create(index.directory, VOCAB, IDF)
    with pytest.raises(IndexDirError, match="another"):
        Index.open(index.directory, writable=True)  # the fixture holds the writer lock
    with pytest.raises(IndexDirError, match="one entry per word"):
        Index.create(tmp_path / "x", VOCAB, IDF[:2])
    ro = Index.open(index.directory)
    with pytest.raises(IndexDirError, match="read-only"):
        ro.remove([1])
    ro.close()
    (tmp_path / "bad").mkdir()
    conn = sqlite3.connect(tmp_path / "bad" / "catalog.sqlite")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '999')")
    conn.commit()
    conn.close()
    with pytest.raises(IndexDirError, match="schema version 999"):
        Index.open(tmp_path / "bad")


def test_reader_sees_writer_commits(index):
    reader = Index.open(index.directory)
    assert len(reader) == 0
    index.add([{"path": "/p/a", "size": 1, "mtime_ns": 1, "hash": "a"}],
              np.ones((1, 4), np.float32))
    assert reader.refresh() and len(reader) == 1
    assert not reader.refresh()
    assert reader.search("green", k=3)[0].path == "/p/a"
    reader.close()


def test_model_fingerprint_ignores_an_index_inside(tmp_path):
    m = tmp_path / "model"
    m.mkdir()
    (m / "model.json").write_text("{}")
    before = model_fingerprint(m)
    (m / "index").mkdir()
    (m / "index" / "catalog.sqlite").write_text("x")
    assert model_fingerprint(m) == before
    (m / "model.json").write_text('{"a": 1}')
    assert model_fingerprint(m) != before


def test_ties_the_top_k_is_a_prefix_of_a_longer_top(tmp_path, index):
    root = tmp_path / "same"
    for i in range(12):
        picture(root / f"p{i:02d}.png", (200, 0, 0))  # identical scores for every query
    index.update([root], ColourTransform())
    top8 = [h.id for h in index.search("red", k=8)]
    assert [h.id for h in index.search("red", k=3)] == top8[:3]
    assert top8 == sorted(top8)  # equal scores: smallest ids first


def test_a_link_is_indexed_as_itself_and_dropped_with_it(tmp_path, index):
    outside = picture(tmp_path / "elsewhere" / "x.png", (0, 250, 0))
    root = tmp_path / "pics"
    picture(root / "a.png", (250, 0, 0))
    (root / "link.png").symlink_to(outside)
    index.update([root], ColourTransform())
    assert sorted(os.path.basename(p.path) for p in index.pictures()) == ["a.png", "link.png"]
    (root / "link.png").unlink()
    r = index.update([root], ColourTransform())
    assert r.removed == 1 and [os.path.basename(p.path) for p in index.pictures()] == ["a.png"]


def test_an_undecodable_picture_is_recorded_with_the_transforms_reason(tmp_path, index):
    """The reason stored is the one transform_paths gives: the index decodes nothing."""
    root = tmp_path / "pics"
    picture(root / "good.png", (250, 0, 0))
    picture(root / "bad.png", (0, 250, 0))  # decodable; the transform says otherwise
    why = "corrupt or truncated (broken data stream when reading image file)"
    colour = ColourTransform()

    def transform(paths):
        Z, ok, reasons = colour(paths)
        bad = [i for i, p in enumerate(paths) if p.endswith("bad.png")]
        ok[bad] = False
        for i in bad:
            reasons[i] = why
        return Z, ok, reasons

    r = index.update([root], transform)
    assert r.added == 1 and r.failed == [(str(root / "bad.png"), why)]
    [failed] = index.pictures("failed")
    assert failed.path == str(root / "bad.png") and failed.reason == why and failed.col is None
    r = index.update([root], transform)  # unchanged: reported again from the catalogue
    assert r.failed == [(str(root / "bad.png"), why)] and r.unchanged == 2


def test_a_failure_without_a_reason_gets_a_generic_one(tmp_path, index):
    picture(tmp_path / "pics" / "a.png", (1, 2, 3))
    r = index.update([tmp_path / "pics"],
                     lambda paths: (np.zeros((len(paths), 4)), [False] * len(paths),
                                    [None] * len(paths)))
    assert r.failed[0][1] == "could not be read"


def test_an_empty_index_answers_with_no_hits(index):
    assert index.search("red", k=5) == []
    index.add_failed({"path": "/p/x", "size": 1, "mtime_ns": 1, "hash": "x"}, "broken")
    assert index.search("red", k=5) == [] and len(index) == 0


def test_destroy_deletes_the_index_files_only(tmp_path, index):
    index.add([{"path": "/p/a", "size": 1, "mtime_ns": 1, "hash": "a"}],
              np.ones((1, 4), np.float32))
    d = index.directory
    index.thumbnails_dir.mkdir()
    (index.thumbnails_dir / "a-256.jpg").write_bytes(b"x")
    with pytest.raises(IndexDirError, match="another"):
        Index.destroy(d)  # the fixture is still writing it
    index.close()
    assert Index.exists(d)
    (d / "mine.txt").write_text("a person's file")
    Index.destroy(d)
    assert not Index.exists(d) and sorted(p.name for p in d.iterdir()) == ["mine.txt"]
    (d / "mine.txt").unlink()
    Index.destroy(d)  # nothing of an index left: nothing to do
    Index.create(d, VOCAB, IDF).close()
    Index.destroy(d)
    assert not d.exists()  # the folder went with the last index file


def test_rebuild_replaces_an_index_with_an_empty_one(tmp_path, index):
    index.add([{"path": "/p/a", "size": 1, "mtime_ns": 1, "hash": "a"}],
              np.ones((1, 4), np.float32))
    d = index.directory
    index.close()
    with Index.rebuild(d, VOCAB[:2], IDF[:2], fingerprint="new") as ix:
        assert len(ix) == 0 and ix.vocabulary == VOCAB[:2] and ix.model_fingerprint == "new"
    (d / "catalog.sqlite").write_bytes(b"not sqlite at all, a damaged index")
    with pytest.raises(IndexDirError, match="--rebuild"):
        Index.open(d)
    Index.rebuild(d, VOCAB, IDF).close()  # a damaged index can be rebuilt


def test_a_file_name_that_is_not_utf8_is_indexed_and_followed(tmp_path, index):
    """A name whose bytes are not UTF-8 (os.fsdecode: lone surrogates, which SQLite's text
    cannot hold) is indexed, found, filtered by folder, renamed, failed and dropped like any
    other; the run does not stop."""
    root = tmp_path / "pics"
    bad = os.fsdecode(os.path.join(os.fsencode(root), b"bad-\xff\xfe.png"))
    picture(root / "red.png", (250, 0, 0))
    picture(Path(bad), (240, 0, 0))
    os.makedirs(os.path.join(os.fsencode(root), b"dir-\xff"))
    sub = os.fsdecode(os.path.join(os.fsencode(root), b"dir-\xff"))
    picture(Path(sub) / "blue.png", (0, 0, 230))
    with open(os.path.join(os.fsencode(root), b"broken-\xfe.jpg"), "wb") as f:
        f.write(b"not a jpeg")
    r = index.update([root], ColourTransform())
    assert r.added == 3 and len(r.failed) == 1 and "broken-" in r.failed[0][0]
    paths = {h.path for h in index.search("red", k=5)}
    assert bad in paths and str(root / "red.png") in paths
    assert open(bad, "rb").read(4) == b"\x89PNG"  # the path given back opens the file
    assert index.id_of_path(bad) is not None
    assert [h.path for h in index.search("blue", k=5, folders=[sub])] == [sub + "/blue.png"]
    moved = os.fsdecode(os.path.join(os.fsencode(root), b"moved-\xfe.png"))
    os.rename(bad, moved)
    t = ColourTransform()
    r = index.update([root], t)
    assert r.renamed == 1 and t.seen == [] and index.id_of_path(moved) is not None
    os.unlink(moved)
    r = index.update([root], t)
    assert r.removed == 1 and moved not in {p.path for p in index.pictures()}
    with Index.open(index.directory) as reader:  # a reader gives the same paths back
        assert {p.path for p in reader.pictures()} == {p.path for p in index.pictures()}


def test_an_update_commits_small_batches_first():
    """The first pictures are searchable after FIRST_BATCH are read, not a whole BATCH_SIZE;
    the batches then double, and every picture is in exactly one."""
    from pamir.index.sync import FIRST_BATCH, growing_batches

    todo = list(range(1000))
    batches = growing_batches(todo, 256)
    assert [len(b) for b in batches][:5] == [FIRST_BATCH, 2 * FIRST_BATCH, 4 * FIRST_BATCH,
                                             8 * FIRST_BATCH, 256]
    assert sum(batches, []) == todo
    assert [len(b) for b in growing_batches(list(range(7)), 3)] == [3, 3, 1]
