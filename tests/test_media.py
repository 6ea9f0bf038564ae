"""The media makers of tests/media.py make what they say: each file decodes at its size, and
its date and GPS position are read back where a phone puts them (pamir.facts.metadata for the
pictures' EXIF, the container's tags for videos)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import av
import numpy as np
import pytest
from PIL import Image

import media
from pamir.features.images import load_rgb
from pamir.facts.metadata import read_metadata

TAKEN = datetime(2019, 7, 4, 10, 20, 30)
KYOTO = (35.0116, 135.7681)
SANTIAGO = (-33.4489, -70.6693)  # south and west: the references' signs


@pytest.mark.parametrize("make, fmt", [(media.heic, "HEIF"), (media.avif, "AVIF"),
                                       (media.jpeg, "JPEG")])
def test_pictures_decode_at_their_size_with_their_date_and_place(tmp_path, make, fmt):
    path = make(tmp_path / f"p.{fmt.lower()}", size=(96, 64), taken=TAKEN, position=SANTIAGO)
    with Image.open(path) as im:
        assert im.format == fmt
    assert load_rgb(path).shape == (64, 96, 3)
    meta = read_metadata(path)
    assert meta.taken == "2019-07-04T10:20:30"
    assert meta.taken_from == "EXIF DateTimeOriginal"
    assert meta.position == pytest.approx(SANTIAGO, abs=1e-4)


def test_a_picture_without_date_or_place_has_no_exif(tmp_path):
    meta = read_metadata(media.heic(tmp_path / "p.heic"))
    assert meta.position is None and meta.taken_from != "EXIF DateTimeOriginal"


def test_an_array_is_saved_as_it_is(tmp_path):
    a = np.zeros((40, 60, 3), np.uint8)
    a[:, 30:] = (200, 30, 30)
    rgb = load_rgb(media.jpeg(tmp_path / "half.jpg", a, quality=95))
    assert rgb[20, 5].max() < 20 and rgb[20, 55, 0] > 180


def test_a_24_megapixel_jpeg_has_a_cameras_size_and_bytes(tmp_path):
    path = media.jpeg_24mp(tmp_path / "big.jpg", taken=TAKEN, position=KYOTO)
    with Image.open(path) as im:
        assert im.size == (6000, 4000)
        im.draft("RGB", (750, 500))  # decoded at 1/8: the test stays quick
        assert im.convert("RGB").size == (750, 500)
    # the noise keeps it a camera's few megabytes, not a flat gradient's few hundred kB
    assert path.stat().st_size > 3_000_000
    assert read_metadata(path).position == pytest.approx(KYOTO, abs=1e-4)


def _frames(path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


@pytest.mark.parametrize("suffix", [".mp4", ".mkv"])
def test_a_video_has_its_frames_date_and_location(tmp_path, suffix):
    path = media.video(tmp_path / f"v{suffix}", seconds=2, fps=10, size=(160, 96),
                       taken=TAKEN, position=KYOTO)
    frames = _frames(path)
    assert len(frames) == 20 and frames[0].shape == (96, 160, 3)
    assert not np.array_equal(frames[0], frames[-1])  # it moves
    with av.open(str(path)) as c:
        tags = {k.lower(): v for k, v in c.metadata.items()}
        assert c.duration / av.time_base == pytest.approx(2.0, abs=0.15)
    assert tags["creation_time"].startswith("2019-07-04T10:20:30")
    assert tags["location"] == "+35.0116+135.7681/"


def test_a_mov_carries_the_quicktime_keys_an_iphone_writes(tmp_path):
    taken = TAKEN.replace(tzinfo=timezone(timedelta(hours=9)))
    path = media.video(tmp_path / "IMG_0001.mov", seconds=1, fps=5, taken=taken,
                       position=KYOTO)
    with av.open(str(path)) as c:
        tags = dict(c.metadata)
    assert tags["com.apple.quicktime.creationdate"] == "2019-07-04T10:20:30+0900"
    assert tags["com.apple.quicktime.location.ISO6709"] == "+35.0116+135.7681/"
    assert tags["creation_time"].startswith("2019-07-04T01:20:30")  # UTC


def test_frames_come_from_the_function_given(tmp_path):
    def grey(t):
        return np.full((64, 64, 3), int(100 + 100 * t), np.uint8)

    frames = _frames(media.video(tmp_path / "g.mp4", seconds=1, fps=4, size=(64, 64),
                                 frames=grey, crf=10))
    means = [f.mean() for f in frames]
    assert means == pytest.approx([100, 125, 150, 175], abs=4)


def test_a_truncated_video_loses_its_frames(tmp_path):
    whole = media.video(tmp_path / "v.mp4", seconds=2, fps=10, size=(160, 96))
    cut = media.truncated(whole, tmp_path / "cut.mp4", keep=0.5)
    assert cut.stat().st_size < whole.stat().st_size
    try:
        decoded = len(_frames(cut))
    except av.error.FFmpegError:
        decoded = 0
    assert decoded < 20


def test_a_retagged_video_has_the_same_frames_and_its_own_tags(tmp_path):
    whole = media.video(tmp_path / "v.mp4", seconds=1, fps=10, size=(64, 48), taken=TAKEN)
    copy = media.retagged_video(whole, tmp_path / "c.mov", taken=TAKEN.replace(year=2021),
                                position=KYOTO)
    assert [f.tobytes() for f in _frames(copy)] == [f.tobytes() for f in _frames(whole)]
    with av.open(str(copy)) as c:
        assert c.metadata["creation_time"].startswith("2021-07-04")
        assert c.metadata["com.apple.quicktime.location.ISO6709"] == "+35.0116+135.7681/"
