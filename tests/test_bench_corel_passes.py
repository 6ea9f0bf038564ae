"""benchmarks/bench_corel_passes.py's measuring parts: the tree's memory sampler counts a
child process's memory, and the report reads its results file alone (--report-only)."""

import importlib.util
import subprocess
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


def test_tree_memory_counts_a_grandchild(bench):
    """The index's passes run in worker processes: their memory is the tree's, not the
    parent's alone."""
    pytest.importorskip("psutil")
    code = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
            "'import time; b = bytearray(120 * 2**20); time.sleep(1.5)'])")
    child = subprocess.Popen([sys.executable, "-c", code])
    memory = bench.TreeMemory(child.pid, every=0.05)
    memory.start()
    child.wait()
    memory.done.set()
    memory.join()
    assert memory.peak > 120 * 2**20


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
