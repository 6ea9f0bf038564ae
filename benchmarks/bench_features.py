"""Speed of the visual features on Corel 5k (issue 3).

    flock /tmp/pamir-heavy.lock python benchmarks/bench_features.py [--skip-kmeans]

Measures, on this machine:
- where the time of one picture goes (single thread): read + content hash, JPEG decode,
  grey + uniform LBP, colour lookup, per-block counting;
- block descriptors of the 5,000 Corel pictures (192x128), no cache, 1 and 2 threads;
- the same at 384x256 (the papers' resolution) on 1,000 pictures upsampled 2x and saved as
  JPEG (64-px blocks every 32 px, 77 blocks), 2 threads;
- a second run from the feature cache;
- the default pipeline on the 4,000 training pictures (protocol.train): the 10,000-visterm
  faiss k-means (time, objective per iteration) and the bags of all 5,000 pictures. The fitted
  pipeline and bags are stored in the shared cache (config.default_cache_dir()), where
  `corel5k_features()` finds them.

Writes benchmarks/results/features.md and features.json. Other processes on the machine
slow every figure down: the load average at the start and end is recorded with them.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from common.harness import RESULTS, Run, load_clause, parser, report_head, save_report
from pamir import config
from pamir.facts.collection import load_collection
from pamir.features import FeatureSettings, extract_blocks
from pamir.features.blocks import _colour_codes, _grey, block_histograms
from pamir.features.collection import collection_features, colour_codebook_for
from pamir.features.images import content_hash, decode_rgb, read_bytes
from pamir.features.lbp import circle, code_table, lbp_codes
from pamir.protocol import Protocol


def run_info(r: dict) -> dict:
    """The run's command, machine, date and load average as common.harness.report_head reads them.
    Results measured before this script used common.harness.Run (features.json of 2026-11-23) store
    the machine as a dict {cpu, nproc, python, load_average} and the load at the end apart,
    in machine_end: they are read as they are, not rewritten."""
    m = r["machine"]
    if not isinstance(m, dict):
        return r
    return {"command": r["command"], "date": r["date"],
            "machine": f"{m['cpu']}, {m['nproc']} cores, Python {m['python']}",
            "load_average": {"start": m["load_average"], "end": r["machine_end"]["load_average"]}}


def stage_times(paths, settings, codebook) -> dict:
    """Milliseconds per picture for each stage, one thread."""
    rp, cp = circle(settings.lbp_points, settings.lbp_radius)
    table = code_table(settings.lbp_points)
    t = dict.fromkeys(("read_hash", "decode", "grey_lbp", "colour", "all_kernels"), 0.0)
    for p in paths:
        t0 = time.perf_counter()
        data = read_bytes(p)
        content_hash(data)
        t1 = time.perf_counter()
        rgb = decode_rgb(data, settings.short_side)
        t2 = time.perf_counter()
        lbp_codes(_grey(rgb), rp, cp, table)
        t3 = time.perf_counter()
        _colour_codes(rgb, codebook.lut)
        t4 = time.perf_counter()
        block_histograms(rgb, settings, codebook)
        t5 = time.perf_counter()
        for k, v in zip(t, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
            t[k] += v
    ms = {k: 1e3 * v / len(paths) for k, v in t.items()}
    # block_histograms = grey + LBP + colour + counting (+ grid and allocation)
    ms["count_blocks"] = max(0.0, ms["all_kernels"] - ms["grey_lbp"] - ms["colour"])
    ms["total"] = ms["read_hash"] + ms["decode"] + ms["all_kernels"]
    return {k: round(v, 3) for k, v in ms.items()}


def extraction(paths, settings, codebook, n_jobs, cache_dir=None) -> dict:
    cpu0 = time.process_time()
    blocks = extract_blocks(paths, settings, codebook, cache_dir=cache_dir, n_jobs=n_jobs,
                            progress=False)
    out = blocks.summary()
    out["cpu_seconds"] = round(time.process_time() - cpu0, 2)
    out["n_jobs"] = n_jobs
    return out


def assignment_speed(collection, protocol, settings) -> dict:
    """One exhaustive nearest-codeword pass over the training blocks: the work of one k-means
    iteration (faiss: a (blocks x dim) by (dim x K) matrix product, then an argmin)."""
    X, ok, pipe = collection_features(collection, protocol.train, settings,
                                      cache_dir=config.default_cache_dir(), progress=False)
    blocks = extract_blocks([collection.paths[i] for i in protocol.train], settings,
                            pipe.colour_codebook_, cache_dir=config.default_cache_dir(),
                            progress=False)
    x = pipe._scale(blocks.counts())
    assigner = pipe.assigner
    wall, cpu = time.perf_counter(), time.process_time()
    assigner(x)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    flop = 2.0 * len(x) * x.shape[1] * len(pipe.codebook_)
    return {"blocks": len(x), "k": len(pipe.codebook_), "dim": int(x.shape[1]),
            "seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
            "gflop": round(flop / 1e9, 1), "gflop_per_second": round(flop / 1e9 / wall, 1)}


def knn_sanity(protocol, X) -> dict:
    """AvgP of the 100 nearest training pictures voting their captions (cosine on the bags):
    a model-free check that the bags carry the signal the first calibration run found
    (17.3 test AvgP with sqrt-scaled blocks). A check, not a selection: nothing is tuned on it."""
    from pamir.evaluation import mean_average_precision

    Y = protocol.presence(protocol.train)
    out = {}
    for split in ("valid", "test"):
        idx = protocol.split(split)
        nearest = np.argsort(-(X[idx] @ X[protocol.train].T).toarray(), axis=1)[:, :100]
        Z = np.stack([np.asarray(Y[row].sum(0)).ravel() for row in nearest])
        qs = protocol.queries(split)
        out[split] = round(100 * mean_average_precision(Z, protocol.query_vectors(qs),
                                                        qs.relevance), 1)
    return out


def upsampled(paths, folder: Path) -> list[Path]:
    out = []
    for p in paths:
        im = Image.open(p).convert("RGB")
        big = im.resize((im.width * 2, im.height * 2), Image.Resampling.BILINEAR)
        q = folder / f"{Path(p).stem}.jpg"
        big.save(q, quality=90)
        out.append(q)
    return out


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--skip-kmeans", action="store_true", help="only the block descriptors")
    ap.add_argument("--large", type=int, default=1000, help="pictures for the 384x256 run")
    args = ap.parse_args()
    run = Run("bench_features.py")
    collection = load_collection("corel5k")
    protocol = Protocol(collection)
    settings = FeatureSettings()
    paths = collection.paths
    res: dict = {**run.info(), "settings": settings.to_dict()}

    t0 = time.perf_counter()
    codebook = colour_codebook_for(collection, protocol.train, settings, cache_dir=None)
    res["colour_codebook_fit_seconds"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    codebook.lut
    res["colour_lut_build_seconds"] = round(time.perf_counter() - t0, 2)
    extract_blocks(paths[:8], settings, codebook, progress=False)  # compile / load kernels

    print("stages ...", flush=True)
    res["stages_ms_per_picture_192x128"] = stage_times(paths[:500], settings, codebook)
    print(res["stages_ms_per_picture_192x128"], flush=True)
    res["corel5k_192x128"] = {}
    for n_jobs in (1, 2):
        print(f"extraction, {n_jobs} thread(s) ...", flush=True)
        res["corel5k_192x128"][f"threads_{n_jobs}"] = r = extraction(paths, settings, codebook, n_jobs)
        print(r, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        extraction(paths, settings, codebook, 2, cache_dir=cache)
        res["corel5k_192x128"]["from_cache"] = r = extraction(paths, settings, codebook, 2, cache)
        print("from cache", r, flush=True)
        big = upsampled(paths[: args.large], Path(tmp))
        native = settings.replace(short_side=None)
        res["stages_ms_per_picture_384x256"] = stage_times(big[:200], native, codebook)
        res["upsampled_384x256"] = r = extraction(big, native, codebook, 2)
        print("384x256", res["stages_ms_per_picture_384x256"], r, flush=True)

    if not args.skip_kmeans:
        print("pipeline fit (10,000-visterm k-means) ...", flush=True)
        t0 = time.perf_counter()
        X, ok, pipe = collection_features(collection, protocol.train, settings,
                                          cache_dir=config.default_cache_dir(), refit=True,
                                          progress=False)
        total = time.perf_counter() - t0
        obj = pipe.objective_
        n_blocks = 77 * int(ok[protocol.train].sum())
        res["visterms"] = {
            "k": settings.n_visterms, "iterations": settings.kmeans_iterations,
            "training_blocks": n_blocks, "scaling": settings.scaling,
            "fit_seconds": pipe.fit_seconds_, "total_seconds_incl_transform_all": round(total, 1),
            "objective_per_iteration": [float(v) for v in obj],
            "objective_final": float(obj[-1]),
            "objective_per_block": float(obj[-1] / n_blocks),
            "bags_nnz_per_picture": round(X.nnz / X.shape[0], 1),
            "pictures_ok": int(ok.sum()),
        }
        print(res["visterms"], flush=True)
    elif (RESULTS / "features.json").exists():  # keep the last k-means measurement
        previous = json.loads((RESULTS / "features.json").read_text())
        if "visterms" in previous:
            res["visterms"] = {"measured": previous["date"], "command": previous["command"],
                               "load_average": run_info(previous)["load_average"],
                               **previous["visterms"]}
    res["assignment"] = assignment_speed(collection, protocol, settings)
    X, _, _ = collection_features(collection, protocol.train, settings,
                                  cache_dir=config.default_cache_dir(), progress=False)
    res["knn_vote_avgp"] = knn_sanity(protocol, X)
    print("kNN vote AvgP", res["knn_vote_avgp"], flush=True)
    print("assignment", res["assignment"], flush=True)
    res["load_average"] = run.info()["load_average"]
    save_report("features", res, report)


def kmeans_load(load) -> str:
    """The load of a k-means run kept from an earlier run: {start, end}, or the [start, end]
    pair of os.getloadavg() lists that runs before common.harness.Run kept."""
    return load_clause(load if isinstance(load, dict) else {"start": load[0], "end": load[1]})


def report(r: dict) -> str:
    c = r["corel5k_192x128"]
    s192, s384 = r["stages_ms_per_picture_192x128"], r["stages_ms_per_picture_384x256"]
    lines = [
        *report_head("Visual features: speed on Corel 5k", run_info(r),
                     note="other developers' jobs share the 2 cores: wall times are upper bounds"),
        "",
        "## Block descriptors (uniform LBP 59 + colour 50 per block, 77 blocks per picture)",
        "",
        "| run | pictures | threads | seconds | pictures/s | CPU s |",
        "|---|---|---|---|---|---|",
    ]
    for name, key in (("192x128, no cache", "threads_1"), ("192x128, no cache", "threads_2"),
                      ("192x128, from the cache", "from_cache")):
        x = c[key]
        lines.append(f"| {name} | {x['pictures']:,} | {x['n_jobs']} | {x['seconds']:.1f} | "
                     f"{x['pictures_per_second']:,.0f} | {x['cpu_seconds']:.1f} |")
    x = r["upsampled_384x256"]
    lines.append(f"| 384x256 (2x upsampled JPEGs), no cache | {x['pictures']:,} | 2 | "
                 f"{x['seconds']:.1f} | {x['pictures_per_second']:,.0f} | {x['cpu_seconds']:.1f} |")
    lines += [
        "",
        f"Colour codebook (k-means, 50 colours, 256k pixels of 1,000 training pictures): "
        f"{r['colour_codebook_fit_seconds']} s; its 2^24-entry lookup table: "
        f"{r['colour_lut_build_seconds']} s (then cached on disk).",
        "",
        "### Where one picture's time goes (ms, one thread)",
        "",
        "| stage | 192x128 | 384x256 |",
        "|---|---|---|",
    ]
    for k, label in (("read_hash", "read file + content hash (blake2b)"),
                     ("decode", "JPEG decode (Pillow) + EXIF + to RGB"),
                     ("grey_lbp", "grey + uniform LBP(8,2) (numba)"),
                     ("colour", "colour codes (lookup table)"),
                     ("count_blocks", "per-block counting (77 blocks)"),
                     ("total", "total")):
        lines.append(f"| {label} | {s192[k]:.2f} | {s384[k]:.2f} |")
    if "visterms" in r:
        v = r["visterms"]
        f = v["fit_seconds"]
        lines += [
            "",
            "## Visterm codebook (faiss k-means) and bags",
            "",
            (f"(Measured by `{v['command']}` on {v['measured']}, {kmeans_load(v['load_average'])}: "
             "other jobs shared the cores.)\n\n" if "measured" in v else "")
            + f"K = {v['k']:,} codewords on the {v['training_blocks']:,} blocks of the "
            f"{v['training_blocks'] // 77:,} training pictures (protocol.train), "
            f"{v['scaling']} scaling, {v['iterations']} iterations:",
            "",
            f"- k-means: **{f['kmeans']:.0f} s** "
            f"({f['kmeans'] / v['iterations']:.1f} s an iteration);",
            f"- objective (sum of squared distances to the nearest codeword): "
            f"{v['objective_final']:.4g}, {v['objective_per_block']:.2f} per block; after "
            "iterations 1, 5, 10, 15, 20: "
            + ", ".join(f"{v['objective_per_iteration'][i - 1]:.5g}" for i in (1, 5, 10, 15, 20)
                        if i <= len(v["objective_per_iteration"])) + ";",
            f"- the whole pipeline fit: colour codebook {f['colour_codebook']:.1f} s (0: read "
            "from the cache), training "
            f"blocks {f['blocks']:.1f} s, k-means {f['kmeans']:.0f} s, training bags "
            f"{f['bags']:.1f} s; with the bags of all 5,000 pictures "
            f"{v['total_seconds_incl_transform_all']:.0f} s;",
            f"- bags: {v['bags_nnz_per_picture']} visterms per picture on average "
            f"({v['pictures_ok']:,} pictures read).",
        ]
    a = r.get("assignment")
    lines += [] if not a else [
        "",
        f"One exhaustive assignment pass (the work of one k-means iteration): {a['blocks']:,} "
        f"blocks x {a['k']:,} codewords x {a['dim']} dimensions = {a['gflop']:,.0f} GFLOP in "
        f"{a['seconds']:.1f} s wall, {a['cpu_seconds']:.1f} s CPU "
        f"({a['gflop_per_second']:.0f} GFLOP/s).",
    ]
    if "knn_vote_avgp" in r:
        k = r["knn_vote_avgp"]
        lines += ["", "## Sanity check of the bags", "",
                  f"The 100 nearest training pictures (cosine on the bags) voting their captions: "
                  f"AvgP {k['valid']} on validation, {k['test']} on test queries (the first "
                  "calibration run, benchmarks/results/defaults.md: 17.3 test with sqrt-scaled blocks, random scores 1.6). A "
                  "check that the bags carry the signal, not a selection: nothing is tuned on it."]
    lines += ["", "## What dominates, and why", "", WHY, ""]
    return "\n".join(lines)


WHY = """\
**The visterm k-means dominates everything.** Each iteration assigns every training block to
its nearest codeword exhaustively: 308,000 x 10,000 distances in 109 dimensions, which faiss
computes as one matrix product (|x|^2 + |c|^2 - 2 x.c, about 670 GFLOP) plus an argmin. That is
pure floating-point work, bound by the two cores' FMA units (sgemm); 20 iterations are 20 such
products, so the codebook costs 20 assignment passes (20 times the pass timed above, plus
the centroid updates), and the bags of all pictures one more. It only parallelises over
cores, so other jobs on the machine stretch it directly: the load average printed at the top
says how busy the cores were (a run at load 4.5 took 291 s where a quieter one took 135). The
objective is within 0.6% of its 20-iteration value after 10 iterations
(`FeatureSettings(kmeans_iterations=10)` halves the time) and within 0.1% after 15.

**Block descriptors are cheap by comparison.** Per picture the work is a JPEG decode
(libjpeg-turbo through Pillow, the largest single stage at 192x128), the uniform LBP (8
bilinear samples per pixel, a numba loop vectorised along rows: 13x faster than
scikit-image's per-pixel loop, same codes), one lookup per pixel into the 2^24-entry colour
table (a random read into 16 MiB, so mostly cache misses, still far cheaper than 50 distances)
and the per-block counting (each pixel lies in up to 4 overlapping blocks: ~158k scattered
increments a picture). All of these scale with the number of pixels: 384x256 costs about 4x
per picture. Two threads give less than 2x because the per-picture Python glue (opening the
file, hashing its bytes, Pillow objects, small numpy allocations) holds the GIL; the compiled
kernels and libjpeg release it. From the cache, a picture costs a file read, a blake2b hash
of its bytes (the cache key is the content, so it must be read) and a small .npy load.
"""


if __name__ == "__main__":
    main()
