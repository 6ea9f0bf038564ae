"""CMRM and CMTT on Corel 5k, and every model compared with PAMIR (TPAMI Tables VII, IX-XII).

    flock /tmp/pamir-heavy.lock python benchmarks/bench_compare.py [--features visterms|blobs]

1. CMRM (alpha, beta, ranking mode) and CMTT (singular values, normalisation) are chosen as
   `pamir fit corel5k --model cmrm|cmtt` chooses: the default visterm bags, the model's own
   `param_grid` searched by pamir.training.selection.select (fit on the 4,000 train pictures,
   validation queries with the train idf, ranked as at test time: DRCMRM by its divergence),
   then evaluated once on the 2,241 test queries. The benchmark runs `pamir fit` itself too
   and records whether it chose alike (`cli_choice`). Indexing time = fit + the test
   pictures' index (TPAMI §V-B); query time = scoring the test pictures for one query and
   sorting them (common.corel.query_ms).
2. A feature study (STUDY_FEATURES): both models selected again on visterm counts and on
   larger blocks / smaller codebooks, as TPAMI Table VI chose for them; reported beside the
   main figure (`features_grid`), never substituted for it.
3. The CMRM paper's own tables: PACMRM vs DRCMRM AvgP by query length on Jeon's protocol
   (1-4 word queries with >= 2 relevant test pictures), its Figure 4, and FACMRM's
   fixed-length annotation (5 words per picture, alpha / beta chosen on validation F-measure
   as the paper did, over CMRM's own grid).
4. Every model that has left its per-query scores in benchmarks/results/perquery/<model>.npz
   (arrays avgp, bep, p10 over the test queries in protocol order; optional `curve`, the mean
   11-point interpolated precision) is put side by side with PAMIR, with a Wilcoxon
   signed-rank test at 95% against PAMIR, next to the paper's rows.

Writes benchmarks/results/compare.md, compare.json, recall_precision.png, cmrm_figure4.png,
perquery/{cmrm,cmtt}.npz and the `cmrm`, `cmtt` keys of corel5k.json (with --features blobs:
Duygulu's blobs, blobs.md and `-blobs` keys, no CLI check and no feature study).
`--compare-only` rebuilds the comparison from the saved files without fitting anything.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from common.corel import Corel, Split, indexing, query_ms, selection_rows, test_entry
from common.harness import (PERQUERY, RESULTS, Run, parser, read_summary, report_head,
                            write_json, write_results)
from pamir import config
from pamir.facts.collection import load_collection
from pamir.evaluation import annotation_metrics, evaluate_model, wilcoxon
from pamir.features import FeatureSettings
from pamir.models import model_class
from pamir.protocol import Protocol
from pamir.training.selection import grid_points, model_grid
from pamir.training import fit_system

MODELS = ("cmrm", "cmtt", "plsa", "svm", "bbnn", "kernel-pamir")
METRICS = ("avgp", "bep", "p10")

#: The feature study, as (block fraction, visterms, input): 0.25 / 0.5 / 0.75 / 1.0 of the
#: shorter side give 77 / 15 / 3 / 2 blocks per Corel picture, the papers' 64 / 128 / 192 /
#: 256-px blocks (TPAMI Table VI chose 192 px and 3,000 visterms for CMRM, 256 px and 2,000
#: for CMTT). input: "counts" (the models as defined) or "tfidf" (the L2 tf-idf bags, read as
#: fractional counts: ~0.1 a block, which tempers CMRM's likelihood). The main selection is on
#: (0.25, 10,000, tfidf), the bags `pamir fit` gives every model. Each point costs a k-means;
#: as in `pamir fit`, a codebook is capped at a tenth of the training blocks (0.75: 1,200
#: visterms, 1.0: 800), and the study reports the size it got.
STUDY_FEATURES = ((0.25, 10_000, "counts"), (0.25, 3_000, "counts"), (0.5, 3_000, "counts"),
                  (0.75, 3_000, "counts"), (1.0, 2_000, "counts"))

# The papers' numbers (targets), with where they come from.
PAPER_TABLE_2 = {"sun": (0.60, 0.46), "sunset": (0.00, 0.00)}  # CMRM paper: recall, precision
PAPER = {
    "IX": {"cmrm": (19.2, 13.1, 7.8), "cmtt": (19.8, 13.7, 7.6), "plsa": (20.7, 12.8, 8.7),
           "svm": (22.0, 13.8, 9.3), "pamir": (26.3, 17.4, 10.0)},
    "X": {"cmrm": (34.0, 15.8), "cmtt": (31.3, 17.2), "plsa": (38.0, 16.7),
          "svm": (41.9, 17.3), "pamir": (43.3, 22.4)},
    "XI": {"cmrm": (25.8, 18.6), "cmtt": (26.4, 19.3), "plsa": (31.7, 19.7),
           "svm": (32.7, 21.0), "pamir": (34.0, 25.7)},
    "XII": {"cmrm": (12.7, 7.1, 2.5), "cmtt": (12.9, 6.3, 2.7), "plsa": (11.1, 4.1, 2.9),
            "svm": (10.1, 3.1, 2.5), "pamir": (16.1, 7.7, 3.5)},
    "VII": {"cmrm": 3, "cmtt": 9, "plsa": 240, "svm": 687, "pamir": 17},
    # ECML 2006 Table 3, Blobs row (test AvgP): the features of the --features blobs run
    "ecml_blobs": {"cmrm": 10.4, "cmtt": 11.8, "plsa": 9.7, "pamir": 11.9},
    # SIGIR 2003 Table 1 (PACMRM, DRCMRM AvgP by query length; queries 179/386/178/24)
    "jeon": {"queries": (179, 386, 178, 24), "pacmrm": (15.01, 14.19, 17.30, 23.64),
             "drcmrm": (16.97, 16.42, 20.30, 27.65)},
    # SIGIR 2003 §5.2.2: FACMRM, 5 words per picture, 70 words (union of the models' words
    # with recall > 0) / the 49 best words; 263 one-word queries in their vocabulary.
    "annotation": {"n_plus": 66, "mean_precision_70": 0.33, "mean_recall_70": 0.37,
                   "mean_precision_49": 0.41, "mean_recall_49": 0.49},
}


def log(s: str) -> None:
    print(s, flush=True)


# ------------------------------------------------------------------------------ the models

def study_features(main: Corel, points) -> list[tuple[dict, Corel]]:
    """(description, features) of each point of the feature study."""
    out = []
    for fraction, n_visterms, kind in points:
        corel = Corel(FeatureSettings(block_fraction=fraction, n_visterms=n_visterms))
        extra = {}
        if kind == "counts":
            counts = corel.counts()
            extra["blocks_per_picture"] = round(float(counts[main.protocol.train].sum(1).mean()),
                                                2)
            corel = corel.with_features(counts)
        out.append((corel.describe(input=kind, block_fraction=fraction,
                                   n_visterms=corel.settings.n_visterms,
                                   requested_visterms=n_visterms, **extra), corel))
    return out


def model_entry(name: str, key: str, sel, corel: Corel, features: dict) -> dict:
    """The chosen model fitted on train, timed, and evaluated on test."""
    cls = model_class(name)
    model, index_s = indexing(lambda: cls(**sel.params).fit(corel.train.X, corel.train.Y),
                              corel.test.X, repeats=3)
    entry = {**test_entry(key, corel.test.evaluate(model)),
             "index_seconds": round(index_s, 3),
             "query_ms": round(query_ms(model, corel.test.X, corel.test.Q), 3),
             "params": sel.chosen, "valid_avgp": round(sel.valid_avgp, 2),
             "features": features, "selection": selection_rows(sel, top=10),
             "fitted_on": "train (4,000 pictures); hyper-parameters from validation AvgP"}
    log(f"{name}: chose {sel.chosen}; valid {sel.valid_avgp:.2f}; test {entry['test']}; "
        f"index {index_s:.2f} s, {entry['query_ms']} ms a query")
    return entry


def cli_choice(name: str, entry: dict) -> dict:
    """What `pamir fit corel5k --model NAME` chooses, against the benchmark's choice."""
    t0 = time.perf_counter()
    info = fit_system(load_collection("corel5k"), name, representation="visterms",
                      progress=False, log=None).info
    chosen = {k: info["params"][k] for k in entry["params"]}
    same = chosen == entry["params"]
    log(f"{name}: pamir fit chose {chosen} ({info['valid_avgp']}), same: {same}")
    return {"params": chosen, "valid_avgp": info["valid_avgp"], "same_as_benchmark": same,
            "seconds": round(time.perf_counter() - t0, 1)}


