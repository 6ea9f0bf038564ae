"""People end to end (issue 34): `pamir search NAME` over the pictures nobody named, the names
given to strangers, and what the faces pass costs `pamir index`.

- Identities (--identities DIR: a sub-folder of pictures per person, the sub-folder's name the
  person's; the one measured is benchmarks/faces_pictures.py's, from three MIT-licensed face
  libraries' pictures, see results/faces.md). The folder is copied and indexed by
  `pamir index FOLDER --no-text` (no model: ImageNet's words; its faces pass). Then, per
  seed, STRANGERS people are named nowhere, and of each other person NAMED pictures with a
  face are named by an MWG face region in a sidecar (NAME.EXT.xmp, as digiKam writes it, on
  the largest face the index found), and the same `pamir index` runs again: the pictures
  whose sidecars changed are read again and every face is identified. Each named person's
  name is then searched as `pamir search NAME` does (Index.search, every hit), ranked over
  the unnamed pictures: mean AvgP (target 0.9), with every unnamed picture of the person
  relevant (those where no face was found included). Strangers: their faces given a name.
- Cost (--corel N; 5000: all of Corel 5k, as issue 34 asks): N Corel 5k pictures copied
  into a folder and indexed by `pamir index FOLDER --no-text`, with --no-faces and with
  faces, each from an empty feature cache of its own, in the order off, on, on, off
  (target: on at most 1.5x off); and faces ms per picture read in one process (decode,
  detect, embed).
- Photos (--photos): the faces pass's reader on one photo at 1, 6 and 24 megapixels.
- Enlargement (--enlargement N): what enlarging small pictures for detection
  (pamir.facts.people.faces.MAX_ENLARGE) costs and finds, at 2x, 1.5x, 1.25x and 1x, on N Corel
  pictures, the identity pictures smaller than DETECT_SIDE and the group photos beside them.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_people.py \\
        --identities /work/faces-bench/pictures --corel 5000 --enlargement 1000 --photos
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

from common.harness import HEAVY, RESULTS, Run, parser, report_head, save_report

from pamir.facts.fact import fold
from pamir.index import Index

STEM = "people"
SEEDS = (0, 1, 2, 3, 4)
#: Pictures of each person named, as in results/faces.md.
NAMED = 2
#: People named nowhere in a seed: strangers among the unnamed.
STRANGERS = 4
SUFFIXES = {".jpg", ".jpeg", ".png", ".webp"}
#: The enlargements of small pictures the study compares (pamir.facts.people.faces.MAX_ENLARGE).
ENLARGEMENTS = (2.0, 1.5, 1.25, 1.0)
COREL = Path("/work/shared/data/corel5k/images")
#: A command's environment: no lexicon of word embeddings and no embedding model, whose
#: one-off builds would count in every run and hide the ratio.
ENV = {"PAMIR_LEXICON_WORDS": "0", "PAMIR_EMBEDDINGS": "0"}

REGION = """<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF
 xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about=""
 xmlns:mwg-rs="http://www.metadataworkinggroup.com/schemas/regions/"
 xmlns:stArea="http://ns.adobe.com/xmp/sType/Area#"><mwg-rs:Regions rdf:parseType="Resource">
<mwg-rs:RegionList><rdf:Bag><rdf:li rdf:parseType="Resource"><mwg-rs:Name>{name}</mwg-rs:Name>
<mwg-rs:Type>Face</mwg-rs:Type><mwg-rs:Area stArea:x="{x}" stArea:y="{y}" stArea:w="{w}"
 stArea:h="{h}" stArea:unit="normalized"/></rdf:li></rdf:Bag></mwg-rs:RegionList>
