"""`pamir annotate --xmp` with no model on Corel pictures: how many get a word (issue 54).

    flock /tmp/pamir-heavy.lock python benchmarks/bench_annotate_xmp.py [--old main]
        [--pictures 100] [--library-index DIR --library-folder DIR]

Every Corel picture carries a person's caption, so each is a picture a person would caption.
PICTURES Corel test pictures (every fifth of the 499, in id order) are copied into a folder of
their own (nothing is written beside ../shared's pictures), and each side (OLD: a `git
archive` of --old; NEW: this tree) runs `pamir annotate --xmp` over them with no model and no
index ($PAMIR_INDEX names an empty place), as a person does on a bare folder. Measured from
the XMP sidecars each side leaves (NAME.EXT.xmp, dc:subject): the pictures with at least one
word written, the words written, the share of them in the picture's Corel caption (a lower
bound on right: a caption has 1 to 5 words), and what the command printed for a picture it
wrote nothing for.

With --library-index and --library-folder (bench_folder_look's index of a folder where three
quarters of the pictures carry keywords, made by the old tree, and that folder), the untagged
pictures of that folder (copied) are annotated with --index: the folder's own words join
ImageNet's. The old side reads that index; the new side a copy of it whose folder look this
tree made again (pamir.jobs.folder_look.refresh, forced: what `pamir index` does when the
look's tags change), which chooses the folder words' bar on its held-out tagged pictures.

Writes benchmarks/results/annotate_xmp.json and .md (--report-only rewrites the .md).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

# this tree's pamir (the new side, whose folder look refreshed_index makes), then common/
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]
from common.folders import corel_captions  # noqa: E402
from common.harness import (Run, archive, corel5k_folder, report_cli,  # noqa: E402
                            report_head, save_report)

_SUBJECT = re.compile(r"<dc:subject>(.*?)</dc:subject>", re.S)
_ITEM = re.compile(r"<rdf:li>(.*?)</rdf:li>", re.S)


def test_captions() -> dict[str, list[str]]:
    """{picture id: its Corel caption} of the test pictures (labels/test_label)."""
    return corel_captions(corel5k_folder(), "test_label")


def written(picture: Path) -> list[str]:
    """The dc:subject words of a picture's NAME.EXT.xmp sidecar ([] without one)."""
    sidecar = picture.with_name(picture.name + ".xmp")
    if not sidecar.is_file():
        return []
    m = _SUBJECT.search(sidecar.read_text(errors="replace"))
    return [w.strip() for w in _ITEM.findall(m.group(1))] if m else []


def caption_forms(caption) -> set[str]:
    """A caption's words and their singulars (pamir.text.bridge.lemmas, as nouns)."""
    from pamir.text.bridge import lemmas  # noqa: PLC0415

    return set(caption) | {f for w in caption for f in lemmas(w, nouns=True)}


def annotate(src: Path, pictures: list[Path], captions: dict, index: Path | None) -> dict:
    """`pamir annotate --xmp PICTURES` from source tree src; what it wrote, and said."""
    for p in pictures:
        p.with_name(p.name + ".xmp").unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(src), "PAMIR_INDEX": "/nonexistent/pamir-index"}
    code = "import sys; sys.argv[0] = 'pamir'; from pamir.cli import main; main()"
    args = ["annotate", "--xmp", *map(str, pictures), *(["--index", str(index)] if index else [])]
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=src, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"pamir annotate failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    words = {p.stem: written(p) for p in pictures}
    n_words = sum(len(w) for w in words.values())
    right = sum(w in captions.get(pid, ()) for pid, ws in words.items() for w in ws)
    # Corel's captions are plural where a person's word is singular ("buildings", "building")
    singular = sum(w in caption_forms(captions.get(pid, ())) for pid, ws in words.items()
                   for w in ws)
    said = done.stdout + done.stderr  # the XMP lines go to the console (stderr)
    xmp_lines = [x.strip() for x in said.splitlines() if x.strip().startswith("XMP:")]
    none = [x for x in xmp_lines if "no word written" in x]
    return {"seconds": round(seconds, 1), "pictures": len(pictures),
            "with_a_word": sum(bool(w) for w in words.values()),
            "words_written": n_words,
            "in_caption": round(right / n_words, 3) if n_words else None,
            "in_caption_or_singular": round(singular / n_words, 3) if n_words else None,
            "words": {pid: ws for pid, ws in words.items() if ws},
            "without_a_word_said_why": len(none),
            "bars": [x.strip() for x in said.splitlines()
                     if x.strip().startswith("XMP sidecars:")][:1],
            "said_none": none[:5],
            "said_some": [x for x in xmp_lines if "no word written" not in x][:5]}