# --------------------------------------------------------------------------- CMRM's paper

def jeon_queries(test: Split) -> dict[int, np.ndarray]:
    """Masks of Jeon et al.'s queries: k = 1..4 words with at least 2 relevant test pictures."""
    nw, nrel = test.queries.n_words, test.queries.n_relevant
    return {k: (nw == k) & (nrel >= 2) for k in (1, 2, 3, 4)}


def jeon_table(corel: Corel, sel) -> dict:
    """PACMRM vs DRCMRM AvgP by query length, each at its own best validation point of the
    main selection."""
    test, out = corel.test, {}
    masks = jeon_queries(test)
    per_mode, curves = {}, {}
    combined = np.flatnonzero(np.any(list(masks.values()), axis=0))
    for mode in ("pacmrm", "drcmrm"):
        best = max((t for t in sel.trials if t.params["mode"] == mode),
                   key=lambda t: t.valid_avgp).params
        model = model_class("cmrm")(**best).fit(corel.train.X, corel.train.Y)
        per_mode[mode] = (best, test.evaluate(model, curve=False).per_query["avgp"])
        # the paper's Figure 4: recall-precision on the combined 1-4 word query set
        curves[mode] = evaluate_model(model, test.X, test.Q[combined],
                                      test.relevance[combined]).curve
    for k, mask in masks.items():
        a, b = per_mode["pacmrm"][1][mask], per_mode["drcmrm"][1][mask]
        w = wilcoxon(a, b)
        out[k] = {"queries": int(mask.sum()),
                  "relevant": int(test.queries.n_relevant[mask].sum()),
                  "pacmrm": round(100 * a.mean(), 2), "drcmrm": round(100 * b.mean(), 2),
                  "pvalue": float(f"{w['pvalue']:.3g}"), "significant": bool(w["significant"])}
    log(f"  Jeon protocol: {out}")
    plot_curves({m.upper(): c for m, c in curves.items()}, RESULTS / "cmrm_figure4.png",
                f"CMRM paper Fig. 4: {len(combined)} queries of 1-4 words")
    return {"by_length": out, "params": {m: p for m, (p, _) in per_mode.items()},
            "curves": {m: [round(float(v), 4) for v in c] for m, c in curves.items()}}


