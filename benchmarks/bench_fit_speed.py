"""How long a person waits for `pamir fit`: today's path and the new one side by side, in one run.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_fit_speed.py [--before COMMIT]

Each path runs from its own pristine source tree (`git archive` of a commit: BEFORE, the
branch point by default, and AFTER, this checkout's HEAD when its turn comes), as a fresh
`python` process with an EMPTY feature cache (PAMIR_CACHE: a new folder) and numba compiling
from nothing, exactly what a fresh clone does. What is timed is the whole command:

1. main_job: the README's main command, `pamir fit corel5k -o M --ensemble 3 --retrain &&
   pamir evaluate M --on corel5k:test --json`, BEFORE then AFTER; the fit's peak resident
   memory (peak_rss_mb, ru_maxrss; issue 35); test AvgP / BEP / P10,
   the chosen representation, its validation AvgP, and the model's own record of where the
   time went (features per candidate, each grid point).
2. warm: AFTER's plain `pamir fit corel5k` on the feature cache its main job filled.
3. long_captions: 1,300 Corel pictures whose captions have 10 or more words (a picture's
   keywords, then those of the next pictures of its CD, in id order, until 10 distinct words:
   13 CDs drawn with a seeded generator), AFTER's `pamir fit TABLE` from an empty cache, with
   its validation share; BEFORE too with --long-before (the issue measured a comparable set at
   54 minutes).
4. cap: on Corel 5k (cnn, the warm cache), how well the validation AvgP of a capped query
   sample ranks the grid's models against all the validation queries (`--cap-study`, run
   in AFTER's tree by step 2's cache).
5. warm_sxs (`--parts warm_sxs --warm-cache DIR`): BEFORE then AFTER, `pamir fit corel5k`
   on a feature cache that is already full (DIR), then `pamir evaluate` on test: what
   racing the grid saves, side by side, without the hour of features (run
   `--before 51034fd`, the main this round began from, for the previous round's path).

6. refit (`--parts refit`): AFTER only. A folder of 300 Corel pictures with keywords in their
   files and 100 without (bench_small_folders.build), `pamir fit FOLDER -o M` from an empty
   cache; then 20 more Corel pictures with keywords are added and `pamir fit FOLDER -o M`
   runs again (the refit: its representation and parameters kept, PAMIR warm-started), and
   `pamir fit FOLDER -o M2 --reselect` (the full selection on the same warm cache), each
   timed with its peak resident memory, choice and validation AvgP.

Writes benchmarks/results/fit_speed.json and fit_speed.md; parts not run this time are kept
from the file as they were (with the run they came from).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common.folders import (SMALL_FOLDER_SEED, WAYS, build_small_folder,
                            corel_captions, exiftool_args)
from common.harness import (HEAVY, RESULTS, archive, corel5k_folder, load_average,
                            machine, parser, report_head, save_report)
from common.latency import pamir_logged

ROOT = Path(__file__).resolve().parent.parent
BRANCH_POINT = "7418ef7"  # main when issue 24 began: today's path
COREL = corel5k_folder()
LONG_PICTURES, LONG_MIN_WORDS, LONG_CDS = 1300, 10, 13




def model_record(model: Path) -> dict:
    """What the fitted system says about itself: choice, validation, where the time went."""
    info = json.loads((model / "model.json").read_text())["info"]
    keep = ("representation", "params", "valid_avgp", "ensemble", "model_seconds",
            "representations", "timing", "budget", "valid_queries", "pictures", "refit")
    out = {k: info[k] for k in keep if k in info}
    out["grid"] = [{k: t.get(k) for k in ("params", "valid_avgp", "seconds")}
                   for t in info.get("grid", [])]
    out["race"] = race_study(info.get("representations", []))
    return out


def validation_share(model: dict) -> str:
    """The chosen fit's validation checkpoints against its updates (model.json's
    valid_queries; models made before it was recorded say nothing)."""
    v = model.get("valid_queries") or {}
    if "share" not in v:
        return ""
    return (f"; the chosen fit's validation ({v['scored']:,} of {v['all']:,} queries) "
            f"{v['seconds']:.1f} s, {100 * v['share']:.1f} % of the fit")


def race_study(representations: list, rungs=(200_000, 500_000, 1_000_000, 2_000_000)) -> dict:
    """From the grid's validation curves (AvgP after each evaluation) of every candidate:
    had the fits been raced, ranked by their best AvgP so far after `rung` updates, where
    would the final winner have stood, and how many fits would a halving keep."""
    fits = [(f"{r['representation']} {r['weights']} c={c['params'].get('c')}", c["valid_avgp"],
             c["curve"]) for r in representations for c in r.get("curves", []) if c["curve"]]
    if not fits:
        return {}
    final = [v for _, v, _ in fits]
    winner = int(np.argmax(final))
    out = {"fits": len(fits), "winner": fits[winner][0], "rungs": {}}
    for rung in rungs:
        early = [max([a for u, a in curve if u <= rung] or [0.0]) for _, _, curve in fits]
        order = np.argsort(-np.asarray(early), kind="stable")
        place = int(np.flatnonzero(order == winner)[0]) + 1
        ranks_e = np.argsort(np.argsort(-np.asarray(early)))
        ranks_f = np.argsort(np.argsort(-np.asarray(final)))
        rho = float(np.corrcoef(ranks_e, ranks_f)[0, 1])
        out["rungs"][rung] = {"winner_place": place, "spearman": round(rho, 3),
                              "leader": fits[int(order[0])][0],
                              "gap_to_leader": round(early[int(order[0])] - early[winner], 2)}
    return out


def test_scores(src: Path, cache: Path, model: Path, log: Path) -> tuple[dict, float]:
    env = {**os.environ, "PYTHONPATH": str(src), "PAMIR_CACHE": str(cache),
           "PAMIR_COREL5K": str(COREL)}
    code = "import sys; sys.argv[0] = 'pamir'; from pamir.cli import main; main()"
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, "evaluate", str(model), "--on",
                          "corel5k:test", "--json", "--quiet"], cwd=src, env=env, check=True,
                         capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    with open(log, "a") as f:
        f.write(out.stdout + out.stderr)
    return json.loads(out.stdout)["subsets"]["all"], seconds


def main_job(src: Path, work: Path, name: str) -> dict:
    """The README's main command from an empty cache, timed as a whole."""
    cache, model, log = work / f"cache-{name}", work / f"model-{name}", work / f"{name}.log"
    cache.mkdir()
    load0 = load_average()
    peak = []
    fit = pamir_logged(src, cache, ["fit", "corel5k", "-o", str(model), "--ensemble", "3",
                             "--retrain", "--quiet"], log, peak)
    scores, evaluate = test_scores(src, cache, model, log)
    return {"seconds": round(fit + evaluate, 1), "fit_seconds": round(fit, 1),
            "peak_rss_mb": peak[0],
            "evaluate_seconds": round(evaluate, 1), "test": scores,
            "load_average": {"start": load0, "end": load_average()},
            "model": model_record(model), "cache": str(cache)}


