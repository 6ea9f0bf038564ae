"""Query latency, build time and size of the index at 100k to 10M pictures (synthetic scores
distributed like a real Corel 5k index), the exact top-k from sorted lists beside brute force.

Scores: a Gaussian copula fitted to a real index (`--like`, a PAMIR index of the 5,000 Corel 5k
pictures, 179 words): each word's scores follow that word's real marginal (its empirical
quantiles, interpolated: right-skewed, as PAMIR scores are), and words are correlated as the
real ones (the correlation of the real scores' normal scores). Without `--like`, a low-rank
Gaussian model (rank 32) stands in, and the report says so.

The index is built in bulk through the public API: `Index.add` in batches of 50,000 (no seal
on the way), then `Index.compact()` (each shard's pictures put in block order, then one segment
of sorted lists per shard). Queries: random
1-, 2- and 3-word queries over the vocabulary (idf-weighted as `Index.parse_query` makes
them), top 100, timed through `Index.search` (the default path) and
`Index.search(method="brute")` (every score, np.argpartition: the reference), single
threaded, warm (5 warm-up queries first; the page cache holds what queries touch) and, with
`--cold`, right after dropping the page cache (root only). Results merge into
benchmarks/results/index.json by size; index.md and index.png are written from all of it.

    NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 flock /tmp/pamir-heavy.lock \
        python benchmarks/bench_index.py --sizes 100000 1000000 --dir /work/bench-data
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np

from common.harness import RESULTS, Run, parser, report_head, write_json
from pamir import config
from pamir.index import Index
from pamir.index import compaction
from pamir.index import tuning as scores_mod

BATCH = 50_000
RANK = 48
K = 100
REPEATS = 50
JSON = RESULTS / "index.json"
DEFAULT_LIKE = Path("/tmp/demo/ix")


class Generator:
    """Synthetic text-space rows (n x T) like a real index's."""

    def __init__(self, like: Path | None, rng):
        self.rng = rng
        if like is not None and (like / "catalog.sqlite").exists():
            self.source = f"Gaussian copula of the real index {like}"
            with Index.open(like) as real:
                ids = [p.id for p in real.pictures("ok")]
                Z = np.stack([real.vector(i) for i in ids])  # n x T
                self.vocabulary = real.vocabulary
            self.T = Z.shape[1]
            self.quantiles = np.sort(Z, axis=0).astype(np.float32)  # per word, the marginal
            ranks = (np.argsort(np.argsort(Z, axis=0), axis=0) + 0.5) / len(Z)
            from scipy.stats import norm
            G = norm.ppf(ranks)
            C = np.corrcoef(G, rowvar=False)
            w, V = np.linalg.eigh(C)
            top = np.argsort(w)[::-1][:RANK]  # the leading components, then per-word noise
            self.factor = (V[:, top] * np.sqrt(np.clip(w[top], 0, None))).T.astype(np.float32)
            self.noise = np.sqrt(np.clip(1 - (self.factor ** 2).sum(0), 0, None)).astype(
                np.float32)
            self.source += (f" ({len(Z):,} pictures, {self.T} words; correlation: its "
                            f"{RANK} leading components + independent noise per word)")
        else:
            self.source = "low-rank Gaussian model (rank 32, no real index given)"
            self.T = 179
            self.vocabulary = [f"w{t}" for t in range(self.T)]
            self.quantiles = None
            self.factor = rng.standard_normal((32, self.T)).astype(np.float32) / np.sqrt(32)

    def rows(self, m: int) -> np.ndarray:
        G = self.rng.standard_normal((m, self.factor.shape[0]), dtype=np.float32) @ self.factor
        if self.quantiles is None:
            return (G + 0.3 * self.rng.standard_normal(G.shape, dtype=np.float32)).astype(
                np.float32)
        from scipy.special import ndtr
        G += self.noise * self.rng.standard_normal(G.shape, dtype=np.float32)
        n = len(self.quantiles)
        pos = np.clip(ndtr(G) * n - 0.5, 0, n - 1 - 1e-6)  # the real quantiles, interpolated
        i = np.minimum(pos.astype(np.int64), n - 2)
        frac = (pos - i).astype(np.float32)
        flat = i + np.arange(self.T) * n
        Q = self.quantiles.T.ravel()
        lo = Q[flat]
        return (lo + frac * (Q[flat + 1] - lo)).astype(np.float32)


