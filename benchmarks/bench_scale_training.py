"""PAMIR trained from features on disk in chunks: a synthetic 1M-picture training set (issue 14).

    flock /tmp/pamir-heavy.lock python benchmarks/bench_scale_training.py \
        [--pictures 1000000] [--chunk 100000] [--dir /work/bench-data/scale-training]

The planted structure: T words with Zipf-like frequencies; each picture is captioned by 1-3
of them; its features (D float32, unit L2) are a fixed random rank-r map of its caption words
plus Gaussian noise. PAMIR can learn the map; random scores cannot. The set is written once
(in a child process, so that its memory is not this process's) as FeatureChunks of `--chunk`
pictures, then pamir_chunks.fit_chunks trains PAMIR from it, memory-mapped, with early stopping on a
validation set drawn from the same distribution (in memory). Reported: validation AvgP of the
model, of random scores and of the planted map used as W, the peak RSS of the
training process (resource.getrusage) against the size of the set on disk, and the times.

Results: benchmarks/results/scale_training.{md,json}. The data set is not committed.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp


from common.harness import RESULTS, Run, parser, report_head, write_json

T, D, RANK, NOISE, SEED = 150, 256, 24, 3.0, 0


def planted_map() -> np.ndarray:
    rng = np.random.default_rng(SEED)
    M = rng.normal(size=(T, RANK)) @ rng.normal(size=(RANK, D))
    return M / np.linalg.norm(M, axis=1, keepdims=True)


def draw(n: int, seed: int) -> tuple[np.ndarray, sp.csr_matrix]:
    """n pictures: (X n x D float32 unit rows, Y n x T caption presence)."""
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, T + 1) ** 0.8
    p /= p.sum()
    k = rng.integers(1, 4, n)  # 1-3 words
    words = rng.choice(T, (n, 3), p=p)
    keep = np.arange(3)[None, :] < k[:, None]
    rows = np.repeat(np.arange(n), 3).reshape(n, 3)[keep]
    Y = sp.csr_matrix((np.ones(len(rows)), (rows, words[keep])), shape=(n, T))
    Y.sum_duplicates()
    Y.data[:] = 1.0
    X = np.asarray(Y @ planted_map()) + NOISE / np.sqrt(D) * rng.normal(size=(n, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X.astype(np.float32), Y


def generate(folder: Path, pictures: int, chunk: int) -> None:
    from pamir.models.pamir_chunks import FeatureChunks

    store = FeatureChunks.create(folder, dim=D, words=T)
    for k, lo in enumerate(range(0, pictures, chunk)):
        store.append(*draw(min(chunk, pictures - lo), seed=1000 + k))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--pictures", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=100_000)
    ap.add_argument("--valid", type=int, default=2_000)
    ap.add_argument("--updates", type=int, default=5_000_000)
    ap.add_argument("--eval-every", type=int, default=250_000)
    ap.add_argument("--dir", default="/work/bench-data/scale-training")
    ap.add_argument("--generate-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    folder = Path(args.dir) / f"{args.pictures}-{args.chunk}"
    if args.generate_only:
        generate(folder, args.pictures, args.chunk)
        return
    run = Run("bench_scale_training.py", argv)
    t0 = time.perf_counter()
    if not (folder / "chunks.json").exists():
        subprocess.run([sys.executable, __file__, *(argv if argv is not None else sys.argv[1:]),
                        "--generate-only"], check=True)
    generate_s = time.perf_counter() - t0

    from pamir.evaluation import mean_average_precision
    from pamir.models.base import TrainingQueries
    from pamir.models.pamir import PAMIR
    from pamir.models.pamir_chunks import FeatureChunks, fit_chunks

    store = FeatureChunks(folder)
    disk_mb = sum(f.stat().st_size for f in folder.iterdir()) / 2**20
    Xv, Yv = draw(args.valid, seed=1)
    rss_before = peak_rss_mb()
    model = PAMIR(n_updates=args.updates, eval_every=args.eval_every, patience=4)
    t0 = time.perf_counter()
    fit_chunks(model, store, validation=(Xv, Yv))
    train_s = time.perf_counter() - t0
    rss_peak = peak_rss_mb()

    q = TrainingQueries(Yv, idf_weights=model.idf_)

    def avgp(W) -> float:
        return round(100 * mean_average_precision(Xv @ np.asarray(W, np.float64).T, q.vectors,
                                                  q.relevance), 2)

    out = {
        "info": run.info(),
        "data": {"pictures": store.pictures, "chunks": len(store), "chunk_pictures": args.chunk,
                 "dim": D, "words": T, "rank": RANK, "noise": NOISE, "disk_mb": round(disk_mb, 1),
                 "valid_pictures": args.valid, "valid_queries": len(q)},
        "valid_avgp": {"pamir": avgp(model.W_),
                       "random": avgp(np.random.default_rng(7).normal(size=model.W_.shape)),
                       "planted_map": avgp(planted_map())},
        "pamir": {"n_updates": model.n_updates_, "best_update": model.best_update_,
                  "chunk_visits": model.chunk_visits_,
                  "updates_per_second": round(model.updates_per_second_),
                  "history": model.history_},
        "peak_rss_mb": {"before_training": round(rss_before, 1), "training": round(rss_peak, 1)},
        "seconds": {"generate": round(generate_s, 1), "train": round(train_s, 1),
                    "updates_only": round(model.train_seconds_, 1)},
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "scale_training.json"
    runs = json.loads(path.read_text())["runs"] if path.exists() else {}
    runs[str(store.pictures)] = out  # one entry per size: peak RSS against the set's size
    write_json(path, {"runs": runs})
    text = "\n".join(report(runs[k]) for k in sorted(runs, key=int, reverse=True))
    (RESULTS / "scale_training.md").write_text(text)
    print(report(out))


def report(out: dict) -> str:
    d, a, m = out["data"], out["valid_avgp"], out["pamir"]
    lines = report_head(f"PAMIR trained from disk: a synthetic {d['pictures']:,}-picture set",
                        out["info"])
    lines += ["",
              f"{d['pictures']:,} captioned pictures ({d['words']} words, 1-3 per caption, "
              f"Zipf-like), {d['dim']} float32 features each: a random rank-{d['rank']} map "
              f"of the caption words (unit rows) plus Gaussian noise of norm ~{d['noise']}, unit L2. Stored "
              f"as {d['chunks']} FeatureChunks of {d['chunk_pictures']:,} pictures: "
              f"**{d['disk_mb']:,.0f} MB on disk**; PAMIR.fit_chunks reads them "
              "memory-mapped, one chunk open at a time. Validation: "
              f"{d['valid_pictures']:,} pictures of the same distribution, "
              f"{d['valid_queries']:,} queries (every subset of a caption).", "",
              "| scores | validation AvgP (%) |", "|---|---|",
              f"| PAMIR (fit_chunks, early-stopped) | **{a['pamir']:.2f}** |",
              f"| random W | {a['random']:.2f} |",
              f"| the planted map as W (for reference) | {a['planted_map']:.2f} |", "",
              f"Peak RSS of the training process: **{out['peak_rss_mb']['training']:,.0f} MB** "
              f"({out['peak_rss_mb']['before_training']:,.0f} MB before training: Python, "
              "numpy, numba, the validation set), against "
              f"{d['disk_mb']:,.0f} MB of training features.", "",
              f"Time: training {out['seconds']['train']:.0f} s ({m['n_updates']:,} updates, "
              f"{out['seconds']['updates_only']:.0f} s of them in the PA steps, "
              f"{m['updates_per_second']:,} updates/s; best at {m['best_update']:,}; "
              f"{m['chunk_visits']} chunk visits; the rest: each chunk's queries on its first "
              "visit, validation), generating the set "
              f"{out['seconds']['generate']:.0f} s (0 when it was already on disk).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
