"""int8 CNN views against fp32 (issue 35): what they cost in quality, what they gain in speed.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_int8.py --cache DIR [--parts quality speed]
        [--pictures 1000] [--representation cnn]

quality (Corel 5k, all 5,000 pictures, lite0: the zero-caption network):
  - the pooled vectors' cosine to fp32, and the ImageNet classifier's top-1 / top-5 agreement;
  - the zero-caption system (`pamir index FOLDER` with no model): test AvgP / P10 through a
    real index, single-word and all queries, and the per-query paired difference (Wilcoxon);
  - `pamir annotate`'s ImageNet words on the 499 test pictures: how many are in the Corel
    caption, and how often fp32 and int8 give the same words;
  - a fitted system (`pamir fit corel5k --representation REP`, one model, no ensemble or
    retraining): validation AvgP, and test AvgP with its per-query paired difference.
speed:
  - the quantization itself, once per machine, per network (seconds);
  - feature extraction per view (lite0, lite1, lite2 at their presets), no cache, pictures/s,
    fp32 and int8 alternately (best of two rounds);
  - `pamir index` of a bare folder of --pictures Corel pictures (the zero-caption path, text
    reading off, an empty feature cache but the networks already exported / quantized), run
    as the command, fp32 then int8 then fp32 then int8: pictures per second.

--cache: the feature cache of this run (PAMIR_CACHE); fp32 vectors found there are reused
(the fp32 cache key is the one `pamir fit` uses), int8 ones go into a key of their own.
Writes benchmarks/results/int8.json (parts merged) and int8.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common.harness import RESULTS, Run, parser, report_head, write_json

from pamir import config
from pamir.zeroshot import classes as zeroshot
from pamir.data import load_corel5k
from pamir.evaluation.metrics import ranking_metrics
from pamir.features.cnn import CNNRepresentation, CNNSettings
from pamir.features.registry import CNN_PRESETS
from pamir.zeroshot.imagenet import class_probabilities
from pamir.protocol import Protocol

PRECISIONS = ("fp32", "int8")
VIEWS = {"cnn": {}, **CNN_PRESETS}
#: Pictures per view for the extraction speed.
SPEED_PICTURES = 200
#: PAMIR's seeds (random_state) of the fitted systems, each precision.
SEEDS = (0, 1)
ROOT = Path(__file__).resolve().parent.parent
#: The cache folders a `pamir index` run finds made already: the networks (exported and
#: quantized), the ImageNet classes' description embeddings and the word lexicon.
ONCE_PER_MACHINE = ("onnx", "class-words", "lexicon")


def paired(a: np.ndarray, b: np.ndarray) -> dict:
    """int8 minus fp32 per query: the mean difference (points of %), its standard error,
    and the two-sided Wilcoxon signed-rank p."""
    from scipy.stats import wilcoxon

    d = 100 * (np.asarray(b, float) - np.asarray(a, float))
    p = float(wilcoxon(d).pvalue) if np.any(d != 0) else 1.0
    return {"queries": len(d), "mean_difference": round(float(d.mean()), 2),
            "standard_error": round(float(d.std(ddof=1) / np.sqrt(len(d))), 2),
            "wilcoxon_p": round(p, 3), "better": int((d > 0).sum()), "worse": int((d < 0).sum())}


# ------------------------------------------------------------------------------ quality

def quality(cache: Path, representation: str) -> dict:
    from common.corel import query_matrix, through_index, word_scores  # noqa: PLC0415

    from pamir.text.bridge import imagenet_class_names

    coll = load_corel5k()
    prot = Protocol(coll)
    paths = list(coll.paths)
    pooled, logits = {}, {}
    out: dict = {"pictures": len(paths)}
    for p in PRECISIONS:
        rep = CNNRepresentation(CNNSettings(precision=p, standardise=False), cache_dir=cache,
                                progress=False)
        t0 = time.perf_counter()
        logits[p], ok, _ = rep.class_scores(paths)
        out[f"{p}_features"] = {**rep.stats_, "seconds_with_classes": round(time.perf_counter()
                                                                           - t0, 1)}
        pooled[p] = rep.pooled(paths)[0]
        assert ok.all() and rep.settings.precision == p, (p, rep.settings.precision)
    a, b = pooled["fp32"], pooled["int8"]
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    top5 = {p: np.argsort(-logits[p], axis=1)[:, :5] for p in PRECISIONS}
    out["pooled_cosine"] = {"mean": round(float(cos.mean()), 4),
                            "p1": round(float(np.percentile(cos, 1)), 4),
                            "min": round(float(cos.min()), 4)}
    out["imagenet"] = {
        "top1_agreement": round(float((top5["fp32"][:, 0] == top5["int8"][:, 0]).mean()), 4),
        "top1_in_other_top5": round(float(np.mean([t8[0] in t32 for t32, t8 in
                                                   zip(top5["fp32"], top5["int8"])])), 4),
        "top5_overlap": round(float(np.mean([len(set(x) & set(y)) / 5 for x, y in
                                             zip(top5["fp32"], top5["int8"])])), 4)}
    # where top-1 differs: by how sure fp32 is of its top class
    P = {p: class_probabilities(logits[p]) for p in PRECISIONS}
    sure = P["fp32"].max(1)
    out["imagenet"]["top1_agreement_by_fp32_probability"] = [
        {"from": lo, "to": hi, "pictures": int(m.sum()),
         "agreement": round(float((top5["fp32"][m, 0] == top5["int8"][m, 0]).mean()), 4)}
        for lo, hi in ((0, .2), (.2, .5), (.5, .8), (.8, 1.0))
        for m in [(sure >= lo) & ((sure < hi) | (hi == 1.0))]]
    print(out, flush=True)

    # the zero-caption system, as bench_zero_caption measures it (test, and validation)
    idx, qs = prot.split("test"), prot.queries("test")
    words = zeroshot.ClassWords(imagenet_class_names(), cache_dir=cache)
    one = qs.n_words == 1
    zero, per_query = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for p in PRECISIONS:
            zero[p] = through_index(P[p][idx].astype(np.float32), prot, [], np.zeros(0),
                                    imagenet_class_names(), Path(tmp) / p)
            valid = prot.split("valid")
            zero[p]["valid"] = through_index(P[p][valid].astype(np.float32), prot, [],
                                             np.zeros(0), imagenet_class_names(),
                                             Path(tmp) / f"{p}-valid", "valid")
            S = query_matrix(word_scores(P[p][idx], words, prot.vocabulary), qs, len(idx))
            per_query[p] = ranking_metrics(S, qs.relevance)["avgp"]
    out["zero_caption"] = {**zero, "paired_single_word": paired(per_query["fp32"][one],
                                                                per_query["int8"][one]),
                           "paired_all": paired(per_query["fp32"], per_query["int8"])}

    # pamir annotate's ImageNet words on the test pictures
    notes = {p: zeroshot.annotate(P[p][idx]) for p in PRECISIONS}
    caption_words = [set(coll.captions[i]) for i in idx]
    ann = {}
    for p in PRECISIONS:
        given = [[w for w, _ in n] for n in notes[p]]
        n_words = sum(len(g) for g in given)
        ann[p] = {"words": n_words, "in_caption": sum(w in c for g, c in zip(given, caption_words)
                                                      for w in g),
                  "pictures_with_words": sum(bool(g) for g in given)}
    same = [set(w for w, _ in x) == set(w for w, _ in y)
            for x, y in zip(notes["fp32"], notes["int8"])]
    out["annotate"] = {**ann, "same_words": round(float(np.mean(same)), 4),
                       "pictures": len(idx)}
    print(out["zero_caption"], out["annotate"], flush=True)

    out["fit"] = fitted(coll, prot, cache, representation)
    return out


def view_cosines(cache: Path) -> dict:
    """Each view's pooled vectors, int8 against fp32, on all Corel 5k pictures (the global
    average's 1,280 numbers, and the whole vector with its 2x2 regions)."""
    paths = list(load_corel5k().paths)
    out = {}
    for view, preset in VIEWS.items():
        P = {p: CNNRepresentation(CNNSettings(precision=p, **preset), cache_dir=cache,
                                  progress=False).pooled(paths)[0] for p in PRECISIONS}
        for part, cut in (("global", slice(0, 1280)), ("whole", slice(None))):
            a, b = P["fp32"][:, cut], P["int8"][:, cut]
            cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
            out.setdefault(view, {})[part] = {"mean": round(float(cos.mean()), 4),
                                              "p1": round(float(np.percentile(cos, 1)), 4),
                                              "min": round(float(cos.min()), 4)}
        print(view, out[view], flush=True)
    return out


