"""Videos (pamir.facts.video, pamir.index.videos): frames read every few seconds, the container's
date and GPS, a video indexed and found by its frames' look with the time of its best frame,
and a broken or truncated video skipped with a message naming it."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import av
import numpy as np
import pytest
from fakes import FakeSystem, run
from pictures import COLOURS

from pamir.index import Index
from pamir.facts.metadata import read_metadata
from pamir.facts.video import (VideoError, best_frame, clock, frame_times, parse_date,
                               parse_iso6709, read_video, video_row)

FPS = 4


def shot(colour: str, stripes: bool = False, size=(48, 64)) -> np.ndarray:
    a = np.zeros((*size, 3), np.uint8)
    a[:] = COLOURS[colour]
    if stripes:
        a[:, ::4] = 255
    return a


def write_video(path: Path, shots: list[np.ndarray], seconds_each: float = 5.0,
                metadata: dict | None = None, options: dict | None = None) -> Path:
    """A small H.264 video of `shots`, `seconds_each` each, a keyframe at each shot's start
    (every 5 s: a phone writes one every second or two)."""
    with av.open(str(path), "w", options=options or {}) as c:
        for k, v in (metadata or {}).items():
            c.metadata[k] = v
        s = c.add_stream("libx264", rate=FPS)
        s.height, s.width = shots[0].shape[:2]
        s.pix_fmt = "yuv420p"
        s.codec_context.gop_size = int(seconds_each * FPS)
        for rgb in shots:
            for _ in range(int(seconds_each * FPS)):
                for packet in s.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                    c.mux(packet)
        for packet in s.encode():
            c.mux(packet)
    return path


def colour_of(rgb: np.ndarray) -> str:
    mean = rgb.reshape(-1, 3).mean(axis=0)
    return min(COLOURS, key=lambda c: np.abs(mean - COLOURS[c]).sum())


# ------------------------------------------------------------------ reading a video

def test_frames_every_interval_with_their_times(tmp_path):
    p = write_video(tmp_path / "v.mp4", [shot("red"), shot("green"), shot("blue")])
    v = read_video(p)
    assert v.duration == pytest.approx(15, abs=0.3)
    assert [f.time for f in v.frames] == [0.0, 5.0, 10.0]
    assert [colour_of(f.rgb) for f in v.frames] == ["red", "green", "blue"]
    assert v.frames[0].rgb.dtype == np.uint8 and v.frames[0].rgb.shape == (48, 64, 3)


def test_frame_times_capped_and_spread():
    assert frame_times(12, interval=5, max_frames=10) == [0, 5, 10]
    assert frame_times(0.5, interval=5) == [0.0]
    long = frame_times(3600, interval=5, max_frames=12)
    assert len(long) == 12 and long[-1] == pytest.approx(3300)


def test_short_side_scales_frames(tmp_path):
    p = write_video(tmp_path / "v.mp4", [shot("red", size=(96, 128))], seconds_each=2)
    assert read_video(p, short_side=48).frames[0].rgb.shape == (48, 64, 3)


def test_date_and_gps_from_quicktime_metadata(tmp_path):
    p = write_video(tmp_path / "v.mov", [shot("red")], seconds_each=1, metadata={
        "com.apple.quicktime.creationdate": "2019-07-04T14:03:10+0200",
        "com.apple.quicktime.location.ISO6709": "+35.0116+135.7681+044.000/",
        "creation_time": "2019-07-04T12:03:10.000000Z"},
        options={"movflags": "use_metadata_tags"})
    v = read_video(p)
    assert v.taken == datetime(2019, 7, 4, 14, 3, 10)  # the local time, not UTC's
    assert v.gps == pytest.approx((35.0116, 135.7681))
    meta = read_metadata(p)  # what the index stores
    assert meta.taken == "2019-07-04T14:03:10" and meta.taken_from == "video container"
    assert meta.position == pytest.approx((35.0116, 135.7681))


def test_date_and_gps_from_android_metadata(tmp_path):
    p = write_video(tmp_path / "v.mp4", [shot("red")], seconds_each=1, metadata={
        "location": "-33.8568+151.2153/", "creation_time": "2020-01-02T03:04:05Z"})
    v = read_video(p)
    assert v.taken == datetime(2020, 1, 2, 3, 4, 5)
    assert v.gps == pytest.approx((-33.8568, 151.2153))


@pytest.mark.parametrize("text, expected", [
    ("+35.0116+135.7681+044.000/", (35.0116, 135.7681)), ("-08.5-070.25/", (-8.5, -70.25)),
    ("+00.0000+000.0000/", None), ("+95.0+010.0/", None), ("nowhere", None), ("", None)])
def test_iso6709(text, expected):
    assert parse_iso6709(text) == (pytest.approx(expected) if expected else None)


@pytest.mark.parametrize("text, expected", [
    ("2019-07-04T14:03:10+0200", datetime(2019, 7, 4, 14, 3, 10)),
    ("2019-07-04 14:03:10", datetime(2019, 7, 4, 14, 3, 10)),
    ("1904-01-01T00:00:00.000000Z", None), ("1970-01-01T00:00:00Z", None), ("soon", None)])
def test_container_dates(text, expected):
    assert parse_date(text) == expected


def test_broken_and_truncated_videos_raise_naming_the_file(tmp_path):
    good = write_video(tmp_path / "v.mp4", [shot("red"), shot("green"), shot("blue")])
    data = good.read_bytes()
    (tmp_path / "cut.mp4").write_bytes(data[: len(data) // 2])  # index (moov) at the end: lost
    fast = write_video(tmp_path / "fast.mp4", [shot("red"), shot("green"), shot("blue")],
                       options={"movflags": "faststart"})
    (tmp_path / "fastcut.mp4").write_bytes(fast.read_bytes()[: len(fast.read_bytes()) // 2])
    (tmp_path / "junk.mkv").write_bytes(b"\x1aE\xdf\xa3" + b"\x00" * 3000)
    for name in ("cut.mp4", "fastcut.mp4", "junk.mkv"):
        with pytest.raises(VideoError, match=name) as e:
            read_video(tmp_path / name)
        assert "copy it again" in str(e.value)


def test_video_row_max_or_mean_and_best_frame():
    rows = np.array([[1.0, 0.0], [0.2, 3.0]], np.float32)
    assert video_row(rows).tolist() == [1.0, 3.0]
    assert video_row(rows, "mean").tolist() == pytest.approx([0.6, 1.5])
    assert best_frame(rows, np.array([0.0, 1.0])) == 1
    with pytest.raises(ValueError, match="pooling"):
        video_row(rows, "median")
    assert clock(75.4) == "01:15" and clock(3725) == "1:02:05"


# ------------------------------------------------------------------ in the index

@pytest.fixture
def video_index(tmp_path):
    folder = tmp_path / "videos"
    folder.mkdir()
    write_video(folder / "walk.mp4", [shot("red"), shot("blue"), shot("green", stripes=True)])
    write_video(folder / "lake.mov", [shot("blue"), shot("blue")])
    good = write_video(tmp_path / "whole.mp4", [shot("red"), shot("green")]).read_bytes()
    (folder / "broken.mp4").write_bytes(good[: len(good) // 2])
    system = FakeSystem()
    with Index.create(tmp_path / "index", system.vocabulary, system.idf) as ix:
        report = ix.update([folder], system.transform_paths)
    return tmp_path / "index", folder, report


def test_video_found_by_its_frames_with_its_best_frame_time(video_index):
    index_dir, folder, report = video_index
    assert report.added == 2
    with Index.open(index_dir) as ix:
        hits = {Path(h.path).name: h for h in ix.search("stripes", k=5)}
        assert hits["walk.mp4"].time == pytest.approx(10.0)  # the striped green shot
        top = ix.search("red", k=1)[0]
        assert Path(top.path).name == "walk.mp4" and top.time == pytest.approx(0.0)
        blue = {Path(h.path).name: h.time for h in ix.search("blue", k=5)}
        assert blue["walk.mp4"] == pytest.approx(5.0)


def test_broken_video_skipped_with_a_message(video_index):
    _, folder, report = video_index
    failed = dict(report.failed)
    assert list(failed) == [str(folder / "broken.mp4")]
    assert "broken.mp4" in failed[str(folder / "broken.mp4")]


def test_cli_prints_path_at_time_and_json_time(video_index):
    index_dir, folder, _ = video_index
    out = run("search", "stripes", "--index", index_dir, "-k", "3").output
    assert f"{folder / 'walk.mp4'}@00:10" in out
    hits = json.loads(run("search", "stripes", "--index", index_dir, "--json").output)["hits"]
    assert {Path(h["path"]).name: h["time"] for h in hits}["walk.mp4"] == pytest.approx(10.0)


def test_page_gets_the_time_a_frame_and_the_video_by_ranges(video_index):
    from fastapi.testclient import TestClient

    from pamir.server.app import create_app

    index_dir, folder, _ = video_index
    with TestClient(create_app(index_dir, system=FakeSystem(), warm_mapping=False)) as c:
        hits = c.get("/api/search", params={"q": "stripes"}).json()["hits"]
        walk = next(h for h in hits if h["name"] == "walk.mp4")
        assert walk["time"] == pytest.approx(10.0)
        assert walk["video"] == f"/api/pictures/{walk['id']}/video"
        thumb = c.get(f"{walk['thumbnail']}?size=64&t={walk['time']}")
        assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/jpeg"
        from io import BytesIO

        from PIL import Image
        assert colour_of(np.asarray(Image.open(BytesIO(thumb.content)).convert("RGB"))) == "green"
        size = (folder / "walk.mp4").stat().st_size
        part = c.get(walk["video"], headers={"Range": "bytes=100-199"})
        assert part.status_code == 206 and len(part.content) == 100
        assert part.headers["content-range"] == f"bytes 100-199/{size}"
        assert part.content == (folder / "walk.mp4").read_bytes()[100:200]
        assert c.get(walk["video"]).headers["content-type"] == "video/mp4"


def _colour_reader(paths):
    """A pass's reader that finds each picture's colour as its one fact."""
    from PIL import Image
    return [([colour_of(np.asarray(Image.open(p).convert("RGB")))], None) for p in paths]


def test_passes_read_a_videos_frames_and_keep_every_frames_facts(tmp_path):
    import pickle

    from pamir.index.videos import FramesReader

    video = write_video(tmp_path / "v.mp4", [shot("red"), shot("blue")])
    picture = tmp_path / "g.png"
    from PIL import Image
    Image.fromarray(shot("green")).save(picture)
    (tmp_path / "bad.mp4").write_bytes(b"\x00" * 100)
    reader = pickle.loads(pickle.dumps(FramesReader(_colour_reader)))  # to a process, by pickle
    out = reader([str(video), str(picture), str(tmp_path / "bad.mp4")])
    assert out[0] == (["red", "blue"], None)
    assert out[1] == (["green"], None)
    assert out[2][0] is None and "bad.mp4" in out[2][1]


def test_video_through_the_reading_stage(tmp_path):
    from pamir.features.rasters import Need
    from pamir.index.stage import ReadingStage

    folder = tmp_path / "mixed"
    folder.mkdir()
    write_video(folder / "walk.mp4", [shot("red"), shot("green", stripes=True)])
    from PIL import Image
    Image.fromarray(shot("blue")).save(folder / "b.png")
    system = FakeSystem()
    with Index.create(tmp_path / "index", system.vocabulary, system.idf) as ix:
        stage = ReadingStage(ix, system.transform_paths, [Need("look")],
                             thumbnails=tmp_path / "index" / "thumbnails")
        report = ix.update([folder], stage)
        stage.finish()
        assert report.added == 2 and not report.failed
        hit = next(h for h in ix.search("stripes", k=2) if h.path.endswith("walk.mp4"))
        assert hit.time == pytest.approx(5.0)
        # the stage read no frame file as an item of its own: no stray thumbnails
        assert len(list((tmp_path / "index" / "thumbnails").glob("*.jpg"))) == 2


def test_a_copied_video_keeps_its_frames(video_index):
    import shutil

    index_dir, folder, _ = video_index
    shutil.copy(folder / "walk.mp4", folder / "walk-copy.mp4")
    system = FakeSystem()
    with Index.open(index_dir, writable=True) as ix:
        report = ix.update([folder], system.transform_paths)
        assert report.copied == 1
        hits = {Path(h.path).name: h.time for h in ix.search("stripes", k=5)}
    assert hits["walk-copy.mp4"] == pytest.approx(10.0)


def test_an_index_of_schema_5_gets_the_frames_table(video_index):
    import sqlite3

    from pamir.index import SCHEMA_VERSION

    index_dir, folder, _ = video_index
    conn = sqlite3.connect(index_dir / "catalog.sqlite")
    with conn:  # what schema 5 wrote
        conn.execute("DROP TRIGGER frames_of_removed")
        conn.execute("DROP TABLE frames")
        conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    conn.close()
    with Index.open(index_dir) as old:  # read-only: found, with no time
        assert all(h.time is None for h in old.search("stripes", k=3))
    (folder / "walk.mp4").touch()  # read again: its frames kept this time
    (folder / "walk.mp4").write_bytes((folder / "walk.mp4").read_bytes() + b"\0")
    with Index.open(index_dir, writable=True) as ix:
        ix.update([folder], FakeSystem().transform_paths)
        hits = {Path(h.path).name: h.time for h in ix.search("stripes", k=3)}
    assert hits["walk.mp4"] == pytest.approx(10.0)
    conn = sqlite3.connect(index_dir / "catalog.sqlite")
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
        == (str(SCHEMA_VERSION),)


def test_a_rescore_scores_a_video_again_through_its_frames(video_index):
    """After the model learns a word, a video is scored again frame by frame as `pamir index`
    reads it, not kept with the old scores: the new word finds it at its best frame."""
    index_dir, folder, _ = video_index
    system = FakeSystem()
    stripes = system.vocabulary.index("stripes")
    system.model.W_ = np.vstack([system.model.W_, system.model.W_[stripes]])
    vocabulary = [*system.vocabulary, "zebra"]
    with Index.open(index_dir, writable=True) as ix:
        report = ix.rescore(vocabulary, [*system.idf, 1.0], system.transform_paths)
        assert report["kept"] == [] and report["rescored"] == 2
        hits = {Path(h.path).name: h for h in ix.search("zebra", k=5)}
    assert hits["walk.mp4"].score > 0 and hits["walk.mp4"].time == pytest.approx(10.0)