def build(directory: Path, n: int, gen: Generator, rng) -> tuple[Index, dict]:
    idf = rng.uniform(1, 6, gen.T)
    index = Index.create(directory, gen.vocabulary, idf)
    scores_mod.SEAL_AT = 1 << 62  # bulk load: one compaction at the end
    adding = 0.0  # the index's own time, not the synthetic data's
    for start in range(0, n, BATCH):
        m = min(BATCH, n - start)
        entries = [{"path": f"/synthetic/{start + i:08d}.jpg", "size": 1, "mtime_ns": 0,
                    "hash": f"{start + i:032x}"} for i in range(m)]
        Z = gen.rows(m)
        t0 = time.perf_counter()
        index.add(entries, Z)
        adding += time.perf_counter() - t0
    t1 = time.perf_counter()
    index.compact()
    t2 = time.perf_counter()
    t0 = t1 - adding
    sizes = {"matrix": 0, "lists": 0, "catalogue": 0}
    for p in directory.iterdir():
        kind = ("matrix" if p.name.startswith("scores-") else
                "lists" if p.name.startswith("lists-") else "catalogue")
        sizes[kind] += p.stat().st_size
    return index, {"add_s": round(t1 - t0, 1), "compact_s": round(t2 - t1, 1),
                   "build_s": round(t2 - t0, 1), "shards": index.status()["shards"],
                   **{f"{k}_mb": round(v / 2**20) for k, v in sizes.items()}}


def time_queries(index: Index, words: int, rng, method: str, warm: int = 5) -> dict:
    times = []
    T = len(index.vocabulary)
    for i in range(REPEATS + warm):
        terms = rng.choice(T, words, replace=False)
        q = index.parse_query(" ".join(index.vocabulary[t] for t in terms), mapping=False)
        t0 = time.perf_counter()
        hits = index.search(q.vector, K, method=method)
        times.append(time.perf_counter() - t0)
        assert len(hits) == K
    times = np.array(times[warm:]) * 1000
    return {"median_ms": round(float(np.median(times)), 3),
            "p90_ms": round(float(np.percentile(times, 90)), 3)}


def insertion_order(directory: Path, n: int, gen: Generator, rng) -> dict:
    """The default search's times on the same kind of index with the compaction's block
    order off (pictures left in the order they were added): what the order saves."""
    shutil.rmtree(directory, ignore_errors=True)
    order = compaction.block_order
    compaction.block_order = lambda S, seed=0: np.arange(S.shape[1])
    try:
        index, built = build(directory, n, gen, rng)
    finally:
        compaction.block_order = order
    with index:
        for w in (1, 2, 3):  # warm the rows as the main series did
            time_queries(index, w, rng, "scan")
        return {"build": built, **{str(w): time_queries(index, w, rng, "auto")
                                   for w in (1, 2, 3, 4)}}


def check_exact(index: Index, rng, n_queries: int = 20) -> int:
    """Queries (1-3 words, some weights negative) whose default answer differs from brute
    force: must be 0."""
    bad = 0
    T = len(index.vocabulary)
    for _ in range(n_queries):
        q = np.zeros(T, np.float32)
        terms = rng.choice(T, rng.integers(1, 4), replace=False)
        q[terms] = rng.uniform(-1, 1, len(terms)).astype(np.float32)
        a = [(h.id, h.score) for h in index.search(q, K)]
        b = [(h.id, h.score) for h in index.search(q, K, method="brute")]
        bad += a != b
    return bad


def command_prefix() -> str:
    """What this run was started under: the thread variables set, and `flock` if an
    ancestor process holds the heavy lock (the 100k run, under 30 s of CPU, needs none)."""
    env = " ".join(f"{v}={os.environ[v]}" for v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")
                   if v in os.environ)
    pid, flock = os.getppid(), ""
    while pid > 1:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if cmd.startswith("flock ") and "pamir-heavy.lock" in cmd:
            flock = "flock /tmp/pamir-heavy.lock "
            break
    return f"{env} {flock}".strip()


