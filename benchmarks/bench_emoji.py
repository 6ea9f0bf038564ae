"""Category words outside a fitted model's captions (issue 37): emoji pictures, P@10.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_emoji.py [--report-only]
    flock /tmp/pamir-heavy.lock python benchmarks/bench_emoji.py --zero-old main  # issue 54

(one lock around the whole run: a `flock` around each fit and index inside it would wait on
the run's own lock). Each step keeps its result under /tmp/emoji and is not repeated by a
second run (delete /tmp/emoji to start afresh).

A collection of our own, never committed: Noto Color Emoji (Debian fonts-noto-color-emoji)
rendered to pictures under /tmp/emoji/pictures, one folder per category (bird, mammal,
insect, ...: the subgroups of Unicode's emoji-test.txt, Debian unicode-data, less the emoji
that are not of the category or whose name says its word), VARIANTS pictures per emoji with
another background colour, size, position and a little rotation. Each picture's one-line
description is its emoji's name ("lady beetle", "tropical fish"); the category words (bird,
insect, fruit, vehicle, ...) are words those names do not use, except `fish` (a control: it is
in the captions' vocabulary). CAPTIONED of each emoji's pictures carry their description in a
captions table (a `caption` column), the rest are uncaptioned.

For each category word, P@10 (and AvgP over the whole collection) of the pictures of its
folder, through the command line as a person runs it:
  a) `pamir index FOLDER` with no model (the zero-caption path), `pamir search WORD -k N --json`;
  b) `pamir fit captions.tsv`, then `pamir index MODEL FOLDER` and the same searches;
  c) as b), the fit run with pamir.config.PRIOR = False (the model alone, as before issue 37).
Each search's `mapping` (how the word was understood) is kept, and for a word whose fitted
P@10 is under the unfitted one by more than NOISE, the model's `pamir annotate` of a few of
its pictures.

Writes benchmarks/results/emoji.json and emoji.md; PAMIR_CACHE=/tmp/emoji-cache.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from common.harness import Run, archive, report_cli, report_head, save_report

FONT = Path("/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf")  # fonts-noto-color-emoji
EMOJI_TEST = Path("/usr/share/unicode/emoji/emoji-test.txt")     # unicode-data
WORK = Path("/tmp/emoji")
PICTURES = WORK / "pictures"
CACHE = Path("/tmp/emoji-cache")
#: Noto Color Emoji's bitmaps are drawn at this size only (CBDT strikes: 109 px -> 136 x 128).
FONT_SIZE = 109
SIDE = 256          # the pictures' side, pixels
VARIANTS = 4        # pictures per emoji
CAPTIONED = 2       # of them captioned: half, and 2 so that each name can enter the
                    # vocabulary (a word needs 2 training pictures, docs/usage.md)
SEED = 37
#: At most this many emoji per category (seeded draw): the large subgroups (mammals,
#: vehicles) would otherwise fill the collection.
MOST = 16
#: P@10 moves in steps of one picture of ten: a difference of one picture is within noise.
NOISE = 0.1


def below(p10: float, unfitted: float) -> bool:
    """Whether a P@10 is under the unfitted one by more than NOISE (in whole pictures: 0.4 -
    0.3 is one picture, not a float a hair over 0.1)."""
    return round(10 * (unfitted - p10)) > round(10 * NOISE)
#: How many pictures each search ranks (the AvgP is over the whole collection).
EVERY = 1000

#: folder: (query word, emoji-test subgroups, names kept (None: all), names left out).
#: Left out: names using the word, and emoji not of the category (spider, scorpion, dragon).
CATEGORIES = {
    "bird": ("bird", ["animal-bird"], None,
             {"bird", "black bird", "feather", "wing", "hatching chick"}),
    "mammal": ("mammal", ["animal-mammal"], None, {"paw prints"}),
    "insect": ("insect", ["animal-bug"],
               {"butterfly", "bug", "ant", "honeybee", "beetle", "lady beetle", "cricket",
                "cockroach", "mosquito", "fly"}, set()),
    "reptile": ("reptile", ["animal-reptile"], None, {"dragon", "dragon face"}),
    "fish": ("fish", ["animal-marine"], {"fish", "tropical fish", "blowfish", "shark"}, set()),
    "flower": ("flower", ["plant-flower"], None,
               {"white flower", "wilted flower", "rosette"}),
    "fruit": ("fruit", ["food-fruit"], None, {"kiwi fruit", "tomato", "olive"}),
    "vegetable": ("vegetable", ["food-vegetable"], None,
                  {"avocado", "peanuts", "beans", "chestnut"}),
    "vehicle": ("vehicle", ["transport-ground", "transport-water", "transport-air"],
                {"locomotive", "railway car", "high-speed train", "bullet train", "tram",
                 "bus", "trolleybus", "minibus", "ambulance", "fire engine", "police car",
                 "taxi", "automobile", "pickup truck", "delivery truck", "articulated lorry",
                 "tractor", "racing car", "motorcycle", "motor scooter", "bicycle",
                 "sailboat", "canoe", "speedboat", "passenger ship", "ferry", "motor boat",
                 "ship", "airplane", "small airplane", "helicopter", "rocket"}, set()),
    "instrument": ("instrument", ["musical-instrument"], None, set()),
    # pictures no word asks for: tools, household things, sport
    "other": (None, ["tool", "household", "sport"], None, set()),
}
#: Words the captions use: in the fitted model's vocabulary.
CONTROL = {"fish"}
#: Broader words, over several folders or named otherwise; none in the descriptions. animal,
#: food and transport are in WordNet's ImageNet table; music is not, and goes through the
#: embedding bridge, where a fitted model's own words (guitar, saxophone) compete with classes.
BROADER = {"animal": ("bird", "mammal", "insect", "reptile", "fish"),
           "food": ("fruit", "vegetable"), "music": ("instrument",), "transport": ("vehicle",)}
#: The runs compared, as the report names them.
COLUMNS = {"unfitted": "`pamir index FOLDER`, no model",
           "fitted_prior": "`pamir fit`, then `pamir index MODEL FOLDER` (prior on)",
           "fitted_no-prior": "the same, fitted with config.PRIOR = False"}


# ------------------------------------------------------------------------------ the pictures

def emoji_by_subgroup() -> dict[str, list[tuple[str, str]]]:
    """{subgroup: [(emoji, name)]}: the fully-qualified emoji of emoji-test.txt, without
    skin tones and other variants (names with a colon)."""
    if not EMOJI_TEST.is_file():
        raise SystemExit(f"{EMOJI_TEST} is missing: apt-get install unicode-data")
    out, subgroup = {}, None
    for line in EMOJI_TEST.read_text(encoding="utf-8").splitlines():
        if line.startswith("# subgroup:"):
            subgroup = line.split(":", 1)[1].strip()
        m = re.match(r"^[0-9A-F ]+;\s*fully-qualified\s*#\s*(\S+)\s+E\d+\.\d+\s+(.+)$", line)
        if m and ":" not in m.group(2):
            out.setdefault(subgroup, []).append((m.group(1), m.group(2).strip()))
    return out


def chosen_emoji() -> dict[str, list[tuple[str, str]]]:
    """{folder: [(emoji, name)]}, at most MOST each (a seeded draw)."""
    groups, rng = emoji_by_subgroup(), np.random.default_rng(SEED)
    out = {}
    for folder, (_, subgroups, keep, leave) in CATEGORIES.items():
        found = [(e, n) for s in subgroups for e, n in groups.get(s, [])
                 if (keep is None or n in keep) and n not in leave]
        if len(found) > MOST:
            found = [found[i] for i in sorted(rng.choice(len(found), MOST, replace=False))]
        out[folder] = found
    return out


def render(font, emoji: str, rng) -> "Image.Image":
    """One picture of an emoji: a background colour, a size, a position, a small rotation."""
    from PIL import Image, ImageDraw  # noqa: PLC0415

    glyph = Image.new("RGBA", (160, 160), (0, 0, 0, 0))
    ImageDraw.Draw(glyph).text((0, 0), emoji, font=font, embedded_color=True)
    glyph = glyph.crop(glyph.getbbox())
    scale = rng.uniform(0.45, 0.85) * SIDE / max(glyph.size)
    glyph = glyph.resize((max(1, round(glyph.width * scale)), max(1, round(glyph.height * scale))),
                         Image.LANCZOS)
    glyph = glyph.rotate(rng.uniform(-15, 15), resample=Image.BICUBIC, expand=True)
    back = tuple(int(v) for v in rng.integers(0, 256, 3))
    picture = Image.new("RGB", (SIDE, SIDE), back)
    x = int(rng.integers(0, max(1, SIDE - glyph.width)))
    y = int(rng.integers(0, max(1, SIDE - glyph.height)))
    picture.paste(glyph, (x, y), glyph)
    return picture


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def build() -> dict:
    """The pictures under PICTURES, the captions table of the captioned ones
    (captions.tsv: path, caption) and every picture's description (descriptions.tsv)."""
    from PIL import ImageFont  # noqa: PLC0415

    if not FONT.is_file():
        raise SystemExit(f"{FONT} is missing: apt-get install fonts-noto-color-emoji")
    font = ImageFont.truetype(str(FONT), FONT_SIZE)
    rng = np.random.default_rng(SEED)
    rows = []
    for folder, emoji in chosen_emoji().items():
        (PICTURES / folder).mkdir(parents=True, exist_ok=True)
        for e, name in emoji:
            captioned = set(rng.choice(VARIANTS, CAPTIONED, replace=False).tolist())
            for v in range(VARIANTS):
                path = f"{folder}/{slug(name)}-{v}.jpg"
                render(font, e, rng).save(PICTURES / path, quality=92)
                rows.append({"path": path, "caption": name, "captioned": v in captioned})
    for table, keep in (("captions.tsv", True), ("descriptions.tsv", False)):
        with open(PICTURES / table, "w", newline="") as f:
            w = csv.writer(f, delimiter="\t")
            w.writerow(["path", "caption"])
            w.writerows([r["path"], r["caption"]] for r in rows if r["captioned"] or not keep)
    words = {c[0] for c in CATEGORIES.values() if c[0]}
    uses = {w: sum(w in re.findall(r"[a-z]+", r["caption"].lower()) for r in rows)
            for w in sorted(words)}
    return {"pictures": len(rows), "captioned": sum(r["captioned"] for r in rows),
            "emoji": {f: [n for _, n in e] for f, e in chosen_emoji().items()},
            "descriptions_using_the_word": uses}


