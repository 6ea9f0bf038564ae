"""A cheaper visterm codebook (issue 24): what fewer k-means iterations or fewer sampled blocks
save in seconds and cost in validation AvgP, on Corel 5k.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_visterm_codebook.py

For each codebook setting (FeatureSettings.kmeans_iterations, kmeans_max_blocks; the
default is 20 iterations on every training block, 308,000), the visterm pipeline is fitted
on Corel's 4,000 training pictures (blocks from PAMIR_CACHE; the k-means and the bags are
timed), then PAMIR is trained with early stopping on validation, one seed, on the visterms
alone (c = 0.1, their best on the grid) and on the default winner cnn+cnn-lite1+cnn-lite2+
visterms (c = 1.0), the CNN parts read from the cache. Validation AvgP only (all 2,028
validation queries): the test pictures are not read. The default setting is not refitted:
`--baseline MODEL` (a `pamir fit corel5k` made on the same cache: the same fits, seed 0,
deterministic) gives its two validation AvgPs, and the cached pipeline its k-means and bag
seconds, as recorded when it was made. Results: results/visterm_codebook.json and .md.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common.harness import Run, parser, report_head, save_report

from pamir import config
from pamir.facts.collection import load_collection
from pamir.features import FeatureSettings
from pamir.features.collection import collection_features
from pamir.features.representation import take_rows
from pamir.models.pamir import PAMIR
from pamir.protocol import Protocol
from pamir.training import collection_inputs

WIDE = "cnn+cnn-lite1+cnn-lite2+visterms"
#: (k-means iterations, most blocks sampled): the default first
VARIANTS = ((5, 500_000), (10, 100_000))


def one(col, protocol, iterations: int, most_blocks: int) -> dict:
    settings = FeatureSettings(kmeans_iterations=iterations, kmeans_max_blocks=most_blocks)
    t0 = time.perf_counter()
    X, _, pipe = collection_features(col, protocol.train, settings,
                                     cache_dir=config.default_cache_dir(), progress=False)
    wall = time.perf_counter() - t0
    W, _, _ = collection_inputs(col, protocol, WIDE, settings, weights=(1.0,) * 4,
                                progress=False, log=None)
    tr, va = protocol.train, protocol.valid
    Yt, Yv = protocol.presence(tr), protocol.presence(va)

    def fit(args):
        F, c = args
        started = time.perf_counter()
        m = PAMIR(c=c).fit(take_rows(F, tr), Yt, validation=(take_rows(F, va), Yv))
        return {"valid_avgp": round(100 * m.best_valid_avgp_, 3),
                "best_update": int(m.best_update_),
                "seconds": round(time.perf_counter() - started, 1)}

    with ThreadPoolExecutor(2) as pool:
        alone, wide = pool.map(fit, [(X, 0.1), (W, 1.0)])
    return {"kmeans_iterations": iterations, "kmeans_max_blocks": most_blocks,
            "fit_seconds": getattr(pipe, "fit_seconds_", {}), "wall_seconds": round(wall, 1),
            "objective": float(pipe.objective_[-1]) if len(pipe.objective_) else None,
            "visterms_c0.1": alone, f"{WIDE}_c1.0": wide}


def baseline(col, protocol, model: Path) -> dict:
    """The default codebook's record: its pipeline's seconds (from the cache) and the two
    fits' validation AvgP from a `pamir fit corel5k` model's grid."""
    settings = FeatureSettings()
    _, _, pipe = collection_features(col, protocol.train, settings,
                                     cache_dir=config.default_cache_dir(), progress=False)
    info = json.loads((model / "model.json").read_text())["info"]
    got = {(r["representation"], c["params"]["c"]): c["valid_avgp"]
           for r in info["representations"] for c in r["curves"]}
    return {"kmeans_iterations": settings.kmeans_iterations,
            "kmeans_max_blocks": settings.kmeans_max_blocks,
            "fit_seconds": getattr(pipe, "fit_seconds_", {}), "from": str(model),
            "objective": float(pipe.objective_[-1]),
            "visterms_c0.1": {"valid_avgp": got[("visterms", 0.1)]},
            f"{WIDE}_c1.0": {"valid_avgp": got[(WIDE, 1.0)]}}


def report(r: dict) -> str:
    lines = [*report_head("A cheaper visterm codebook: seconds saved, validation AvgP lost "
                          "(Corel 5k)", r, note=None),
             "Validation AvgP (2,028 queries, one seed, early stopping); the test pictures are "
             "not read. Noise: about ±1.5 AvgP between settings on these 500 pictures.\n",
             "| k-means iterations | blocks sampled (at most) | k-means s | bags s | final "
             "objective | visterms alone (c=0.1) | four-part (c=1.0) |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for v in r["variants"]:
        fs = v["fit_seconds"]
        lines.append(f"| {v['kmeans_iterations']} | {v['kmeans_max_blocks']:,} | "
                     f"{fs.get('kmeans', float('nan')):.0f} | {fs.get('bags', float('nan')):.0f} | "
                     f"{v['objective']:,.0f} | {v['visterms_c0.1']['valid_avgp']:.2f} | "
                     f"{v[f'{WIDE}_c1.0']['valid_avgp']:.2f} |")
    lines.append("\nThe default's row is not refitted (module docstring): its seconds are those "
                 "recorded when the shared cache was made, under another load; the final "
                 "objective sums over the blocks sampled, so it compares only at equal samples. "
                 "The assignment of every training block to its nearest visterm is in 'bags'.\n")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--variants", nargs="+", default=[f"{i}:{b}" for i, b in VARIANTS],
                    help="ITERATIONS:MAX_BLOCKS pairs")
    ap.add_argument("--baseline", type=Path, default=Path("/work/models/corel5k-train"),
                    help="a `pamir fit corel5k` model made on this cache (default settings)")
    args = ap.parse_args(argv)
    col = load_collection("corel5k")
    protocol = Protocol(col)
    run = Run("bench_visterm_codebook.py", argv)
    r = {**run.info(), "variants": [baseline(col, protocol, args.baseline)]}
    for v in args.variants:
        iterations, most = (int(x) for x in v.split(":"))
        print(f"{iterations} iterations, at most {most:,} blocks ...", flush=True)
        r["variants"].append(one(col, protocol, iterations, most))
        r["load_average"] = run.info()["load_average"]
        save_report("visterm_codebook", r, report)


if __name__ == "__main__":
    main()