def fitted(coll, prot, cache: Path, representation: str) -> dict:
    """`pamir fit --representation REPRESENTATION` (one model) on each precision's features,
    validation and test AvgP."""
    from pamir.system import evaluate_system, fit_system

    out: dict = {}
    # a fitted system on each precision's features, two seeds each: two fp32 seeds differ
    # by what training alone moves (the control the int8 difference is read against)
    fits = {}
    for seed in SEEDS:
        for p in PRECISIONS:
            t0 = time.perf_counter()
            system = fit_system(coll, representation=representation, protocol=prot,
                                model_params={"random_state": seed},
                                cnn_settings=CNNSettings(precision=p), cache_dir=cache, log=print)
            seconds = time.perf_counter() - t0
            ev = evaluate_system(system, coll, "test")["evaluation"]
            fits[p, seed] = {"seconds": round(seconds, 1), "valid_avgp": system.info.get("valid_avgp"),
                             "c": system.info.get("params", {}).get("c"), "test": ev.table(),
                             "per_query": ev.per_query["avgp"]}
            print(p, seed, {k: v for k, v in fits[p, seed].items() if k != "per_query"},
                  flush=True)
    mean = {p: {"valid_avgp": round(float(np.mean([fits[p, k]["valid_avgp"] for k in SEEDS])), 3),
                "test_avgp": round(float(np.mean([fits[p, k]["test"]["all"]["avgp"]
                                                  for k in SEEDS])), 2)} for p in PRECISIONS}
    out["fit"] = {"representation": representation, "seeds": list(SEEDS), "mean": mean,
                  "runs": [{"precision": p, "seed": k,
                            **{x: v for x, v in f.items() if x != "per_query"}}
                           for (p, k), f in fits.items()],
                  "paired_test": paired(fits["fp32", 0]["per_query"], fits["int8", 0]["per_query"]),
                  "paired_test_seed_control": paired(fits["fp32", 0]["per_query"],
                                                     fits["fp32", 1]["per_query"]),
                  "paired_test_seed_mean": paired(
                      np.mean([fits["fp32", k]["per_query"] for k in SEEDS], 0),
                      np.mean([fits["int8", k]["per_query"] for k in SEEDS], 0))}
    print(out["fit"], flush=True)
    return out["fit"]


