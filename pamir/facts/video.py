"""Videos: a few frames of each, and the date and place its container holds.

A video is indexed as one item made of frames, one every FRAME_INTERVAL seconds and at most
MAX_FRAMES of them (spread over the whole video when it is longer than that), each looked at
as a picture; the video's text-space row is `video_row` of its frames' rows, and a hit on it
names the time of its best frame for the query (`best_frame`).

Frames are read by seeking to the keyframe at or before each wanted time and decoding that
one frame: a phone writes a keyframe every second or two, so this decodes about one frame
per wanted frame, where decoding the stream reads every frame of it
(benchmarks/bench_video.py measures both; results/video_read.md).

PyAV (`av`) reads them: its wheels ship FFmpeg (H.264, HEVC, VP8/9, AV1, MPEG-4 in MP4, MOV,
Matroska, WebM, AVI), so nothing is installed beside pip; it decodes in this process, one
frame at a time, seeking by keyframe, and gives the container's metadata (date, GPS).
OpenCV's VideoCapture decodes too but gives no container metadata.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

from ..formats import VIDEO_SUFFIXES, is_video  # noqa: F401 - their home (pamir.formats)

#: Seconds between the frames read, and the most frames read of one video (a longer one's
#: spread over all of it). Chosen on benchmarks/results/video_read.md: a one-minute 1080p
#: video's 12 frames are read in 0.55 s, and `pamir index` spends about 5 s on it with every
#: pass (the text and faces passes about a quarter of a second a frame), within a phone library's bound of 5 s a minute.
FRAME_INTERVAL = 5.0
MAX_FRAMES = 12
#: The most packets demuxed to find one frame (a damaged stream ends the search, no hang).
MAX_PACKETS_PER_FRAME = 600
#: A video's frames are read at most this long on the short side unless asked otherwise
#: (a CNN view reads 260 px at most; OCR and faces read more): 1080p is kept as it is.
DEFAULT_SHORT_SIDE = 1080


class VideoError(ValueError):
    """A video that cannot be read; the message names the file and says what to do."""


@dataclass(frozen=True)
class Frame:
    time: float  # seconds from the start
    rgb: np.ndarray = field(repr=False)  # uint8 H x W x 3


@dataclass
class Video:
    path: str
    frames: list[Frame]
    duration: float  # seconds
    taken: datetime | None = None  # when it was recorded (local time where known)
    gps: tuple[float, float] | None = None  # (latitude, longitude), degrees


def frame_times(duration: float, interval: float = FRAME_INTERVAL,
                max_frames: int = MAX_FRAMES) -> list[float]:
    """The times (seconds) of the frames read of a video of `duration` seconds: from the
    start, every `interval`, or `max_frames` spread evenly over a longer one."""
    if not duration or duration <= 0:
        return [0.0]
    n = max(1, min(max_frames, math.ceil(duration / interval)))  # times before the end
    step = interval if n < max_frames else duration / max_frames
    return [round(k * step, 3) for k in range(n)]


def read_video(path: str | Path, *, short_side: int | None = DEFAULT_SHORT_SIDE,
               interval: float = FRAME_INTERVAL, max_frames: int = MAX_FRAMES) -> Video:
    """A video's frames (the keyframes at or before each of `frame_times`, each once),
    duration, date and GPS position. Frames are scaled so that their short side is at most
    `short_side` (None: as stored). Raises VideoError for a file that is no video, is
    damaged, or is truncated."""
    import av  # noqa: PLC0415 - FFmpeg's libraries: only when a video is read

    path = str(path)
    try:
        with av.open(path, metadata_errors="ignore") as container:
            if not container.streams.video:
                raise VideoError(f"{path}: holds no video stream; nothing to index in it")
            stream = container.streams.video[0]
            # one frame at a time: threads only add their start and the frames they hold back
            stream.thread_type = "NONE"
            duration = _duration(container, stream)
            times = frame_times(duration, interval, max_frames)
            frames = _read_frames(container, stream, times, short_side, duration)
            taken, gps = container_facts(container.metadata, stream.metadata)
    except VideoError:
        raise
    except (av.FFmpegError, OSError, ValueError, RuntimeError, IndexError) as e:
        raise VideoError(f"{path}: not a readable video ({type(e).__name__}: {e}); it may be "
                         "truncated or damaged: copy it again from its source") from None
    if not frames:
        raise VideoError(f"{path}: no frame could be decoded; it may be truncated or damaged: "
                         "copy it again from its source")
    return Video(path, frames, duration, taken, gps)


def read_frame(path: str | Path, time: float = 0.0, *, short_side: int | None = None
               ) -> Frame:
    """The frame `read_video` reads for `time` (the keyframe at or before it): a hit's frame
    on the page. VideoError as read_video."""
    import av  # noqa: PLC0415 - start-up: FFmpeg's libraries (videos only)

    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            if not container.streams.video:
                raise VideoError(f"{path}: holds no video stream")
            stream = container.streams.video[0]
            stream.thread_type = "NONE"
            frames = _read_frames(container, stream, [max(0.0, float(time))], short_side,
                                  _duration(container, stream))
    except VideoError:
        raise
    except (av.FFmpegError, OSError, ValueError, RuntimeError, IndexError) as e:
        raise VideoError(f"{path}: not a readable video ({type(e).__name__}: {e})") from None
    if not frames:
        raise VideoError(f"{path}: no frame could be decoded at {time:g} s")
    return frames[0]


def _duration(container, stream) -> float:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        import av  # noqa: PLC0415 - start-up: FFmpeg's libraries (videos only)

        return container.duration / av.time_base
    return 0.0


def _read_frames(container, stream, times: list[float], short_side: int | None,
                 duration: float) -> list[Frame]:
    """The keyframe at or before each time, decoded once each (two times that fall in one
    keyframe's group give one frame)."""
    tb = stream.time_base
    start = float(stream.start_time * tb) if stream.start_time is not None else 0.0
    frames: list[Frame] = []
    for t in times:
        container.seek(int((start + t) / tb), stream=stream, backward=True, any_frame=False)
        frame = _first_frame(container, stream)
        if frame is None:
            if t > 0 and frames:
                raise VideoError(f"{container.name}: ends before {t:.0f} s of the "
                                 f"{duration:.0f} s its header says; it is truncated: copy "
                                 "it again from its source")
            break
        time = max(0.0, float(frame.pts * tb) - start) if frame.pts is not None else t
        if frames and time <= frames[-1].time:
            continue  # the same keyframe's group as the last time: read once
        frames.append(Frame(round(time, 3), _rgb(frame, short_side)))
    return frames


def _first_frame(container, stream):
    """The first frame decoded from where the container stands, within
    MAX_PACKETS_PER_FRAME packets (None: the stream ended or gave none).

    A decoder holds a frame back for a few packets (B-frames' reordering, frame threads);
    drained right after the keyframe's packet it gives the keyframe at once: about half the
    decoding of waiting for it (benchmarks/results/video_read.md). The seek before the next
    frame resets the drained decoder."""
    codec = stream.codec_context
    for k, packet in enumerate(container.demux(stream)):
        if k >= MAX_PACKETS_PER_FRAME:
            return None
        frames = codec.decode(packet)
        if not frames and packet.is_keyframe:
            frames = codec.decode(None)
        if frames:
            return frames[0]
    return None


def _rgb(frame, short_side: int | None) -> np.ndarray:
    w, h = frame.width, frame.height
    if short_side and min(w, h) > short_side:
        scale = short_side / min(w, h)
        w, h = max(2, round(w * scale / 2) * 2), max(2, round(h * scale / 2) * 2)
    return frame.to_ndarray(format="rgb24", width=w, height=h)


# ---------------------------------------------------------------- the container's facts

#: ISO 6709 "+35.0116+135.7681+044.000/" (QuickTime, Android): latitude then longitude, in
#: decimal degrees (the form phones write); the altitude and the CRS are left.
_ISO6709 = re.compile(r"^\s*([+-]\d{1,2}(?:\.\d+)?)([+-]\d{1,3}(?:\.\d+)?)")

#: Where a date is read, first found first: QuickTime's creationdate carries the local time
#: and its offset (iPhones); creation_time is the moment in UTC (every MP4 muxer writes it).
_DATE_KEYS = ("com.apple.quicktime.creationdate", "creation_time", "date")
_GPS_KEYS = ("com.apple.quicktime.location.ISO6709", "location", "location-eng")


def read_container_facts(path, notes: list[str]):
    """(date, (lat, lon)) the video file's container holds (container_facts), either None;
    an unreadable container is a note (the frames' reader says why it is skipped)."""
    try:
        import av  # noqa: PLC0415 - FFmpeg's libraries: only for a video

        with av.open(str(path), metadata_errors="ignore") as c:
            streams = [s.metadata for s in c.streams.video[:1]]
            return container_facts(c.metadata, *streams)
    except Exception as e:  # noqa: BLE001 - any damaged container: no date, no place
        notes.append(f"{path}: video metadata not readable ({type(e).__name__})")
        return None, None


def container_facts(*metadatas: dict) -> tuple[datetime | None, tuple[float, float] | None]:
    """(date taken, (lat, lon)) from a container's (then a stream's) metadata dicts; either
    None where absent or unreadable."""
    taken = gps = None
    for key in _DATE_KEYS:
        for md in metadatas:
            if taken is None and md.get(key):
                taken = parse_date(md[key])
    for key in _GPS_KEYS:
        for md in metadatas:
            if gps is None and md.get(key):
                gps = parse_iso6709(md[key])
    return taken, gps


def parse_date(text: str) -> datetime | None:
    """A container's date as a naive datetime: the local time where an offset is given
    ("2019-07-04T14:03:10+0200" is 14:03:10), UTC where it says Z; None for a zero or
    unreadable date (a camera with no clock writes 1904-01-01 or 1970-01-01)."""
    text = str(text).strip().replace(" ", "T", 1)
    text = re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", text)  # +0200 -> +02:00
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.year < 1990 or dt.year > 2200:
        return None
    return dt.replace(tzinfo=None)


def parse_iso6709(text: str) -> tuple[float, float] | None:
    """(latitude, longitude) from an ISO 6709 string in decimal degrees; None if it is not
    one, out of range, or the null island (0, 0) a phone writes with no fix."""
    m = _ISO6709.match(str(text))
    if not m:
        return None
    lat, lon = float(m.group(1)), float(m.group(2))
    if not (-90 <= lat <= 90 and -180 <= lon <= 180) or (lat == 0 and lon == 0):
        return None
    return lat, lon


# ---------------------------------------------------------------- frames in the text space

#: How a video's row is made of its frames' rows: "max" (a video's score for a word is its
#: best frame's) or "mean". On 101 Corel-made videos max ranked at AvgP 61.53 against 61.19,
#: P@1 68.7 against 66.5 (benchmarks/results/video_pooling.md): close, and max says what a
#: video holds (a word of any of its frames).
POOLING = "max"


def video_row(frame_rows: np.ndarray, pooling: str = POOLING) -> np.ndarray:
    """(T,) a video's text-space row from its frames' rows (f x T)."""
    frame_rows = np.asarray(frame_rows, np.float32)
    if frame_rows.ndim != 2 or not len(frame_rows):
        raise ValueError(f"frame rows must be (frames x words) with a frame at least, not "
                         f"{frame_rows.shape}")
    if pooling == "max":
        return frame_rows.max(axis=0)
    if pooling == "mean":
        return frame_rows.mean(axis=0)
    raise ValueError(f"pooling {pooling!r}: give 'max' or 'mean'")


def best_frame(frame_rows: np.ndarray, query: np.ndarray) -> int:
    """The index of the frame (a row of f x T) that scores highest for a query vector (T,)."""
    return int(np.argmax(np.asarray(frame_rows, np.float32) @ np.asarray(query, np.float32)))


def clock(seconds: float | None) -> str:
    """A time in a video as m:ss (h:mm:ss past an hour)."""
    s = int(round(seconds or 0))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60:02d}:{rest % 60:02d}"


__all__ = ["DEFAULT_SHORT_SIDE", "FRAME_INTERVAL", "MAX_FRAMES", "VIDEO_SUFFIXES", "Frame",
           "Video", "VideoError", "best_frame", "clock", "container_facts", "frame_times",
           "is_video", "parse_date", "parse_iso6709", "read_frame", "read_video",
           "video_row"]