def drop_caches() -> bool:
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        return True
    except OSError:
        return False


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--dir", type=Path, default=Path("/work/bench-data"),
                    help="where the indexes are built (deleted after)")
    ap.add_argument("--like", type=Path, default=DEFAULT_LIKE,
                    help="a real index whose score distribution the synthetic one copies")
    ap.add_argument("--insertion-order", type=int, nargs="*", default=[100_000, 1_000_000],
                    help="sizes also built with the pictures left in insertion order (the "
                    "compaction's block order off), to time the default search on both in "
                    "one run")
    ap.add_argument("--cold", action="store_true", help="also time right after dropping "
                    "the page cache")
    args = ap.parse_args()
    run = Run("bench_index.py")
    rng = np.random.default_rng(config.SEED)
    gen = Generator(args.like, rng)
    results = json.loads(JSON.read_text()) if JSON.exists() else {}
    for n in args.sizes:
        directory = args.dir / f"pamir-bench-index-{n}"
        shutil.rmtree(directory, ignore_errors=True)
        args.dir.mkdir(parents=True, exist_ok=True)
        try:
            index, built = build(directory, n, gen, rng)
            print(n, built, flush=True)
            entry = {"build": built, "scores": gen.source, "k": K, "queries": REPEATS,
                     **run.info(), "prefix": command_prefix(),
                     "ta_limit": f"L / ({scores_mod.TA_DEPTH_DIVISOR} m^2) steps",
                     "ta_max_words": scores_mod.TA_MAX_WORDS, "block": scores_mod.BLOCK,
                     "boot_steps_per_result": scores_mod.BOOT_STEPS_PER_RESULT,
                     "order_clusters": scores_mod.ORDER_CLUSTERS}
            entry["mismatches_vs_brute"] = check_exact(index, rng)
            for w in (1, 2, 3):
                entry[str(w)] = time_queries(index, w, rng, "auto")
            entry["brute"] = {str(w): time_queries(index, w, rng, "brute") for w in (1, 2, 3)}
            entry["4"] = time_queries(index, 4, rng, "auto")
            # the fused scan of every column alone (what the block bounds let the search skip)
            entry["scan"] = {str(w): time_queries(index, w, rng, "scan") for w in (1, 2, 3, 4)}
            # The default again, now that brute force and the scan have read every row: at
            # 10M the index outgrows the page cache, and the first series after the build
            # reads matrix pages from disk (kept as "first_series").
            entry["first_series"] = {w: entry[w] for w in "1234"}
            for w in (1, 2, 3, 4):
                entry[str(w)] = time_queries(index, w, rng, "auto")
            entry["page_cache"] = "warm (every row read by the brute-force and scan series)"
            print(n, {w: entry[str(w)] for w in "1234"}, entry["brute"], "scan", entry["scan"],
                  flush=True)
            if args.cold and drop_caches():
                entry["cold"] = {str(w): time_queries(index, w, rng, "auto", warm=0)
                                 for w in (1, 2, 3)}
                drop_caches()
                entry["cold_brute"] = {str(w): time_queries(index, w, rng, "brute", warm=0)
                                       for w in (1, 2, 3)}
                print(n, "cold", entry["cold"], entry["cold_brute"], flush=True)
            index.close()
            if n in args.insertion_order:
                entry["insertion_order"] = insertion_order(directory, n, gen, rng)
                print(n, "insertion order", entry["insertion_order"], flush=True)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        results[str(n)] = entry
        write_json(JSON, results)
    write_report(results)


def cell(r: dict) -> str:
    return f"{r['median_ms']:.2f} ({r['p90_ms']:.2f})"


def side_by_side(intro: str, names: tuple[str, str], words: str, rows) -> list[str]:
    """Report lines: two timing series per size side by side (rows: (size, left, right)),
    or none without rows."""
    if not rows:
        return []
    head = " | ".join(f"{name} {words[0]} word ms | " + " | ".join(f"{w} words" for w in words[1:])
                      for name in names)
    lines = ["", intro, "", f"| pictures | {head} |", "|---:|" + "---:|" * 2 * len(words)]
    for n, left, right in rows:
        lines.append(f"| {int(n):,} | " + " | ".join(cell(left[w]) for w in words) + " | "
                     + " | ".join(cell(right[w]) for w in words) + " |")
    return lines


def write_report(results: dict) -> None:
    """results/index.md (and index.png) from index.json's entries."""
    (RESULTS / "index.md").write_text(report(results))
    plot(results, sorted(results, key=int))
    print("wrote", RESULTS / "index.md")


