"""Camera-roll media for issue 52's benchmarks, built once and kept under --work.

    python benchmarks/camera_media.py [--work /work/bench-data/camera_roll] [--jpegs 300]
        [--heics 20] [--roll 2000]

No phone library ships, so the folders are made from Corel 5k (mostly landscapes and
animals: few faces, little text, as the issue's photos):

- jpeg: --jpegs camera-size JPEGs, 4032 x 2688 (the issue's size; a portrait Corel picture
  stays portrait), Corel pictures 0, 7, 14, ... enlarged with a sensor's grain
  (tests/media.py, with_grain), quality 90, each with its EXIF date and GPS position;
- heic: --heics 12-MP HEICs as an iPhone writes them: 4032 x 3024 in a grid of 512-px HEVC
  tiles (8 x 6), with a 320 x 240 HEVC thumbnail, 4:2:0, EXIF (pillow-heif's tile_size and
  thumbnails; x265 at preset `fast`, quality HEIC_QUALITY, grain HEIC_GRAIN: about 2-3 MB a
  photo, an iPhone's range);
- roll: --roll JPEGs of the jpeg kind, the jpeg folder's first and then others (distinct
  Corel pictures, hard links where the jpeg folder has them): the end-to-end run.
- faces, text: a few camera-size JPEGs with people (tests/data/faces' heads pasted at 60-400
  px) and with painted words (DejaVu, 2-15 % of the height), for the profile.

Each file is written whole (a temporary name, then renamed), so that a stopped build resumes;
a folder whose `.built.json` matches its spec is not built again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
import media  # noqa: E402 - tests/media.py: the one home of the camera-like writers

from pamir.data import find_corel5k  # noqa: E402

WORK = Path("/work/bench-data/camera_roll")
JPEG_SIZE = (4032, 2688)
HEIC_SIZE = (4032, 3024)
GRAIN = 10  # +-levels: a 12-MP JPEG weighs about 3.5 MB at quality 90
#: An iPhone's HEIC of 12 MP weighs 1.5-3.5 MB; x265 at these settings on an enlarged Corel
#: picture gives 2-3 MB (grain 10 would give 4-6 MB: noise no phone leaves in).
HEIC_QUALITY, HEIC_GRAIN, HEIC_TILE, HEIC_THUMBNAIL = 55, 6, 512, 320
HEIC_ENCODER = {"preset": "fast"}
PLACES = [(35.0116, 135.7681), (64.1466, -21.9426), (48.8566, 2.3522), (-33.4489, -70.6693),
          (40.7128, -74.0060), (-1.2921, 36.8219)]
FACES = HERE.parent / "tests" / "data" / "faces"
WORDS = ["BAKERY", "MUSEUM", "STATION", "HOTEL", "PHARMACY", "MARKET", "THEATRE", "LIBRARY"]


def corel_pictures() -> list[Path]:
    return sorted((find_corel5k() / "images").glob("*/*.jpeg"),
                  key=lambda p: (int(p.parent.name), int(p.stem)))


def when_and_where(i: int):
    return datetime(2021, 5, 2, 8, 0) + timedelta(minutes=23 * i), PLACES[i % len(PLACES)]


def enlarged(path: Path, size, seed: int, grain: int = GRAIN) -> np.ndarray:
    with Image.open(path) as im:
        im = im.convert("RGB")
        w, h = size if im.width >= im.height else size[::-1]
        big = np.array(im.resize((w, h), Image.BICUBIC))
    return media.with_grain(big, seed, grain)


def _built(folder: Path, spec: dict) -> bool:
    marker = folder / ".built.json"
    return marker.is_file() and json.loads(marker.read_text()) == spec


def _mark(folder: Path, spec: dict) -> None:
    (folder / ".built.json").write_text(json.dumps(spec))


def _write(path: Path, write) -> None:
    if path.exists():
        return
    tmp = path.with_name(f".tmp-{path.name}")
    write(tmp)
    tmp.rename(path)


def jpeg_name(i: int) -> str:
    return f"IMG_{i:04d}.JPG"


def build_jpegs(folder: Path, n: int, link_from: Path | None = None) -> Path:
    """n JPEGs of Corel pictures 0, 7, 14, ...; those link_from holds are hard-linked."""
    spec = {"kind": "jpeg", "size": list(JPEG_SIZE), "n": n, "grain": GRAIN}
    if _built(folder, spec):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    pictures = corel_pictures()
    for i in range(n):
        path = folder / jpeg_name(i)
        source = link_from / path.name if link_from else None
        if not path.exists() and source is not None and source.is_file():
            os.link(source, path)
            continue
        taken, place = when_and_where(i)
        _write(path, lambda tmp, i=i, taken=taken, place=place: media.jpeg(
            tmp, enlarged(pictures[(7 * i) % len(pictures)], JPEG_SIZE, i), taken=taken,
            position=place, quality=90))
    _mark(folder, spec)
    return folder


def iphone_heic(path: Path, rgb: np.ndarray, taken, place) -> Path:
    """A HEIC laid out as an iPhone's (see the module's doc)."""
    import pillow_heif  # noqa: PLC0415

    pillow_heif.register_heif_opener()
    exif = media.exif_bytes(taken, place)
    Image.fromarray(rgb).save(path, "HEIF", quality=HEIC_QUALITY, tile_size=HEIC_TILE,
                              thumbnails=[HEIC_THUMBNAIL], enc_params=HEIC_ENCODER, exif=exif)
    return path


def build_heics(folder: Path, n: int) -> Path:
    spec = {"kind": "heic", "size": list(HEIC_SIZE), "n": n, "grain": HEIC_GRAIN,
            "quality": HEIC_QUALITY, "tile": HEIC_TILE, "thumbnail": HEIC_THUMBNAIL}
    if _built(folder, spec):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    pictures = corel_pictures()
    for i in range(n):
        taken, place = when_and_where(10_000 + i)
        _write(folder / f"IMG_{i:04d}.HEIC", lambda tmp, i=i, taken=taken, place=place:
               iphone_heic(tmp, enlarged(pictures[(7 * i + 3) % len(pictures)], HEIC_SIZE,
                                         10_000 + i, HEIC_GRAIN), taken, place))
    _mark(folder, spec)
    return folder


# ------------------------------------------------------------------ photos with faces, text

def _heads() -> list[Image.Image]:
    """Each portrait of tests/data/faces cut to an ellipse around its middle."""
    out = []
    for p in sorted(FACES.glob("*.jpg")):
        im = Image.open(p).convert("RGB")
        mask = Image.new("L", im.size, 0)
        ImageDraw.Draw(mask).ellipse((0, 0, im.width - 1, im.height - 1), fill=255)
        im.putalpha(mask.filter(ImageFilter.GaussianBlur(im.width / 20)))
        out.append(im)
    return out


def with_people(rgb: np.ndarray, seed: int) -> np.ndarray:
    """Portraits pasted on the photo: 3-8 of them, each 60 to 400 px wide (the face about
    half of that)."""
    rng = np.random.default_rng(seed)
    photo = Image.fromarray(rgb)
    heads = _heads()
    for _ in range(int(rng.integers(3, 9))):
        head = heads[int(rng.integers(len(heads)))]
        width = int(rng.integers(120, 800))
        head = head.resize((width, round(head.height * width / head.width)), Image.LANCZOS)
        x = int(rng.integers(0, photo.width - head.width))
        y = int(rng.integers(0, photo.height - head.height))
        photo.paste(head, (x, y), head)
    return np.asarray(photo)


def with_words(rgb: np.ndarray, seed: int) -> np.ndarray:
    """One to three words painted on plates, 2 to 15 % of the photo's height."""
    import matplotlib  # noqa: PLC0415 - its DejaVu fonts are on every machine

    font_path = Path(matplotlib.get_data_path(), "fonts/ttf/DejaVuSans-Bold.ttf")
    rng = np.random.default_rng(seed)
    photo = Image.fromarray(rgb)
    draw = ImageDraw.Draw(photo)
    for _ in range(int(rng.integers(1, 4))):
        size = int(photo.height * rng.uniform(0.02, 0.15))
        font = ImageFont.truetype(str(font_path), size)
        word = WORDS[int(rng.integers(len(WORDS)))]
        x0, y0, x1, y1 = draw.textbbox((0, 0), word, font=font)
        x = int(rng.integers(0, max(1, photo.width - (x1 - x0) - 40)))
        y = int(rng.integers(0, max(1, photo.height - (y1 - y0) - 40)))
        draw.rectangle((x - 20, y - 20, x + x1 - x0 + 20, y + y1 + 20), fill=(240, 236, 220))
        draw.text((x - x0, y), word, font=font, fill=(20, 20, 30))
    return np.asarray(photo)