def refit_job(src: Path, work: Path, captioned: int = 300, uncaptioned: int = 100,
              more: int = 20) -> dict:
    """The refit part (module docstring): a folder's first fit, the refit after `more`
    pictures are tagged, and the full selection on the grown folder."""
    folder, cache, log = work / "refit-folder", work / "cache-refit", work / "refit.log"
    cache.mkdir(parents=True)
    build_small_folder(folder, captioned, uncaptioned, COREL)
    captions = corel_captions(COREL)
    present = {p.stem for p in folder.glob("*.jpeg")}
    spare = sorted(set(captions) - present)
    rng = np.random.default_rng(SMALL_FOLDER_SEED + 1)
    added = [spare[i] for i in sorted(rng.choice(len(spare), more, replace=False))]
    where = {p.stem: p for p in (COREL / "images").glob("*/*.jpeg")}
    out, runs = {"folder": {"captioned": captioned, "uncaptioned": uncaptioned,
                            "added": more}}, []
    model = work / "model-refit"
    for name, args in (("first", ["-o", str(model)]), ("refit", ["-o", str(model)]),
                       ("reselect", ["-o", str(work / "model-reselect"), "--reselect"])):
        if name == "refit":  # 20 more pictures tagged, in their files
            lines = []
            for i, pid in enumerate(added):
                shutil.copyfile(where[pid], folder / f"{pid}.jpeg")
                lines += exiftool_args(folder / f"{pid}.jpeg", WAYS[i % len(WAYS)],
                                       captions[pid])
            (work / "refit.args").write_text("\n".join(lines) + "\n")
            subprocess.run(["exiftool", "-q", "-q", "-@", str(work / "refit.args")],
                           check=True)
        peak = []
        seconds = pamir_logged(src, cache, ["fit", str(folder), *args, "--quiet"], log, peak)
        record = model_record(Path(args[1]))
        out[name] = {"seconds": round(seconds, 1), "peak_rss_mb": peak[0],
                     "representation": record.get("representation"),
                     "params": {k: record.get("params", {}).get(k) for k in ("c",)},
                     "valid_avgp": record.get("valid_avgp"), "pictures": record.get("pictures"),
                     "timing": record.get("timing"), "refit": record.get("refit")}
        runs.append(name)
        print(f"  refit part, {name}: {seconds:.0f} s", flush=True)
    return out


