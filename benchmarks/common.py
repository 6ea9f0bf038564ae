"""What the benchmarks share: the run they were measured in, Corel 5k split by the protocol
with its cached features, indexing and query timings, and writing results.

    run = Run("bench_compare.py", argv)       # command, machine, date, load average
    corel = Corel()                           # the visterm bags `pamir fit corel5k` reads
    sel = corel.select("cmrm")                # pamir.training.selection.select on train / valid
    ev = corel.test.evaluate(sel.model)       # the 2,241 test queries, with their subsets
    write_results({"cmrm": entry})            # merged into results/corel5k.json, locked
    save_report("stem", r, report)            # results/stem.json and stem.md (report(r))
    report_head(title, r)                     # a report's title, command, machine and load

A script's report is a function of its results file alone, so that --report-only
(report_cli, rerender) writes the .md again from the committed .json: report_head reads the
forms of run older results files store as well as Run.info()'s.

Every benchmark chooses its parameters with pamir.training.selection.select, as `pamir fit` does; a
benchmark adds the studies and timings the papers report around it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from pamir import config
from pamir.data import load_collection
from pamir.evaluation import evaluate_model
from pamir.features import FeatureSettings
from pamir.features.representation import take_rows
from pamir.protocol import Protocol
from pamir.training.selection import select
from pamir.storage import atomic_write_bytes, locked_json_update

# The feature code (faiss, OpenCV, Pillow) is imported by the Corel methods that use it, so
# that the run and report part of this module loads where only the model code is installed
# (bench_small_selection.py --from fits on a lent machine with it).

REPO = Path(__file__).resolve().parent.parent
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
        """pamir.training.selection.select on train, validation queries with the training idf."""
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


def report_cli(doc: str, stem: str, report, argv=None, flags: dict | None = None,
               options=None):
    """The command line of a benchmark that writes results/STEM.json and STEM.md, with
    --report-only, the on/off `flags` ({name: help}) and what options(parser) adds. Returns
    the parsed arguments, or None when --report-only rewrote STEM.md from STEM.json with
    `report` (json -> markdown), so that the caller has nothing left to measure."""
    ap = parser(doc)
    ap.add_argument("--report-only", action="store_true",
                    help=f"rewrite results/{stem}.md from {stem}.json, measuring nothing")
    for name, text in (flags or {}).items():
        ap.add_argument(name, action="store_true", help=text)
    if options is not None:
        options(ap)
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


# ------------------------------------------------------- annotation (bench_annotation*)
#: The annotation goal (P / R / N+ in %, %, words) both annotation studies hold results to.
GOAL = (40, 45, 180)


def annotation_vocabulary(collection, protocol) -> list[str]:
    """The words of both the development and the test captions (260 on Corel 5k)."""
    words = lambda idx: {w for i in idx for w in (collection.captions[i] or ())}  # noqa: E731
    return sorted(words(protocol.development) & words(protocol.test))


def apply_rule(rule: str, Z: np.ndarray, reference: np.ndarray) -> np.ndarray:
    if rule == "scores":
        return Z
    mean, std = reference.mean(axis=0), reference.std(axis=0)
    return (Z - mean) / np.where(std > 0, std, 1.0)


# --------------------------------------------- commands timed as processes, a served index
#: The queries whose latency the search benchmarks time, one of each kind.
QUERIES = {
    "vocabulary word": "tiger",
    "inflection": "flower",
    "meaning (new to the index)": "giraffe",
    "ImageNet classes": "leopard",
    "three words, exclusion, filter": "leopard grass -water in:130000",
}


CLI = "from pamir.cli import main; main()"


BIG_BATCH = 50_000


# ------------------------------------------------------------------------ the big index
def build_big(source: Path, target: Path, n: int, seed: int = 0) -> dict:
    """A synthetic index of n pictures from the real vectors of `source` (see the docstring)."""
    rng = np.random.default_rng(seed)
    from pamir.index import Index  # noqa: PLC0415

    with Index.open(source) as real:
        pics = real.pictures("ok")
        Z = np.stack([real.vector(p.id, classes=True) for p in pics])
        folders = sorted({Path(p.path).parent.name for p in pics})
        meta = dict(vocabulary=real.vocabulary, idf=real.idf, classes=real.classes,
                    model_dir=real.model_dir, fingerprint=real.model_fingerprint)
    t0 = time.perf_counter()
    tmp = target.with_name(target.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    from pamir.index import tuning as scores_mod
    scores_mod.SEAL_AT = 1 << 62  # bulk load: one compaction at the end
    with Index.create(tmp, meta["vocabulary"], meta["idf"], model_dir=meta["model_dir"],
                      fingerprint=meta["fingerprint"], classes=meta["classes"]) as ix:
        for start in range(0, n, BIG_BATCH):
            m = min(BIG_BATCH, n - start)
            rows = Z[rng.integers(0, len(Z), m)]
            rows *= 1 + 0.05 * rng.standard_normal(rows.shape, dtype=np.float32)
            entries = [{"path": f"/synthetic/{folders[i % len(folders)]}/{i:08d}.jpeg",
                        "size": 1, "mtime_ns": i, "hash": f"{i:032x}"}
                       for i in range(start, start + m)]
            ix.add(entries, rows)
        ix.compact()
    # the word-mapping caches `pamir index` leaves beside an index
    for f in source.glob("vocabulary-embeddings-*.npy"):
        shutil.copy(f, tmp / f.name)
    tmp.rename(target)
    return {"pictures": n, "build_s": round(time.perf_counter() - t0, 1),
            "size_mb": round(sum(f.stat().st_size for f in target.iterdir()) / 2**20)}


# ------------------------------------------------------------------------ timing processes
def env_for(tree: Path, extra: dict | None = None) -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(tree)
    e.update(extra or {})
    return e


def wall(argv: list[str], env: dict) -> float:
    # run from the tree itself: `python -c` puts the working folder first on sys.path
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, cwd=env["PYTHONPATH"])
    took = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {r.stderr[-800:]}")
    return took


def side_by_side(commands: dict[str, list[str]], trees: dict[str, Path], runs: int,
                 env_extra: dict) -> dict:
    """{command name: {tree name: {median_s, runs_s}}}: each command warmed once per tree,
    then `runs` rounds, each round every tree in turn (and numpy alone)."""
    times = {c: {t: [] for t in trees} for c in commands}
    numpy_times = []
    for c, args in commands.items():
        for t, tree in trees.items():
            wall([sys.executable, "-c", CLI, *args], env_for(tree, env_extra))  # warm
    for _ in range(runs):
        numpy_times.append(wall([sys.executable, "-c", "import numpy"], env_for(REPO)))
        for c, args in commands.items():
            for t, tree in trees.items():
                times[c][t].append(wall([sys.executable, "-c", CLI, *args],
                                        env_for(tree, env_extra)))
    out = {c: {t: {"median_s": round(statistics.median(v), 3),
                   "runs_s": [round(x, 3) for x in v]} for t, v in d.items()}
           for c, d in times.items()}
    out["python -c \"import numpy\""] = {"median_s": round(statistics.median(numpy_times), 3),
                                         "runs_s": [round(x, 3) for x in numpy_times]}
    return out


# ------------------------------------------------------------------------ the server
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_latency(index: Path, tree: Path, n: int, env_extra: dict) -> dict:
    """p50 / p99 (ms) of each query through GET /api/search, `pamir serve` on 127.0.0.1 with
    the model loaded; n timed requests a query after 5 warm-up ones."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", CLI, "serve", "--index", str(index),
                             "--port", str(port)], env=env_for(tree, env_extra),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, cwd=tree)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while True:  # up, and the word-embedding model loaded
            try:
                with urllib.request.urlopen(base + "/api/status", timeout=5) as r:
                    status = json.load(r)
                if status.get("mapping", {}).get("state") in ("loaded", "off",
                                                              "unavailable"):
                    break
            except OSError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("the server did not come up with its model loaded")
            time.sleep(0.5)
        out = {}
        for name, q in QUERIES.items():
            url = f"{base}/api/search?" + urllib.parse.urlencode({"q": q, "k": 20})
            took = []
            for i in range(n + 5):
                t0 = time.perf_counter()
                with urllib.request.urlopen(url, timeout=30) as r:
                    r.read()
                if i >= 5:
                    took.append((time.perf_counter() - t0) * 1000)
            out[name] = {"p50_ms": round(float(np.percentile(took, 50)), 2),
                         "p99_ms": round(float(np.percentile(took, 99)), 2), "requests": n}
        return out
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


