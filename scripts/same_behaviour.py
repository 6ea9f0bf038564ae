"""The same results before and after a refactoring: `pamir index`, `search` and `annotate` run
by two trees of pamir (BEFORE: a `git archive` of a commit; AFTER: this working tree) over one
model fitted on a slice of Corel 5k, their outputs compared line by line.

    flock /tmp/pamir-heavy.lock python scripts/same_behaviour.py --before 91bf3af \
        [--pictures 200] [--work /tmp/same]

The model is fitted once, by AFTER's code (`pamir fit` on the first --pictures captioned
Corel pictures, the CNN view, so that annotation has calibrated probabilities and ImageNet's
words beside them); each tree then indexes the same pictures into an index of its own,
searches it and annotates 20 pictures, with --json. Prints the first difference of each
command, or "same", and exits 1 if any differs.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COREL = Path(os.environ.get("PAMIR_COREL5K", ROOT.parent / "shared/data/corel5k")).resolve()
#: What the clock measured in `pamir index --json` (the text pass's seconds): not compared.
SECONDS = re.compile(r'"seconds": [0-9.]+')
QUERIES = ("tiger grass", "sky", "water boats", "people", "sky p:0.5", "flowers -red",
           "zebra p:0.5", "sky sort:date")


def archive(commit: str, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    tar = subprocess.run(["git", "archive", commit, "pamir"], cwd=ROOT, check=True,
                         capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)


def pamir(tree: Path, env: dict, *args) -> str:
    code = "import sys; from pamir.cli import main; sys.argv = ['pamir', *sys.argv[1:]]; main()"
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=tree,
                       env={**env, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
    if args[0] == "fit" and r.returncode:
        raise SystemExit(f"{tree}: pamir {' '.join(map(str, args))} failed:\n{r.stderr}")
    # what a person sees: the exit status, the output, and the messages (a refused query's)
    return f"exit {r.returncode}\n{r.stdout}" + (r.stderr if r.returncode else "")


def slice_of_corel(n: int, work: Path) -> tuple[Path, Path]:
    """A captions table of the first n train/valid pictures and a folder of copies of them."""
    folder, table = work / "pictures", work / "captions.tsv"
    folder.mkdir(parents=True, exist_ok=True)
    with open(COREL / "annotations.tsv", newline="") as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t") if r["split"] != "test"][:n]
    lines = ["path\tkeywords"]
    for r in rows:
        link = folder / Path(r["path"]).name
        if not link.exists():  # a copy: a table's pictures must lie under its folder
            shutil.copyfile(COREL / r["path"], link)
        lines.append(f"{folder.name}/{link.name}\t{r['keywords']}")
    table.write_text("\n".join(lines) + "\n")
    return folder, table


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the commit to compare with")
    ap.add_argument("--pictures", type=int, default=200)
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="pamir-same-"))
    before = work / "before"
    archive(args.before, before)
    env = {**os.environ, "PAMIR_CACHE": str(work / "cache"), "PAMIR_EMBEDDINGS": "0",
           "XDG_DATA_HOME": str(work / "xdg")}
    folder, table = slice_of_corel(args.pictures, work)
    model = work / "model"
    if not (model / "model.json").is_file():
        pamir(ROOT, env, "fit", table, "-o", model, "-r", "cnn", "--no-grid", "-q")
    pictures = sorted(folder.iterdir())[:20]
    differs = False
    for name, tree in (("before", before), ("after", ROOT)):
        ix = work / f"index-{name}"
        out = {"index": pamir(tree, env, "index", model, folder, "--index", ix, "--captions",
                              table, "--json")}
        out["search"] = "".join(pamir(tree, env, "search", q, "--index", ix, "-k", "10",
                                      "--json") for q in QUERIES)
        out["annotate"] = pamir(tree, env, "annotate", model, *pictures, "--json")
        (work / f"{name}.json").write_text(json.dumps(out, indent=1))
    a, b = (json.loads((work / f"{n}.json").read_text()) for n in ("before", "after"))
    for command in a:
        if command == "index":  # the index folder's own path differs, and the clock
            a[command] = SECONDS.sub('"seconds": #', a[command].replace("index-before", "index-X"))
            b[command] = SECONDS.sub('"seconds": #', b[command].replace("index-after", "index-X"))
        if command == "search":
            a[command] = a[command].replace("index-before", "index-X")
            b[command] = b[command].replace("index-after", "index-X")
        same = a[command] == b[command]
        differs |= not same
        print(f"{command}: {'same' if same else 'DIFFERS'} "
              f"({len(a[command].splitlines())} lines)")
        if not same:
            for x, y in zip(a[command].splitlines(), b[command].splitlines()):
                if x != y:
                    print(f"  before: {x[:300]}\n  after:  {y[:300]}")
                    break
    print(f"outputs in {work}")
    raise SystemExit(1 if differs else 0)


if __name__ == "__main__":
    main()