def refit_report(x: dict) -> list[str]:
    f = x["folder"]
    lines = [f"## Refitting after {f['added']} more pictures are tagged (issue 35)\n",
             *provenance(x),
             f"A folder of {f['captioned']:,} Corel pictures with keywords and "
             f"{f['uncaptioned']:,} without; then {f['added']} more with keywords.\n",
             "| run | command | wall | peak RSS | chosen | valid AvgP | train / valid |",
             "|---|---|---:|---:|---|---:|---|"]
    commands = {"first": "`pamir fit FOLDER -o M` (empty cache)",
                "refit": "`pamir fit FOLDER -o M` again (the refit)",
                "reselect": "`pamir fit FOLDER -o M2 --reselect` (warm cache)"}
    for name in ("first", "refit", "reselect"):
        r = x[name]
        lines.append(f"| {name} | {commands[name]} | {r['seconds']:.0f} s | "
                     f"{r['peak_rss_mb']:,} MB | {r['representation']} c={r['params']['c']} | "
                     f"{r['valid_avgp']} | {r['pictures']['train']} / {r['pictures']['valid']} |")
    timing = x["refit"].get("timing") or {}
    lines += ["", f"The refit's phases: {timing}. The validation AvgP of the refit and of the "
              "full selection are on different validation pictures (the refit keeps the "
              "model's), so they compare only roughly.", ""]
    return lines


