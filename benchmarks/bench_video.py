"""What a video costs to read and to index, and how often to read a frame (issue 44).

    flock /tmp/pamir-heavy.lock python benchmarks/bench_video.py   # PAMIR_VIDEO_BENCH=FOLDER

Makes a one-minute 1080p30 H.264 video of six Corel pictures of one CD (benchmarks/
video_making.py: each enlarged to 1920x1080, panned and zoomed with noise, 12 Mbit/s, a
keyframe every second as phones write; kept in $PAMIR_VIDEO_BENCH, default
/tmp/pamir-video-bench), then times, on this machine:

- reading its frames three ways: decoding every frame of the stream (what a plain decode
  loop does), decoding only its keyframes (the decoder skips the others, every packet still
  read), and seeking to the keyframe at or before each wanted time (pamir.facts.video.read_video),
  at several intervals and caps;
- `pamir index` of a folder holding it, with no model (the zero-caption system, the
  first-run path), the look alone (--no-text --no-faces) and with every pass, from an empty
  index: the whole command a person waits for. The machine's one-time caches (the int8
  networks, the OCR and faces models) are warmed first by indexing a 5-second video.

Results: results/video_read.json and .md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from common.harness import Run, report_cli, report_head, save_report
from common.videos import write_video

from pamir.data import find_corel5k
from pamir.facts.video import read_video

COREL = find_corel5k() / "images"  # $PAMIR_COREL5K in a worktree
STEM = "video_read"
#: (interval s, cap) pairs timed with keyframe seeking
SETTINGS = [(2.0, 30), (5.0, 12), (10.0, 6)]


def decode_all(path: str, times: list[float], keyframes_only: bool) -> tuple[float, int]:
    """Seconds to decode the stream from the start (every frame, or the keyframes only),
    converting to RGB the first frame at or after each wanted time; frames kept."""
    import av  # noqa: PLC0415

    started = time.perf_counter()
    kept, want = 0, list(times)
    with av.open(path) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        if keyframes_only:
            s.codec_context.skip_frame = "NONKEY"
        for frame in c.decode(s):
            if want and frame.time is not None and frame.time >= want[0] - 1e-3:
                frame.to_ndarray(format="rgb24", width=1920, height=1080)
                kept += 1
                while want and frame.time >= want[0] - 1e-3:
                    want.pop(0)
    return time.perf_counter() - started, kept


def seeking(path: str, interval: float, cap: int) -> tuple[float, int]:
    started = time.perf_counter()
    v = read_video(path, interval=interval, max_frames=cap)
    return time.perf_counter() - started, len(v.frames)


def seeking_undrained(path: str, times: list[float]) -> tuple[float, int]:
    """Seconds of the seek without draining the decoder (the first version of read_video):
    each keyframe comes out only after the decoder's delay of a few more packets, decoded
    with frame and slice threads."""
    import av  # noqa: PLC0415

    started, kept = time.perf_counter(), 0
    with av.open(path) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        for t in times:
            c.seek(int(t / s.time_base), stream=s, backward=True)
            frame = next((f for p in c.demux(s) for f in p.decode()), None)
            if frame is not None:
                frame.to_ndarray(format="rgb24", width=1920, height=1080)
                kept += 1
    return time.perf_counter() - started, kept


def best_of(fn, repeats: int = 3):
    runs = [fn() for _ in range(repeats)]
    return min(runs, key=lambda r: r[0])


def pamir_index(folder: Path, index: Path, passes: bool) -> float:
    """Seconds of `pamir index FOLDER --index INDEX` (a fresh index), the whole command."""
    shutil.rmtree(index, ignore_errors=True)
    cmd = ["pamir", "index", str(folder), "--index", str(index)]
    if not passes:
        cmd += ["--no-text", "--no-faces"]
    started = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "PAMIR_EMBEDDINGS": "0"})
    return time.perf_counter() - started


def make_videos(work: Path) -> tuple[Path, Path]:
    pictures = sorted((COREL / "1000").glob("*.jpeg"))
    minute = work / "minute" / "corel-1000.mp4"
    if not minute.is_file():
        minute.parent.mkdir(parents=True, exist_ok=True)
        write_video(minute.with_suffix(".part.mp4"), pictures[:6], seconds_each=10.0)
        minute.with_suffix(".part.mp4").rename(minute)
    short = work / "warm" / "corel-warm.mp4"
    if not short.is_file():
        short.parent.mkdir(parents=True, exist_ok=True)
        write_video(short, sorted((COREL / "101000").glob("*.jpeg"))[:1], seconds_each=5.0)
    return minute, short


def measure(work: Path) -> dict:
    minute, short = make_videos(work)
    path = str(minute)
    r = {"video": {"seconds": 60, "size": "1920x1080", "fps": 30, "codec": "H.264 (libx264 "
                   "veryfast, 12 Mbit/s)", "keyframe_every_s": 1.0,
                   "megabytes": round(minute.stat().st_size / 1e6, 1)},
         "read": {}}
    times5 = [5.0 * k for k in range(12)]
    r["read"]["decode every frame"] = dict(zip(("seconds", "frames"),
                                               best_of(lambda: decode_all(path, times5, False), 1)))
    r["read"]["decode keyframes only"] = dict(zip(("seconds", "frames"),
                                                  best_of(lambda: decode_all(path, times5, True))))
    r["read"]["seek, waiting for the decoder's delay (first version): every 5 s, at most 12"] = \
        dict(zip(("seconds", "frames"), best_of(lambda: seeking_undrained(path, times5))))
    for interval, cap in SETTINGS:
        s, n = best_of(lambda: seeking(path, interval, cap))
        r["read"][f"seek and drain (read_video): every {interval:g} s, at most {cap}"] = {
            "seconds": s, "frames": n}
    pamir_index(short.parent, work / "warm-index", passes=True)  # one-time caches, warm
    one = work / "picture"  # what any `pamir index` costs: one Corel picture's folder
    one.mkdir(exist_ok=True)
    shutil.copy(sorted((COREL / "1000").glob("*.jpeg"))[-1], one / "corel.jpeg")
    r["index"] = {"look": pamir_index(minute.parent, work / "index", passes=False),
                  "every pass": pamir_index(minute.parent, work / "index", passes=True),
                  "one picture, look": pamir_index(one, work / "index", passes=False),
                  "one picture, every pass": pamir_index(one, work / "index", passes=True)}
    return r


def report(r: dict) -> str:
    v = r["video"]
    lines = [*report_head("Reading a video's frames, and indexing it", r), "",
             f"One {v['seconds']} s {v['size']} {v['fps']} fps video, {v['codec']}, a keyframe "
             f"every {v['keyframe_every_s']:g} s, {v['megabytes']} MB, made of six Corel "
             "pictures of CD 1000 with a camera's pan, zoom and noise "
             "(benchmarks/common/videos.py, write_video).\n",
             "| reading its frames (RGB at 1080p) | seconds | frames |", "|---|---:|---:|"]
    for name, x in r["read"].items():
        lines.append(f"| {name} | {x['seconds']:.2f} | {x['frames']} |")
    i = r["index"]
    lines += ["", "`pamir index FOLDER` of a folder holding it alone, with no model (the "
              "zero-caption system), from an empty index, the one-time caches warm:\n",
              "| `pamir index` | seconds |", "|---|---:|",
              f"| the look only (`--no-text --no-faces`) | {i['look']:.1f} |",
              f"| every pass (look, metadata, places, text, faces) | {i['every pass']:.1f} |",
              f"| a folder of one Corel picture instead, the look only | "
              f"{i['one picture, look']:.1f} |",
              f"| a folder of one Corel picture instead, every pass | "
              f"{i['one picture, every pass']:.1f} |", "",
              f"The video's own part (the command's time less that of a one-picture folder: "
              f"starting Python, loading the networks): "
              f"{i['look'] - i['one picture, look']:.1f} s for the look, "
              f"{i['every pass'] - i['one picture, every pass']:.1f} s with every pass.", ""]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    args = report_cli(__doc__, STEM, report, argv, None)
    if args is None:
        return
    run = Run("bench_video.py", argv)
    work = Path(os.environ.get("PAMIR_VIDEO_BENCH", "/tmp/pamir-video-bench"))
    r = {**run.info(), **measure(work), "minutes": run.minutes()}
    save_report(STEM, json.loads(json.dumps(r)), report)


if __name__ == "__main__":
    main()
