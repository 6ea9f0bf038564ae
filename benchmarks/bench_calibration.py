"""Calibrated relevance on Corel 5k: how well the probabilities hold on the test queries.

    PAMIR_CACHE=/work/cache flock /tmp/pamir-heavy.lock python benchmarks/bench_calibration.py \
        [--model models/corel5k-train] [--retrain-study] [--report-only]

The model (`--model`, a system from `pamir fit corel5k`, trained on train only; its features
come from the cache) is calibrated as `pamir fit` does (pamir.calibration.fitting.calibrate_system:
the protocol's validation queries, every subset of a validation caption, x the 500
validation pictures), then read on the test queries x the 499 test pictures:
- `ece`: the expected calibration error over every (test query, test picture) pair, 10
  equal-width bins, with the reliability diagram (calibration.png); `ece_top20` over each
  query's 20 best pictures only (the ones a person looks at);
- `floor_f1`: the mean, over the test queries, of the F1 of the set p:0.5 returns against the
  query's relevant pictures (an empty set scores 0);
- `raw_floor_f1`: the same for the one raw-score floor that is best on the validation
  queries (the best a person could do with floor:X and hindsight on validation);
- `empty_rate`: for each test query, its relevant pictures are removed and p:0.5 asked of the
  others: the share of queries answered with nothing.
Choices, made on validation only: which features the shared logistic reads (2-fold
cross-fitting over the validation pictures, by log-loss).

--retrain-study: the model retrained on train + validation (as `pamir fit --retrain`) has
seen the validation pictures, so its validation scores are in-sample. Compared on test:
the calibration fitted on its own (in-sample) validation scores; the train-only model's
scores with the retrained model's reference spread (what fit_system does); the train-only
calibration as it is.

Writes benchmarks/results/calibration.json, calibration.md and calibration.png.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from common.harness import RESULTS, Run, parser, report_head, rerender, save_report

from pamir import config
from pamir.calibration import FEATURES, Calibration, _sigmoid, expected_calibration_error
from pamir.calibration.fitting import _fit_with_ceiling, calibrate_system, fit_calibration
from pamir.data import load_corel5k
from pamir.protocol import Protocol
from pamir.system import System

MODEL = Path("/work/models/corel5k-train")
P_FLOOR = 0.5
TOP = 20
FEATURE_SETS = {"z (the standard score)": [0], "z, log prior, extra words": [0, 1, 2],
                "z, log prior, extra words, z x log prior": [0, 1, 2, 3],
                "z, log prior, extra words, z - best reference z": [0, 1, 2, 4],
                "all five": [0, 1, 2, 3, 4]}
WITH_CEILING = "all five, with a ceiling (pamir's)"
P_FLOORS = np.round(np.arange(0.05, 0.96, 0.05), 2)


def f1_of_sets(pred: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """Per query: the F1 of the predicted set (rows of bool) against the relevant set."""
    tp = (pred & rel).sum(axis=1)
    denom = pred.sum(axis=1) + rel.sum(axis=1)
    return np.divide(2 * tp, denom, out=np.zeros(len(tp)), where=denom > 0)


def precision(pred, rel) -> float:
    """The mean precision over the queries whose set is not empty."""
    n = pred.sum(axis=1)
    return float(((pred & rel).sum(axis=1)[n > 0] / n[n > 0]).mean()) if (n > 0).any() else 0.0


def query_block(protocol, split: str, idf) -> tuple:
    qs = protocol.queries(split)
    return qs, qs.vectors(idf), np.asarray(qs.relevance.toarray(), bool)


def scores(Q, Z) -> np.ndarray:
    return np.asarray(sp.csr_matrix(Q, dtype=np.float64) @ np.asarray(Z, np.float64).T)


def read_test(cal: Calibration, Q, terms, S, R) -> dict:
    """ECE (all pairs and each query's top 20), floor F1 and empty rate on test."""
    P = cal.probabilities(Q, terms, S)
    ece, bins = expected_calibration_error(P, R)
    top = np.argsort(-S, axis=1, kind="stable")[:, :TOP]
    ece_top, _ = expected_calibration_error(np.take_along_axis(P, top, 1),
                                            np.take_along_axis(R, top, 1))
    pred = P >= P_FLOOR
    others = np.where(R, -1.0, P)
    single = np.asarray([len(t) == 1 for t in terms])
    f1 = f1_of_sets(pred, R)
    return {"ece": round(float(ece), 4), "ece_top20": round(float(ece_top), 4),
            "floor_f1": round(100 * float(f1.mean()), 2),
            "floor_f1_single": round(100 * float(f1[single].mean()), 2),
            "floor_f1_multi": round(100 * float(f1[~single].mean()), 2),
            "floor_returned_mean": round(float(pred.sum(axis=1).mean()), 2),
            "floor_empty": round(float((pred.sum(axis=1) == 0).mean()), 4),
            "empty_rate": round(float((others.max(axis=1) < P_FLOOR).mean()), 4),
            "bins": bins}


def best_raw_floor(S_valid, R_valid) -> tuple[float, float]:
    """(the raw floor with the best mean F1 on the validation queries, that F1 %)."""
    candidates = np.unique(np.quantile(S_valid, np.linspace(0.5, 0.9999, 400)))
    f1 = [f1_of_sets(S_valid >= f, R_valid).mean() for f in candidates]
    k = int(np.argmax(f1))
    return float(candidates[k]), 100 * float(f1[k])


def feature_choice(Z_valid, Q, terms, R, Y_train, seed: int = config.SEED) -> dict:
    """Validation log-loss and ECE of the logistic on each feature set, 2-fold cross-fitted
    over the validation pictures (fitted on the pairs of one half, read on the other's)."""
    from sklearn.linear_model import LogisticRegression

    base = fit_calibration(Z_valid, Q, terms, sp.csr_matrix(R), Y_train)
    X = base.features(Q, terms, scores(Q, Z_valid), own=True)
    half = np.random.default_rng(seed).permutation(Z_valid.shape[0]) < Z_valid.shape[0] // 2
    out = {}
    for name, cols in {**FEATURE_SETS, WITH_CEILING: [0, 1, 2, 3, 4]}.items():
        p = np.zeros(R.shape)
        for fit_on in (half, ~half):
            A, y = X[:, fit_on][..., cols].reshape(-1, len(cols)), R[:, fit_on].ravel()
            lr = LogisticRegression(max_iter=1000).fit(A, y)
            w, b, top = lr.coef_.ravel(), float(lr.intercept_[0]), 1.0
            if name == WITH_CEILING:
                w, b, top = _fit_with_ceiling(A, y, w, b)
            B = X[:, ~fit_on][..., cols].reshape(-1, len(cols))
            p[:, ~fit_on] = (top * _sigmoid(B @ w + b)).reshape(R.shape[0], -1)
        eps = 1e-12
        loss = -np.mean(R * np.log(p + eps) + (~R) * np.log(1 - p + eps))
        out[name] = {"log_loss": round(float(loss), 5),
                     "ece": round(float(expected_calibration_error(p, R)[0]), 4)}
    return out


def diagram_title(r: dict) -> str:
    return (f"Corel 5k test, {r['queries']['test']:,} queries x {r['pictures']['test']} "
            f"pictures: ECE {r['ece']:.4f}")


def diagram(bins: list[dict], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.6, 4.4))
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--", label="perfect calibration")
    x = [b["mean_probability"] for b in bins]
    y = [b["relevant_rate"] for b in bins]
    ax.plot(x, y, marker="o", label="pamir (test pairs)")
    for b, xi, yi in zip(bins, x, y):
        ax.annotate(f"{b['count']:,}", (xi, yi), textcoords="offset points", xytext=(4, -10),
                    fontsize=7)
    ax.set_xlabel("calibrated probability (bin mean)")
    ax.set_ylabel("share relevant")
    ax.set_xlim(0, 1), ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--model", type=Path, default=MODEL, help="a system trained on train only")
    ap.add_argument("--retrain-study", action="store_true",
                    help="also retrain on train + valid and compare three calibrations")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    if args.report_only:
        r = rerender("calibration", report)
        diagram(r["bins"], RESULTS / "calibration.png", diagram_title(r))
        return
    model_dir = args.model
    run = Run("bench_calibration.py", argv)
    collection = load_corel5k()
    system = System.load(model_dir, progress=False)
    p = Protocol(collection, seed=system.info.get("seed", config.SEED),
                 vocabulary=system.vocabulary)
    paths = lambda idx: [collection.paths[i] for i in idx]  # noqa: E731
    F_va, ok_va, _ = system.features(paths(p.valid))
    F_te, ok_te, _ = system.features(paths(p.test))
    Y_va, Y_tr = p.presence(p.valid), p.presence(p.train)
    t0 = time.perf_counter()
    cal = calibrate_system(system, F_va, Y_va, Y_tr, log=print)
    fit_seconds = time.perf_counter() - t0
    Z_va, Z_te = system.transform_features(F_va, ok_va), system.transform_features(F_te, ok_te)
    qs_va, Q_va, R_va = query_block(p, "valid", system.idf)
    qs_te, Q_te, R_te = query_block(p, "test", system.idf)
    S_va, S_te = scores(Q_va, Z_va), scores(Q_te, Z_te)
    test = read_test(cal, Q_te, qs_te.terms, S_te, R_te)
    raw, raw_valid_f1 = best_raw_floor(S_va, R_va)
    raw_f1 = 100 * float(f1_of_sets(S_te >= raw, R_te).mean())
    # the probability floor with the best validation F1, for the like-for-like comparison
    P_va, P_te = cal.probabilities(Q_va, qs_va.terms, S_va), cal.probabilities(Q_te, qs_te.terms, S_te)
    f1_va = [f1_of_sets(P_va >= f, R_va).mean() for f in P_FLOORS]
    best_p = float(P_FLOORS[int(np.argmax(f1_va))])
    r = {**run.info(), "model": str(model_dir), "model_info": {
            k: system.info.get(k) for k in ("representation", "params", "retrained",
                                            "valid_avgp")},
         "coef": dict(zip(FEATURES, map(float, cal.coef))), "intercept": cal.intercept,
         "ceiling": cal.ceiling,
         "fit_seconds": round(fit_seconds, 1), "calibration_info": cal.info,
         "queries": {"valid": len(qs_va), "test": len(qs_te)},
         "pictures": {"valid": int(len(p.valid)), "test": int(len(p.test))},
         **{k: v for k, v in test.items() if k != "bins"}, "bins": test["bins"],
         "raw_floor": raw, "raw_floor_valid_f1": round(raw_valid_f1, 2),
         "raw_floor_f1": round(raw_f1, 2), "p_floor": P_FLOOR,
         "raw_floor_f1_single": round(100 * float(f1_of_sets(S_te >= raw, R_te)[
             [len(t) == 1 for t in qs_te.terms]].mean()), 2),
         "raw_floor_f1_multi": round(100 * float(f1_of_sets(S_te >= raw, R_te)[
             [len(t) > 1 for t in qs_te.terms]].mean()), 2),
         "best_p_floor": best_p, "best_p_floor_valid_f1": round(100 * max(f1_va), 2),
         "best_p_floor_f1": round(100 * float(f1_of_sets(P_te >= best_p, R_te).mean()), 2),
         "precision": {"p_floor": round(100 * precision(P_te >= P_FLOOR, R_te), 2),
                       "raw_floor": round(100 * precision(S_te >= raw, R_te), 2)},
         "feature_choice": feature_choice(Z_va, Q_va, qs_va.terms, R_va, Y_tr)}
    diagram(test["bins"], RESULTS / "calibration.png", diagram_title(r))
    if args.retrain_study:
        r["retrain_study"] = retrain_study(system, collection, p, F_va, Z_va, Q_te, qs_te, R_te,
                                           Y_tr, paths)
    r["minutes"] = run.minutes()
    save_report("calibration", r, report)


