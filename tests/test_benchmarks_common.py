"""benchmarks/common/harness.py's report plumbing: the head of a report reads every form of
run a committed results file stores (so that --report-only re-renders old results
unchanged), and --report-only / save_report write the files they name. And every module
of benchmarks/common/ imports, as a benchmark imports it."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def common():
    """benchmarks/common/harness.py, imported as a benchmark imports it (benchmarks/ first on
    the path, as Python puts a script's folder)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("common.harness")
    finally:
        sys.path.remove(str(BENCH))


def test_every_shared_module_imports_as_a_benchmark_imports_it():
    modules = sorted(p.stem for p in (BENCH / "common").glob("*.py") if p.stem != "__init__")
    code = "; ".join(f"import common.{m}" for m in modules)
    r = subprocess.run([sys.executable, "-c", code], cwd=BENCH, capture_output=True, text=True)
    assert len(modules) >= 6 and r.returncode == 0, r.stderr


RUN = {"command": "python benchmarks/bench_x.py --quick", "machine": "AMD EPYC, 2 cores",
       "date": "2026-11-25 17:01 UTC"}


def test_head_with_the_load_at_start_and_end(common):
    info = {**RUN, "load_average": {"start": "0.5, 0.6, 0.7", "end": "1.5, 1.6, 1.7"}}
    assert common.report_head("Title", info) == [
        "# Title\n",
        "Command: `flock /tmp/pamir-heavy.lock python benchmarks/bench_x.py --quick`  ",
        "Machine: AMD EPYC, 2 cores; 2026-11-25 17:01 UTC; load average 0.5, 0.6, 0.7 at "
        "start, 1.5, 1.6, 1.7 at end (a shared machine: timings are upper bounds).  "]


def test_head_with_one_stored_reading(common):
    # results written before Run kept both readings store one string (small_selection.json)
    head = common.report_head("Title", {**RUN, "load_average": "15.4, 14.1, 6.4"},
                              heavy=False, note=None)
    assert head[1] == "Command: `python benchmarks/bench_x.py --quick`  "
    assert head[2] == "Machine: AMD EPYC, 2 cores; 2026-11-25 17:01 UTC; load average " \
                      "15.4, 14.1, 6.4.  "


def test_head_with_readings_stored_as_numbers(common):
    # os.getloadavg() lists (features.json's machine dict)
    info = {**RUN, "load_average": {"start": [1.62, 2.13, 1.16], "end": [2.06, 2.16, 1.36]}}
    assert "load average 1.6, 2.1, 1.2 at start, 2.1, 2.2, 1.4 at end (note).  " \
        in common.report_head("Title", info, note="note")[2]


def test_head_without_load_date_or_command(common):
    assert common.report_head("Title", {"machine": "M"}) == [
        "# Title\n", "Machine: M (a shared machine: timings are upper bounds).  "]


def test_run_said_inline(common):
    info = {**RUN, "minutes": 9.5}
    assert common.run_clause(info) == \
        "`python benchmarks/bench_x.py --quick` on AMD EPYC, 2 cores, 2026-11-25 17:01 UTC (9.5 min)"
    info["load_average"] = "1.0, 1.0, 1.0"
    assert common.run_clause(info).endswith("(9.5 min; load average 1.0, 1.0, 1.0)")


def test_save_report_then_rerender(common, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path)

    def report(r):
        return "\n".join(common.report_head("T", r)) + f"\n\n{r['figure']}\n"

    r = {**common.Run("bench_x.py", ["--quick"]).info(), "figure": 42}
    common.save_report("x", r, report, echo=False)
    assert capsys.readouterr().out == ""
    assert json.loads((tmp_path / "x.json").read_text()) == r
    first = (tmp_path / "x.md").read_text()
    assert first.endswith("\n\n42\n") and "bench_x.py --quick" in first
    (tmp_path / "x.md").write_text("stale")
    assert common.rerender("x", report) == r
    assert (tmp_path / "x.md").read_text() == first


def test_report_only_measures_nothing(common, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    (tmp_path / "x.json").write_text(json.dumps({**RUN, "figure": 1}))
    assert common.report_cli("Doc.", "x", lambda r: f"figure {r['figure']}\n",
                             ["--report-only"]) is None
    assert (tmp_path / "x.md").read_text() == "figure 1\n"
    args = common.report_cli("Doc.", "x", lambda r: "", ["--flag"], {"--flag": "a flag"})
    assert args.flag and not args.report_only
