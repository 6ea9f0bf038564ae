"""Where `pamir index`'s time goes on camera-size photos (issue 52): each stage and pass.

    flock /tmp/pamir-heavy.lock python benchmarks/profile_passes.py [--photos 12]
        [--src TREE] [--old TREE] [--work /work/bench-data/camera_roll] [--stem profile_passes]

The photos and the warm one-time caches are benchmarks/camera_roll.py's (--build-only, and
one run that fills its caches).

Part 1, the stages: the reading stage's work on one photo at a time, in one thread, each
step's CPU seconds (time.thread_time, so that other work on the machine counts little) in
ms a photo, on four kinds of camera photo (benchmarks/camera_roll.py builds them): JPEG
4032 x 2688 without faces or text (Corel's landscapes and animals), the same with people
pasted on, with painted words, and iPhone-like HEIC (4032 x 3024, 512-px tiles). Each step
is the code's own function, timed by wrapping it: reading the file and its hash, the
decode (libjpeg's DCT scaling or libheif), the look (the CNN on the raster, the chunk of
CHUNK photos as the stage runs it), thumbnails, copies' look, each pass's raster reduction,
the text pass's detection and recognition, the faces pass's first look (HOG), its cues,
its second look and the embeddings. The decode sizes are what the code asks for.

Part 2, the whole command: `pamir index FOLDER` on --command-photos JPEGs as a person runs
it, sampled by py-spy (50 Hz, every thread; installed by hand, not a dependency), its
samples grouped by the stage they are in; with /usr/bin/time's peak RSS and CPU seconds.
--old runs the same for the code of an older commit's worktree (PYTHONPATH).

Writes results/STEM.json and .md.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from common.harness import RESULTS, Run, report_cli, report_head, save_report

ROOT = Path(__file__).resolve().parent.parent
STEM = "profile_passes"
KINDS = {"jpeg": "JPEG, no faces or text", "faces": "JPEG with people",
         "text": "JPEG with painted words", "heic": "HEIC (iPhone-like grid)"}


# ------------------------------------------------------------------------ part 1: stages

class Clock:
    """CPU seconds (time.thread_time of the calling thread) summed by label over every thread
    that calls a wrapped function; a call inside another wrapped one counts in both."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()

    def wrap(self, owner, name: str, label: str) -> bool:
        """owner.name timed under `label` from now on (False where the code has none)."""
        fn = getattr(owner, name, None)
        if fn is None:
            return False

        def timed(*a, **k):
            t0 = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                with self._lock:
                    self.seconds[label] += time.thread_time() - t0

        setattr(owner, name, timed)
        return True


#: (module, owner in it or None, function, label): the steps the table times, each the code's
#: own function (a function the code does not have is left out).
STEPS = [
    ("pamir.features.rasters", None, "read_item", "read a picture (all)"),
    ("pamir.features.rasters", None, "content_hash", "  hash of the bytes"),
    ("pamir.features.images", None, "decode_reduced", "  decode"),
    ("pamir.features.rasters", "Detail", "_decode", "closer look: decode again"),
    ("pamir.features.rasters", None, "_whole_reduced", "  reduce a whole decode"),
    ("pamir.features.cnn", None, "_from_raster", "look: resize for the CNN"),
    ("pamir.features.cnn", None, "pooled_batch", "look: the CNN"),
    ("pamir.features.thumbnails", None, "write_from_raster", "thumbnails"),
    ("pamir.index.stage", "_Stream", "put", "rasters handed to the passes"),
    ("pamir.duplicates.looks", None, "read_look_rasters", "copies' look"),
    ("pamir.facts.ocr", None, "read_text_rasters", "text pass (all)"),
    ("pamir.facts.ocr", "TextReader", "prepare", "  text: prepare"),
    ("pamir.facts.ocr", "TextReader", "_detect_many", "  text: detect"),
    ("pamir.facts.ocr", "TextReader", "_recognise_lines", "  text: recognise"),
    ("pamir.facts.people.pictures", None, "find_people", "faces pass (all)"),
    ("pamir.facts.people.faces", "FaceFinder", "scaled", "  faces: scale for the detector"),
    ("pamir.facts.people.faces", "FaceFinder", "_look_again", "  faces: second look (all)"),
    ("pamir.facts.people.zoom", None, "cues", "    faces: cues"),
    ("pamir.facts.people.faces", "FaceFinder", "_embed", "  faces: embed"),
    ("pamir.facts.people.pictures", None, "read_people", "  faces: regions in the files"),
]