</mwg-rs:Regions></rdf:Description></rdf:RDF></x:xmpmeta>
"""


def pamir_cli(*args, env=None) -> subprocess.CompletedProcess:
    """`pamir ARGS` of this checkout, in a child process."""
    return subprocess.run([sys.executable, "-c", "from pamir.cli import main; main()", *args],
                          capture_output=True, text=True, check=True,
                          env={**os.environ, **ENV, **(env or {})},
                          cwd=Path(__file__).resolve().parents[1])


def person_name(folder: str) -> str:
    return " ".join(w.capitalize() for w in folder.split("_"))


# ------------------------------------------------------------------------------ identities
def identities(source: Path, work: Path) -> dict:
    folder = work / "pictures"
    people = {}
    for d in sorted(p for p in source.iterdir() if p.is_dir()):
        (folder / d.name).mkdir(parents=True)
        people[d.name] = []
        for p in sorted(d.iterdir()):
            if p.suffix.lower() in SUFFIXES:
                shutil.copy(p, folder / d.name / p.name)
                people[d.name].append(str((folder / d.name / p.name).resolve()))
    index = work / "index"
    env = {"PAMIR_CACHE": str(work / "cache")}
    t = time.perf_counter()
    pamir_cli("index", str(folder), "--index", str(index), "--no-text", env=env)
    first_s = time.perf_counter() - t
    with Index.open(index) as ix:
        largest = {}
        for f in ix.faces():
            path = ix.picture(f.picture).path
            if path not in largest or f.size > largest[path].size:
                largest[path] = f
    seeds = [one_seed(seed, people, largest, folder, index, env) for seed in SEEDS]
    return {"pictures": sum(map(len, people.values())), "people": len(people),
            "with_face": len(largest), "first_index_s": round(first_s, 1), "seeds": seeds,
            "mean_avgp": round(float(np.mean([s["mean_avgp"] for s in seeds])), 4),
            "stranger_faces": sum(s["stranger_faces"] for s in seeds),
            "strangers_named": sum(s["strangers_named"] for s in seeds),
            "wrong_names": sum(s["wrong_names"] for s in seeds)}


def one_seed(seed: int, people: dict, largest: dict, folder: Path, index: Path, env) -> dict:
    rng = np.random.default_rng(seed)
    for sidecar in folder.rglob("*.xmp"):
        sidecar.unlink()
    order = sorted(people)
    strangers = set(rng.choice(order, STRANGERS, replace=False).tolist())
    named: dict[str, list[str]] = {}
    for person in order:
        if person in strangers:
            continue
        with_face = [p for p in rng.permutation(people[person]).tolist() if p in largest]
        if len(people[person]) <= NAMED or len(with_face) < NAMED:
            continue  # a person with no unnamed picture left: not searched, not a stranger
        named[person] = with_face[:NAMED]
        for p in named[person]:
            x0, y0, x1, y1 = largest[p].box
            Path(p + ".xmp").write_text(REGION.format(
                name=person_name(person), x=(x0 + x1) / 2, y=(y0 + y1) / 2, w=x1 - x0,
                h=y1 - y0))
    t = time.perf_counter()
    pamir_cli("index", str(folder), "--index", str(index), "--no-text", env=env)
    again_s = time.perf_counter() - t
    all_named = {p for ps in named.values() for p in ps}
    aps = {}
    with Index.open(index) as ix:
        n = len(ix)
        for person, paths in named.items():
            relevant = set(people[person]) - all_named
            hits = [h.path for h in ix.search(person_name(person), n)
                    if h.path not in all_named]
            aps[person] = average_precision(hits, relevant)
        stranger_faces = strangers_named = wrong = 0
        owner = {p: person for person, ps in people.items() for p in ps}
        names = {p.id: p.name for p in ix.people() if p.name}
        for f in ix.faces():
            path = ix.picture(f.picture).path
            given = names.get(f.person)
            if owner[path] in strangers:
                stranger_faces += 1
                strangers_named += given is not None
            elif (path not in all_named and given is not None and path in largest
                  and f.id == largest[path].id):  # the person's own face, named wrongly
                wrong += given != fold(person_name(owner[path]))
    return {"seed": seed, "strangers": sorted(strangers), "searched": len(aps),
            "named_pictures": len(all_named), "reindex_s": round(again_s, 1),
            "mean_avgp": round(float(np.mean(list(aps.values()))), 4),
            "avgp": {k: round(v, 4) for k, v in aps.items()},
            "stranger_faces": stranger_faces, "strangers_named": strangers_named,
            "wrong_names": wrong, "pictures": n}


def average_precision(ranked: list[str], relevant: set[str]) -> float:
    """AvgP of a ranking: the mean over the relevant pictures of the precision at each one's
    rank, 0 for those not returned."""
    if not relevant:
        return float("nan")
    found, total = 0, 0.0
    for rank, p in enumerate(ranked, 1):
        if p in relevant:
            found += 1
            total += found / rank
    return total / len(relevant)


# ------------------------------------------------------------------------------ cost
def cost(n: int, work: Path) -> dict:
    folder = work / "corel"
    folder.mkdir()
    paths = sorted(COREL.glob("*/*.jpeg"))[:n]
    for p in paths:
        shutil.copy(p, folder / f"{p.parent.name}-{p.name}")
    for p in folder.iterdir():  # in the page cache for every run alike
        p.read_bytes()
    runs = []
    for i, faces in enumerate((False, True, True, False)):
        env = {"PAMIR_CACHE": str(work / f"cache-{i}")}
        t, cpu = time.perf_counter(), _children_cpu()
        out = pamir_cli("index", str(folder), "--index", str(work / f"index-{i}"), "--no-text",
                        *([] if faces else ["--no-faces"]), "--json", env=env)
        runs.append({"faces": faces, "seconds": round(time.perf_counter() - t, 1),
                     "cpu_s": round(_children_cpu() - cpu, 1), "pass": _faces_of(out.stdout)})
        shutil.rmtree(work / f"index-{i}", ignore_errors=True)
        shutil.rmtree(work / f"cache-{i}", ignore_errors=True)
    off = np.mean([r["seconds"] for r in runs if not r["faces"]])
    on = np.mean([r["seconds"] for r in runs if r["faces"]])
    off_cpu = np.mean([r["cpu_s"] for r in runs if not r["faces"]])
    on_cpu = np.mean([r["cpu_s"] for r in runs if r["faces"]])
    from pamir.facts.people.faces import MAX_ENLARGE  # noqa: PLC0415

    return {"pictures": len(paths), "runs": runs, "off_s": round(float(off), 1),
            "on_s": round(float(on), 1), "ratio": round(float(on / off), 2),
            "off_cpu_s": round(float(off_cpu), 1), "on_cpu_s": round(float(on_cpu), 1),
            "ratio_cpu": round(float(on_cpu / off_cpu), 2),
            "max_enlarge": MAX_ENLARGE,
            "faces_ms_one_process": faces_ms(sorted(folder.iterdir())[:200]),
            "processes": _processes()}


def _children_cpu() -> float:
    """CPU seconds (user and system) of this process's finished children and theirs (a
    `pamir index` and the processes its faces pass reads in): on a shared machine, less
    swayed by the others' load than seconds of wall time."""
    import resource  # noqa: PLC0415

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _faces_of(stdout: str) -> dict | None:
    faces = json.loads(stdout).get("faces")
    if not faces:
        return None
    return {k: faces[k] for k in ("read", "seconds")} | {"faces": faces["people"]["faces"]}