def long_caption_table(dest: Path) -> dict:
    """1,300 Corel pictures with captions of 10 or more words (module docstring), copied with
    captions.tsv into a temporary folder (outside the repository; pamir reads pictures that lie
    in the table's folder, which a symbolic link to Corel's folder does not)."""
    rows = [line.split("\t") for line in (COREL / "annotations.tsv").read_text().splitlines()[1:]]
    by_cd: dict[str, list] = {}
    for image_id, _split, path, words in rows:
        by_cd.setdefault(path.split("/")[1], []).append((int(image_id), path, words.split()))
    cds = sorted(by_cd)
    chosen = sorted(np.random.default_rng(0).choice(len(cds), LONG_CDS, replace=False))
    dest.mkdir(parents=True)
    lines, lengths = ["path\tkeywords"], []
    for k in chosen:
        pics = sorted(by_cd[cds[k]])[:LONG_PICTURES // LONG_CDS]
        for i, (image_id, path, words) in enumerate(pics):
            caption = list(dict.fromkeys(words))
            j = i
            while len(caption) < LONG_MIN_WORDS:  # the next pictures of the same CD
                j = (j + 1) % len(pics)
                caption += [w for w in pics[j][2] if w not in caption]
            link = dest / f"{image_id}.jpeg"
            shutil.copyfile(COREL / path, link)  # a link would resolve outside the folder
            lines.append(f"{link.name}\t{' '.join(caption)}")
            lengths.append(len(caption))
    (dest / "captions.tsv").write_text("\n".join(lines) + "\n")
    return {"pictures": len(lengths), "cds": [cds[k] for k in chosen],
            "words_per_caption": {"min": min(lengths), "mean": round(float(np.mean(lengths)), 2),
                                  "max": max(lengths)}}


def long_job(src: Path, work: Path, table: Path, name: str) -> dict:
    cache, model, log = work / f"cache-long-{name}", work / f"model-long-{name}", \
        work / f"long-{name}.log"
    cache.mkdir()
    seconds = pamir_logged(src, cache, ["fit", str(table), "-o", str(model), "--quiet"], log)
    return {"seconds": round(seconds, 1), "model": model_record(model)}


def cap_study(out: Path, cap_sizes=(250, 500, 1000), draws: int = 200) -> None:
    """In AFTER's tree, on the warm cache: PAMIR on cnn at each c of its grid, trained with
    every validation query; then how often a seeded sample of `cap` validation queries ranks
    the three models as all the queries do, and the spread of its AvgP."""
    from pamir.facts.collection import load_collection  # noqa: PLC0415
    from pamir.features.representation import take_rows  # noqa: PLC0415
    from pamir.models.base import TrainingQueries  # noqa: PLC0415
    from pamir.models.pamir import PAMIR  # noqa: PLC0415
    from pamir.evaluation import evaluate_model  # noqa: PLC0415
    from pamir.protocol import Protocol  # noqa: PLC0415
    from pamir.training import collection_inputs  # noqa: PLC0415

    col = load_collection("corel5k")
    pr = Protocol(col)
    F, _, _ = collection_inputs(col, pr, "cnn", progress=False, log=None)
    Xt, Yt = take_rows(F, pr.train), pr.presence(pr.train)
    Xv, Yv = take_rows(F, pr.valid), pr.presence(pr.valid)
    vq = TrainingQueries(Yv, idf_weights=TrainingQueries(Yt).idf)
    per_query = {}
    for c in PAMIR.param_grid["c"]:
        m = PAMIR(c=c, max_valid_queries=None).fit(Xt, Yt, validation=(Xv, Yv))
        per_query[c] = evaluate_model(m, Xv, vq.vectors, vq.relevance,
                                      curve=False).per_query["avgp"]
    full = {c: 100 * float(v.mean()) for c, v in per_query.items()}
    order = sorted(full, key=lambda c: -full[c])
    rng = np.random.default_rng(0)
    caps = {}
    for cap in cap_sizes:
        same_winner, same_order, spread = 0, 0, []
        for _ in range(draws):
            pick = rng.choice(len(vq), cap, replace=False)
            est = {c: 100 * float(v[pick].mean()) for c, v in per_query.items()}
            same_winner += max(est, key=est.get) == order[0]
            same_order += sorted(est, key=lambda c: -est[c]) == order
            spread.append(est[order[0]] - full[order[0]])
        caps[cap] = {"same_winner": same_winner / draws, "same_order": same_order / draws,
                     "avgp_sd": round(float(np.std(spread)), 3)}
    out.write_text(json.dumps({"queries": len(vq), "full": {str(k): round(v, 3)
                                                            for k, v in full.items()},
                               "caps": caps, "draws": draws}, indent=1))


def warm_job(src: Path, cache: Path, work: Path, name: str) -> dict:
    """`pamir fit corel5k` (the train-only default) on a full feature cache, then test."""
    model, log = work / f"model-warm-{name}", work / f"warm-{name}.log"
    load0 = load_average()
    fit = pamir_logged(src, cache, ["fit", "corel5k", "-o", str(model), "--quiet"], log)
    scores, evaluate = test_scores(src, cache, model, log)
    return {"seconds": round(fit, 1), "evaluate_seconds": round(evaluate, 1), "test": scores,
            "load_average": {"start": load0, "end": load_average()},
            "model": model_record(model)}


def warm_report(w: dict) -> list[str]:
    lines = ["## Racing the grid: `pamir fit corel5k` on a full feature cache, side by side\n",
             f"Run {w['date']} on {w['machine']}; before `{w['before_commit'][:10]}`, after "
             f"`{w['after_commit'][:10]}`; cache `{w['cache']}` (every default representation's "
             "features already there).\n",
             f"Command: `{w['command']}`\n",
             "| | fit | selection phase | updates drawn | chosen | valid AvgP | test AvgP / BEP "
             "/ P10 |", "|---|---:|---:|---:|---|---:|---|"]
    for name in ("before", "after"):
        x = w[name]
        m, t = x["model"], x["test"]
        lines.append(f"| {name} | {x['seconds']:.0f} s | "
                     f"{m.get('timing', {}).get('selection', float('nan')):.0f} s | "
                     f"{x.get('updates', 0) / 1e6:.1f} M | {m.get('representation')} "
                     f"{m.get('params', {}).get('c')} | {m.get('valid_avgp')} | "
                     f"{t['avgp']:.2f} / {t['bep']:.2f} / {t['p10']:.2f} |")
    lines.append(f"\nSpeed-up of the fit: {w['speedup']:.2f}x; of the selection phase: "
                 f"{w['selection_speedup']:.2f}x.\n")
    raced = w["after"].get("raced_out", [])
    if raced:
        lines.append("Raced out (representation, c, after how many updates): "
                     + "; ".join(f"{a} c={b} at {c:,}" for a, b, c in raced) + ".\n")
    return lines


def grid_updates(model: dict) -> tuple[int, list]:
    """Updates drawn by all the grid's fits (each curve's last evaluation), and the fits the
    race stopped: (representation, c, updates)."""
    total, raced = 0, []
    for r in model.get("representations", []):
        for c in r.get("curves", []):
            if c["curve"]:
                total += c["curve"][-1][0]
            if c.get("raced_out"):
                raced.append((f"{r['representation']} {r['weights']}", c["params"].get("c"),
                              c["raced_out"]))
    return total, raced


def main_job_report(title: str, m: dict) -> list[str]:
    """A side-by-side table of the README's command (before, after) and where the time went."""
    lines = [title, *provenance(m),
             "`pamir fit corel5k -o M --ensemble 3 --retrain && pamir evaluate M --on "
             "corel5k:test`, empty cache:\n",
             "| | wall | fit | evaluate | chosen | valid AvgP | test AvgP / BEP / P10 |",
             "|---|---:|---:|---:|---|---:|---|"]
    for name in ("before", "after"):
        x, t = m[name], m[name]["test"]
        lines.append(f"| {name} | {x['seconds'] / 60:.1f} min ({x['seconds']:.0f} s) | "
                     f"{x['fit_seconds']:.0f} s | {x['evaluate_seconds']:.0f} s | "
                     f"{x['model'].get('representation')} "
                     f"{x['model'].get('params', {}).get('c')} | "
                     f"{x['model'].get('valid_avgp')} | "
                     f"{t['avgp']:.2f} / {t['bep']:.2f} / {t['p10']:.2f} |")
    lines.append(f"\nSpeed-up: {m['seconds_before'] / m['seconds']:.2f}x.\n")
    if m.get("peak_rss_mb"):  # issue 35: the fit's peak resident memory (ru_maxrss)
        lines.append(f"Peak resident memory of the fit: before "
                     f"{m.get('peak_rss_mb_before') or '-'} MB, after {m['peak_rss_mb']} MB.\n")
    for name in ("before", "after"):
        model = m[name]["model"]
        lines.append(f"{name}: features " + ", ".join(
            f"{p['representation']} {p.get('feature_seconds', 0):.0f} s"
            for p in model.get("representations", []))
            + (f"; phases {model['timing']}" if model.get("timing") else "") + ".  ")
    return lines + [""]


def report(r: dict) -> str:
    lines = report_head("Fit speed: today's path and the new one, side by side", r) + [
             f"Before: `{r['before'][:10]}` (the branch point); after: `{r['after'][:10]}`. Each "
             "ran from a pristine `git archive` with an empty feature cache.\n"]
    m = r.get("main_job")
    if m:
        lines += main_job_report("## The README's main command\n", m)
    if r.get("codebook_sxs"):
        lines += main_job_report("## The same command, the cheaper visterm codebook alone\n",
                                 r["codebook_sxs"])
    race = (m or {}).get("after", {}).get("model", {}).get("race")
    if race:
        lines += ["## Could the candidates be raced? (the new main job's grid curves)\n",
                  f"{race['fits']} fits; the winner after all updates: {race['winner']}. Ranked "
                  "by their best validation AvgP so far after N updates:\n",
                  "| N | winner's place | Spearman with the final ranking | leader then | "
                  "winner's gap |", "|---:|---:|---:|---|---:|"]
        for n, v in race["rungs"].items():
            lines.append(f"| {int(n):,} | {v['winner_place']} | {v['spearman']:.2f} | "
                         f"{v['leader']} | {v['gap_to_leader']:.2f} |")
        lines.append("")
    w = r.get("warm")
    if w:
        lines += ["## `pamir fit corel5k` on a warm feature cache\n", *provenance(w),
                  f"{w['seconds']:.0f} s; chose {w['model'].get('representation')} at "
                  f"{w['model'].get('params', {}).get('c')}, validation AvgP "
                  f"{w['model'].get('valid_avgp')}{validation_share(w['model'])}.\n"]
    lg = r.get("long_captions")
    if lg:
        lines += ["## 1,300 pictures with captions of 10 or more words\n", *provenance(lg),
                  f"Corel CDs {', '.join(lg['collection']['cds'])}; words per caption "
                  f"{lg['collection']['words_per_caption']}.\n"]
        for name in ("before", "after"):
            if name in lg:
                x = lg[name]
                lines.append(f"- {name}: {x['seconds']:.0f} s from an empty cache; chose "
                             f"{x['model'].get('representation')}, validation AvgP "
                             f"{x['model'].get('valid_avgp')}"
                             + (f"; {x['model']['timing']}" if x['model'].get('timing') else "")
                             + validation_share(x["model"]))
        lines.append("")
    if r.get("warm_sxs"):
        lines += warm_report(r["warm_sxs"])
    refits = dict(r.get("refit") or {})
    kept_from = refits.pop("run", None)  # a part kept from an earlier run (kept_parts)
    for x in refits.values():
        lines += refit_report({"run": kept_from, **x} if kept_from else x)
    cap = r.get("cap")
    if cap:
        lines += ["## What a validation cap costs (Corel 5k, cnn, the c grid)\n", *provenance(cap),
                  f"Validation AvgP with all {cap['queries']:,} validation queries: "
                  + ", ".join(f"c={k}: {v:.2f}" for k, v in cap["full"].items()) + ". For a "
                  f"seeded sample of N queries ({cap['draws']} draws):\n",
                  "| N | same winner | same order | sd of the winner's AvgP |",
                  "|---:|---:|---:|---:|"]
        for n, v in cap["caps"].items():
            lines.append(f"| {n} | {100 * v['same_winner']:.0f} % | {100 * v['same_order']:.0f} % "
                         f"| {v['avgp_sd']:.2f} |")
        lines.append("")
    if r.get("note"):  # what the file's own numbers cannot say (written by hand, kept)
        lines += [r["note"], ""]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--before", default=BRANCH_POINT)
    ap.add_argument("--after", default="HEAD", help="read when the AFTER runs start")
    ap.add_argument("--parts", nargs="+", default=["main", "warm", "long", "cap"])
    ap.add_argument("--long-before", action="store_true",
                    help="also time today's path on the long captions (about an hour)")
    ap.add_argument("--work", type=Path, default=None, help="folder for trees, caches, models")
    ap.add_argument("--cap-study", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--refit-sizes", type=int, nargs="+", default=[300],
                    help="captioned pictures of the refit part's folders (a third more bare)")
    ap.add_argument("--warm-cache", type=Path, default=Path("/work/cache"),
                    help="a full feature cache, for --parts warm_sxs")
    args = ap.parse_args(argv)
    if args.cap_study:
        cap_study(args.cap_study)
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="pamir-fit-speed-"))
    r = {"command": "python benchmarks/bench_fit_speed.py " + " ".join(argv or sys.argv[1:]),
         "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
         "load_average": {"start": load_average()}, "work": str(work)}
    try:
        run_parts(args, work, r)
    finally:  # what was measured is kept even if a later part fails
        r["load_average"]["end"] = load_average()
        save_report("fit_speed", kept_parts(r), report)


