"""Selection on small collections (issue 26, item 4): today's rule against a guarded one, on
Corel 5k subsamples of 700 captioned pictures, averaged over seeds.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_small_selection.py [--seeds 0 1 2 3]

For each seed, 700 pictures drawn from Corel's development set (its 4,500 train + valid
pictures) stand for a person's captioned folder: a tenth of them (70) is the validation split,
as pamir.protocol splits a collection this small, the rest trains. Every point `pamir fit`
chooses among (pamir.system.representation_candidates: 6 representation settings x the
c grid, 18 fits) is trained on the 630 as the product trains (PAMIR's defaults, early
stopping on the 70, the full loop: no race) and scored on every validation query (every
subset of a validation caption); its test mean AvgP is read on Corel's 500 test pictures
and standard queries, to report only. The rules then choose from validation alone:

- argmax (today's): the best validation mean AvgP.
- default: no choice: the default point (pamir.selection.default_point: the last, richest
  representation candidate, the model's own default parameters).
- guarded (pamir.selection.guarded_choice): the default point, unless another point beats
  it on the validation queries in a one-sided paired Wilcoxon signed-rank test at
  config.GUARD_ALPHA; then the best mean among those that do.

The features are the cached default representations of `pamir fit corel5k` (codebook and
standardisation fitted on Corel's 4,000 training pictures: unsupervised, no caption of the
test pictures is read); only the subsample's captions train PAMIR. Run it after that fit
has filled PAMIR_CACHE. Results: results/small_selection.json and .md (written after each
seed, so a run stopped early keeps what it measured; `--seeds` continues it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import HEAVY, RESULTS, load_average, machine, save_report  # noqa: E402

from pamir import config  # noqa: E402
from pamir.data import load_collection  # noqa: E402
from pamir.evaluation import evaluate_model  # noqa: E402
from pamir.features.representation import take_rows  # noqa: E402
from pamir.models.pamir import PAMIR  # noqa: E402
from pamir.protocol import Protocol  # noqa: E402
from pamir.selection import (default_point, fit_workers, guarded_choice,  # noqa: E402
                             validation_queries)
from pamir.system import collection_inputs, representation_candidates  # noqa: E402
from pamir.text import idf as idf_weights  # noqa: E402

PICTURES = 700
RULES = ("argmax", "default", "guarded")


def subsample(protocol: Protocol, seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, valid) rows: n development pictures, a tenth of them validation."""
    rng = np.random.default_rng(seed)
    pick = rng.choice(protocol.development, n, replace=False)
    valid_size = n // 10  # pamir.protocol's rule for a collection this small
    return np.sort(pick[valid_size:]), np.sort(pick[:valid_size])


def one_seed(col, protocol, features, seed: int, n: int, log=print) -> dict:
    train, valid = subsample(protocol, seed, n)
    Yt, Yv = protocol.presence(train), protocol.presence(valid)
    vq = validation_queries(Yv, Yt)
    test = protocol.split("test")
    tq = protocol.queries(test)
    Qt = tq.vectors(idf_weights(Yt))  # query weights from the folder's own training captions
    points = [(name, weights, c) for name, weights in features for c in PAMIR.param_grid["c"]]

    def run(point):
        name, weights, c = point
        F = features[(name, weights)]
        started = time.perf_counter()
        m = PAMIR(c=c).fit(take_rows(F, train), Yt, validation=(take_rows(F, valid), Yv))
        per_query = evaluate_model(m, take_rows(F, valid), vq.vectors, vq.relevance,
                                   curve=False).per_query["avgp"]
        t = evaluate_model(m, take_rows(F, test), Qt, tq.relevance, curve=False)
        out = {"representation": name, "weights": list(weights), "c": c,
               "valid_avgp": round(100 * float(per_query.mean()), 3),
               "valid_per_query": [round(float(v), 5) for v in per_query],
               "test_avgp": round(100 * t.mean("avgp"), 3),
               "best_update": int(m.best_update_), "seconds": round(time.perf_counter() - started, 1)}
        log(f"  seed {seed} {name} {list(weights)} c={c}: valid {out['valid_avgp']:.2f} "
            f"test {out['test_avgp']:.2f} ({out['seconds']:.0f} s)")
        return out

    with ThreadPoolExecutor(fit_workers(PAMIR)) as pool:
        fits = list(pool.map(run, points))
    return {"seed": seed, "train": len(train), "valid": len(valid),
            "valid_queries": len(vq), "test_queries": len(tq), "points": fits}


def choices(result: dict) -> dict:
    """Each rule's chosen point (index) from the validation scores alone."""
    pts = result["points"]
    valid = [p["valid_avgp"] for p in pts]
    per_query = [np.asarray(p["valid_per_query"]) for p in pts]
    default = default_point([(p["representation"], tuple(p["weights"]), {"c": p["c"]})
                             for p in pts], PAMIR)
    return {"argmax": int(np.argmax(valid)), "default": default,
            "guarded": guarded_choice(per_query, default)}