def _processes() -> int:
    from pamir.index.passes import local_processes  # noqa: PLC0415

    return local_processes()


def faces_ms(paths: list[Path]) -> float:
    """ms per picture of the faces pass's reader in this one process (its models loaded)."""
    from pamir.facts.people.pictures import read_faces  # noqa: PLC0415

    read_faces(paths[:2])
    t = time.perf_counter()
    read_faces(paths)
    return round((time.perf_counter() - t) / len(paths) * 1000, 1)


#: The photo sizes the bounded detection is timed at, in megapixels.
PHOTO_SIZES = (1, 6, 24)


def megapixels(work: Path) -> dict:
    """ms a picture of the faces pass's reader (one process, best of 5) on one photo
    (tests/data/faces/obama.jpg) enlarged to each of
    PHOTO_SIZES and saved as a JPEG (quality 90): detection runs at a bounded size
    (pamir.facts.people.faces.DETECT_SIDE, the JPEG decoded at a reduced scale), so a 24-megapixel
    photo costs what a 1-megapixel one does; and the faces found."""
    from PIL import Image  # noqa: PLC0415

    from pamir.facts.people.pictures import read_faces  # noqa: PLC0415

    source = Image.open(Path(__file__).resolve().parents[1] / "tests/data/faces/obama.jpg")
    out = {}
    for mp in PHOTO_SIZES:
        path = work / f"photo-{mp}mp.jpg"
        scale = (mp * 1e6 / (source.width * source.height)) ** 0.5
        w, h = round(source.width * scale), round(source.height * scale)
        source.convert("RGB").resize((w, h), Image.Resampling.BICUBIC).save(path, quality=90)
        read_faces([path])
        times = []
        for _ in range(5):
            t = time.perf_counter()
            ((found, _),) = read_faces([path])
            times.append(time.perf_counter() - t)
        out[f"{mp} MP"] = {"size": f"{w} x {h}", "bytes": path.stat().st_size,
                           "ms": round(min(times) * 1000, 1), "faces": len(found or ())}
    return out


