"""Is PAMIR on the three-part representation at a plateau? Seeds against settings (Corel 5k).

    flock /tmp/pamir-heavy.lock python benchmarks/bench_cnn_plateau.py [--ensembles] [--report-only]

`pamir fit corel5k` chose cnn+cnn-lite2+visterms (every part at weight 1, c = 1, 4M
updates at most). Each VARIANT below changes one thing a user could tune (a part's weight,
flip averaging of both networks, twice the updates, a third network view) and is trained
with each of SEEDS; the validation AvgP of each seed is reported with the mean and the
spread over seeds, so that a variant's gain can be read against what a seed alone moves.
Validation only: nothing here is a chosen configuration, so test is not read.

Then how many seeds an ensemble needs (what `pamir fit --ensemble N` averages;
bench_cnn.py's SEEDS): PAMIR on the four-part representation with each of ENSEMBLE_SEEDS,
each seed alone and the average of the first k (PAMIR.average), on validation.
`--ensembles` measures only that, added to the JSON the variants wrote.

Writes benchmarks/results/cnn_plateau.json and cnn_plateau.md.
"""

from __future__ import annotations

import json

import numpy as np

from common.corel import CorelViews
from common.harness import RESULTS, Run, report_cli, run_clause, save_report

from pamir.evaluation import evaluate_text_space
from pamir.models.pamir import PAMIR
from pamir.training.selection import select

NAME = "cnn+cnn-lite2+visterms"
SEEDS = (0, 1, 2)
#: (label, part weights, CNN settings, PAMIR parameters); the first was `pamir fit`'s choice
#: when this was written, the last is its choice since.
VARIANTS = [
    ("cnn+cnn-lite2+visterms, as `pamir fit` chose", (1.0, 1.0, 1.0), {}, {}),
    ("Lite2 part x1.5, visterms x0.75", (1.0, 1.5, 0.75), {}, {}),
    ("flip averaging (both networks)", (1.0, 1.0, 1.0), {"flip": True}, {}),
    ("8M updates at most", (1.0, 1.0, 1.0), {}, {"n_updates": 8_000_000}),
    ("a third view, cnn-lite1 (what `pamir fit` chooses since)", (1.0, 1.0, 1.0, 1.0), {},
     {}),
]
C = 1.0  # what `pamir fit corel5k` chose for this representation (models/corel5k)
FOUR_PART = "cnn+cnn-lite1+cnn-lite2+visterms"
ENSEMBLE_SEEDS = tuple(range(6))


def measure(corel: CorelViews, weights, cnn: dict, params: dict) -> list[float]:
    name = NAME if len(weights) == 3 else FOUR_PART
    F, _ = corel.features(name, cnn, weights)
    F = F.tocsr()
    p = corel.protocol
    out = []
    for seed in SEEDS:
        sel = select("pamir", F[corel.train], p.presence(corel.train), F[corel.valid],
                     p.presence(corel.valid), params={"c": C, "random_state": seed, **params},
                     grid={}, log=None)
        out.append(round(sel.valid_avgp, 2))
        print(f"  seed {seed}: valid AvgP {out[-1]}", flush=True)
    return out


def ensembles(corel: CorelViews) -> dict:
    """Each of ENSEMBLE_SEEDS alone and the average of the first k, validation AvgP (%)."""
    F = corel.features(FOUR_PART, {}, (1.0,) * 4)[0].tocsr()
    p = corel.protocol
    vq = p.queries(corel.valid)
    Qv = p.query_vectors(vq)
    members, single, averaged = [], [], []
    for seed in ENSEMBLE_SEEDS:
        sel = select("pamir", F[corel.train], p.presence(corel.train), F[corel.valid],
                     p.presence(corel.valid), params={"c": C, "random_state": seed},
                     grid={}, log=None)
        members.append(sel.model)
        single.append(round(sel.valid_avgp, 2))
        Z = PAMIR.average(members).transform(F[corel.valid])
        averaged.append(round(100 * evaluate_text_space(Z, Qv, vq.relevance,
                                                        curve=False).mean(), 2))
        print(f"  seed {seed}: valid AvgP {single[-1]}, average of {len(members)}: "
              f"{averaged[-1]}", flush=True)
    return {"representation": FOUR_PART, "seeds": list(ENSEMBLE_SEEDS), "single": single,
            "averaged": averaged}


def report(r: dict) -> str:
    base = r["rows"][0]["valid"]
    lines = ["# Seeds against settings: PAMIR on cnn+cnn-lite2+visterms and variants (Corel 5k)",
             "",
             f"{run_clause(r)}. "
             f"PAMIR c = {r['c']:g}, early-stopped on the 500 validation pictures; validation "
             "AvgP (%) of each seed. Test is not read: nothing here is chosen.", "",
             "| variant | " + " | ".join(f"seed {s}" for s in r["seeds"])
             + " | mean | sd | mean - first row |",
             "|---|" + "---:|" * (len(r["seeds"]) + 3)]
    for row in r["rows"]:
        v = row["valid"]
        lines.append(f"| {row['variant']} | " + " | ".join(f"{x:.2f}" for x in v)
                     + f" | {np.mean(v):.2f} | {np.std(v, ddof=1):.2f} | "
                     f"{np.mean(v) - np.mean(base):+.2f} |")
    lines += ["", "A seed alone moves validation AvgP by the first row's spread; a variant whose "
                  "mean moves by less than that is within the noise of validation."]
    e = r.get("ensembles")
    if e:
        lines += ["", f"## Ensembles of seeds: PAMIR on {e['representation']}", "",
                  f"{run_clause(e)}. "
                  "Validation AvgP (%) of each seed alone, and of the average of it and the "
                  "seeds before it (`PAMIR.average`, what `pamir fit --ensemble k` trains).", "",
                  "| seeds k | " + " | ".join(str(k + 1) for k in range(len(e["seeds"]))) + " |",
                  "|---|" + "---:|" * len(e["seeds"]),
                  "| seed k - 1 alone | " + " | ".join(f"{v:.2f}" for v in e["single"]) + " |",
                  "| average of seeds 0 to k - 1 | " + " | ".join(f"{v:.2f}" for v in
                                                                 e["averaged"]) + " |", "",
                  f"Single seeds: mean {np.mean(e['single']):.2f}, sd "
                  f"{np.std(e['single'], ddof=1):.2f}."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    args = report_cli(__doc__, "cnn_plateau", report, argv,
                      {"--ensembles": "only the ensemble sizes, added to the variants' JSON"})
    if args is None:
        return
    run = Run("bench_cnn_plateau.py", argv)
    corel = CorelViews()
    if args.ensembles:
        r = json.loads((RESULTS / "cnn_plateau.json").read_text())
    else:
        rows = []
        for label, weights, cnn, params in VARIANTS:
            print(label, flush=True)
            rows.append({"variant": label, "weights": list(weights), "cnn": cnn,
                         "params": params, "valid": measure(corel, weights, cnn, params)})
        r = {"representation": NAME, "c": C, "seeds": list(SEEDS), "rows": rows,
             **run.info(), "minutes": run.minutes()}
    run = Run("bench_cnn_plateau.py", argv)  # the ensembles' own minutes and load
    r["ensembles"] = ensembles(corel) | run.info() | {"minutes": run.minutes()}
    save_report("cnn_plateau", r, report)


if __name__ == "__main__":
    main()
