"""Keywords read from the pictures' files: `pamir fit FOLDER` (no table) against `pamir fit
TABLE` on the same pictures and words, and what reading the metadata adds to `pamir index`.

The folder (under /tmp, never in the repository): a copy of Corel 5k's 5,000 JPEGs, flat;
each of the 4,500 development pictures has its keywords written by exiftool (one process,
an argument file) one of seven ways, in turn: IPTC Keywords, XMP dc:subject,
lr:hierarchicalSubject, digiKam TagsList, XPKeywords, a NAME.EXT.xmp sidecar, a NAME.xmp
sidecar; the test pictures are untagged. The table lists the same pictures in the same order
with the same words (test pictures with an empty caption), so that both fits see one
collection.

Both fits use one fixed, cheap setting (visterms with a 256-word codebook, PAMIR's default
parameters, no grid: `--no-grid`), since a full fit with every representation takes 10-30
minutes of both cores. Features are cached by picture content: the second fit reuses the
first's.

Index: `pamir index MODEL FOLDER --rebuild` with this checkout (metadata read) and with the
commit before it (`--old`, a `git archive` of it under /tmp), alternated: five rounds each
on the warm feature cache the fits left (the worst case: what remains is hashing, scoring,
the catalogue and, new, the metadata read), three each with an empty feature cache (a first
index of the folder). Wall and CPU seconds (the machine is shared: CPU time is steadier). Also the metadata read alone, per picture, and exiftool's
(the alternative reader) over the same folder.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_metadata.py [--old COMMIT]
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from common.folders import (METADATA_WORK as WORK, build_tagged_folder,
                            run_pamir as pamir)
from common.harness import Run, archive, parser, report_head, save_report

from pamir.data import find_corel5k

REPO = Path(__file__).resolve().parents[1]
STEM = "metadata"
FIT = ["-r", "visterms", "--visterms", "256", "--no-grid", "-q"]










def fit(data: Path, out: Path) -> dict:
    seconds, output = pamir(["fit", data, "-o", out, *FIT])
    info = json.loads((out / "model.json").read_text())["info"]
    vocabulary = json.loads((out / "model.json").read_text()).get("vocabulary")
    if vocabulary is None:
        from pamir.system import System

        vocabulary = list(System.load(out).vocabulary)
    return {"seconds": round(seconds, 1), "vocabulary": vocabulary,
            "params": info["params"], "valid_avgp": info["valid_avgp"],
            "pictures": info["pictures"], "representation": info["representation"],
            "sources_line": next((ln for ln in output.splitlines() if "captioned" in ln), "")}


def old_checkout(commit: str) -> Path:
    target = Path(f"/tmp/pamir-old-{commit[:10]}")
    if not target.exists():
        archive(commit, target)
    return target


def index_rounds(model: Path, old: Path, rounds: int, cold: bool) -> dict:
    """Old and new `pamir index --rebuild` alternated; cold: each run with an empty feature
    cache (a first index of the folder), else the warm cache the fits left."""
    times, cpu = {"old": [], "new": []}, {"old": [], "new": []}
    pamir(["index", model, WORK / "pictures", "--index", WORK / "ix-warm", "--rebuild"])
    for k in range(rounds):
        for name, code in (("old", old), ("new", REPO)):
            cache = WORK / f"cold-cache-{name}-{k}" if cold else None
            s, _ = pamir(["index", model, WORK / "pictures", "--index", WORK / f"ix-{name}",
                          "--rebuild"], code, cache, cpu[name])
            times[name].append(round(s, 2))
            if cache:
                shutil.rmtree(cache, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    return {"seconds": times, "median": med, "cpu_seconds": cpu, "cpu_median": cpu_med,
            "added_percent": round(100 * (med["new"] - med["old"]) / med["old"], 1),
            "cpu_added_percent": round(100 * (cpu_med["new"] - cpu_med["old"])
                                       / cpu_med["old"], 1)}


def read_alone() -> dict:
    """The metadata read by itself, in this process, and exiftool's over the folder."""
    from pamir.facts.metadata import read_metadata

    paths = sorted((WORK / "pictures").glob("*.jpeg"))
    started = time.perf_counter()
    captioned = sum(read_metadata(p).caption is not None for p in paths)
    ours = time.perf_counter() - started
    started = time.perf_counter()
    subprocess.run(["exiftool", "-q", "-q", "-j", "-IPTC:Keywords", "-XMP:Subject",
                    "-XMP:HierarchicalSubject", "-XMP:TagsList", "-XPKeywords",
                    "-DateTimeOriginal", "-ext", "jpeg", str(WORK / "pictures")],
                   capture_output=True, check=True)
    exiftool = time.perf_counter() - started
    return {"pictures": len(paths), "captioned": captioned,
            "pillow_ms_per_picture": round(1000 * ours / len(paths), 3),
            "exiftool_ms_per_picture": round(1000 * exiftool / len(paths), 3)}


