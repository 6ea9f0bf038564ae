"""Whole commands timed as a person waits for them: a command of two source trees side by side
(`side_by_side`, `wall`), `pamir` run from a tree with its output logged and its peak memory
(`pamir_logged`), or with the memory of its whole process tree (`run_watched`); the served
index's latency per query (`serve_latency`), and the large synthetic index the latency
studies search (`build_big`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np

from .harness import REPO, corel5k_folder

#: The queries whose latency the search benchmarks time, one of each kind.
QUERIES = {
    "vocabulary word": "tiger",
    "inflection": "flower",
    "meaning (new to the index)": "giraffe",
    "ImageNet classes": "leopard",
    "three words, exclusion, filter": "leopard grass -water in:130000",
}


CLI = "from pamir.cli import main; main()"


BIG_BATCH = 50_000


# ------------------------------------------------------------------------ the big index
def build_big(source: Path, target: Path, n: int, seed: int = 0) -> dict:
    """A synthetic index of n pictures from the real vectors of `source` (see the docstring)."""
    rng = np.random.default_rng(seed)
    from pamir.index import Index  # noqa: PLC0415

    with Index.open(source) as real:
        pics = real.pictures("ok")
        Z = np.stack([real.vector(p.id, classes=True) for p in pics])
        folders = sorted({Path(p.path).parent.name for p in pics})
        meta = dict(vocabulary=real.vocabulary, idf=real.idf, classes=real.classes,
                    model_dir=real.model_dir, fingerprint=real.model_fingerprint)
    t0 = time.perf_counter()
    tmp = target.with_name(target.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    from pamir.index import tuning as scores_mod
    scores_mod.SEAL_AT = 1 << 62  # bulk load: one compaction at the end
    with Index.create(tmp, meta["vocabulary"], meta["idf"], model_dir=meta["model_dir"],
                      fingerprint=meta["fingerprint"], classes=meta["classes"]) as ix:
        for start in range(0, n, BIG_BATCH):
            m = min(BIG_BATCH, n - start)
            rows = Z[rng.integers(0, len(Z), m)]
            rows *= 1 + 0.05 * rng.standard_normal(rows.shape, dtype=np.float32)
            entries = [{"path": f"/synthetic/{folders[i % len(folders)]}/{i:08d}.jpeg",
                        "size": 1, "mtime_ns": i, "hash": f"{i:032x}"}
                       for i in range(start, start + m)]
            ix.add(entries, rows)
        ix.compact()
    # the word-mapping caches `pamir index` leaves beside an index
    for f in source.glob("vocabulary-embeddings-*.npy"):
        shutil.copy(f, tmp / f.name)
    tmp.rename(target)
    return {"pictures": n, "build_s": round(time.perf_counter() - t0, 1),
            "size_mb": round(sum(f.stat().st_size for f in target.iterdir()) / 2**20)}


# ------------------------------------------------------------------------ timing processes
def env_for(tree: Path, extra: dict | None = None) -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(tree)
    e.update(extra or {})
    return e


def wall(argv: list[str], env: dict) -> float:
    # run from the tree itself: `python -c` puts the working folder first on sys.path
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, cwd=env["PYTHONPATH"])
    took = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {r.stderr[-800:]}")
    return took


def side_by_side(commands: dict[str, list[str]], trees: dict[str, Path], runs: int,
                 env_extra: dict) -> dict:
    """{command name: {tree name: {median_s, runs_s}}}: each command warmed once per tree,
    then `runs` rounds, each round every tree in turn (and numpy alone)."""
    times = {c: {t: [] for t in trees} for c in commands}
    numpy_times = []
    for c, args in commands.items():
        for t, tree in trees.items():
            wall([sys.executable, "-c", CLI, *args], env_for(tree, env_extra))  # warm
    for _ in range(runs):
        numpy_times.append(wall([sys.executable, "-c", "import numpy"], env_for(REPO)))
        for c, args in commands.items():
            for t, tree in trees.items():
                times[c][t].append(wall([sys.executable, "-c", CLI, *args],
                                        env_for(tree, env_extra)))
    out = {c: {t: {"median_s": round(statistics.median(v), 3),
                   "runs_s": [round(x, 3) for x in v]} for t, v in d.items()}
           for c, d in times.items()}
    out["python -c \"import numpy\""] = {"median_s": round(statistics.median(numpy_times), 3),
                                         "runs_s": [round(x, 3) for x in numpy_times]}
    return out


# ------------------------------------------------------------------------ the server
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_latency(index: Path, tree: Path, n: int, env_extra: dict) -> dict:
    """p50 / p99 (ms) of each query through GET /api/search, `pamir serve` on 127.0.0.1 with
    the model loaded; n timed requests a query after 5 warm-up ones."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", CLI, "serve", "--index", str(index),
                             "--port", str(port)], env=env_for(tree, env_extra),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, cwd=tree)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while True:  # up, and the word-embedding model loaded
            try:
                with urllib.request.urlopen(base + "/api/status", timeout=5) as r:
                    status = json.load(r)
                if status.get("mapping", {}).get("state") in ("loaded", "off",
                                                              "unavailable"):
                    break
            except OSError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("the server did not come up with its model loaded")
            time.sleep(0.5)
        out = {}
        for name, q in QUERIES.items():
            url = f"{base}/api/search?" + urllib.parse.urlencode({"q": q, "k": 20})
            took = []
            for i in range(n + 5):
                t0 = time.perf_counter()
                with urllib.request.urlopen(url, timeout=30) as r:
                    r.read()
                if i >= 5:
                    took.append((time.perf_counter() - t0) * 1000)
            out[name] = {"p50_ms": round(float(np.percentile(took, 50)), 2),
                         "p99_ms": round(float(np.percentile(took, 99)), 2), "requests": n}
        return out
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


