"""Linear PAMIR on Corel 5k: TPAMI Tables III, IX, X, XI, XII, VII and VIII, and PA updates/s.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_pamir.py [--block-fractions F ...]

1. Table III (validation AvgP per block size), a study: for each block fraction (block side /
   shorter side of our half-size pictures: 0.25 = 32 px here = the paper's 64 px) the visterm
   features are fitted on the 4,000 training pictures (cached) and PAMIR with its default
   parameters is trained on train, early-stopped on validation AvgP.
2. The main selection is what `pamir fit corel5k --model pamir` does: the default visterm
   bags, c chosen over PAMIR.param_grid by pamir.training.selection.select, each point early-stopped
   on validation (TPAMI §V-B: c and the number of updates selected on validation, never on
   test). If Table III prefers another block size than the default, the report says so.
3. Tables IX-XII: the chosen model on the 2,241 test queries (499 test pictures), overall and
   per subset; the same settings with other seeds (spread of the triplet sampling).
4. Table VII indexing time: training with the chosen c for the chosen number of updates (no
   validation), plus projecting the test pictures; features excluded, as in the paper.
   Table VIII: retrieval time per query (score the 499 test pictures, sort), averaged over the
   test queries. PA updates per second: triplets drawn per second of the numba core.

Writes benchmarks/results/pamir_corel5k.md, pamir_corel5k.json, perquery/pamir.npz and the
`pamir` key of benchmarks/results/corel5k.json.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from common.corel import Corel, pct, query_ms, test_entry
from common.harness import METRICS, RESULTS, Run, parser, report_head, write_json, write_results
from common.tpami import PAPER_TABLE_III, PAPER_TABLE_IX
from pamir import config
from pamir.features import FeatureSettings
from pamir.models.pamir import PAMIR


PAPER_BLOCKS = {32: 345, 48: 135, 64: 77, 96: 28, 128: 15, 192: 3, 256: 2}
PAPER_TABLE_X = {"easy": 43.3, "difficult": 22.4}
PAPER_TABLE_XI = {"single-word": 34.0, "multi-word": 25.7}
PAPER_TABLE_XII = {"avgp": 16.1, "bep": 7.7, "p10": 3.5}
PAPER_TABLE_VII_S = 17      # Corel Small indexing (training + test projection), AMD Athlon64
PAPER_TABLE_VIII_MS = 0.34  # ms per query, same machine
PAPER_TABLE_V = {"c": 0.1, "n_updates": 2.53e6}
PAPER_TABLE_IV_VALID = 27.3  # visterm-linear kernel, validation AvgP


def paper_block_px(fraction: float) -> int:
    """The paper's block side for our fraction of the shorter side (256 px on its pictures)."""
    return int(round(fraction * 256))


def table_iii(fractions) -> tuple[list[dict], dict[float, Corel]]:
    """PAMIR with its default parameters on each block size (validation AvgP)."""
    rows, corels = [], {}
    for f in fractions:
        print(f"[Table III] block fraction {f}: features ...", flush=True)
        corel = Corel(FeatureSettings(block_fraction=f))
        sel = corel.select("pamir", grid={}, log=None)
        row = {"block_fraction": f, "block_px_ours": int(round(f * 128)),
               "block_px_paper": paper_block_px(f),
               "blocks_per_picture": PAPER_BLOCKS.get(paper_block_px(f)),
               "visterms_per_picture": corel.visterms_per_picture(),
               "valid_avgp": round(sel.valid_avgp, 2),
               "best_update": sel.model.best_update_,
               "feature_seconds": round(corel.feature_seconds, 1)}
        print(f"[Table III] {row}", flush=True)
        rows.append(row)
        corels[f] = corel
    return rows, corels


def seed_spread(corel: Corel, params: dict, seeds: int) -> list[dict]:
    """The chosen parameters with other seeds of the triplet sampling, validation and test."""
    out = []
    for seed in range(1, seeds):
        sel = corel.select("pamir", params={**params, "random_state": config.SEED + seed},
                           grid={}, log=None)
        ev = corel.test.evaluate(sel.model)
        out.append({"random_state": config.SEED + seed, "valid_avgp": round(sel.valid_avgp, 2),
                    **{m: pct(ev, m) for m in METRICS}})
        print(f"[seeds] {out[-1]}", flush=True)
    return out