def index_table(ix: dict, old_commit: str, what: str) -> list[str]:
    n = len(ix["seconds"]["new"])
    return [f"## pamir index MODEL FOLDER --rebuild, {what}; {n} rounds alternated", "",
            "| code | seconds (wall) | median | CPU seconds | median |", "|---|---|---|---|---|",
            f"| before (commit {old_commit[:10]}, no metadata) | "
            f"{', '.join(map(str, ix['seconds']['old']))} | {ix['median']['old']} | "
            f"{', '.join(map(str, ix['cpu_seconds']['old']))} | {ix['cpu_median']['old']} |",
            f"| this branch (metadata read) | {', '.join(map(str, ix['seconds']['new']))} | "
            f"{ix['median']['new']} | {', '.join(map(str, ix['cpu_seconds']['new']))} | "
            f"{ix['cpu_median']['new']} |", "",
            f"**Reading the metadata adds {ix['added_percent']} % to the wait** (median wall "
            f"time; {ix['cpu_added_percent']} % of CPU time; target: at most 10 %).", ""]


def report(r: dict) -> str:
    t, f = r["fit_table"], r["fit_folder"]
    alone = r["read_alone"]
    lines = report_head("Keywords read from the pictures' files (Corel 5k copies)", r["run"])
    lines += ["", f"Folder: {r['folder']['pictures']:,} pictures, "
              f"{r['folder']['tagged']:,} development pictures tagged by exiftool "
              f"({'; '.join(f'{n:,} {w}' for w, n in r['folder']['ways'].items())}; "
              f"{r['folder']['exiftool_write_seconds']} s), test pictures untagged.",
              "", f"Fits: `pamir fit DATA -o MODEL {' '.join(FIT)}` (one fixed cheap "
              "setting, no grid).", "",
              "| | pamir fit TABLE | pamir fit FOLDER |", "|---|---|---|",
              f"| vocabulary | {len(t['vocabulary'])} words | {len(f['vocabulary'])} words |",
              f"| same vocabulary, same order | | {t['vocabulary'] == f['vocabulary']} |",
              f"| pictures (train, validation) | {t['pictures']['train']:,}, "
              f"{t['pictures']['valid']:,} | {f['pictures']['train']:,}, "
              f"{f['pictures']['valid']:,} |",
              f"| chosen | {t['params']} | {f['params']} |",
              f"| validation AvgP | {t['valid_avgp']:.3f} % | {f['valid_avgp']:.3f} % |",
              f"| seconds (second fit: features from the cache) | {t['seconds']} | "
              f"{f['seconds']} |", "",
              f"`pamir fit FOLDER` said: {f['sources_line'].strip()}", "",
              *index_table(r["index"], r["old_commit"],
                           "warm feature cache (the fits computed the features: the metadata"
                           " read is the largest share it can be)"),
              *index_table(r["index_cold"], r["old_commit"],
                           "empty feature cache each run (a first index of the folder)"),
              "## The metadata read alone", "",
              f"Pillow + defusedxml (pamir.facts.metadata.read_metadata, sidecars looked for): "
              f"{alone['pillow_ms_per_picture']} ms a picture; exiftool, one process over the "
              f"folder (`exiftool -j` of the same fields): {alone['exiftool_ms_per_picture']} "
              f"ms a picture ({alone['pictures']:,} pictures, {alone['captioned']:,} "
              "captioned).", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--old", default="574a405", help="the commit to compare index times with")
    args = ap.parse_args(argv)
    run = Run("bench_metadata.py", argv)
    r = {"old_commit": args.old}
    r["folder"] = build_tagged_folder(find_corel5k())
    print("folder", r["folder"], flush=True)
    r["fit_table"] = fit(WORK / "pictures" / "captions.tsv", WORK / "model-table")
    print("fit table", r["fit_table"]["valid_avgp"], r["fit_table"]["seconds"], flush=True)
    # the table must not be in the folder `pamir fit FOLDER` reads: it is not a picture, but
    # keep the folder as a person's would be
    shutil.move(WORK / "pictures" / "captions.tsv", WORK / "captions.tsv")
    r["fit_folder"] = fit(WORK / "pictures", WORK / "model-folder")
    print("fit folder", r["fit_folder"]["valid_avgp"], r["fit_folder"]["seconds"], flush=True)
    old = old_checkout(args.old)
    r["index"] = index_rounds(WORK / "model-table", old, 5, cold=False)
    print("index, warm", r["index"], flush=True)
    r["index_cold"] = index_rounds(WORK / "model-table", old, 3, cold=True)
    print("index, cold", r["index_cold"], flush=True)
    r["read_alone"] = read_alone()
    r["run"] = run.info()
    save_report(STEM, r, report)


if __name__ == "__main__":
    main()
