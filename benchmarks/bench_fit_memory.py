"""How `pamir fit`'s peak memory grows with the pictures (issue 35): the README's main fit
(`--ensemble 3 --retrain`, every default representation) on Corel 5k subsets.

    PAMIR_CACHE=DIR flock /tmp/pamir-heavy.lock python benchmarks/bench_fit_memory.py \
        [--train 1000 2000 4000] [--ensemble 3] [--no-retrain] [--before COMMIT]
        [--updates N]

Each size is a Corel 5k collection with a seeded sample of its 4,500 development pictures
(N training pictures plus the validation split pamir.protocol makes of them: a tenth below
2,500, else 500) and all 500 test pictures; 4,000 is the whole of Corel 5k. Each fit runs
in a fresh process (`--one`), and its peak resident memory is the process's ru_maxrss
(what `/usr/bin/time -v` reports as "Maximum resident set size"). The CNN features come
from the feature cache (PAMIR_CACHE; fill it first with `pamir fit corel5k`), the visterm
codebook is fitted on each subset's training pictures (cached too, after the first run).
`--before COMMIT` runs each size with that commit's code too (a `git archive`), side by
side. `--updates N` fixes every fit's n_updates (eval_every N/40): what a fit holds does not
depend on how long it runs, so a short budget measures the same memory in minutes.

Writes results/fit_memory.json and .md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common.harness import (HEAVY, load_average, machine, parser, report_head,
                            save_report)

SEED = 0
TEST_PICTURES = 500


def subset(collection, n_train: int, seed: int = SEED):
    """Corel 5k with n_train training pictures (and the validation split they make) of its
    development set, seeded, and every test picture; the whole collection at 4,000."""
    from pamir import config  # noqa: PLC0415

    dev = collection.indices("train")
    for n_dev in range(n_train, len(dev) + 1):  # the dev size whose training part is n_train
        valid = config.VALID_SIZE if n_dev > 5 * config.VALID_SIZE else n_dev // 10
        if n_dev - valid >= n_train:
            break
    keep = np.sort(np.concatenate([np.random.default_rng(seed).choice(dev, n_dev,
                                                                       replace=False),
                                   collection.indices("test")]))
    return dataclasses.replace(
        collection, name=f"{collection.name}-{n_train}",
        ids=[collection.ids[i] for i in keep], paths=[collection.paths[i] for i in keep],
        captions=[collection.captions[i] for i in keep],
        splits=[collection.splits[i] for i in keep])


def one(n_train: int, ensemble: int, retrain: bool, updates: int | None) -> dict:
    """One fit in this process: its peak memory, time and choice."""
    from pamir.facts.collection import load_collection  # noqa: PLC0415
    from pamir.system import evaluate_system  # noqa: PLC0415
    from pamir.training import fit_system  # noqa: PLC0415

    col = load_collection("corel5k")
    if n_train < 4000:
        col = subset(col, n_train)
    started = time.perf_counter()
    params = {} if not updates else {"n_updates": updates, "eval_every": max(1, updates // 40)}
    system = fit_system(col, "pamir", model_params=params, ensemble=ensemble, retrain=retrain,
                        log=None)
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    test = evaluate_system(system, col, "test")["evaluation"].table()["all"]
    info = system.info
    return {"train": info["pictures"]["train"], "valid": info["pictures"]["valid"],
            "pictures": len(col.ids), "peak_rss_mb": round(peak_mb),
            "seconds": round(seconds, 1), "representation": info["representation"],
            "params": {k: info["params"].get(k) for k in ("c", "n_updates", "eval_every")},
            "valid_avgp": info["valid_avgp"], "test_avgp": round(test["avgp"], 2),
            "timing": info["timing"]}


def report(r: dict) -> str:
    lines = report_head("Peak memory of `pamir fit` against the pictures (issue 35)", r,
                        heavy=False, note=None) + [
             f"Commit: `{r['commit'][:10]}`. Fit: every default representation, "
             f"ensemble {r['ensemble']}, retrain {r['retrain']}; peak resident memory is the "
             "fit process's ru_maxrss (`/usr/bin/time -v`'s maximum resident set size). "
             + (f"Every fit's budget fixed at {r['updates']:,} updates (what a fit holds does "
                "not depend on it).\n" if r.get("updates") else "\n"),
             "| code | training pictures | pictures in F | peak RSS | MB per training picture | "
             "fit | chosen | valid AvgP | test AvgP |",
             "|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for x in r["sizes"]:
        lines.append(f"| {x.get('code', 'after')} | {x['train']:,} | {x['pictures']:,} | "
                     f"{x['peak_rss_mb']:,} MB | "
                     f"{x['peak_rss_mb'] / x['train']:.2f} | {x['seconds']:.0f} s | "
                     f"{x['representation']} c={x['params']['c']} | {x['valid_avgp']:.2f} | "
                     f"{x['test_avgp']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--train", type=int, nargs="+", default=[1000, 2000, 4000])
    ap.add_argument("--ensemble", type=int, default=3)
    ap.add_argument("--no-retrain", action="store_true")
    ap.add_argument("--updates", type=int, default=None)
    ap.add_argument("--before", default=None)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.ensemble, not args.no_retrain, args.updates)))
        return
    root = Path(__file__).resolve().parent.parent
    trees = [("after", root)]
    if args.before:
        src = Path(tempfile.mkdtemp(prefix="pamir-fit-memory-")) / "before-src"
        src.mkdir()
        tar = subprocess.run(["git", "archive", args.before], cwd=root, check=True,
                             capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(src)], input=tar.stdout, check=True)
        trees.insert(0, ("before", src))
    r = {"command": f"{HEAVY} python benchmarks/bench_fit_memory.py "
                    + " ".join(argv or sys.argv[1:]),
         "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
         "load_average": load_average(), "ensemble": args.ensemble,
         "retrain": not args.no_retrain, "updates": args.updates, "before": args.before,
         "commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                  text=True).stdout.strip(), "sizes": []}
    for n in args.train:
        for name, src in trees:
            out = subprocess.run(
                [sys.executable, __file__, "--one", str(n), "--ensemble", str(args.ensemble)]
                + (["--no-retrain"] if args.no_retrain else [])
                + (["--updates", str(args.updates)] if args.updates else []),
                capture_output=True, text=True, cwd=src,
                env={**os.environ, "PYTHONPATH": str(src)})
            if out.returncode:
                raise SystemExit(f"{name}, {n} training pictures:\n{out.stderr[-3000:]}")
            r["sizes"].append({"code": name,
                               **json.loads(out.stdout.strip().splitlines()[-1])})
            print(r["sizes"][-1], flush=True)
    save_report("fit_memory", r, report)


if __name__ == "__main__":
    main()
