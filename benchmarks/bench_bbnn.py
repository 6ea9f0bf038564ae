"""BBNN on Corel 5k block descriptors: the ICANN 2006 paper's Tables 2 and 3.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_bbnn.py [--quick]

Block descriptors: 77 blocks per picture, uLBP (59) + colour (50) counts, log(1 + count) as
the paper (§4.2): the blocks representation of pamir.features with
FeatureSettings(log_counts=True), colour codebook fitted on protocol.train. The learning
rate, N1 and N2 are chosen by pamir.training.selection.select over BBNN.param_grid, each point trained
for BBNN.selection_params' triplets with early stopping on validation; select then trains the
chosen point with its full settings (max_triplets, early stopping on validation AvgP), which
is evaluated once on the test queries. Writes benchmarks/results/bbnn.md, the `bbnn` key of
benchmarks/results/corel5k.json and benchmarks/results/perquery/bbnn.npz.

--quick: a smoke run (two grid points, a few thousand triplets, no PAMIR on the log blocks)
that writes nothing.
"""

from __future__ import annotations

import json
import time

import numpy as np

from common.corel import Corel, query_ms, test_entry
from common.harness import RESULTS, SUMMARY, Run, parser, read_summary, report_head, write_results
from pamir import config
from pamir.evaluation import wilcoxon
from pamir.features import FeatureSettings
from pamir.models.bbnn import BBNN

PAPER = {"all": {"avgp": 26.2, "p10": 10.2}, "single-word": {"avgp": 35.0, "p10": 28.5}}
PAPER_PAMIR = {"all": {"avgp": 21.6, "p10": 8.8}, "single-word": {"avgp": 30.7, "p10": 25.3}}
#: --quick: triplets per run, and the grid (two learning rates at the default N1, N2)
QUICK = {"max_triplets": 4_000, "eval_every": 2_000}


def log(s: str) -> None:
    print(s, flush=True)


def evaluate(model: BBNN, corel: Corel):
    """Test figures; indexing time as TPAMI Table VII counts it (training, validation
    excluded, plus projecting the test pictures) and ms per query (score + full sort)."""
    t0 = time.perf_counter()
    model.transform(corel.test.X)
    index_seconds = model.train_seconds_ + time.perf_counter() - t0
    return (corel.test.evaluate(model), index_seconds,
            query_ms(model, corel.test.X, corel.test.Q))


def single_word_model(params: dict, corel: Corel) -> dict:
    """ICANN 2006 Table 3 as the paper ran it: the chosen settings trained (and
    early-stopped) on the single-word queries only, evaluated on the single-word test
    queries."""
    model = BBNN(**{**params, "max_query_words": 1}).fit(
        corel.train.X, corel.train.Y, validation=(corel.valid.X, corel.valid.Y))
    row = corel.test.evaluate(model).table(("avgp", "bep", "p10"))["single-word"]
    return {**row, "valid_avgp": round(100 * model.best_valid_avgp_, 2),
            "triplets": model.triplets_, "train_seconds": round(model.train_seconds_, 1)}


def batching(params: dict, corel: Corel, triplets: int) -> list[dict]:
    """The paper's one-triplet SGD against our batches, for the same number of triplets,
    each early-stopped on validation (select over these four settings).

    The loss is the batch mean, so one triplet at lr / 32 moves the weights as far per
    triplet as a batch of 32 at lr; lr / 4 gives the single triplet a larger step."""
    lr = params["learning_rate"]
    runs = [(32, "pooled", lr), (32, "sampled", lr), (1, "sampled", lr / 32),
            (1, "sampled", lr / 4)]
    fixed = {k: v for k, v in params.items()
             if k not in ("batch_size", "negatives", "learning_rate")}
    sel = corel.select("bbnn", params={**fixed, "max_triplets": triplets},
                       grid=[{"batch_size": [b], "negatives": [n], "learning_rate": [r]}
                             for b, n, r in runs], log=lambda s: log(f"batching {s}"))
    return [{**t.params, "valid_avgp": round(t.valid_avgp, 2), "triplets": t.stopping["triplets"],
             "seconds": round(t.seconds, 1)} for t in sel.trials]


def pamir_on_the_same_blocks() -> tuple[dict, np.ndarray]:
    """Linear PAMIR (its default parameters, early-stopped on validation) on visterms of the
    same log(1 + count) block descriptors BBNN reads (k-means on the log-scaled histograms)."""
    corel = Corel(FeatureSettings(scaling="log1p"))
    sel = corel.select("pamir", grid={}, log=None)
    ev = corel.test.evaluate(sel.model)
    table = ev.table(("avgp", "bep", "p10"))
    return ({"test": table["all"], "single_word": table["single-word"],
             "valid_avgp": round(sel.valid_avgp, 2), "c": sel.params["c"],
             "best_update": sel.model.best_update_, "features": "visterms of log(1+count) "
             f"blocks, {corel.settings.n_visterms:,} codewords"}, ev.per_query["avgp"])


