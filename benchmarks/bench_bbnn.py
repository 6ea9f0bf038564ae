"""BBNN on Corel 5k block descriptors: the ICANN 2006 paper's Tables 2 and 3.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_bbnn.py

Block descriptors: 77 blocks per picture, uLBP (59) + colour (50) counts, log(1 + count)
(pamir.features, FeatureSettings(log_counts=True), colour codebook fitted on protocol.train).
The learning rate, N1 and N2 are selected on the validation queries (config.BBNN_GRID, each
point trained for --select-triplets with early stopping); the selected point is then trained
for up to config.BBNN_MAX_TRIPLETS with early stopping on validation AvgP and evaluated once
on the test queries. Writes benchmarks/results/bbnn.md, the `bbnn` key of
benchmarks/results/corel5k.json and benchmarks/results/perquery/bbnn.npz.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from pamir import config
from pamir.data import load_collection
from bench_pamir import Data, atomic_json_update, query_time
from pamir.evaluation import evaluate_model, wilcoxon
from pamir.features import ColourCodebook, FeatureSettings, extract_blocks
from pamir.models.bbnn import BBNN, Blocks, as_blocks
from pamir.protocol import Protocol

RESULTS = Path(__file__).resolve().parent / "results"
PAPER = {"all": {"avgp": 26.2, "p10": 10.2}, "single-word": {"avgp": 35.0, "p10": 28.5}}
PAPER_PAMIR = {"all": {"avgp": 21.6, "p10": 8.8}, "single-word": {"avgp": 30.7, "p10": 25.3}}


def corel5k_blocks():
    """(protocol, Blocks of all 5,000 pictures in collection order), log-scaled counts."""
    collection = load_collection("corel5k")
    protocol = Protocol(collection)
    s = FeatureSettings(log_counts=True)
    # the same colour codebook as VisualPipeline fits, so the block cache is shared with it
    codebook = ColourCodebook.fit(
        [collection.paths[i] for i in protocol.train], s.n_colours, s.seed,
        pixels_per_picture=s.colour_pixels_per_picture, max_pictures=s.colour_max_pictures,
        short_side=s.short_side)
    block_set = extract_blocks(collection.paths, s, codebook,
                               cache_dir=config.default_cache_dir(), progress=False)
    if not block_set.ok.all():
        raise RuntimeError(f"corel5k: {int((~block_set.ok).sum())} pictures unreadable: "
                           f"{block_set.failures[:3]}")
    return protocol, as_blocks(block_set)


def data(protocol: Protocol, blocks: Blocks):
    sets = {name: (blocks.take(protocol.split(name)), protocol.presence(protocol.split(name)))
            for name in ("train", "valid", "test")}
    return sets


def train(params: dict, sets, verbose=True) -> BBNN:
    model = BBNN(**params, verbose=verbose)
    (X, Y), (Xv, Yv) = sets["train"], sets["valid"]
    return model.fit(X, Y, Xv, Yv)


def select(sets, grid: dict, base: dict, triplets: int) -> tuple[dict, list[dict]]:
    """Every point of `grid` trained for at most `triplets`; the best validation AvgP wins."""
    rows = []
    names = list(grid)
    for values in itertools.product(*(grid[n] for n in names)):
        params = {**base, **dict(zip(names, values)), "max_triplets": triplets}
        model = train(params, sets, verbose=False)
        row = {**dict(zip(names, values)), "valid_avgp": round(100 * model.best_valid_avgp_, 2),
               "triplets": model.triplets_, "seconds": round(model.fit_seconds_, 1)}
        print("select", row, flush=True)
        rows.append(row)
    best = max(rows, key=lambda r: r["valid_avgp"])
    return {n: best[n] for n in names}, rows


def evaluate(model: BBNN, protocol: Protocol, sets):
    """Test figures; indexing time as TPAMI Table VII counts it (training, validation
    excluded, plus projecting the test pictures) and ms per query (score + full sort)."""
    qs = protocol.queries("test")
    Xt, _ = sets["test"]
    t0 = time.perf_counter()
    Z = model.transform(Xt)
    index_seconds = model.train_seconds_ + time.perf_counter() - t0
    Q = protocol.query_vectors(qs)
    ev = evaluate_model(model, Xt, Q, qs.relevance, protocol.query_subsets(qs))
    return ev, index_seconds, query_time(Z, Q)


def single_word_model(params: dict, protocol: Protocol, sets) -> dict:
    """ICANN 2006 Table 3 as the paper ran it: a model trained (and early-stopped) on the
    single-word queries only, evaluated on the single-word test queries."""
    model = train({**params, "max_query_words": 1}, sets, verbose=False)
    ev, _, _ = evaluate(model, protocol, sets)
    row = ev.table(("avgp", "bep", "p10"))["single-word"]
    return {**row, "valid_avgp": round(100 * model.best_valid_avgp_, 2),
            "triplets": model.triplets_, "train_seconds": round(model.train_seconds_, 1)}


def batching(params: dict, sets, triplets: int) -> list[dict]:
    """The paper's one-triplet SGD against our batches, for the same number of triplets.

    The loss is the batch mean, so one triplet at lr / 32 moves the weights as far per
    triplet as a batch of 32 at lr; lr / 4 gives the single triplet a larger step."""
    lr = params["learning_rate"]
    runs = [(32, "pooled", lr), (32, "sampled", lr), (1, "sampled", lr / 32),
            (1, "sampled", lr / 4)]
    rows = []
    for batch, negatives, rate in runs:
        model = train({**params, "batch_size": batch, "negatives": negatives,
                       "learning_rate": rate, "max_triplets": triplets}, sets, verbose=False)
        rows.append({"batch_size": batch, "negatives": negatives, "learning_rate": rate,
                     "valid_avgp": round(100 * model.best_valid_avgp_, 2),
                     "triplets": model.triplets_,
                     "train_seconds": round(model.train_seconds_, 1)})
        print("batching", rows[-1], flush=True)
    return rows


def pamir_on_the_same_blocks(protocol: Protocol) -> tuple[dict, np.ndarray]:
    """Linear PAMIR on visterms of the same log(1 + count) block descriptors BBNN reads
    (k-means on the log-scaled histograms), c = config.PAMIR_C, early-stopped on validation."""
    data = Data(FeatureSettings(scaling="log1p"))
    model = data.fit(c=config.PAMIR_C)
    ev = data.evaluate(model)
    table = ev.table(("avgp", "bep", "p10"))
    return ({"test": table["all"], "single_word": table["single-word"],
             "valid_avgp": round(data.valid_avgp(model), 2), "c": config.PAMIR_C,
             "best_update": model.best_update_, "features": "visterms of log(1+count) blocks, "
             f"{config.N_VISTERMS:,} codewords"}, ev.per_query["avgp"])


def significance(bbnn_avgp: np.ndarray, others: dict[str, np.ndarray]) -> dict:
    """Wilcoxon signed-rank of BBNN against each PAMIR, per test query AvgP."""
    out = {}
    for name, avgp in others.items():
        w = wilcoxon(bbnn_avgp, avgp)
        out[name] = {"pvalue": w["pvalue"], "significant": w["significant"],
                     "better": {"a": "bbnn", "b": name, None: None}[w["better"]]}
    return out


def machine() -> str:
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in
                   subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                   if line.startswith("Model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown CPU"
    return f"{cpu}, {os.cpu_count()} cores, torch {__import__('torch').__version__}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", choices=("config", "none"), default="config",
                    help="select lr, N1, N2 on validation (config.BBNN_GRID) or use defaults")
    ap.add_argument("--select-triplets", type=int, default=config.BBNN_SELECT_TRIPLETS)
    ap.add_argument("--max-triplets", type=int, default=config.BBNN_MAX_TRIPLETS)
    ap.add_argument("--batch-size", type=int, default=config.BBNN_BATCH)
    ap.add_argument("--negatives", default=config.BBNN_NEGATIVES)
    ap.add_argument("--threads", type=int, default=config.BBNN_THREADS)
    ap.add_argument("--skip-extras", action="store_true",
                    help="only the selection and the final model: no single-word model, "
                         "batching study or PAMIR on the same blocks")
    ap.add_argument("--no-write", action="store_true", help="print, write no result files")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite bbnn.md from the bbnn key of corel5k.json without running")
    args = ap.parse_args(argv)
    if args.report_only:
        entry = json.loads((RESULTS / "corel5k.json").read_text())["bbnn"]
        (RESULTS / "bbnn.md").write_text(markdown(entry))
        return
    command = " ".join(["python benchmarks/bench_bbnn.py",
                        *(argv if argv is not None else sys.argv[1:])])
    t_start = time.perf_counter()

    protocol, blocks = corel5k_blocks()
    sets = data(protocol, blocks)
    base = {"learning_rate": config.BBNN_LEARNING_RATE, "n_hidden1": config.BBNN_N1,
            "n_hidden2": config.BBNN_N2, "epsilon": config.BBNN_EPSILON,
            "batch_size": args.batch_size, "negatives": args.negatives,
            "eval_every": config.BBNN_EVAL_EVERY, "patience": config.BBNN_PATIENCE,
            "random_state": config.SEED, "n_threads": args.threads}
    print("seed", config.SEED, "base", base, flush=True)
    selection = []
    if args.grid == "config":
        chosen, selection = select(sets, config.BBNN_GRID, base, args.select_triplets)
        base |= chosen
    params = {**base, "max_triplets": args.max_triplets}
    print("final", params, flush=True)
    model = train(params, sets)
    ev, index_seconds, query_ms = evaluate(model, protocol, sets)
    table = ev.table(("avgp", "bep", "p10"))
    print(json.dumps(table, indent=1))
    entry = {
        "test": table["all"], "single_word": table["single-word"],
        "index_seconds": round(index_seconds, 1), "query_ms": round(query_ms, 4),
        "train_seconds": round(model.train_seconds_, 1),
        "fit_seconds": round(model.fit_seconds_, 1), "triplets": model.triplets_,
        "valid_avgp": round(100 * model.best_valid_avgp_, 2), "params": params,
        "features": "blocks: log(1+count) uLBP 59 + colour 50, 77 blocks/picture",
        "selection": selection, "history": model.history_,
        "command": "flock /tmp/pamir-heavy.lock " + command, "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if not args.skip_extras:
        entry["single_word_model"] = single_word_model(params, protocol, sets)
        print("single-word model", entry["single_word_model"], flush=True)
        entry["batching"] = batching(params, sets, args.select_triplets)
        entry["pamir_same_blocks"], pamir_log_avgp = pamir_on_the_same_blocks(protocol)
        print("PAMIR on the same blocks", entry["pamir_same_blocks"], flush=True)
        others = {"pamir (log1p blocks)": pamir_log_avgp}
        shared = RESULTS / "corel5k.json"
        if (RESULTS / "perquery" / "pamir.npz").exists() and shared.exists():
            name = f"pamir ({_pamir_features(json.loads(shared.read_text()).get('pamir'))})"
            others[name] = np.load(RESULTS / "perquery" / "pamir.npz")["avgp"]
        entry["wilcoxon"] = significance(ev.per_query["avgp"], others)
    entry["total_minutes"] = round((time.perf_counter() - t_start) / 60, 1)
    if args.no_write:
        return
    atomic_json_update(RESULTS / "corel5k.json", "bbnn", entry)
    (RESULTS / "perquery").mkdir(parents=True, exist_ok=True)
    np.savez(RESULTS / "perquery" / "bbnn.npz",
             **{m: ev.per_query[m] for m in ("avgp", "bep", "p10")}, curve=ev.curve)
    report = markdown(entry)
    (RESULTS / "bbnn.md").write_text(report)
    print(report)


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
    shared = RESULTS / "corel5k.json"
    pamir = json.loads(shared.read_text()).get("pamir") if shared.exists() else None
    same = entry.get("pamir_same_blocks")
    sw = entry.get("single_word_model")
    lines = ["# BBNN on Corel 5k (Grangier & Bengio, ICANN 2006, Tables 2 and 3)", "",
             f"Command: `{entry['command']}`  ", f"Machine: {entry['machine']}; "
             f"{entry.get('date', '')}  ",
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
                  "| batch | negatives | learning rate | valid AvgP | triplets | SGD seconds |",
                  "|---|---|---|---|---|---|"]
        for r in entry["batching"]:
            lines.append(f"| {r['batch_size']} | {r['negatives']} | {r['learning_rate']:g} | "
                         f"{r['valid_avgp']} | {r['triplets']:,} | {r['train_seconds']} |")
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
