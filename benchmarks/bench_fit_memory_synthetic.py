"""How `pamir fit`'s peak memory grows towards 100,000 captioned pictures (issue 35), on
synthetic features: no pictures to decode, so sizes Corel 5k does not have can be measured.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_fit_memory_synthetic.py \
        [--train 1000 2000 4500 10000 20000] [--updates 40000]

Each size runs in a fresh process (`--one N`): N training pictures (plus the validation
split pamir.protocol makes: a tenth below 2,500 development pictures, else 500), each with
the README winner's representation, cnn+cnn-lite1+cnn-lite2+visterms, built as
`collection_inputs` builds it: the four parts' matrices (three dense float32 views of 1,280,
6,400 and 7,040 numbers, standard normal, and a visterm bag of VISTERM_WORDS distinct
visterms of 10,000, unit length) combined by `Concatenation.combine`, then the parts let go.
Captions: 1 to 5 words of a 260-word vocabulary drawn by a Zipf law, like Corel 5k's. The fit
is `fit_system(inputs=...)` with the README's `--ensemble 3 --retrain` (the features given,
so the one candidate: the memory of the winner's path; the race of six candidates holds
every candidate's prepared pictures besides). Its budget is fixed at --updates (what a fit
holds does not depend on how long it runs). Peak resident memory: the process's ru_maxrss
(`/usr/bin/time -v`'s maximum resident set size); also the bytes of the combined CSR and of
the prepared training pictures, computed, and where the fit was at its peak (`peak_at`: the
pamir functions of the main thread when the resident memory, sampled every 0.05 s, was
highest; a stopped fit records it too).

Writes results/fit_memory_synthetic.json and .md.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from common.harness import HEAVY, load_average, machine, save_report

SEED = 0
#: The dense views' widths: Lite0's pooled vector, Lite1's and Lite2's with their 2x2 regions
#: (1 + 4 times the pooled width), as the README winner holds them.
DENSE_WIDTHS = (1280, 6400, 7040)
N_VISTERMS, VISTERM_WORDS = 10_000, 300
VOCABULARY, MOST_WORDS = 260, 5


def synthetic_inputs(n: int, rng, csr: bool = False):
    """(F, ok, representation) as collection_inputs gives fit_system the widest candidate
    (compact: its parts side by side, ColumnBlocks; csr: their combined CSR, as before issue
    35's fix), and what F and the parts hold (bytes)."""
    import scipy.sparse as sp  # noqa: PLC0415

    from pamir.features.registry import Concatenation  # noqa: PLC0415

    parts = [rng.standard_normal((n, d), dtype=np.float32) for d in DENSE_WIDTHS]
    cols = np.concatenate([np.sort(rng.choice(N_VISTERMS, VISTERM_WORDS, replace=False))
                           for _ in range(n)])
    bags = sp.csr_matrix((np.full(n * VISTERM_WORDS, VISTERM_WORDS ** -0.5, np.float32),
                          cols, np.arange(0, n * VISTERM_WORDS + 1, VISTERM_WORDS)),
                         shape=(n, N_VISTERMS))
    parts.append(bags)
    views = [_View(d, name) for d, name in zip(DENSE_WIDTHS, ("cnn", "cnn-lite1",
                                                               "cnn-lite2"))]
    views.append(_View(N_VISTERMS, "visterms", "visual_pipeline", "bags"))
    rep = Concatenation(views, [1.0] * len(views))
    parts_bytes = sum(p.nbytes for p in parts[:-1]) + bags.data.nbytes + bags.indices.nbytes
    csr_bytes = 8 * (sum(np.count_nonzero(M) for M in parts[:-1]) + bags.nnz) + 8 * (n + 1)
    F = rep.combine(parts) if csr else rep.stack(parts)
    del parts, bags
    return F, np.ones(n, bool), rep, {"parts_bytes": int(parts_bytes),
                                      "F_bytes": int(csr_bytes if csr else parts_bytes)}


class _View:
    """A stand-in for a representation part: what the fit reads of it (its kind, width and
    settings, for the neighbours' views), never its pictures."""

    def __init__(self, dim, name, kind="cnn", output="dense"):
        from types import SimpleNamespace  # noqa: PLC0415

        from pamir.features.registry import CNN_PRESETS  # noqa: PLC0415

        self.dim, self.kind, self.output = dim, kind, output
        keys = {k: None for preset in CNN_PRESETS.values() for k in preset}
        self.settings = SimpleNamespace(**{**keys, "regions": 0, **CNN_PRESETS.get(name, {})})

    def to_dict(self) -> dict:  # what model.json's info records of it
        return {"kind": self.kind, "settings": vars(self.settings)}


def synthetic_collection(n_dev: int, rng):
    from pamir.data import Collection  # noqa: PLC0415

    ranks = np.arange(1, VOCABULARY + 1)
    p = 1.0 / ranks / np.sum(1.0 / ranks)
    words = [f"w{k:03d}" for k in range(VOCABULARY)]
    captions = [[words[k] for k in rng.choice(VOCABULARY, rng.integers(1, MOST_WORDS + 1),
                                              replace=False, p=p)] for _ in range(n_dev)]
    ids = [f"s{i:06d}" for i in range(n_dev)]
    return Collection("synthetic", Path("/nonexistent"), ids, [Path(f"/nonexistent/{i}.jpg")
                                                               for i in ids],
                      captions, ["train"] * n_dev, [])


def guard(most_mb: int) -> dict:
    """End this process (exit status 3) once its resident memory passes most_mb: a shared
    machine is not pushed into swapping or the OOM killer. Returns the peak it watches,
    filled while the fit runs: its MB and where the fit's main thread was at it (`where`)."""
    import os  # noqa: PLC0415
    import threading  # noqa: PLC0415

    main, peak = threading.get_ident(), {"mb": 0, "where": ""}

    def watch():
        while True:
            with open("/proc/self/status") as f:
                rss = int(f.read().split("VmRSS:")[1].split()[0]) // 1024
            if rss > peak["mb"]:
                peak.update(mb=rss, where=where(sys._current_frames().get(main)))
            if rss > most_mb:
                print(json.dumps({"over_mb": most_mb, "at": peak}), flush=True)
                os._exit(3)
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    return peak


def where(frame) -> str:
    """The pamir functions a thread is in, outermost first (the phase, then what it calls)."""
    names = []
    while frame is not None:
        if "/pamir/" in frame.f_code.co_filename:
            names.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return " > ".join(reversed(names))


def one(n_train: int, updates: int, csr: bool = False, most_mb: int = 16_000) -> dict:
    """One fit in this process: its peak memory and time."""
    from pamir import config  # noqa: PLC0415
    from pamir.training import fit_system  # noqa: PLC0415

    peak = guard(most_mb)
    rng = np.random.default_rng(SEED)
    for n_dev in range(n_train, 10 * n_train):  # the development size of n_train training
        valid = config.VALID_SIZE if n_dev > 5 * config.VALID_SIZE else n_dev // 10
        if n_dev - valid >= n_train:
            break
    collection = synthetic_collection(n_dev, rng)
    started = time.perf_counter()
    F, ok, rep, sizes = synthetic_inputs(n_dev, rng, csr)
    built = time.perf_counter() - started
    params = {"n_updates": updates, "eval_every": max(1, updates // 40)}
    system = fit_system(collection, "pamir", model_params=params, inputs=(F, ok, rep),
                        ensemble=3, retrain=True, log=None)
    del F
    info = system.info
    width = sum(DENSE_WIDTHS)
    return {"train": info["pictures"]["train"], "valid": info["pictures"]["valid"],
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "seconds": round(time.perf_counter() - started, 1), "build_seconds": round(built, 1),
            "timing": info["timing"], "peak_at": peak["where"], **sizes, "F": "csr" if csr else "column blocks",
            "train_block_bytes": int(info["pictures"]["train"] * width * 4)}


def report(r: dict) -> str:
    lines = ["# Peak memory of `pamir fit` towards 100,000 pictures, synthetic features "
             "(issue 35)\n",
             f"Command: `{r['command']}`  ",
             f"Machine: {r['machine']}; {r['date']}; load average {r['load_average']}.  ",
             f"Commit: `{r['commit'][:10]}`. The README winner's representation "
             f"({' + '.join(map(str, DENSE_WIDTHS))} dense numbers and a bag of "
             f"{VISTERM_WORDS} of {N_VISTERMS:,} visterms a picture), `--ensemble 3 "
             f"--retrain`, {r['updates']:,} updates a fit; peak: the fit process's "
             "ru_maxrss.\n",
             f"F held as: {r.get('F', 'csr')}.\n",
             "| training pictures | peak RSS | MB per training picture | F as held | "
             "the parts | prepared training block | fit | the peak in |",
             "|---:|---:|---:|---:|---:|---:|---:|:---|"]
    for x in r["sizes"]:
        if "over_mb" in x:
            lines.append(f"| {x['train']:,} | over {x['over_mb']:,} MB: stopped | | | | | | "
                         f"{_phase(x.get('at', {}).get('where', ''))} |")
            continue
        lines.append(f"| {x['train']:,} | {x['peak_rss_mb']:,} MB | "
                     f"{x['peak_rss_mb'] / x['train']:.2f} | {x['F_bytes'] / 2**20:,.0f} MB | "
                     f"{x['parts_bytes'] / 2**20:,.0f} MB | "
                     f"{x['train_block_bytes'] / 2**20:,.0f} MB | {x['seconds']:.0f} s | "
                     f"{_phase(x.get('peak_at', ''))} |")
    if r.get("note"):  # what the file's own numbers cannot say (written by hand, kept)
        lines += ["", r["note"]]
    return "\n".join(lines) + "\n"


def _phase(where: str) -> str:
    """The fit's phase and the two innermost functions of a `where` record, without the
    line numbers: what was running when the peak was sampled."""
    names = [w.split(":")[0] for w in where.split(" > ") if w]
    if not names:
        return ""
    inner = [n for n in names[2:] if n not in names[:2]][-2:]
    return " > ".join(names[1:2] + inner)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, nargs="+", default=[1000, 2000, 4500, 10000, 20000])
    ap.add_argument("--updates", type=int, default=40_000)
    ap.add_argument("--csr", action="store_true",
                    help="F as the combined CSR, as before the fix (column blocks: after)")
    ap.add_argument("--most-mb", type=int, default=16_000,
                    help="stop a fit whose resident memory passes this (MB)")
    ap.add_argument("--stem", default="fit_memory_synthetic")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.updates, args.csr, args.most_mb)))
        return
    root = Path(__file__).resolve().parent.parent
    r = {"command": f"{HEAVY} python benchmarks/bench_fit_memory_synthetic.py "
                    + " ".join(argv or sys.argv[1:]),
         "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
         "load_average": load_average(), "updates": args.updates, "sizes": [],
         "commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                  text=True).stdout.strip()}
    for n in args.train:
        out = subprocess.run([sys.executable, __file__, "--one", str(n), "--updates",
                              str(args.updates), "--most-mb", str(args.most_mb)]
                             + (["--csr"] if args.csr else []),
                             capture_output=True, text=True, cwd=root)
        if out.returncode == 3:
            r["sizes"].append({"train": n, "over_mb": args.most_mb,
                               **json.loads(out.stdout.strip().splitlines()[-1])})
            print(n, "over", args.most_mb, "MB", flush=True)
            break
        if out.returncode:
            raise SystemExit(f"{n} pictures: the fit failed\n{out.stderr[-3000:]}")
        r["sizes"].append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(n, r["sizes"][-1]["peak_rss_mb"], "MB", flush=True)
    r["F"] = "csr" if args.csr else "column blocks"
    save_report(args.stem, r, report)


if __name__ == "__main__":
    main()
