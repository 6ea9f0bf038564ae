"""The reading stage of `pamir index` (pamir.features.rasters, pamir.index.stage,
pamir.jobs.indexing): each picture decoded once, at what every pass reads every picture at,
for the look, the thumbnails, the text and the faces, and a closer look only where a pass
found something (a JPEG decoded again, a HEIC's kept from its one decode); the CNN's inputs
unchanged for pictures that need no reduction (Corel's); HEIC, AVIF and a 24-MP JPEG indexed
and found; thumbnails written while indexing; searches answered while the text pass still
reads; the stream bounded by pixels; the progress record the page shows."""

from __future__ import annotations

import collections
import io
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pamir.features import images
from pamir.features.cnn import CNNRepresentation, CNNSettings, prepare_picture
from pamir.features.rasters import SLACK, Need, look_needs, read_item, rgb_for, sharing
from pamir.index import Index
from pamir.index.progress_record import read_progress
from pamir.jobs.indexing import IndexJob, run_index

#: What the stage reads every picture at with text and faces on (the text detector's and the
#: face detector's sides, met within SLACK), and their closer looks' longest side.
NEEDS = [Need("look", short=224), Need("text", long=320, slack=SLACK),
         Need("faces", long=1024, slack=SLACK), Need("thumbnails", long=512)]
DETAIL = 2048


@pytest.fixture
def decodes(monkeypatch):
    """Every decode of pamir's (pamir.features.images.decode_reduced), counted by the
    content hash of the bytes decoded."""
    counted: collections.Counter = collections.Counter()
    real = images.decode_reduced

    def counting(data, short_side=None):
        counted[images.content_hash(data)] += 1
        return real(data, short_side)

    monkeypatch.setattr(images, "decode_reduced", counting)
    return counted


def corel_files(corel_root, n=4) -> list[Path]:
    return sorted((Path(corel_root) / "images" / "1000").glob("*.jpeg"))[:n]


# ------------------------------------------------------------------ the CNN's inputs
def test_the_cnn_and_visterms_inputs_of_corel_pictures_are_today_s_bit_for_bit(
        corel_root, tmp_path, decodes):
    """Corel's 384x256 pictures need no reduction: the input the network sees from the
    shared raster is the one prepare_picture makes from the file, and so are the visterms'
    (and a panorama longer than MAX_ASPECT, centre-cropped); the shared raster is the only
    decode."""
    wide = tmp_path / "wide.png"
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (100, 420, 3), np.uint8)).save(wide)
    for path in [*corel_files(corel_root), wide]:
        data = path.read_bytes()
        today = prepare_picture(data, 224)
        visterms_today = images.decode_rgb(data, 128)
        decodes.clear()
        item = read_item(path, NEEDS)
        with sharing([item]):
            assert np.array_equal(prepare_picture(data, 224, item.digest), today)
            assert np.array_equal(rgb_for(data, item.digest, 128), visterms_today)
        assert list(decodes.values()) == [1], path.name


def test_the_pooled_cnn_features_of_corel_pictures_are_unchanged(corel_root, decodes):
    """The features themselves (EfficientNet-Lite0, no cache): the same numbers from the
    shared rasters as from the files, with no decode beyond the stage's."""
    paths = [str(p) for p in corel_files(corel_root, 3)]
    rep = CNNRepresentation(CNNSettings(), cache_dir=None, progress=False)
    today = rep.pooled(paths)
    items = [read_item(p, look_needs(rep)) for p in paths]
    decodes.clear()
    with sharing(items):
        shared = rep.pooled(paths)
    assert np.array_equal(today.X, shared.X) and shared.ok.all()
    assert not decodes


def test_a_big_jpeg_is_decoded_at_what_every_pass_reads_and_closer_only_when_asked(
        tmp_path, decodes):
    """A 24-MP JPEG is decoded by libjpeg at 1/4 scale: the face detector's 1,024 pixels;
    its closer look (the text's 1,600, the small faces' 2,048) is a second decode at 1/2,
    made when a pass asks for it, once for both."""
    path = tmp_path / "big.jpg"
    Image.new("RGB", (6000, 4000), (90, 120, 200)).save(path, quality=92)
    item = read_item(path, NEEDS, DETAIL)
    assert item.ok and item.size == (6000, 4000)
    assert item.rgb.shape[:2] == (1000, 1500)
    assert sum(decodes.values()) == 1
    frameless = item.without_frames()  # what a pass holds beside its raster
    assert frameless.detail(1600).shape[:2] == (1067, 1600)
    assert frameless.detail(2048).shape[:2] == (1365, 2048)
    assert sum(decodes.values()) == 2  # the 1/2 decode, kept for the second pass
    small = read_item(path, [Need("look", short=224)])
    assert small.rgb.shape[:2] == (500, 750)  # 1/8: the CNN's 224 alone


