"""A library whose pictures mostly carry keywords, searched with `pamir index` alone (issue 54).

    flock /tmp/pamir-heavy.lock python benchmarks/bench_folder_look.py [--size 1500:499]
        [--old 45c8fc3] [--work DIR] [--fit] [--changed 50]

The folder (benchmarks/common.build_small_folder, bench_small_folders' own): N Corel 5k
development pictures with their keywords written into their files by exiftool (the seven ways
of issue 23, in turn) and M test pictures with none, the share of a library where three
quarters of the pictures carry keywords. Each side (OLD: a `git archive` of --old, main before
issue 54; NEW: this tree) runs `pamir index FOLDER --no-text --no-faces` as a person does, in a
fresh process, from a feature cache of its own that holds the machine's one-time files (the
networks' exports, the word lexicon) and no picture's vectors: the look is computed, cold.

Measured on each side's index:
- the untagged pictures' AvgP for their words: for every word of their Corel captions, the
  index's answer to the word alone (`Index.search`, every picture, copies not folded), the
  untagged pictures in its order (the tagged ones holding the word come first, as facts, and
  are left out); a word the index cannot answer counts 0. Over every word of theirs, and over
  the words the tagged pictures' keywords hold.
- how sure: of the untagged pictures a word's answer gives a probability of 0.5 or more (0.7),
  the share whose caption has the word; and the calibration error (pamir.calibration).
- the whole command's seconds, and the folder look's (NEW).
- tags changing (NEW): --changed tagged pictures get a new keyword ("favourite") with
  exiftool, then `pamir index` again: its seconds, and whether the word is searchable.
- --fit: `pamir fit FOLDER`, then `pamir index MODEL FOLDER`, and the same measures: what a
  fitted model gives the same folder.
- what the look costs (`costs`): `pamir index FOLDER --no-text --no-faces` of a folder with no
  keyword (the neighbours alone: Corel's 499 test pictures, and --camera 12-MP JPEGs of
  benchmarks/phone_library.py's making), old and new in turn, twice, each run from an empty
  index and a cache with no picture's vectors.

Writes benchmarks/results/folder_look.json and .md (--report-only rewrites the .md).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common.folders import build_small_folder, corel_captions  # noqa: E402
from common.harness import (Run, archive, corel5k_folder, report_cli,  # noqa: E402
                            report_head, save_report)
from common.latency import pamir_logged  # noqa: E402

from pamir import config  # noqa: E402

OLD = "45c8fc3"  # main before issue 54
#: The one-time files a side's cache starts with (copied from the machine's feature cache).
ONE_TIME = ("onnx", "lexicon", "class-words")
PROBABILITIES = (0.5, 0.7)


def side_cache(work: Path, name: str) -> Path:
    """A feature cache with the machine's one-time files and no picture's vectors."""
    cache = work / f"cache-{name}"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    for part in ONE_TIME:
        src = config.default_cache_dir() / part
        if src.is_dir():
            shutil.copytree(src, cache / part)
    return cache


def not_the_look(src: Path) -> list[str]:
    """The options that turn off a tree's passes that the older tree does not have (the
    colour pass, from issue 53): what is compared is the look, not a pass one side lacks."""
    return ["--no-colour"] if (src / "pamir" / "facts" / "colour.py").is_file() else []


def index_side(src: Path, folder: Path, work: Path, name: str, model: Path | None = None,
               cache: Path | None = None) -> dict:
    """`pamir index [MODEL] FOLDER --no-text --no-faces` (and `not_the_look`) from source
    tree `src`: its seconds, peak memory and what it said."""
    cache = cache or side_cache(work, name)
    index = work / f"index-{name}"
    shutil.rmtree(index, ignore_errors=True)
    log = work / f"{name}.log"
    log.unlink(missing_ok=True)
    peak = []
    seconds = pamir_logged(src, cache, ["index", *([str(model)] if model else []), str(folder),
                                        "--index", str(index), "--no-text", "--no-faces",
                                        *not_the_look(src)],
                           log, peak)
    said = log.read_text(errors="replace")
    return {"seconds": round(seconds, 1), "peak_rss_mb": peak[0], "index": str(index),
            "cache": str(cache),
            "folder_look": [x.strip() for x in said.splitlines() if "folder's look" in x]}


def untagged_avgp(index_dir: Path, folder: Path) -> dict:
    """The untagged pictures' AvgP for their words, and how sure the index is of them (the
    module's doc)."""
    from pamir.calibration import expected_calibration_error  # noqa: PLC0415
    from pamir.evaluation.metrics import average_precision  # noqa: PLC0415
    from pamir.index import Index, QueryError  # noqa: PLC0415

    captions = corel_captions(corel5k_folder())
    pictures = sorted(folder.glob("*.jpeg"))
    bare = [p for p in pictures if p.stem not in captions]
    tagged = [p for p in pictures if p.stem in captions]
    truth = {str(p.resolve()): set(test_caption(p.stem)) for p in bare}
    words = sorted({w for c in truth.values() for w in c})
    held = {w for p in tagged for w in captions[p.stem]}
    avgp, pairs, unanswered = {}, [], []
    with Index.open(index_dir) as ix:
        for w in words:
            try:
                hits = ix.search(w, len(ix), collapse="none")
            except QueryError:
                unanswered.append(w)
                avgp[w] = 0.0
                continue
            ranked = [h for h in hits if str(Path(h.path).resolve()) in truth]
            rel = np.array([[w in truth[str(Path(h.path).resolve())] for h in ranked]])
            scores = np.arange(len(ranked), 0, -1, dtype=np.float64)[None, :]
            # the pictures the answer leaves out (a floor) rank last
            missing = sum(w in c for c in truth.values()) - int(rel.sum())
            if missing:
                rel = np.hstack([rel, np.ones((1, missing), bool)])
                scores = np.hstack([scores, np.zeros((1, missing))])
            avgp[w] = float(average_precision(scores, rel)[0])
            pairs += [(h.probability, w in truth[str(Path(h.path).resolve())])
                      for h in ranked if h.probability is not None]
    out = {"words": len(words), "avgp_all_words": round(100 * np.mean(list(avgp.values())), 2),
           "words_the_tags_hold": len(held & set(words)),
           "avgp_words_the_tags_hold": round(100 * np.mean([avgp[w] for w in words
                                                            if w in held]), 2),
           "unanswered": unanswered}
    if pairs:
        p = np.array([x for x, _ in pairs])
        y = np.array([r for _, r in pairs], bool)
        out["calibration"] = {"pairs": len(p), "ece": round(float(
            expected_calibration_error(p, y)[0]), 4), **{
            f"relevant_at_p{t:g}": {"pairs": int((p >= t).sum()),
                                    "relevant": round(float(y[p >= t].mean()), 3)
                                    if (p >= t).any() else None} for t in PROBABILITIES}}
    return out