# ------------------------------------------------------------------------------ speed

def corel_pictures(n: int) -> list[Path]:
    """n Corel 5k pictures, drawn with the protocol's seed."""
    paths = list(load_corel5k().paths)
    pick = np.random.default_rng(config.SEED).permutation(len(paths))[:n]
    return [Path(paths[i]) for i in sorted(pick)]


def quantization_seconds(cache: Path) -> dict:
    """Each network quantized from its cached fp32 export, as the first int8 run on a
    machine does (the export itself is fp32's cost, not counted)."""
    from pamir.features.cnn_int8 import quantize
    from pamir.features.cnn_network import MODELS, onnx_path

    out = {}
    for model in MODELS:
        assert onnx_path(model).is_file(), onnx_path(model)
        t0 = time.perf_counter()
        quantize(model)
        out[model] = round(time.perf_counter() - t0, 1)
    return out


def extraction(pictures: list[Path], speed_pictures: int) -> dict:
    """pictures/s of each view at each precision, no feature cache, best of two rounds."""
    out = {}
    for view, preset in VIEWS.items():
        best = {}
        for _ in range(2):
            for p in PRECISIONS:
                rep = CNNRepresentation(CNNSettings(precision=p, **preset), progress=False)
                rep.pooled(pictures[:2])  # the network built, outside the timing
                rep.pooled(pictures[:speed_pictures])
                best[p] = max(best.get(p, 0), rep.stats_["pictures_per_second"])
        out[view] = {**best, "speed_up": round(best["int8"] / best["fp32"], 2)}
        print(view, out[view], flush=True)
    return out