# ------------------------------------------ Corel 5k with features made per call (CNN studies)

class CorelViews:
    """Corel 5k, its protocol and each split's queries, with the features of any
    representation made on call (`features`) and PAMIR selected on them with its own grid."""

    def __init__(self):
        from pamir.data import load_corel5k  # noqa: PLC0415

        self.collection = load_corel5k()
        self.protocol = p = Protocol(self.collection)
        self.train, self.valid, self.test = p.train, p.valid, p.test
        self.test_queries = p.queries(self.test)
        self.Q_test = p.query_vectors(self.test_queries)
        self.subsets = p.query_subsets(self.test_queries)

    def features(self, name: str, cnn: dict | None = None, weights=None):
        from pamir.features.cnn import CNNSettings  # noqa: PLC0415
        from pamir.training import collection_inputs  # noqa: PLC0415

        t0 = time.perf_counter()
        F, ok, rep = collection_inputs(self.collection, self.protocol, name, FeatureSettings(),
                                       weights=weights, cnn_settings=CNNSettings(**(cnn or {})),
                                       progress=sys.stderr.isatty(), log=None)
        if not ok.all():
            print(f"  {int((~ok).sum())} pictures unreadable", flush=True)
        return F, time.perf_counter() - t0

    def select(self, F, seeds=None):
        p = self.protocol
        return select("pamir", F[self.train], p.presence(self.train), F[self.valid],
                      p.presence(self.valid), params={}, seeds=seeds, log=None)

    def test_evaluation(self, Z):
        from pamir.evaluation import evaluate_text_space  # noqa: PLC0415

        return evaluate_text_space(Z, self.Q_test, self.test_queries.relevance, self.subsets)


