"""Is the small-folder rule right at N captioned pictures? (issue 35)

    PAMIR_CACHE=CACHE flock /tmp/pamir-heavy.lock python benchmarks/bench_folder_rule.py \
        [--pictures 1500] [--seeds 0 1 2]

`pamir fit` on fewer than SMALL_FOLDER_PICTURES captioned pictures fits the richest default
representation alone, with the model's own parameters (one fit); from there up it races the
six candidates times the c grid (18 fits). This measures both paths at one folder size: for
each seed, N of Corel 5k's 4,000 training pictures (seeded) stand for a person's captioned
folder, split by pamir's own protocol (a tenth validation); `fit_system` runs once as it
does today and once with the rule raised past N (the product's small-folder path, exactly);
both whole systems (neighbours and prior included) are judged on Corel's 500 validation
pictures and their queries, which neither fit saw. Fit seconds are wall time in this
process, the features cached in PAMIR_CACHE beforehand (a warm cache: `pamir fit corel5k`).

Writes results/folder_rule.json and .md.
"""

from __future__ import annotations

import time

import numpy as np

from common.harness import Run, parser, report_head, save_report

from pamir import config
from pamir.data import Collection
from pamir.facts.collection import load_collection
from pamir.evaluation.significance import wilcoxon
from pamir.protocol import Protocol
from pamir.system import evaluate_system
from pamir.training import candidates, fit_system


def folder(corel: Collection, pool: np.ndarray, n: int, seed: int) -> Collection:
    """n of the pool's pictures, seeded, as a captioned folder (every picture training)."""
    pick = np.sort(np.random.default_rng(seed).choice(pool, n, replace=False))
    return Collection(f"corel-{n}-seed{seed}", corel.root, [corel.ids[i] for i in pick],
                      [corel.paths[i] for i in pick], [corel.captions[i] for i in pick],
                      ["train"] * n)


def path(sub: Collection, corel: Collection, one_fit: bool) -> dict:
    """fit_system as `pamir fit` runs it (one_fit: with the small-folder rule raised past the
    folder), judged on Corel's validation pictures."""
    rule = candidates.SMALL_FOLDER_PICTURES
    if one_fit:
        candidates.SMALL_FOLDER_PICTURES = len(sub) + 1
    try:
        started = time.perf_counter()
        system = fit_system(sub, "pamir", progress=False, log=None,
                            cache_dir=config.default_cache_dir())
        seconds = time.perf_counter() - started
    finally:
        candidates.SMALL_FOLDER_PICTURES = rule
    ev = evaluate_system(system, corel, "valid")["evaluation"]
    return {"seconds": round(seconds, 1), "representation": system.info["representation"],
            "c": system.info["params"].get("c"), "own_valid_avgp": system.info["valid_avgp"],
            "corel_valid_avgp": round(100 * ev.mean("avgp"), 2),
            "per_query": [round(float(v), 5) for v in ev.per_query["avgp"]]}


def report(r: dict) -> str:
    rows = ["| seed | path | fit | chosen | its own validation | Corel's validation AvgP |",
            "|---:|---|---:|---|---:|---:|"]
    for s in r["seeds"]:
        for name in ("race", "one fit"):
            p = s[name]
            rows.append(f"| {s['seed']} | {name} | {p['seconds']:.0f} s | "
                        f"{p['representation']} c={p['c']} | {p['own_valid_avgp']:.2f} | "
                        f"{p['corel_valid_avgp']:.2f} |")
    d = r["difference"]
    return "\n".join(report_head(f"The small-folder rule at {r['pictures']:,} captioned "
                                 "pictures (issue 35)", r) + [
        "",
        f"Each seed: {r['pictures']:,} of Corel 5k's training pictures as a captioned folder "
        "(pamir's protocol: a tenth validation); `fit_system` as today (the race of 18 fits) "
        "and with the small-folder rule raised past it (one fit of the richest "
        "representation); each whole system judged on Corel's 500 validation pictures and "
        f"{r['queries']:,} queries, which neither saw.", "", *rows, "",
        f"One fit minus the race, Corel validation AvgP: {d['mean']:+.2f} on average (per "
        f"seed {', '.join(f'{v:+.2f}' for v in d['per_seed'])}); per query, all seeds "
        f"pooled: Wilcoxon p = {d['wilcoxon']['pvalue']:.3g}. Fit time: {d['seconds_race']:.0f} s "
        f"against {d['seconds_one_fit']:.0f} s on average.", ""])


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--pictures", type=int, default=1500)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args(argv)
    run = Run("bench_folder_rule.py", argv)
    corel = load_collection("corel5k")
    pool = Protocol(corel).train
    seeds = []
    for seed in args.seeds:
        sub = folder(corel, pool, args.pictures, seed)
        seeds.append({"seed": seed, "race": path(sub, corel, False),
                      "one fit": path(sub, corel, True)})
        print(seeds[-1]["race"]["corel_valid_avgp"], seeds[-1]["one fit"]["corel_valid_avgp"],
              flush=True)
    a = np.concatenate([s["one fit"]["per_query"] for s in seeds])
    b = np.concatenate([s["race"]["per_query"] for s in seeds])
    diff = [s["one fit"]["corel_valid_avgp"] - s["race"]["corel_valid_avgp"] for s in seeds]
    r = {**run.info(), "pictures": args.pictures, "queries": len(seeds[0]["race"]["per_query"]),
         "seeds": seeds,
         "difference": {"mean": round(float(np.mean(diff)), 2),
                        "per_seed": [round(v, 2) for v in diff], "wilcoxon": wilcoxon(a, b),
                        "seconds_race": float(np.mean([s["race"]["seconds"] for s in seeds])),
                        "seconds_one_fit": float(np.mean([s["one fit"]["seconds"]
                                                          for s in seeds]))}}
    save_report("folder_rule", r, report)


if __name__ == "__main__":
    main()