def significance(bbnn_avgp: np.ndarray, others: dict[str, np.ndarray]) -> dict:
    """Wilcoxon signed-rank of BBNN against each PAMIR, per test query AvgP."""
    out = {}
    for name, avgp in others.items():
        w = wilcoxon(bbnn_avgp, avgp)
        out[name] = {"pvalue": w["pvalue"], "significant": w["significant"],
                     "better": {"a": "bbnn", "b": name, None: None}[w["better"]]}
    return out


def main(argv=None):
    ap = parser(__doc__)
    ap.add_argument("--grid", choices=("model", "none"), default="model",
                    help="select lr, N1, N2 on validation (BBNN.param_grid) or keep the "
                         "defaults")
    ap.add_argument("--skip-extras", action="store_true",
                    help="only the selection and the final model: no single-word model, "
                         "batching study or PAMIR on the same blocks")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: two grid points, few triplets; writes nothing")
    ap.add_argument("--no-write", action="store_true", help="print, write no result files")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite bbnn.md from the bbnn key of corel5k.json without running")
    args = ap.parse_args(argv)
    if args.report_only:
        (RESULTS / "bbnn.md").write_text(markdown(read_summary()["bbnn"]))
        return
    run = Run("bench_bbnn.py", argv, torch=True)
    corel = Corel(FeatureSettings(log_counts=True), representation="blocks")
    fixed = {"random_state": config.SEED}
    grid = None if args.grid == "model" else {}
    if args.quick:
        fixed |= QUICK
        grid = {"learning_rate": BBNN.param_grid["learning_rate"][:2]}
    log(f"seed {config.SEED}; BBNN defaults {BBNN.default_params()}; grid "
        f"{BBNN.param_grid if grid is None else grid}; fixed {fixed}")
    sel = corel.select("bbnn", params=fixed, grid=grid, log=lambda s: log(f"select {s}"))
    model, params = sel.model, sel.params
    ev, index_seconds, q_ms = evaluate(model, corel)
    table = ev.table(("avgp", "bep", "p10"))
    log(json.dumps(table, indent=1))
    entry = {
        "test": table["all"], "single_word": table["single-word"],
        "index_seconds": round(index_seconds, 1), "query_ms": round(q_ms, 4),
        "train_seconds": round(model.train_seconds_, 1),
        "fit_seconds": round(model.fit_seconds_, 1), "triplets": model.triplets_,
        "valid_avgp": round(sel.valid_avgp, 2), "params": params,
        "features": "blocks: log(1+count) uLBP 59 + colour 50, 77 blocks/picture",
        "selection": [{**t.params, "valid_avgp": round(t.valid_avgp, 2),
                       "triplets": t.stopping.get("triplets"), "seconds": round(t.seconds, 1)}
                      for t in sel.trials] if sel.chosen else [],
        "history": model.history_, **run.info(),
    }
    if not args.skip_extras:
        entry["single_word_model"] = single_word_model(params, corel)
        log(f"single-word model {entry['single_word_model']}")
        entry["batching"] = batching(params, corel, BBNN.selection_params["max_triplets"]
                                     if not args.quick else QUICK["max_triplets"])
        others = {}
        if not args.quick:
            entry["pamir_same_blocks"], others["pamir (log1p blocks)"] = \
                pamir_on_the_same_blocks()
            log(f"PAMIR on the same blocks {entry['pamir_same_blocks']}")
        if (RESULTS / "perquery" / "pamir.npz").exists() and SUMMARY.exists():
            name = f"pamir ({_pamir_features(read_summary().get('pamir'))})"
            others[name] = np.load(RESULTS / "perquery" / "pamir.npz")["avgp"]
        entry["wilcoxon"] = significance(ev.per_query["avgp"], others)
    entry["total_minutes"] = run.minutes()
    if args.no_write or args.quick:
        log(markdown(entry))
        return
    test_entry("bbnn", ev)  # the per-query file
    write_results({"bbnn": entry})
    report = markdown(entry)
    (RESULTS / "bbnn.md").write_text(report)
    log(report)


def _pamir_cells(pamir: dict | None, key: str, m: str) -> str:
    """Our PAMIR's figure for a row of Tables 2/3 (`key`: test or single_word)."""
    if not pamir:
        return "-"
    row = pamir.get(key) or pamir.get("subsets", {}).get("single-word" if key == "single_word"
                                                          else "all")
    return f"{row[m]:.1f}" if row and m in row else "-"


def _pamir_features(pamir: dict | None) -> str:
    s = (pamir or {}).get("features", {}).get("settings", {})
    return f"{s.get('scaling', '?')}-scaled blocks, {s.get('n_visterms', '?'):,} visterms"


