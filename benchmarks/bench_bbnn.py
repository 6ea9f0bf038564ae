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
import tempfile
import time
from pathlib import Path

import numpy as np

from pamir import config
from pamir.data import load_collection
from pamir.evaluation import evaluate_model
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
    qs = protocol.queries("test")
    Xt, _ = sets["test"]
    t0 = time.perf_counter()
    Z = model.transform(Xt)
    index_seconds = time.perf_counter() - t0
    Q = protocol.query_vectors(qs)
    t0 = time.perf_counter()
    _ = np.asarray(Q @ Z.T)
    query_ms = 1000 * (time.perf_counter() - t0) / len(qs)
    ev = evaluate_model(model, Xt, Q, qs.relevance, protocol.query_subsets(qs))
    return ev, index_seconds, query_ms


def machine() -> str:
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in
                   subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                   if line.startswith("Model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown CPU"
    return f"{cpu}, {os.cpu_count()} cores, torch {__import__('torch').__version__}"


def write_json_key(path: Path, key: str, value: dict) -> None:
    """Read-modify-write one key of a shared JSON file, atomically (temp file + replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    current = json.loads(path.read_text()) if path.exists() else {}
    current[key] = value
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(current, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", choices=("config", "none"), default="config",
                    help="select lr, N1, N2 on validation (config.BBNN_GRID) or use defaults")
    ap.add_argument("--select-triplets", type=int, default=config.BBNN_SELECT_TRIPLETS)
    ap.add_argument("--max-triplets", type=int, default=config.BBNN_MAX_TRIPLETS)
    ap.add_argument("--batch-size", type=int, default=config.BBNN_BATCH)
    ap.add_argument("--negatives", default=config.BBNN_NEGATIVES)
    ap.add_argument("--threads", type=int, default=config.BBNN_THREADS)
    ap.add_argument("--no-write", action="store_true", help="print, write no result files")
    args = ap.parse_args(argv)
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
    if args.no_write:
        return
    entry = {
        "test": table["all"], "single_word": table["single-word"],
        "index_seconds": round(index_seconds, 3), "query_ms": round(query_ms, 4),
        "train_seconds": round(model.fit_seconds_, 1), "triplets": model.triplets_,
        "valid_avgp": round(100 * model.best_valid_avgp_, 2), "params": params,
        "features": "blocks: log(1+count) uLBP 59 + colour 50, 77 blocks/picture",
        "command": "flock /tmp/pamir-heavy.lock " + command, "machine": machine(),
    }
    write_json_key(RESULTS / "corel5k.json", "bbnn", entry)
    (RESULTS / "perquery").mkdir(parents=True, exist_ok=True)
    np.savez(RESULTS / "perquery" / "bbnn.npz",
             **{m: ev.per_query[m] for m in ("avgp", "bep", "p10")})
    report = markdown(table, entry, selection, model.history_,
                      time.perf_counter() - t_start)
    (RESULTS / "bbnn.md").write_text(report)
    print(report)


def markdown(table, entry, selection, history, total_seconds) -> str:
    shared = RESULTS / "corel5k.json"
    pamir = json.loads(shared.read_text()).get("pamir") if shared.exists() else None
    lines = ["# BBNN on Corel 5k (Grangier & Bengio, ICANN 2006, Tables 2 and 3)", "",
             f"Command: `{entry['command']}`  ", f"Machine: {entry['machine']}  ",
             f"Seed: {config.SEED}; parameters: `{json.dumps(entry['params'])}`", "",
             "| queries | measure | paper BBNN | ours BBNN | paper PAMIR | ours PAMIR (bags) |",
             "|---|---|---|---|---|---|"]
    for subset, key in (("all", "test"), ("single-word", "single_word")):
        for m in ("p10", "avgp"):
            ours_pamir = "-"
            if pamir and key in pamir and m in pamir[key]:
                ours_pamir = f"{pamir[key][m]:.1f}"
            lines.append(f"| {subset} ({table[subset]['queries']}) | {m.upper()} | "
                         f"{PAPER[subset][m]} | {table[subset][m]:.1f} | "
                         f"{PAPER_PAMIR[subset][m]} | {ours_pamir} |")
    lines += ["", f"Test BEP: {table['all']['bep']:.1f} (all), "
              f"{table['single-word']['bep']:.1f} (single-word). "
              f"Best validation AvgP {entry['valid_avgp']}.", "",
              f"Training time of the final model on this CPU: {entry['train_seconds']} s "
              f"({entry['triplets']:,} triplets, early stopping on validation AvgP); "
              f"transform of the 499 test pictures {entry['index_seconds']} s; scoring "
              f"{entry['query_ms']} ms a query. Whole benchmark (selection included): "
              f"{total_seconds / 60:.1f} min.", ""]
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
    for h in history:
        lines.append(f"| {h['triplets']:,} | {h['seconds']} | {h['train_loss']:.4f} | "
                     f"{100 * h.get('valid_avgp', float('nan')):.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
