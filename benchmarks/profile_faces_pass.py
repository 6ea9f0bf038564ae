"""Where the faces pass's time goes on camera-size photos without faces (issue 52): CPU ms
per photo by stage, the code before issue 44 (96353846, a worktree of it) and this
checkout side by side, each in a process of its own, one photo after another on one thread.

Old: the pass decodes each photo for itself (libjpeg at 1/2, resized to 1,024 px), runs
HOG, embeds what it finds. New: the reading stage's decode (pamir.features.rasters.read_item
at the faces' need: libjpeg at 1/4, 1,008 px; or read ahead at 1/2 and reduced), then the
pass as the stage hands it a picture (pamir.facts.people.pictures.read_face_rasters): HOG,
the cues, the closer look's decode where a cue asks, the looks, the embeddings. The decode is
shown apart: in `pamir index` the stage's decode feeds every pass, not the faces alone.

Photos: the first N of benchmarks/camera_roll.py's JPEGs (Corel 5k landscapes and animals
enlarged to 4032 x 2688 with grain, quality 90), which it builds when missing.

    python benchmarks/profile_faces_pass.py [--old /work/wt-old96] [--n 20] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Where camera_roll.py builds its media (its WORK).
CAMERA_ROLL = Path("/work/bench-data/camera_roll")
RESULTS = ROOT / "benchmarks" / "results"
STEM = "profile_faces_pass"

#: Run in the side's process (its own pamir on PYTHONPATH): {stage: CPU seconds} summed over
#: the photos, stages timed by wrapping the functions the pass calls.
WORKER = r'''
import json, sys, time
from collections import defaultdict
side, ahead, paths = sys.argv[1], sys.argv[2] == "ahead", sys.argv[3:]
T, calls, found = defaultdict(float), defaultdict(int), 0
def timed(name, fn):
    def wrapped(*a, **k):
        t = time.process_time()
        try:
            return fn(*a, **k)
        finally:
            T[name] += time.process_time() - t
            calls[name] += 1
    return wrapped
if side == "old":
    from pamir.people import faces as F
else:
    from pamir.facts.people import faces as F, zoom
    from pamir.facts.people.pictures import read_face_rasters
    from pamir.features.rasters import SLACK, Need, read_item
finder = F.face_finder()
detector = finder._detector
class Detector:  # dlib's object cannot be wrapped attribute by attribute
    def run(self, image, *args):
        first = image.shape[1] >= 600  # the whole picture, not a look's cut-out
        return timed("detect" if first else "looks: detect", detector.run)(image, *args)
finder._detector = Detector()
finder._embed = timed("embeddings", finder._embed)
if side == "new":
    zoom.cues = timed("cues", zoom.cues)
    zoom.look = timed("looks: cut", zoom.look)
for path in paths:
    if side == "old":
        image, full = timed("decode", F.load_for_detection)(path, finder.detect_side)
        found += len(timed("pass", finder.find)(image, full))
        continue
    needs = [Need("faces", long=F.DETECT_SIDE, slack=SLACK)]
    item = timed("decode", read_item)(path, needs, zoom.ZOOM_SIDE, ahead=ahead)
    kept, rgb = item.for_pass(F.DETECT_SIDE, zoom.ZOOM_SIDE)
    if kept.closer is not None:
        kept.closer._decode = timed("closer look: decode", kept.closer._decode)
    faces, _ = timed("pass", read_face_rasters)([(kept.path, rgb, kept.size, kept.detail)])[0]
    found += len(faces or [])
print(json.dumps({"seconds": T, "calls": calls, "faces": found}))
'''


def photos(n: int) -> list[str]:
    """The camera roll's first n JPEGs (camera_roll.py --build-only makes them; no benchmark
    imports another)."""
    paths = sorted(str(p) for p in (CAMERA_ROLL / "media" / "jpeg").glob("IMG_*.JPG"))[:n]
    if len(paths) < n:
        sys.exit(f"{CAMERA_ROLL}: fewer than {n} JPEGs; run python benchmarks/camera_roll.py "
                 "--build-only first")
    return paths


def cpu_flags() -> str:
    """The vector instructions HOG and libjpeg may use on this CPU."""
    try:
        words = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return "flags unknown"
    return " ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni") if f in words)


def measure(src: Path, side: str, ahead: bool, paths: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([sys.executable, "-c", WORKER, side, "ahead" if ahead else "-",
                          *paths], env=env, cwd=src, capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    n = len(paths)
    return {"ms_per_photo": {k: round(1000 * v / n, 1) for k, v in r["seconds"].items()},
            "calls": r["calls"], "faces": r["faces"]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, default=Path("/work/wt-old96"))
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    from common.harness import Run, checkout_commit, report_head  # noqa: PLC0415

    run = Run("profile_faces_pass.py", argv)
    run.machine += f" ({cpu_flags()})"
    paths = photos(args.n)
    sides = [("old", args.old, "old", False), ("new", ROOT, "new", False),
             ("new, read ahead", ROOT, "new", True)]
    runs = {name: [measure(src, side, ahead, paths) for _ in range(args.repeats)]
            for name, src, side, ahead in sides}
    r = {**run.info(), "photos": len(paths), "new_commit": checkout_commit(), "runs": runs}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{STEM}.json").write_text(json.dumps(r, indent=1) + "\n")
    stages = ["decode", "detect", "cues", "closer look: decode", "looks: cut",
              "looks: detect", "embeddings", "pass"]
    lines = report_head("The faces pass on camera-size photos without faces, by stage "
                        "(issue 52)", r, heavy=False)
    lines += ["", f"{len(paths)} photos of benchmarks/camera_roll.py's jpeg case; CPU ms per "
              "photo (process time, one thread), each repeat a fresh process; `pass` is "
              "everything after the decode (in `pamir index` the stage's decode feeds every "
              "pass). Old = " + str(args.old) + "; new = " + r["new_commit"][:12] + ".", "",
              "| side | repeat | " + " | ".join(stages) + " | faces found |",
              "|---|---:|" + "---:|" * len(stages) + "---:|"]
    for name, reps in runs.items():
        for i, m in enumerate(reps, 1):
            cells = [f"{m['ms_per_photo'][s]:.1f}" if s in m["ms_per_photo"] else "–"
                     for s in stages]
            lines.append(f"| {name} | {i} | " + " | ".join(cells) + f" | {m['faces']} |")
    (RESULTS / f"{STEM}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
