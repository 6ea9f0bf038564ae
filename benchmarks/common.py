"""What the benchmarks share: the run they were measured in, Corel 5k split by the protocol
with its cached features, indexing and query timings, and writing results.

    run = Run("bench_compare.py", argv)       # command, machine, date, load average
    corel = Corel()                           # the visterm bags `pamir fit corel5k` reads
    sel = corel.select("cmrm")                # pamir.selection.select on train / valid
    ev = corel.test.evaluate(sel.model)       # the 2,241 test queries, with their subsets
    write_results({"cmrm": entry})            # merged into results/corel5k.json, locked
    save_report("stem", r, report)            # results/stem.json and stem.md (report(r))
    report_head(title, r)                     # a report's title, command, machine and load

A script's report is a function of its results file alone, so that --report-only
(report_cli, rerender) writes the .md again from the committed .json: report_head reads the
forms of run older results files store as well as Run.info()'s.

Every benchmark chooses its parameters with pamir.selection.select, as `pamir fit` does; a
benchmark adds the studies and timings the papers report around it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from pamir import config
from pamir.data import load_collection
from pamir.evaluation import evaluate_model
from pamir.features import FeatureSettings
from pamir.features.representation import take_rows
from pamir.protocol import Protocol
from pamir.selection import select
from pamir.storage import atomic_write_bytes, locked_json_update

# The feature code (faiss, OpenCV, Pillow) is imported by the Corel methods that use it, so
# that the run and report part of this module loads where only the model code is installed
# (bench_small_selection.py --from fits on a lent machine with it).

RESULTS = Path(__file__).resolve().parent / "results"
PERQUERY = RESULTS / "perquery"
SUMMARY = RESULTS / "corel5k.json"  # every model's entry; README and bench_compare read it
METRICS = ("avgp", "bep", "p10")
HEAVY = "flock /tmp/pamir-heavy.lock"


# ------------------------------------------------------------------------------ the run

def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return re.search(r"Model name:\s*(.+)", out).group(1).strip()
    except Exception:  # noqa: BLE001 - no lscpu: the platform string is enough
        return platform.processor() or platform.machine()


def machine(torch: bool = False, system: bool = False) -> str:
    """CPU model, cores, (the OS and its release,) Python (and torch) of this machine."""
    os_release = f", {platform.system()} {platform.release()}" if system else ""
    text = (f"{cpu_model()}, {os.cpu_count()} cores{os_release}, "
            f"Python {platform.python_version()}")
    if torch:
        text += f", torch {__import__('torch').__version__}"
    return text


def load_average() -> str:
    return ", ".join(f"{v:.1f}" for v in os.getloadavg())


class Run:
    """When, where and how a benchmark ran: `info()` gives its command, machine, date and
    load average at the start and now (the machine is shared: timings are upper bounds)."""

    def __init__(self, script: str, argv=None, torch: bool = False):
        args = sys.argv[1:] if argv is None else list(argv)
        self.command = " ".join([f"python benchmarks/{script}", *args])
        self.machine = machine(torch)
        self.date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        self.load_start = load_average()
        self.started = time.perf_counter()

    def minutes(self) -> float:
        return round((time.perf_counter() - self.started) / 60, 1)

    def info(self) -> dict:
        return {"command": self.command, "machine": self.machine, "date": self.date,
                "load_average": {"start": self.load_start, "end": load_average()}}


#: What a report head says of its timings, unless the script says more.
SHARED = "a shared machine: timings are upper bounds"


def load_text(load) -> str:
    """One stored load average reading (1, 5 and 15 min) as the reports print it: the string
    load_average() gives, or the numbers os.getloadavg() gives (bench_features' results)."""
    return load if isinstance(load, str) else ", ".join(f"{v:.1f}" for v in load)


def load_clause(load) -> str:
    """'load average S at start, E at end' for Run.info()'s {"start", "end"}; 'load average L'
    for one reading, the form results measured before Run kept both still store."""
    if isinstance(load, dict):
        return f"load average {load_text(load['start'])} at start, {load_text(load['end'])} at end"
    return f"load average {load_text(load)}"


def report_head(title: str, info: dict, *, heavy: bool = True,
                note: str | None = SHARED) -> list[str]:
    """A report's title, then the command, machine, date and load it was measured under.

    info: Run.info(), or a results file's own keys of the same names (date and load average
    may be missing; the load may be one reading, see load_clause; without a command, a
    report of several runs that each section names, the head is the title and the machine).
    heavy: the command ran under the heavy lock (written before it); note: said of the
    timings in parentheses (None: nothing)."""
    load = info.get("load_average")
    where = f"Machine: {info['machine']}" + (f"; {info['date']}" if info.get("date") else "")
    if load:
        where += f"; {load_clause(load)}"
    where += (f" ({note})" if note else "") + ".  "
    if "command" not in info:
        return [f"# {title}\n", where]
    command = f"{HEAVY} {info['command']}" if heavy else info["command"]
    return [f"# {title}\n", f"Command: `{command}`  ", where]


def run_clause(info: dict) -> str:
    """'`COMMAND` on MACHINE, DATE (M min)': the run a report's first sentence (or a
    section's) names, for reports that say it inline; info: Run.info() with "minutes", or a
    results file's own keys of the same names. The load average follows the minutes when
    stored."""
    load = info.get("load_average")
    return (f"`{info['command']}` on {info['machine']}, {info['date']} "
            f"({info['minutes']} min{'; ' + load_clause(load) if load else ''})")


# ------------------------------------------------------------------------------ the data

class Split:
    """One split of the protocol on features F (rows in collection order): its rows X, its
    captions Y, its queries (vectors Q weighted with the training idf, relevance) and, for
    test, the TPAMI query subsets (Tables X-XII)."""

    def __init__(self, protocol: Protocol, F, name: str):
        self.name = name
        self.idx = protocol.split(name)
        self.X = take_rows(F, self.idx)
        self.Y = protocol.presence(self.idx)
        self.queries = protocol.queries(name)
        self.Q = protocol.query_vectors(self.queries)
        self.relevance = self.queries.relevance
        self.subsets = protocol.query_subsets(self.queries) if name == "test" else None

    def sample(self, n: int, seed: int = config.SEED) -> "Split":
        """A seeded random subset of n of its pictures (idx, X, Y: for training only)."""
        keep = np.sort(np.random.default_rng(seed).choice(len(self.idx), n, replace=False))
        part = object.__new__(Split)
        part.__dict__.update(self.__dict__, idx=self.idx[keep], X=take_rows(self.X, keep),
                             Y=self.Y[keep], queries=None, Q=None, relevance=None)
        return part

    def evaluate(self, model, X=None, **kw):
        """The model's Evaluation on this split's queries, ranked as at test time."""
        X = self.X if X is None else X
        return evaluate_model(model, X, self.Q, self.relevance, self.subsets, **kw)

    def avgp(self, model, X=None) -> float:
        """Mean AvgP in percent."""
        return 100 * self.evaluate(model, X, curve=False).mean("avgp")


class Corel:
    """Corel 5k, its protocol, and one representation of every picture split three ways.

    Corel(): the default visterm bags, exactly what `pamir fit corel5k` reads
    (pamir.training.collection_inputs, cached); `settings` other FeatureSettings;
    representation="blocks" block descriptors (BBNN, the block kernels), "blobs" Duygulu's
    blobs as L2 tf-idf bags with the training idf (ECML 2006 Table 3); F: features made
    elsewhere (visterm counts), rows in collection order.
    """

    def __init__(self, settings: FeatureSettings | None = None, representation: str = "visterms",
                 *, F=None, base: "Corel | None" = None):
        self.collection = base.collection if base else load_collection("corel5k")
        self.protocol = base.protocol if base else Protocol(self.collection)
        self.settings = settings or (base.settings if base else FeatureSettings())
        self.representation = representation
        self.rep = None
        started = time.perf_counter()
        from pamir.features.visterms import inverse_document_frequency, tfidf  # noqa: PLC0415
        from pamir.training import collection_inputs  # noqa: PLC0415
        if F is None and representation == "blobs":
            presence = self.counts()
            F = tfidf(presence, inverse_document_frequency(presence[self.protocol.train]))
        elif F is None:
            F, ok, self.rep = collection_inputs(
                self.collection, self.protocol, representation, self.settings,
                cache_dir=config.default_cache_dir(), progress=False, log=None)
            if not np.all(ok):
                raise RuntimeError(f"corel5k: {int((~np.asarray(ok)).sum())} pictures could "
                                   "not be read; the benchmarks expect every picture")
            # as `pamir fit`, a codebook larger than the training blocks support is capped
            # (pamir.training.supported_codebook: 10 blocks per visterm at least)
            self.settings = getattr(self.rep, "settings", self.settings)
        self.feature_seconds = time.perf_counter() - started
        self.F = F
        self.train, self.valid, self.test = (Split(self.protocol, F, s)
                                             for s in ("train", "valid", "test"))

    def with_features(self, F, representation: str | None = None) -> "Corel":
        """The same pictures and protocol with other features (rows in collection order)."""
        return Corel(self.settings, representation or self.representation, F=F, base=self)

    def select(self, model, **kw):
        """pamir.selection.select on train, validation queries with the training idf."""
        return select(model, self.train.X, self.train.Y, self.valid.X, self.valid.Y, **kw)

    def visterms_per_picture(self) -> float:
        """Distinct visterms per picture."""
        return round(float(sp.csr_matrix(self.F).getnnz(axis=1).mean()), 1)

    def counts(self) -> sp.csr_matrix:
        """What the bags count, for every picture: blob presence, or the exact visterm
        counts (the cached blocks assigned to the cached pipeline's codewords again). CMRM,
        CMTT and PLSA are defined on counts; the bags are tf-idf and L2-normalised."""
        from pamir.features import extract_blocks, load_blobs  # noqa: PLC0415
        from pamir.features.visterms import term_frequencies  # noqa: PLC0415
        if self.representation == "blobs":
            return sp.csr_matrix(load_blobs(self.collection)[0], dtype=np.float32)
        pipe = self.rep
        blocks = extract_blocks(self.collection.paths, self.settings, pipe.colour_codebook_,
                                cache_dir=config.default_cache_dir(), progress=False)
        tf = term_frequencies(pipe.assign(blocks.counts()), blocks.offsets,
                              self.settings.n_visterms)
        if not np.array_equal(sp.csr_matrix(tf > 0).indices, sp.csr_matrix(self.F > 0).indices):
            raise RuntimeError("visterm counts disagree with the cached bags: clear "
                               ".cache/pipelines")
        return sp.csr_matrix(tf, dtype=np.float64)

    def describe(self, **extra) -> dict:
        """The features in a results entry."""
        if self.representation == "blobs":  # Duygulu's: no settings of ours
            return {"kind": "blobs", **extra}
        return {"kind": self.representation, "settings": self.settings.to_dict(), **extra}


# ------------------------------------------------------------------------------ timings

def text_index(model, X):
    """The (n x T) vectors a model ranks pictures X with, computed once per picture: its
    text space, or log P(w|I) for PACMRM (DRCMRM ranks by a divergence; its index is P(w|I),
    as the CMRM paper's)."""
    if getattr(model, "mode", None) == "pacmrm":
        return model.log_word_probabilities(X)
    return model.transform(X)


def query_weights(model, Q) -> sp.csr_matrix:
    """What multiplies the index for query vectors Q: the query's words for CMRM, the SVMs'
    fusion weights, the idf vectors themselves otherwise."""
    if getattr(model, "mode", None) in ("pacmrm", "drcmrm"):
        return sp.csr_matrix(sp.csr_matrix(Q) != 0, dtype=np.float64)
    return sp.csr_matrix(model.query_weights(Q) if hasattr(model, "query_weights") else Q)


def indexing(fit, X_test, repeats: int = 1):
    """(model, seconds): fit() trains a model (no validation), then the test pictures are
    indexed (text_index); the best wall time of `repeats` runs (TPAMI Table VII)."""
    best, model = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        model = fit()
        text_index(model, X_test)
        best = min(best, time.perf_counter() - t0)
    return model, best


def query_ms(model, X, Q, repeats: int = 3, most: int = 500, index=None) -> float:
    """Milliseconds to rank the pictures X for one query and sort them (TPAMI Table VIII),
    the best of `repeats` passes. Product models score from the word-major index (T x n;
    `index`: text_index(model, X) if computed already): the rows of the query's words only.
    DRCMRM scores each query against the pictures (its first `most` queries, one pass:
    ~6 ms each)."""
    W = query_weights(model, Q)
    if getattr(model, "mode", None) == "drcmrm":
        W = W[:most]
        t0 = time.perf_counter()
        for i in range(W.shape[0]):
            np.argsort(-model.negative_kl(W[i], X)[0])
        return 1000 * (time.perf_counter() - t0) / W.shape[0]
    Z = text_index(model, X) if index is None else index
    Zt = np.ascontiguousarray(np.asarray(Z, dtype=np.float32).T)
    W = sp.csr_matrix(W, dtype=np.float32)
    queries = [(W.indices[W.indptr[i]:W.indptr[i + 1]], W.data[W.indptr[i]:W.indptr[i + 1]])
               for i in range(W.shape[0])]
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for words, weights in queries:
            np.argsort(-(weights @ Zt[words]))
        best = min(best, time.perf_counter() - t0)
    return 1000 * best / len(queries)


# ------------------------------------------------------------------------------ results

def pct(ev, metric: str = "avgp", subset: str = "all") -> float:
    return round(100 * ev.mean(metric, subset), 2)


def test_entry(name: str, ev) -> dict:
    """Test figures of an Evaluation ("test", "subsets"); its per-query metrics and curve go
    to results/perquery/NAME.npz, which bench_compare reads (protocol order)."""
    PERQUERY.mkdir(parents=True, exist_ok=True)
    np.savez(PERQUERY / f"{name}.npz", **{m: ev.per_query[m] for m in METRICS}, curve=ev.curve)
    return {"test": {m: pct(ev, m) for m in METRICS}, "subsets": ev.table(METRICS)}


def selection_rows(sel, top: int | None = None) -> list[dict]:
    """The trials of a Selection, best validation AvgP first: valid_avgp, the point's
    parameters, seconds and where early stopping kept the weights."""
    trials = sorted(sel.trials, key=lambda t: -t.valid_avgp)[:top]
    return [{"valid_avgp": round(t.valid_avgp, 2), **t.params, "seconds": round(t.seconds, 1),
             **t.stopping} for t in trials]


def plain(value):
    """A JSON-able copy: numpy scalars and arrays as Python numbers and lists."""
    def default(o):
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, Path):
            return str(o)
        raise TypeError(f"{type(o).__name__} is not JSON serialisable")
    return json.loads(json.dumps(value, default=default))


