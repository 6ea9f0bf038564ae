"""The same trained system before and after a refactoring of training: `fit_system` run by
two trees of pamir (BEFORE: a `git archive` of a commit; AFTER: this working tree) on one
slice of Corel 5k, in several settings that reach every phase (features, the race, the
guarded choice, the small-folder rule, the ensemble, the neighbours, the retraining, the
prior, the calibration); their saved systems (every array, model.json without timings) and
their log lines (seconds and progress counts blanked, sorted: concurrent selections
interleave them) compared.

    flock /tmp/pamir-heavy.lock python scripts/same_fit.py --before 91bf3af \
        [--after COMMIT] [--pictures 300] [--work /tmp/same-fit] [--only race guard]

Prints "same" or the first difference for each setting, and exits 1 if any differs.
(`scripts/same_behaviour.py` compares `pamir index`, `search` and `annotate` the same way.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from same_behaviour import ROOT, archive, slice_of_corel  # noqa: E402

#: fit_system's keyword arguments per setting; "small_validation" sets
#: config.SMALL_VALIDATION (0 by default: the guard is off), so that the guarded choice runs.
SETTINGS = {
    # two candidates raced, the ensemble, the neighbours (cnn), the retraining, the prior
    "race": {"representation": ["visterms", "cnn"], "ensemble": 2, "retrain": True},
    # the guarded choice across candidates (a small validation split)
    "guard": {"representation": ["visterms", "cnn"], "small_validation": 10_000},
    # no race: two seeds per point, one candidate, no neighbours
    "seeds": {"representation": "visterms", "seeds": [0, 1], "neighbours": False},
    # the defaults of `pamir fit` on a small folder: the richest default representation alone
    "small": {},
}

#: What runs in each tree (its own pamir on PYTHONPATH): one setting, its system saved, a
#: digest of it printed as JSON.
WORKER = r"""
import hashlib, json, re, sys
import numpy as np
from pamir import config
from pamir import load_collection  # (pamir.data's before the folders moved to pamir.facts)
from pamir.features import FeatureSettings
import pamir.system
fit_system = getattr(pamir.system, "fit_system", None)
if fit_system is None:
    from pamir.training import fit_system
table, out, kw = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if "small_validation" in kw:
    config.SMALL_VALIDATION = kw.pop("small_validation")
lines = []
system = fit_system(load_collection(table), "pamir",
                    FeatureSettings(n_visterms=200, kmeans_iterations=10),
                    {"n_updates": 20_000, "eval_every": 2_000}, progress=False,
                    log=lines.append, **kw)
system.save(out)
arrays = np.load(f"{out}/arrays.npz")
digest = {k: hashlib.sha256(np.ascontiguousarray(arrays[k]).tobytes()).hexdigest()[:16]
          for k in sorted(arrays.files)}
head = json.load(open(f"{out}/model.json"))
def timeless(x, key=None):
    # (what the clock measured: timings, seconds, their shares, a history row's 5th column)
    if isinstance(x, dict):
        return {k: timeless(v, k) for k, v in x.items()
                if k not in ("timing", "share") and "second" not in k}
    if isinstance(x, list):
        return [r[:4] if key == "history_" and isinstance(r, list) else timeless(r) for r in x]
    return x
seconds = re.compile(r"\d+(\.\d+)? s\b")
progress = re.compile(r" \[fits \d+/\d+(, ETA # s)?\]")
# (the candidates' selections run at once: their lines interleave as the threads go)
print(json.dumps({"arrays": digest, "model.json": timeless(head),
                  "log": sorted(progress.sub("", seconds.sub("# s", line)) for line in lines)}))
"""


def fit(tree: Path, env: dict, table: Path, out: Path, kw: dict) -> dict:
    r = subprocess.run([sys.executable, "-c", WORKER, str(table), str(out), json.dumps(kw)],
                       cwd=tree, env={**env, "PYTHONPATH": str(tree)}, capture_output=True,
                       text=True)
    if r.returncode:
        raise SystemExit(f"{tree}: fit_system({kw}) failed:\n{r.stderr[-3000:]}")
    out.with_suffix(".json").write_text(r.stdout.strip().splitlines()[-1])
    return json.loads(out.with_suffix(".json").read_text())


def first_difference(a, b, where="") -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{where}/{k}: only in {'after' if k in b else 'before'}"
            d = first_difference(a[k], b[k], f"{where}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{where}[{i}]")
            if d:
                return d
        return None if len(a) == len(b) else f"{where}: {len(a)} items before, {len(b)} after"
    return None if a == b else f"{where}: before {str(a)[:200]} after {str(b)[:200]}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the commit to compare with")
    ap.add_argument("--after", default=None,
                    help="a commit to compare with instead of the working tree (the same "
                         "commit twice checks that fitting is deterministic)")
    ap.add_argument("--pictures", type=int, default=300)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--only", nargs="*", default=list(SETTINGS), choices=list(SETTINGS))
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="pamir-same-fit-"))
    before = work / f"before-{args.before}"
    archive(args.before, before)
    after = ROOT
    if args.after:
        after = work / f"after-{args.after}"
        archive(args.after, after)
    env = {**os.environ, "PAMIR_CACHE": str(work / "cache"), "PAMIR_EMBEDDINGS": "0",
           "XDG_DATA_HOME": str(work / "xdg")}
    _, table = slice_of_corel(args.pictures, work)
    differs = False
    for name in args.only:
        got = {tree_name: fit(tree, env, table, work / f"{name}-{tree_name}", SETTINGS[name])
               for tree_name, tree in (("before", before), ("after", after))}
        d = first_difference(got["before"], got["after"])
        differs |= d is not None
        digest = hashlib.sha256(json.dumps(got["after"]["arrays"]).encode()).hexdigest()[:12]
        print(f"{name}: {'same' if d is None else 'DIFFERS ' + d} "
              f"({len(got['after']['arrays'])} arrays, digest {digest}, "
              f"{len(got['after']['log'])} log lines)", flush=True)
    print(f"outputs in {work}")
    raise SystemExit(1 if differs else 0)


if __name__ == "__main__":
    main()