def annotation(corel: Corel) -> dict:
    """FACMRM, 5 words a picture: alpha, beta chosen on validation F-measure (SIGIR §5.2.1)
    over CMRM's own grid. The one choice made outside pamir.training.selection, whose criterion is
    retrieval AvgP; the ranking mode plays no part in annotation."""
    cmrm = model_class("cmrm")
    train, valid, test = corel.train, corel.valid, corel.test

    def f1(point):
        m = cmrm(**point).fit(train.X, train.Y)
        return annotation_metrics(m.transform(valid.X), valid.Y)["f1"]

    scored = [(f1(p), p) for p in grid_points(model_grid(cmrm, {"mode": "pacmrm"}))]
    valid_f1, best = max(scored, key=lambda r: r[0])  # the first of equals
    m = cmrm(**best).fit(train.X, train.Y)
    ann = annotation_metrics(m.transform(test.X), test.Y)
    rec, prec = ann.pop("per_word_recall"), ann.pop("per_word_precision")
    found = rec > 0  # the words that retrieve at least one relevant test picture
    words = np.asarray(test.Y.sum(axis=0)).ravel() > 0
    index = corel.protocol.word_index
    out = {k: round(v, 4) if isinstance(v, float) else v for k, v in ann.items()}
    out |= {"params": best, "valid_f1": round(valid_f1, 4),
            "mean_precision_recall_gt0": round(float(prec[found & words].mean()), 4),
            "mean_recall_recall_gt0": round(float(rec[found & words].mean()), 4),
            # the paper's Table 2 (its "original annotations" row)
            "words_of_table_2": {w: {"precision": round(float(prec[index[w]]), 2),
                                     "recall": round(float(rec[index[w]]), 2)}
                                 for w in ("sun", "sunset") if w in index}}
    log(f"  FACMRM annotation: {out}")
    return out