def instrument(clock: Clock) -> list[str]:
    """Wrap STEPS' functions (before the code binds them); the labels wrapped."""
    import importlib

    done = []
    for module, owner, name, label in STEPS:
        try:
            m = importlib.import_module(module)
        except ImportError:
            continue
        target = getattr(m, owner, None) if owner else m
        if target is not None and clock.wrap(target, name, label):
            done.append(label)
    return done


def what_was_read(index_dir: Path) -> dict:
    """{photo: {"words": the single words its text facts hold, "faces": its faces found}}."""
    from pamir.index import Index

    out = {}
    with Index.open(index_dir) as ix:
        for p in ix.pictures():
            words = sorted(f.word for f in ix.facts_of(p.id) if f.kind == "text"
                           and " " not in f.word)
            out[Path(p.path).name] = {"words": words, "faces": len(ix.faces(picture=p.id))}
    return out


def stage_profile(folder: Path, n: int, cache: Path) -> dict:
    """CPU ms a photo of each step of `pamir index`'s job (every pass, no model) on the first
    n photos of `folder`, in this process, once (see the module's doc)."""
    import resource

    clock = Clock()
    labels = instrument(clock)
    from pamir.jobs.indexing import IndexJob, run_index

    with tempfile.TemporaryDirectory(dir=cache.parent) as tmp:
        photos = Path(tmp) / "photos"
        photos.mkdir()
        for p in sorted(p for p in folder.iterdir() if not p.name.startswith("."))[:n]:
            os.link(p, photos / p.name)
        os.environ["PAMIR_CACHE"] = str(Path(tmp) / "cache")
        shutil.copytree(cache, os.environ["PAMIR_CACHE"])
        before = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        report, _ = run_index(IndexJob([photos], index_dir=Path(tmp) / "index",
                                       passes=("text", "faces", "copies")))
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_SELF)
        read = what_was_read(Path(tmp) / "index")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    k = report.added or 1
    return {"photos": report.added, "labels": labels,
            "ms_per_photo": {lab: round(1000 * clock.seconds.get(lab, 0.0) / k, 1)
                             for lab in labels},
            "cpu_ms_per_photo": round(1000 * cpu / k, 1), "wall_seconds": round(wall, 1),
            "read": read,
            "found": {"with text": (report.text or {}).get("with_facts"),
                      "with faces": (report.faces or {}).get("with_facts"),
                      "faces": ((report.faces or {}).get("people") or {}).get("faces")}}


# ------------------------------------------------------------------------ part 2: command

#: A sample's stage: the first of these frames (innermost first) found in its stack.
STAGES = [
    ("faces: second look", r"FaceFinder\._look_again"),
    ("faces: first look and embed", r"FaceFinder\.find|find_faces|read_faces"),
    ("text pass", r"read_text_rasters|read_texts|TextReader"),
    ("thumbnails", r"write_from_raster|thumbnails"),
    ("reduce for a pass", r"Item\.reduced|_Stream\.put"),
    ("look: CNN", r"Session\.run|pooled_batch|_network"),
    ("look: resize", r"_from_raster|prepare_picture"),
    ("decode", r"decode_reduced|decode_rgb|load_for_detection|ImageFile\.load"),
    ("copies", r"copies_pass|read_look|look_of"),
    ("imports and models", r"_find_and_load|InferenceSession|FaceFinder\.__init__|"
                           r"shared_reader|TextReader\.__init__"),
    ("waiting on a queue", r"Condition\.wait|Queue\.get|Queue\.put"),
]


def stage_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, pattern in STAGES:
            if re.search(pattern, frame):
                return name
    return "other"


