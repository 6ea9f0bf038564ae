"""How much of the update budget a refit needs (issue 35, pamir.training.refitting's
REFIT_UPDATE_SHARE): on Corel 5k samples of 300 captioned pictures, a model fitted with the
c grid, then 20 more pictures tagged; the refit warm-started for a share of the budget
against the full fit (the c grid again) on the grown sample, both on the same validation
pictures (the model's, which a refit keeps). Validation AvgP only, never test.

    PAMIR_CACHE=DIR PAMIR_CNN_PRECISION=fp32 flock /tmp/pamir-heavy.lock \
        python benchmarks/bench_fit_speed_refit_share.py [--seeds 0 1] [--shares 0.1 0.25 1]

DIR: a feature cache holding Corel 5k's cnn features (read, not written: no prior, no
neighbours). Writes results/fit_speed_refit_share.json and .md.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import numpy as np

from common.harness import HEAVY, load_average, machine, save_report

FIRST, MORE = 300, 20


def sample(collection, order, n):
    keep = np.sort(order[:n])
    return dataclasses.replace(
        collection, name="corel5k-sample", ids=[collection.ids[i] for i in keep],
        paths=[collection.paths[i] for i in keep], splits=["train"] * len(keep),
        captions=[collection.captions[i] for i in keep])


def study(seed: int, shares) -> dict:
    from pamir.data import load_corel5k  # noqa: PLC0415
    from pamir.training import fit_system, refit_system  # noqa: PLC0415
    from pamir.training import refitting  # noqa: PLC0415

    corel = load_corel5k()
    order = np.random.default_rng(seed).permutation(corel.indices("train"))
    first, grown = sample(corel, order, FIRST), sample(corel, order, FIRST + MORE)
    kw = dict(representation="cnn", log=None, neighbours=False)
    old = fit_system(first, "pamir", **kw)
    started = time.perf_counter()
    full = fit_system(grown, "pamir", protocol=refitting.refit_protocol(old, grown), **kw)
    row = {"seed": seed, "model": {"valid_avgp": old.info["valid_avgp"], "c": old.model.c},
           "full": {"valid_avgp": full.info["valid_avgp"], "c": full.model.c,
                    "seconds": round(time.perf_counter() - started, 1)}, "refit": {}}
    for share in shares:
        refitting.REFIT_UPDATE_SHARE = share
        started = time.perf_counter()
        r = refit_system(old, grown, neighbours=False)
        row["refit"][str(share)] = {"valid_avgp": r.info["valid_avgp"],
                                    "seconds": round(time.perf_counter() - started, 1)}
    return row


def report(r: dict) -> str:
    shares = list(r["rows"][0]["refit"])
    lines = ["# A refit's share of the update budget (issue 35)\n",
             f"Command: `{r['command']}`  ",
             f"Machine: {r['machine']}; {r['date']}; load average {r['load_average']}.\n",
             f"Corel 5k samples of {FIRST} captioned pictures (cnn, the c grid), then {MORE} "
             "more; validation AvgP on the model's validation pictures (about 32: noisy).\n",
             "| seed | model (c) | full fit on the grown sample (c) | "
             + " | ".join(f"refit, {s} of the budget" for s in shares) + " |",
             "|---:|---:|---:|" + "---:|" * len(shares)]
    for x in r["rows"]:
        lines.append(f"| {x['seed']} | {x['model']['valid_avgp']:.2f} ({x['model']['c']}) | "
                     f"{x['full']['valid_avgp']:.2f} ({x['full']['c']}), "
                     f"{x['full']['seconds']:.1f} s | "
                     + " | ".join(f"{v['valid_avgp']:.2f}, {v['seconds']:.1f} s"
                                  for v in x["refit"].values()) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    from pamir import config  # noqa: PLC0415

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--shares", type=float, nargs="+", default=[0.1, 0.25, 1.0])
    args = ap.parse_args(argv)
    config.PRIOR = False  # the study reads the cache only
    r = {"command": f"{HEAVY} python benchmarks/bench_fit_speed_refit_share.py "
                    + " ".join(argv or sys.argv[1:]),
         "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
         "load_average": load_average(), "rows": [study(s, args.shares) for s in args.seeds]}
    save_report("fit_speed_refit_share", r, report)


if __name__ == "__main__":
    main()
