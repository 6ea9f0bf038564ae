"""Copies and bursts (issue 47, item 3): precision and recall per kind on a generated folder of
Corel 5k pictures, the hard negatives (the other pictures of the same CD, the same scene), the
measures that were tried (the index's text-space rows, a perceptual hash, the looks), and the
time to find every group at 10,000 pictures (real files, the whole `pamir duplicates`) and at
1,000,000 (synthetic looks, the grouping alone).

    flock /tmp/pamir-heavy.lock python benchmarks/duplicates.py [--text-space] [--million]
    python benchmarks/duplicates.py --parts quality,corel   # parts, merged into the results

Results: benchmarks/results/duplicates.json and .md.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from PIL import Image, ImageEnhance

from common.harness import Run, report_cli, report_head, save_report

from pamir.data import find_corel5k

STEM = "duplicates"
RESULTS_FILE = Path(__file__).resolve().parent / "results" / f"{STEM}.json"
#: The folder the text-space rows are measured on (--text-space): the zero-caption index
#: runs the CNN on every picture.
TEXT_SPACE_FOLDER = {"cds": 5, "originals": 4, "negatives": 20, "bursts": 1, "seed": 1}
KINDS = ("exact", "near", "burst")



# --------------------------------------------------- the generated folder and its truth
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


def _zero_index(folder: Path, index_dir: Path) -> None:
    """An index of the folder whose vectors are zeros: finding copies reads no model; with
    the 512-px thumbnails `pamir index` writes, which the fine match reads."""
    from pamir.features.thumbnails import INDEXED_SIZES, write_from_file
    from pamir.index import Index

    def transform(paths):
        return np.zeros((len(paths), 1), np.float32), np.ones(len(paths), bool), [None] * len(paths)

    with Index.create(index_dir, ["word"], np.ones(1)) as ix:
        ix.update([folder], transform)
        for p in ix.pictures("ok"):
            write_from_file(ix.thumbnails_dir, p.hash, p.path, max(INDEXED_SIZES))


def _command(index_dir: Path) -> tuple[dict, float]:
    """`pamir duplicates --json` as a person runs it: (its answer, seconds)."""
    started = time.perf_counter()
    out = subprocess.run(["pamir", "duplicates", "--index",
                          str(index_dir), "--json"], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    return json.loads(out.stdout), time.perf_counter() - started


def _pairs(sets) -> set[tuple[str, str]]:
    return {tuple(sorted(p)) for s in sets for p in itertools.combinations(s, 2)}


def quality(truth: dict, answer: dict) -> dict:
    """Pairwise precision and recall per kind: an exact pair is two pictures of one exact
    set, a near pair two of one group of copies (exact ones included), a burst pair two
    shots of one burst; and the pairs of different pictures of one CD called copies."""
    groups = answer["groups"]
    path_of = {i: p for g in groups for i, p in zip(g["ids"], g["paths"])}
    found = {"exact": _pairs([path_of[i] for i in part] for g in groups
                             if g["kind"] in ("exact", "near") for part in g["parts"])
             | _pairs(g["paths"] for g in groups if g["kind"] == "exact"),
             "near": _pairs(g["paths"] for g in groups if g["kind"] in ("exact", "near")),
             "burst": _pairs(g["paths"] for g in groups if g["kind"] == "burst")}
    found["burst"] -= found["near"]
    true = {k: _pairs(g["paths"] for g in truth["groups"] if g["kind"] == k) for k in KINDS}
    out = {}
    for k in KINDS:
        hit = len(found[k] & true[k])
        out[k] = {"pairs": len(true[k]), "found": len(found[k]),
                  "precision": hit / len(found[k]) if found[k] else 1.0,
                  "recall": hit / len(true[k]) if true[k] else 1.0}
    same_cd = _pairs(truth["negatives"].values())  # negatives among themselves
    originals = {cd: [g["paths"][0] for g in truth["groups"] if f"/{cd}/" in g["paths"][0]]
                 for cd in truth["negatives"]}
    same_cd |= {tuple(sorted((a, b))) for cd, negs in truth["negatives"].items()
                for a in negs for b in originals[cd]}
    out["cd_pairs"] = len(same_cd)
    out["cd_pairs_called_copies"] = len(same_cd & found["near"])
    out["cd_pairs_called_bursts"] = len(same_cd & found["burst"])
    return out


def measures(truth: dict, text_index: Path | None) -> dict:
    """How each measure separates copies from the CD's other pictures: per kind of pair,
    the least alike copy and the most alike negative (a good measure: the first above the
    second). The looks coarse (stored) and fine (from the files); a 64-bit perceptual hash
    (imagehash.phash: Hamming distance, lower is more alike); the index's text-space rows
    (cosine, with --text-space: a zero-caption index, ImageNet's 1,000 classes)."""
    from pamir.duplicates.looks import FineLooks, crops, look_of, best_match

    near = sorted(_pairs(g["paths"] for g in truth["groups"] if g["kind"] == "near"))
    burst = sorted(_pairs(g["paths"] for g in truth["groups"] if g["kind"] == "burst"))
    negatives = sorted(_pairs(truth["negatives"].values()))
    paths = sorted({p for pair in near + burst + negatives for p in pair})
    coarse = {p: crops(look_of(p).pixels) for p in paths}
    fine = FineLooks()
    kinds = {"near-copies": near, "burst shots": burst, "CD negatives": negatives}
    table = {"coarse look (NCC)": {k: [best_match(coarse[a], coarse[b]) for a, b in v]
                                   for k, v in kinds.items()},
             "fine look (NCC)": {k: [s for s in (fine.alike(a, b) for a, b in v)
                                     if s is not None] for k, v in kinds.items()}}
    try:
        import imagehash
        from PIL import Image

        h = {p: imagehash.phash(Image.open(p)) for p in paths}
        table["pHash (bits apart)"] = {k: [float(h[a] - h[b]) for a, b in v]
                                       for k, v in kinds.items()}
    except ImportError:
        pass
    if text_index is not None:
        from pamir.index import Index

        with Index.open(text_index) as ix:
            z = {p.path: ix.vector(p.id, classes=True) for p in ix.pictures("ok")}
        unit = {p: v / (np.linalg.norm(v) + 1e-9) for p, v in z.items()}
        table["text-space rows (cosine)"] = {k: [float(unit[a] @ unit[b]) for a, b in v]
                                             for k, v in kinds.items()}
    return {name: {k: {"pairs": len(v), "min": float(np.min(v)), "max": float(np.max(v)),
                       "p1": float(np.percentile(v, 1)), "p99": float(np.percentile(v, 99))}
                   for k, v in by.items()} for name, by in table.items()}


def corel_negatives(corel: Path) -> dict:
    """Every pair of different pictures of one Corel 5k CD (50 x 4,950): matched coarsely,
    those over COARSE_FLOOR finely; the pairs a copy's threshold would take."""
    from pamir.duplicates.grouping import COARSE_FLOOR, NEAR_ALIKE
    from pamir.duplicates.looks import SHAPE_TOLERANCE, FineLooks, crops_of_many, read_looks

    fine = FineLooks()
    pairs, refined, over = 0, 0, []
    started = time.perf_counter()
    for cd in sorted(p for p in (corel / "images").iterdir() if p.is_dir()):
        files = sorted(str(f) for f in cd.glob("*.jpeg"))
        looks = [look for look, _ in read_looks(files)]
        c = crops_of_many(np.stack([look.pixels for look in looks]))
        shape = np.array([look.shape for look in looks])
        m = np.einsum("icd,jd->ijc", c, c[:, 0]).max(-1)
        m = np.maximum(m, m.T)
        m[np.abs(shape[:, None] - shape[None]) > SHAPE_TOLERANCE] = -1
        for i, j in zip(*np.triu_indices(len(files), 1)):
            pairs += 1
            if m[i, j] >= COARSE_FLOOR:
                refined += 1
                score = fine.alike(files[i], files[j])
                if score is not None and score >= NEAR_ALIKE:
                    over.append({"pair": [Path(files[i]).name, Path(files[j]).name],
                                 "cd": cd.name, "coarse": round(float(m[i, j]), 4),
                                 "fine": round(score, 4)})
    return {"pairs": pairs, "matched_finely": refined, "called_copies": over,
            "seconds": round(time.perf_counter() - started, 1)}


def scale_real(corel: Path, work: Path, n: int = 10_000) -> dict:
    """n pictures on disk: Corel 5k's 5,000 and a near-copy of each (one of NEAR_WAYS in
    turn), indexed; the whole `pamir duplicates` timed on a fresh index (the looks read,
    then grouped) and again (grouped alone)."""
    # the same copies as the quality folder's (_near)
    from PIL import Image

    folder = work / "scale"
    folder.mkdir()
    sources = sorted((corel / "images").rglob("*.jpeg"))[: n // 2]
    for k, src in enumerate(sources):
        way = NEAR_WAYS[k % len(NEAR_WAYS)]
        im = Image.open(src).convert("RGB")
        im.save(folder / f"{src.stem}.jpg", quality=92)
        _near(im, way).save(folder / f"{src.stem} {way}.jpg", quality=60 if way == "q60" else 92)
    _zero_index(folder, work / "scale-index")
    first, cold = _command(work / "scale-index")
    _, warm = _command(work / "scale-index")
    found = sum(len(g["ids"]) for g in first["groups"] if g["kind"] != "burst")
    return {"pictures": 2 * len(sources), "groups": len(first["groups"]),
            "pictures_in_groups": found, "seconds_fresh": round(cold, 1),
            "seconds_again": round(warm, 1)}


def scale_synthetic(n: int, seed: int = 0) -> dict:
    """The grouping alone on n synthetic looks (blocky random pictures, 1 % of them in pairs
    of copies), without the fine match (there are no files): candidates, coarse match,
    groups."""
    from pamir.duplicates.grouping import find_groups
    from pamir.duplicates.looks import SIDE, Looks

    rng = np.random.default_rng(seed)
    pixels = np.empty((n, SIDE, SIDE, 3), np.uint8)
    for a in range(0, n, 50_000):
        b = min(n, a + 50_000)
        base = rng.random((b - a, 6, 6, 3), np.float32) * 255
        pixels[a:b] = np.kron(base, np.ones((1, 4, 4, 1), np.float32)).astype(np.uint8)
    copies = rng.choice(n, n // 100, replace=False)
    pixels[copies[1::2]] = pixels[copies[::2]][: len(copies[1::2])]
    taken = np.full(n, np.nan)
    taken[copies] = np.repeat(np.arange(len(copies) // 2) * 3600.0, 2)[: len(copies)]
    hashes = [str(i) for i in range(n)]
    looks = Looks(pixels, np.tile([192, 128], (n, 1)))
    started = time.perf_counter()
    groups = find_groups(hashes, looks, taken)
    seconds = time.perf_counter() - started
    return {"pictures": n, "planted_pairs": len(copies) // 2, "groups": len(groups),
            "seconds": round(seconds, 1)}


def report(r: dict) -> str:
    # a run of every part at once (the flags) stores "run", under the heavy lock
    runs = r.get("runs") or [{**r["run"], "parts": ["all"], "heavy": True}]
    lines = report_head("Copies and bursts: precision, recall, hard negatives, time",
                        {"machine": runs[-1]["machine"] if runs else ""})
    lines += ["", "Runs (`--parts` measures some parts and merges them into the results):", ""]
    for x in runs:
        lock = "flock /tmp/pamir-heavy.lock " if x.get("heavy") else ""
        load = x.get("load_average", {})
        lines.append(f"- {', '.join(x['parts'])}: `{lock}{x['command']}` ({x['date']}, "
                     f"{x['minutes']} min; load average {load.get('start', '?')} at the start, "
                     f"{load.get('end', '?')} at the end)")
    q = r.get("quality")
    if q is None:
        return "\n".join(lines) + "\n"
    lines += ["", f"## A generated folder of Corel 5k pictures ({r['folder']['pictures']:,} "
                  "pictures)", "",
              f"{r['folder']['cds']} CDs drawn at random; of each, {r['folder']['originals']} "
              f"pictures made into copies ({r['folder']['bursts']} of them shot as bursts "
              "instead) and "
              f"{r['folder']['negatives']} other pictures of the CD as they are (hard negatives: "
              "the same scene). Exact copies: the same bytes, a comment added to the JPEG (same "
              "pixels), a PNG export (same pixels); near-copies: resized 50 %, recompressed at "
              "quality 60, cropped 5 %, 10 % brighter; bursts: 4 shots a second apart, each "
              "cropped 3 pixels further right. Pairwise: a pair is found when both pictures "
              "are in one group of the kind (a near group holds its exact copies).", "",
              f"`pamir duplicates --json` on the fresh index (the looks read, then grouped): "
              f"{r['command_seconds']:.1f} s.", "",
              "| kind | true pairs | pairs found | precision | recall | target |",
              "|---|---:|---:|---:|---:|---|"]
    targets = {"exact": "0.99 / 0.99", "near": "0.95 / 0.95", "burst": "-"}
    for k in KINDS:
        e = q[k]
        lines.append(f"| {k} | {e['pairs']} | {e['found']} | {e['precision']:.3f} | "
                     f"{e['recall']:.3f} | {targets[k]} |")
    lines += ["", f"Pairs of different pictures of one CD (negatives with each other and with "
                  f"the originals): {q['cd_pairs']:,}; called copies: "
                  f"**{q['cd_pairs_called_copies']}**, called bursts: "
                  f"{q['cd_pairs_called_bursts']}.", ""]
    c = r.get("corel")
    if c:
        lines += ["## Every pair of different pictures of one Corel 5k CD", "",
                  f"{c['pairs']:,} pairs; {c['matched_finely']:,} alike enough coarsely to be "
                  f"matched finely; called copies: **{len(c['called_copies'])}** "
                  f"({c['seconds']} s):", ""]
        lines += [f"- CD {o['cd']}: {o['pair'][0]} and {o['pair'][1]} (coarse {o['coarse']}, "
                  f"fine {o['fine']})" for o in c["called_copies"]]
        if any(o["pair"] == ["108015.jpeg", "108041.jpeg"] for o in c["called_copies"]):
            lines += ["", "108015 and 108041, looked at, are two frames of one tiger a moment "
                      "apart: a copy to the eye, not one made from a file; Corel gives them no "
                      "camera time that would tell them apart.", ""]
    lines += ["## What tells copies from the same scene", "",
              "Per measure, the least alike pair of each kind of copy and the most alike pair "
              "of the CD negatives (for pHash, bits apart: lower is more alike). A measure "
              "that works has every copy beyond every negative.", "",
              "| measure | near-copies: least alike | burst shots: least alike | CD negatives:"
              " most alike |", "|---|---:|---:|---:|"]
    for name, by in r["measures"].items():
        low = "max" if name.startswith("pHash") else "min"
        high = "min" if name.startswith("pHash") else "max"
        lines.append(f"| {name} | {by['near-copies'][low]:.3f} | {by['burst shots'][low]:.3f}"
                     f" | {by['CD negatives'][high]:.3f} |")
    t = r.get("text_space")
    if t:
        f = t["folder"]
        lines += ["", f"On a smaller folder made alike ({f['pictures']} pictures: {f['cds']} CDs, "
                  f"{f['originals']} originals each, {f['negatives']} negatives), indexed with no "
                  "captions (the rows: ImageNet's 1,000 class probabilities):", "",
                  "| measure | near-copies: least alike | burst shots: least alike | CD "
                  "negatives: most alike |", "|---|---:|---:|---:|"]
        for name, by in t["measures"].items():
            low = "max" if name.startswith("pHash") else "min"
            high = "min" if name.startswith("pHash") else "max"
            lines.append(f"| {name} | {by['near-copies'][low]:.3f} | "
                         f"{by['burst shots'][low]:.3f} | {by['CD negatives'][high]:.3f} |")
    lines += ["", "The index's text-space rows cannot tell them: a picture and its half-size "
              "copy may score other words, two pictures of one scene the same. A 64-bit pHash "
              "puts a 5 %-cropped copy further from its original than some other pictures of "
              "its CD. The looks (24-pixel colour thumbnails stored per picture, 1.7 KB) matched "
              "over crops, then finely from the 512-px thumbnails `pamir index` writes (the "
              "files where there are none), separate them.", ""]
    s = r.get("scale", {})
    lines += ["## Time to find every group", "",
              "| pictures | what | groups | seconds |", "|---:|---|---:|---:|"]
    if "real" in s:
        e = s["real"]
        lines += [f"| {e['pictures']:,} | `pamir duplicates` on a fresh index (looks read, "
                  f"grouped) | {e['groups']:,} | {e['seconds_fresh']} |",
                  f"| {e['pictures']:,} | `pamir duplicates` again (grouped) | {e['groups']:,} "
                  f"| {e['seconds_again']} |"]
    for e in s.get("synthetic", []) + ([s["million"]] if "million" in s else []):
        lines.append(f"| {e['pictures']:,} | grouping synthetic looks (no fine match) | "
                     f"{e['groups']:,} | {e['seconds']} |")
    if "real" in s:
        e = s["real"]
        lines += ["", f"The {e['pictures']:,} real pictures are Corel 5k's {e['pictures'] // 2:,} "
                  "and one near-copy of each (resized, recompressed, cropped or brightened in "
                  f"turn): {e['pictures_in_groups']:,} of them came out in groups of copies. "
                  "Grouping again reads no look, but matches the alike pairs finely from their "
                  "files again. The synthetic looks "
                  "(blocky random pictures, 1 % of them in pairs of copies) time the "
                  "candidates and the coarse match alone: faiss's exact search up to 200,000 "
                  "pictures, an inverted file over that."]
    return "\n".join(lines) + "\n"


PARTS = ("quality", "corel", "scale", "million", "text")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    parts, rest = _parts(argv)
    args = report_cli(__doc__, STEM, report, rest, flags={
        "--text-space": "also measure the text-space rows of a zero-caption index (slow)",
        "--million": "also time the grouping of 1,000,000 synthetic looks"})
    if args is None:
        return
    if parts is None:
        parts = {"quality", "corel", "scale"} | ({"million"} if args.million else set()) | (
            {"text"} if args.text_space else set())
    run = Run("duplicates.py", argv)
    corel = find_corel5k()
    r: dict = {"scale": {}}

    def save() -> None:
        """Merge what this run measured into the results file as it stands now (another
        part may have written it meanwhile), after each part: a run stopped half-way keeps
        what it measured."""
        old = json.loads(RESULTS_FILE.read_text()) if RESULTS_FILE.is_file() else {}
        this = {**run.info(), "minutes": run.minutes(), "parts": sorted(parts),
                "heavy": _under_lock()}
        merged = {**old, **{k: v for k, v in r.items() if k != "scale"},
                  "scale": {**old.get("scale", {}), **r["scale"]},
                  "runs": [x for x in old.get("runs", []) if x["parts"] != this["parts"]]
                  + [this]}
        save_report(STEM, merged, report, echo=False)

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "quality" in parts:
            folder = work / "folder"
            sizes = {"cds": 20, "originals": 6, "negatives": 40, "bursts": 2}
            truth = make_folder(corel / "images", folder, **sizes)
            r["folder"] = {**sizes, "pictures": truth["pictures"]}
            _zero_index(folder, work / "index")
            answer, seconds = _command(work / "index")
            r["quality"], r["command_seconds"] = quality(truth, answer), round(seconds, 1)
            r["measures"] = measures(truth, None)
            save()
        if "corel" in parts:
            r["corel"] = corel_negatives(corel)
            save()
        if "scale" in parts:
            r["scale"]["synthetic"] = [scale_synthetic(10_000)]
            r["scale"]["real"] = scale_real(corel, work)
            save()
        if "million" in parts:
            r["scale"]["million"] = scale_synthetic(1_000_000)
            save()
        if "text" in parts:  # on a smaller folder: the CNN reads every picture
            from pamir.jobs.indexing import index_folders

            small = make_folder(corel / "images", work / "small", **TEXT_SPACE_FOLDER)
            index_folders(None, [work / "small"], index=work / "text-index")
            r["text_space"] = {"folder": {**TEXT_SPACE_FOLDER, "pictures": small["pictures"]},
                               "measures": measures(small, work / "text-index")}
            save()
    print(RESULTS_FILE.with_suffix(".md").read_text())


def _under_lock() -> bool:
    """Whether this run was started by `flock /tmp/pamir-heavy.lock` (its parent)."""
    try:
        return b"pamir-heavy.lock" in Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
    except OSError:
        return False


def _parts(argv: list[str]) -> tuple[set[str] | None, list[str]]:
    """(the parts of PARTS that --parts a,b names, merged into the results file; None: as
    the flags say), and the other arguments."""
    if "--parts" not in argv:
        return None, argv
    k = argv.index("--parts")
    wanted = set(argv[k + 1].split(",")) if k + 1 < len(argv) else set()
    if not wanted or wanted - set(PARTS):
        sys.exit(f"--parts: some of {', '.join(PARTS)}, comma-separated")
    return wanted, argv[:k] + argv[k + 2:]


if __name__ == "__main__":
    main()