def refreshed_index(old: Path, work: Path) -> tuple[Path, dict]:
    """A copy of the library's index whose folder look this tree made again (forced), and
    what the refresh said of its words' bar."""
    from pamir import config  # noqa: PLC0415
    from pamir.index import Index  # noqa: PLC0415
    from pamir.jobs import folder_look  # noqa: PLC0415
    from pamir.zeroshot.classes import ZeroCaptionSystem  # noqa: PLC0415

    new = work / "library-index-new"
    shutil.copytree(old, new)
    system = ZeroCaptionSystem(config.default_cache_dir())
    with Index.open(new, writable=True) as ix:
        folder_look.attach(system, ix)
        done = folder_look.refresh(ix, system, force=True) or {}
    held = done.get("held_out") or {}
    return new, {"seconds": done.get("seconds"), "held_out_avgp": held.get("avgp"),
                 "write": held.get("write")}


def measure(args) -> dict:
    from pamir.features.cnn_int8 import processor  # noqa: PLC0415

    run = Run("bench_annotate_xmp.py", args.argv)
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    captions = test_captions()
    every = sorted((corel5k_folder() / "images").glob("*/*.jpeg"),
                   key=lambda p: (int(p.parent.name), int(p.stem)))
    test = [p for p in every if p.stem in captions]
    chosen = test[::max(1, len(test) // args.pictures)][: args.pictures]
    bare = work / "bare"
    bare.mkdir()
    pictures = [Path(shutil.copyfile(p, bare / p.name)) for p in chosen]
    r = {**run.info(), "processor": processor(), "cache": os.environ.get("PAMIR_CACHE"),
         "old": archive(args.old, work / "old-src"), "sides": {}}
    trees = {"old": work / "old-src", "new": Path(__file__).resolve().parents[1]}
    for name, src in trees.items():
        r["sides"][name] = annotate(src, pictures, captions, None)
        print(name, r["sides"][name]["with_a_word"], flush=True)
    if args.library_index:
        train = corel_captions(corel5k_folder())
        untagged = sorted(p for p in args.library_folder.glob("*.jpeg") if p.stem not in train)
        lib = work / "library"
        lib.mkdir()
        copies = [Path(shutil.copyfile(p, lib / p.name)) for p in untagged]
        new_index, refresh = refreshed_index(args.library_index, work)
        r["library"] = {"index": str(args.library_index), "refresh": refresh,
                        "old": annotate(trees["old"], copies, captions, args.library_index),
                        "new": annotate(trees["new"], copies, captions, new_index),
                        "new_without_index": annotate(trees["new"], copies, captions, None)}
        print("library", {k: v["with_a_word"] for k, v in r["library"].items()
                          if isinstance(v, dict) and "with_a_word" in v}, flush=True)
    r["minutes"] = run.minutes()
    return r


def report(r: dict) -> str:
    lines = report_head("`pamir annotate --xmp` with no model (issue 54)", r)
    p = r["processor"]
    lines += [f"Processor flags: {', '.join(p['flags'])} (VNNI {p['vnni']}); feature cache "
              f"{r['cache']}.", "",
              "Each picture carries a person's Corel caption. Words written: the sidecar's "
              "dc:subject; \"in the caption\": the share of them the picture's Corel caption "
              "holds (a lower bound on right).", "",
              "| pictures | side | with at least one word written | words written | in the "
              "caption | in the caption, or a caption word's singular | without a word, and "
              "said why | seconds |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    rows = [("Corel test pictures, no index", f"old (main `{r['old'][:10]}`)", r["sides"]["old"]),
            ("Corel test pictures, no index", "new (this tree)", r["sides"]["new"])]
    if r.get("library"):
        lib = r["library"]
        rows += [*([("the library's untagged pictures, `--index` of its folder",
                     f"old (main `{r['old'][:10]}`)", lib["old"])] if "old" in lib else []),
                 ("the library's untagged pictures, `--index` of its folder", "new",
                  lib["new"]),
                 ("the library's untagged pictures, no index", "new", lib["new_without_index"])]
    for what, side, x in rows:
        lines.append(f"| {what} | {side} | {x['with_a_word']} of {x['pictures']} "
                     f"({100 * x['with_a_word'] / x['pictures']:.0f}%) | {x['words_written']} | "
                     f"{x['in_caption'] if x['in_caption'] is not None else '-'} | "
                     f"{x.get('in_caption_or_singular') or '-'} | "
                     f"{x['pictures'] - x['with_a_word']}, "
                     f"{x.get('without_a_word_said_why', '-')} | {x['seconds']} |")
    refresh = (r.get("library") or {}).get("refresh")
    if refresh and refresh.get("write"):
        w = refresh["write"]
        lines += ["", f"The new side's copy of the library's index: its folder look made again "
                  f"in {refresh['seconds']} s (held-out AvgP {refresh['held_out_avgp']}); the "
                  f"folder words' bar chosen on its held-out tagged pictures: **{w['bar']}** "
                  f"(right {w['precision']} of the time there; {w['pictures_with_a_word']} of "
                  "them get a word). Right / written at each bar: "
                  + ", ".join(f"{b}: {n}/{t}" for b, (n, t) in w["grid"].items()) + "."]
        if w.get("imagenet"):
            i = w["imagenet"]
            lines += ["", f"ImageNet's words judged by the same held-out pictures' tags (right: "
                      f"the tags hold the word or its singular): bar **{i['bar']}** (right "
                      f"{i['precision']}); right / written at each bar: "
                      + ", ".join(f"{b}: {n}/{t}" for b, (n, t) in i["grid"].items()) + "."]
    for what, side, x in rows:
        if side.startswith("old"):
            continue
        lines += ["", f"What the new side printed ({what}), a few pictures with and without a "
                  "word:", ""]
        lines += [f"    {s}" for s in x.get("bars", []) + x["said_some"][:3] + x["said_none"][:3]]
    common_words = {}
    for ws in r["sides"]["new"]["words"].values():
        for w in ws:
            common_words[w] = common_words.get(w, 0) + 1
    top = sorted(common_words.items(), key=lambda kv: -kv[1])[:15]
    lines += ["", "The words the new side wrote most on the Corel test pictures: "
              + ", ".join(f"{w} {n}" for w, n in top) + ".", "",
              f"Whole run: {r['minutes']} min.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    def options(ap):
        ap.add_argument("--old", default="main", help="the commit the new code is compared with")
        ap.add_argument("--pictures", type=int, default=100)
        ap.add_argument("--work", type=Path, default=Path("/tmp/pamir-annotate-xmp"))
        ap.add_argument("--library-index", type=Path, default=None)
        ap.add_argument("--library-folder", type=Path, default=None)

    args = report_cli(__doc__, "annotate_xmp", report, argv, None, options)
    if args is None:
        return
    args.argv = sys.argv[1:] if argv is None else list(argv)
    save_report("annotate_xmp", measure(args), report)


if __name__ == "__main__":
    main()