def test_a_12_mp_photo_is_not_decoded_whole_for_the_faces_2048_pixels(tmp_path):
    """4032 x 2688: its 1/2 scale (2,016) is within SLACK of the small faces' 2,048 and its
    1/4 (1,008) of the detector's 1,024, so neither decodes it whole (before, the 2,048 did:
    a 33-MB raster for each photo in flight)."""
    path = tmp_path / "phone.jpg"
    Image.new("RGB", (4032, 2688), (90, 120, 200)).save(path, quality=92)
    item = read_item(path, NEEDS, DETAIL)
    assert item.rgb.shape[:2] == (672, 1008)
    assert item.detail(2048).shape[:2] == (1344, 2016)


def test_a_photo_read_ahead_is_decoded_once_for_its_raster_and_its_closer_look(tmp_path,
                                                                                decodes):
    """Read ahead (where most pictures lately asked for their closer look): the 12-MP JPEG
    is decoded once at 1/2, the raster every pass reads made from it as read otherwise, the
    closer look kept; a pass asking for no more than the raster is not counted as asking,
    one asking for more is, once."""
    path = tmp_path / "phone.jpg"
    Image.new("RGB", (4032, 2688), (90, 120, 200)).save(path, quality=92)
    asked = []
    item = read_item(path, NEEDS, DETAIL, ahead=True, asked=lambda: asked.append(1))
    assert item.rgb.shape[:2] == (672, 1008) and sum(decodes.values()) == 1
    frameless = item.without_frames()
    assert frameless.detail(1000).shape[:2] == (667, 1000) and asked == []
    assert frameless.detail(2048).shape[:2] == (1344, 2016)
    assert frameless.detail(1600).shape[:2] == (1067, 1600)
    assert asked == [1] and sum(decodes.values()) == 1


def test_a_picture_decoded_whole_keeps_its_closer_look_from_that_decode(tmp_path, decodes):
    """A PNG (any format libjpeg does not scale) is decoded once, whole: the raster every
    pass reads is reduced from it, and its closer look kept, not decoded again."""
    path = tmp_path / "big.png"
    Image.new("RGB", (4096, 3072), (10, 200, 90)).save(path)
    item = read_item(path, NEEDS, DETAIL)
    assert item.rgb.shape[:2] == (768, 1024)
    assert item.without_frames().detail(2048).shape[:2] == (1536, 2048)
    assert sum(decodes.values()) == 1


def test_a_pass_reads_a_mid_sized_picture_closer_on_the_raster_read(tmp_path, decodes):
    """A 1,024-px picture is read at its full size; the text pass detects at 320 pixels and
    reads its lines on the 1,024-pixel raster, with no second decode."""
    path = tmp_path / "sign.jpg"
    Image.new("RGB", (1024, 683), (90, 120, 200)).save(path, quality=92)
    item = read_item(path, NEEDS, DETAIL)
    kept, rgb = item.for_pass(320, 1600)
    assert max(rgb.shape[:2]) == 320 and kept.detail(1600).shape[:2] == (683, 1024)
    assert sum(decodes.values()) == 1


def test_a_changed_file_gives_no_closer_look(tmp_path):
    """A file written again between the decode and the closer look: the closer look is not
    taken from other bytes than the item's."""
    path = tmp_path / "big.jpg"
    Image.new("RGB", (4032, 2688), (90, 120, 200)).save(path, quality=92)
    item = read_item(path, NEEDS, DETAIL)
    Image.new("RGB", (4032, 2688), (200, 20, 20)).save(path, quality=92)
    assert item.without_frames().detail(1600) is None


def test_an_unreadable_file_gives_its_reason_and_no_second_decode(tmp_path, decodes):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not a JPEG")
    item = read_item(bad, NEEDS)
    assert not item.ok and item.reason
    with sharing([item]), pytest.raises(images.ImageError, match=item.reason[:20]):
        rgb_for(bad.read_bytes(), item.digest, 224)
    assert sum(decodes.values()) == 1


# ----------------------------------------------------------------- a whole `pamir index`
def painted(word: str, size: tuple[int, int]) -> Image.Image:
    from pictures import paint

    return Image.fromarray(paint(word, "DejaVuSans-Bold.ttf", 48, (20, 20, 20),
                                 (240, 232, 205), 0)).resize(size, Image.Resampling.BICUBIC)


