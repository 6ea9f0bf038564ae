"""PAMIR's margin on Corel 5k: the constant margin of TPAMI against the text-epsilon margin.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_margin.py

TPAMI trains PAMIR with a constant margin (eps_k = 1). The BBNN paper (ICANN 2006, eq. 4)
asks more of pairs whose captions differ more: eps_k = max(eps, F_text(q, c+) - F_text(q, c-)),
F_text the inner product of the query with the normalised idf captions (at most 1). Here both
are trained on the default features (77 blocks, 10,000 visterms), PAMIR's other defaults,
early stopping on validation, three seeds each; the text margin with two floors eps.

Writes benchmarks/results/margin.md and margin.json.
"""

from __future__ import annotations


from common.harness import parser, report_head, rerender
from common.tpami import defaults, figures, study, study_options
from pamir.features import FeatureSettings
from pamir.models.pamir import PAMIR

POINTS = ({"margin": "constant", "epsilon": 1.0}, {"margin": "text", "epsilon": 0.5},
          {"margin": "text", "epsilon": 0.1})


def report(r: dict) -> str:
    rows = r["rows"]
    L = [*report_head("PAMIR on Corel 5k: constant margin against the text-epsilon margin", r),
         f"Default features (77 blocks, {rows[0]['scaling']} scaling), {defaults()}; mean "
         f"of {len(rows[0]['runs'])} seeds of the triplet sampling.\n",
         "| margin | eps | valid AvgP | test AvgP | test BEP | test P10 | valid AvgP per seed |",
         "|---|---|---|---|---|---|---|"]
    for x in rows:
        m, p = x["mean"], x["params"]
        L.append(f"| {p['margin']} | {p['epsilon']} | {figures(m)} | "
                 + ", ".join(f"{run['valid_avgp']:.2f}" for run in x["runs"]) + " |")
    best = max(rows, key=lambda x: x["mean"]["valid_avgp"])["params"]
    L += ["", f"Best on validation: {best['margin']} margin, eps {best['epsilon']}. The "
          f"project's default: {PAMIR.default_params()['margin']} margin, eps "
          f"{PAMIR.default_params()['epsilon']}."]
    return "\n".join(L) + "\n"


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--seeds", type=int, default=3, help="seeds of the triplet sampling")
    name = study_options(ap, "margin")
    args = ap.parse_args(argv)
    if args.report_only:
        rerender(name(args), report)
        return
    study(name(args), [(FeatureSettings(scaling=args.scaling), dict(p)) for p in POINTS],
          args.seeds, argv, report)


if __name__ == "__main__":
    main()
