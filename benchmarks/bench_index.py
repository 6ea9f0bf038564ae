"""Query latency of the index on synthetic collections of 100k to 1M pictures.

Builds an index of random text-space vectors (179 words, as Corel 5k) through the public
`Index.add`, then times `Index.search` (word-major scoring of the query's rows + np.argpartition
top-100) for 1-, 2- and 3-word queries, warm (the query's rows in the page cache) as a server
would run. Writes benchmarks/results/index.md.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_index.py [--sizes 100000 1000000]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from common import RESULTS, cpu_model
from pamir import config
from pamir.index import Index

T = 179
BATCH = 50_000
K = 100


def build(directory: Path, n: int, rng) -> tuple[Index, float]:
    vocabulary = [f"w{t}" for t in range(T)]
    idf = rng.uniform(1, 6, T)
    index = Index.create(directory, vocabulary, idf)
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        m = min(BATCH, n - start)
        Z = rng.standard_normal((m, T), dtype=np.float32)
        entries = [{"path": f"/synthetic/{start + i:07d}.jpg", "size": 1, "mtime_ns": 0,
                    "hash": f"{start + i:032x}"} for i in range(m)]
        index.add(entries, Z)
    return index, time.perf_counter() - t0


def time_queries(index: Index, words: int, rng, repeats: int = 50) -> dict:
    times = []
    for _ in range(repeats + 5):
        terms = rng.choice(T, words, replace=False)
        q = index.parse_query(" ".join(index.vocabulary[t] for t in terms)).vector
        t0 = time.perf_counter()
        hits = index.search(q, K)
        times.append(time.perf_counter() - t0)
        assert len(hits) == K
    times = np.array(times[5:]) * 1000  # the first few warm the page cache
    return {"median_ms": float(np.median(times)), "p90_ms": float(np.percentile(times, 90))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--out", type=Path, default=RESULTS / "index.md")
    args = ap.parse_args()
    rng = np.random.default_rng(config.SEED)
    rows = []
    for n in args.sizes:
        tmp = Path(tempfile.mkdtemp(prefix="pamir-bench-index-"))
        try:
            index, build_s = build(tmp / "index", n, rng)
            size_mb = sum(p.stat().st_size for p in (tmp / "index").iterdir()) / 2**20
            result = {w: time_queries(index, w, rng) for w in (1, 2, 3)}
            index.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        rows.append((n, build_s, size_mb, result))
        print(n, round(build_s, 1), result, flush=True)
    write_report(args.out, rows)


def write_report(out: Path, rows) -> None:
    cpu = cpu_model()
    lines = [
        "# Index query latency (synthetic)",
        "",
        f"Command: `flock /tmp/pamir-heavy.lock python benchmarks/bench_index.py --sizes "
        f"{' '.join(str(r[0]) for r in rows)}`  ",
        f"Machine: {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
        f"numpy {np.__version__}; seed {config.SEED}.  ",
        f"Random text-space vectors, {T} words (as Corel 5k), added through `Index.add` in "
        f"batches of {BATCH:,}; `Index.search` with top-{K} (np.argpartition), median and 90th "
        "percentile of 50 random queries after 5 warm-up ones (page cache warm, as in a "
        "running server).",
        "",
        "| pictures | build (s) | index on disk (MB) | 1 word ms (p90) | 2 words ms (p90) "
        "| 3 words ms (p90) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n, build_s, size_mb, res in rows:
        cells = " | ".join(f"{res[w]['median_ms']:.1f} ({res[w]['p90_ms']:.1f})" for w in (1, 2, 3))
        lines.append(f"| {n:,} | {build_s:.1f} | {size_mb:,.0f} | {cells} |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