def build_marked(folder: Path, kind: str, n: int) -> Path:
    """n camera-size JPEGs with people ("faces") or painted words ("text")."""
    spec = {"kind": kind, "size": list(JPEG_SIZE), "n": n, "grain": GRAIN}
    if _built(folder, spec):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    pictures = corel_pictures()
    mark = {"faces": with_people, "text": with_words}[kind]
    for i in range(n):
        seed = 20_000 + i + (0 if kind == "faces" else 1000)
        _write(folder / f"{kind}_{i:03d}.JPG", lambda tmp, i=i, seed=seed: media.jpeg(
            tmp, mark(enlarged(pictures[(7 * i + 5) % len(pictures)], JPEG_SIZE, seed),
                      seed), quality=90))
    _mark(folder, spec)
    return folder


def build_all(work: Path, jpegs: int, heics: int, roll: int, marked: int) -> dict:
    media_dir = work / "media"
    out = {"jpeg": build_jpegs(media_dir / "jpeg", jpegs)}
    out["heic"] = build_heics(media_dir / "heic", heics)
    out["faces"] = build_marked(media_dir / "faces", "faces", marked)
    out["text"] = build_marked(media_dir / "text", "text", marked)
    if roll:
        out["roll"] = build_jpegs(media_dir / "roll", roll, link_from=out["jpeg"])
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=str(WORK))
    ap.add_argument("--jpegs", type=int, default=300)
    ap.add_argument("--heics", type=int, default=20)
    ap.add_argument("--roll", type=int, default=2000)
    ap.add_argument("--marked", type=int, default=10)
    args = ap.parse_args(argv)
    for kind, folder in build_all(Path(args.work), args.jpegs, args.heics, args.roll,
                                  args.marked).items():
        print(kind, folder)


if __name__ == "__main__":
    main()
