"""Folders of Corel pictures with their keywords written into the files (exiftool), as a
person's tagged folder holds them: every picture, the ways of writing keywords in turn
(`build_tagged_folder`, bench_metadata and bench_facts), or a small folder of a few
captioned pictures and more without (`build_small_folder`); and `pamir` run on them
(`run_pamir`).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .harness import REPO

#: The tagged Corel folder bench_metadata and bench_facts build (never in the repository).
METADATA_WORK = Path("/tmp/pamir-bench-metadata")


WAYS = ("IPTC Keywords", "XMP dc:subject", "XMP lr:hierarchicalSubject",
        "XMP digiKam:TagsList", "EXIF XPKeywords", "sidecar NAME.EXT.xmp", "sidecar NAME.xmp")


def corel_captions(root: Path, labels: str = "training_label") -> dict[str, list[str]]:
    """{picture id: its Corel caption} of a labels file (training_label, test_label)."""
    words = (root / "labels" / "words").read_text().split()
    out = {}
    for line in (root / "labels" / labels).read_text().splitlines():
        pid, *ks = line.split()
        out[pid] = [words[int(k) - 1] for k in ks]
    return out


def exiftool_args(path: Path, way: str, words: list[str]) -> list[str]:
    """One -execute block of exiftool's argument file."""
    if way == "IPTC Keywords":
        tags = [f"-IPTC:Keywords={w}" for w in words]
    elif way == "XMP dc:subject":
        tags = [f"-XMP-dc:Subject={w}" for w in words]
    elif way == "XMP lr:hierarchicalSubject":
        tags = [f"-XMP-lr:HierarchicalSubject=corel|{w}" for w in words[:1]] + \
               [f"-XMP-lr:HierarchicalSubject={w}" for w in words[1:]]
    elif way == "XMP digiKam:TagsList":
        tags = [f"-XMP-digiKam:TagsList={w}" for w in words]
    elif way == "EXIF XPKeywords":
        tags = [f"-XPKeywords={';'.join(words)}"]
    elif way == "sidecar NAME.EXT.xmp":
        return [*(f"-XMP-dc:Subject={w}" for w in words), "-q", "-q", "-o", f"{path}.xmp",
                str(path), "-execute"]
    else:
        return [*(f"-XMP-dc:Subject={w}" for w in words), "-q", "-q", "-o",
                str(path.with_suffix(".xmp")), str(path), "-execute"]
    return [*tags, "-q", "-q", "-overwrite_original", str(path), "-execute"]


def build_tagged_folder(root: Path) -> dict:
    """bench_metadata's folder: every Corel picture, its keywords written one of the WAYS,
    and its table (rebuilt from scratch)."""
    if METADATA_WORK.exists():
        shutil.rmtree(METADATA_WORK)
    pics = METADATA_WORK / "pictures"
    pics.mkdir(parents=True)
    captions = corel_captions(root)
    for src in sorted((root / "images").glob("*/*.jpeg")):
        shutil.copyfile(src, pics / src.name)
    args, ways = [], {}
    for i, pid in enumerate(sorted(captions)):
        way = WAYS[i % len(WAYS)]
        ways[way] = ways.get(way, 0) + 1
        args += exiftool_args(pics / f"{pid}.jpeg", way, captions[pid])
    (METADATA_WORK / "exiftool.args").write_text("\n".join(args) + "\n")
    started = time.perf_counter()
    subprocess.run(["exiftool", "-q", "-q", "-@", str(METADATA_WORK / "exiftool.args")], check=True)
    write_s = time.perf_counter() - started
    # the lr:hierarchicalSubject pictures carry "corel" as their first level: the table says
    # so too, as `pamir fit FOLDER` reads each level as a word
    rows = ["path\tkeywords"]
    hier = {pid for i, pid in enumerate(sorted(captions))
            if WAYS[i % len(WAYS)] == "XMP lr:hierarchicalSubject"}
    for p in sorted(pics.glob("*.jpeg")):  # the order `pamir fit FOLDER` reads them in
        words = captions.get(p.stem, [])
        if p.stem in hier:
            words = ["corel"] + words
        rows.append(f"{p.name}\t{' '.join(words)}")
    (pics / "captions.tsv").write_text("\n".join(rows) + "\n")
    return {"pictures": len(list(pics.glob("*.jpeg"))), "tagged": len(captions), "ways": ways,
            "exiftool_write_seconds": round(write_s, 1)}


def run_pamir(argv: list[str], code: Path = REPO, cache: Path | None = None,
          cpu: list | None = None) -> tuple[float, str]:
    """(seconds, output) of `pamir ARGV` run from the checkout `code`, with the feature cache
    `cache` (default: the benchmark's shared one); its CPU seconds appended to `cpu`."""
    env = dict(os.environ, PYTHONPATH=str(code), PAMIR_CACHE=str(cache or METADATA_WORK / "cache"),
               PAMIR_EMBEDDINGS="0")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", "from pamir.cli import main; main()",
                        *map(str, argv)], env=env, capture_output=True, text=True, cwd="/tmp")
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append(round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
                         2))
    if r.returncode:
        raise SystemExit(f"pamir {' '.join(map(str, argv))} failed:\n{r.stdout}\n{r.stderr}")
    return seconds, r.stdout + r.stderr

#: The draw of bench_small_folders' pictures (and of the refit's added ones, SEED + 1).
SMALL_FOLDER_SEED = 0


def build_small_folder(dest: Path, captioned: int, uncaptioned: int, corel: Path) -> dict:
    """The folder: `captioned` development pictures with keywords in their files, and
    `uncaptioned` test pictures without."""
    captions = corel_captions(corel)
    rng = np.random.default_rng(SMALL_FOLDER_SEED)
    dev = sorted(captions)
    test = sorted(p.stem for p in (corel / "images").glob("*/*.jpeg") if p.stem not in captions)
    chosen = [dev[i] for i in sorted(rng.choice(len(dev), captioned, replace=False))]
    bare = [test[i] for i in sorted(rng.choice(len(test), uncaptioned, replace=False))]
    where = {p.stem: p for p in (corel / "images").glob("*/*.jpeg")}
    dest.mkdir(parents=True)
    args = []
    for i, pid in enumerate(chosen):
        shutil.copyfile(where[pid], dest / f"{pid}.jpeg")
        args += exiftool_args(dest / f"{pid}.jpeg", WAYS[i % len(WAYS)], captions[pid])
    for pid in bare:
        shutil.copyfile(where[pid], dest / f"{pid}.jpeg")
    (dest.parent / f"{dest.name}.args").write_text("\n".join(args) + "\n")
    subprocess.run(["exiftool", "-q", "-q", "-@", str(dest.parent / f"{dest.name}.args")],
                   check=True)
    return {"captioned": captioned, "uncaptioned": uncaptioned}


def built(folder: Path, spec: dict) -> bool:
    """Whether folder holds media built to spec (mark_built wrote it after the last file)."""
    marker = folder / ".built.json"
    return marker.is_file() and json.loads(marker.read_text()) == spec


def mark_built(folder: Path, spec: dict) -> None:
    (folder / ".built.json").write_text(json.dumps(spec))
