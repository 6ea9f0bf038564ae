"""Start-up of the `pamir` command (issue 53): an older commit and this tree side by side.

What a person waits for, the whole process, `python -m pamir ARGS` from each tree (PYTHONPATH
picks it), after `python -m compileall -q` on both: `pamir --help`, `pamir search red` on a
tiny index with no model (four generated one-colour pictures, indexed by this tree, the
feature cache and the lexicon of word embeddings it made shared by both trees),
`pamir fit --help`, `pamir info --help`, and `pamir index` of that folder again (nothing
new: what a person re-running it, or a cron job, waits for). Median of `--runs` runs each,
in rounds that alternate which tree goes first, so that the shared machine's load falls on
both alike.

    python benchmarks/bench_cli_startup.py [--old a9fcd28] [--runs 11]

Writes benchmarks/results/cli_startup.json and .md.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

from common.harness import REPO, archive, machine, parser, save_report

COMMANDS = {"--help": ["--help"], "search": ["search", "red", "--index", "{index}"],
            "fit --help": ["fit", "--help"], "info --help": ["info", "--help"],
            "index (nothing new)": ["index", "{pictures}", "--index", "{index}"]}
COLOURS = [(220, 20, 20), (20, 200, 30), (30, 30, 220), (240, 240, 240)]


def cpu_flags() -> str:
    """The vector instruction sets the figures depend on (from /proc/cpuinfo)."""
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    return " ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni") if f in flags)


def pamir(tree: Path, args: list[str], cache: Path) -> float:
    """Seconds `python -m pamir ARGS` takes from `tree`, to its exit; it must succeed. Every
    tree reads one feature cache, `cache` (PAMIR_CACHE), which `pamir index` filled: each
    tree's own .cache would leave the older one without the lexicon of word embeddings the
    index made, and its search would load the word model (0.4 s) where the other does not."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PAMIR_CACHE": str(cache)}
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "pamir", *args], cwd=tree, env=env,
                         capture_output=True)
    seconds = time.perf_counter() - start
    if run.returncode:
        raise SystemExit(f"{tree}: pamir {' '.join(args)} failed: {run.stderr[-500:]!r}")
    return seconds


def measure(old: str, runs: int, work: Path) -> dict:
    trees = {"old": work / "old", "new": REPO}
    full = archive(old, trees["old"])
    pictures, index = work / "pictures", work / "index"
    pictures.mkdir()
    for i, colour in enumerate(COLOURS):
        Image.new("RGB", (96, 64), colour).save(pictures / f"p{i}.jpg")
    cache = work / "cache"
    pamir(REPO, ["index", str(pictures), "--index", str(index)], cache)
    for tree in trees.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "pamir")],
                       check=True)
    seconds = {(t, c): [] for t in trees for c in COMMANDS}
    for c, args in COMMANDS.items():  # one untimed run each: a warm OS cache
        for tree in trees.values():
            pamir(tree, [a.format(index=index, pictures=pictures) for a in args], cache)
    for i in range(runs):
        for c, args in COMMANDS.items():
            for t in (["old", "new"] if i % 2 == 0 else ["new", "old"]):
                seconds[(t, c)].append(pamir(trees[t], [a.format(index=index, pictures=pictures)
                                                        for a in args],
                                             cache))
    return {"old_commit": full, "runs": runs, "machine": machine(), "cpu_flags": cpu_flags(),
            "command": f"python benchmarks/bench_cli_startup.py --old {old} --runs {runs}",
            "median_ms": {c: {t: round(1000 * statistics.median(seconds[(t, c)]))
                              for t in trees} for c in COMMANDS}}


def report(r: dict) -> str:
    rows = [f"| `pamir {c}` | {m['old']} | {m['new']} | {m['new'] / m['old']:.2f} |"
            for c, m in r["median_ms"].items()]
    return "\n".join([
        "# Start-up of the `pamir` command", "",
        f"`{r['command']}`; {r['machine']} ({r['cpu_flags']}). Old: {r['old_commit'][:7]}; "
        f"new: this tree. Median of {r['runs']} runs, alternating.", "",
        "| command | old ms | new ms | new / old |", "|---|---:|---:|---:|", *rows, ""])


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--old", default="a9fcd28", help="the older commit")
    ap.add_argument("--runs", type=int, default=11)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        save_report("cli_startup", measure(args.old, args.runs, Path(work)), report)


if __name__ == "__main__":
    main()
