"""The reliability tests of issues 15 and 28, run longer: more kills, longer load (on loopback
and off it with tokens), more fuzzing, 1,000 wrong tokens, more write-fault levels.

Runs tests/test_reliability_*.py with larger knobs (the environment variables they read),
collects what they record into benchmarks/results/reliability.json, with the command and the
machine, and writes benchmarks/results/reliability.md from it. Run it under the shared lock:
`flock /tmp/pamir-heavy.lock python benchmarks/bench_reliability.py` (about 15 minutes on
2 cores). `--only load,disk` runs some parts only (the results file is then merged into).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common.harness import (RESULTS, load_clause, machine, parser, report_head,
                            rerender, write_results)

ROOT = Path(__file__).resolve().parents[1]
KNOBS = {
    # crash safety
    "PAMIR_RELIABILITY_INDEX_KILLS": "40", "PAMIR_RELIABILITY_FIT_KILLS": "8",
    "PAMIR_RELIABILITY_LEARN_KILLS": "5", "PAMIR_RELIABILITY_PICTURES": "48",
    # concurrency, hostile input
    "PAMIR_RELIABILITY_CONCURRENCY_SECONDS": "20", "PAMIR_RELIABILITY_EXAMPLES": "100",
    # load: the figures (50 clients, at least 30 s, RSS after 10,000 within 10 % of
    # after 1,000); the run goes on past 30 s until 10,000 requests, at most 300 s
    "PAMIR_RELIABILITY_LOAD_SECONDS": "30", "PAMIR_RELIABILITY_LOAD_CLIENTS": "50",
    "PAMIR_RELIABILITY_LOAD_N1": "1000", "PAMIR_RELIABILITY_LOAD_N2": "10000",
    "PAMIR_RELIABILITY_LOAD_RSS_TOLERANCE": "0.10", "PAMIR_RELIABILITY_LOAD_CAP_SECONDS": "300",
    # full disk: every 4 KB of free space from 0 to 128 KB (the update needs ~116 KB)
    "PAMIR_RELIABILITY_DISK_LEVELS": ",".join(str(k) for k in range(0, 132, 4)),
    # issue 28: a client trying 1,000 wrong tokens; EIO / ENOSPC after every 3,000 bytes
    # written from 0 to 42,000 (learn's save, then its index's rescoring, meet it there)
    "PAMIR_RELIABILITY_WRONG_TOKENS": "1000",
    "PAMIR_RELIABILITY_FAULT_LEVELS": ",".join(str(k) for k in range(0, 42_001, 3000)),
}
#: test files: tests/test_reliability_NAME.py, and test_server_sharing.py for "sharing"
FILES = ["load", "disk", "crash", "stored", "concurrency", "hostile", "faults", "sharing"]
#: A part that runs longer than this is stopped and reported as such.
PART_TIMEOUT = 300


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--only", default=",".join(FILES))
    args = ap.parse_args()
    parts = [p for p in args.only.split(",") if p]
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = RESULTS / "reliability.json"
    if set(parts) == set(FILES):
        report.unlink(missing_ok=True)
    env = {**os.environ, **KNOBS, "PAMIR_RELIABILITY_REPORT": str(report)}
    old = json.loads(report.read_text()) if report.is_file() else {}
    outcome = dict(old.get("runs", {}))
    load = {"start": list(os.getloadavg())}
    for name in parts:
        t0 = time.perf_counter()
        # (pyproject's addopts already say -q: a second one would drop the summary line)
        test_file = ("tests/test_server_sharing.py" if name == "sharing"
                     else f"tests/test_reliability_{name}.py")
        cmd = [sys.executable, "-m", "pytest", test_file, "-rxs",
               "-p", "no:cacheprovider"]
        try:
            r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=PART_TIMEOUT)
            lines = r.stdout.strip().splitlines()
            outcome[name] = {"exit": r.returncode, "summary": lines[-1] if lines else "",
                             "xfail": [ln for ln in lines if ln.startswith("XFAIL")],
                             "skipped": [ln for ln in lines if ln.startswith("SKIPPED")]}
            if r.returncode != 0:
                outcome[name]["failures"] = [ln for ln in lines if ln.startswith(("FAILED",
                                                                                  "ERROR"))]
                (RESULTS / f"reliability-{name}.log").write_text(r.stdout[-20000:] +
                                                                 r.stderr[-5000:])
        except subprocess.TimeoutExpired:
            outcome[name] = {"exit": None, "summary": f"stopped after {PART_TIMEOUT} s"}
        outcome[name]["seconds"] = round(time.perf_counter() - t0, 1)
        print(name, outcome[name]["seconds"], "s:", outcome[name]["summary"], flush=True)
    load["end"] = list(os.getloadavg())
    # what was run (the heavy lock, if any, is the caller's: say it in PAMIR_BENCH_NOTE)
    command = "python benchmarks/bench_reliability.py" + (
        f" --only {args.only}" if set(parts) != set(FILES) else "") + (
        f" ({os.environ['PAMIR_BENCH_NOTE']})" if os.environ.get("PAMIR_BENCH_NOTE") else "")
    data = write_results({
        "runs": outcome, "knobs": {**old.get("knobs", {}), **KNOBS}, "command": command,
        "machine": machine(system=True), "load_average": load,
        "hypothesis_examples_per_fuzz_test": int(KNOBS["PAMIR_RELIABILITY_EXAMPLES"]) * 5,
        "schemathesis_examples_per_operation": int(KNOBS["PAMIR_RELIABILITY_EXAMPLES"]),
        "note": "a shared machine: other engineers' jobs ran beside this one, the heavy "
                "lock keeps only other heavy runs out; latencies are this machine's, under "
                "that load"}, report)
    (RESULTS / "reliability.md").write_text(markdown(data))


def rewrite_markdown() -> None:
    """reliability.md again from reliability.json (after editing the json by hand)."""
    rerender("reliability", markdown)


def markdown(d: dict) -> str:
    # the command says whether the heavy lock was held (PAMIR_BENCH_NOTE)
    out = [*report_head("Reliability benchmark (issues 15 and 28)",
                        {**d, "load_average": _la(d["load_average"])}, heavy=False,
                        note=d["note"]), "",
           *([f"Issue 28's parts: {load_clause(_la(d['load_average_issue28']))}.", ""]
             if "load_average_issue28" in d else []),
           "Knobs: " + ", ".join(f"`{k}={v}`" for k, v in sorted(d["knobs"].items())), "",
           "## Parts", "", "| part | seconds | pytest summary |", "|---|---|---|"]
    for name, r in d["runs"].items():
        out.append(f"| {name} | {r['seconds']} | {r['summary']} |")
    out.append("")
    for key, title in [("load", "Load (127.0.0.1, no token)"),
                       ("load_tokens", "Load with tokens (127.0.0.2, editor's bearer token)")]:
        if key not in d:
            continue
        L = d[key]
        out += [f"## {title}", "",
                f"{L['clients']} clients, {L['seconds']} s, {L['requests']:,} requests "
                f"({L['requests_per_second']}/s), **{L['errors']} errors**; "
                f"p50 {L['p50_ms']} ms, p99 {L['p99_ms']} ms.", "",
                "| request | count | p50 ms | p99 ms |", "|---|---|---|---|"]
        for k, v in L["per_kind"].items():
            out.append(f"| {k} | {v['requests']:,} | {v['p50_ms']} | {v['p99_ms']} |")
        out += ["", "Resident memory of the server (MB): " + ", ".join(
            f"{k.replace('_', ' ')} {v}" for k, v in L["rss_mb"].items()) +
            f"; bound {L['rss_tolerance']:.0%}.", ""]
    for key, title in [("disk_index", "Full disk: `pamir index`"),
                       ("disk_fit", "Full disk: `pamir fit -o`")]:
        if key in d:
            out += [f"## {title}", "", "```", json.dumps(d[key], indent=1)[:6000], "```", ""]
    for key in ["index_kills", "fit_kills", "learn_kills", "concurrency", "schemathesis",
                "schemathesis_none", "schemathesis_viewer", "schemathesis_editor",
                "wrong_tokens", "eio_index", "eio_fit", "eio_learn", "enospc_learn"]:
        if key in d:
            out += [f"## {key}", "", "```", json.dumps(d[key], indent=1), "```", ""]
    out += [f"Hypothesis examples per fuzz test: {d['hypothesis_examples_per_fuzz_test']}; "
            f"schemathesis examples per operation: {d['schemathesis_examples_per_operation']}.",
            ""]
    xf = [x for r in d["runs"].values() for x in r.get("xfail", [])]
    if xf:
        out += ["## Known bugs (strict xfails)", ""] + [f"- {x}" for x in xf] + [""]
    sk = [x for r in d["runs"].values() for x in r.get("skipped", [])]
    if sk:
        out += ["## Skipped", ""] + [f"- {x}" for x in sk] + [""]
    return "\n".join(out)


def _la(load: dict) -> dict:
    """{start, end} of os.getloadavg() lists (1, 5, 15 min) as text, to two decimals."""
    return {k: ", ".join(f"{x:.2f}" for x in v) for k, v in load.items()}


if __name__ == "__main__":
    main()