def command_profile(src: Path, folder: Path, cache: Path, work: Path) -> dict:
    """`pamir index FOLDER` from src under py-spy and /usr/bin/time -v."""
    run = work / "profile-run"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(cache, run / "cache")
    env = {**os.environ, "PYTHONPATH": str(src), "PAMIR_CACHE": str(run / "cache")}
    raw = run / "spy.txt"
    # py-spy follows the command's processes (the code before issue 44 reads its passes in
    # processes of their own); /usr/bin/time -v under it sums their CPU, and its largest
    # resident set is the largest process's
    cmd = ["py-spy", "record", "--subprocesses", "-r", "50", "-f", "raw", "-o", str(raw),
           "--", "/usr/bin/time", "-v", "-o", str(run / "time.txt"), sys.executable, "-c",
           "import sys; sys.argv[0] = 'pamir'; from pamir.cli import main; main()",
           "index", str(folder), "--index", str(run / "index"), "--json"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=run, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    counts: Counter = Counter()
    for line in raw.read_text().splitlines():
        stack, n = line.rsplit(" ", 1)
        counts[stage_of(stack.split(";")[1:])] += int(n)
    total = sum(counts.values())
    # from its own file: py-spy does not pass the command's stderr through
    time_v = dict(re.findall(r"^\s*([^:\n]+): (.+)$", (run / "time.txt").read_text(), re.M))
    shutil.rmtree(run)
    return {"wall_seconds": round(wall, 1),
            "cpu_seconds": round(float(time_v["User time (seconds)"])
                                 + float(time_v["System time (seconds)"]), 1),
            "peak_rss_mb": round(int(time_v["Maximum resident set size (kbytes)"]) / 1024),
            "samples": total,
            "share": {k: round(v / total, 3) for k, v in counts.most_common()}}


def _commit(src: Path) -> str:
    out = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "pamir"],
                           capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + (" (with changes not committed)" if dirty else "")


def main(argv=None) -> None:
    args = report_cli(__doc__, STEM, report, argv, options=_options)
    if args is not None:
        save_report(args.stem, measure(args), report)


def _options(ap) -> None:
    ap.add_argument("--work", default="/work/bench-data/camera_roll")
    ap.add_argument("--photos", type=int, default=12)
    ap.add_argument("--command-photos", type=int, default=40)
    ap.add_argument("--cache", default="/work/bench-data/camera_roll/caches/new",
                    help="a warm one-time cache (ONNX exports, the int8 text detector, the "
                    "lexicon) copied for each run (default: benchmarks/camera_roll.py's)")
    ap.add_argument("--src", default=None, help="the source tree profiled (PYTHONPATH; "
                    "default: this checkout)")
    ap.add_argument("--old", default=None, help="another source tree for part 2 (PYTHONPATH)")
    ap.add_argument("--old-cache", default="/work/bench-data/camera_roll/caches/old",
                    help="its warm one-time cache (default: benchmarks/camera_roll.py's)")
    ap.add_argument("--stem", default=STEM)
    ap.add_argument("--parts", default="stages,command",
                    help="what to measure (stages, command); the other kept from --stem's json")