RUN_KEYS = ("command", "machine", "date", "load_average", "work", "before", "after")


def kept_parts(r: dict) -> dict:
    """This run's results over the file's: parts not run this time stay, and the file
    says which run they came from."""
    path = RESULTS / "fit_speed.json"
    if not path.is_file():
        return r
    old = json.loads(path.read_text())
    parts = ("main_job", "codebook_sxs", "warm", "long_captions", "cap", "warm_sxs", "refit")
    head = {k: old[k] for k in RUN_KEYS if k in old}
    if not any(k in r for k in parts if k != "warm_sxs"):
        out = {**old, **{k: v for k, v in r.items() if k in parts}}
        out.update(head)
        return out
    # a part kept from an earlier run carries that run's command, machine and commits
    kept = {k: v if k == "warm_sxs" or "run" in v else {"run": head, **v}
            for k, v in old.items() if k in parts and k not in r}
    return {**kept, **r}


def provenance(part: dict) -> list[str]:
    """The line saying which earlier run a kept part came from (none for this run's)."""
    run = part.get("run")
    if not run:
        return []
    return [f"From an earlier run: `{run['command']}`, {run['machine']}, {run['date']}, "
            f"before `{run.get('before', '')[:10]}`, after `{run.get('after', '')[:10]}`.\n"]


