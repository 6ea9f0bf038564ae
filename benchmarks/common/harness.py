"""The run a benchmark is measured in and its report: the command, machine, date and load
average (`Run`), a report's head (`report_head`), its results files (results/STEM.json and
STEM.md: `save_report`, `rerender`, `report_cli`'s --report-only; the shared corel5k.json:
`write_results`), and the trees of older commits timed beside this one (`archive`).

    run = Run("bench_compare.py", argv)       # command, machine, date, load average
    write_results({"cmrm": entry})            # merged into results/corel5k.json, locked
    save_report("stem", r, report)            # results/stem.json and stem.md (report(r))
    report_head(title, r)                     # a report's title, command, machine and load

A script's report is a function of its results file alone, so that --report-only
(report_cli, rerender) writes the .md again from the committed .json: report_head reads the
forms of run older results files store as well as Run.info()'s. This module imports no
feature or model code, so that it loads wherever pamir's base does.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from pamir.storage import atomic_write_bytes, locked_json_update

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
PERQUERY = RESULTS / "perquery"
SUMMARY = RESULTS / "corel5k.json"  # every model's entry; README and bench_compare read it
METRICS = ("avgp", "bep", "p10")
HEAVY = "flock /tmp/pamir-heavy.lock"


# ------------------------------------------------------------------------------ the run

def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return re.search(r"Model name:\s*(.+)", out).group(1).strip()
    except Exception:  # noqa: BLE001 - no lscpu: the platform string is enough
        return platform.processor() or platform.machine()


def machine(torch: bool = False, system: bool = False) -> str:
    """CPU model, cores, (the OS and its release,) Python (and torch) of this machine."""
    os_release = f", {platform.system()} {platform.release()}" if system else ""
    text = (f"{cpu_model()}, {os.cpu_count()} cores{os_release}, "
            f"Python {platform.python_version()}")
    if torch:
        text += f", torch {__import__('torch').__version__}"
    return text


def load_average() -> str:
    return ", ".join(f"{v:.1f}" for v in os.getloadavg())


class Run:
    """When, where and how a benchmark ran: `info()` gives its command, machine, date and
    load average at the start and now (the machine is shared: timings are upper bounds)."""

    def __init__(self, script: str, argv=None, torch: bool = False):
        args = sys.argv[1:] if argv is None else list(argv)
        self.command = " ".join([f"python benchmarks/{script}", *args])
        self.machine = machine(torch)
        self.date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        self.load_start = load_average()
        self.started = time.perf_counter()

    def minutes(self) -> float:
        return round((time.perf_counter() - self.started) / 60, 1)

    def info(self) -> dict:
        return {"command": self.command, "machine": self.machine, "date": self.date,
                "load_average": {"start": self.load_start, "end": load_average()}}


#: What a report head says of its timings, unless the script says more.
SHARED = "a shared machine: timings are upper bounds"


def load_text(load) -> str:
    """One stored load average reading (1, 5 and 15 min) as the reports print it: the string
    load_average() gives, or the numbers os.getloadavg() gives (bench_features' results)."""
    return load if isinstance(load, str) else ", ".join(f"{v:.1f}" for v in load)


def load_clause(load) -> str:
    """'load average S at start, E at end' for Run.info()'s {"start", "end"}; 'load average L'
    for one reading, the form results measured before Run kept both still store."""
    if isinstance(load, dict):
        return f"load average {load_text(load['start'])} at start, {load_text(load['end'])} at end"
    return f"load average {load_text(load)}"


def report_head(title: str, info: dict, *, heavy: bool = True,
                note: str | None = SHARED) -> list[str]:
    """A report's title, then the command, machine, date and load it was measured under.

    info: Run.info(), or a results file's own keys of the same names (date and load average
    may be missing; the load may be one reading, see load_clause; without a command, a
    report of several runs that each section names, the head is the title and the machine).
    heavy: the command ran under the heavy lock (written before it); note: said of the
    timings in parentheses (None: nothing)."""
    load = info.get("load_average")
    where = f"Machine: {info['machine']}" + (f"; {info['date']}" if info.get("date") else "")
    if load:
        where += f"; {load_clause(load)}"
    where += (f" ({note})" if note else "") + ".  "
    if "command" not in info:
        return [f"# {title}\n", where]
    command = f"{HEAVY} {info['command']}" if heavy else info["command"]
    return [f"# {title}\n", f"Command: `{command}`  ", where]


def run_clause(info: dict) -> str:
    """'`COMMAND` on MACHINE, DATE (M min)': the run a report's first sentence (or a
    section's) names, for reports that say it inline; info: Run.info() with "minutes", or a
    results file's own keys of the same names. The load average follows the minutes when
    stored."""
    load = info.get("load_average")
    return (f"`{info['command']}` on {info['machine']}, {info['date']} "
            f"({info['minutes']} min{'; ' + load_clause(load) if load else ''})")


# ------------------------------------------------------------------------------ results files

def plain(value):
    """A JSON-able copy: numpy scalars and arrays as Python numbers and lists."""
    def default(o):
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, Path):
            return str(o)
        raise TypeError(f"{type(o).__name__} is not JSON serialisable")
    return json.loads(json.dumps(value, default=default))


