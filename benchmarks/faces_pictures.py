"""The identities folder of bench_faces.py, one sub-folder per person, from git clones of three
MIT-licensed face libraries (their test and example pictures); nothing is downloaded here.

- face-api.js (justadudewhohacks/face-api.js): examples/images/NAME/NAMEk.png, eight actors,
  five pictures each;
- deepface (serengil/deepface): tests/unit/dataset, people made of the "Yes" pairs of its
  master.csv and face-recognition-pivot.csv (no "No" pair falls inside one person);
- face_recognition (ageitgey/face_recognition): examples and tests/test_images, Obama (5),
  Biden (2), Alex Lacamoire (3), Kit Harington (3), Rose Leslie (2), Lin-Manuel Miranda (1).

    python benchmarks/faces_pictures.py --face-api-js GIT_DIR --deepface GIT_DIR \
        --face-recognition GIT_DIR --out FOLDER
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
from collections import defaultdict
from pathlib import Path

FACE_API = "amy bernadette howard leonard penny raj sheldon stuart".split()
FACE_RECOGNITION = {
    "obama": ["examples/obama.jpg", "examples/obama2.jpg", "tests/test_images/obama3.jpg",
              "examples/knn_examples/test/obama1.jpg", "examples/obama-720p.jpg"],
    "biden": ["examples/biden.jpg", "examples/knn_examples/train/biden/biden2.jpg"],
    "alex_lacamoire": ["examples/alex-lacamoire.png",
                       "examples/knn_examples/train/alex_lacamoire/img1.jpg",
                       "examples/knn_examples/test/alex_lacamoire1.jpg"],
    "kit_harington": ["examples/knn_examples/train/kit_harington/john1.jpeg",
                      "examples/knn_examples/train/kit_harington/john2.jpeg",
                      "examples/knn_examples/test/johnsnow_test1.jpg"],
    "rose_leslie": ["examples/knn_examples/train/rose_leslie/img1.jpg",
                    "examples/knn_examples/train/rose_leslie/img2.jpg"],
    "lin_manuel_miranda": ["examples/lin-manuel-miranda.png"],
}
DEEPFACE = "tests/unit/dataset"


def show(git_dir: Path, path: str) -> bytes:
    return subprocess.run(["git", "--git-dir", str(git_dir), "show", f"HEAD:{path}"],
                          capture_output=True, check=True).stdout


def deepface_people(git_dir: Path) -> list[list[str]]:
    pairs = []
    for name, decision in (("master.csv", "Decision"), ("face-recognition-pivot.csv",
                                                         "decision")):
        text = show(git_dir, f"{DEEPFACE}/{name}").decode()
        pairs += [(r["file_x"].rsplit("/", 1)[-1], r["file_y"].rsplit("/", 1)[-1])
                  for r in csv.DictReader(io.StringIO(text)) if r[decision] == "Yes"]
    parent: dict[str, str] = {}

    def root(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in pairs:
        parent[root(a)] = root(b)
    groups = defaultdict(list)
    for f in list(parent):
        groups[root(f)].append(f)
    return [sorted(g) for g in sorted(groups.values(), key=lambda g: (-len(g), sorted(g)))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--face-api-js", type=Path, required=True)
    ap.add_argument("--deepface", type=Path, required=True)
    ap.add_argument("--face-recognition", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    def put(person, name, data):
        (args.out / person).mkdir(parents=True, exist_ok=True)
        (args.out / person / name).write_bytes(data)

    for who in FACE_API:
        for k in range(1, 6):
            put(who, f"faceapi_{who}{k}.png",
                show(args.face_api_js, f"examples/images/{who}/{who}{k}.png"))
    for k, files in enumerate(deepface_people(args.deepface)):
        for f in files:
            put(f"deepface{k:02d}", f"deepface_{f}", show(args.deepface, f"{DEEPFACE}/{f}"))
    for person, paths in FACE_RECOGNITION.items():
        for p in paths:
            put(person, "fr_" + p.replace("/", "_"), show(args.face_recognition, p))


if __name__ == "__main__":
    main()
