"""The retraining on train + valid, from zero or from the train-only weights (issue 35).

    flock /tmp/pamir-heavy.lock python benchmarks/bench_retrain_warm.py [--seeds 0 1]

`pamir fit --retrain` trains each chosen PAMIR again on train + valid. Whether it may go on
from the weights it has on train, for a share of the updates, cannot be judged on the real
validation pictures (the retraining learns them), so it is judged one level down: A = the
4,000 training pictures less 500 held out (B, seeded), a PAMIR fitted on A with B as its
early-stopping split (as `pamir fit` stops on valid), then trained again on A + B either
from zero for the updates where it stopped (today's retraining) or from its own weights for
a share of them; each is judged on the 500 real validation pictures (their queries, the
training idf), PAMIR alone, on the README winner's representation and aggressiveness
(cnn+cnn-lite1+cnn-lite2+visterms, c = 1.0), features from the feature cache.

Writes results/retrain_warm.json and .md.
"""

from __future__ import annotations

import time

import numpy as np

from common.corel import Corel
from common.harness import Run, parser, report_head, save_report

from pamir.features.representation import take_rows
from pamir.models.pamir import PAMIR
from pamir.training.selection import prepare_for_fits

REPRESENTATION = "cnn+cnn-lite1+cnn-lite2+visterms"
C = 1.0  # the README command's choice on validation (results/readme_command.md)
HELD_OUT = 500  # as many as the validation pictures: A + B grows A as valid grows train
SHARES = (0.1, 0.25, 0.5)


def one_seed(corel: Corel, seed: int) -> dict:
    """A's model, then A + B from zero and warm at each share: validation AvgP and seconds."""
    train = corel.train
    rng = np.random.default_rng(100 + seed)
    held = np.sort(rng.choice(len(train.idx), HELD_OUT, replace=False))
    a = np.setdiff1d(np.arange(len(train.idx)), held)
    X_a, X_b = prepare_for_fits(PAMIR, take_rows(train.X, a), take_rows(train.X, held))
    X_ab = prepare_for_fits(PAMIR, train.X, None)[0]
    budget = PAMIR.update_budget(len(a))
    params = {"c": C, "random_state": seed, **budget}
    out = {"seed": seed, "A": int(len(a)), "B": HELD_OUT}
    started = time.perf_counter()
    first = PAMIR(**params).fit(X_a, train.Y[a], validation=(X_b, train.Y[held]))
    stopped = first.refit_params_["n_updates"]
    out |= {"stopped": int(stopped), "A alone": _judged(corel, first, started)}
    started = time.perf_counter()
    zero = PAMIR(**{**params, "n_updates": stopped}).fit(X_ab, train.Y)
    out["from zero"] = _judged(corel, zero, started)
    for share in SHARES:
        started = time.perf_counter()
        n = max(budget["eval_every"], int(share * stopped))
        warm = PAMIR(**{**params, "n_updates": n}).fit(X_ab, train.Y, coef_init=first.W_)
        out[f"warm {share}"] = _judged(corel, warm, started) | {"updates": n}
        print(out, flush=True)
    return out


def _judged(corel: Corel, model, started: float) -> dict:
    return {"seconds": round(time.perf_counter() - started, 1),
            "valid_avgp": round(corel.valid.avgp(model), 2)}


def report(r: dict) -> str:
    rows = ["| seed | A alone | A + B from zero | " + " | ".join(
        f"warm, {s:g} of the updates" for s in r["shares"]) + " |",
        "|---:|---:|---:|" + "---:|" * len(r["shares"])]
    for s in r["seeds"]:
        cells = [s["A alone"], s["from zero"]] + [s[f"warm {x}"] for x in r["shares"]]
        rows.append(f"| {s['seed']} | " + " | ".join(
            f"{c['valid_avgp']:.2f} ({c['seconds']:.0f} s)" for c in cells) + " |")
    mean = {k: np.mean([s[k]["valid_avgp"] for s in r["seeds"]])
            for k in ["A alone", "from zero"] + [f"warm {x}" for x in r["shares"]]}
    return "\n".join(report_head(
        "The retraining from zero or from the train-only weights (issue 35)", r) + [
        "",
        f"PAMIR on {r['representation']}, c = {r['c']}; A = the training pictures less "
        f"{r['held_out']} held out (B), fitted with B as its early-stopping split, then "
        "trained on A + B from zero for the updates where it stopped, or from its own "
        "weights for a share of them. Validation AvgP (%) on the 500 validation pictures, "
        "and the fit's seconds:", "", *rows, "",
        "Mean over the seeds: " + ", ".join(f"{k} {v:.2f}" for k, v in mean.items()) + ".",
        ""])


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = ap.parse_args(argv)
    run = Run("bench_retrain_warm.py", argv)
    corel = Corel(representation=REPRESENTATION)
    seeds = [one_seed(corel, s) for s in args.seeds]
    save_report("retrain_warm", {**run.info(), "representation": REPRESENTATION, "c": C,
                                 "held_out": HELD_OUT, "shares": list(SHARES),
                                 "seeds": seeds}, report)


if __name__ == "__main__":
    main()