@pytest.fixture(scope="module")
def phone_folder(tmp_path_factory):
    """A HEIC, an AVIF, a 24-MP JPEG and a small PNG, each with its word painted on it."""
    from pamir.features.images import register_formats

    register_formats()
    folder = tmp_path_factory.mktemp("phone")
    painted("HARBOUR", (1200, 800)).save(folder / "a.heic", quality=90)
    painted("MUSEUM", (1200, 800)).save(folder / "b.avif", quality=90)
    painted("BAKERY", (6000, 4000)).save(folder / "c.jpg", quality=92)
    painted("STATION", (480, 320)).save(folder / "d.png")
    return folder


@pytest.fixture(scope="module")
def indexed(phone_folder, tmp_path_factory):
    """The folder through `pamir index`'s job (no model: ImageNet's words), text and faces
    on, every decode counted."""
    pytest.importorskip("rapidocr")
    pytest.importorskip("dlib")
    counted: collections.Counter = collections.Counter()
    real = images.decode_reduced

    def counting(data, short_side=None):
        counted[images.content_hash(data)] += 1
        return real(data, short_side)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAMIR_EMBEDDINGS", "0")
        mp.setattr(images, "decode_reduced", counting)
        ix = tmp_path_factory.mktemp("ix") / "index"
        report, status = run_index(IndexJob([phone_folder], index_dir=ix))  # every pass
    return ix, report, status, counted


def test_every_picture_is_decoded_once_and_a_big_jpeg_again_where_it_has_text(
        indexed, phone_folder):
    """With text and faces on, each picture is decoded once; the 24-MP JPEG, whose sign the
    text pass finds at its 1,500 pixels, once more for its lines' closer look (the HEIC and
    the AVIF, decoded whole, keep theirs)."""
    ix, report, status, counted = indexed
    assert status["pictures"] == 4 and not report.failed
    assert report.text["read"] == 4 and report.faces["read"] == 4
    for path in phone_folder.iterdir():
        expected = 2 if path.name == "c.jpg" else 1
        assert counted[images.content_hash(path.read_bytes())] == expected, path.name


@pytest.mark.parametrize("word, name", [("harbour", "a.heic"), ("museum", "b.avif"),
                                        ("bakery", "c.jpg"), ("station", "d.png")])
def test_heic_avif_and_a_24_mp_jpeg_are_indexed_and_found(indexed, word, name):
    ix = indexed[0]
    with Index.open(ix) as index:
        assert [Path(h.path).name for h in index.search(f"text:{word}", 1)] == [name]


def test_thumbnails_are_made_while_indexing(indexed):
    ix = indexed[0]
    with Index.open(ix) as index:
        for p in index.pictures():
            long_side = {"a.heic": 1200, "b.avif": 1200, "c.jpg": 6000, "d.png": 480}[
                Path(p.path).name]
            for size in (256, 512):
                thumb = ix / "thumbnails" / f"{p.hash}-{size}.jpg"
                with Image.open(thumb) as im:  # never enlarged
                    assert max(im.size) == min(size, long_side)
    record = read_progress(ix)
    assert not record["running"]
    assert {p["name"]: (p["done"], p["total"]) for p in record["passes"]} == {
        "look": (4, 4), "text": (4, 4), "faces": (4, 4), "copies": (4, 4), "colour": (4, 4)}
    assert [p["label"] for p in record["passes"]] == [
        "indexing", "reading text", "finding faces", "finding copies", "naming colours"]


def test_searches_are_answered_while_the_text_pass_reads(tmp_path, monkeypatch):
    """The look is committed batch by batch while the text pass reads behind it: a search
    answers (and the progress record says the text pass is behind) while the reader is
    held; the text read then is committed."""
    from fakes import FakeSystem
    from pictures import make_pictures

    import pamir.facts.ocr as ocr
    from pamir.jobs import indexing

    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")
    folder = tmp_path / "pictures"
    make_pictures(folder)
    reading, searched = threading.Event(), threading.Event()

    def held_reader(pictures):
        reading.set()
        assert searched.wait(60)
        return [([], "") for _ in pictures]

    monkeypatch.setattr(ocr, "shared_reader", lambda *a, **kw: None)
    monkeypatch.setattr(ocr, "read_text_rasters", held_reader)
    alone = indexing._alone  # the text pass's rest reads nothing (no [ocr] extra needed)
    monkeypatch.setattr(indexing, "_alone", lambda index, p, *a: _no_rest() if p.name == "text"
                        else alone(index, p, *a))
    job = IndexJob([folder], index_dir=tmp_path / "ix", passes=("text", "copies"), batch_size=2)
    out = {}
    worker = threading.Thread(target=lambda: out.update(report=run_index(
        job, system=FakeSystem(), fingerprint="fake")[0]))
    worker.start()
    try:
        assert reading.wait(60)
        assert _answered(tmp_path / "ix", "red")  # the reader still holds the first pictures
        record = read_progress(tmp_path / "ix")
        text = {p["name"]: p for p in record["passes"]}["text"]
        assert record["running"] and text["done"] < text["total"]
    finally:
        searched.set()
        worker.join(60)
    assert out["report"].text["read"] == len(list(folder.iterdir()))