# ------------------------------- folders of Corel pictures with their keywords in the files
#: The tagged Corel folder bench_metadata and bench_facts build (never in the repository).
METADATA_WORK = Path("/tmp/pamir-bench-metadata")


WAYS = ("IPTC Keywords", "XMP dc:subject", "XMP lr:hierarchicalSubject",
        "XMP digiKam:TagsList", "EXIF XPKeywords", "sidecar NAME.EXT.xmp", "sidecar NAME.xmp")


def corel_captions(root: Path) -> dict[str, list[str]]:
    words = (root / "labels" / "words").read_text().split()
    out = {}
    for line in (root / "labels" / "training_label").read_text().splitlines():
        pid, *ks = line.split()
        out[pid] = [words[int(k) - 1] for k in ks]
    return out


def exiftool_args(path: Path, way: str, words: list[str]) -> list[str]:
    """One -execute block of exiftool's argument file."""
    if way == "IPTC Keywords":
        tags = [f"-IPTC:Keywords={w}" for w in words]
    elif way == "XMP dc:subject":
        tags = [f"-XMP-dc:Subject={w}" for w in words]
    elif way == "XMP lr:hierarchicalSubject":
        tags = [f"-XMP-lr:HierarchicalSubject=corel|{w}" for w in words[:1]] + \
               [f"-XMP-lr:HierarchicalSubject={w}" for w in words[1:]]
    elif way == "XMP digiKam:TagsList":
        tags = [f"-XMP-digiKam:TagsList={w}" for w in words]
    elif way == "EXIF XPKeywords":
        tags = [f"-XPKeywords={';'.join(words)}"]
    elif way == "sidecar NAME.EXT.xmp":
        return [*(f"-XMP-dc:Subject={w}" for w in words), "-q", "-q", "-o", f"{path}.xmp",
                str(path), "-execute"]
    else:
        return [*(f"-XMP-dc:Subject={w}" for w in words), "-q", "-q", "-o",
                str(path.with_suffix(".xmp")), str(path), "-execute"]
    return [*tags, "-q", "-q", "-overwrite_original", str(path), "-execute"]


