"""How the scaling of the block histograms before the visterm k-means moves PAMIR on Corel 5k.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_scaling.py [--scalings none sqrt ...]

The project's first calibration run (benchmarks/results/defaults.md) found the scaling of the block histograms to matter more than
anything else it tried (test AvgP 16.9 with raw counts, 21-24 with the others), and the
default scaling was first taken from it ("sqrt_std"). This measures every scaling of
pamir.features.SCALINGS with the project's own pipeline and the protocol's validation set:
the same 77 blocks, 10,000 visterms, PAMIR's defaults, early stopping on validation, three
seeds of the triplet sampling. The scaling a user should pick is the one with the best
validation AvgP; the test column is reported, never used to choose.

Writes benchmarks/results/scaling.md and scaling.json.
"""

from __future__ import annotations

import json

from common.corel import Corel
from common.harness import RESULTS, parser, report_head, rerender, write_json
from common.tpami import PAPER_TABLE_III, PAPER_TABLE_IX, defaults, figures, study
from pamir import config
from pamir.evaluation import wilcoxon
from pamir.features import FeatureSettings
from pamir.features.settings import SCALINGS

MEANING = {"none": "raw counts", "sqrt": "square root", "quarter": "fourth root",
           "log1p": "log(1 + count), as BBNN", "sqrt_std": "square root, then each dimension "
           "standardised"}


def report(r: dict) -> str:
    rows = r["rows"]
    best = max(rows, key=lambda x: x["mean"]["valid_avgp"])
    L = [*report_head("PAMIR on Corel 5k against the scaling of the block histograms", r),
         f"77 blocks of 32 px on our 192x128 pictures, {defaults()} (k-means on the scaled "
         f"histograms); mean of {len(rows[0]['runs'])} seeds of the triplet sampling. The "
         f"project's default is `{FeatureSettings.scaling}`.\n",
         "| scaling | what | valid AvgP | test AvgP | test BEP | test P10 | valid AvgP per seed "
         "| test AvgP per seed |", "|---|---|---|---|---|---|---|---|"]
    for x in rows:
        m = x["mean"]
        L.append(f"| {x['scaling']} | {MEANING[x['scaling']]} | {figures(m)} | "
                 + ", ".join(f"{run['valid_avgp']:.2f}" for run in x["runs"]) + " | "
                 + ", ".join(f"{run['avgp']:.2f}" for run in x["runs"]) + " |")
    L += ["", f"Best on validation: `{best['scaling']}` ({best['mean']['valid_avgp']:.2f}). "
          f"The paper (384x256 pictures, its own block statistics): validation "
          f"{PAPER_TABLE_III[64]}, test {PAPER_TABLE_IX['avgp']}."]
    if r.get("significance"):
        L += ["", f"Can the validation set tell them apart? Two-sided Wilcoxon signed-rank on "
              f"per-query AvgP (seed {config.SEED}), `{best['scaling']}` against each other "
              "scaling: the difference of the means and its p-value.", "",
              "| scaling | validation: difference, p | test: difference, p |", "|---|---|---|"]
        for name, w in r["significance"].items():
            L.append(f"| {name} | " + " | ".join(
                f"{w[split]['difference']:+.2f}, p = {w[split]['pvalue']:.2g}"
                for split in ("valid", "test")) + " |")
    return "\n".join(L) + "\n"


def significance(rows: list[dict]) -> dict:
    """Per-query AvgP of each scaling (seed 0) on validation and test, the best on validation
    against each other one: mean difference (points, best minus other) and Wilcoxon p."""
    best = max(rows, key=lambda x: x["mean"]["valid_avgp"])["scaling"]
    per = {}
    for x in rows:
        corel = Corel(FeatureSettings(scaling=x["scaling"]))
        model = corel.select("pamir", grid={}, log=None).model
        per[x["scaling"]] = {split.name: split.evaluate(model, curve=False).per_query["avgp"]
                             for split in (corel.valid, corel.test)}
    out = {}
    for name in per:
        if name != best:
            out[name] = {}
            for split in ("valid", "test"):
                a, b = per[best][split], per[name][split]
                out[name][split] = {"difference": round(100 * float(a.mean() - b.mean()), 2),
                                    "pvalue": float(f"{wilcoxon(a, b)['pvalue']:.3g}")}
    return out


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--scalings", nargs="+", default=list(SCALINGS), choices=SCALINGS)
    ap.add_argument("--seeds", type=int, default=3, help="seeds of the triplet sampling")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the markdown from scaling.json without running")
    ap.add_argument("--significance", action="store_true",
                    help="add the per-query Wilcoxon tests to scaling.json (one more fit per "
                         "scaling, features from the cache)")
    args = ap.parse_args(argv)
    if args.significance:
        path = RESULTS / "scaling.json"
        r = json.loads(path.read_text())
        r["significance"] = significance(r["rows"])
        write_json(path, r)
    if args.report_only or args.significance:
        rerender("scaling", report)
        return
    study("scaling", [(FeatureSettings(scaling=s), {}) for s in args.scalings], args.seeds, argv,
          report, lambda rows: {"best_on_validation": max(
              rows, key=lambda x: x["mean"]["valid_avgp"])["scaling"]})


if __name__ == "__main__":
    main()