def markdown(entry: dict) -> str:
    pamir = read_summary().get("pamir")
    same = entry.get("pamir_same_blocks")
    sw = entry.get("single_word_model")
    command = entry["command"].removeprefix("flock /tmp/pamir-heavy.lock ")  # older entries
    lines = [*report_head("BBNN on Corel 5k (Grangier & Bengio, ICANN 2006, Tables 2 and 3)",
                          {**entry, "command": command}), "",
             f"Seed: {config.SEED}; parameters: `{json.dumps(entry['params'])}`", "",
             "Ours: BBNN trained on every training query (all subsets of a caption); PAMIR "
             f"(bags) is benchmarks/bench_pamir.py's model ({_pamir_features(pamir)}); PAMIR "
             "(log blocks) is PAMIR on visterms of the very log(1 + count) "
             "block descriptors BBNN reads. Single-word rows of these columns are the "
             "all-query models on the 179 single-word test queries; the paper's Table 3 "
             "trained separately on single-word queries, as our last column does.", "",
             "| queries | measure | paper BBNN | ours BBNN | paper PAMIR | ours PAMIR (bags) | "
             "ours PAMIR (log blocks) | ours BBNN, single-word training |",
             "|---|---|---|---|---|---|---|---|"]
    for subset, key in (("all", "test"), ("single-word", "single_word")):
        for m in ("p10", "avgp"):
            own = f"{sw[m]:.1f}" if sw and subset == "single-word" else "-"
            lines.append(f"| {subset} ({entry[key]['queries']}) | {m.upper()} | "
                         f"{PAPER[subset][m]} | {entry[key][m]:.1f} | "
                         f"{PAPER_PAMIR[subset][m]} | {_pamir_cells(pamir, key, m)} | "
                         f"{_pamir_cells(same, key, m)} | {own} |")
    lines += ["", f"Test BEP: {entry['test']['bep']:.1f} (all), "
              f"{entry['single_word']['bep']:.1f} (single-word). "
              f"Best validation AvgP {entry['valid_avgp']}."]
    if entry.get("wilcoxon"):
        lines += ["", "Wilcoxon signed-rank on the 2,241 per-query AvgP (95%): " + "; ".join(
            f"BBNN vs {name}: p = {w['pvalue']:.2g}, "
            + (f"{w['better']} significantly better" if w["significant"] else "no significant "
               "difference") for name, w in entry["wilcoxon"].items()) + "."]
    if same:
        lines += ["", f"PAMIR on the log blocks: validation AvgP {same['valid_avgp']}, c = "
                  f"{same['c']}, best at {same['best_update']:,} updates."]
    if sw:
        lines += ["", f"Single-word model: validation AvgP {sw['valid_avgp']} (single-word "
                  f"validation queries), {sw['triplets']:,} triplets, {sw['train_seconds']} s."]
    lines += ["", "## Time", "",
              f"Training the final model on this CPU: {entry['train_seconds']} s of SGD "
              f"({entry['triplets']:,} triplets, early stopping on validation AvgP; "
              f"{entry.get('fit_seconds', entry['train_seconds'])} s with the validation "
              f"passes). Indexing as TPAMI Table VII counts it (training + projecting the 499 "
              f"test pictures): {entry['index_seconds']} s. Retrieval: {entry['query_ms']} ms "
              f"a query (scores of the 499 pictures + sort). Whole benchmark: "
              f"{entry.get('total_minutes', '-')} min.", ""]
    if entry.get("batching"):
        lines += ["## Batches against the paper's one-triplet SGD (validation AvgP)", "",
                  "Same selected N1, N2; each run limited to the same number of triplets, "
                  "early-stopped on validation. The loss is the batch mean: one triplet at "
                  "lr / 32 takes the per-triplet step of a batch of 32 at lr.", "",
                  "| batch | negatives | learning rate | valid AvgP | triplets | seconds |",
                  "|---|---|---|---|---|---|"]
        for r in entry["batching"]:
            lines.append(f"| {r['batch_size']} | {r['negatives']} | {r['learning_rate']:g} | "
                         f"{r['valid_avgp']} | {r['triplets']:,} | "
                         f"{r.get('seconds', r.get('train_seconds'))} |")
        lines.append("")
    selection = entry.get("selection") or []
    if selection:
        names = [k for k in selection[0] if k not in ("valid_avgp", "triplets", "seconds")]
        lines += ["## Selection on validation", "",
                  "| " + " | ".join(names) + " | valid AvgP | triplets | seconds |",
                  "|" + "---|" * (len(names) + 3)]
        for r in selection:
            lines.append("| " + " | ".join(str(r[n]) for n in names)
                         + f" | {r['valid_avgp']} | {r['triplets']:,} | {r['seconds']} |")
        lines.append("")
    lines += ["## Training curve of the final model", "",
              "| triplets | seconds | train loss | valid AvgP |", "|---|---|---|---|"]
    for h in entry.get("history", []):
        lines.append(f"| {h['triplets']:,} | {h['seconds']} | {h['train_loss']:.4f} | "
                     f"{100 * h.get('valid_avgp', float('nan')):.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
