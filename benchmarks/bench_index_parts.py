"""The Index as a composition (issue 53): its shape and what a search costs, before and after.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_index_parts.py --before 45c8fc3 \
        --index IX --big BIG [--runs 5] [--repeat 20]

BEFORE is a `git archive` of a commit, AFTER this checkout; IX and BIG are the Corel 5k index
and the 1,000,000-picture one of bench_search_latency.py (`pamir fit corel5k -r cnn --no-grid`,
`pamir index` of its 5,000 pictures; `--big` built from it by common.latency.build_big).

1. shape, read from each tree's source with `ast`: the classes of pamir/index with bases (the
   Index's, the score matrix's), and per module the calls that run SQL (`execute`,
   `executemany`, `executescript`) and the mentions of `_conn`, the catalogue's connection.
2. cli: what a person waits, bench_search_latency's queries (`pamir search Q -k 20`), each
   the whole process, old and new alternating in each of --runs rounds (common.latency.side_by_side).
3. in_process: the same queries on an open index, each tree in a process of its own that
   opens it once, the two asked in turn query by query (the first alternating each of --runs
   rounds): a query's median time over --repeat searches after a warm-up, and what it does,
   counted by cProfile (not timed): Python calls and SQLite statements a search.

Writes benchmarks/results/index_parts.json and .md.
"""

from __future__ import annotations

import ast
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from common.harness import RESULTS, Run, archive, parser, report_head, write_json  # noqa: E402
from common.latency import QUERIES, env_for, side_by_side  # noqa: E402

STEM = "index_parts"
SQL_CALLS = ("execute", "executemany", "executescript")
#: One tree's searches on one index, in a process of its own that stays: for each query read
#: from stdin, the median time of `repeat` searches after one, then what one search does
#: (cProfile's counts: Python calls, SQLite statements), as a JSON line.
SEARCHER = """
import cProfile, json, pstats, statistics, sys, time
from pamir.index import Index
SQL = ("<method 'execute' of 'sqlite3.Connection' objects>",
       "<method 'executemany' of 'sqlite3.Connection' objects>")
repeat = int(sys.argv[2])
with Index.open(sys.argv[1]) as ix:
    for line in sys.stdin:
        q = json.loads(line)
        ix.search(q, k=20)
        took = []
        for _ in range(repeat):
            t = time.perf_counter()
            ix.search(q, k=20)
            took.append(time.perf_counter() - t)
        profile = cProfile.Profile()
        profile.runcall(ix.search, q, k=20)
        stats = pstats.Stats(profile).stats
        print(json.dumps({"ms": statistics.median(took) * 1000,
                          "calls": sum(v[1] for v in stats.values()),
                          "sql": sum(v[1] for k, v in stats.items() if k[2] in SQL)}),
              flush=True)
"""


