"""The reliability tests of issue 15, run longer: more kills, longer writing, more fuzzing.

Runs tests/test_reliability_*.py with larger knobs (the environment variables they read) and
collects what they record into benchmarks/results/reliability.json, with the command and the
machine. Run it under the shared lock: `flock /tmp/pamir-heavy.lock python
benchmarks/bench_reliability.py`.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
KNOBS = {"PAMIR_RELIABILITY_INDEX_KILLS": "100", "PAMIR_RELIABILITY_FIT_KILLS": "20",
         "PAMIR_RELIABILITY_LEARN_KILLS": "10", "PAMIR_RELIABILITY_PICTURES": "96",
         "PAMIR_RELIABILITY_CONCURRENCY_SECONDS": "30", "PAMIR_RELIABILITY_EXAMPLES": "400"}
FILES = ["crash", "stored", "concurrency", "hostile"]


def main() -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = RESULTS / "reliability.json"
    report.unlink(missing_ok=True)
    env = {**os.environ, **KNOBS, "PAMIR_RELIABILITY_REPORT": str(report)}
    outcome = {}
    for name in FILES:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "pytest", f"tests/test_reliability_{name}.py",
                            "-q", "-rxs"], cwd=ROOT, env=env, capture_output=True, text=True)
        outcome[name] = {"exit": r.returncode, "seconds": round(time.perf_counter() - t0, 1),
                         "summary": r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""}
        print(name, outcome[name], flush=True)
    from pamir.storage import locked_json_update

    locked_json_update(report, {"runs": outcome, "knobs": KNOBS,
                                "command": " ".join([sys.executable, *sys.argv]),
                                "machine": f"{platform.node()} {platform.machine()} "
                                           f"{os.cpu_count()} cores, Python "
                                           f"{platform.python_version()}"})


if __name__ == "__main__":
    main()
