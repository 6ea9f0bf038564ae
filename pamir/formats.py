"""The files pamir reads, by suffix: the one home of the lists that the folder walk of `pamir
index` (pamir.index.sync), `pamir watch`'s events (pamir.jobs.watch), the collections
(pamir.data), the picture decoders (pamir.features.images) and the video reader
(pamir.facts.video) go by, so that a format one of them reads is read by all.
"""

from __future__ import annotations

from pathlib import Path

#: Pictures Pillow reads by itself.
PICTURE_SUFFIXES = frozenset(".jpg .jpeg .png .gif .bmp .tif .tiff .webp .ppm .pgm .pbm".split())
#: HEIC/HEIF, read by Pillow once pillow-heif registers them; AVIF by Pillow itself.
HEIF_SUFFIXES = frozenset(".heic .heif .avif".split())
#: Camera RAW files, decoded by rawpy (LibRaw): the embedded preview, else a demosaic.
RAW_SUFFIXES = frozenset(".dng .cr2 .nef .arw .raf .orf".split())
#: Every still picture pamir reads.
IMAGE_SUFFIXES = PICTURE_SUFFIXES | HEIF_SUFFIXES | RAW_SUFFIXES
#: Videos, read by PyAV (FFmpeg ships in its wheel): a few frames each (pamir.facts.video).
VIDEO_SUFFIXES = (".mp4", ".mov", ".m4v", ".mkv", ".webm", ".avi")
#: Everything `pamir index` reads.
MEDIA_SUFFIXES = IMAGE_SUFFIXES | frozenset(VIDEO_SUFFIXES)


def is_media(path: str | Path) -> bool:
    """Whether `pamir index` reads the file at `path` (by its suffix, any case)."""
    return Path(path).suffix.lower() in MEDIA_SUFFIXES


def is_video(path: str | Path) -> bool:
    return Path(path).suffix.lower() in VIDEO_SUFFIXES


__all__ = ["HEIF_SUFFIXES", "IMAGE_SUFFIXES", "MEDIA_SUFFIXES", "PICTURE_SUFFIXES",
           "RAW_SUFFIXES", "VIDEO_SUFFIXES", "is_media", "is_video"]