def enlargement(identities: Path, corel: int) -> dict:
    """What the small pictures' enlargement (pamir.facts.people.faces.MAX_ENLARGE) costs and finds:
    ms a picture (one process: decode, detect, and embed the faces found) and faces found at
    each of ENLARGEMENTS, on Corel pictures, on the identity pictures smaller than
    DETECT_SIDE, and on the group photos beside them."""
    import glob  # noqa: PLC0415

    import pamir.facts.people.faces as faces  # noqa: PLC0415

    sets = {"corel": sorted(COREL.glob("*/*.jpeg"))[:corel],
            "small identity pictures": [
                p for p in sorted(identities.glob("*/*"))
                if max(faces.load_for_detection(p)[1]) < faces.DETECT_SIDE],
            "group photos": [Path(p) for p in sorted(glob.glob(
                str(identities.parent / "groups" / "*")))]}
    chosen = faces.MAX_ENLARGE
    out = {}
    try:
        for enlarge in ENLARGEMENTS * 2:  # twice each, in turn: the machine is shared
            faces.MAX_ENLARGE = enlarge
            finder = faces.FaceFinder()
            for name, paths in sets.items():
                t = time.perf_counter()
                found = [len(finder.find(*faces.load_for_detection(p, finder.detect_side)))
                         for p in paths]
                row = out.setdefault(f"{enlarge:g}x", {}).setdefault(
                    name, {"pictures": len(paths), "ms": []})
                row["ms"].append(round((time.perf_counter() - t) / len(paths) * 1000, 1))
                row["faces"], row["with_face"] = sum(found), sum(k > 0 for k in found)
    finally:
        faces.MAX_ENLARGE = chosen
    return out