def test_caption(pid: str) -> list[str]:
    """A Corel test picture's caption (labels/test_label)."""
    return _test_captions().get(pid, [])


def _test_captions(cache={}) -> dict:  # noqa: B006 - read once
    if not cache:
        root = corel5k_folder()
        words = (root / "labels" / "words").read_text().split()
        for line in (root / "labels" / "test_label").read_text().splitlines():
            pid, *ks = line.split()
            cache[pid] = [words[int(k) - 1] for k in ks]
    return cache


def change_tags(folder: Path, n: int) -> list[str]:
    """Add the keyword "favourite" to the first n tagged pictures (exiftool, in place)."""
    captions = corel_captions(corel5k_folder())
    chosen = [p for p in sorted(folder.glob("*.jpeg")) if p.stem in captions][:n]
    args = []
    for p in chosen:
        args += ["-XMP-dc:Subject+=favourite", "-q", "-q", "-overwrite_original", str(p),
                 "-execute"]
    (folder.parent / "change.args").write_text("\n".join(args) + "\n")
    subprocess.run(["exiftool", "-q", "-q", "-@", str(folder.parent / "change.args")],
                   check=True)
    return [p.name for p in chosen]


def measure(args) -> dict:
    run = Run("bench_folder_look.py", args.argv)
    work = args.work
    captioned, uncaptioned = map(int, args.size.split(":"))
    folder = work / f"folder-{captioned}"
    if not folder.is_dir():
        build_small_folder(folder, captioned, uncaptioned, corel5k_folder())
    shutil.rmtree(work / "old-src", ignore_errors=True)
    from pamir.features.cnn_int8 import processor  # noqa: PLC0415

    r = {**run.info(), "processor": processor(),
         "folder": {"tagged": captioned, "untagged": uncaptioned},
         "old": archive(args.old, work / "old-src"), "sides": {}, "settings": settings()}
    trees = {"old": work / "old-src", "new": Path(__file__).resolve().parents[1]}
    for name, src in trees.items():
        side = index_side(src, folder, work, name)
        side["search"] = untagged_avgp(Path(side["index"]), folder)
        r["sides"][name] = side
        print(name, side, flush=True)
    if args.changed:
        names = change_tags(folder, args.changed)
        new = r["sides"]["new"]
        t0 = time.perf_counter()
        log = work / "changed.log"
        pamir_logged(trees["new"], Path(new["cache"]),
                     ["index", str(folder), "--index", new["index"], "--no-text",
                      "--no-faces"], log)
        from pamir.index import Index  # noqa: PLC0415

        with Index.open(new["index"]) as ix:
            found = [Path(h.path).name for h in ix.search("favourite", args.changed)]
        r["changed"] = {"pictures": len(names), "seconds": round(time.perf_counter() - t0, 1),
                        "said": [x.strip() for x in log.read_text().splitlines()
                                 if "folder's look" in x],
                        "word_in_vocabulary": "favourite" in Index.open(new["index"]).vocabulary,
                        "found": len(set(found) & set(names))}
    r["costs"] = costs(trees, work, args.camera)
    if args.fit:
        model = work / "model"
        shutil.rmtree(model, ignore_errors=True)
        cache = Path(r["sides"]["new"]["cache"])
        fit_seconds = pamir_logged(trees["new"], cache, ["fit", str(folder), "-o", str(model),
                                                         "--quiet"], work / "fit.log")
        side = index_side(trees["new"], folder, work, "fitted", model, cache)
        side["fit_seconds"] = round(fit_seconds, 1)
        side["search"] = untagged_avgp(Path(side["index"]), folder)
        r["sides"]["fitted"] = side
    r["minutes"] = run.minutes()
    return r


