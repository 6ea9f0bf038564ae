"""Why linear PAMIR falls short of the paper on Corel 5k: how AvgP moves with picture size.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_resolution.py [--short-sides 64 96 128]

Our Corel 5k copy is half the papers' size (192x128 where they had 384x256), and our PAMIR is
below the paper on validation already (TPAMI Table III: 23.4 vs 27.3), before any test query is
seen, so the gap lies in what the pictures give the model, not in selection. We cannot make the
pictures bigger (upsampling adds pixels, not detail), but we can make them smaller: this keeps
everything else as in bench_pamir.py (77 blocks of a quarter of the shorter side, 10,000
visterms, the default scaling, PAMIR's default parameters, early stopping on validation:
pamir.selection.select with no grid) and shrinks the
pictures to a shorter side of 64 and 96 pixels before the blocks are cut. The slope of AvgP
against log2(picture size) then says what a doubling of resolution is worth on this data.

Writes benchmarks/results/resolution.md and resolution.json.
"""

from __future__ import annotations

import argparse

import numpy as np

from bench_pamir import METRICS, PAPER_TABLE_III, PAPER_TABLE_IX
from common import RESULTS, Corel, Run, parser, pct, report_head, rerender, save_report
from pamir import config
from pamir.features import FeatureSettings
from pamir.features.settings import SCALINGS
from pamir.models.pamir import PAMIR

NATIVE = 128  # Corel 5k's shorter side here; the papers' pictures had 256


def measure(settings: FeatureSettings, seeds: int, **params) -> dict:
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
    return (f"{FeatureSettings.n_visterms:,} visterms, c = {PAMIR.default_params()['c']}, "
            "early stopping on validation")


def figures(m: dict) -> str:
    """Mean validation AvgP, test AvgP, BEP and P10 as table cells."""
    return f"{m['valid_avgp']:.2f} | {m['avgp']:.2f} | {m['bep']:.2f} | {m['p10']:.2f}"


def slope(rows: list[dict], key: str) -> float:
    """AvgP points per doubling of the shorter side (least squares on log2 size)."""
    x = np.log2([r["short_side"] for r in rows])
    y = np.array([r["mean"][key] for r in rows])
    return float(np.polyfit(x, y, 1)[0])


def report(r: dict) -> str:
    rows = r["rows"]
    L = [*report_head("PAMIR on Corel 5k against picture size (why we fall short of the paper)",
                      r),
         f"Everything as benchmarks/bench_pamir.py (77 blocks of a quarter of the shorter side, "
         f"{rows[0]['scaling']} scaling, {defaults()}), pictures shrunk before the blocks "
         f"are cut. Mean of {len(rows[0]['runs'])} seeds of the triplet sampling; seed "
         f"{config.SEED} first.\n",
         "| shorter side (px) | picture | block (px) | distinct visterms / picture | "
         "valid AvgP | test AvgP | test BEP | test P10 | test AvgP per seed |",
         "|---|---|---|---|---|---|---|---|---|"]
    for x in rows:
        s, m = x["short_side"], x["mean"]
        L.append(f"| {s} | {s * 3 // 2}x{s} | {s // 4} | {x['visterms_per_picture']} | "
                 f"{figures(m)} | "
                 + ", ".join(f"{run['avgp']:.2f}" for run in x["runs"]) + " |")
    L.append(f"| 256 (the papers') | 384x256 | 64 | - | {PAPER_TABLE_III[64]} (paper) | "
             f"{PAPER_TABLE_IX['avgp']} (paper) | {PAPER_TABLE_IX['bep']} (paper) | "
             f"{PAPER_TABLE_IX['p10']} (paper) | - |")
    if len(rows) > 1:
        sv, st = r["slope_valid"], r["slope_test"]
        native = next((x for x in rows if x["short_side"] == NATIVE), rows[-1])["mean"]
        L += ["",
              f"AvgP per doubling of the picture size (least squares on log2 of the shorter "
              f"side): validation {sv:+.2f}, test {st:+.2f} points. The paper's pictures are "
              f"one doubling above ours: at the same slope that is validation "
              f"{native['valid_avgp'] + sv:.1f} and test {native['avgp'] + st:.1f}, against "
              f"the paper's {PAPER_TABLE_III[64]} and {PAPER_TABLE_IX['avgp']}. That is an "
              "extrapolation, not a measurement: it says how much of the gap resolution can "
              "explain if the trend holds one step further."]
    return "\n".join(L) + "\n"


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--short-sides", type=int, nargs="+", default=[64, 96, NATIVE],
                    help="shorter side in pixels the pictures are shrunk to (128: native)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds of the triplet sampling")
    name = study_options(ap, "resolution")
    args = ap.parse_args(argv)
    if args.report_only:
        rerender(name(args), report)
        return
    if max(args.short_sides) > NATIVE:
        ap.error(f"--short-sides above {NATIVE} upsample Corel 5k: that adds pixels, not detail")
    points = [(FeatureSettings(short_side=s, scaling=args.scaling), {})
              for s in sorted(args.short_sides)]
    study(name(args), points, args.seeds, argv, report, lambda rows: {
        "slope_valid": round(slope(rows, "valid_avgp"), 3),
        "slope_test": round(slope(rows, "avgp"), 3)} if len(rows) > 1 else {})


def study_options(ap: argparse.ArgumentParser, base: str):
    """--scaling and --report-only; returns args -> the results' name (BASE, or BASE_SCALING
    for a scaling other than the default)."""
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
    rows = [measure(s, seeds, **params) for s, params in points]
    r = {"rows": rows, **run.info(), **summary(rows)}
    save_report(name, r, report, echo=False)
    print(f"wrote {RESULTS / name}.md ({run.minutes()} min)")



if __name__ == "__main__":
    main()