# ------------------------------------------------------------------------------ report
def report(r: dict) -> str:
    lines = report_head("People end to end: `pamir search NAME` and what faces cost "
                        "`pamir index`", r["run"])
    i = r.get("identities")
    if i:
        lines += _measured_by(r, "identities")
        lines += ["", f"Identities: {r['identities_note']}: {i['pictures']} pictures of "
                  f"{i['people']} people, a face found in {i['with_face']}; indexed by "
                  f"`pamir index FOLDER --no-text` (no model) in {i['first_index_s']} s. Per "
                  f"seed, {STRANGERS} people are strangers (named nowhere) and {NAMED} "
                  "pictures of each other person are named by an MWG face region in a "
                  "sidecar; `pamir index` again, then each name searched (Index.search, "
                  "as `pamir search NAME`) and ranked over the unnamed pictures, every "
                  "unnamed picture of the person relevant.", "",
                  "| seed | people searched | named pictures | `pamir index` again (s) | "
                  "mean AvgP | strangers' faces named | wrong names |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for s in i["seeds"]:
            lines.append(f"| {s['seed']} | {s['searched']} | {s['named_pictures']} | "
                         f"{s['reindex_s']} | {s['mean_avgp']:.3f} | {s['strangers_named']} "
                         f"of {s['stranger_faces']} | {s['wrong_names']} |")
        lines += ["", f"**Mean AvgP of `pamir search NAME` over the unnamed pictures: "
                  f"{i['mean_avgp']:.3f}** (target 0.9). Strangers' faces given a name: "
                  f"{i['strangers_named']} of {i['stranger_faces']}; named people's "
                  f"unnamed pictures whose face got another person's name: "
                  f"{i['wrong_names']}.", ""]
    c = r.get("cost")
    if c:
        lines += _measured_by(r, "cost")
        lines += ["", f"Cost: `pamir index FOLDER --no-text` on {c['pictures']:,} Corel 5k "
                  "pictures, each run from an empty feature cache of its own, the files in "
                  f"the page cache; the faces pass in {c['processes']} local processes, small "
                  f"pictures enlarged at most {c.get('max_enlarge', 2.0):g}x "
                  "(pamir.facts.people.faces.MAX_ENLARGE). Seconds of wall time, and CPU seconds of "
                  "the command and the processes it started (less swayed by the shared "
                  "machine's load).", "",
                  "| run | faces | seconds | CPU seconds | faces pass |",
                  "|---|---|---:|---:|---|"]
        for k, run in enumerate(c["runs"], 1):
            p = run["pass"]
            lines.append(f"| {k} | {'on' if run['faces'] else 'off'} | {run['seconds']} | "
                         f"{run.get('cpu_s', '')} | "
                         + (f"{p['read']} read in {p['seconds']} s, {p['faces']} faces"
                            if p else "") + " |")
        cpu = (f"; CPU seconds: on {c['on_cpu_s']}, off {c['off_cpu_s']}: "
               f"**{c['ratio_cpu']}x**" if "ratio_cpu" in c else "")
        lines += ["", f"**Faces on: {c['on_s']} s, off: {c['off_s']} s: {c['ratio']}x**{cpu} "
                  "(target at most 1.5x). Faces, one process: "
                  f"{c['faces_ms_one_process']} ms a Corel picture (decode, detect, embed).",
                  ""]
    m = r.get("photos")
    if m:
        lines += _measured_by(r, "photos")
        lines += ["", "Detection at a bounded size: the faces pass's reader on one photo "
                  "(tests/data/faces/obama.jpg) enlarged to each size and saved as a JPEG, "
                  "one process, best of 5:", "", "| photo | pixels | file | ms a picture | "
                  "faces |", "|---|---|---:|---:|---:|"]
        lines += [f"| {k} | {v['size']} | {v['bytes'] / 1e6:.1f} MB | {v['ms']} | "
                  f"{v['faces']} |" for k, v in m.items()]
        lines.append("")
    e = r.get("enlargement")
    if e:
        lines += _measured_by(r, "enlargement")
        lines += ["", "Enlargement: what enlarging a picture smaller than 1,024 pixels for "
                  "detection costs and finds (pamir.facts.people.faces.MAX_ENLARGE; HOG finds faces "
                  "of about 80 pixels, 64 at 1.25x, 40 at 2x), in one process (decode, "
                  "detect, and embed the faces found), twice each, in turn:", "",
                  "| enlargement | set | pictures | ms a picture | faces | pictures with a "
                  "face |", "|---|---|---:|---|---:|---:|"]
        for enlarge, sets in e.items():
            for name, row in sets.items():
                lines.append(f"| {enlarge} | {name} | {row['pictures']} | "
                             f"{', '.join(map(str, row['ms']))} | {row['faces']} | "
                             f"{row['with_face']} |")
        lines.append("")
    return "\n".join(lines)


def _measured_by(r: dict, part: str) -> list[str]:
    """The line naming the run that measured `part`, where another run than the report's
    last one did (`--keep`)."""
    where = r.get(f"{part}_run")
    if not where or (where["command"], where["date"]) == (r["run"]["command"], r["run"]["date"]):
        return []
    return ["", f"*Measured by* `{HEAVY} {where['command']}`, {where['date']}, load average "
            f"{where['load_average']['start']} at start, {where['load_average']['end']} at end."]


def main(argv=None):
    ap = parser(__doc__)
    ap.add_argument("--identities", type=Path, help="a sub-folder of pictures per person")
    ap.add_argument("--note", default="", help="the identities folder, as the report names it")
    ap.add_argument("--corel", type=int, default=0, help="Corel 5k pictures for the cost")
    ap.add_argument("--enlargement", type=int, default=0,
                    help="Corel pictures for the study of the enlargement (with --identities)")
    ap.add_argument("--photos", action="store_true",
                    help=f"time the faces pass's reader on a photo of {PHOTO_SIZES} megapixels")
    ap.add_argument("--keep", action="store_true",
                    help=f"keep the parts of results/{STEM}.json that this run does not "
                         "measure (each part names the run that measured it)")
    ap.add_argument("--report-only", action="store_true",
                    help=f"rewrite results/{STEM}.md from {STEM}.json, measuring nothing")
    args = ap.parse_args(argv)
    if args.report_only:
        r = json.loads((RESULTS / f"{STEM}.json").read_text())
        (RESULTS / f"{STEM}.md").write_text(report(r))
        return
    if args.enlargement and not args.identities:
        ap.error("--enlargement needs --identities (its small pictures and group photos)")
    run = Run("bench_people.py", argv)
    r = json.loads((RESULTS / f"{STEM}.json").read_text()) if args.keep else {}
    with tempfile.TemporaryDirectory(prefix="pamir-people-") as tmp:
        if args.identities:
            r["identities_note"] = args.note or str(args.identities)
            r["identities"] = identities(args.identities, Path(tmp) / "ids")
            r["identities_run"] = run.info()
        if args.corel:
            (Path(tmp) / "cost").mkdir()
            r["cost"] = cost(args.corel, Path(tmp) / "cost")
            r["cost_run"] = run.info()
        if args.photos:
            r["photos"] = megapixels(Path(tmp))
            r["photos_run"] = run.info()
    if args.enlargement:
        r["enlargement"] = enlargement(args.identities, args.enlargement)
        r["enlargement_run"] = run.info()
    r["run"] = run.info()
    save_report(STEM, r, report)


if __name__ == "__main__":
    main()