def indexing_time(corel: Corel, params: dict, repeats: int = 3) -> dict:
    """Train for the chosen number of updates without validation + project the test
    pictures (TPAMI Table VII); the best of `repeats` runs, all listed."""
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model = PAMIR(**params).fit(corel.train.X, corel.train.Y)
        t1 = time.perf_counter()
        model.transform(corel.test.X)
        t2 = time.perf_counter()
        runs.append({"train_s": round(t1 - t0, 3), "project_test_s": round(t2 - t1, 4),
                     "total_s": round(t2 - t0, 3),
                     "updates_per_second": round(model.updates_per_second_),
                     "updates_per_cpu_second": round(model.n_updates_ / model.train_cpu_seconds_),
                     "active_fraction": round(model.active_updates_ / max(model.n_updates_, 1),
                                              4)})
    best = min(runs, key=lambda r: r["total_s"])
    return {"index_seconds": best["total_s"], "runs": runs,
            "updates_per_second": max(r["updates_per_second"] for r in runs),
            "updates_per_cpu_second": max(r["updates_per_cpu_second"] for r in runs)}


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--block-fractions", type=float, nargs="+",
                    default=[0.25, 0.375, 0.5],
                    help="block side / shorter side for Table III (0.25 = the paper's 64 px)")
    ap.add_argument("--seeds", type=int, default=3,
                    help="seeds of the triplet sampling to report the test spread over")
    ap.add_argument("--out", default=str(RESULTS / "pamir_corel5k.md"))
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the markdown from pamir_corel5k.json without running")
    args = ap.parse_args(argv)
    if args.report_only:
        Path(args.out).write_text(report(json.loads((RESULTS / "pamir_corel5k.json").read_text())))
        return
    run = Run("bench_pamir.py", argv)
    print(f"seed {config.SEED}; PAMIR defaults {PAMIR.default_params()}, grid "
          f"{PAMIR.param_grid}", flush=True)

    blocks, corels = table_iii(sorted(args.block_fractions))
    default = FeatureSettings.block_fraction
    corel = corels.get(default) or Corel()
    sel = corel.select("pamir", log=lambda s: print(f"[c] {s}", flush=True))
    model = sel.model
    params = sel.refit_params()  # the chosen c and the number of updates kept
    ev = corel.test.evaluate(model)
    seeds = seed_spread(corel, sel.chosen, args.seeds)

    timing = indexing_time(corel, params)
    q_ms = query_ms(model, corel.test.X, corel.test.Q)
    print(f"[timing] index {timing['index_seconds']} s, query {q_ms:.4f} ms, "
          f"{timing['updates_per_second']:,} updates/s", flush=True)

    result = {
        **test_entry("pamir", ev),
        "index_seconds": timing["index_seconds"], "query_ms": round(q_ms, 4),
        "updates_per_second": timing["updates_per_second"],
        "updates_per_cpu_second": timing["updates_per_cpu_second"],
        "valid_avgp": round(sel.valid_avgp, 2), "params": params,
        "block_fraction": default,
        "block_fraction_best_on_validation": max(blocks, key=lambda r: r["valid_avgp"])[
            "block_fraction"],
        "c_grid": [{"c": t.params["c"], "valid_avgp": round(t.valid_avgp, 2),
                    "best_update": t.stopping["best_update"],
                    "n_updates": t.stopping["n_updates"], "seconds": round(t.seconds, 1)}
                   for t in sel.trials],
        "block_sizes": blocks, "seeds": seeds, "timing_runs": timing["runs"],
        "features": {"settings": corel.settings.to_dict(),
                     "visterms_per_picture": corel.visterms_per_picture()},
        "history": model.history_, **run.info(),
    }
    write_results({"pamir": result})
    write_json(RESULTS / "pamir_corel5k.json", result)
    Path(args.out).write_text(report(result))
    print(f"wrote {args.out} ({run.minutes()} min)")


