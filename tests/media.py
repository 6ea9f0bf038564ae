"""Camera-like media the tests (and benchmarks/phone_library.py) make for themselves: what a
phone writes, small and quick to make, each with an optional date and GPS position where the
phone puts them.

- `exif_bytes`: an EXIF block with DateTimeOriginal and a GPS position (Pillow's own writer,
  read back by pamir.facts.metadata as a camera's).
- `jpeg`, `heic`, `avif`: a picture file in that format (a Pillow image, an array, or by
  default a `noisy_gradient`) with that EXIF. `jpeg_24mp`: a 6000x4000 camera-size JPEG,
  quick to make (a noisy gradient: about a second).
- `video`: a short H.264 video (PyAV's `av`, FFmpeg in its wheel) of moving frames, with the
  date and position in the container as phones write them: `creation_time` and `location`
  (ISO 6709, Android's and FFmpeg's ©xyz) in .mp4/.mkv, the QuickTime keys
  `com.apple.quicktime.creationdate` and `...location.ISO6709` in .mov (an iPhone's).
- `truncated`: a copy of a file cut short (a broken video or picture).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

#: EXIF tags (TIFF/EXIF 2.3): the EXIF and GPS sub-IFDs and the fields written into them.
_EXIF_IFD, _GPS_IFD = 0x8769, 0x8825
_DATE_TIME_ORIGINAL = 0x9003
_GPS_LAT_REF, _GPS_LAT, _GPS_LON_REF, _GPS_LON = 1, 2, 3, 4
#: A 24-megapixel camera's frame (6000x4000, 3:2).
SIZE_24MP = (6000, 4000)
#: The side of the noise tile noisy_gradient repeats (prime: no period lines up with 8x8 blocks).
TILE = 509


def exif_bytes(taken: datetime | None = None, position: tuple[float, float] | None = None
               ) -> bytes:
    """EXIF with DateTimeOriginal `taken` (local time, as cameras write it) and a GPS
    position (lat, lon in degrees, negative south and west); b"" when neither is given."""
    if taken is None and position is None:
        return b""
    exif = Image.Exif()
    if taken is not None:
        exif.get_ifd(_EXIF_IFD)[_DATE_TIME_ORIGINAL] = taken.strftime("%Y:%m:%d %H:%M:%S")
    if position is not None:
        lat, lon = position
        gps = exif.get_ifd(_GPS_IFD)
        gps[_GPS_LAT_REF], gps[_GPS_LAT] = "N" if lat >= 0 else "S", _dms(lat)
        gps[_GPS_LON_REF], gps[_GPS_LON] = "E" if lon >= 0 else "W", _dms(lon)
    return exif.tobytes()


def _dms(degrees: float) -> tuple[float, float, float]:
    """Degrees, minutes and seconds of an angle's magnitude (EXIF's three rationals)."""
    d = abs(degrees)
    minutes = (d - int(d)) * 60
    return float(int(d)), float(int(minutes)), round((minutes - int(minutes)) * 60, 4)


def noisy_gradient(size: tuple[int, int], seed: int = 0, noise: int = 12) -> Image.Image:
    """A (width, height) RGB picture: a colour gradient with grain (`with_grain`), so that
    it encodes to about a camera's bytes per pixel (a 24-MP JPEG: 7 MB). Quick at 24 MP."""
    w, h = size
    x = np.linspace(0, 255, w).astype(np.uint8)
    y = np.linspace(0, 255, h).astype(np.uint8)
    a = np.empty((h, w, 3), np.uint8)
    a[..., 0], a[..., 1], a[..., 2] = x, y[:, None], 255 - x
    return Image.fromarray(with_grain(a, seed, noise), "RGB")


def camera_size(path, size: tuple[int, int], seed: int, noise: int) -> np.ndarray:
    """A picture (a Corel one, say) enlarged to a camera's size, portrait kept portrait, with
    a sensor's grain of +-noise: what the benchmarks' camera-size photos are made of."""
    with Image.open(path) as im:
        im = im.convert("RGB")
        w, h = size if im.width >= im.height else size[::-1]
        big = np.array(im.resize((w, h), Image.BICUBIC))
    return with_grain(big, seed, noise)


