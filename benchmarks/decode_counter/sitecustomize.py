"""Counts the pictures Pillow decodes in every Python process started with this folder on
PYTHONPATH and PAMIR_BENCH_DECODES naming a file (benchmarks/phone_library.py: decodes per
picture of `pamir index`, its pass processes included, for code that counts nothing itself).

A decode is Pillow allocating a picture's pixels for the first time (ImageFile.load_prepare
with no image memory yet): once per JPEG (at its draft size), HEIC or AVIF decoded, however
the caller reaches it. Each appends "FORMAT WIDTH HEIGHT" to the file (O_APPEND: one write
per line, so processes do not interleave)."""

import os

_LOG = os.environ.get("PAMIR_BENCH_DECODES")

if _LOG:
    from PIL import ImageFile

    _prepare = ImageFile.ImageFile.load_prepare

    def _counted(self):
        if self._im is None:
            line = f"{self.format} {self.size[0]} {self.size[1]}\n".encode()
            fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        return _prepare(self)

    ImageFile.ImageFile.load_prepare = _counted