def retrain_study(system, collection, p, F_va, Z_va, Q_te, qs_te, R_te, Y_tr, paths) -> dict:
    """Three calibrations of the model retrained on train + valid, read on test."""
    from pamir.features.representation import take_rows  # noqa: F401

    model = system.model
    t0 = time.perf_counter()
    F_dev, _, _ = system.features(paths(p.development))
    final = type(model)(**{**model.get_params(), **model.refit_params_}).fit(
        F_dev, p.presence(p.development))
    seconds = time.perf_counter() - t0
    retrained = System(system.pipeline, final, system.vocabulary, system.idf, system.info)
    F_te, ok_te, _ = system.features(paths(p.test))
    Z_fin_va = retrained.transform_features(F_va)
    S_te = scores(Q_te, retrained.transform_features(F_te, ok_te))
    Y_va = p.presence(p.valid)
    qs = p.queries("valid")
    Q_va = qs.vectors(system.idf)
    variants = {
        "in-sample (its own validation scores)": fit_calibration(
            Z_fin_va, Q_va, qs.terms, qs.relevance, Y_tr),
        "train-only scores, against the retrained model's validation spread": fit_calibration(
            Z_fin_va, Q_va, qs.terms, qs.relevance, Y_tr, Z_scored=Z_va),
        "train-only calibration as it is (fit_system's)": calibrate_system(
            retrained, F_va, Y_va, Y_tr, scored=system),
    }
    out = {"retrain_seconds": round(seconds, 1), "n_updates": int(final.n_updates)}
    for name, cal in variants.items():
        t = read_test(cal, Q_te, qs_te.terms, S_te, R_te)
        out[name] = {k: v for k, v in t.items() if k != "bins"}
        print(name, out[name], flush=True)
    return out