def _answered(ix: Path, query: str, seconds: float = 60) -> bool:
    """Whether a search of `query` finds pictures within `seconds` (the look commits batch
    by batch, the first just after the reader got its pictures)."""
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if Index.exists(ix):
            with Index.open(ix) as index:
                if index.search(query, 3):
                    return True
        time.sleep(0.2)
    return False


def _no_rest():
    from pamir.index.passes import PassReport

    return PassReport("text").as_dict()


# ------------------------------------------------------------------------ the page
def test_the_page_reads_the_progress_record_and_the_indexed_thumbnails(tmp_path):
    """GET /api/progress gives the record the indexer writes (the page's line "text: 2 of
    9 pictures"); a thumbnail the indexer wrote is served as it is, one missing is made
    on request as before."""
    from fastapi.testclient import TestClient
    from fakes import FakeSystem, build_index

    from pamir.index.progress_record import ProgressRecord
    from pamir.server import create_app

    system = FakeSystem()
    ix = build_index(tmp_path, system)
    record = ProgressRecord(ix, labels={"look": "indexing", "text": "reading text"})
    record.set("look", 9, 9)
    record.set("text", 2, 9)
    with Index.open(ix) as index:
        first, *rest = index.pictures()
    second = next(p for p in rest if p.hash != first.hash)
    made = ix / "thumbnails" / f"{first.hash}-256.jpg"
    made.parent.mkdir(exist_ok=True)
    Image.new("RGB", (7, 5), (1, 2, 3)).save(made)
    with TestClient(create_app(ix, system=system)) as client:
        got = client.get("/api/progress").json()
        assert got["running"] and got["passes"] == [  # in the writer's order, its labels
            {"name": "look", "label": "indexing", "done": 9, "total": 9},
            {"name": "text", "label": "reading text", "done": 2, "total": 9}]
        assert client.get(f"/api/pictures/{first.id}/thumbnail?size=200").content == \
            made.read_bytes()
        r = client.get(f"/api/pictures/{second.id}/thumbnail?size=200")
        assert r.status_code == 200 and Image.open(io.BytesIO(r.content)).size != (7, 5)
        record.finish()
        assert client.get("/api/progress").json()["running"] is False


def test_a_record_left_running_by_a_killed_indexer_reads_as_stopped(tmp_path):
    import json
    import subprocess
    import sys

    from pamir.index.progress_record import ProgressRecord

    ProgressRecord(tmp_path).set("look", 3, 10)
    assert read_progress(tmp_path)["running"]
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    record = json.loads((tmp_path / "progress.json").read_text())
    (tmp_path / "progress.json").write_text(json.dumps({**record, "pid": int(gone)}))
    assert read_progress(tmp_path)["running"] is False
    assert read_progress(tmp_path / "nothing") == {"running": False, "passes": []}


def test_a_pass_run_again_alone_decodes_each_picture_once_for_itself(indexed, phone_folder,
                                                                     decodes, monkeypatch):
    """A new text reader (another fingerprint) reads every picture again, by itself: one
    decode each, nothing for the look."""
    import pamir.facts.ocr as ocr
    from pamir.jobs.indexing import read_pass

    monkeypatch.setattr(ocr, "fingerprint", lambda settings=None: "another reader")
    with Index.open(indexed[0], writable=True) as index:
        assert read_pass(index, "text")["read"] == 4
    for path in phone_folder.iterdir():
        assert decodes[images.content_hash(path.read_bytes())] == 1, path.name