def index_folder(pictures: list[Path], cache: Path, work: Path) -> dict:
    """`pamir index FOLDER --no-text` on a bare folder, fp32 and int8 alternately, each run
    with an empty feature cache (ONCE_PER_MACHINE made already)."""
    folder = work / "folder"
    folder.mkdir()
    for i, p in enumerate(pictures):
        shutil.copy(p, folder / f"{i:05d}{p.suffix}")
    runs = []
    for p in PRECISIONS * 2:
        run_cache = work / f"cache-{len(runs)}"
        for part in ONCE_PER_MACHINE:  # what the first run on a machine makes, not per picture
            if (cache / part).is_dir():
                shutil.copytree(cache / part, run_cache / part)
        env = {**os.environ, "PAMIR_CACHE": str(run_cache), "PAMIR_CNN_PRECISION": p,
               "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-c", "from pamir.cli import main; main()", "index", str(folder),
               "--index", str(work / f"index-{len(runs)}"), "--no-text", "--json"]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if done.returncode:
            raise RuntimeError(done.stderr[-2000:])
        runs.append({"precision": p, "seconds": round(seconds, 1),
                     "pictures_per_second": round(len(pictures) / seconds, 1),
                     "cnn_cache": sorted(x.name for x in (run_cache / "cnn").iterdir())})
        print(runs[-1], flush=True)
        shutil.rmtree(run_cache)
    best = {p: max(r["pictures_per_second"] for r in runs if r["precision"] == p)
            for p in PRECISIONS}
    return {"pictures": len(pictures), "runs": runs, "best": best,
            "speed_up": round(best["int8"] / best["fp32"], 2)}


def speed(cache: Path, n: int, speed_pictures: int = SPEED_PICTURES) -> dict:
    for model in ("lite0", "lite1", "lite2"):  # the exports, if this cache lacks them
        CNNRepresentation(CNNSettings(model=model, precision="int8")).resolve_precision()
    pictures = corel_pictures(n)
    with tempfile.TemporaryDirectory() as tmp:
        return {"quantization_seconds": quantization_seconds(cache),
                "extraction": {"pictures": speed_pictures,
                               **extraction(pictures, speed_pictures)},
                "index": index_folder(pictures, cache, Path(tmp))}


# ------------------------------------------------------------------------------ report

