"""Corel 5k's index time with and without text and faces, side by side in one run (issue 45).

    flock /tmp/pamir-heavy.lock python benchmarks/bench_corel_passes.py [--every 1]
        [--rounds 1] [--reverse --stem corel_passes_reversed]

Each variant is the whole command a person runs on a bare folder (no model: ImageNet's
words), `pamir index FOLDER --index DIR --json`, timed from start to exit, in a fresh process
of this checkout:

- bare: `--no-text --no-faces` (the pictures' looks, metadata, places and copies);
- text with fp32 detection (before): `--no-faces` with PAMIR_OCR_PRECISION=fp32 (the text
  pass as it was before its detection network ran in int8: the old path beside the new);
- text: `--no-faces` (the text pass on top);
- text + faces: every pass (pamir index's default).

FOLDER is Corel 5k's images/ (all 5,000 pictures, 192 x 128), or with --every K a folder of
every K-th of them (sorted by path), copied. Every run starts from an empty index and from a
copy of a one-time cache (the CNN's ONNX export, the word lexicon, ImageNet's class
embeddings: what a machine builds once, left by indexing two generated pictures first), so
no picture's features are cached: each variant computes them afresh. With --rounds R the
three variants run R times, every other round in reverse order, so that a drift in the
shared machine's load does not fall on one variant; seconds is then the median.

Measured per variant: seconds, pictures_per_s, ratio_to_bare (seconds over the bare
variant's), peak_mb (wait4's ru_maxrss: the largest process of the tree), peak_tree_mb (the
tree's resident memory summed, sampled every 0.2 s: the passes run in worker processes), the
index's own per-pass seconds, and the pictures given text facts and faces. Issue 33 set the
text pass's bound: the index within 1.5x of its time without text.

Writes benchmarks/results/corel_passes.json and .md (--report-only rewrites the .md).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common.harness import (Run, checkout_commit, corel5k_folder, report_cli,
                            report_head, save_report)
from common.latency import run_watched, warm_up_pictures

STEM = "corel_passes"
PAMIR = "import sys; sys.argv[0] = 'pamir'; from pamir.cli import main; main()"
#: variant: the flags of `pamir index` it runs with
VARIANTS = {"bare": ["--no-text", "--no-faces"],
            "text with fp32 detection (before)": ["--no-faces"],
            "text": ["--no-faces"], "text + faces": []}
#: variant: its environment beyond the others' (the text pass's detection network in fp32,
#: as before int8 detection: the old path beside the new one)
VARIANT_ENV = {"text with fp32 detection (before)": {"PAMIR_OCR_PRECISION": "fp32"}}
TEXT_BOUND = 1.5  # issue 33: the index within 1.5x of its time without text


def _options(ap) -> None:
    ap.add_argument("--every", type=int, default=1, metavar="K",
                    help="index every K-th Corel picture (1: all 5,000, Corel's own folder)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="times each variant runs, every other round in reverse order")
    ap.add_argument("--reverse", action="store_true",
                    help="the first round in reverse order (text + faces first)")
    ap.add_argument("--stem", default=STEM, help="results/STEM.json and .md")
    ap.add_argument("--work", type=Path, default=None,
                    help="where the caches and indexes go (default: a temporary folder)")


def picture_folder(every: int, work: Path) -> tuple[Path, int]:
    """Corel 5k's images/ itself (every=1), or a folder of every `every`-th picture."""
    images = corel5k_folder() / "images"
    paths = sorted(images.glob("*/*.jpeg"))
    if not paths:
        sys.exit(f"bench_corel_passes needs Corel 5k's pictures: none in {images} "
                 "(point PAMIR_COREL5K at the folder that holds images/)")
    if every == 1:
        return images, len(paths)
    folder = work / f"every{every}"
    for p in paths[::every]:
        (folder / p.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(p, folder / p.parent.name / p.name)
    return folder, len(paths[::every])


def env(cache: Path, variant: str | None = None) -> dict:
    out = {k: v for k, v in os.environ.items() if k != "PAMIR_INDEX"}
    out.update(PYTHONPATH=str(Path(__file__).resolve().parent.parent), PAMIR_CACHE=str(cache),
               PAMIR_OCR_PRECISION="int8")  # pamir's default, whatever this shell says
    out.update(VARIANT_ENV.get(variant, {}))
    return out


def warm_cache(work: Path, log: Path) -> Path:
    """The one-time cache, filled by indexing two generated pictures (not Corel's)."""
    folder, template = warm_up_pictures(work / "warmup"), work / "cache-template"
    with open(log, "a") as out:
        subprocess.run([sys.executable, "-c", PAMIR, "index", str(folder), "--index",
                        str(work / "warmup-index")], env=env(template), cwd=work,
                       stdout=out, stderr=subprocess.STDOUT, check=True)
    return template


def index_run(folder: Path, variant: str, template: Path, run: Path, log: Path) -> dict:
    """`pamir index FOLDER --json FLAGS` from an empty index and a copy of the one-time
    cache, timed as a whole."""
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(template, run / "cache")
    flags = VARIANTS[variant]
    cmd = [sys.executable, "-c", PAMIR, "index", str(folder), "--index", str(run / "index"),
           "--json", *flags]
    report = run / "report.json"
    seconds, peak_mb, tree_mb, code = run_watched(
        cmd, cwd=run, env=env(run / "cache", variant), stdout=report, log=log,
        header=f"pamir index {folder} {' '.join(flags)}")
    if code:
        raise RuntimeError(f"pamir index {' '.join(flags)} failed (see {log})")
    out = json.loads(report.read_text())
    shutil.rmtree(run / "cache", ignore_errors=True)  # 5,000 pictures' features: disk
    passes = {k: v for k, v in out.items() if isinstance(v, dict) and "seconds" in v}
    text, faces = out.get("text") or {}, out.get("faces") or {}  # None: the pass was off
    return {"seconds": round(seconds, 1), "added": out.get("added", 0),
            "failed": len(out.get("failed", [])),
            "passes_s": {k: v["seconds"] for k, v in passes.items()},
            "with_text": text.get("with_facts"), "with_faces": faces.get("with_facts"),
            "faces": (faces.get("people") or {}).get("faces"),
            "peak_mb": peak_mb, "peak_tree_mb": tree_mb}


def summary(runs: list[dict], pictures: int) -> dict:
    seconds = statistics.median(r["seconds"] for r in runs)
    last = runs[-1]
    return {"seconds": round(seconds, 1), "pictures_per_s": round(pictures / seconds, 1),
            "peak_mb": max(r["peak_mb"] for r in runs),
            "peak_tree_mb": max(r["peak_tree_mb"] for r in runs),
            "passes_s": last["passes_s"], "with_text": last["with_text"],
            "with_faces": last["with_faces"], "faces": last["faces"],
            "added": last["added"], "failed": last["failed"],
            "runs_s": [r["seconds"] for r in runs]}


def main(argv=None) -> None:
    args = report_cli(__doc__, STEM, report, argv, options=_options)
    if args is None:  # --report-only
        return
    run = Run("bench_corel_passes.py", argv)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        work = Path(tmp)
        log = work / "log.txt"
        folder, pictures = picture_folder(args.every, work)
        template = warm_cache(work, log)
        runs: dict[str, list[dict]] = {name: [] for name in VARIANTS}
        order: list[str] = []
        for k in range(args.rounds):
            names = list(VARIANTS) if (k + args.reverse) % 2 == 0 else list(reversed(VARIANTS))
            for name in names:
                print(f"{time.strftime('%H:%M:%S')} round {k + 1}: {name}", flush=True)
                runs[name].append(index_run(folder, name, template,
                                            work / "runs" / name.replace(" ", ""), log))
                print(f"  {runs[name][-1]}", flush=True)
                order.append(name)
    variants = {name: summary(rs, pictures) for name, rs in runs.items()}
    for v in variants.values():
        v["ratio_to_bare"] = round(v["seconds"] / variants["bare"]["seconds"], 2)
    r = {**run.info(), "minutes": run.minutes(), "commit": checkout_commit(),
         "pictures": pictures, "every": args.every, "rounds": args.rounds, "order": order,
         "flags": VARIANTS, "env": VARIANT_ENV, "variants": variants}
    save_report(args.stem, r, report)


# ------------------------------------------------------------------------------ the report
def report(r: dict) -> str:
    v = r["variants"]
    which = ("all of Corel 5k's pictures (its images/ folder)" if r["every"] == 1 else
             f"every {r['every']}th of Corel 5k's pictures (sorted by path; copied)")
    lines = report_head("Corel 5k's index time with and without text and faces (issue 45)", r)
    lines += [f"Code: commit {r['commit']}." if r.get("commit") else "", "",
              f"`pamir index FOLDER --index DIR --json` (no model) on {r['pictures']:,} "
              f"pictures, {which}, 192 x 128 or 128 x 192; each run from an empty index and "
              "a cold feature cache (the one-time ONNX export and lexicon warm), timed as a "
              f"whole; {r['rounds']} round(s), in the order {', '.join(r['order'])}.", "",
              "| variant | flags | seconds | pictures/s | ratio to bare | peak MB (largest "
              "process / tree) | text pass s | faces pass s | pictures given text | "
              "pictures given faces (faces) |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, x in v.items():
        flags = " ".join([*(f"{k}={v}" for k, v in r.get("env", {}).get(name, {}).items()),
                          *r["flags"][name]]) or "(none: every pass)"
        p = x["passes_s"]
        faces = "-" if x["with_faces"] is None else f"{x['with_faces']} ({x['faces']})"
        lines.append(
            f"| {name} | `{flags}` | {x['seconds']} | {x['pictures_per_s']} | "
            f"{x['ratio_to_bare']:.2f}x | {x['peak_mb']:,} / {x['peak_tree_mb']:,} | "
            f"{p.get('text', '-')} | {p.get('faces', '-')} | "
            f"{'-' if x['with_text'] is None else x['with_text']} | {faces} |")
    text = v["text"]["ratio_to_bare"]
    lines += ["", "A pass's seconds are its own, from its start to its end, in the index's report: "
              "the passes run beside the pictures' features and each other, so they overlap and "
              "do not add up to the whole."]
    verdict = "within it." if text <= TEXT_BOUND else "over it."
    lines += ["", f"Issue 33's bound on the text pass (the index within {TEXT_BOUND}x of its "
              f"time without text): **{text:.2f}x**, {verdict} Text and faces together: "
              f"{v['text + faces']['ratio_to_bare']:.2f}x."]
    old = next((x for name, x in v.items() if name in VARIANT_ENV), None)
    if old is not None:
        lines[-1] += (f" The text pass with its detection network in fp32, as before: "
                      f"{old['ratio_to_bare']:.2f}x.")
    if r["rounds"] > 1:
        each = "; ".join(f"{name} {', '.join(map(str, x['runs_s']))}" for name, x in v.items())
        lines += ["", f"Seconds of each run: {each}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