def build_tagged_folder(root: Path) -> dict:
    """bench_metadata's folder: every Corel picture, its keywords written one of the WAYS,
    and its table (rebuilt from scratch)."""
    if METADATA_WORK.exists():
        shutil.rmtree(METADATA_WORK)
    pics = METADATA_WORK / "pictures"
    pics.mkdir(parents=True)
    captions = corel_captions(root)
    for src in sorted((root / "images").glob("*/*.jpeg")):
        shutil.copyfile(src, pics / src.name)
    args, ways = [], {}
    for i, pid in enumerate(sorted(captions)):
        way = WAYS[i % len(WAYS)]
        ways[way] = ways.get(way, 0) + 1
        args += exiftool_args(pics / f"{pid}.jpeg", way, captions[pid])
    (METADATA_WORK / "exiftool.args").write_text("\n".join(args) + "\n")
    started = time.perf_counter()
    subprocess.run(["exiftool", "-q", "-q", "-@", str(METADATA_WORK / "exiftool.args")], check=True)
    write_s = time.perf_counter() - started
    # the lr:hierarchicalSubject pictures carry "corel" as their first level: the table says
    # so too, as `pamir fit FOLDER` reads each level as a word
    rows = ["path\tkeywords"]
    hier = {pid for i, pid in enumerate(sorted(captions))
            if WAYS[i % len(WAYS)] == "XMP lr:hierarchicalSubject"}
    for p in sorted(pics.glob("*.jpeg")):  # the order `pamir fit FOLDER` reads them in
        words = captions.get(p.stem, [])
        if p.stem in hier:
            words = ["corel"] + words
        rows.append(f"{p.name}\t{' '.join(words)}")
    (pics / "captions.tsv").write_text("\n".join(rows) + "\n")
    return {"pictures": len(list(pics.glob("*.jpeg"))), "tagged": len(captions), "ways": ways,
            "exiftool_write_seconds": round(write_s, 1)}


def run_pamir(argv: list[str], code: Path = REPO, cache: Path | None = None,
          cpu: list | None = None) -> tuple[float, str]:
    """(seconds, output) of `pamir ARGV` run from the checkout `code`, with the feature cache
    `cache` (default: the benchmark's shared one); its CPU seconds appended to `cpu`."""
    env = dict(os.environ, PYTHONPATH=str(code), PAMIR_CACHE=str(cache or METADATA_WORK / "cache"),
               PAMIR_EMBEDDINGS="0")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", "from pamir.cli import main; main()",
                        *map(str, argv)], env=env, capture_output=True, text=True, cwd="/tmp")
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append(round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
                         2))
    if r.returncode:
        raise SystemExit(f"pamir {' '.join(map(str, argv))} failed:\n{r.stdout}\n{r.stderr}")
    return seconds, r.stdout + r.stderr

#: The draw of bench_small_folders' pictures (and of the refit's added ones, SEED + 1).
SMALL_FOLDER_SEED = 0


def build_small_folder(dest: Path, captioned: int, uncaptioned: int, corel: Path) -> dict:
    """The folder: `captioned` development pictures with keywords in their files, and
    `uncaptioned` test pictures without."""
    captions = corel_captions(corel)
    rng = np.random.default_rng(SMALL_FOLDER_SEED)
    dev = sorted(captions)
    test = sorted(p.stem for p in (corel / "images").glob("*/*.jpeg") if p.stem not in captions)
    chosen = [dev[i] for i in sorted(rng.choice(len(dev), captioned, replace=False))]
    bare = [test[i] for i in sorted(rng.choice(len(test), uncaptioned, replace=False))]
    where = {p.stem: p for p in (corel / "images").glob("*/*.jpeg")}
    dest.mkdir(parents=True)
    args = []
    for i, pid in enumerate(chosen):
        shutil.copyfile(where[pid], dest / f"{pid}.jpeg")
        args += exiftool_args(dest / f"{pid}.jpeg", WAYS[i % len(WAYS)], captions[pid])
    for pid in bare:
        shutil.copyfile(where[pid], dest / f"{pid}.jpeg")
    (dest.parent / f"{dest.name}.args").write_text("\n".join(args) + "\n")
    subprocess.run(["exiftool", "-q", "-q", "-@", str(dest.parent / f"{dest.name}.args")],
                   check=True)
    return {"captioned": captioned, "uncaptioned": uncaptioned}


