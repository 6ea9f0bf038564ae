"""Text of every size and angle (issue 45): painted words from 2 % to 70 % of the picture's
height, tilted up to +-20 degrees, read by pamir's text pass and by rapidocr's own pipeline
at its defaults, with the cost per picture.

Pictures: one word each, on a Corel 5k picture enlarged to 1024 x 683 (JPEG, quality 90), in
matplotlib's DejaVu fonts (every machine has them), dark on a light plate, light on a dark
one, or outlined with no plate; its letters (the word's ink, ascenders and descenders
included) HEIGHTS of the picture's height, turned TILTS degrees. A word is taken from WORDS
at random among those that fit the picture once turned (at 70 %, only words of two or three
letters fit). A word is read when it is among the picture's text facts (pamir.facts.ocr.text_facts).

Settings, side by side in one run: rapidocr's own pipeline at its defaults (the
reference), pamir's reader with the bound on a line's height it had (MAX_LINE_SHARE = 1/3:
"before", with the detection's box threshold it had then, rapidocr's 0.5), with that box
threshold alone (pamir.facts.ocr.MIN_BOX_SCORE 0.5 against 0.3), these three with the
detection network in fp32, and as it is now (detection in int8: pamir.facts.ocr_int8).
Cost: ms a picture (decoding included, sessions built beforehand) on the painted pictures,
on the same backdrops with nothing painted, and on Corel pictures at their own size
(192 x 128), where the tall-line bound was measured.

--search N: the painted pictures among N Corel pictures, indexed by `pamir index` (its text
pass), each word searched (`pamir search WORD -k 3`: is its picture in the top 3?), and the
index timed with and without its text pass, side by side.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_text_sizes.py [--per 2] [--corel 100]
        [--search 100] [--stem text_sizes]

--stem names the results files (results/STEM.json and .md): text_sizes_per2 holds the run
with two pictures a size and tilt.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from common.harness import Run, checkout_commit, report_cli, report_head, save_report
from common.latency import warm_up_pictures

from pamir.data import DataError, find_corel5k
from pamir.facts.fact import fold
from pamir.facts.ocr import OcrSettings, TextReader, text_facts

STEM = "text_sizes"
PICTURE = (1024, 683)
HEIGHTS = (0.02, 0.05, 0.10, 0.20, 0.35, 0.50, 0.70)
TILTS = (-20, -10, 0, 10, 20)
FONTS = ("DejaVuSans-Bold.ttf", "DejaVuSans.ttf", "DejaVuSerif-Bold.ttf")
#: (text, plate or None, outline or None)
STYLES = (((20, 20, 20), (240, 232, 205), None), ((255, 255, 255), (20, 60, 140), None),
          ((255, 255, 255), None, (0, 0, 0)))
WORDS = """bakery museum station pharmacy market garden library theatre cinema harbour
bridge castle ticket airport parking pizza sushi burger salad coffee bread hotel bicycle
restaurant welcome entrance discount festival stadium football swimming mountain village
hospital dentist police chocolate vanilla lemon orange cherry tomato honey cookie waffle
exit taxi sale open menu bank park zoo spa bar inn pub café gym pool golf shop deli wine
beer tea ice gas bus car art fish cake milk soap toys book jazz bike surf yoga wc tv ok""".split()
SETTINGS = {
    "rapidocr defaults (short side 736, angle classifier)":
        OcrSettings(rapidocr_defaults=True, angle_classifier=True, threads=0),
    "pamir before (lines at most 1/3 of the short side)":
        OcrSettings(max_line_share=1 / 3, min_box_score=0.5, detect_precision="fp32"),
    "pamir, detection's box threshold 0.5 (rapidocr's)":
        OcrSettings(min_box_score=0.5, detect_precision="fp32"),
    "pamir, detection in fp32 (before int8)": OcrSettings(detect_precision="fp32"),
    "pamir now (detection in int8)": OcrSettings(detect_precision="int8"),
}


def font_path(name: str) -> Path:
    import matplotlib  # noqa: PLC0415 - the benchmarks' own dependency

    return Path(matplotlib.__file__).parent / "mpl-data" / "fonts" / "ttf" / name


def plate(word: str, font: str, height: int, style, tilt: float) -> Image.Image:
    """The word with letters `height` px high (its ink), on its plate, turned."""
    fg, back, outline = style
    probe = ImageFont.truetype(str(font_path(font)), 100)
    l, t, r, b = probe.getbbox(word)
    f = ImageFont.truetype(str(font_path(font)), max(4, round(100 * height / (b - t))))
    stroke = max(1, height // 20) if outline else 0
    l, t, r, b = f.getbbox(word, stroke_width=stroke)
    pad = max(2, height // 20)
    im = Image.new("RGBA", (r - l + 2 * pad, b - t + 2 * pad),
                   back + (255,) if back else (0, 0, 0, 0))
    ImageDraw.Draw(im).text((pad - l, pad - t), word, font=f, fill=fg + (255,),
                            stroke_width=stroke, stroke_fill=(outline or fg) + (255,))
    return im.rotate(tilt, expand=True, resample=Image.Resampling.BICUBIC)


def painted(folder: Path, corel: list[Path], per: int, seed: int = 0) -> list[dict]:
    """`per` pictures for each height and tilt: [{path, word, height, tilt}]."""
    rng = np.random.default_rng(seed)
    out, used = [], set()
    # the largest words first: only the short words fit them
    for height in sorted(HEIGHTS, reverse=True):
        for tilt in TILTS:
            for k in range(per):
                font = FONTS[int(rng.integers(len(FONTS)))]
                style = STYLES[int(rng.integers(len(STYLES)))]
                word, p = fitting(rng, font, round(height * PICTURE[1]), style, tilt, used)
                if p is None:
                    continue
                used.add(word)
                im = backdrop(rng, corel)
                im.paste(p, (int(rng.integers(0, PICTURE[0] - p.width + 1)),
                             int(rng.integers(0, PICTURE[1] - p.height + 1))), p)
                path = folder / f"word-{len(out):03d}.jpg"
                im.save(path, quality=90)
                out.append({"path": str(path), "word": fold(str(word)), "height": height,
                            "tilt": tilt})
    return out


def fitting(rng, font, height, style, tilt, used: set):
    """A word of WORDS not yet `used` (in random order) that fits the picture at this
    height and tilt, and its plate; (None, None) if none does. Each word is painted once,
    so that its search has one right answer."""
    for w in rng.permutation(sorted(set(WORDS) - used)):
        w = str(w)
        p = plate(w.upper() if rng.random() < 0.6 else w.capitalize(), font, height, style,
                  tilt)
        if p.width <= PICTURE[0] and p.height <= PICTURE[1]:
            return w, p
    return None, None


def backdrop(rng, corel: list[Path]) -> Image.Image:
    return Image.open(corel[int(rng.integers(len(corel)))]).convert("RGB").resize(
        PICTURE, Image.Resampling.BICUBIC)


def measure(settings: OcrSettings, pictures, blank, corel_small) -> dict:
    reader = TextReader(settings)
    reader.read(pictures[0]["path"])  # sessions warm

    def timed(paths, boxes=None):
        facts, t = [], time.perf_counter()
        for p in paths:
            lines = reader.read(p)
            facts.append({f.word for f in text_facts(lines)})
            if boxes is not None:
                boxes.append([list(line.box) for line in lines])
        return facts, round(1000 * (time.perf_counter() - t) / max(1, len(paths)), 1)

    boxes: list = []
    found, ms = timed([p["path"] for p in pictures], boxes)
    blank_facts, blank_ms = timed(blank)
    corel_facts, corel_ms = timed(corel_small)
    return {"read": [p["word"] in f for p, f in zip(pictures, found)], "painted_ms": ms,
            "boxes": boxes,
            "blank_ms": blank_ms, "blank_with_text": sum(bool(f) for f in blank_facts),
            "corel_ms": corel_ms, "corel_with_text": sum(bool(f) for f in corel_facts)}


def pamir_cli(*args, check=True, env=None) -> subprocess.CompletedProcess:
    """`pamir ARGS` of this checkout, in a child process."""
    return subprocess.run([sys.executable, "-c", "from pamir.cli import main; main()", *args],
                          capture_output=True, text=True, check=check,
                          env={**os.environ, **(env or {})})


def search_part(pictures, corel: list[Path], distractors: int, work: Path) -> dict:
    """The painted pictures among Corel pictures, indexed by `pamir index FOLDER` (no model,
    no faces: its text pass), then each picture's word searched (`pamir search WORD -k 3`);
    the index timed with and without its text pass, side by side."""
    folder = work / "folder"
    folder.mkdir()
    for p in pictures:
        shutil.copy(p["path"], folder / Path(p["path"]).name)
    for p in corel[7::max(1, len(corel) // max(1, distractors))][:distractors]:
        shutil.copy(p, folder / f"corel-{p.name}")
    seconds = {}
    template = warm_cache(work)
    for name, extra in (("without text", ["--no-text"]), ("with text", [])):
        # each run computes its CNN features afresh (a copy of the one-time cache); no
        # lexicon of word embeddings, whose one-off build would count in both runs and hide
        # the ratio
        shutil.copytree(template, work / f"cache {name}")
        env = {"PAMIR_CACHE": str(work / f"cache {name}"), "PAMIR_LEXICON_WORDS": "0"}
        t = time.perf_counter()
        pamir_cli("index", str(folder), "--index", str(work / name), "--no-faces", *extra,
                  env=env)
        seconds[name] = round(time.perf_counter() - t, 1)
    top3 = []
    for p in pictures:
        hits = pamir_cli("search", p["word"], "--index", str(work / "with text"), "-k", "3",
                         "-f", check=False).stdout.split()
        top3.append(any(Path(h).name == Path(p["path"]).name for h in hits))
    return {"distractors": distractors, "index_s": seconds, "top3": top3,
            "separate_caches": True, "warm_graphs": True}


def warm_cache(work: Path) -> Path:
    """A cache holding what a machine makes once (the CNN's ONNX export and int8 graph, the
    text detector's int8 graph), left by indexing two generated pictures with every pass:
    neither timed run pays for them."""
    folder = warm_up_pictures(work / "warm-up", seed=2)
    cache = work / "cache template"
    pamir_cli("index", str(folder), "--index", str(work / "warm-up index"),
              env={"PAMIR_CACHE": str(cache), "PAMIR_LEXICON_WORDS": "0"})
    return cache


def _options(ap) -> None:
    ap.add_argument("--per", type=int, default=2, help="pictures per height and tilt")
    ap.add_argument("--blank", type=int, default=20, help="backdrops with nothing painted")
    ap.add_argument("--corel", type=int, default=100, help="Corel pictures at their size")
    ap.add_argument("--stem", default=STEM, help="results/STEM.json and .md")
    ap.add_argument("--search", type=int, default=0, metavar="N",
                    help="also index the painted pictures among N Corel pictures with `pamir "
                         "index` and search each word (0: not)")


def main(argv=None):
    args = report_cli(__doc__, STEM, report, argv, options=_options)
    if args is None:  # --report-only
        return
    run = Run("bench_text_sizes.py", argv)
    try:
        corel = sorted(Path(find_corel5k(), "images").glob("*/*.jpeg"))
    except DataError as e:
        sys.exit(f"bench_text_sizes needs Corel 5k's pictures as backdrops: {e}")
    with tempfile.TemporaryDirectory() as tmp:
        pictures = painted(Path(tmp), corel, args.per)
        rng = np.random.default_rng(1)
        blank = []
        for i in range(args.blank):
            blank.append(str(Path(tmp, f"blank-{i:03d}.jpg")))
            backdrop(rng, corel).save(blank[-1], quality=90)
        small = [str(p) for p in corel[::max(1, len(corel) // max(1, args.corel))][:args.corel]]
        rows = {name: measure(s, pictures, blank, small) for name, s in SETTINGS.items()}
        search = search_part(pictures, corel, args.search, Path(tmp)) if args.search else None
    r = {**run.info(), "minutes": run.minutes(), "commit": checkout_commit(),
         "pictures": [{k: v for k, v in p.items() if k != "path"} for p in pictures],
         "rows": rows, "search": search}
    save_report(args.stem, r, report)


# ------------------------------------------------------------------------------ the report
def report(r: dict) -> str:
    pics, rows = r["pictures"], r["rows"]
    ref = next(iter(rows))
    lines = report_head("Text of every size and angle (issue 45)", r)
    lines += [f"Code: commit {r['commit']}."] if r.get("commit") else []
    lines += ["", f"{len(pics)} pictures (1024 x 683), one word each; words read by setting, "
              "by the word's height (share of the picture's height) and tilt.", "",
              "| setting | words read | of the reference's reads | ms/picture with a word | "
              "ms/picture, nothing painted | ms/picture Corel 192 x 128 | pictures given text: "
              "backdrops; Corel |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, row in rows.items():
        both = sum(a and b for a, b in zip(row["read"], rows[ref]["read"]))
        lines.append(f"| {name} | {sum(row['read'])}/{len(pics)} | {both}/"
                     f"{sum(rows[ref]['read'])} | {row['painted_ms']} | {row['blank_ms']} | "
                     f"{row['corel_ms']} | {row['blank_with_text']}; {row['corel_with_text']} |")
    lines += ["", "| setting | " + " | ".join(f"{h:.0%}" for h in HEIGHTS) + " | "
              + " | ".join(f"{t:+d}°" for t in TILTS) + " |",
              "|---|" + "---:|" * (len(HEIGHTS) + len(TILTS))]
    for name, row in rows.items():
        cells = [_cell(pics, row, "height", h) for h in HEIGHTS]
        cells += [_cell(pics, row, "tilt", t) for t in TILTS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines + box_lines(rows) + search_lines(r)) + "\n"


#: The rows whose lines' boxes are compared: the int8 detector's against the fp32 one's.
BOXES_COMPARED = ("pamir now (detection in int8)", "pamir, detection in fp32 (before int8)")


def box_lines(rows: dict) -> list[str]:
    """How many of the fp32 detector's lines the int8 one finds at the same place (the
    intersection over union of their boxes at least 0.5), and how closely."""
    new, old = (rows.get(name) for name in BOXES_COMPARED)
    if not new or not old or "boxes" not in new or "boxes" not in old:
        return []
    ious = [max((_iou(a, b) for b in mine), default=0.0)
            for theirs, mine in zip(old["boxes"], new["boxes"]) for a in theirs]
    matched = [v for v in ious if v >= 0.5]
    extra = sum(max(0, len(m) - len(t)) for t, m in zip(old["boxes"], new["boxes"]))
    return ["", f"Lines found on the painted pictures, int8 detection against fp32: "
            f"{len(matched)} of fp32's {len(ious)} lines found at the same place (boxes' "
            f"intersection over union >= 0.5; mean {np.mean(matched) if matched else 0:.3f}), "
            f"{extra} more lines on the pictures where int8 finds more."]


def _iou(a, b) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
    return w * h / union if union > 0 else 0.0


def search_lines(r: dict) -> list[str]:
    s = r.get("search")
    if not s:
        return []
    pics, t = r["pictures"], s["index_s"]
    missed = [f"{p['word']} ({p['height']:.0%}, {p['tilt']:+d}°)"
              for p, ok in zip(pics, s["top3"]) if not ok]
    return ["", "## `pamir search WORD`, and the index's time", "",
            f"The {len(pics)} pictures among {s['distractors']} Corel pictures, indexed by "
            "`pamir index FOLDER --no-faces` (no model): **"
            f"{sum(s['top3'])} of {len(pics)} words ({sum(s['top3']) / len(pics):.2f}) have "
            "their picture in the top 3** of `pamir search WORD -k 3`"
            + (f"; missed: {', '.join(missed)}." if missed else "."),
            "", f"`pamir index` of that folder: {t['without text']} s without text "
            f"(--no-text), {t['with text']} s with ({t['with text'] / t['without text']:.2f}x)"
            + ("." if s.get("separate_caches") else ": not comparable, the second run found "
               "the first's CNN features in the cache they shared (fixed since).")
            + (" Each run from a copy of a cache holding the one-time ONNX graphs (the CNN's "
               "export and int8 graph, the text detector's int8 graph)." if s.get("warm_graphs")
               else "")]


def _cell(pics, row, key, value) -> str:
    hits = [ok for p, ok in zip(pics, row["read"]) if p[key] == value]
    return f"{sum(hits)}/{len(hits)}" if hits else "-"


if __name__ == "__main__":
    main()
