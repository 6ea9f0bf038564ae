"""Issue 27 (pamir as a library): what `import pamir` costs, and that the move of learning into
the model, of the index workflow out of the CLI and the split of the index's rooms left every
figure as it was.

    python benchmarks/history/bench_library.py [--before COMMIT] [--model MODEL_DIR]

1. `python -c "import pamir"` against `python -c pass`, interleaved, median of --runs each
   (the target: <= 0.3 s on 2 cores).
2. The same computations by the code before (a `git archive` of --before) and after, each
   in its own process on the shared feature cache, compared bit for bit: `pamir evaluate
   MODEL --on corel5k:test --json` (System.load, transforms, evaluation); a PAMIR
   `fit_system` on the cached Lite0 CNN features of Corel 5k (the fit path, 300,000
   updates, no grid); `pamir.training.online.learn` with new words and a start from neighbours,
   then a feedback round (now PAMIR.partial_fit and PAMIR.feedback_delta); and an index of
   300 Corel pictures made with MODEL, searched four ways and asked for similar pictures.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# a one-off comparison against older commits (benchmarks/history/): what the benchmarks
# share, benchmarks/common/, is one folder up, where Python does not look for it
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common.harness import RESULTS, Run, archive, corel5k_folder, parser, report_head

ROOT = Path(__file__).resolve().parents[2]
BRANCH_POINT = "51034fd"

FIT = """
import sys, numpy as np
from pamir.data import load_corel5k
from pamir.training import fit_system
s = fit_system(load_corel5k(), "pamir", representation="cnn", grid={}, log=None,
               model_params={"n_updates": 300_000, "eval_every": 100_000})
np.save(sys.argv[1], s.model.W_)
print(s.info["valid_avgp"])
"""

LEARN = """
import sys, numpy as np, scipy.sparse as sp
from pamir.models.pamir import PAMIR
from pamir.training.online import learn, feedback_delta, apply_delta
from pamir.system import System
rng = np.random.default_rng(0)
Y = sp.csr_matrix((rng.random((80, 5)) < 0.35).astype(float))
keep = np.flatnonzero(np.asarray(Y.sum(1)).ravel() > 0)
Y = Y[keep]
X = sp.csr_matrix(rng.random((len(keep), 30)) * (rng.random((len(keep), 30)) < 0.3))
m = PAMIR(n_updates=5000, eval_every=1000).fit(X, Y)
s = System(None, m, [f"w{t}" for t in range(5)], m.idf_, {"pictures": {"train": 60}})
F = sp.csr_matrix(rng.random((12, 30)))
caps = [("w1", "new") if i % 2 else ("w2", "other") for i in range(12)]
report = learn(s, F, caps, init={"new": [("w1", 0.7), ("w3", 0.3)]}, seed=3)
q = np.zeros(len(s.vocabulary))
q[[1, 5]] = [0.6, 0.8]
rows, delta = feedback_delta(s, q, F[:2], F[2:5])
apply_delta(s, rows, delta)
np.save(sys.argv[1], np.concatenate([s.model.W_.ravel(), s.model.idf_, s.idf]))
print(report)
"""

# The index's rooms (issue 27): index the first 300 Corel pictures with MODEL (argv[2]), then
# search, filter by probability, count the likely ones and ask for more like a picture; the
# printed answers are compared. The pictures are copied into the run's own folder.
INDEX = """
import sys, os
from pathlib import Path
from pamir.index import Index
from pamir.jobs.indexing import index_folders
model, pics = sys.argv[2], Path(sys.argv[1]).parent / "pictures"
pics.mkdir(exist_ok=True)
images = Path(os.environ["PAMIR_COREL5K"]) / "images"
for f in sorted(images.rglob("*.jpeg"))[:300]:
    if not (pics / f.name).exists():
        (pics / f.name).write_bytes(f.read_bytes())
index_folders(model, [pics], index=Path(sys.argv[1]).with_suffix(".index"))
with Index.open(Path(sys.argv[1]).with_suffix(".index")) as ix:
    for q in ("tiger grass", "sky -water", "p:0.5 sun", "people sort:oldest"):
        hits = ix.search(q, 20)
        print(q, [(Path(h.path).name, round(h.score, 5), h.probability) for h in hits])
        print(q, "likely", ix.count_likely(ix.parse_query(q.split(" sort:")[0])))
    z = ix.vector(ix.search("tiger", 1)[0].id)
    print("similar", [(Path(h.path).name, round(h.score, 5)) for h in ix.similar(z, 10)])