def pamir_logged(src: Path, cache: Path, args: list[str], log: Path,
                 peak: list | None = None) -> float:
    """Run `pamir ARGS` from the source tree src with feature cache `cache`; wall seconds.
    stdout and stderr go to log (appended). peak: gets the process's peak resident memory
    (MB, its own ru_maxrss from wait4: what `/usr/bin/time -v` reports) appended."""
    env = {**os.environ, "PYTHONPATH": str(src), "PAMIR_CACHE": str(cache),
           "PAMIR_COREL5K": str(corel5k_folder())}
    code = "import sys; sys.argv[0] = 'pamir'; from pamir.cli import main; main()"
    t0 = time.perf_counter()
    with open(log, "a") as out:
        out.write(f"\n$ pamir {' '.join(args)}\n")
        out.flush()
        child = subprocess.Popen([sys.executable, "-c", code, *args], cwd=src, env=env,
                                 stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            raise subprocess.CalledProcessError(child.returncode, ["pamir", *args])
    if peak is not None:
        peak.append(round(usage.ru_maxrss / 1024))
    return time.perf_counter() - t0


class TreeMemory(threading.Thread):
    """The largest sum of resident memory over a process and its descendants, sampled."""

    def __init__(self, pid: int, every: float = 0.2):
        super().__init__(daemon=True)
        self.pid, self.every, self.peak, self.done = pid, every, 0, threading.Event()

    def run(self) -> None:
        import psutil  # noqa: PLC0415 - distributed's dependency, installed with [dask]

        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self.done.wait(self.every):
            total = 0
            try:
                for p in [root, *root.children(recursive=True)]:
                    total += p.memory_info().rss
            except psutil.NoSuchProcess:
                pass  # a pass process that just ended: the others still count
            self.peak = max(self.peak, total)


def run_watched(cmd: list, *, cwd: Path, env: dict, stdout: Path, log: Path, header: str):
    """Run a whole command as a person waits for it: its stdout into `stdout`, its stderr
    appended to `log` after `header`; (wall seconds, its own peak RSS in MB, the peak over
    it and its descendants in MB, its exit code), the memory sampled by TreeMemory."""
    with open(stdout, "w") as out, open(log, "a") as err:
        err.write(f"\n$ {header}\n")
        err.flush()
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        memory = TreeMemory(child.pid)
        memory.start()
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - t0
        memory.done.set()
    memory.join()
    return (seconds, round(usage.ru_maxrss / 1024), round(memory.peak / 2**20),
            os.waitstatus_to_exitcode(status))


def warm_up_pictures(folder: Path, seed: int = 0, n: int = 2) -> Path:
    """n random 192 x 128 JPEGs in `folder` (made here): what a benchmark indexes once to
    fill the one-time cache (ONNX exports, int8 graphs) that no timed run should pay for."""
    from PIL import Image  # noqa: PLC0415

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (128, 192, 3), dtype=np.uint8)).save(
            folder / f"warm-{i}.jpg")
    return folder


def corel5k_folder() -> Path:
    """The Corel 5k folder: PAMIR_COREL5K, else ../shared/data/corel5k beside the checkout
    (a `git archive` run elsewhere reads it through the variable)."""
    return Path(os.environ.get("PAMIR_COREL5K", REPO.parent / "shared/data/corel5k")).resolve()


# ---------------------------------------------- searching with no captions (zero-caption studies)

def query_metrics(S: np.ndarray, qs) -> dict:
    """AvgP and P10 (%) over all queries and the single-word ones."""
    from pamir.evaluation.metrics import ranking_metrics  # noqa: PLC0415

    m = ranking_metrics(S, qs.relevance)
    one = qs.n_words == 1
    return {"all": {"avgp": round(100 * m["avgp"].mean(), 2),
                    "p10": round(100 * m["p10"].mean(), 2)},
            "single-word": {"avgp": round(100 * m["avgp"][one].mean(), 2),
                            "p10": round(100 * m["p10"][one].mean(), 2)}}


