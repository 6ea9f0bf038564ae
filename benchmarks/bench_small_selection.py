"""Selection on small collections (issue 26, item 4): today's rule against a guarded one, on
Corel 5k subsamples of 700 captioned pictures, averaged over seeds.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_small_selection.py [--seeds 0 1 2 3]

For each seed, 700 pictures drawn from Corel's development set (its 4,500 train + valid
pictures) stand for a person's captioned folder: a tenth of them (70) is the validation split,
as pamir.protocol splits a collection this small, the rest trains. Every point `pamir fit`
chooses among (pamir.training.representation_candidates: 6 representation settings x the
c grid, 18 fits) is trained on the 630 as the product trains (PAMIR's defaults, early
stopping on the 70, the full loop: no race) and scored on every validation query (every
subset of a validation caption); its test mean AvgP is read on Corel's 500 test pictures
and standard queries, to report only. The rules then choose from validation alone:

- argmax (today's): the best validation mean AvgP.
- default: no choice: the default point (pamir.training.race.default_point: the last, richest
  representation candidate, the model's own default parameters).
- guarded (pamir.training.race.guarded_choice): the default point, unless another point beats
  it on the validation queries in a one-sided paired Wilcoxon signed-rank test at
  config.GUARD_ALPHA; then the best mean among those that do.

The features are the cached default representations of `pamir fit corel5k` (codebook and
standardisation fitted on Corel's 4,000 training pictures: unsupervised, no caption of the
test pictures is read); only the subsample's captions train PAMIR. Run it after that fit
has filled PAMIR_CACHE. Results: results/small_selection.json and .md.

The fits can run on another machine: `--export FILE` writes what they need (the four
parts' features of the pictures used, float16 for the dense CNN parts to fit in 64 MB;
captions; the test queries), `--from FILE --out JSON` fits from it (pamir importable, no
feature code), and `--report JSON` writes the results here. With `--pool N` every seed
draws its pictures from the same N development pictures (a smaller export).
"""

from __future__ import annotations

import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import scipy.sparse as sp

# common.harness imports no feature code (no faiss): --from runs where only the model code need import
from common.harness import Run, parser, report_head, save_report
from pamir import config
from pamir.facts.collection import load_collection
from pamir.evaluation import evaluate_model
from pamir.features.representation import take_rows
from pamir.models.pamir import PAMIR
from pamir.protocol import Protocol
from pamir.text.vectors import idf as idf_weights
from pamir.text.vectors import text_vectors
from pamir.training.race import default_point, fit_workers, guarded_choice
from pamir.training.selection import validation_queries

PICTURES = 700
RULES = ("argmax", "default", "guarded")
PARTS = ("cnn", "cnn-lite1", "cnn-lite2", "visterms")
#: the candidates of `pamir fit` (pamir.training.representation_candidates("pamir")), spelt
#: out so that --from needs no feature code
CANDIDATES = (("visterms", (1.0,)), ("cnn", (1.0,)), ("cnn+visterms", (1.0, 0.5)),
              ("cnn+visterms", (1.0, 1.0)), ("cnn+cnn-lite2+visterms", (1.0, 1.0, 1.0)),
              ("cnn+cnn-lite1+cnn-lite2+visterms", (1.0, 1.0, 1.0, 1.0)))