def write_results(updates: dict, path: Path = SUMMARY) -> dict:
    """Merge {key: entry} into a shared results file (pamir.storage.locked_json_update:
    locked, atomic); the merged content."""
    return locked_json_update(path, plain(updates))


def write_json(path: Path, value) -> None:
    """A benchmark's own results file (no other writer), replaced atomically: a run stopped
    while writing leaves the last results whole."""
    atomic_write_bytes(path, (json.dumps(plain(value), indent=1) + "\n").encode())


def parser(doc: str) -> argparse.ArgumentParser:
    """A benchmark's command line, described by the first line of its docstring (`--help`
    prints the rest: what it measures and how to run it)."""
    first, _, rest = (doc or "").strip().partition("\n")
    return argparse.ArgumentParser(description=first, epilog=rest.strip() or None,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def report_cli(doc: str, stem: str, report, argv=None, flags: dict | None = None):
    """The command line of a benchmark that writes results/STEM.json and STEM.md, with
    --report-only and the on/off `flags` ({name: help}). Returns the parsed arguments, or
    None when --report-only rewrote STEM.md from STEM.json with `report` (json -> markdown),
    so that the caller has nothing left to measure."""
    ap = parser(doc)
    ap.add_argument("--report-only", action="store_true",
                    help=f"rewrite results/{stem}.md from {stem}.json, measuring nothing")
    for name, text in (flags or {}).items():
        ap.add_argument(name, action="store_true", help=text)
    args = ap.parse_args(argv)
    if not args.report_only:
        return args
    rerender(stem, report)
    return None


def rerender(stem: str, report) -> dict:
    """results/STEM.md written again from results/STEM.json with `report` (json -> markdown),
    measuring nothing (--report-only); the results read."""
    r = json.loads((RESULTS / f"{stem}.json").read_text())
    (RESULTS / f"{stem}.md").write_text(report(r))
    return r


def save_report(stem: str, r: dict, report, echo: bool = True) -> None:
    """results/STEM.json and its report STEM.md; the report is printed too (echo)."""
    write_json(RESULTS / f"{stem}.json", r)
    text = report(r)
    (RESULTS / f"{stem}.md").write_text(text)
    if echo:
        print(text)


def read_summary() -> dict:
    return json.loads(SUMMARY.read_text()) if SUMMARY.is_file() else {}


def archive(commit: str, dest: Path) -> str:
    """A pristine source tree of `commit` at dest (a `git archive` of this repository);
    returns the full hash: how a benchmark times an older commit beside this one."""
    root = Path(__file__).resolve().parent.parent
    dest.mkdir(parents=True)
    full = subprocess.run(["git", "rev-parse", commit], cwd=root, check=True,
                          capture_output=True, text=True).stdout.strip()
    tar = subprocess.run(["git", "archive", full], cwd=root, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar.stdout, check=True)
    return full