# ------------------------------------------------ commands run as a person waits for them

def pamir_logged(src: Path, cache: Path, args: list[str], log: Path,
                 peak: list | None = None) -> float:
    """Run `pamir ARGS` from the source tree src with feature cache `cache`; wall seconds.
    stdout and stderr go to log (appended). peak: gets the process's peak resident memory
    (MB, its own ru_maxrss from wait4: what `/usr/bin/time -v` reports) appended."""
    env = {**os.environ, "PYTHONPATH": str(src), "PAMIR_CACHE": str(cache),
           "PAMIR_COREL5K": str(corel5k_folder())}
    code = "import sys; sys.argv[0] = 'pamir'; from pamir.cli import main; main()"
    t0 = time.perf_counter()
    with open(log, "a") as out:
        out.write(f"\n$ pamir {' '.join(args)}\n")
        out.flush()
        child = subprocess.Popen([sys.executable, "-c", code, *args], cwd=src, env=env,
                                 stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            raise subprocess.CalledProcessError(child.returncode, ["pamir", *args])
    if peak is not None:
        peak.append(round(usage.ru_maxrss / 1024))
    return time.perf_counter() - t0


class TreeMemory(threading.Thread):
    """The largest sum of resident memory over a process and its descendants, sampled."""

    def __init__(self, pid: int, every: float = 0.2):
        super().__init__(daemon=True)
        self.pid, self.every, self.peak, self.done = pid, every, 0, threading.Event()

    def run(self) -> None:
        import psutil  # noqa: PLC0415 - distributed's dependency, installed with [dask]

        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self.done.wait(self.every):
            total = 0
            try:
                for p in [root, *root.children(recursive=True)]:
                    total += p.memory_info().rss
            except psutil.NoSuchProcess:
                pass  # a pass process that just ended: the others still count
            self.peak = max(self.peak, total)


def run_watched(cmd: list, *, cwd: Path, env: dict, stdout: Path, log: Path, header: str):
    """Run a whole command as a person waits for it: its stdout into `stdout`, its stderr
    appended to `log` after `header`; (wall seconds, its own peak RSS in MB, the peak over
    it and its descendants in MB, its exit code), the memory sampled by TreeMemory."""
    with open(stdout, "w") as out, open(log, "a") as err:
        err.write(f"\n$ {header}\n")
        err.flush()
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        memory = TreeMemory(child.pid)
        memory.start()
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - t0
        memory.done.set()
    memory.join()
    return (seconds, round(usage.ru_maxrss / 1024), round(memory.peak / 2**20),
            os.waitstatus_to_exitcode(status))


def warm_up_pictures(folder: Path, seed: int = 0, n: int = 2) -> Path:
    """n random 192 x 128 JPEGs in `folder` (made here): what a benchmark indexes once to
    fill the one-time cache (ONNX exports, int8 graphs) that no timed run should pay for."""
    from PIL import Image  # noqa: PLC0415

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (128, 192, 3), dtype=np.uint8)).save(
            folder / f"warm-{i}.jpg")
    return folder