def report(r: dict) -> str:
    lines = report_head("int8 CNN views against fp32 (issue 35)", r)
    q, s = r.get("quality"), r.get("speed")
    if q:
        f = q["fit"]
        lines += ["", "## Quality (Corel 5k)", "",
                  f"Lite0 on all {q['pictures']:,} pictures: pooled vectors' cosine to fp32 "
                  f"{q['pooled_cosine']['mean']} on average, {q['pooled_cosine']['p1']} at the "
                  f"1st percentile, {q['pooled_cosine']['min']} at the worst; ImageNet top-1 "
                  f"the same class for {100 * q['imagenet']['top1_agreement']:.1f} % of the "
                  f"pictures (int8's top-1 in fp32's top 5 for "
                  f"{100 * q['imagenet']['top1_in_other_top5']:.1f} %, top-5 overlap "
                  f"{100 * q['imagenet']['top5_overlap']:.1f} %).", "",
                  "| | fp32 | int8 | int8 - fp32 per query (s.e.; Wilcoxon p; better / worse) |",
                  "|---|---:|---:|---|"]
        z = q["zero_caption"]

        def pair(d):
            p = f"p = {d['wilcoxon_p']}" if d["wilcoxon_p"] >= 0.001 else "p < 0.001"
            return (f"{d['mean_difference']:+.2f} ({d['standard_error']}; {p};"
                    f" {d['better']} / {d['worse']} of {d['queries']})")
        lines += [f"| zero captions, single-word test AvgP | {z['fp32']['single-word']['avgp']} "
                  f"| {z['int8']['single-word']['avgp']} | {pair(z['paired_single_word'])} |",
                  f"| zero captions, all-query test AvgP | {z['fp32']['all']['avgp']} | "
                  f"{z['int8']['all']['avgp']} | {pair(z['paired_all'])} |",
                  f"| zero captions, single-word validation AvgP | "
                  f"{z['fp32']['valid']['single-word']['avgp']} | "
                  f"{z['int8']['valid']['single-word']['avgp']} | |",
                  f"| zero captions, all-query validation AvgP | "
                  f"{z['fp32']['valid']['all']['avgp']} | {z['int8']['valid']['all']['avgp']} | |"]
        m = f["mean"]
        lines += [f"| `pamir fit --representation {f['representation']}`, mean of seeds "
                  f"{f['seeds']}: validation AvgP | {m['fp32']['valid_avgp']} | "
                  f"{m['int8']['valid_avgp']} | |",
                  f"| the same models, test AvgP | {m['fp32']['test_avgp']} | "
                  f"{m['int8']['test_avgp']} | {pair(f['paired_test_seed_mean'])} (the seeds' "
                  "mean per query) |",
                  "", "Each fit (one model, no ensemble or retraining):", "",
                  "| precision | seed | c | validation AvgP | test AvgP | seconds |",
                  "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {x['precision']} | {x['seed']} | {x['c']} | {x['valid_avgp']} | "
                  f"{x['test']['all']['avgp']} | {x['seconds']} |" for x in f["runs"]]
        lines += ["", f"Per query, test AvgP: int8 - fp32 at seed 0 {pair(f['paired_test'])}; "
                  f"the control, fp32 seed 1 - fp32 seed 0, "
                  f"{pair(f['paired_test_seed_control'])}.", "",
                  "ImageNet top-1 agreement by fp32's probability of its top class: " +
                  "; ".join(f"[{b['from']}, {b['to']}): {b['pictures']} pictures, "
                            f"{100 * b['agreement']:.1f} %"
                            for b in q["imagenet"]["top1_agreement_by_fp32_probability"]) + "."]
        for rep_name, g in q.get("more_fits", {}).items():
            m = g["mean"]
            lines += ["", f"`pamir fit --representation {rep_name}`, mean of seeds {g['seeds']}: "
                      f"validation AvgP fp32 {m['fp32']['valid_avgp']}, int8 "
                      f"{m['int8']['valid_avgp']}; test AvgP fp32 {m['fp32']['test_avgp']}, int8 "
                      f"{m['int8']['test_avgp']} (per query, the seeds' mean: "
                      f"{pair(g['paired_test_seed_mean'])}; the control, fp32 seed 1 - seed 0: "
                      f"{pair(g['paired_test_seed_control'])}). Each fit: " +
                      "; ".join(f"{x['precision']} seed {x['seed']}: c {x['c']}, validation "
                                f"{x['valid_avgp']}, test {x['test']['all']['avgp']}, "
                                f"{x['seconds']} s" for x in g["runs"]) +
                      " (a precision's first fit includes extracting its features)."]
        if q.get("view_cosines"):
            lines += ["", "Pooled vectors, int8 against fp32, on all 5,000 pictures (cosine: "
                      "mean / 1st percentile / worst):", "",
                      "| view | global average | with the 2x2 regions |", "|---|---|---|"]
            lines += [f"| {v} | {c['global']['mean']} / {c['global']['p1']} / "
                      f"{c['global']['min']} | {c['whole']['mean']} / {c['whole']['p1']} / "
                      f"{c['whole']['min']} |" for v, c in q["view_cosines"].items()]
        a = q["annotate"]
        lines += ["", f"`pamir annotate`'s ImageNet words on the {a['pictures']} test pictures: "
                  f"fp32 {a['fp32']['words']} words ({a['fp32']['in_caption']} in the Corel "
                  f"caption, {a['fp32']['pictures_with_words']} pictures with words), int8 "
                  f"{a['int8']['words']} ({a['int8']['in_caption']}, "
                  f"{a['int8']['pictures_with_words']}); the same words for "
                  f"{100 * a['same_words']:.1f} % of the pictures.", "",
                  "Features: fp32 "
                  f"{q['fp32_features'].get('cached')} cached / "
                  f"{q['fp32_features'].get('extracted')} computed, int8 "
                  f"{q['int8_features'].get('cached')} / {q['int8_features'].get('extracted')}."]
    if s:
        i = s["index"]
        lines += ["", "## Speed", "",
                  f"`pamir index FOLDER --no-text` (no model: the zero-caption path) on "
                  f"{i['pictures']:,} Corel pictures, the whole command (Python's start "
                  "included), an empty feature cache (the networks already exported and "
                  "quantized, the ImageNet classes' embeddings made: once per machine), each "
                  "precision run twice, alternately:", "",
                  "| run | precision | seconds | pictures/s |", "|---:|---|---:|---:|"]
        lines += [f"| {k + 1} | {x['precision']} | {x['seconds']} | {x['pictures_per_second']} |"
                  for k, x in enumerate(i["runs"])]
        lines += ["", f"Best of each: fp32 {i['best']['fp32']}, int8 {i['best']['int8']} "
                  f"pictures/s: **{i['speed_up']}x**.", "",
                  f"Feature extraction per view ({s['extraction']['pictures']} pictures, no "
                  "cache, best of "
                  "two rounds), pictures/s:", "",
                  "| view | fp32 | int8 | speed-up |", "|---|---:|---:|---:|"]
        lines += [f"| {v} | {x['fp32']} | {x['int8']} | {x['speed_up']}x |"
                  for v, x in s["extraction"].items() if v != "pictures"]
        lines += ["", "Quantizing each network, once per machine (seconds): " +
                  ", ".join(f"{m} {t}" for m, t in s["quantization_seconds"].items()) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--parts", nargs="+", default=["quality", "speed"],
                    choices=["quality", "speed", "fit", "cosines"],
                    help="fit: only the fitted systems' comparison, for --representation, kept "
                         "under quality.more_fits")
    ap.add_argument("--pictures", type=int, default=1000)
    ap.add_argument("--speed-pictures", type=int, default=SPEED_PICTURES)
    ap.add_argument("--representation", default="cnn")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    path = RESULTS / "int8.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    if not args.report_only:
        os.environ["PAMIR_CACHE"] = str(args.cache)
        run = Run("bench_int8.py", argv, torch=True)
        r = {**old, **run.info()}
        if "quality" in args.parts:
            r["quality"] = quality(args.cache, args.representation)
        if "fit" in args.parts:
            coll = load_corel5k()
            r["quality"].setdefault("more_fits", {})[args.representation] = fitted(
                coll, Protocol(coll), args.cache, args.representation)
        if "cosines" in args.parts:
            r["quality"]["view_cosines"] = view_cosines(args.cache)
        if "speed" in args.parts:
            r["speed"] = speed(args.cache, args.pictures, args.speed_pictures)
        r["minutes"] = run.minutes()
        write_json(path, r)
        old = r
    (RESULTS / "int8.md").write_text(report(old))
    print(report(old))


if __name__ == "__main__":
    main()