def word_scores(P: np.ndarray, words, vocabulary) -> dict:
    """{word: (its mass scores over P's pictures or None, the match)}; words: a
    pamir.zeroshot.classes.ClassWords."""
    from pamir.zeroshot import classes as zeroshot  # noqa: PLC0415

    out = {}
    for w in vocabulary:
        match = words.match(w)
        out[w] = (None if match.vector is None else zeroshot.mass_score(P @ match.vector),
                  match)
    return out


def query_matrix(scores: dict, qs, n: int) -> np.ndarray:
    """The queries' scores: the sum of their words' (as the index sums a query's terms)."""
    zero = np.zeros(n)
    return np.stack([sum(scores[qs.vocabulary[t]][0] if scores[qs.vocabulary[t]][0]
                         is not None else zero for t in q) for q in qs.terms])


def through_index(Z: np.ndarray, prot, vocabulary, idf, classes, folder: Path,
                  split: str = "test", scales=None) -> dict:
    """A split's queries searched through a real index of its pictures (columns Z), as
    `pamir search` does: per query, every picture's score, then AvgP / P10; queries with no
    searchable word score every picture alike (the worst ties). scales: the words' spreads
    the index measures a query's words by (pamir.jobs.workflow.word_scales)."""
    from pamir.index import Index, QueryError  # noqa: PLC0415

    qs, idx = prot.queries(split), prot.split(split)
    paths = [str(prot.collection.paths[i]) for i in idx]
    with Index.create(folder, vocabulary, idf, classes=classes, scales=scales) as ix:
        ix.add([{"path": p, "size": 1, "mtime_ns": 1, "hash": f"h{j}"}
                for j, p in enumerate(paths)], Z)
        position = {p: j for j, p in enumerate(paths)}
        S = np.zeros((len(qs), len(idx)))
        unanswered = 0
        for i, words in enumerate(qs.words):
            try:
                hits = ix.search(" ".join(words), len(idx))
            except QueryError:
                unanswered += 1
                continue
            for h in hits:
                S[i, position[h.path]] = h.score
    return {**query_metrics(S, qs), "unanswered_queries": unanswered}


# ------------------------------------------ PAMIR studies on the papers' features (TPAMI 2008)
# The paper's numbers (Grangier & Bengio, TPAMI 2008, on 384x256 pictures).
PAPER_TABLE_III = {  # block size in px on the paper's pictures -> validation AvgP
    32: 26.1, 48: 25.3, 64: 27.3, 96: 25.3, 128: 22.3, 192: 17.8, 256: 18.3}


PAPER_TABLE_IX = {"avgp": 26.3, "bep": 17.4, "p10": 10.0}


def measure_pamir(settings: FeatureSettings, seeds: int, **params) -> dict:
    """Validation and test figures of PAMIR (its defaults unless `params` say otherwise;
    early stopping on validation) on the features of `settings`, for `seeds` seeds of the
    triplet sampling."""
    label = f"[{settings.short_side} px, {settings.scaling}{' ' + str(params) if params else ''}]"
    print(f"{label} features ...", flush=True)
    corel = Corel(settings)
    runs = []
    for seed in range(seeds):
        sel = corel.select("pamir", params={**params, "random_state": config.SEED + seed},
                           grid={}, log=None)
        ev = corel.test.evaluate(sel.model)
        runs.append({"random_state": config.SEED + seed, "valid_avgp": round(sel.valid_avgp, 2),
                     "best_update": sel.model.best_update_,
                     **{m: pct(ev, m) for m in METRICS}})
        print(f"{label} {runs[-1]}", flush=True)
    mean = {k: round(float(np.mean([r[k] for r in runs])), 2)
            for k in ("valid_avgp", *METRICS)}
    return {"short_side": settings.short_side, "scaling": settings.scaling, "params": params,
            "feature_seconds": round(corel.feature_seconds, 1),
            "visterms_per_picture": corel.visterms_per_picture(),
            "runs": runs, "mean": mean}


def defaults() -> str:
    """The features and PAMIR parameters every study row shares, in words."""
    from pamir.models.pamir import PAMIR  # noqa: PLC0415

    return (f"{FeatureSettings.n_visterms:,} visterms, c = {PAMIR.default_params()['c']}, "
            "early stopping on validation")