# ------------------------------------------------------------------------------ the CLI

def pamir(args: list[str], *, prior: bool = True) -> str:
    """`pamir ARGS` of this checkout, its stdout; with prior=False the process sets
    pamir.config.PRIOR = False first (the command line has no switch)."""
    code = ("import pamir.config as c; c.PRIOR = False; " if not prior else "") + \
        "from pamir.cli import main; main()"
    cmd = [sys.executable, "-c", code, *args]
    env = {**os.environ, "PAMIR_CACHE": str(CACHE),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    print(f"$ pamir {' '.join(args)}  ({time.perf_counter() - t0:.0f} s)", flush=True)
    if done.returncode:
        raise SystemExit(f"pamir {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def folder_of(path: str) -> str:
    return Path(path).resolve().relative_to(PICTURES.resolve()).parts[0]


def queries() -> dict[str, tuple[str, ...]]:
    """{word: the folders whose pictures it asks for}: each category's word, then BROADER."""
    return {c[0]: (f,) for f, c in CATEGORIES.items() if c[0]} | BROADER


def searches(index: Path, run=None) -> dict:
    """Per word: P@10 and AvgP of its folders' pictures, the top 10's folders and how the
    word was understood; run: the command line (`pamir` of this checkout)."""
    out, run = {}, run or pamir
    for word, folders in queries().items():
        text = run(["search", word, "-k", str(EVERY), "--json", "--index", str(index)])
        found = json.loads(next(x for x in reversed(text.splitlines()) if x.startswith("{")))
        hits = found.get("hits", found.get("results", []))
        right = np.array([folder_of(h["path"]) in folders for h in hits], dtype=float)
        n_rel = sum(1 for f in folders for _ in (PICTURES / f).glob("*.jpg"))
        precision = np.cumsum(right) / np.arange(1, len(right) + 1)
        out[word] = {"p10": round(float(right[:10].mean()), 2) if len(right) else 0.0,
                     "avgp": round(float((precision * right).sum() / n_rel), 3),
                     "top10": [f"{folder_of(h['path'])}/{Path(h['path']).stem}"
                               for h in hits[:10]],
                     "mapping": found.get("mapping")}
    return out


def step(name: str, work) -> dict:
    """work()'s result, kept in WORK/NAME.json: a second run reads it instead."""
    kept = WORK / f"{name}.json"
    if kept.is_file():
        return json.loads(kept.read_text())
    value = work()
    kept.write_text(json.dumps(value))
    return value


def index_and_search(name: str, model: Path | None) -> dict:
    index = WORK / f"index-{name}"

    def work():
        t0 = time.perf_counter()
        pamir(["index", *([str(model)] if model else []), str(PICTURES), "--index",
               str(index), "--rebuild", "--json"])
        return {"index_seconds": round(time.perf_counter() - t0, 1)}
    return {**step(f"index-{name}", work), "words": searches(index)}


def fit(name: str, prior: bool) -> tuple[Path, dict]:
    model = WORK / f"model-{name}"

    def work():
        t0 = time.perf_counter()
        out = pamir(["fit", str(PICTURES / "captions.tsv"), "-o", str(model)], prior=prior)
        head = json.loads((model / "model.json").read_text())
        info = head.get("info", {})
        return {"seconds": round(time.perf_counter() - t0, 1),
                "summary": [x for x in out.strip().splitlines() if x.strip()][-15:],
                "vocabulary": len(head.get("vocabulary", [])),
                "category_words_in_vocabulary": sorted(
                    {c[0] for c in CATEGORIES.values()} & set(head.get("vocabulary", []))),
                "representation": info.get("representation"),
                "prior": info.get("prior")}
    return model, step(f"fit-{name}", work)


def annotate(model: Path | None, pictures: list[Path]) -> dict:
    """{folder/picture: its 5 best words, as `pamir annotate [MODEL] PICTURES --json -k 5`}."""
    lines = pamir(["annotate", *([str(model)] if model else []), *map(str, pictures),
                   "--json", "-k", "5"])
    out = {}
    for x in lines.splitlines():
        if x.strip().startswith("{"):
            a = json.loads(x)
            out[f"{folder_of(a['path'])}/{Path(a['path']).stem}"] = [  # *: ImageNet's word
                f"{k['word']}{'*' if k.get('source') == 'imagenet' else ''} "
                f"{k.get('probability', k.get('score', 0)):.2f}" for k in a["keywords"]]
    return out


def measure() -> dict:
    run = Run("bench_emoji.py")
    r = {**run.info(), "collection": step("collection", build)}
    r["unfitted"] = index_and_search("zero", None)
    systems = {}
    for name, prior in (("prior", True), ("no-prior", False)):
        model, r[f"fit_{name}"] = fit(name, prior)
        r[f"fitted_{name}"] = index_and_search(name, model)
        systems[name] = model
    # the first picture of each folder, and of each word fitted worse than unfitted, 3 more
    worse = [w for w, zero in r["unfitted"]["words"].items()
             if below(r["fitted_prior"]["words"][w]["p10"], zero["p10"])]
    r["fitted_worse"] = worse
    pictures = [sorted((PICTURES / f).glob("*-0.jpg"))[0] for f in CATEGORIES]
    pictures += [p for w in worse for f in queries()[w]
                 for p in sorted((PICTURES / f).glob("*-0.jpg"))[1:4]]
    r["annotations"] = {"no model": annotate(None, pictures),
                        "fitted (prior on)": annotate(systems["prior"], pictures)}
    r["minutes"] = run.minutes()
    return r


# ------------------------------------------------------------------------------ the report

def report(r: dict) -> str:
    lines = report_head("Category words outside the captions: emoji pictures (issue 37)", r)
    c = r["collection"]
    cols = [k for k in COLUMNS if k in r]
    words = list(r["unfitted"]["words"])
    table = {k: r[k]["words"] for k in cols}
    lines += ["", f"{c['pictures']} pictures ({VARIANTS} per emoji, {len(c['emoji'])} folders), "
              f"{c['captioned']} captioned with their emoji's name through a `caption` column; "
              "descriptions using each category word: "
              + ", ".join(f"{w} {n}" for w, n in c["descriptions_using_the_word"].items()) + ".",
              "", "P@10 of the pictures of the word's folder (AvgP over the whole collection "
              "in brackets):", "",
              "| word | " + " | ".join(COLUMNS[k] for k in cols) + " |",
              "|---" * (len(cols) + 1) + "|"]
    for w in words:
        mark = (" (control: in the captions)" if w in CONTROL else
                f" (broader: {'+'.join(BROADER[w])})" if w in BROADER else "")
        lines.append(f"| {w}{mark} | " + " | ".join(
            f"{table[k][w]['p10']:.1f} ({table[k][w]['avgp']:.2f})" for k in cols) + " |")
    main = [w for w in words if w not in CONTROL and w not in BROADER]
    for label, ws in ((f"**mean** of the {len(main)} category words outside", main),
                      (f"mean of the {len(BROADER)} broader words", list(BROADER))):
        ws = [w for w in ws if w in words]
        if ws:
            lines.append(f"| {label} | " + " | ".join(
                f"**{np.mean([table[k][w]['p10'] for w in ws]):.2f}** "
                f"({np.mean([table[k][w]['avgp'] for w in ws]):.2f})" for k in cols) + " |")
    lines += ["", "Seconds: index " + ", ".join(
        f"{k} {r[k]['index_seconds']:.0f}" for k in cols if "index_seconds" in r[k])
        + "; fit " + ", ".join(f"{n} {r[f'fit_{n}']['seconds']:.0f}" for n in ("prior", "no-prior")
                              if f"fit_{n}" in r)
        + " (the fitted indexes read the network's outputs from the feature cache the first "
        "index filled; each step is kept under /tmp/emoji, a second run repeats only the "
        "searches and annotations)."]
    missing = [COLUMNS[k] for k in COLUMNS if k not in r]
    if missing:
        lines += ["", "Not measured (the run did not get to them): " + "; ".join(missing) + "."]
    for name in ("prior", "no-prior"):
        f = r.get(f"fit_{name}")
        if f:
            lines += ["", f"`pamir fit` ({name}): {f['seconds']:.0f} s, representation "
                      f"{f.get('representation')}, {f['vocabulary']} words; category words in "
                      f"the vocabulary: {', '.join(f['category_words_in_vocabulary']) or 'none'}"
                      + (f"; prior: global weight {f['prior'].get('global_weight')}, "
                         f"{f['prior'].get('words_reaching_classes')} words reaching classes"
                         if f.get("prior") else "; no prior") + "."]
    lines += findings(r, table, cols, main)
    for name, pics in r.get("annotations", {}).items():
        lines += ["", f"`pamir annotate` ({name}; * ImageNet's words, with their probability; "
                  "the model's words with their probability, or score where uncalibrated):", ""]
        lines += [f"- {p}: {', '.join(words)}" for p, words in pics.items()]
    lines += ["", "Each word's top 10 (folder/picture) and how it was understood (the "
              "search's `mapping`):", ""]
    for w in words:
        for k in cols:
            lines.append(f"- {w}, {COLUMNS[k]}: {', '.join(table[k][w]['top10'])}; "
                         f"`{json.dumps(table[k][w]['mapping'])[:400]}`")
    return "\n".join(lines) + "\n"


def findings(r: dict, table: dict, cols: list, main: list) -> list[str]:
    """What the figures show, read from them."""
    out = ["", "What it shows:", ""]
    if len(cols) > 1:
        same = [w for w in main if len({tuple(table[k][w]["top10"]) for k in cols}) == 1]
        worse = [w for w in main if any(below(table[k][w]["p10"], table["unfitted"][w]["p10"])
                                        for k in cols[1:])]
        out.append(f"- {len(same)} of the {len(main)} category words have the same top 10 in "
                   "every run: a word outside the vocabulary that WordNet's ImageNet table "
                   "knows reaches its classes, with or without a model, and the classes' "
                   "scores come from the same network. Fitted below unfitted by more than "
                   f"{NOISE:g} (one picture of ten): {', '.join(worse) or 'none'}.")
    p = (r.get("fit_prior") or {}).get("prior")
    if p:
        avgp = p.get("valid_single_word_avgp", {})
        out.append(f"- The prior's global weight is {p.get('global_weight')} over "
                   f"{p.get('validation_words')} validation words (on validation, single-word "
                   f"AvgP: model {avgp.get('model')}, mixed {avgp.get('mixed')}; its best "
                   f"weight {p.get('global_best_on_validation')}, settled toward "
                   "pamir.zeroshot.prior.DEFAULT_WEIGHT on so few validation pictures): each emoji has "
                   f"{CAPTIONED} captioned pictures, so a validation picture is another "
                   "rendering of an emoji the model was trained on, which the model alone "
                   "ranks near perfectly. Words outside the vocabulary reach the classes with "
                   "or without it.")
    sure = [f"{pic}: {w}" for pic, words in r.get("annotations", {}).get(
        "fitted (prior on)", {}).items() for w in words
        if not w.split()[0].endswith("*") and float(w.split()[-1]) >= 0.95
        and w.split()[0] not in pic.split("/")[1].split("-")]
    if sure:
        out.append(f"- The fitted model's calibrated probabilities (`pamir annotate`) are "
                   f"over-confident on this collection: {len(sure)} words not in the "
                   f"picture's name at 0.95 or more ({'; '.join(sure[:6])}), fitted on "
                   "validation's few queries, which the model ranks perfectly.")
    return out


# ------------------------------------------------------------------- no caption, old and new
# (--zero-old): drawn pictures with no caption, the old and new zero-caption look side by side
# (issue 54).
#
# Issue 54's clip-art figure (bird, fruit, insect, fish: P@10 0.82) comes from held-back
# pictures this repository does not have; the nearest it has is bench_emoji's collection
# (emoji drawn as pictures, `build`, kept under /tmp/emoji/pictures), searched as
# bench_emoji searches it: `pamir index FOLDER` with no model, then `pamir search WORD -k 1000
# --json` for each category word and each broader word, P@10 (and AvgP over the whole
# collection) of the pictures of the word's folders. The pictures carry no keyword in their
# files, so the new side's folder look is its neighbours alone (no word is transferred).
#
# Each side (OLD: a `git archive` of --zero-old; NEW: this tree) runs in fresh processes with the
# feature cache $PAMIR_CACHE (a warm one: the networks' outputs are shared; this measures
# quality, not time). `pamir index` runs with --no-text --no-faces: neither pass scores a word.
#
# Writes benchmarks/results/emoji_zero.json and .md (--zero-old COMMIT --report-only rewrites
# the .md).

#: The issue's clip-art words: its target (P@10 0.9 or more) is over these.
TARGET_WORDS = ("bird", "fruit", "insect", "fish")


def pamir_from(src: Path, args: list[str]) -> tuple[str, float]:
    """`pamir ARGS` from source tree src: stdout and wall seconds."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    code = "import sys; sys.argv[0] = 'pamir'; from pamir.cli import main; main()"
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=src, env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"pamir {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout, time.perf_counter() - t0


def zero_side(src: Path, index: Path) -> dict:
    """`pamir index PICTURES` with no model from source tree src, then the searches."""
    shutil.rmtree(index, ignore_errors=True)
    said, seconds = pamir_from(src, ["index", str(PICTURES), "--index", str(index),
                                     "--no-text", "--no-faces"])
    words = searches(index, lambda args: pamir_from(src, args)[0])
    return {"index_seconds": round(seconds, 1), "words": words,
            "said": [x.strip() for x in said.splitlines() if "folder's look" in x],
            "target_p10": round(float(np.mean([words[w]["p10"] for w in TARGET_WORDS])), 3)}


def measure_zero(args) -> dict:
    from pamir.features.cnn_int8 import processor  # noqa: PLC0415

    run = Run("bench_emoji.py", args.argv)
    if not PICTURES.is_dir():
        build()
    work = args.work
    shutil.rmtree(work / "old-src", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    r = {**run.info(), "processor": processor(), "cache": os.environ.get("PAMIR_CACHE"),
         "old": archive(args.zero_old, work / "old-src"), "target_words": list(TARGET_WORDS),
         "pictures": sum(1 for _ in PICTURES.glob("*/*.jpg")), "sides": {}}
    for name, src in (("old", work / "old-src"), ("new", Path(__file__).resolve().parents[1])):
        r["sides"][name] = zero_side(src, work / f"index-{name}")
        print(name, r["sides"][name]["target_p10"], flush=True)
    r["minutes"] = run.minutes()
    return r


def report_zero(r: dict) -> str:
    lines = report_head("Drawn pictures with no caption: the zero-caption look, old and new "
                        "(issue 54)", r)
    p = r["processor"]
    old, new = r["sides"]["old"], r["sides"]["new"]
    lines += [f"Processor flags: {', '.join(p['flags'])} (VNNI {p['vnni']}); feature cache "
              f"{r['cache']}.", "",
              f"{r['pictures']} emoji pictures (bench_emoji's collection), no keyword in any "
              "file; `pamir index FOLDER --no-text --no-faces` with no model, then `pamir "
              "search WORD`. P@10 of the word's folders' pictures (AvgP over the whole "
              "collection in brackets). Old: main "
              f"`{r['old'][:10]}`; new: this tree.", "",
              "| word | old | new |", "|---|---|---|"]
    for w in old["words"]:
        mark = " (issue 54's clip-art word)" if w in r["target_words"] else ""
        a, b = old["words"][w], new["words"][w]
        lines.append(f"| {w}{mark} | {a['p10']} ({a['avgp']}) | {b['p10']} ({b['avgp']}) |")
    lines += [f"| **mean of {', '.join(r['target_words'])}** | **{old['target_p10']}** | "
              f"**{new['target_p10']}** |", "",
              f"`pamir index` seconds (warm feature cache): old {old['index_seconds']}, new "
              f"{new['index_seconds']}.", ""]
    lines += [f"    {x}" for x in new["said"]]
    lines += ["", "Top 10 of the clip-art words (folder/picture):", ""]
    for w in r["target_words"]:
        for name in ("old", "new"):
            lines.append(f"- {w}, {name}: {', '.join(r['sides'][name]['words'][w]['top10'])}")
    lines += ["", f"Whole run: {r['minutes']} min.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    def options(ap):
        ap.add_argument("--zero-old", metavar="COMMIT", help="only `pamir index FOLDER` with "
                        "no model, COMMIT's tree and this one side by side (emoji_zero.*)")
        ap.add_argument("--work", type=Path, default=Path("/tmp/pamir-emoji-zero"))

    zero = "--zero-old" in (sys.argv[1:] if argv is None else argv)
    args = report_cli(__doc__, "emoji_zero" if zero else "emoji",
                      report_zero if zero else report, argv, None, options)
    if args is None:
        return
    if args.zero_old:
        args.argv = sys.argv[1:] if argv is None else list(argv)
        save_report("emoji_zero", measure_zero(args), report_zero)
        return
    save_report("emoji", measure(), report)


if __name__ == "__main__":
    main()
