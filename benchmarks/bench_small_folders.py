"""A person's folder (issue 35): `pamir fit FOLDER` on Corel copies with their keywords in
the files, from an empty feature cache and then warm, before and after, side by side.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_small_folders.py \
        [--sizes 300:100 1500:500] [--before COMMIT]

Each folder (under /tmp, never in the repository) holds N captioned Corel 5k pictures (a
seeded sample of its development set) whose keywords exiftool writes into the files, in
turn each of the ways issue 23's benchmark writes them (bench_metadata.exiftool_args), and
M uncaptioned ones (test pictures, no keyword). Each path runs from a `git archive` of its
commit in a fresh process: `pamir fit FOLDER -o MODEL` with an empty feature cache (cold),
then again on the cache that filled (warm). Wall seconds, peak resident memory of the fit
process (ru_maxrss of the child), the choice, its validation AvgP and the update budget
recorded in model.json.

Writes results/small_folders.json and .md (--stem: another name).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path


from common.folders import build_small_folder
from common.harness import (HEAVY, archive, load_average, machine, parser,
                            report_head, save_report)
from common.latency import pamir_logged as run_pamir

from pamir.data import find_corel5k

ROOT = Path(__file__).resolve().parent.parent




def fit(src: Path, folder: Path, cache: Path, model: Path) -> dict:
    """`pamir fit FOLDER -o MODEL` from source tree src: seconds, peak RSS, the record."""
    peak = []  # the fit process's own ru_maxrss (wait4): not the largest child's so far
    seconds = run_pamir(src, cache, ["fit", str(folder), "-o", str(model), "--quiet"],
                        model.with_suffix(".log"), peak)
    info = json.loads((model / "model.json").read_text())["info"]
    return {"seconds": round(seconds, 1), "peak_rss_mb": peak[0],
            "representation": info["representation"], "c": info["params"].get("c"),
            "n_updates": info["params"].get("n_updates"), "valid_avgp": info["valid_avgp"],
            "pictures": info["pictures"], "timing": info.get("timing"),
            "updates": info.get("updates"), "skipped": info.get("skipped")}


def report(r: dict) -> str:
    lines = report_head("A person's folder: `pamir fit FOLDER`, before and after (issue 35)",
                        r, heavy=False) + [
             f"Before `{r['before'][:10]}`, after `{r['after'][:10]}`, each from a `git "
             "archive` in a fresh process.\n",
             "| folder | path | cold | warm | peak RSS (cold) | chosen | updates | valid AvgP |",
             "|---|---|---:|---:|---:|---|---:|---:|"]
    for f in r["folders"]:
        for name in ("before", "after"):
            if name not in f:
                continue
            c, w = f[name]["cold"], f[name]["warm"]
            lines.append(f"| {f['captioned']:,} + {f['uncaptioned']:,} | {name} | "
                         f"{c['seconds']:.0f} s | {w['seconds']:.0f} s | "
                         f"{c['peak_rss_mb'] or '-'} MB | {c['representation']} c={c['c']} | "
                         f"{c['n_updates']:,} | {c['valid_avgp']:.2f} |")
    if r.get("note"):
        lines.append(f"\n{r['note']}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--sizes", nargs="+", default=["300:100", "1500:500"],
                    help="CAPTIONED:UNCAPTIONED pictures per folder")
    ap.add_argument("--before", default=None, help="also time this commit (side by side)")
    ap.add_argument("--before-upto", type=int, default=None,
                    help="time BEFORE only on folders of at most this many captioned pictures")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--stem", default="small_folders", help="results/STEM.json and .md")
    args = ap.parse_args(argv)
    corel = find_corel5k()
    work = args.work or Path(tempfile.mkdtemp(prefix="pamir-small-folders-"))
    r = {"command": f"{HEAVY} python benchmarks/bench_small_folders.py "
                    + " ".join(argv or sys.argv[1:]),
         "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
         "load_average": load_average(), "folders": [],
         "after": archive("HEAD", work / "after-src")}
    paths = [("after", work / "after-src")]
    if args.before:
        r["before"] = archive(args.before, work / "before-src")
        paths.insert(0, ("before", work / "before-src"))
    else:
        r["before"] = ""
    for size in args.sizes:
        captioned, uncaptioned = map(int, size.split(":"))
        folder = work / f"folder-{captioned}"
        f = build_small_folder(folder, captioned, uncaptioned, corel)
        for name, src in paths:
            if name == "before" and args.before_upto and captioned > args.before_upto:
                continue
            cache = work / f"cache-{name}-{captioned}"
            f[name] = {"cold": fit(src, folder, cache, work / f"model-{name}-{captioned}-cold"),
                       "warm": fit(src, folder, cache, work / f"model-{name}-{captioned}-warm")}
            print(name, size, f[name]["cold"]["seconds"], f[name]["warm"]["seconds"],
                  flush=True)
        r["folders"].append(f)
    save_report(args.stem, r, report)


if __name__ == "__main__":
    main()
