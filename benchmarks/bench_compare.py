"""CMRM and CMTT on Corel 5k, and every model compared with PAMIR (TPAMI Tables VII, IX-XII).

    flock /tmp/pamir-heavy.lock python benchmarks/bench_compare.py [--features visterms|blobs]

1. CMRM (alpha, beta, ranking mode) and CMTT (singular values, normalisation) are selected on
   validation AvgP (fit on the 4,000 train pictures, validation queries with the train idf),
   then fitted on train with the chosen values and evaluated on the 2,241 test queries.
   Indexing time = fit + P(t|p) of the test pictures (TPAMI §V-B); query time = scoring the
   test pictures for one query and sorting them, averaged over the test queries.
2. The CMRM paper's own tables: PACMRM vs DRCMRM AvgP by query length on Jeon's protocol
   (1-4 word queries with >= 2 relevant test pictures) and FACMRM's fixed-length annotation
   (5 words per picture, alpha / beta chosen on validation F-measure as the paper did).
3. Every model that has left its per-query scores in benchmarks/results/perquery/<model>.npz
   (arrays avgp, bep, p10 over the test queries in protocol order; optional `curve`, the mean
   11-point interpolated precision) is put side by side with PAMIR, with a Wilcoxon
   signed-rank test at 95% against PAMIR, next to the paper's rows.

Writes benchmarks/results/compare.md, compare.json, recall_precision.png,
perquery/{cmrm,cmtt}.npz and the `cmrm`, `cmtt` keys of corel5k.json.
`--compare-only` rebuilds the comparison from the saved files without fitting anything.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from pamir import config
from pamir.data import load_corel5k
from pamir.evaluation import annotation_metrics, evaluate_model, wilcoxon
from pamir.models.cmrm import CMRM
from pamir.models.cmtt import CMTT
from pamir.protocol import Protocol

RESULTS = Path(__file__).resolve().parent / "results"
PERQUERY = RESULTS / "perquery"
MODELS = ("cmrm", "cmtt", "plsa", "svm", "bbnn", "kernel-pamir")
METRICS = ("avgp", "bep", "p10")

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


# ------------------------------------------------------------------------------- features

def read_sparse_arff(path: Path, n_attributes: int) -> sp.csr_matrix:
    """The first n_attributes columns of a sparse ARFF file ({index value, ...} rows)."""
    rows, cols, vals, n = [], [], [], 0
    in_data = False
    for line in path.read_text().splitlines():
        if not in_data:
            in_data = line.strip().lower() == "@data"
            continue
        if not line.strip():
            continue
        for item in line.strip().strip("{}").split(","):
            if item.strip():
                k, v = item.split()
                if int(k) < n_attributes:
                    rows.append(n), cols.append(int(k)), vals.append(float(v))
        n += 1
    if not in_data:
        raise ValueError(f"{path}: no @data section; is this an ARFF file?")
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, n_attributes))


def blob_counts(protocol: Protocol) -> sp.csr_matrix:
    """Duygulu's blobs (mulan's ARFF: 499 clusters, presence) for every collection picture."""
    root = protocol.collection.root
    coll_index = {pid: i for i, pid in enumerate(protocol.collection.ids)}
    X = sp.lil_matrix((len(coll_index), 499))
    for labels, arff in (("training_label", "Corel5k-train-sparse.arff"),
                         ("test_label", "Corel5k-test-sparse.arff")):
        ids = [line.split()[0] for line in (root / "labels" / labels).read_text().splitlines()
               if line.strip()]
        B = read_sparse_arff(root / "blobs" / arff, 499)
        if B.shape[0] != len(ids):
            raise ValueError(f"{arff}: {B.shape[0]} rows for {len(ids)} lines of {labels}")
        for row, pid in enumerate(ids):
            X[coll_index[pid]] = B[row]
    return X.tocsr()


def visterm_counts(protocol: Protocol, block_fraction: float, n_visterms: int,
                   input: str = "counts"):
    """Exact visterm counts of every collection picture from pamir.features.

    The pipeline (colour codebook, k-means, idf) is fitted on protocol.train and cached by
    pamir.features; the blocks come from its cache and are assigned to their codewords again,
    since the cached bags are tf-idf L2 and CMRM / CMTT are defined on the counts.
    input="tfidf" returns the bags themselves, read by the models as fractional counts.
    """
    from pamir.features import FeatureSettings, collection_features, extract_blocks
    from pamir.features.visterms import term_frequencies

    settings = FeatureSettings(block_fraction=block_fraction, n_visterms=n_visterms)
    cache, coll = config.default_cache_dir(), protocol.collection
    bags, ok, pipe = collection_features(coll, protocol.train, settings, cache_dir=cache,
                                         progress=False)
    blocks = extract_blocks(coll.paths, settings, pipe.colour_codebook_, cache_dir=cache,
                            progress=False)
    tf = term_frequencies(pipe.assign(blocks.counts()), blocks.offsets, n_visterms)
    if not np.array_equal(sp.csr_matrix(tf > 0).indices, sp.csr_matrix(bags > 0).indices):
        raise RuntimeError("visterm counts disagree with the cached bags: clear .cache/pipelines")
    X = tf if input == "counts" else bags
    return sp.csr_matrix(X, dtype=np.float64), {
        "kind": "visterms", "input": input,
        "block_fraction": block_fraction, "n_visterms": n_visterms,
        "blocks_per_picture": round(float(blocks.n_blocks[protocol.train].mean()), 2),
        "scaling": settings.scaling, "unreadable": int((~ok).sum())}


# ------------------------------------------------------------------------------ selection

class Split:
    """The pictures, counts, captions and queries of one split."""

    def __init__(self, protocol: Protocol, X_all: sp.csr_matrix, name: str):
        self.idx = protocol.split(name)
        self.X = X_all[self.idx]
        self.Y = protocol.presence(self.idx)
        self.queries = protocol.queries(name)
        self.Q = protocol.query_vectors(self.queries)
        self.subsets = protocol.query_subsets(self.queries) if name == "test" else None

    def evaluate(self, model, **kw):
        return evaluate_model(model, self.X, self.Q, self.queries.relevance, self.subsets, **kw)


def grid_search(make, grid: dict, train: Split, valid: Split, log) -> tuple[dict, list]:
    """Fit on train, score validation AvgP for every point of the grid; best first."""
    rows = []
    for values in itertools.product(*grid.values()):
        params = dict(zip(grid, values))
        model = make(**params).fit(train.X, train.Y)
        avgp = valid.evaluate(model, curve=False).mean("avgp")
        rows.append((avgp, params))
        log(f"  valid AvgP {100 * avgp:5.2f}  {params}")
    rows.sort(key=lambda r: -r[0])
    return rows[0][1], rows


def index_and_time(make, params: dict, train: Split, test: Split, repeats: int = 3):
    """Fit on train and infer the test pictures' P(t|p): the best of `repeats` wall times."""
    best, model = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        model = make(**params).fit(train.X, train.Y)
        model.index_ = model.transform(test.X)
        if isinstance(model, CMRM) and model.mode == "pacmrm":
            model.index_ = model.log_word_probabilities(test.X)
        best = min(best, time.perf_counter() - t0)
    return model, best


