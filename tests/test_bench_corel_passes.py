"""benchmarks/bench_corel_passes.py's measuring parts: the tree's memory sampler counts a
child process's memory, and the report reads its results file alone (--report-only)."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_corel_passes",
                                                      BENCH / "bench_corel_passes.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


def test_a_watched_command_counts_a_grandchilds_memory(bench, tmp_path):
    """The index's passes run in worker processes: their memory is the tree's, not the
    parent's alone (benchmarks/common.latency.run_watched, which both index benchmarks use)."""
    pytest.importorskip("psutil")
    code = ("import subprocess, sys; print('out'); subprocess.run([sys.executable, '-c', "
            "'import time; b = bytearray(120 * 2**20); time.sleep(1.5)'])")
    seconds, own_mb, tree_mb, status = bench.run_watched(
        [sys.executable, "-c", code], cwd=tmp_path, env=None, stdout=tmp_path / "out.txt",
        log=tmp_path / "log.txt", header="a child and its child")
    assert status == 0 and seconds > 1.0
    assert tree_mb > 120 and own_mb > 0
    assert (tmp_path / "out.txt").read_text() == "out\n"
    assert "$ a child and its child" in (tmp_path / "log.txt").read_text()


def variant(seconds, text=None, faces=None, passes=None):
    return {"seconds": seconds, "pictures_per_s": round(50 / seconds, 1), "peak_mb": 900,
            "peak_tree_mb": 1500, "passes_s": passes or {}, "with_text": text,
            "with_faces": faces, "faces": faces, "runs_s": [seconds], "added": 50, "failed": 0}


def test_report_reads_the_results_alone(bench):
    v = {"bare": variant(10.0), "text": variant(16.0, 3, None, {"text": 5.5}),
         "text + faces": variant(20.0, 3, 1, {"text": 5.4, "faces": 3.9})}
    for x in v.values():
        x["ratio_to_bare"] = round(x["seconds"] / 10.0, 2)
    r = {"command": "python benchmarks/bench_corel_passes.py --every 100",
         "machine": "a 2-core test machine", "date": "2026-11-28 01:00 UTC", "pictures": 50,
         "every": 100, "rounds": 1, "order": list(v), "flags": bench.VARIANTS, "variants": v}
    text = bench.report(r)
    assert "| text | `--no-faces` | 16.0 | 3.1 | 1.60x | 900 / 1,500 | 5.5 | - | 3 | - |" in text
    assert "**1.60x**, over it." in text
    assert "every 100th" in text
