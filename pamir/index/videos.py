"""Videos in `pamir index` (pamir.facts.video reads them): a video is one item of the index, its
row the pooled rows of its frames (`video_row`), its frames' times and rows kept in the
catalogue (pamir.index.frames) so that a hit names its best frame.

A system's transform reads pictures by path (its feature cache is keyed by their bytes), so
each frame is handed to it as a small JPEG in a temporary folder, at FRAME_SIDE on its short
side: more than any CNN view reads (260 px), and a tenth of a 1080p frame's pixels to write.
The passes that read the pixels for facts (text, faces) get the video's frames the same way,
at the size they read pictures, and a fact of any frame is the video's (`FramesReader`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from ..facts.video import VideoError, is_video, read_video, video_row

#: The short side of the frames handed to the look's transform.
FRAME_SIDE = 320
#: The short side of the frames handed to the text and faces passes (OCR reads small print).
PASS_FRAME_SIDE = 1080


def frame_files(video, folder: str) -> list[str]:
    """The video's frames written as JPEG files in `folder`, in order."""
    paths = []
    for k, frame in enumerate(video.frames):
        p = str(Path(folder, f"frame-{k:03d}.jpg"))
        Image.fromarray(frame.rgb).save(p, quality=92)
        paths.append(p)
    return paths


def video_rows(path: str, transform: Callable) -> tuple[np.ndarray, tuple, object]:
    """(the video's row (R,), (frame times (f,), frame rows (f x R)), the Video read) through
    `transform` (pamir.index.sync.Transform) on its frames. VideoError when it cannot be
    read or none of its frames could be."""
    video = read_video(path, short_side=FRAME_SIDE)
    with tempfile.TemporaryDirectory(prefix="pamir-frames-") as folder:
        Z, ok, reasons = transform(frame_files(video, folder))[:3]
    ok = np.asarray(ok, bool)
    if not ok.any():
        raise VideoError(f"{path}: none of its frames could be read ({reasons[0]})")
    rows = np.asarray(Z, np.float32)[ok]
    times = np.array([f.time for f, o in zip(video.frames, ok) if o], np.float32)
    return video_row(rows), (times, rows), video


def rows_of_video(transform: Callable, path: str) -> tuple[np.ndarray, tuple]:
    """(the video's row, (frame times, frame rows)) through an index's transform: on a
    cluster, read where the transform's tasks run (`transform.video_rows`: its workers see
    the video at the same path, not the frames this process would write); else here, its
    frames handed to the transform's look (the reading stage's) or the transform itself."""
    on_workers = getattr(transform, "video_rows", None)
    if on_workers is not None:
        return on_workers(path)
    row, frames, _ = video_rows(path, getattr(transform, "look", transform))
    return row, frames


class FramesReader:
    """A pass's reader (pamir.index.passes.Reader) that reads videos too: a video's frames
    are read as pictures, and its result is the union of its frames' facts (None, with the
    note, when it cannot be read). A class, not a closure, so that it goes to local
    processes and Dask workers by pickle like the plain function it wraps."""

    def __init__(self, reader: Callable[[Sequence[str]], list]):
        self.reader = reader

    def __call__(self, paths: Sequence[str]) -> list:
        out = [None] * len(paths)
        pictures = [i for i, p in enumerate(paths) if not is_video(p)]
        if pictures:
            for i, r in zip(pictures, self.reader([paths[i] for i in pictures])):
                out[i] = r
        for i, p in enumerate(paths):
            if is_video(p):
                out[i] = _read_video_facts(p, self.reader)
        return out


def _read_video_facts(path: str, reader) -> tuple:
    try:
        video = read_video(path, short_side=PASS_FRAME_SIDE)
    except VideoError as e:
        return None, str(e)
    with tempfile.TemporaryDirectory(prefix="pamir-frames-") as folder:
        results = reader(frame_files(video, folder))
    found = [r[0] for r in results if r[0] is not None]
    if not found:
        return None, f"{path}: none of its frames could be read"
    return [f for facts in found for f in facts], None


__all__ = ["FRAME_SIDE", "PASS_FRAME_SIDE", "FramesReader", "frame_files", "rows_of_video",
           "video_rows"]