def query_ms(model, test: Split, n: int = 500) -> float:
    """Mean time to score the test pictures for one query and sort them (first n queries)."""
    Q = test.Q[:n]
    words = (Q != 0).astype(np.float64)
    t0 = time.perf_counter()
    for i in range(Q.shape[0]):
        if isinstance(model, CMRM) and model.mode == "drcmrm":
            s = model.negative_kl(words[i], test.X)[0]
        elif isinstance(model, CMRM) and model.mode == "pacmrm":
            s = words[i] @ model.index_.T
        else:
            s = Q[i] @ model.index_.T
        np.argsort(-np.ravel(s))
    return 1000 * (time.perf_counter() - t0) / Q.shape[0]


def test_results(key, model, index_s, q_ms, test: Split, params, valid_avgp, features,
                 selection) -> dict:
    ev = test.evaluate(model)
    PERQUERY.mkdir(parents=True, exist_ok=True)
    np.savez(PERQUERY / f"{key}.npz", **{m: ev.per_query[m] for m in METRICS},
             curve=ev.curve)
    return {
        "test": {m: round(100 * ev.mean(m), 2) for m in METRICS},
        "subsets": ev.table(),
        "index_seconds": round(index_s, 3),
        "query_ms": round(q_ms, 3),
        "params": params,
        "valid_avgp": round(100 * valid_avgp, 2),
        "features": features,
        "selection": [{"valid_avgp": round(100 * a, 2), **p} for a, p in selection[:10]],
        "fitted_on": "train (4,000 pictures); hyper-parameters from validation AvgP",
    }


# --------------------------------------------------------------------------- CMRM's paper