def with_grain(a: np.ndarray, seed: int = 0, noise: int = 12) -> np.ndarray:
    """(H, W, 3) uint8 `a` with a sensor's grain: uniform grey noise of +-noise, in place.
    Quick at camera size: the levels are first squeezed into [noise, 255 - noise] (a lookup
    table, OpenCV's), so that uint8 arithmetic is exact, and one tile of TILE x TILE noise
    repeats."""
    h, w = a.shape[:2]
    squeeze = np.linspace(noise, 255 - noise, 256).round().astype(np.uint8)
    cv2.LUT(a, squeeze, dst=a)  # numpy's take is 10x slower at 36 M values
    tile = np.random.default_rng(seed).integers(0, 2 * noise + 1, (min(h, TILE), min(w, TILE)),
                                                dtype=np.uint8)
    a += np.tile(tile, (-(-h // tile.shape[0]), -(-w // tile.shape[1])))[:h, :w, None]
    a -= np.uint8(noise)
    return a


def _image(image, size, seed) -> Image.Image:
    if image is None:
        return noisy_gradient(size, seed)
    return image if isinstance(image, Image.Image) else Image.fromarray(np.asarray(image))


def jpeg(path, image=None, *, size=(64, 48), taken=None, position=None, quality: int = 90,
         seed: int = 0) -> Path:
    """A JPEG at path: `image` (Pillow image or array; default a noisy gradient of `size`)
    with EXIF `taken` and `position`."""
    return _save(path, _image(image, size, seed), "JPEG", taken, position, quality=quality)


def jpeg_24mp(path, *, taken=None, position=None, seed: int = 0) -> Path:
    """A 6000x4000 JPEG as a 24-MP camera writes it (a noisy gradient)."""
    return jpeg(path, size=SIZE_24MP, taken=taken, position=position, seed=seed)


def heic(path, image=None, *, size=(64, 48), taken=None, position=None, quality: int = 80,
         seed: int = 0, enc_params: dict | None = None) -> Path:
    """A HEIC (HEVC in HEIF, pillow-heif) at path, as an iPhone writes, with its EXIF;
    enc_params: libheif's encoder parameters ({"preset": "fast"}: x265 at camera size)."""
    import pillow_heif  # noqa: PLC0415 - registered only where a HEIC is made

    pillow_heif.register_heif_opener()
    return _save(path, _image(image, size, seed), "HEIF", taken, position, quality=quality,
                 **({"enc_params": enc_params} if enc_params else {}))


def avif(path, image=None, *, size=(64, 48), taken=None, position=None, quality: int = 80,
         seed: int = 0) -> Path:
    """An AVIF (AV1 in HEIF; Pillow's own encoder) at path, with its EXIF."""
    return _save(path, _image(image, size, seed), "AVIF", taken, position, quality=quality)


def _save(path, im: Image.Image, fmt: str, taken, position, **options) -> Path:
    path = Path(path)
    exif = exif_bytes(taken, position)
    im.convert("RGB").save(path, fmt, **({"exif": exif} if exif else {}), **options)
    return path


def iso6709(position: tuple[float, float]) -> str:
    """A position as ISO 6709 text, as phones store it in videos: "+35.0116+135.7681/"."""
    lat, lon = position
    return f"{lat:+08.4f}{lon:+09.4f}/"


def container_metadata(path: Path, taken: datetime | None, position) -> dict[str, str]:
    """The container's date and place as a phone writes them for the file's suffix."""
    meta = {}
    apple = path.suffix.lower() == ".mov"
    if taken is not None:
        # creation_time is UTC; a naive `taken` is written as it is (a phone's clock)
        utc = taken.astimezone(timezone.utc) if taken.tzinfo else taken
        meta["creation_time"] = utc.strftime("%Y-%m-%dT%H:%M:%S.000000Z")
        if apple:  # the local time with its offset, as an iPhone keeps it
            meta["com.apple.quicktime.creationdate"] = taken.strftime("%Y-%m-%dT%H:%M:%S%z")
    if position is not None:
        key = "com.apple.quicktime.location.ISO6709" if apple else "location"
        meta[key] = iso6709(position)
    return meta


def moving_gradient(t: float, size: tuple[int, int]) -> np.ndarray:
    """The default video frame at t seconds: a gradient panning sideways (uint8 H x W x 3)."""
    w, h = size
    x = (np.arange(w, dtype=np.float32)[None, :] + 40 * t) % w * (255 / w)
    y = np.arange(h, dtype=np.float32)[:, None] * (255 / h)
    return np.stack([np.broadcast_to(x, (h, w)), np.broadcast_to(y, (h, w)),
                     np.broadcast_to(255 - x, (h, w))], axis=2).astype(np.uint8)


def video(path, *, seconds: float = 2.0, fps: int = 10, size=(320, 240), taken=None,
          position=None, frames: Callable[[float], np.ndarray] | Iterable | None = None,
          crf: int = 23, preset: str = "veryfast", gop: int | None = None) -> Path:
    """An H.264 video at path (.mp4, .mov, .mkv: the container follows the suffix) of
    `seconds` at `fps`, (width, height) `size`; frames: a function of the time in seconds
    giving an (H, W, 3) uint8 frame, or an iterable of such frames (default: a panning
    gradient). gop: frames between keyframes (default: FFmpeg's, 250, as phones' ~1 s to
    several seconds). taken, position: the container's date and GPS (container_metadata)."""
    import av  # noqa: PLC0415 - PyAV only where a video is made

    path = Path(path)
    w, h = size
    n = max(1, round(seconds * fps))
    source = ((frames(i / fps) for i in range(n)) if callable(frames) else
              iter(frames) if frames is not None else
              (moving_gradient(i / fps, size) for i in range(n)))
    options = {"movflags": "use_metadata_tags"} if path.suffix.lower() == ".mov" else {}
    with av.open(str(path), "w", options=options) as out:
        out.metadata.update(container_metadata(path, taken, position))
        stream = out.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.options = {"crf": str(crf), "preset": preset}
        if gop:
            stream.codec_context.gop_size = gop
        for a in source:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(a), format="rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def truncated(source, path, keep: float = 0.4) -> Path:
    """A copy of `source` cut after `keep` of its bytes: a download that stopped."""
    data = Path(source).read_bytes()
    Path(path).write_bytes(data[:max(1, int(len(data) * keep))])
    return Path(path)


def retagged_video(source, path, *, taken=None, position=None) -> Path:
    """A copy of the video `source` at path with other container tags (its packets copied,
    nothing encoded again): another file, as costly to decode, made in a moment."""
    import av  # noqa: PLC0415

    path = Path(path)
    options = {"movflags": "use_metadata_tags"} if path.suffix.lower() == ".mov" else {}
    with av.open(str(source)) as src, av.open(str(path), "w", options=options) as out:
        out.metadata.update(container_metadata(path, taken, position))
        stream = out.add_stream_from_template(src.streams.video[0])
        for packet in src.demux(src.streams.video[0]):
            if packet.dts is None:  # the demuxer's empty packet at the end
                continue
            packet.stream = stream
            out.mux(packet)
    return path
