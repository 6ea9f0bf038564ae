"""A generated folder of Corel 5k pictures with copies, near-copies and bursts made from some
of them, and the other pictures of their CDs beside them as hard negatives (same scene, not
a copy), with the groups that truth says each picture belongs to.

Not a benchmark script: benchmarks/duplicates.py builds its folder with it (a module of data,
as faces_pictures.py is for bench_people.py).
"""

from __future__ import annotations

import io
import random
import shutil
from datetime import datetime, timedelta
from pathlib import Path

from PIL import Image, ImageEnhance

#: The near-copies made of each original, as the issue lists them.
NEAR_WAYS = ("resize50", "q60", "crop5", "bright10")
#: Frames of a burst besides the original, each shifted this many pixels more.
BURST_FRAMES, BURST_SHIFT = 3, 3
_DATE_TAG, _EXIF_IFD = 36867, 0x8769  # DateTimeOriginal, in the Exif IFD


def _exif(when: datetime | None):
    exif = Image.Exif()
    if when is not None:
        exif.get_ifd(_EXIF_IFD)[_DATE_TAG] = when.strftime("%Y:%m:%d %H:%M:%S")
    return exif


def _save(im: Image.Image, path: Path, when: datetime | None, quality: int = 92) -> None:
    if path.suffix == ".png":
        im.save(path, "PNG")  # an editor's PNG export: the pixels, no EXIF
    else:
        im.save(path, "JPEG", quality=quality, exif=_exif(when))


def _with_comment(data: bytes, text: bytes) -> bytes:
    """The same JPEG pixels in other bytes: a comment segment after the start marker (what a
    tool writing metadata into a copy does)."""
    return data[:2] + b"\xff\xfe" + (len(text) + 2).to_bytes(2, "big") + text + data[2:]


def _near(im: Image.Image, way: str) -> Image.Image:
    w, h = im.size
    if way == "resize50":
        return im.resize((w // 2, h // 2), Image.LANCZOS)
    if way == "crop5":  # 5 % of each side's length off, split between its two ends
        dx, dy = round(w * 0.025), round(h * 0.025)
        return im.crop((dx, dy, w - dx, h - dy))
    if way == "bright10":
        return ImageEnhance.Brightness(im).enhance(1.10)
    return im  # q60: the same pixels saved at quality 60


def make_folder(corel: Path, out: Path, *, cds: int = 10, originals: int = 4,
                negatives: int = 20, bursts: int = 2, seed: int = 0) -> dict:
    """Write the folder `out` (emptied first) and return the truth: {"groups": [{"kind":
    "exact" | "near" | "burst", "paths": [...]}], "negatives": {cd: [paths]}, "pictures": n}.

    From `cds` CDs drawn at random, `originals` pictures each (the first `bursts` of them
    shot as a burst instead), plus `negatives` other pictures of the CD copied as they
    are. An original's exact copies: the same bytes, and the same pixels in other bytes (a
    comment added; a PNG export); its near-copies: NEAR_WAYS. A burst: the original and
    BURST_FRAMES frames cropped BURST_SHIFT pixels further right each, a second apart."""
    rng = random.Random(seed)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    folders = sorted(p for p in Path(corel).iterdir() if p.is_dir())
    truth: dict = {"groups": [], "negatives": {}}
    day = datetime(2024, 1, 1, 9, 0, 0)
    for cd in rng.sample(folders, cds):
        files = sorted(cd.glob("*.jpeg"))
        chosen = rng.sample(files, originals + negatives)
        target = out / cd.name
        target.mkdir()
        for k, src in enumerate(chosen[:originals]):
            day += timedelta(days=1)
            im = Image.open(src).convert("RGB")
            if k < bursts:
                truth["groups"].append({"kind": "burst",
                                        "paths": _burst(im, target / src.stem, day)})
                continue
            truth["groups"] += _copies(im, target / src.stem, day)
        negs = []
        for src in chosen[originals:]:
            dest = target / src.name
            shutil.copyfile(src, dest)  # as the CD has it: no date
            negs.append(str(dest))
        truth["negatives"][cd.name] = negs
    truth["pictures"] = sum(1 for _ in out.rglob("*.*"))
    return truth


def _copies(im: Image.Image, stem: Path, when: datetime) -> list[dict]:
    original = stem.with_name(stem.name + ".jpg")
    _save(im, original, when)
    data = original.read_bytes()
    same_bytes = stem.with_name(stem.name + " copy.jpg")
    same_bytes.write_bytes(data)
    commented = stem.with_name(stem.name + " tagged.jpg")
    commented.write_bytes(_with_comment(data, b"tagged by a photo tool"))
    png = stem.with_name(stem.name + " export.png")
    _save(Image.open(original).convert("RGB"), png, None)  # the decoded pixels, lossless
    near = []
    for way in NEAR_WAYS:
        path = stem.with_name(f"{stem.name} {way}.jpg")
        _save(_near(Image.open(original).convert("RGB"), way), path, when,
              quality=60 if way == "q60" else 92)
        near.append(str(path))
    exact = [str(original), str(same_bytes), str(commented), str(png)]
    return [{"kind": "exact", "paths": exact}, {"kind": "near", "paths": exact + near}]


def _burst(im: Image.Image, stem: Path, when: datetime) -> list[str]:
    w, h = im.size
    span = BURST_FRAMES * BURST_SHIFT
    paths = []
    for k in range(BURST_FRAMES + 1):
        frame = im.crop((k * BURST_SHIFT, 0, w - span + k * BURST_SHIFT, h))
        path = stem.with_name(f"{stem.name} burst{k}.jpg")
        _save(frame, path, when + timedelta(seconds=k))
        paths.append(str(path))
    return paths