def jeon_queries(protocol: Protocol, test: Split) -> dict[int, np.ndarray]:
    """Masks of Jeon et al.'s queries: k = 1..4 words with at least 2 relevant test pictures."""
    nw, nrel = test.queries.n_words, test.queries.n_relevant
    return {k: (nw == k) & (nrel >= 2) for k in (1, 2, 3, 4)}


def jeon_table(protocol, train, valid, test, grid_rows, log) -> dict:
    """PACMRM vs DRCMRM AvgP by query length, each with its own validated alpha, beta."""
    out = {}
    masks = jeon_queries(protocol, test)
    per_mode, curves = {}, {}
    combined = np.flatnonzero(np.any(list(masks.values()), axis=0))
    for mode in ("pacmrm", "drcmrm"):
        best = next(p for _, p in grid_rows if p["mode"] == mode)
        model = CMRM(**best).fit(train.X, train.Y)
        per_mode[mode] = (best, test.evaluate(model, curve=False).per_query["avgp"])
        # the paper's Figure 4: recall-precision on the combined 1-4 word query set
        curves[mode] = evaluate_model(model, test.X, test.Q[combined],
                                      test.queries.relevance[combined]).curve
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


def annotation(protocol, train, valid, test, log) -> dict:
    """FACMRM: alpha, beta chosen on validation F-measure (SIGIR §5.2.1), 5 words/picture."""
    rows = []
    for a, b in itertools.product(config.CMRM_ALPHA_GRID, config.CMRM_BETA_GRID):
        m = CMRM(alpha=a, beta=b).fit(train.X, train.Y)
        f1 = annotation_metrics(m.transform(valid.X), valid.Y)["f1"]
        rows.append((f1, {"alpha": a, "beta": b}))
    f1, best = max(rows, key=lambda r: r[0])
    m = CMRM(**best).fit(train.X, train.Y)
    ann = annotation_metrics(m.transform(test.X), test.Y)
    rec, prec = ann.pop("per_word_recall"), ann.pop("per_word_precision")
    found = rec > 0  # the words that retrieve at least one relevant test picture
    words = np.asarray(test.Y.sum(axis=0)).ravel() > 0
    out = {k: round(v, 4) if isinstance(v, float) else v for k, v in ann.items()}
    out |= {"params": best, "valid_f1": round(f1, 4),
            "mean_precision_recall_gt0": round(float(prec[found & words].mean()), 4),
            "mean_recall_recall_gt0": round(float(rec[found & words].mean()), 4),
            # the paper's Table 2 (its "original annotations" row)
            "words_of_table_2": {w: {"precision": round(float(prec[protocol.word_index[w]]), 2),
                                     "recall": round(float(rec[protocol.word_index[w]]), 2)}
                                 for w in ("sun", "sunset") if w in protocol.word_index}}
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


# ---------------------------------------------------------------------------------- output

def atomic_json_update(path: Path, updates: dict) -> None:
    """Read-modify-write only our keys of a shared JSON file, replaced atomically."""
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.update(updates)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = re.search(r"Model name:\s*(.+)", out).group(1).strip()
    except Exception:  # noqa: BLE001 - lscpu missing: the platform string is enough
        model = platform.processor() or platform.machine()
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}"