# ----------------------------------------------------------------------------- comparison

def load_perquery(n_queries: int, suffix: str = "") -> dict[str, dict]:
    out = {}
    for name in ("pamir",) + MODELS:
        path = PERQUERY / f"{name}{suffix}.npz"
        if not path.is_file():
            continue
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        if any(m not in arrays or arrays[m].shape != (n_queries,) for m in METRICS):
            print(f"warning: {path} lacks avgp/bep/p10 over the {n_queries} test queries; "
                  "skipped", file=sys.stderr)
            continue
        out[name] = arrays
    return out


def cell(runs, name, metric, mask):
    """'12.34*' : the mean in percent, * when the difference with PAMIR is significant."""
    value = 100 * runs[name][metric][mask].mean()
    mark = ""
    if name != "pamir" and "pamir" in runs:
        w = wilcoxon(runs["pamir"][metric][mask], runs[name][metric][mask])
        mark = "*" if w["significant"] else ""
    return f"{value:.1f}{mark}"


def comparison(protocol: Protocol, test: Split, summary: dict,
               suffix: str = "") -> tuple[str, dict]:
    runs = load_perquery(len(test.queries), suffix)
    names = [n for n in ("pamir",) + MODELS if n in runs]
    subsets = test.subsets
    lines, data = [], {"models": names}
    if suffix:  # the blob run: ECML 2006 Table 3 gives AvgP only
        lines.append("\n### All 2,241 test queries, Duygulu's blobs\n")
        lines.append("| | " + " | ".join(names) + " |")
        lines.append("|---|" + "---|" * len(names))
        for label, metric in (("AvgP", "avgp"), ("BEP", "bep"), ("P10", "p10")):
            cells = [cell(runs, n, metric, subsets["all"]) for n in names]
            lines.append(f"| {label} (ours) | " + " | ".join(cells) + " |")
            data[f"blobs:{label}"] = dict(zip(names, cells))
        lines.append("| AvgP (paper, ECML 2006 Table 3, Blobs) | " + " | ".join(
            str(PAPER["ecml_blobs"].get(n, "-")) for n in names) + " |")
        lines.append("\n`*`: differs from PAMIR by the two-sided Wilcoxon signed-rank test "
                     "at 95%.")
        plot(runs, names, RESULTS / "recall_precision_blobs.png")
        return "\n".join(lines), data

    def table(title, source, rows, paper_rows):
        lines.append(f"\n### {title}\n")
        lines.append("| | " + " | ".join(names) + " |")
        lines.append("|---|" + "---|" * len(names))
        for (label, metric, subset), paper_key in zip(rows, paper_rows):
            cells = [cell(runs, n, metric, subsets[subset]) for n in names]
            lines.append(f"| {label} (ours) | " + " | ".join(cells) + " |")
            ref = [PAPER[source].get(n) for n in names]
            lines.append(f"| {label} (paper, Table {source}) | " + " | ".join(
                f"{r[paper_key]:.1f}" if r else "-" for r in ref) + " |")
            data[f"{source}:{label}"] = {n: c for n, c in zip(names, cells)}

    table("Table IX: all 2,241 test queries", "IX",
          [("AvgP", "avgp", "all"), ("BEP", "bep", "all"), ("P10", "p10", "all")], [0, 1, 2])
    table(f"Table X: easy ({int(subsets['easy'].sum())}) and difficult "
          f"({int(subsets['difficult'].sum())}) queries, AvgP", "X",
          [("easy", "avgp", "easy"), ("difficult", "avgp", "difficult")], [0, 1])
    table(f"Table XI: single-word ({int(subsets['single-word'].sum())}) and multi-word "
          f"({int(subsets['multi-word'].sum())}) queries, AvgP", "XI",
          [("single-word", "avgp", "single-word"), ("multi-word", "avgp", "multi-word")],
          [0, 1])
    table(f"Table XII: the {int(subsets['unseen'].sum())} test-only queries", "XII",
          [("AvgP", "avgp", "unseen"), ("BEP", "bep", "unseen"), ("P10", "p10", "unseen")],
          [0, 1, 2])

    lines.append("\n### Table VII: indexing time (s; ours on this machine, paper on an "
                 "Athlon64 2.4 GHz)\n")
    lines.append("| | " + " | ".join(names) + " |")
    lines.append("|---|" + "---|" * len(names))
    entries = [summary.get(n, {}) for n in names]
    ours = [e.get("index_seconds") for e in entries]
    lines.append("| ours | " + " | ".join("-" if v is None else f"{v:.2f}" for v in ours) + " |")
    lines.append("| paper | " + " | ".join(str(PAPER["VII"].get(n, "-")) for n in names) + " |")
    qms = [e.get("query_ms") for e in entries]
    lines.append("| query ms (ours; paper 0.34) | " + " | ".join(
        "-" if v is None else f"{v:.3g}" for v in qms) + " |")
    lines.append("\n`*`: differs from PAMIR by the two-sided Wilcoxon signed-rank test at 95% "
                 "over the same queries (scipy, zero differences dropped).")
    lines.append("\nFeatures each model was fitted on (its own validation chose among those it "
                 "was offered): " + "; ".join(
                     f"{n}: {features_of(e)}" for n, e in zip(names, entries)) + ".")
    plot(runs, names, RESULTS / "recall_precision.png")
    return "\n".join(lines), data