"""


def seconds(code: str, src: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=src)
    return time.perf_counter() - t0


def import_times(runs: int) -> dict:
    bare, pamir = [], []
    for _ in range(runs):  # interleaved: both see the same load
        bare.append(seconds("pass", ROOT))
        pamir.append(seconds("import pamir", ROOT))
    return {"runs": runs, "python_pass_median": round(statistics.median(bare), 3),
            "import_pamir_median": round(statistics.median(pamir), 3),
            "import_pamir_max": round(max(pamir), 3)}


def output(src: Path, args: list[str], work: Path, name: str) -> tuple[str, str]:
    """(digest of the .npy the script saved or of stdout, stdout) of one run from src."""
    # the archived tree has no ../shared beside it: Corel 5k is named
    env = {**os.environ, "PYTHONPATH": str(src),
           "PAMIR_COREL5K": str(corel5k_folder())}
    out = work / f"{name}.npy"
    # a script that names sys.argv[1] is given a file of its own to write there (and any
    # further arguments, the model for the index job)
    file_arg = args[0] == "-c" and "sys.argv[1]" in args[1]
    done = subprocess.run([sys.executable, *args[:2], *([str(out)] if file_arg else []),
                           *args[2:]], check=True, env=env,
                          capture_output=True, text=True, cwd=work)
    data = out.read_bytes() if out.exists() else done.stdout.encode()
    return hashlib.sha256(data).hexdigest()[:16], done.stdout.strip()


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--before", default=BRANCH_POINT)
    ap.add_argument("--model", default="/work/models/corel5k-train")
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args(argv)
    run = Run("bench_library.py", argv)
    r = {"info": run.info(), "import": import_times(args.runs), "same": {}}
    with tempfile.TemporaryDirectory(prefix="pamir-bench-library-") as tmp:
        work = Path(tmp)
        before = work / "before-src"
        r["before"] = archive(args.before, before)
        evaluate = ["-c", "import sys; sys.argv[0] = 'pamir'; from pamir.cli import main; "
                          "main()", "evaluate", args.model, "--on", "corel5k:test", "--json"]
        jobs = {"evaluate": evaluate, "fit": ["-c", FIT], "learn": ["-c", LEARN],
                "index": ["-c", INDEX, args.model]}
        for job, cmd in jobs.items():
            if job in ("evaluate", "index") and not Path(args.model, "model.json").is_file():
                continue
            # evaluate prints its figures (no file): the digest is of that output
            a = output(before, cmd, work, f"{job}-before")
            b = output(ROOT, cmd, work, f"{job}-after")
            r["same"][job] = {"before": a[0], "after": b[0], "equal": a[0] == b[0],
                              "output": b[1][-300:]}
            print(job, "equal" if a[0] == b[0] else "DIFFERENT", flush=True)
    r["info"]["load_average"]["end"] = run.info()["load_average"]["end"]
    (RESULTS / "library.json").write_text(json.dumps(r, indent=1) + "\n")
    m = r["import"]
    lines = report_head("pamir as a library (issue 27)", r["info"]) + [
        "",
        f"`python -c \"import pamir\"`: median {m['import_pamir_median']:.3f} s (max "
        f"{m['import_pamir_max']:.3f} s) against {m['python_pass_median']:.3f} s for "
        f"`python -c pass`, {m['runs']} runs each, interleaved (target: <= 0.3 s). The "
        "package imports nothing but `importlib` until a name is used.",
        "",
        f"Bit for bit, before (`{r['before'][:10]}`) and after, each in its own process on "
        "the shared feature cache:",
        "",
        "| computation | before | after | equal |", "|---|---|---|---|"]
    for job, x in r["same"].items():
        lines.append(f"| {job} | `{x['before']}` | `{x['after']}` | {x['equal']} |")
    lines += ["", "evaluate: `pamir evaluate MODEL --on corel5k:test --json` (its output); "
              "fit: `fit_system` on the cached Lite0 features, 300,000 updates, no grid (W); "
              "learn: `system.learn` with two new words, one started from neighbours, then "
              "a kept feedback round (W, the model's and the system's idf); index: the "
              "first 300 Corel pictures indexed with MODEL, then four searches (a phrase, "
              "a negation, a probability floor, a sort by date) with their likely counts "
              "and a more-like-this (the printed hits and scores)."]
    (RESULTS / "library.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
