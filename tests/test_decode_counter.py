"""benchmarks/decode_counter (the decodes per picture of benchmarks/phone_library.py) counts
each picture Pillow decodes once, in a process of its own, and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import media

COUNTER = Path(__file__).resolve().parent.parent / "benchmarks" / "decode_counter"

DECODE = """
import sys
from PIL import Image
from pamir.features.images import decode_rgb, read_bytes
for path in sys.argv[1:]:
    decode_rgb(read_bytes(path), short_side=16)      # a draft decode for the JPEG
with Image.open(sys.argv[1]) as im:
    im.load(); im.load(); im.convert("L")            # one decode, used three times
    im.getexif()
Image.new("RGB", (8, 8)).load()                      # made, not decoded
"""


def test_every_decode_is_counted_once_in_a_fresh_process(tmp_path):
    files = [media.jpeg(tmp_path / "a.jpg", size=(640, 480)),
             media.heic(tmp_path / "b.heic"), media.avif(tmp_path / "c.avif")]
    log = tmp_path / "decodes.txt"
    env = {**os.environ, "PAMIR_BENCH_DECODES": str(log),
           "PYTHONPATH": os.pathsep.join([str(COUNTER), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", DECODE, *map(str, files)], env=env, check=True)
    lines = log.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["JPEG", "HEIF", "AVIF", "JPEG"]
    assert lines[0] != "JPEG 640 480"  # the draft: decoded at a reduced scale
    assert lines[-1] == "JPEG 640 480"


def test_nothing_is_counted_without_the_variable(tmp_path):
    path = media.jpeg(tmp_path / "a.jpg")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(COUNTER),
                                                        os.environ.get("PYTHONPATH", "")])}
    env.pop("PAMIR_BENCH_DECODES", None)
    code = "import sys, PIL.ImageFile; print(PIL.ImageFile.ImageFile.load_prepare.__name__)"
    out = subprocess.run([sys.executable, "-c", code, str(path)], env=env, check=True,
                         capture_output=True, text=True).stdout.strip()
    assert out == "load_prepare"