def subsample(development: np.ndarray, seed: int, n: int, pool: int | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """(train, valid) rows: n development pictures (of the first `pool` of a seeded
    shuffle, when given), a tenth of them validation."""
    if pool:
        development = np.sort(np.random.default_rng(12345).permutation(development)[:pool])
    rng = np.random.default_rng(seed)
    pick = rng.choice(development, n, replace=False)
    valid_size = n // 10  # pamir.protocol's rule for a collection this small
    return np.sort(pick[valid_size:]), np.sort(pick[:valid_size])


def export(path: Path, seeds, n: int, pool: int | None) -> None:
    """What the fits need, for the pictures they use (module docstring)."""
    from pamir.training import collection_inputs  # noqa: PLC0415

    col = load_collection("corel5k")
    protocol = Protocol(col)
    splits = {s: subsample(protocol.development, s, n, pool) for s in seeds}
    test = protocol.split("test")
    rows = np.unique(np.concatenate([*(np.concatenate(v) for v in splits.values()), test]))
    where = {int(r): k for k, r in enumerate(rows)}
    arrays = {"rows": rows, "T": np.int64(protocol.T)}
    for part in PARTS:
        F, _, _ = collection_inputs(col, protocol, part, progress=False, log=None)
        F = take_rows(F, rows)
        if part == "visterms":
            F = F.tocsr()
            arrays |= {"visterms/data": F.data, "visterms/indices": F.indices,
                       "visterms/indptr": F.indptr, "visterms/shape": np.array(F.shape)}
        else:
            arrays[part] = np.asarray(F, np.float16)
    Y = protocol.presence(rows).tocsr()
    arrays |= {"Y/data": Y.data, "Y/indices": Y.indices, "Y/indptr": Y.indptr,
               "Y/shape": np.array(Y.shape)}
    tq = protocol.queries(test)
    for name, M in (("tq_presence", tq.presence()), ("tq_relevance", tq.relevance)):
        M = sp.csr_matrix(M)
        arrays |= {f"{name}/data": M.data, f"{name}/indices": M.indices,
                   f"{name}/indptr": M.indptr, f"{name}/shape": np.array(M.shape)}
    arrays["test"] = np.array([where[int(r)] for r in test])
    for s, (tr, va) in splits.items():
        arrays[f"seed{s}/train"] = np.array([where[int(r)] for r in tr])
        arrays[f"seed{s}/valid"] = np.array([where[int(r)] for r in va])
    np.savez(path, **arrays)


def _csr(a, name) -> sp.csr_matrix:
    return sp.csr_matrix((a[f"{name}/data"], a[f"{name}/indices"], a[f"{name}/indptr"]),
                         shape=tuple(a[f"{name}/shape"]))


def load_export(path: Path) -> dict:
    a = np.load(path, allow_pickle=False)
    parts = {p: np.asarray(a[p], np.float32) for p in PARTS if p != "visterms"}
    parts["visterms"] = _csr(a, "visterms")
    features = {}
    for name, weights in CANDIDATES:
        mats = [parts[p] for p in name.split("+")]
        features[(name, weights)] = (sp.hstack([sp.csr_matrix(M, dtype=np.float32) * w
                                                for M, w in zip(mats, weights)]).tocsr()
                                     if len(mats) > 1 else mats[0])
    seeds = sorted(int(k[4:].split("/")[0]) for k in a.files if k.endswith("/train"))
    return {"features": features, "Y": _csr(a, "Y"), "test": a["test"],
            "tq_presence": _csr(a, "tq_presence"), "tq_relevance": _csr(a, "tq_relevance"),
            "splits": {s: (a[f"seed{s}/train"], a[f"seed{s}/valid"]) for s in seeds}}


def one_seed(data: dict, seed: int, log=print) -> dict:
    train, valid = data["splits"][seed]
    test, features, Y = data["test"], data["features"], data["Y"]
    Yt, Yv = Y[train], Y[valid]
    vq = validation_queries(Yv, Yt)
    # query weights from the folder's own training captions
    Qt = text_vectors(data["tq_presence"], idf_weights(Yt))
    relevance = data["tq_relevance"]
    points = [(name, weights, c) for name, weights in features for c in PAMIR.param_grid["c"]]

    def run(point):
        name, weights, c = point
        F = features[(name, weights)]
        started = time.perf_counter()
        m = PAMIR(c=c).fit(take_rows(F, train), Yt, validation=(take_rows(F, valid), Yv))
        per_query = evaluate_model(m, take_rows(F, valid), vq.vectors, vq.relevance,
                                   curve=False).per_query["avgp"]
        t = evaluate_model(m, take_rows(F, test), Qt, relevance, curve=False)
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
            "valid_queries": len(vq), "test_queries": int(relevance.shape[0]), "points": fits}


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
    # a run split between this machine and a lent one says so in its command (no heavy lock)
    lines = [*report_head(f"Selection on small collections: Corel 5k subsamples of "
                          f"{r['pictures']} pictures", r, heavy="device" not in r["command"],
                          note=None),
             f"Seeds: {[x['seed'] for x in r['seeds']]}; each: {r['seeds'][0]['train']} "
             f"training, {r['seeds'][0]['valid']} validation pictures (about "
             f"{np.mean([x['valid_queries'] for x in r['seeds']]):.0f} validation queries), "
             f"18 points (6 representation settings x c in {PAMIR.param_grid['c']}); test: "
             "Corel's 500 test pictures, read to report, never to choose. The guard: "
             f"one-sided paired Wilcoxon over the validation queries, alpha "
             f"{config.GUARD_ALPHA}."
             + (f" Every seed drew its pictures from the same {r['pool']} development pictures "
                "(a smaller export); the CNN parts travelled as float16." if r.get("pool") else "")
             + "\n" if r["seeds"] else "",
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
    o = s.get("oracle")
    if o and s.get("argmax"):
        lines.append(f"The best any rule could do (the test-best point of each seed) is "
                     f"{o['test_avgp_mean'] - s['argmax']['test_avgp_mean']:+.2f} over today's "
                     "choice.\n")
    lines.append("Per point (mean over seeds): validation / test AvgP.\n")
    lines += ["| representation | c | valid | test |", "|---|---:|---:|---:|"]
    if r["seeds"]:
        for k, p in enumerate(r["seeds"][0]["points"]):
            v = np.mean([x["points"][k]["valid_avgp"] for x in r["seeds"]])
            t = np.mean([x["points"][k]["test_avgp"] for x in r["seeds"]])
            lines.append(f"| {p['representation']} {p['weights']} | {p['c']} | {v:.2f} | {t:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--pictures", type=int, default=PICTURES)
    ap.add_argument("--pool", type=int, default=None)
    ap.add_argument("--export", type=Path, help="write the fits' inputs here and stop")
    ap.add_argument("--from", dest="source", type=Path, help="fit from an --export file")
    ap.add_argument("--out", type=Path, help="with --from: the per-seed results (JSON)")
    ap.add_argument("--report", type=Path, help="write the results of a --from run")
    args = ap.parse_args(argv)
    run = Run("bench_small_selection.py", argv)
    if args.export:
        export(args.export, args.seeds, args.pictures, args.pool)
        return
    if args.report:
        r = json.loads(args.report.read_text())
        r["summary"] = summary(r["seeds"])
        save_report("small_selection", r, report)
        return
    source = args.source
    if source is None:
        source = Path(tempfile.mkdtemp()) / "inputs.npz"
        export(source, args.seeds, args.pictures, args.pool)
    data = load_export(source)
    r = {**run.info(), "pictures": args.pictures, "pool": args.pool,
         "seeds": []}
    def finished(result):
        r["seeds"] = sorted(r["seeds"] + [result], key=lambda x: x["seed"])
        r["summary"] = summary(r["seeds"])
        r["load_average"] = run.info()["load_average"]
        if args.out:  # after each seed: a run cut short keeps what it measured
            args.out.write_text(json.dumps(r))
        else:
            save_report("small_selection", r, report)

    # the seeds at once (each fits its points on fit_workers threads): on a many-core
    # machine the slowest fits of one seed no longer leave the others idle
    with ThreadPoolExecutor(len(data["splits"]) if args.source else 1) as pool:
        for result in pool.map(lambda seed: one_seed(data, seed), sorted(data["splits"])):
            finished(result)


if __name__ == "__main__":
    main()