def test_a_streamed_pass_holds_no_more_pixels_than_its_bound(monkeypatch):
    """A pass that lags holds the look back once the pixels queued for it reach
    QUEUED_PIXELS (one chunk always goes through), and lets it go on as it reads."""
    from pamir.index import stage

    monkeypatch.setattr(stage, "QUEUED_PIXELS", 250)
    gate, done = threading.Event(), threading.Event()

    def read(inputs):
        assert gate.wait(30)
        return [([], "")] * len(inputs)

    stream = stage._Stream(stage.StreamedPass("p", (), read, None, None, lambda it, rgb: rgb))
    chunk = _chunk(2)  # 200 pixels
    stream.put(chunk)  # the first goes through, whatever its size
    putter = threading.Thread(target=lambda: (stream.put(chunk), done.set()))
    putter.start()
    assert not done.wait(0.5)  # 400 pixels would be over 250: the look waits
    gate.set()
    assert done.wait(30)
    stream.close()
    assert len(stream.ready()) == 2


def _chunk(n: int = 2) -> list:
    from pamir.features.rasters import Frame, Item

    return [Item(str(i), str(i), (10, 10), [Frame(None, np.zeros((10, 10, 3), np.uint8))])
            for i in range(n)]


def test_a_pass_s_models_load_once_on_its_readers_while_the_look_goes_on():
    """The models are loaded by the stream's first reader, once however many read, and the
    look's put does not wait for them."""
    from pamir.index import stage

    loaded, gate = [], threading.Event()

    def prepare():
        assert gate.wait(30)
        loaded.append(threading.current_thread().name)

    spec = stage.StreamedPass("p", (), lambda inputs: [([], "")] * len(inputs), None, None,
                              lambda it, rgb: rgb, readers=2, prepare=prepare)
    stream = stage._Stream(spec, readers=2)
    stream.put(_chunk())  # queued while the models load
    gate.set()
    stream.close()
    assert len(loaded) == 1 and loaded[0].startswith("pamir-p-")
    assert stream.error is None
    assert sorted(it.path for items, _ in stream.ready() for it in items) == ["0", "1"]


def test_a_chunk_is_read_by_every_reader_of_a_pass_at_once():
    """A pass with two readers reads a chunk's halves side by side (the last chunk of an
    update, read after the decoding ends, is not left to one core)."""
    from pamir.index import stage

    both, names = threading.Barrier(2, timeout=30), set()

    def read(inputs):
        names.add(threading.current_thread().name)
        both.wait()  # breaks (and fails the test) unless the other reader reads meanwhile
        return [([], "")] * len(inputs)

    spec = stage.StreamedPass("p", (), read, None, None, lambda it, rgb: rgb, readers=2)
    stream = stage._Stream(spec, readers=2)
    stream.put(_chunk(4))
    stream.close()
    assert stream.error is None and len(names) == 2
    assert sorted(len(items) for items, _ in stream.ready()) == [2, 2]


def test_a_batch_s_first_pictures_are_decoded_while_its_metadata_is_read(tmp_path,
                                                                          monkeypatch):
    """The writer hands the reading stage a batch's paths before it reads their metadata
    and hashes (the places' gazetteer, on the first batch, takes about a second): the
    decoding has begun before the metadata is read, and each picture is decoded once."""
    from fakes import FakeSystem

    from pamir.index import stage, sync

    for i in range(3):
        Image.new("RGB", (64, 48), (40 * i, 90, 200)).save(tmp_path / f"p{i}.png")
    decoded, counted = threading.Event(), collections.Counter()
    real_read, real_fill = stage.read_item, sync.fill_metadata

    def read_item(path, *args, **kwargs):
        counted[Path(path).name] += 1
        decoded.set()
        return real_read(path, *args, **kwargs)

    def fill_metadata(*args):
        assert decoded.wait(30), "the metadata was read before any picture was decoded"
        return real_fill(*args)

    monkeypatch.setattr(stage, "read_item", read_item)
    monkeypatch.setattr(sync, "fill_metadata", fill_metadata)
    system = FakeSystem()
    with Index.create(tmp_path / "ix", system.vocabulary, system.idf) as ix:
        reading = stage.ReadingStage(ix, system.transform_paths, [Need("look")])
        report = ix.update([tmp_path], reading)
        reading.finish()
        assert report.added == 3 and ix.status()["pictures"] == 3
    assert counted == {"p0.png": 1, "p1.png": 1, "p2.png": 1}


def test_a_pass_whose_models_fail_reads_nothing_streamed_and_keeps_why():
    """Its pictures are left to the pass run alone after, which says why."""
    from pamir.index import stage

    def prepare():
        raise RuntimeError("the models are missing")

    spec = stage.StreamedPass("p", (), lambda inputs: pytest.fail("read after a failure"),
                              None, None, lambda it, rgb: rgb, prepare=prepare)
    stream = stage._Stream(spec)
    stream.put(_chunk())
    stream.close()
    assert "models are missing" in str(stream.error) and stream.ready() == []
