"""Videos made of Corel pictures (PyAV, OpenCV): one shot a picture, a camera's slow pan and
zoom over it with noise, encoded as a phone does (H.264, a keyframe about every second).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def camera_frames(picture: Path, seconds: float, fps: int, size: tuple[int, int], seed: int):
    """The frames of one shot of `picture`: a slow pan and zoom over it, with noise."""
    import cv2  # noqa: PLC0415
    from PIL import Image  # noqa: PLC0415

    w, h = size
    with Image.open(picture) as im:
        big = np.asarray(im.convert("RGB").resize((int(w * 1.25), int(h * 1.25)),
                                                  Image.BICUBIC))
    rng = np.random.default_rng(seed)
    # a few noise fields in turn: fresh noise per frame costs more than the encoding
    noises = [np.repeat(rng.integers(0, 9, (h, w, 1), dtype=np.uint8), 3, axis=2)
              for _ in range(4)]
    n = int(seconds * fps)
    (dx, dy), zoom = rng.uniform(-1, 1, 2), rng.uniform(0.0, 0.15)
    for k in range(n):
        a = k / max(1, n - 1)
        s = 1 / (1 - zoom * a / 1.25)  # zooming in a little over the shot
        tx = (w - big.shape[1] * s) / 2 - dx * a * (big.shape[1] - w / s) * s / 2
        ty = (h - big.shape[0] * s) / 2 - dy * a * (big.shape[0] - h / s) * s / 2
        m = np.float32([[s, 0, tx], [0, s, ty]])
        frame = cv2.warpAffine(big, m, (w, h), flags=cv2.INTER_LINEAR)
        yield cv2.subtract(cv2.add(frame, noises[k % 4]), 4)


def write_video(path: Path, pictures: list[Path], *, seconds_each: float = 10.0, fps: int = 30,
                size: tuple[int, int] = (1920, 1080), gop: int = 30, bitrate: int = 12_000_000,
                preset: str = "veryfast") -> Path:
    """An H.264 MP4 of `pictures`, one shot each (camera_frames), a keyframe every `gop`
    frames (a phone's: about a second)."""
    import av  # noqa: PLC0415

    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=fps, options={"preset": preset})
        s.width, s.height = size
        s.pix_fmt = "yuv420p"
        s.bit_rate = bitrate
        s.codec_context.gop_size = gop
        s.codec_context.options = {"preset": preset, "sc_threshold": "0"}
        for i, p in enumerate(pictures):
            for rgb in camera_frames(p, seconds_each, fps, size, seed=i):
                for packet in s.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                    c.mux(packet)
        for packet in s.encode():
            c.mux(packet)
    return path