def parse_point(text: str) -> tuple:
    """'0.25:10000:counts' -> (0.25, 10000, 'counts')."""
    parts = text.split(":")
    return (float(parts[0]), int(parts[1]), parts[2] if len(parts) > 2 else "counts")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--features", choices=("visterms", "blobs"), default="visterms")
    ap.add_argument("--settings", default="",
                    help="features to try as fraction:visterms:input,... (default: "
                         "config.CMRM_CMTT_FEATURE_GRID)")
    ap.add_argument("--compare-only", action="store_true",
                    help="rebuild the tables from benchmarks/results without fitting")
    args = ap.parse_args(argv)
    # the blob run is kept apart: its own keys, per-query files and report (blobs.md)
    suffix = "" if args.features == "visterms" else "-blobs"
    command = "python benchmarks/bench_compare.py " + " ".join(argv or sys.argv[1:])
    log = lambda s: print(s, flush=True)  # noqa: E731
    protocol = Protocol(load_corel5k())
    summary_path = RESULTS / "corel5k.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = [f"# Models compared on Corel 5k\n\nCommand: `{command}`  \nMachine: {machine()}  "
              f"\nSeed {config.SEED}; {len(protocol.train)} train / {len(protocol.valid)} valid /"
              f" {len(protocol.test)} test pictures; vocabulary {protocol.T}."]
    extra = {}
    if not args.compare_only:
        if args.features == "blobs":
            grid_points = [None]
        else:
            grid_points = [parse_point(p) for p in args.settings.split(",")] \
                if args.settings else config.CMRM_CMTT_FEATURE_GRID
        candidates = {"cmrm": [], "cmtt": []}  # (valid AvgP, features, best params, rows, splits)
        for point in grid_points:
            if point is None:
                X_all = blob_counts(protocol)
                features = {"kind": "blobs", "n_visterms": int(X_all.shape[1]),
                            "blobs_per_picture": round(float(X_all[protocol.train].sum(1).mean()), 2)}
            else:
                X_all, features = visterm_counts(protocol, *point)
            log(f"features: {features}")
            splits = tuple(Split(protocol, X_all, s) for s in ("train", "valid", "test"))
            for name, make, grid in (
                ("cmrm", CMRM, {"alpha": config.CMRM_ALPHA_GRID, "beta": config.CMRM_BETA_GRID,
                                "mode": config.CMRM_MODE_GRID}),
                ("cmtt", CMTT, {"n_components": config.CMTT_COMPONENTS_GRID,
                                "normalise": config.CMTT_NORMALISE_GRID,
                                "l2_pictures": config.CMTT_L2_PICTURES_GRID}),
            ):
                log(f"{name}: validation grid {grid}")
                best, rows = grid_search(make, grid, splits[0], splits[1], log)
                candidates[name].append((rows[0][0], features, best, rows, splits))
        updates = {}
        for name, make in (("cmrm", CMRM), ("cmtt", CMTT)):
            valid_avgp, features, best, rows, (train, valid, test) = max(
                candidates[name], key=lambda c: c[0])
            model, index_s = index_and_time(make, best, train, test)
            res = test_results(name + suffix, model, index_s, query_ms(model, test), test, best,
                               valid_avgp, features, rows)
            res |= {"command": command, "machine": machine(),
                    "features_grid": [{"valid_avgp": round(100 * c[0], 2), **c[1], **c[2]}
                                      for c in candidates[name]]}
            log(f"{name}: chose {features} {best}; test {res['test']}; index {index_s:.2f} s")
            updates[name + suffix] = res
            if name == "cmrm":
                extra["jeon"] = jeon_table(protocol, train, valid, test, rows, log)
                extra["annotation"] = annotation(protocol, train, valid, test, log)
        updates["cmrm" + suffix] |= extra
        atomic_json_update(summary_path, updates)
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    test = Split(protocol, sp.csr_matrix((len(protocol.collection), 1)), "test")
    report.append(own_models_section(summary, suffix))
    text, data = comparison(protocol, test, summary, suffix)
    report.append("\n## PAMIR and the models it is compared with" + text)
    stem = "blobs" if suffix else "compare"
    (RESULTS / f"{stem}.md").write_text("\n".join(report) + "\n")
    (RESULTS / f"{stem}.json").write_text(json.dumps(data, indent=1) + "\n")
    log("\n".join(report))


def own_models_section(summary: dict, suffix: str = "") -> str:
    lines = ["\n## CMRM and CMTT: chosen on validation"]
    for name in ("cmrm", "cmtt"):
        s = summary.get(name + suffix)
        if not s:
            continue
        paper = (f"ECML 2006 Table 3, Blobs: AvgP {PAPER['ecml_blobs'][name]}" if suffix else
                 f"TPAMI Table IX: {' / '.join(str(v) for v in PAPER['IX'][name])}")
        lines.append(f"\n**{name.upper()}** ({s['features']}): {s['params']}; validation AvgP "
                     f"{s['valid_avgp']}; test AvgP / BEP / P10 {s['test']['avgp']} / "
                     f"{s['test']['bep']} / {s['test']['p10']} (paper, {paper}); indexing "
                     f"{s['index_seconds']} s (paper {PAPER['VII'][name]} s); "
                     f"{s['query_ms']} ms a query.")
        top = s["selection"][:8]
        lines.append("\nBest validation points: " + "; ".join(
            f"{ {k: v for k, v in r.items() if k != 'valid_avgp'} } {r['valid_avgp']}"
            for r in top))
        if len(s.get("features_grid", [])) > 1:
            lines.append("\nFeatures tried (each with its best validation point): " + "; ".join(
                f"{g.get('block_fraction')} / {g.get('n_visterms')} visterms "
                f"({g.get('blocks_per_picture')} blocks, {g.get('input')}): {g['valid_avgp']}"
                for g in s["features_grid"]))
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