def features_of(entry: dict) -> str:
    """A model's features in a few words, from its entry in corel5k.json."""
    f = entry.get("features")
    if isinstance(f, str):
        return f
    if not isinstance(f, dict):
        return "the default visterms of its run"
    s = f.get("settings", f)
    if f.get("kind") == "blobs":
        return "Duygulu's blobs"
    return (f"{s.get('n_visterms', '?'):,} visterms of {s.get('scaling', '?')}-scaled blocks "
            f"(block fraction {s.get('block_fraction', '?')})")


def plot(runs, names, path: Path) -> None:
    plot_curves({n: runs[n]["curve"] for n in names
                 if "curve" in runs[n] and runs[n]["curve"].shape == (11,)},
                path, "Corel 5k, 2,241 test queries")


def plot_curves(curves: dict[str, np.ndarray], path: Path, title: str) -> None:
    """11-point interpolated recall-precision curves, one per name, as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for name, curve in curves.items():
        ax.plot(np.linspace(0, 1, 11), 100 * np.asarray(curve), marker="o", ms=3, label=name)
    ax.set_xlabel("recall")
    ax.set_ylabel("interpolated precision (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------------- main

def parse_point(text: str) -> tuple:
    """'0.25:10000:counts' -> (0.25, 10000, 'counts')."""
    parts = text.split(":")
    return (float(parts[0]), int(parts[1]), parts[2] if len(parts) > 2 else "counts")


def fit_models(corel: Corel, suffix: str, run: Run, study, check_cli: bool) -> dict:
    """CMRM and CMTT chosen on the main features (and on each study point), their entries."""
    main_features = corel.describe(input="tfidf", n_visterms=int(corel.F.shape[1]))
    updates = {}
    for name in ("cmrm", "cmtt"):
        log(f"{name}: validation grid {model_class(name).param_grid} on {main_features}")
        sel = corel.select(name, log=lambda s: log(f"  {s}"))
        entry = model_entry(name, name + suffix, sel, corel, main_features)
        grid = [{"valid_avgp": round(sel.valid_avgp, 2), **main_features, **sel.chosen,
                 "main": True}]
        for features, other in study:
            log(f"{name}: study point {features}")
            s = other.select(name, log=None)
            grid.append({"valid_avgp": round(s.valid_avgp, 2), **features, **s.chosen})
            log(f"  -> {grid[-1]}")
        if len(grid) > 1:
            entry["features_grid"] = grid
        if name == "cmrm":
            entry["jeon"] = jeon_table(corel, sel)
            entry["annotation"] = annotation(corel)
        if check_cli:
            entry["cli_choice"] = cli_choice(name, entry)
        updates[name + suffix] = entry | run.info()
    return updates


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--features", choices=("visterms", "blobs"), default="visterms")
    ap.add_argument("--settings", default=None,
                    help="the feature study as fraction:visterms:input,... ('' for none; "
                         "default: STUDY_FEATURES)")
    ap.add_argument("--no-cli", action="store_true", help="skip the `pamir fit` check")
    ap.add_argument("--compare-only", action="store_true",
                    help="rebuild the tables from benchmarks/results without fitting")
    args = ap.parse_args(argv)
    # the blob run is kept apart: its own keys, per-query files and report (blobs.md)
    suffix = "" if args.features == "visterms" else "-blobs"
    run = Run("bench_compare.py", argv)
    if not args.compare_only:
        corel = Corel(representation=args.features)
        points = (STUDY_FEATURES if args.settings is None else
                  [parse_point(p) for p in args.settings.split(",") if p])
        study = study_features(corel, points) if args.features == "visterms" else []
        write_results(fit_models(corel, suffix, run, study,
                                 check_cli=not (suffix or args.no_cli)))
        protocol = corel.protocol
    else:
        protocol = Protocol(load_collection("corel5k"))
    summary = read_summary()
    test = Split(protocol, sp.csr_matrix((len(protocol.collection), 1)), "test")
    report = [*report_head("Models compared on Corel 5k", run.info()),
              f"Seed {config.SEED}; {len(protocol.train)} train / {len(protocol.valid)} valid /"
              f" {len(protocol.test)} test pictures; vocabulary {protocol.T}."]
    report.append(own_models_section(summary, suffix))
    text, data = comparison(protocol, test, summary, suffix)
    report.append("\n## PAMIR and the models it is compared with" + text)
    stem = "blobs" if suffix else "compare"
    (RESULTS / f"{stem}.md").write_text("\n".join(report) + "\n")
    write_json(RESULTS / f"{stem}.json", data)
    log("\n".join(report))
    log(f"({run.minutes()} min)")


def study_label(g: dict) -> str:
    """'0.5 / 3000 visterms (counts, 15.0 blocks)' for a row of the feature study."""
    fraction = g.get("block_fraction", g.get("settings", {}).get("block_fraction"))
    blocks = f", {g['blocks_per_picture']} blocks" if g.get("blocks_per_picture") else ""
    return f"{fraction} / {g.get('n_visterms')} visterms ({g.get('input')}{blocks})"


def own_models_section(summary: dict, suffix: str = "") -> str:
    lines = ["\n## CMRM and CMTT: chosen on validation"]
    for name in ("cmrm", "cmtt"):
        s = summary.get(name + suffix)
        if not s:
            continue
        paper = (f"ECML 2006 Table 3, Blobs: AvgP {PAPER['ecml_blobs'][name]}" if suffix else
                 f"TPAMI Table IX: {' / '.join(str(v) for v in PAPER['IX'][name])}")
        lines.append(f"\n**{name.upper()}** ({features_of(s)}, {s['features'].get('input')}): "
                     f"{s['params']}; validation AvgP "
                     f"{s['valid_avgp']}; test AvgP / BEP / P10 {s['test']['avgp']} / "
                     f"{s['test']['bep']} / {s['test']['p10']} (paper, {paper}); indexing "
                     f"{s['index_seconds']} s (paper {PAPER['VII'][name]} s); "
                     f"{s['query_ms']} ms a query.")
        cli = s.get("cli_choice")
        if cli:
            lines.append(f"\n`pamir fit corel5k --model {name}` (run by this benchmark, "
                         f"{cli.get('seconds', '-')} s) chose {cli['params']}, validation AvgP "
                         f"{cli['valid_avgp']}: " + ("the same choice." if cli["same_as_benchmark"]
                                                     else "NOT the same choice."))
        top = s["selection"][:8]
        lines.append("\nBest validation points: " + "; ".join(
            f"{ {k: v for k, v in r.items() if k in s['params']} } {r['valid_avgp']}"
            for r in top))
        if len(s.get("features_grid", [])) > 1:
            lines.append("\nFeature study (each with its own best validation point; the "
                         "figures above are on the first, the bags `pamir fit` reads): "
                         + "; ".join(f"{study_label(g)}: {g['valid_avgp']}"
                                     for g in s["features_grid"]))
            best = max(s["features_grid"], key=lambda g: g["valid_avgp"])
            if not best.get("main"):
                lines.append(f"\nValidation prefers {best.get('input')} on "
                             f"{best.get('n_visterms')} visterms here ({best['valid_avgp']} "
                             f"against {s['valid_avgp']}); the main figure stays on the bags "
                             "because that is what `pamir fit` and the product give every "
                             "model.")
    c = summary.get("cmrm" + suffix, {})
    if "jeon" in c:
        lines.append("\n### CMRM paper, Table 1: AvgP by query length (queries with >= 2 "
                     "relevant test pictures)\n")
        lines.append("| | 1 word | 2 words | 3 words | 4 words |\n|---|---|---|---|---|")
        by = c["jeon"]["by_length"]
        ks = sorted(by, key=int)
        lines.append("| queries (ours) | " + " | ".join(str(by[k]["queries"]) for k in ks) + " |")
        lines.append("| queries (paper) | " + " | ".join(map(str, PAPER["jeon"]["queries"])) + " |")
        for mode in ("pacmrm", "drcmrm"):
            lines.append(f"| {mode.upper()} AvgP (ours) | " + " | ".join(
                f"{by[k][mode]:.2f}" for k in ks) + " |")
            lines.append(f"| {mode.upper()} AvgP (paper) | " + " | ".join(
                f"{v:.2f}" for v in PAPER["jeon"][mode]) + " |")
        lines.append("| Wilcoxon p (ours) | " + " | ".join(
            f"{by[k]['pvalue']:.3g}" if by[k]["pvalue"] else "< 1e-4" for k in ks) + " |")
        lines.append(f"\nParameters (each mode's best on validation AvgP): {c['jeon']['params']}")
        if "curves" in c["jeon"]:
            lines.append("\nThe paper's Figure 4 (recall-precision of both modes on the "
                         "combined query set): `cmrm_figure4.png`.")
    if "annotation" in c:
        a = c["annotation"]
        lines.append(
            f"\n### FACMRM annotation (5 words a picture; alpha, beta by validation F: "
            f"{a['params']})\n\nOver the {a['words']} test words: mean precision "
            f"{a['mean_precision']:.3f}, mean recall {a['mean_recall']:.3f}, F {a['f1']:.3f}; "
            f"words with recall > 0: {a['n_plus']} (paper: 66 of 263), whose mean precision / "
            f"recall is {a['mean_precision_recall_gt0']:.3f} / {a['mean_recall_recall_gt0']:.3f}"
            f" (paper, its 70-word set: 0.33 / 0.37; its 49 best: 0.41 / 0.49).")
        if a.get("words_of_table_2"):
            lines.append("\nCMRM paper, Table 2 (original annotations), recall / precision: "
                         + "; ".join(f"{w} {v['recall']:.2f} / {v['precision']:.2f} (paper "
                                     f"{PAPER_TABLE_2[w][0]:.2f} / {PAPER_TABLE_2[w][1]:.2f})"
                                     for w, v in a["words_of_table_2"].items()) + ".")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