def report(results: dict) -> str:
    sizes = sorted(results, key=int)
    any_entry = results[sizes[-1]]
    lines = [
        # each size names its own run (command, date, load) below the machine
        *report_head("Index: query latency, build time and size (synthetic, Corel-like scores)",
                     {"machine": any_entry["machine"]},
                     note="single-threaded queries; shared with other engineers' work, load "
                          "averages below: timings are upper bounds"),
        ("Command (one run for every size): " if len({results[n]["date"] for n in sizes}) == 1
         else "Command (per size; the figures of each size come from its own run): ")
        + "; ".join(dict.fromkeys(f"`{results[n].get('prefix', '')} {results[n]['command']}` "
                                  f"({results[n]['date']})" for n in sizes))
        + "; load average at the start / end of each size: " + "; ".join(
            f"{int(n):,}: {results[n]['load_average']['start']} / "
            f"{results[n]['load_average']['end']}" for n in sizes) + ".  ",
        f"Scores: {any_entry['scores']}. Top-{K}, median (90th percentile) of "
        f"{REPEATS} random queries of 1, 2 and 3 words, after 5 warm-up queries, timed "
        "after the brute-force and scan series have read every row (page cache warm; the "
        "first series after the build is in index.json as `first_series`). *Default*: "
        "`Index.search` (the threshold algorithm on the sorted lists of each "
        "shard; where it is not sure within its limit, the scan of the blocks whose bounds "
        "can still beat the k-th score; settings below); *brute*: "
        "`Index.search(method=\"brute\")` (every score, np.argpartition). Both include the "
        "catalogue lookup of the 100 paths.", "",
        "| pictures | shards | default 1 word ms | 2 words | 3 words | brute 1 word ms "
        "| 2 words | 3 words | answers ≠ brute |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines.insert(-3, "Settings per size: " + "; ".join(
        f"{int(n):,}: " + (f"block bounds of {results[n]['block']} columns, TA of at most "
                           f"{results[n]['boot_steps_per_result']} k steps first"
                           + (", pictures in block order (the compaction's k-means of the "
                              f"score vectors, {results[n]['order_clusters']} clusters)"
                              if "order_clusters" in results[n] else
                              ", pictures in insertion order")
                           if "block" in results[n] else
                           f"no block bounds; TA limit {results[n].get('ta_limit', '?')}, "
                           f"queries of more than {results[n].get('ta_max_words', 4)} words "
                           "scanned whole") for n in sizes) + ".")
    lines.insert(-3, "")
    for n in sizes:
        e = results[n]
        lines.append(f"| {int(n):,} | {e['build']['shards']} | "
                     + " | ".join(cell(e[w]) for w in "123") + " | "
                     + " | ".join(cell(e["brute"][w]) for w in "123")
                     + f" | {e['mismatches_vs_brute']} of 20 |")
    pruned = [n for n in sizes if "block" in results[n]]
    lines += side_by_side(
        "What the block bounds save: the default search for 1-4 words beside the fused scan "
        "of every column of the query's rows (what the search did for 3+ words, and wherever "
        "the TA gave up, before the bounds); same index, same run.", ("default", "scan"),
        "1234", [(n, results[n], results[n]["scan"]) for n in pruned])
    unordered = [n for n in sizes if "insertion_order" in results[n]]
    lines += side_by_side(
        "What the block order saves: the default search on an index built the same way with "
        "the compaction's block order off (pictures in insertion order), same run.",
        ("block order", "insertion order"), "1234",
        [(n, results[n], results[n]["insertion_order"]) for n in unordered])
    cold = [n for n in sizes if "cold" in results[n]]
    lines += side_by_side(
        "Cold page cache (`echo 1 > /proc/sys/vm/drop_caches` before each series of 50 "
        "queries, no warm-up; later queries of a series find what earlier ones read):",
        ("default", "brute"), "123",
        [(n, results[n]["cold"], results[n]["cold_brute"]) for n in cold])
    lines += ["", "Build (bulk: `Index.add` in batches of 50,000, then `Index.compact()`) "
              "and size on disk:", "",
              "| pictures | add s | compact (order, sort) s | total s | matrix MB | "
              "sorted lists (+ bounds) MB "
              "| catalogue MB |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sizes:
        b = results[n]["build"]
        lines.append(f"| {int(n):,} | {b['add_s']} | {b['compact_s']} | {b['build_s']} | "
                     f"{b['matrix_mb']:,} | {b['lists_mb']:,} | {b['catalogue_mb']:,} |")
    return "\n".join(lines) + "\n"


def plot(results: dict, sizes) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    x = [int(n) for n in sizes]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for w, colour in zip("123", ("tab:blue", "tab:orange", "tab:green")):
        ax.plot(x, [results[n][w]["median_ms"] for n in sizes], "o-", color=colour,
                label=f"{w} word{'s' if w != '1' else ''}, sorted lists + block bounds")
        ax.plot(x, [results[n]["brute"][w]["median_ms"] for n in sizes], "s--", color=colour,
                alpha=0.6, label=f"{w} word{'s' if w != '1' else ''}, brute force")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pictures in the index")
    ax.set_ylabel("median query latency, top 100 (ms)")
    ax.set_title("pamir search latency (warm page cache, one core)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "index.png", dpi=110)


if __name__ == "__main__":
    main()
