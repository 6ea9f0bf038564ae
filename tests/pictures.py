"""The pictures (and picture-like data) the tests make for themselves, in one place.

- `COLOURS`: the one table of named colours, each a word a caption can hold;
  `coloured_pictures` draws them plain or striped with noise, with a captions table (the
  reliability tests' tiny system, the product's real model, the README's example through
  `captioned_photos`, whose captions are in sidecars); `make_pictures` draws them flat, no
  noise, for the hand-made FakeSystem (tests/fakes.py).
- `LOOKS`: words that are a look the visterms can see (sun, sea, grass, night);
  `striped_collection` and `look_picture` draw them.
- `disc_picture`, `disc_pictures`: a background, a disc and stripes where a seed puts them.
- `picture`, `exiftool`, `write_packet`: a picture file and the metadata written into it.
- `two_colours`, `fake_corel`: a two-region picture and a Corel-5k-shaped folder of them.
- `red_png`, `hostile_names`: an upload's bytes, and pictures whose names are hostile.
- `vectors`: not pictures, the vectors a model reads: dense rows that show their words.
- `paint`, `backdrop`, `font`: words painted on a sign over a textured picture (the text
  tests read them back); `gps_tags`: exiftool's arguments for an EXIF GPS position.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from PIL import Image, ImageDraw, ImageFont

#: Named colours (RGB): far apart in every colour space the features use.
COLOURS = {"red": (220, 30, 30), "green": (40, 180, 50), "blue": (40, 60, 210),
           "yellow": (230, 210, 40)}

#: The colourless shades (RGB) beside COLOURS, for the colour pass (pamir.facts.colour).
SHADES = {"grey": (128, 128, 128), "white": (250, 250, 250)}

#: word -> colour: each word a look the visterms can see ("stripes" is a texture on top).
LOOKS = {"sun": (230, 200, 30), "sea": (20, 60, 200), "grass": (40, 170, 40),
         "night": (15, 15, 25)}


def coloured_pictures(root, n: int = 60, seed: int = 0, size=(48, 64), digits: int = 3,
                      colours: dict = COLOURS) -> Path:
    """n generated pictures in `root`, a colour each in turn, plain or striped (turn by
    turn), with noise, and the captions table that names them ("red stripes", "blue
    plain"); returns the table."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    rows = ["path\tkeywords"]
    for i, (colour, striped, a) in enumerate(_coloured(n, rng, size, colours)):
        name = f"p{i:0{digits}d}.png"
        Image.fromarray(a).save(root / name)
        rows.append(f"{name}\t{colour} {'stripes' if striped else 'plain'}")
    (root / "captions.tsv").write_text("\n".join(rows) + "\n")
    return root / "captions.tsv"


def captioned_photos(folder: Path, n: int = 36, seed: int = 3) -> None:
    """Pictures whose captions are in their sidecars (Google Takeout's NAME.EXT.json), as a
    folder of a person's own pictures carries them: red, green and blue, plain or striped."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    three = {c: COLOURS[c] for c in ("red", "green", "blue")}
    for i, (colour, striped, a) in enumerate(_coloured(n, rng, (40, 48), three)):
        name = f"p{i:03d}.png"
        Image.fromarray(a).save(folder / name)
        words = f"{colour} {'stripes' if striped else 'plain'}"
        (folder / f"{name}.json").write_text(json.dumps({"description": words}))


def _coloured(n, rng, size, colours):
    names = list(colours)
    for i in range(n):
        colour = names[i % len(names)]
        striped = (i // len(names)) % 2 == 0
        a = np.empty((*size, 3), np.float32)
        a[:] = colours[colour]
        a += rng.normal(0, 12, a.shape)
        if striped:
            a[:, (np.arange(size[1]) // 4) % 2 == 0] = 250
        yield colour, striped, np.clip(a, 0, 255).astype(np.uint8)


def make_pictures(root: Path) -> list[Path]:
    """Red, green and blue pictures, two flat and one striped each (NAME-0.png ...)."""
    root.mkdir(parents=True, exist_ok=True)
    out = []
    for name in ("red", "green", "blue"):
        for i in range(3):
            a = np.zeros((24, 36, 3), np.uint8)
            a[:] = COLOURS[name]
            if i == 2:  # stripes
                a[:, ::4] = 255
            p = root / f"{name}-{i}.png"
            Image.fromarray(a).save(p)
            out.append(p)
    return out


def striped_collection(root, colours: dict, n: int, size: tuple, seed: int, digits: int):
    """n generated pictures, a colour word each (round robin) and "stripes" on every third,
    with noise, and the captions table that names them; the collection it loads."""
    from pamir.facts.collection import load_collection

    rng = np.random.default_rng(seed)
    words, lines = list(colours), ["path\tkeywords"]
    for i in range(n):
        caption = [words[i % 4]] + (["stripes"] if i % 3 == 0 else [])
        a = np.zeros((*size, 3)) + colours[caption[0]]
        if "stripes" in caption:
            a[:, ::4] = 255
        a += rng.normal(0, 12, a.shape)
        name = f"p{i:0{digits}d}.png"
        Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(root / name)
        lines.append(f"{name}\t{' '.join(caption)}")
    (root / "captions.tsv").write_text("\n".join(lines) + "\n")
    return load_collection(root / "captions.tsv")


def look_picture(words, rng):
    """A picture of a caption's LOOKS (their mean colour), striped if it says "stripes"."""
    a = np.zeros((48, 72, 3), np.float64)
    a[:] = np.mean([LOOKS[w] for w in words if w in LOOKS], axis=0)
    if "stripes" in words:
        a[:, ::4] = 255
    a += rng.normal(0, 12, a.shape)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def disc_picture(seed: int, size=(48, 72)) -> np.ndarray:
    """A coloured background with a disc and stripes at places that depend on the seed."""
    rng = np.random.default_rng(seed)
    h, w = size
    y, x = np.mgrid[0:h, 0:w]
    a = np.empty((h, w, 3), np.float32)
    a[:] = rng.integers(20, 235, 3)
    cy, cx, r = rng.integers(0, h), rng.integers(0, w), rng.integers(6, 16)
    a[(x - cx) ** 2 + (y - cy) ** 2 < r ** 2] = rng.integers(0, 255, 3)
    a[(x // 4 % 2 == 0) & (y > h // 2)] = 250
    a += rng.normal(0, 8, a.shape)
    return np.clip(a, 0, 255).astype(np.uint8)


def disc_pictures(folder, n=10) -> list:
    """n disc_picture files, landscape and portrait."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        p = folder / f"p{i:02d}.png"
        Image.fromarray(disc_picture(i, (48, 72) if i % 3 else (72, 48))).save(p)
        paths.append(p)
    return paths


# ------------------------------------------------------------------ pictures and metadata
def picture(path: Path, colour=(200, 40, 40), size=(24, 32)) -> Path:
    """A flat picture file of any format Pillow writes (HEIC through pillow-heif)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    a = np.zeros((*size, 3), np.uint8)
    a[:] = colour
    if path.suffix.lower() == ".heic":
        import pillow_heif

        pillow_heif.register_heif_opener()
    Image.fromarray(a).save(path)
    return path


def exiftool(path: Path, *tags: str) -> Path:
    """Write metadata tags into a picture with exiftool (-TAG=VALUE ...)."""
    subprocess.run(["exiftool", "-q", "-q", "-overwrite_original", *tags, str(path)],
                   check=True)
    return path


def write_packet(path: Path, packet: bytes) -> Path:
    """A PNG whose XMP is exactly `packet` (an iTXt chunk, as exiftool writes it)."""
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_itxt("XML:com.adobe.xmp", packet.decode("latin-1"))
    Image.new("RGB", (8, 8)).save(path, pnginfo=info)
    return path


# --------------------------------------------------------------- Corel 5k's shape, vectors
RED, BLUE = (220, 30, 30), (30, 40, 210)


def colour_pictures(folder: Path, size=(48, 64)) -> None:
    """NAME-0.png for each colour of COLOURS and SHADES (NAME-1.png for red and blue too:
    mostly that colour, a sixth of it another), and split.png: two_colours(), red and blue."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, rgb in {**COLOURS, **SHADES}.items():
        a = np.zeros((*size, 3), np.uint8)
        a[:] = rgb
        Image.fromarray(a).save(folder / f"{name}-0.png")
        if name in ("red", "blue"):
            a[: size[0] // 6] = COLOURS["green"]
            Image.fromarray(a).save(folder / f"{name}-1.png")
    Image.fromarray(two_colours()).save(folder / "split.png")


def two_colours(h=64, w=96):
    """A picture of two regions: red on its left third, blue on the rest."""
    a = np.zeros((h, w, 3), np.uint8)
    a[:, : w // 3] = RED
    a[:, w // 3:] = BLUE
    return a


def fake_corel(root, ids_train, ids_test):
    """A Corel-5k-shaped folder: labels, pictures, and mulan-style sparse ARFF blobs whose
    row r has blob r (train) or blob 10 + r (test)."""
    (root / "labels").mkdir(parents=True)
    (root / "blobs").mkdir()
    (root / "images" / "0").mkdir(parents=True)  # the CD folder: id // 1000
    (root / "labels" / "words").write_text("sky\nsea\n")
    for name, ids, arff, base in (("training_label", ids_train, "Corel5k-train-sparse.arff", 0),
                                  ("test_label", ids_test, "Corel5k-test-sparse.arff", 10)):
        (root / "labels" / name).write_text("".join(f"{i} 1\n" for i in ids))
        rows = "".join(f"{{{base + r} 1,{499 + 1} 1}}\n" for r in range(len(ids)))
        (root / "blobs" / arff).write_text("@relation c\n@data\n" + rows)
        for i in ids:
            Image.fromarray(two_colours()).save(root / "images" / "0" / f"{i}.jpeg")
    return root


def vectors(n, seed):
    """Pictures as dense vectors that show their words (plus noise), captions of 1-3 words."""
    rng = np.random.default_rng(seed)
    T, D = 6, 24
    Y = (rng.random((n, T)) < 0.3).astype(np.float64)
    Y[np.arange(n), rng.integers(0, T, n)] = 1
    X = Y @ rng.normal(size=(T, D)) + 0.5 * rng.normal(size=(n, D))
    return X.astype(np.float32), sp.csr_matrix(Y)


# ----------------------------------------------------------------------- hostile pictures
def red_png(w=40, h=30) -> bytes:
    """A small red PNG's bytes."""
    import io

    buf = io.BytesIO()
    Image.new("RGB", (w, h), (200, 20, 20)).save(buf, "PNG")
    return buf.getvalue()


def hostile_names(folder: Path, invalid_utf8: bool = False) -> list[Path]:
    """Pictures whose names have newlines, control characters, and a path of about 4,000
    characters (NUL cannot be in a file name: the OS refuses it); with invalid_utf8, only
    one whose name is not UTF-8."""
    made = []
    png = red_png()
    names = [b"new\nline.png", b"tab\tand\x1bescape.png", b"quote\"'<script>.png",
             "é😀.png".encode()]
    if invalid_utf8:
        names = [b"bad-\xff\xfe-utf8.png"]
    for n in names:
        p = os.path.join(os.fsencode(folder), n)
        with open(p, "wb") as f:
            f.write(png)
        made.append(Path(os.fsdecode(p)))
    if invalid_utf8:
        return made
    deep = folder
    while len(str(deep)) < 3800:  # the whole path ~4,000 characters (PATH_MAX 4096)
        deep = deep / ("d" * 200)
    deep.mkdir(parents=True)
    (deep / ("x" * 200 + ".png")).write_bytes(png)
    made.append(deep / ("x" * 200 + ".png"))
    return made


# ---------------------------------------------------------------- text and places
#: The painted pictures' size (a photo's shape, small enough for fast tests).
PAINTED_SIZE = (640, 427)


def font(name: str, size: int) -> ImageFont.FreeTypeFont:
    """matplotlib's DejaVu fonts: installed wherever the tests run ([dev])."""
    import matplotlib

    return ImageFont.truetype(
        str(Path(matplotlib.__file__).parent / "mpl-data" / "fonts" / "ttf" / name), size)


def backdrop(seed: int = 0) -> Image.Image:
    """A smooth, textured picture with nothing written on it."""
    rng = np.random.default_rng(seed)
    small = rng.normal(125, 45, (PAINTED_SIZE[1] // 16, PAINTED_SIZE[0] // 16, 3)).clip(0, 255)
    return Image.fromarray(small.astype(np.uint8)).resize(PAINTED_SIZE, Image.Resampling.BICUBIC)


def paint(text: str, face: str, size: int, colour, plate, tilt: float, where=(60, 150),
          seed: int = 0) -> np.ndarray:
    """`text` on a plate (or outlined on nothing when plate is None), turned by `tilt`
    degrees, on a backdrop; (H, W, 3) uint8 RGB."""
    f = font(face, size)
    stroke = 0 if plate else 2
    left, top, right, bottom = f.getbbox(text, stroke_width=stroke)
    pad = size // 3
    sign = Image.new("RGBA", (right - left + 2 * pad, bottom - top + 2 * pad),
                     (*plate, 255) if plate else (0, 0, 0, 0))
    ImageDraw.Draw(sign).text((pad - left, pad - top), text, font=f, fill=(*colour, 255),
                              stroke_width=stroke, stroke_fill=(0, 0, 0, 255))
    sign = sign.rotate(tilt, expand=True, resample=Image.Resampling.BICUBIC)
    im = backdrop(seed)
    im.paste(sign, where, sign)
    return np.asarray(im)


def gps_tags(lat: float, lon: float) -> list[str]:
    """exiftool arguments for EXIF GPS only (the -GPS* shorthands write XMP too)."""
    return [f"-EXIF:GPSLatitude={abs(lat)}", f"-EXIF:GPSLatitudeRef={'N' if lat >= 0 else 'S'}",
            f"-EXIF:GPSLongitude={abs(lon)}",
            f"-EXIF:GPSLongitudeRef={'E' if lon >= 0 else 'W'}"]