def write_results(updates: dict, path: Path = SUMMARY) -> dict:
    """Merge {key: entry} into a shared results file (pamir.storage.locked_json_update:
    locked, atomic); the merged content."""
    return locked_json_update(path, plain(updates))


def write_json(path: Path, value) -> None:
    """A benchmark's own results file (no other writer), replaced atomically: a run stopped
    while writing leaves the last results whole."""
    atomic_write_bytes(path, (json.dumps(plain(value), indent=1) + "\n").encode())


def parser(doc: str) -> argparse.ArgumentParser:
    """A benchmark's command line, described by the first line of its docstring (`--help`
    prints the rest: what it measures and how to run it)."""
    first, _, rest = (doc or "").strip().partition("\n")
    return argparse.ArgumentParser(description=first, epilog=rest.strip() or None,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def report_cli(doc: str, stem: str, report, argv=None, flags: dict | None = None,
               options=None):
    """The command line of a benchmark that writes results/STEM.json and STEM.md, with
    --report-only, the on/off `flags` ({name: help}) and what options(parser) adds. Returns
    the parsed arguments, or None when --report-only rewrote STEM.md from STEM.json with
    `report` (json -> markdown), so that the caller has nothing left to measure."""
    ap = parser(doc)
    ap.add_argument("--report-only", action="store_true",
                    help=f"rewrite results/{stem}.md from {stem}.json, measuring nothing")
    for name, text in (flags or {}).items():
        ap.add_argument(name, action="store_true", help=text)
    if options is not None:
        options(ap)
    args = ap.parse_args(argv)
    if not args.report_only:
        return args
    rerender(stem, report)
    return None


def rerender(stem: str, report) -> dict:
    """results/STEM.md written again from results/STEM.json with `report` (json -> markdown),
    measuring nothing (--report-only); the results read."""
    r = json.loads((RESULTS / f"{stem}.json").read_text())
    (RESULTS / f"{stem}.md").write_text(report(r))
    return r


def save_report(stem: str, r: dict, report, echo: bool = True) -> None:
    """results/STEM.json and its report STEM.md; the report is printed too (echo)."""
    write_json(RESULTS / f"{stem}.json", r)
    text = report(r)
    (RESULTS / f"{stem}.md").write_text(text)
    if echo:
        print(text)


def read_summary() -> dict:
    return json.loads(SUMMARY.read_text()) if SUMMARY.is_file() else {}


def archive(commit: str, dest: Path) -> str:
    """A pristine source tree of `commit` at dest (a `git archive` of this repository);
    returns the full hash: how a benchmark times an older commit beside this one."""
    root = REPO
    dest.mkdir(parents=True)
    full = subprocess.run(["git", "rev-parse", commit], cwd=root, check=True,
                          capture_output=True, text=True).stdout.strip()
    tar = subprocess.run(["git", "archive", full], cwd=root, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar.stdout, check=True)
    return full


def corel5k_folder() -> Path:
    """The Corel 5k folder: PAMIR_COREL5K, else ../shared/data/corel5k beside the checkout
    (a `git archive` run elsewhere reads it through the variable)."""
    return Path(os.environ.get("PAMIR_COREL5K", REPO.parent / "shared/data/corel5k")).resolve()


def checkout_commit() -> str:
    """This checkout's commit, and whether its tracked files were changed."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=REPO).stdout.strip()
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=REPO).returncode != 0
    return head + (" (with changes not committed)" if dirty else "")