def settings() -> dict:
    """The folder look's numbers that set its cost and its calibration (their one home:
    pamir.zeroshot.folder)."""
    from pamir.zeroshot import folder  # noqa: PLC0415

    return {k: getattr(folder, k) for k in ("SMOOTH_K", "SMOOTH_WEIGHT", "MAX_HELD_OUT",
                                            "CALIBRATION_QUERIES", "CALIBRATION_NEGATIVES")}


def costs(trees: dict, work: Path, camera: int, library: Path | None = None) -> dict:
    """`pamir index` of a folder with no keyword, old and new in turn, twice (the module's
    doc), and of the library with its keywords (library: its folder, --costs-only):
    {case: {side: [seconds]}}."""
    corel = work / "bare-corel"
    if not corel.is_dir():
        corel.mkdir()
        captions = corel_captions(corel5k_folder())
        for p in sorted((corel5k_folder() / "images").glob("*/*.jpeg")):
            if p.stem not in captions:
                shutil.copyfile(p, corel / p.name)
    cases = {"Corel test pictures": corel}
    if camera:
        cases["12-MP JPEGs"] = camera_jpegs(work / "camera", camera)
    if library is not None:
        cases["the library, three quarters tagged"] = library
    out = {}
    for case, folder in cases.items():
        out[case] = {"pictures": len([p for p in folder.iterdir() if not p.name.startswith(".")
                                      and p.suffix.lower() in (".jpeg", ".jpg")])}
        for round_ in range(2):
            for name in ("old", "new"):
                s = index_side(trees[name], folder, work, f"cost-{name}")
                out[case].setdefault(name, []).append(s["seconds"])
                print(case, name, s["seconds"], flush=True)
    return out


def camera_jpegs(folder: Path, n: int) -> Path:
    """n Corel pictures (every 7th) enlarged to 12 MP with grain, as a camera's JPEGs weigh
    (tests/media.py, the one home of the camera-like writers); kept once built."""
    from PIL import Image  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import media  # noqa: PLC0415

    folder.mkdir(parents=True, exist_ok=True)
    pictures = sorted((corel5k_folder() / "images").glob("*/*.jpeg"))
    for i in range(n):
        path = folder / f"IMG_{i:04d}.JPG"
        if path.exists():
            continue
        with Image.open(pictures[7 * i % len(pictures)]) as im:
            im = im.convert("RGB")
            size = (4240, 2832) if im.width >= im.height else (2832, 4240)
            big = np.array(im.resize(size, Image.BICUBIC))
        tmp = path.with_name(".tmp.JPG")
        media.jpeg(tmp, media.with_grain(big, i, 10), quality=90)
        tmp.rename(path)
    return folder