def summary(seeds: list[dict]) -> dict:
    out = {}
    for rule in RULES:
        tests, picks = [], []
        for r in seeds:
            k = choices(r)[rule]
            p = r["points"][k]
            tests.append(p["test_avgp"])
            picks.append(f"{p['representation']} {p['weights']} c={p['c']}")
        out[rule] = {"test_avgp_mean": round(float(np.mean(tests)), 3),
                     "test_avgp_sd": round(float(np.std(tests)), 3),
                     "test_avgp": tests, "chosen": picks}
    best = [max(p["test_avgp"] for p in r["points"]) for r in seeds]
    out["oracle"] = {"test_avgp_mean": round(float(np.mean(best)), 3), "test_avgp": best}
    g, a = np.asarray(out["guarded"]["test_avgp"]), np.asarray(out["argmax"]["test_avgp"])
    out["guarded_minus_argmax"] = {"mean": round(float((g - a).mean()), 3),
                                   "per_seed": [round(float(v), 3) for v in g - a],
                                   "wins": int((g > a).sum()), "losses": int((g < a).sum())}
    gap = [r["points"][choices(r)["argmax"]]["valid_avgp"]
           - r["points"][choices(r)["argmax"]]["test_avgp"] for r in seeds]
    out["argmax_valid_minus_test"] = round(float(np.mean(gap)), 2)
    return out


def report(r: dict) -> str:
    s = r.get("summary", {})
    lines = ["# Selection on small collections: Corel 5k subsamples of "
             f"{r['pictures']} pictures\n",
             f"Command: `{HEAVY} {r['command']}`  ",
             f"Machine: {r['machine']}; {r['date']}; load average {r['load_average']}.  ",
             f"Seeds: {[x['seed'] for x in r['seeds']]}; each: {r['seeds'][0]['train']} "
             f"training, {r['seeds'][0]['valid']} validation pictures (about "
             f"{np.mean([x['valid_queries'] for x in r['seeds']]):.0f} validation queries), "
             f"18 points (6 representation settings x c in {PAMIR.param_grid['c']}); test: "
             "Corel's 500 test pictures, read to report, never to choose. The guard: "
             f"one-sided paired Wilcoxon over the validation queries, alpha "
             f"{config.GUARD_ALPHA}.\n" if r["seeds"] else "",
             "| rule | mean test AvgP | sd over seeds | per seed | chosen |",
             "|---|---:|---:|---|---|"]
    for rule in (*RULES, "oracle"):
        x = s.get(rule)
        if x:
            lines.append(f"| {rule} | {x['test_avgp_mean']:.2f} | {x.get('test_avgp_sd', 0):.2f} | "
                         f"{', '.join(f'{v:.2f}' for v in x['test_avgp'])} | "
                         f"{'; '.join(x.get('chosen', ['the test-best point (not a rule)']))} |")
    d = s.get("guarded_minus_argmax")
    if d:
        lines.append(f"\nGuarded minus argmax, test AvgP: {d['mean']:+.2f} on average "
                     f"(per seed {', '.join(f'{v:+.2f}' for v in d['per_seed'])}; "
                     f"{d['wins']} better, {d['losses']} worse). The argmax choice's validation "
                     f"AvgP overstates its test AvgP by {s['argmax_valid_minus_test']:.1f} points "
                     "on average.\n")
    lines.append("Per point (mean over seeds): validation / test AvgP.\n")
    lines += ["| representation | c | valid | test |", "|---|---:|---:|---:|"]
    if r["seeds"]:
        for k, p in enumerate(r["seeds"][0]["points"]):
            v = np.mean([x["points"][k]["valid_avgp"] for x in r["seeds"]])
            t = np.mean([x["points"][k]["test_avgp"] for x in r["seeds"]])
            lines.append(f"| {p['representation']} {p['weights']} | {p['c']} | {v:.2f} | {t:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--pictures", type=int, default=PICTURES)
    args = ap.parse_args(argv)
    col = load_collection("corel5k")
    protocol = Protocol(col)
    features = {}
    for name, weights in representation_candidates("pamir"):
        F, _, _ = collection_inputs(col, protocol, name, weights=weights, progress=False, log=None)
        features[(name, tuple(weights))] = F
    path = RESULTS / "small_selection.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    done = {x["seed"]: x for x in old.get("seeds", []) if old.get("pictures") == args.pictures}
    r = {"command": "python benchmarks/bench_small_selection.py " + " ".join(argv or sys.argv[1:]),
         "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
         "load_average": load_average(), "pictures": args.pictures,
         "seeds": list(done.values())}
    for seed in args.seeds:
        if seed in done:
            continue
        print(f"seed {seed} ...", flush=True)
        r["seeds"].append(one_seed(col, protocol, features, seed, args.pictures))
        r["seeds"].sort(key=lambda x: x["seed"])
        r["summary"] = summary(r["seeds"])
        r["load_average"] = load_average()
        save_report("small_selection", r, report)


if __name__ == "__main__":
    main()