def report(r: dict) -> str:
    L = report_head("Calibrated relevance on Corel 5k (issue 26)", r)
    mi = r["model_info"]
    L += ["", f"Model: `{r['model']}` ({mi['representation']}, {mi['params']}, retrained: "
          f"{mi['retrained']}, validation AvgP {mi['valid_avgp']}); calibrated on "
          f"{r['queries']['valid']:,} validation queries x {r['pictures']['valid']} pictures "
          f"in {r['fit_seconds']} s, read on {r['queries']['test']:,} test queries x "
          f"{r['pictures']['test']} pictures. {r['minutes']} min in all.", "",
          f"P(relevant) = {r.get('ceiling', 1.0):.3f} x sigmoid(" + " + ".join(
              f"{v:.3f} x {k}" for k, v in r["coef"].items() if v)
          + f" + {r['intercept']:.3f})", "",
          "| target | measured | goal |", "|---|---:|---|",
          f"| expected calibration error, every test pair | {r['ece']:.4f} | <= 0.05 |",
          f"| ECE, each query's 20 best pictures | {r['ece_top20']:.4f} | |",
          f"| mean F1 of p:{r['p_floor']} | {r['floor_f1']:.2f} | > raw floor's |",
          f"| mean F1 of the best raw floor on validation ({r['raw_floor']:.4f}; valid F1 "
          f"{r['raw_floor_valid_f1']:.2f}) | {r['raw_floor_f1']:.2f} | |",
          f"| relevant pictures removed: p:{r['p_floor']} returns nothing | "
          f"{100 * r['empty_rate']:.1f} % | >= 80 % |",
          f"| mean F1 of the best probability floor on validation (p:{r['best_p_floor']}; "
          f"valid F1 {r['best_p_floor_valid_f1']:.2f}) | {r['best_p_floor_f1']:.2f} | |", "",
          f"Mean precision of the non-empty sets: p:{r['p_floor']} "
          f"{r['precision']['p_floor']:.2f}, the raw floor {r['precision']['raw_floor']:.2f}.",
          "",
          f"p:{r['p_floor']} returns {r['floor_returned_mean']} pictures a query on average, "
          f"nothing for {100 * r['floor_empty']:.1f} % of the test queries (their relevant "
          f"pictures there); F1 {r['floor_f1_single']:.2f} on one-word queries, "
          f"{r['floor_f1_multi']:.2f} on the others (the raw floor: "
          f"{r['raw_floor_f1_single']:.2f} and {r['raw_floor_f1_multi']:.2f}).", "",
          f"Reading: p:{r['p_floor']} keeps what is more likely relevant than not, and its "
          f"sets are {r['precision']['p_floor']:.0f} % precise against the raw floor's "
          f"{r['precision']['raw_floor']:.0f} %. But most test queries are subsets of a "
          "caption with one or two relevant pictures, for which no picture is more likely "
          f"relevant than not, so it answers {100 * r['floor_empty']:.0f} % of them with "
          "nothing, and F1 rewards returning the best guesses anyway: the probability floor "
          f"that is best on validation (p:{r['best_p_floor']}) does, and beats the raw "
          f"floor ({r['best_p_floor_f1']:.2f} against {r['raw_floor_f1']:.2f}), since it adapts "
          "to each query where one raw floor cannot.", "",
          "Reliability (calibration.png):", "",
          "| bin | pairs | mean probability | share relevant |", "|---|---:|---:|---:|"]
    for b in r["bins"]:
        L.append(f"| {b['bin'][0]:.1f}-{b['bin'][1]:.1f} | {b['count']:,} | "
                 f"{b['mean_probability']:.3f} | {b['relevant_rate']:.3f} |")
    L += ["", "Features of the shared logistic, chosen on validation (2-fold cross-fitted "
          "over the validation pictures):", "", "| features | log-loss | ECE |", "|---|---:|---:|"]
    for name, v in r["feature_choice"].items():
        L.append(f"| {name} | {v['log_loss']:.5f} | {v['ece']:.4f} |")
    study = r.get("retrain_study")
    if study:
        L += ["", f"Retrained on train + validation ({study['n_updates']:,} updates, "
              f"{study['retrain_seconds']} s"
              + (f"; the model: {study['model']}" if study.get("model") else "")
              + "), read on test:", "",
              "| calibration | ECE | ECE top 20 | p:0.5 F1 | empty rate |",
              "|---|---:|---:|---:|---:|"]
        for name, v in study.items():
            if isinstance(v, dict):
                L.append(f"| {name} | {v['ece']:.4f} | {v['ece_top20']:.4f} | "
                         f"{v['floor_f1']:.2f} | {100 * v['empty_rate']:.1f} % |")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    main(sys.argv[1:])