def figures(m: dict) -> str:
    """Mean validation AvgP, test AvgP, BEP and P10 as table cells."""
    return f"{m['valid_avgp']:.2f} | {m['avgp']:.2f} | {m['bep']:.2f} | {m['p10']:.2f}"


def study_options(ap: argparse.ArgumentParser, base: str):
    """--scaling and --report-only; returns args -> the results' name (BASE, or BASE_SCALING
    for a scaling other than the default)."""
    from pamir.features.settings import SCALINGS  # noqa: PLC0415

    ap.add_argument("--scaling", default=FeatureSettings.scaling, choices=SCALINGS,
                    help="block histogram scaling of the features (default: the project's)")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the markdown from the study's JSON without running")
    return lambda args: base if args.scaling == FeatureSettings.scaling else \
        f"{base}_{args.scaling}"


def study(name: str, points: list[tuple[FeatureSettings, dict]], seeds: int, argv, report,
          summary=lambda rows: {}) -> None:
    """Measure PAMIR at each (feature settings, PAMIR parameters) point; write
    results/NAME.json and NAME.md with the command, machine, date and load they were
    measured under."""
    run = Run(f"bench_{name}.py", argv)
    rows = [measure_pamir(s, seeds, **params) for s, params in points]
    r = {"rows": rows, **run.info(), **summary(rows)}
    save_report(name, r, report, echo=False)
    print(f"wrote {RESULTS / name}.md ({run.minutes()} min)")


# ------------------------------------------------------ videos made of Corel pictures (PyAV)
def camera_frames(picture: Path, seconds: float, fps: int, size: tuple[int, int], seed: int):
    """The frames of one shot of `picture`: a slow pan and zoom over it, with noise."""
    import cv2  # noqa: PLC0415
    from PIL import Image  # noqa: PLC0415

    w, h = size
    with Image.open(picture) as im:
        big = np.asarray(im.convert("RGB").resize((int(w * 1.25), int(h * 1.25)),
                                                  Image.BICUBIC))
    rng = np.random.default_rng(seed)
    # a few noise fields in turn: fresh noise per frame costs more than the encoding
    noises = [np.repeat(rng.integers(0, 9, (h, w, 1), dtype=np.uint8), 3, axis=2)
              for _ in range(4)]
    n = int(seconds * fps)
    (dx, dy), zoom = rng.uniform(-1, 1, 2), rng.uniform(0.0, 0.15)
    for k in range(n):
        a = k / max(1, n - 1)
        s = 1 / (1 - zoom * a / 1.25)  # zooming in a little over the shot
        tx = (w - big.shape[1] * s) / 2 - dx * a * (big.shape[1] - w / s) * s / 2
        ty = (h - big.shape[0] * s) / 2 - dy * a * (big.shape[0] - h / s) * s / 2
        m = np.float32([[s, 0, tx], [0, s, ty]])
        frame = cv2.warpAffine(big, m, (w, h), flags=cv2.INTER_LINEAR)
        yield cv2.subtract(cv2.add(frame, noises[k % 4]), 4)


def write_video(path: Path, pictures: list[Path], *, seconds_each: float = 10.0, fps: int = 30,
                size: tuple[int, int] = (1920, 1080), gop: int = 30, bitrate: int = 12_000_000,
                preset: str = "veryfast") -> Path:
    """An H.264 MP4 of `pictures`, one shot each (camera_frames), a keyframe every `gop`
    frames (a phone's: about a second)."""
    import av  # noqa: PLC0415

    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=fps, options={"preset": preset})
        s.width, s.height = size
        s.pix_fmt = "yuv420p"
        s.bit_rate = bitrate
        s.codec_context.gop_size = gop
        s.codec_context.options = {"preset": preset, "sc_threshold": "0"}
        for i, p in enumerate(pictures):
            for rgb in camera_frames(p, seconds_each, fps, size, seed=i):
                for packet in s.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                    c.mux(packet)
        for packet in s.encode():
            c.mux(packet)
    return path


def checkout_commit() -> str:
    """This checkout's commit, and whether its tracked files were changed."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=REPO).stdout.strip()
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=REPO).returncode != 0
    return head + (" (with changes not committed)" if dirty else "")
