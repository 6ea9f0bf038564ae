"""PAMIR studies on the papers' features (Grangier & Bengio, TPAMI 2008): PAMIR measured at
each point of feature settings and parameters (`study`, `measure_pamir`), beside the paper's
Tables III and IX; bench_resolution, bench_scaling and bench_margin are such studies.
"""

from __future__ import annotations

import argparse

import numpy as np

from pamir import config
from pamir.features import FeatureSettings

from .corel import Corel, pct
from .harness import METRICS, RESULTS, Run, save_report

# The paper's numbers (Grangier & Bengio, TPAMI 2008, on 384x256 pictures).
PAPER_TABLE_III = {  # block size in px on the paper's pictures -> validation AvgP
    32: 26.1, 48: 25.3, 64: 27.3, 96: 25.3, 128: 22.3, 192: 17.8, 256: 18.3}


PAPER_TABLE_IX = {"avgp": 26.3, "bep": 17.4, "p10": 10.0}


def measure_pamir(settings: FeatureSettings, seeds: int, **params) -> dict:
    """Validation and test figures of PAMIR (its defaults unless `params` say otherwise;
    early stopping on validation) on the features of `settings`, for `seeds` seeds of the
    triplet sampling."""
    label = f"[{settings.short_side} px, {settings.scaling}{' ' + str(params) if params else ''}]"
    print(f"{label} features ...", flush=True)
    corel = Corel(settings)
    runs = []
    for seed in range(seeds):
        sel = corel.select("pamir", params={**params, "random_state": config.SEED + seed},
                           grid={}, log=None)
        ev = corel.test.evaluate(sel.model)
        runs.append({"random_state": config.SEED + seed, "valid_avgp": round(sel.valid_avgp, 2),
                     "best_update": sel.model.best_update_,
                     **{m: pct(ev, m) for m in METRICS}})
        print(f"{label} {runs[-1]}", flush=True)
    mean = {k: round(float(np.mean([r[k] for r in runs])), 2)
            for k in ("valid_avgp", *METRICS)}
    return {"short_side": settings.short_side, "scaling": settings.scaling, "params": params,
            "feature_seconds": round(corel.feature_seconds, 1),
            "visterms_per_picture": corel.visterms_per_picture(),
            "runs": runs, "mean": mean}


def defaults() -> str:
    """The features and PAMIR parameters every study row shares, in words."""
    from pamir.models.pamir import PAMIR  # noqa: PLC0415

    return (f"{FeatureSettings.n_visterms:,} visterms, c = {PAMIR.default_params()['c']}, "
            "early stopping on validation")


def figures(m: dict) -> str:
    """Mean validation AvgP, test AvgP, BEP and P10 as table cells."""
    return f"{m['valid_avgp']:.2f} | {m['avgp']:.2f} | {m['bep']:.2f} | {m['p10']:.2f}"


def study_options(ap: argparse.ArgumentParser, base: str):
    """--scaling and --report-only; returns args -> the results' name (BASE, or BASE_SCALING
    for a scaling other than the default)."""
    from pamir.features.settings import SCALINGS  # noqa: PLC0415

    ap.add_argument("--scaling", default=FeatureSettings.scaling, choices=SCALINGS,
                    help="block histogram scaling of the features (default: the project's)")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the markdown from the study's JSON without running")
    return lambda args: base if args.scaling == FeatureSettings.scaling else \
        f"{base}_{args.scaling}"


def study(name: str, points: list[tuple[FeatureSettings, dict]], seeds: int, argv, report,
          summary=lambda rows: {}) -> None:
    """Measure PAMIR at each (feature settings, PAMIR parameters) point; write
    results/NAME.json and NAME.md with the command, machine, date and load they were
    measured under."""
    run = Run(f"bench_{name}.py", argv)
    rows = [measure_pamir(s, seeds, **params) for s, params in points]
    r = {"rows": rows, **run.info(), **summary(rows)}
    save_report(name, r, report, echo=False)
    print(f"wrote {RESULTS / name}.md ({run.minutes()} min)")