def report(r: dict) -> str:
    lines = report_head("A library with keywords, searched with `pamir index` alone (issue 54)",
                        r)
    f = r["folder"]
    if "processor" in r:
        p = r["processor"]
        lines += [f"Processor flags: {', '.join(p['flags'])} (VNNI {p['vnni']})."]
    if r.get("settings"):
        lines += ["Folder look (pamir.zeroshot.folder): "
                  + ", ".join(f"{k} {v:,}" for k, v in r["settings"].items()) + "."]
    names = {"old": f"main (`{r['old'][:10]}`): ImageNet's words alone",
             "new": "this tree: the folder's look (its neighbours, its keywords' words)",
             "fitted": "`pamir fit FOLDER`, then `pamir index MODEL FOLDER` (this tree)"}
    table = ["", f"{f['tagged']:,} Corel development pictures with their keywords in their "
              f"files and {f['untagged']:,} test pictures with none. The untagged pictures' "
              "AvgP (%) for their words, each word searched alone; the probability a hit "
              "carries, checked on the untagged pictures' captions.", "",
              "| side | all their words | the words the tags hold | p >= 0.5: relevant | "
              "p >= 0.7: relevant | calibration error | `pamir index` s | peak MB |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += table if r["sides"] else [""]
    for key, s in r["sides"].items():
        q = s["search"]
        cal = q.get("calibration", {})

        def at(t):
            c = cal.get(f"relevant_at_p{t:g}")
            return f"{c['relevant']} ({c['pairs']:,})" if c and c["relevant"] is not None \
                else "-"
        lines.append(f"| {names.get(key, key)} | {q['avgp_all_words']} ({q['words']}) | "
                     f"{q['avgp_words_the_tags_hold']} ({q['words_the_tags_hold']}) | "
                     f"{at(0.5)} | {at(0.7)} | {cal.get('ece', '-')} | {s['seconds']}"
                     + (f" (+ fit {s['fit_seconds']})" if "fit_seconds" in s else "")
                     + f" | {s['peak_rss_mb']} |")
    new = r["sides"].get("new", {})
    if new.get("folder_look"):
        lines += ["", "What `pamir index` said of the folder's look:", ""]
        lines += [f"    {x}" for x in new["folder_look"]]
    c = r.get("changed")
    if c:
        lines += ["", f"Tags changing: {c['pictures']} tagged pictures got the keyword "
                  f"\"favourite\" (exiftool); `pamir index` again took {c['seconds']} s "
                  f"(the changed pictures read again, the folder's look made again); the word "
                  f"is {'in' if c['word_in_vocabulary'] else 'NOT in'} the index's vocabulary "
                  f"and finds {c['found']} of them first."]
        lines += [f"    {x}" for x in c["said"]]
    if r.get("costs"):
        lines += ["", "What the look costs: `pamir index FOLDER --no-text --no-faces` (and "
                  "`--no-colour` where the tree has that pass: the older one does not) of a "
                  "folder with no keyword (the folder's neighbours alone), old and new in "
                  "turn, twice, each from an empty index and a cache with no picture's "
                  "vectors (seconds; the ratio of the medians):", "",
                  "| folder | pictures | old | new | new / old |", "|---|---:|---|---|---:|"]
        for case, c in r["costs"].items():
            ratio = np.median(c["new"]) / np.median(c["old"])
            lines.append(f"| {case} | {c['pictures']:,} | {', '.join(map(str, c['old']))} | "
                         f"{', '.join(map(str, c['new']))} | {ratio:.2f} |")
    lines += ["", f"Whole run: {r['minutes']} min.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    def options(ap):
        ap.add_argument("--size", default="1500:499", help="TAGGED:UNTAGGED pictures")
        ap.add_argument("--old", default=OLD, help="the commit the new code is compared with")
        ap.add_argument("--work", type=Path, default=Path("/tmp/pamir-folder-look"))
        ap.add_argument("--changed", type=int, default=50,
                        help="tagged pictures whose keywords change (0: none)")
        ap.add_argument("--camera", type=int, default=40,
                        help="12-MP JPEGs whose `pamir index` is timed (0: none)")

    costs_only = "--costs-only" in (sys.argv[1:] if argv is None else argv)
    args = report_cli(__doc__, "folder_look_costs" if costs_only else "folder_look", report,
                      argv, {"--fit": "also `pamir fit FOLDER` and index with the model",
                             "--costs-only": "only what the look costs, the library with its "
                                             "keywords too (results/folder_look_costs.*)"},
                      options)
    if args is None:
        return
    args.argv = sys.argv[1:] if argv is None else list(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.costs_only:
        save_report("folder_look_costs", measure_costs(args), report)
        return
    save_report("folder_look", measure(args), report)


def measure_costs(args) -> dict:
    """--costs-only: the costs alone (`costs`), the library with its keywords among them."""
    from pamir.features.cnn_int8 import processor  # noqa: PLC0415

    run = Run("bench_folder_look.py", args.argv)
    captioned, uncaptioned = map(int, args.size.split(":"))
    folder = args.work / f"folder-{captioned}"
    if not folder.is_dir():
        build_small_folder(folder, captioned, uncaptioned, corel5k_folder())
    shutil.rmtree(args.work / "old-src", ignore_errors=True)
    r = {**run.info(), "processor": processor(),
         "folder": {"tagged": captioned, "untagged": uncaptioned},
         "old": archive(args.old, args.work / "old-src"), "sides": {}, "settings": settings()}
    trees = {"old": args.work / "old-src", "new": Path(__file__).resolve().parents[1]}
    r["costs"] = costs(trees, args.work, args.camera, folder)
    r["minutes"] = run.minutes()
    return r


if __name__ == "__main__":
    main()