def shape(tree: Path) -> dict:
    """{"bases": {class: [bases]}, "sql": {module: calls}, "conn": [modules]} of tree's
    pamir/index (exception classes left out)."""
    bases, sql, conn = {}, {}, []
    for path in sorted((tree / "pamir" / "index").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree_ = ast.parse(text)
        for node in ast.walk(tree_):
            if isinstance(node, ast.ClassDef) and node.bases:
                names = [ast.unparse(b) for b in node.bases]
                if not any(n.endswith(("Error", "Exception")) for n in names):
                    bases[node.name] = names
        calls = sum(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr in SQL_CALLS for n in ast.walk(tree_))
        if calls:
            sql[path.name] = calls
        if "_conn" in text and not path.name.startswith(("catalog", "layout")):
            conn.append(path.name)
    return {"bases": bases, "sql": sql, "conn": conn}


def in_process(trees: dict[str, Path], index: Path, runs: int, repeat: int) -> dict:
    """{query: {tree: {"ms": [a round each], "calls", "sql"}}}: each tree's searcher (SEARCHER)
    opened once, and asked in turn, query by query, the first tree alternating each round,
    so that the shared machine's load falls on both alike."""
    searchers = {t: subprocess.Popen([sys.executable, "-c", SEARCHER, str(index), str(repeat)],
                                     env=env_for(tree), cwd=tree, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
                 for t, tree in trees.items()}
    out: dict = {q: {t: {"ms": []} for t in trees} for q in QUERIES.values()}
    try:
        for k in range(runs):
            for q in QUERIES.values():
                for t in (list(trees) if k % 2 == 0 else list(trees)[::-1]):
                    searchers[t].stdin.write(json.dumps(q) + "\n")
                    searchers[t].stdin.flush()
                    d = json.loads(searchers[t].stdout.readline())
                    out[q][t]["ms"].append(round(d["ms"], 3))
                    out[q][t].update(calls=d["calls"], sql=d["sql"])
    finally:
        for p in searchers.values():
            p.stdin.close()
            p.wait()
    return out


def report(r: dict) -> str:
    lines = report_head("The Index as a composition: its shape and a search's cost (issue 53)",
                        r["run"])
    lines += [f"Old: `{r['before']}` ({r['before_commit'][:7]}); new: this branch "
              f"(`{r['after_commit'][:7]}`).\n", "## Shape (pamir/index, read with `ast`)\n",
              "| | old | new |", "|---|---|---|"]
    for name in ("Index", "ScoreMatrix"):
        lines.append(f"| bases of `{name}` | "
                     + " | ".join(", ".join(r["shape"][t]["bases"].get(name, [])) or "none"
                                  for t in ("old", "new")) + " |")
    others = lambda t: sorted(set(r["shape"][t]["bases"]) - {"Index", "ScoreMatrix"})  # noqa: E731
    lines.append("| other classes with bases | " + " | ".join(
        "; ".join(f"{c}({', '.join(r['shape'][t]['bases'][c])})" for c in others(t)) or "none"
        for t in ("old", "new")) + " |")
    for t in ("old", "new"):
        sql = r["shape"][t]["sql"]
        lines.append(f"| SQL calls ({t}) | " + ", ".join(f"{m} {n}" for m, n in sql.items())
                     + f" (total {sum(sql.values())}) | |")
    lines.append("| modules that name `_conn` outside the catalogue | "
                 + " | ".join(", ".join(r["shape"][t]["conn"]) or "none"
                              for t in ("old", "new")) + " |")
    for name, block in r["cli"].items():
        lines += [f"\n## `pamir search Q -k 20`, the whole process: {name}\n",
                  f"`python -c \"import numpy\"` in the same rounds: {block['numpy_s']} s.\n",
                  "| query | old (s): median (fastest - slowest) | new (s) |", "|---|---|---|"]
        for c, d in block["commands"].items():
            lines.append(f"| `{c}` | {_cell(d['old'])} | {_cell(d['new'])} |")
    for name, block in r["in_process"].items():
        lines += [f"\n## A search in an open index: {name}\n",
                  f"Median of {r['repeat']} searches after one, a round; the median (fastest - "
                  f"slowest) of {r['runs']} rounds. Calls and statements: one search, counted.\n",
                  "| query | old (ms) | new (ms) | Python calls old / new | SQLite statements "
                  "old / new |", "|---|---|---|---|---|"]
        for q, d in block.items():
            o, n = d["old"], d["new"]
            lines.append(f"| `{q}` | {_ms(o['ms'])} | {_ms(n['ms'])} | {o['calls']} / "
                         f"{n['calls']} | {o['sql']} / {n['sql']} |")
    return "\n".join(lines) + "\n"


def _cell(d: dict) -> str:
    return f"{d['median_s']:.2f} ({min(d['runs_s']):.2f} - {max(d['runs_s']):.2f})"


def _ms(v: list[float]) -> str:
    return f"{statistics.median(v):.2f} ({min(v):.2f} - {max(v):.2f})"


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--before", required=True, help="the commit to compare with")
    ap.add_argument("--index", type=Path, required=True, help="the Corel 5k index")
    ap.add_argument("--big", type=Path, required=True, help="the 1,000,000-picture index")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args(argv)
    run = Run("bench_index_parts.py", argv)
    work = Path(tempfile.mkdtemp(prefix="pamir-index-parts-"))
    try:
        trees = {"old": work / "old", "new": ROOT}
        before = archive(args.before, trees["old"])
        after = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.strip()
        r = {"before": args.before, "before_commit": before, "after_commit": after,
             "runs": args.runs, "repeat": args.repeat,
             "shape": {t: shape(tree) for t, tree in trees.items()}, "cli": {},
             "in_process": {}}
        extra = {"PAMIR_EMBEDDINGS": "1"}
        for name, ix in (("Corel 5k index (5,000 pictures)", args.index),
                         ("1,000,000 pictures (synthetic)", args.big)):
            commands = {f"pamir search \"{q}\" -k 20": ["search", q, "-k", "20", "--index",
                                                        str(ix)] for q in QUERIES.values()}
            timed = side_by_side(commands, trees, args.runs, extra)
            numpy_s = timed.pop("python -c \"import numpy\"")["median_s"]
            r["cli"][name] = {"numpy_s": numpy_s, "commands": timed}
            r["in_process"][name] = in_process(trees, ix, args.runs, args.repeat)
            print(name, json.dumps(r["in_process"][name]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r["run"] = run.info()
    write_json(RESULTS / f"{STEM}.json", r)
    (RESULTS / f"{STEM}.md").write_text(report(r))
    print(report(r))


if __name__ == "__main__":
    main()