def report(r: dict) -> str:
    s, t = r["subsets"], r["test"]
    seeds = [{"random_state": r["params"]["random_state"], **t}] + r["seeds"]
    avgps = np.array([x["avgp"] for x in seeds])
    L = [
        *report_head("Linear PAMIR on Corel 5k (TPAMI 2008 tables, ours next to the paper's)",
                     r),
        f"Pictures: half the papers' size (192x128); block sizes are given on our pictures and "
        f"as the paper's equivalent. Seed {config.SEED}; everything chosen on validation, by "
        "pamir.training.selection as `pamir fit corel5k --model pamir` chooses.\n",
        "## Table III: block size (validation AvgP %, PAMIR's default parameters, c = "
        f"{PAMIR.default_params()['c']}, early stopping)\n",
        "| block (ours px) | paper-equivalent px | blocks / picture (ours = paper) | "
        "distinct visterms / picture (ours) | valid AvgP (ours) | valid AvgP (paper) |",
        "|---|---|---|---|---|---|",
    ]
    for b in r["block_sizes"]:
        px = b["block_px_paper"]
        visterms = b.get("visterms_per_picture", b["blocks_per_picture"])  # older runs
        L.append(f"| {b['block_px_ours']} | {px} | {PAPER_BLOCKS.get(px, '-')} | {visterms} | "
                 f"{b['valid_avgp']:.2f} | {PAPER_TABLE_III.get(px, '-')} |")
    best = r.get("block_fraction_best_on_validation", r["block_fraction"])
    L += [f"\nThe models read block fraction {r['block_fraction']}, the default of "
          f"pamir.features.FeatureSettings ({r['features'].get('visterms_per_picture')} "
          "distinct visterms per picture on average)"
          + (", also the best here on validation.\n" if best == r["block_fraction"] else
             f"; validation prefers {best} here: the default should be measured again.\n"),
          "## Table IV (kernels)\n",
          f"Visterm-linear kernel: ours {r['valid_avgp']:.2f} validation AvgP vs the paper's "
          f"{PAPER_TABLE_IV_VALID}. The expected likelihood and match kernels (and kernel "
          "PAMIR's own visterm-linear run) are in benchmarks/results/pamir_kernels.md "
          "(benchmarks/bench_kernels.py).\n",
          "## Table V: learning parameters (chosen on validation)\n",
          "| c | valid AvgP | best point (updates) | updates drawn | seconds (with validation) |",
          "|---|---|---|---|---|"]
    for g in r["c_grid"]:
        L.append(f"| {g['c']} | {g['valid_avgp']:.2f} | {g['best_update']:,} | "
                 f"{g['n_updates']:,} | {g.get('seconds', '-')} |")
    L += [f"\nChosen: c = {r['params']['c']}, {r['params']['n_updates']:,} updates "
          f"(paper: c = {PAPER_TABLE_V['c']}, {PAPER_TABLE_V['n_updates']:.3g} updates). "
          f"Averaged W: {r['params']['average']}; margin {r['params']['margin']}.\n",
          "## Table IX: test queries (2,241 queries, 499 pictures)\n",
          "| | ours | paper |", "|---|---|---|"]
    for m, label in (("avgp", "AvgP %"), ("bep", "BEP %"), ("p10", "P10 %")):
        L.append(f"| {label} | {t[m]:.2f} | {PAPER_TABLE_IX[m]} |")
    if len(seeds) > 1:
        L.append(f"\nOther seeds of the triplet sampling (same settings): test AvgP "
                 f"{', '.join(f'{x:.2f}' for x in avgps)} (mean {avgps.mean():.2f}, sd "
                 f"{avgps.std(ddof=1):.2f}); the reported row is seed {config.SEED}.")
    L += ["\n## Table X: easy (>= 3 relevant) and difficult queries (AvgP %)\n",
          "| | queries | ours | paper |", "|---|---|---|---|"]
    for k in ("easy", "difficult"):
        L.append(f"| {k} | {s[k]['queries']:,} | {s[k]['avgp']:.2f} | {PAPER_TABLE_X[k]} |")
    L += ["\n## Table XI: single- and multi-word queries (AvgP %)\n",
          "| | queries | ours | paper |", "|---|---|---|---|"]
    for k in ("single-word", "multi-word"):
        L.append(f"| {k} | {s[k]['queries']:,} | {s[k]['avgp']:.2f} | {PAPER_TABLE_XI[k]} |")
    u = s["unseen"]
    L += [f"\n## Table XII: test queries unseen in train and validation ({u['queries']:,} "
          "queries; paper: 601)\n", "| | ours | paper |", "|---|---|---|"]
    for m, label in (("avgp", "AvgP %"), ("bep", "BEP %"), ("p10", "P10 %")):
        L.append(f"| {label} | {u[m]:.2f} | {PAPER_TABLE_XII[m]} |")
    L += ["\n## Tables VII and VIII: time\n",
          "| | ours | paper (Athlon64 2.4 GHz) | target |", "|---|---|---|---|",
          f"| indexing: training + projecting the test pictures (s) | {r['index_seconds']:.2f} "
          f"| {PAPER_TABLE_VII_S} | <= 3 |",
          f"| retrieval per query, 499 pictures (ms) | {r['query_ms']:.4f} | "
          f"{PAPER_TABLE_VIII_MS} | <= 0.05 |",
          f"| PA updates per second (one core; wall clock / process CPU time) | "
          f"{r['updates_per_second']:,} / {r['updates_per_cpu_second']:,} | "
          f"{PAPER_TABLE_V['n_updates'] / PAPER_TABLE_VII_S:,.0f} (2.53M in < 17 s) | "
          ">= 1,000,000 |",
          "\nIndexing runs (train s, project s, updates/s wall, updates/s CPU, fraction of "
          "triplets with a positive loss): " + "; ".join(
              f"{x['train_s']} / {x['project_test_s']} / {x['updates_per_second']:,} / "
              f"{x['updates_per_cpu_second']:,} / {x['active_fraction']}"
              for x in r["timing_runs"]),
          "\n## Validation AvgP during training (chosen c)\n",
          "| updates | valid AvgP % | active fraction |", "|---|---|---|"]
    for h in r["history"][:: max(1, len(r["history"]) // 15)]:
        L.append(f"| {h[0]:,} | {100 * h[1]:.2f} | {h[2]} |")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    main()