def stages_in_a_process(src: Path, folder: Path, n: int, cache: Path) -> dict:
    """stage_profile in a fresh process of the code in `src` (PYTHONPATH)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import profile_passes as p; "
            "from pathlib import Path; print(json.dumps(p.stage_profile(Path(sys.argv[2]), "
            "int(sys.argv[3]), Path(sys.argv[4]))))")
    env = {**os.environ, "PYTHONPATH": str(src), "PAMIR_EMBEDDINGS": "0"}
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), str(folder),
                          str(n), str(cache)], env=env, capture_output=True, text=True,
                         cwd=cache.parent)  # not a checkout: `-c` puts the cwd on the path
    if out.returncode:
        raise SystemExit(f"the stages of {folder} ({src}) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(args) -> dict:
    work = Path(args.work)
    r = {"run": Run("profile_passes.py", sys.argv[1:]).info(), "stages": {}, "command": {}}
    src = Path(args.src or ROOT).resolve()
    r["src"] = {"path": str(src), "commit": _commit(src)}
    parts = args.parts.split(",")
    kept = RESULTS / f"{args.stem}.json"
    if "stages" not in parts and kept.is_file():  # the stages of the run before, kept
        r["stages"] = json.loads(kept.read_text())["stages"]
    for kind in (KINDS if "stages" in parts else ()):
        r["stages"][kind] = stages_in_a_process(src, work / "media" / kind, args.photos,
                                                Path(args.cache))
        print(kind, r["stages"][kind], flush=True)
    before = RESULTS / "profile_passes_before.json"
    if args.stem != "profile_passes_before" and before.is_file():  # what the code read before
        r["before"] = {"commit": json.loads(before.read_text())["src"]["commit"],
                       "read": {k: v.get("read", {}) for k, v in
                                json.loads(before.read_text())["stages"].items()}}
    r["command_photos"] = args.command_photos
    if "command" in parts and args.command_photos and shutil.which("py-spy"):
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            folder = Path(tmp) / "photos"
            folder.mkdir()
            for p in sorted((work / "media" / "jpeg").glob("*.JPG"))[:args.command_photos]:
                os.link(p, folder / p.name)
            sides = {"this code": (src, args.cache),
                     **({"old": (Path(args.old), args.old_cache or args.cache)}
                        if args.old else {})}
            for side, (tree, cache) in sides.items():
                r["command"][side] = {"src": str(tree), "commit": _commit(tree),
                                      **command_profile(tree, folder, Path(cache), Path(tmp))}
                print(side, r["command"][side], flush=True)
    return r


def report(r: dict) -> str:
    lines = [*report_head("Where `pamir index`'s time goes on camera-size photos (issue 52)",
                          r["run"]), "",
             f"Code profiled: {r['src']['commit']}.", ""]
    kinds = list(r["stages"])
    order = [label for _, _, _, label in STEPS]
    labels = [lab for lab in order if any(lab in s["ms_per_photo"] for s in r["stages"].values())]
    lines += ["## The stages: CPU ms a photo, summed over the threads", "",
              "`pamir index` with every pass and no model, in one process, each kind of photo "
              "from a fresh index and an empty feature cache. A step's time holds the steps "
              "indented under it; the whole is the process's CPU (with its one-time loads: "
              "the networks' sessions, the face models).", "",
              "| step | " + " | ".join(KINDS[k] for k in kinds) + " |",
              "|---|" + "---:|" * len(kinds)]
    for label in labels:
        shown = label.replace("  ", "&nbsp;&nbsp;")
        lines.append(f"| {shown} | " + " | ".join(
            f"{r['stages'][k]['ms_per_photo'].get(label, 0):,.1f}" for k in kinds) + " |")
    lines.append("| **the process's CPU, a photo** | " + " | ".join(
        f"**{r['stages'][k]['cpu_ms_per_photo']:,.0f}**" for k in kinds) + " |")
    lines.append("| wall seconds | " + " | ".join(
        f"{r['stages'][k]['wall_seconds']:,.1f}" for k in kinds) + " |")
    lines.append("| photos (found) | " + " | ".join(
        f"{r['stages'][k]['photos']} ({', '.join(f'{v} {n}' for n, v in r['stages'][k]['found'].items())})"
        for k in kinds) + " |")
    lines += read_section(r)
    if r["command"]:
        sides = list(r["command"])
        stages = sorted({s for c in r["command"].values() for s in c["share"]},
                        key=lambda s: -max(c["share"].get(s, 0) for c in r["command"].values()))
        lines += ["", "## The whole command, sampled (share of py-spy's samples, every thread)",
                  "", f"`pamir index` of {r.get('command_photos', '')} JPEGs (4032 x 2688) "
                  "with every pass and no model, one process from an empty index and feature "
                  "cache (the one-time caches warm), under py-spy (50 Hz, every thread) and "
                  "/usr/bin/time -v. A sample's stage: the innermost of STAGES' frames in its "
                  "stack.", "",
                  "| | " + " | ".join(f"{s} ({r['command'][s].get('commit', '')})"
                                      for s in sides) + " |",
                  "|---|" + "---:|" * len(sides)]
        for key in ("wall_seconds", "cpu_seconds", "peak_rss_mb", "samples"):
            lines.append(f"| {key} | " + " | ".join(f"{r['command'][s][key]:,}" for s in sides)
                         + " |")
        for stage in stages:
            lines.append(f"| {stage} | " + " | ".join(
                f"{100 * r['command'][s]['share'].get(stage, 0):.1f} %" for s in sides) + " |")
    return "\n".join(lines) + "\n"


def read_section(r: dict) -> list[str]:
    """The words read and the faces found on the photos with text and people (and, where
    the run kept the code's before, what that read)."""
    before = (r.get("before") or {}).get("read", {})
    out = ["", "## What the passes read", ""]
    if before:
        out += [f"Beside the code before ({r['before']['commit']}), from "
                "results/profile_passes_before.json.", ""]
    out += ["| photo | words read | faces found |" + (" words before | faces before |"
                                                      if before else ""),
            "|---|---|---:|" + ("---|---:|" if before else "")]
    for kind in ("text", "faces"):
        for name, got in sorted(r["stages"].get(kind, {}).get("read", {}).items()):
            row = f"| {name} | {' '.join(got['words']) or '–'} | {got['faces']} |"
            if before:
                b = before.get(kind, {}).get(name, {})
                row += f" {' '.join(b.get('words', [])) or '–'} | {b.get('faces', '–')} |"
            out.append(row)
    return out


if __name__ == "__main__":
    main()