def run_parts(args, work: Path, r: dict) -> None:
    before_src = work / "before-src"
    before_commit = archive(args.before, before_src)
    if args.parts == ["warm_sxs"]:
        after_src = work / "after-src"
        w = {"command": f"{HEAVY} {r['command']}", "date": r["date"],
             "machine": r["machine"], "cache": str(args.warm_cache),
             "before_commit": before_commit, "after_commit": archive(args.after, after_src)}
        for name, src in (("before", before_src), ("after", after_src)):
            print(f"warm fit, {name} ...", flush=True)
            w[name] = warm_job(src, args.warm_cache, work, name)
            w[name]["updates"], w[name]["raced_out"] = grid_updates(w[name]["model"])
            print(f"  {w[name]['seconds']:.0f} s", flush=True)
        w["speedup"] = round(w["before"]["seconds"] / w["after"]["seconds"], 2)
        sel = [w[n]["model"].get("timing", {}).get("selection") for n in ("before", "after")]
        w["selection_speedup"] = round(sel[0] / sel[1], 2) if all(sel) else None
        r["warm_sxs"] = w
        return
    if args.parts == ["refit"]:
        r["before"], r["after"] = "", archive(args.after, work / "after-src")
        r["refit"] = {str(n): refit_job(work / "after-src", work / f"refit-{n}", n, n // 3)
                      for n in args.refit_sizes}
        return
    r["before"] = before_commit
    table = work / "long" / "captions.tsv"
    if "long" in args.parts:
        r["long_captions"] = {"collection": long_caption_table(table.parent)}
    if "main" in args.parts:
        print("main job, before ...", flush=True)
        before = main_job(before_src, work, "before")
        print(f"  {before['seconds']:.0f} s", flush=True)
    if "long" in args.parts and args.long_before:
        r["long_captions"]["before"] = long_job(before_src, work, table, "before")
    after_src = work / "after-src"
    r["after"] = archive(args.after, after_src)  # taken now: the code under test
    if "main" in args.parts:
        print("main job, after ...", flush=True)
        after = main_job(after_src, work, "after")
        print(f"  {after['seconds']:.0f} s", flush=True)
        r["main_job"] = {"seconds": after["seconds"], "seconds_before": before["seconds"],
                         "test_avgp": after["test"]["avgp"],
                         "test_avgp_before": before["test"]["avgp"],
                         "speedup": round(before["seconds"] / after["seconds"], 2),
                         "peak_rss_mb": after["peak_rss_mb"],
                         "peak_rss_mb_before": before["peak_rss_mb"],
                         "before": before, "after": after}
        warm_cache = Path(after["cache"])
        if "warm" in args.parts:
            log = work / "warm.log"
            seconds = pamir_logged(after_src, warm_cache, ["fit", "corel5k", "-o",
                                                           str(work / "model-warm"), "--quiet"],
                                   log)
            r["warm"] = {"seconds": round(seconds, 1),
                         "model": model_record(work / "model-warm")}
        if "cap" in args.parts:
            env = {**os.environ, "PYTHONPATH": str(after_src), "PAMIR_CACHE": str(warm_cache),
                   "PAMIR_COREL5K": str(COREL)}
            script = after_src / "benchmarks/bench_fit_speed.py"
            subprocess.run([sys.executable, str(script),
                            "--cap-study", str(work / "cap.json")], cwd=after_src, env=env,
                           check=True)
            r["cap"] = json.loads((work / "cap.json").read_text())
    if "long" in args.parts:
        r["long_captions"]["after"] = long_job(after_src, work, table, "after")


if __name__ == "__main__":
    main()
