"""People (issue 34): faces found and embedded (pamir.facts.people), names carried to unnamed
pictures, strangers, unnamed people, and the cost per picture.

Identities: a folder with one sub-folder per person (the sub-folder's name is the person),
given on the command line; nothing is fetched at run time. The one measured was built from
three MIT-licensed face libraries' test and example pictures (benchmarks/results/faces.md
says which): face_recognition's (Obama, Biden, Alex Lacamoire, Kit Harington, Rose Leslie,
Lin-Manuel Miranda), face-api.js's (eight actors, five pictures each) and deepface's
unit-test pictures (identities from its master.csv's "Yes" pairs).

- Naming: 2 pictures of each person are named (as a tool's regions would), the rest are
  unnamed; each person's search ranks the unnamed pictures by the distance of their nearest
  face to that person's named faces. Mean AvgP over people with unnamed pictures, over
  seeds; "given" counts only the pictures whose face is given the name at NAME_DISTANCE.
- Strangers: each person in turn is left out of the named faces; the share of their faces
  given someone's name at each threshold (and, for the others, the share given the right
  name). The threshold is chosen as the largest one whose stranger rate is at most
  MAX_STRANGER_RATE (none).
- Unnamed people: every face grouped by Chinese whispers (dlib) and by DBSCAN (scikit-learn,
  as Immich), pairwise precision / recall / F1 against the identities.
- Detectors (--groups DIR, group photos): faces found and ms per picture, dlib's HOG at
  several sizes against dlib's CNN (MMOD) detector.
- Embedding from the scaled picture against the full-resolution one (pictures larger than
  DETECT_SIDE).
- Cost (--corel N): faces ms per picture (decode, detect, embed) on N Corel 5k pictures, and
  `pamir index` (no model) on the same pictures, new to its cache and its startup taken out,
  for the ratio (the index with faces on is the lead's integration: this is its estimate).

    flock /tmp/pamir-heavy.lock python benchmarks/bench_faces.py --identities DIR \
        [--groups DIR] [--corel 100]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common.harness import RESULTS, Run, report_head, write_json

from pamir.evaluation.metrics import average_precision
from pamir.features.images import load_rgb
from pamir.facts.people import (DETECT_SIDE, NAME_DISTANCE, FaceFinder, assign,
                                load_for_detection, person_distances)
from pamir.facts.people.naming import chinese_whispers
from pamir.facts.people.faces import MAX_ENLARGE

STEM = "faces"
SEEDS = (0, 1, 2, 3, 4)
NAMED_PER_PERSON = 2
#: The share of strangers' faces that may be given someone's name at the chosen threshold:
#: none (a wrong name is worse than no name: an unnamed person can be named on the page).
MAX_STRANGER_RATE = 0.0
THRESHOLDS = np.round(np.arange(0.30, 0.701, 0.02), 2)
GROUP_THRESHOLDS = (0.40, 0.45, 0.50, 0.55, 0.60)
SUFFIXES = {".jpg", ".jpeg", ".png"}
#: Corel pictures indexed first, so that the index's startup is out of its per-picture cost.
WARM_UP = 10


class FullResolution(FaceFinder):
    """Embeds from the picture as given (for embedding from the full-resolution picture)."""

    def scaled(self, image):
        return np.ascontiguousarray(image)


def pictures(folder: Path) -> dict[str, list[Path]]:
    return {d.name: sorted(p for p in d.iterdir() if p.suffix.lower() in SUFFIXES)
            for d in sorted(folder.iterdir()) if d.is_dir()}


def main_face(faces):
    """The picture's person: its largest face (the pictures show one person each, some with
    others behind)."""
    return max(faces, key=lambda f: f.size) if faces else None


def read_identities(folder: Path, finder: FaceFinder):
    people = pictures(folder)
    full = FullResolution()
    rows, cpu = [], 0.0
    for person, paths in people.items():
        for p in paths:
            t = time.process_time()
            image, size = load_for_detection(p)
            faces = finder.find(image, size)
            cpu += time.process_time() - t
            face = main_face(faces)
            row = {"person": person, "path": str(p), "faces": len(faces),
                   "embedding": face.embedding if face is not None else None,
                   "full": None, "long_side": max(size)}
            if face is not None and max(size) > DETECT_SIDE:
                row["full"] = full.embed(load_rgb(p), face.box).embedding
            rows.append(row)
    return rows, cpu / max(len(rows), 1) * 1000


def split(rows, seed: int):
    """Indices of named and unnamed pictures: NAMED_PER_PERSON of each person, seeded."""
    rng = np.random.default_rng(seed)
    named, unnamed = [], []
    by_person: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_person.setdefault(r["person"], []).append(i)
    for person, idx in by_person.items():
        idx = list(rng.permutation(idx))
        have = [i for i in idx if rows[i]["embedding"] is not None]
        # a person with one picture is nobody's name: a stranger among the unnamed
        take = have[:NAMED_PER_PERSON] if len(idx) > 1 else []
        named += take
        unnamed += [i for i in idx if i not in take]
    return named, unnamed


def naming(rows, key: str = "embedding"):
    """Mean AvgP of each person's search over the unnamed pictures, per seed."""
    out = []
    for seed in SEEDS:
        named, unnamed = split(rows, seed)
        def emb(i):
            return rows[i][key] if rows[i][key] is not None else rows[i]["embedding"]

        N = np.stack([emb(i) for i in named])
        names = [rows[i]["person"] for i in named]
        have = [i for i in unnamed if rows[i]["embedding"] is not None]
        people, D = person_distances(np.stack([emb(i) for i in have]), N, names)
        # a picture with no face found is ranked last for everyone
        Dall = np.full((len(unnamed), len(people)), np.inf)
        Dall[[unnamed.index(i) for i in have]] = D
        rel = np.array([[rows[i]["person"] == p for i in unnamed] for p in people])
        ok = rel.sum(1) > 0
        scores = -np.where(np.isinf(Dall), 1e6, Dall).T
        ranked = average_precision(scores[ok], rel[ok])
        given = np.where(Dall.T <= NAME_DISTANCE, scores, -1e7)
        # only the pictures given the name are returned: the others count as not found
        given_ap = [_ap_returned(given[k], rel[k]) for k in np.flatnonzero(ok)]
        out.append({"seed": seed, "people": int(ok.sum()), "unnamed": len(unnamed),
                    "avgp_ranked": float(ranked.mean()), "avgp_given": float(np.mean(given_ap))})
    return out


def _ap_returned(scores, rel) -> float:
    order = np.argsort(-scores, kind="stable")
    returned = scores[order] > -1e7
    hits = rel[order] & returned
    prec = np.cumsum(hits) / np.arange(1, len(order) + 1)
    return float((prec * hits).sum() / max(rel.sum(), 1))


def strangers(rows):
    """Leave each person out of the named faces in turn: distances of their faces to the
    nearest named person (strangers), and of the others' unnamed faces (genuine)."""
    stranger_d, genuine = [], []  # genuine: (distance to nearest, nearest is right)
    persons = sorted({r["person"] for r in rows})
    for seed in SEEDS:
        named, unnamed = split(rows, seed)
        for out in persons:
            keep = [i for i in named if rows[i]["person"] != out]
            N = np.stack([rows[i]["embedding"] for i in keep])
            names = [rows[i]["person"] for i in keep]
            for i in unnamed + [j for j in named if rows[j]["person"] == out]:
                if rows[i]["embedding"] is None:
                    continue
                (name, d), = assign(rows[i]["embedding"][None], N, names, threshold=9.0)
                if rows[i]["person"] == out:
                    stranger_d.append(d)
                else:
                    genuine.append((d, name == rows[i]["person"].lower()))
    stranger_d = np.array(stranger_d)
    gd = np.array([g[0] for g in genuine])
    gright = np.array([g[1] for g in genuine])
    table = []
    for t in THRESHOLDS:
        table.append({"threshold": float(t),
                      "stranger_named": float((stranger_d <= t).mean()),
                      "genuine_right": float(((gd <= t) & gright).mean()),
                      "genuine_wrong": float(((gd <= t) & ~gright).mean())})
    ok = [r for r in table if r["stranger_named"] <= MAX_STRANGER_RATE]
    chosen = max(ok, key=lambda r: r["threshold"]) if ok else table[0]
    return {"table": table, "chosen": chosen, "strangers": len(stranger_d),
            "genuine": len(gd), "confidence": confidence_fit(gd, gright, stranger_d)}


def confidence_fit(gd, gright, stranger_d) -> dict:
    """P(the name is right | distance): a logistic fit, right names against wrong ones and
    strangers (any name a stranger gets is wrong), the two sides weighted equally, with
    scikit-learn's default regularisation (the benchmark's two sides barely overlap:
    unregularised, the fit is a near step at 0.57, surer than 80 faces can say)."""
    from sklearn.linear_model import LogisticRegression  # noqa: PLC0415

    x = np.concatenate([gd, stranger_d])[:, None]
    y = np.concatenate([gright, np.zeros(len(stranger_d), bool)])
    lr = LogisticRegression(class_weight="balanced").fit(x, y)
    a, b = float(lr.coef_[0, 0]), float(lr.intercept_[0])
    return {"slope": -a, "midpoint": -b / a}


def clustering(rows):
    from sklearn.cluster import DBSCAN  # noqa: PLC0415

    have = [r for r in rows if r["embedding"] is not None]
    X = np.stack([r["embedding"] for r in have])
    truth = np.array([r["person"] for r in have])
    out = []
    for t in GROUP_THRESHOLDS:
        out.append({"method": "chinese whispers", "threshold": t,
                    **pairwise(chinese_whispers(X, t), truth)})
        for m in (1, 2, 3):
            labels = DBSCAN(eps=t, min_samples=m).fit_predict(X)
            labels = np.where(labels < 0, np.arange(len(labels)) + labels.max() + 1, labels)
            out.append({"method": f"DBSCAN min_samples={m}", "threshold": t,
                        **pairwise(labels, truth)})
    return out


def pairwise(labels, truth) -> dict:
    same_pred = labels[:, None] == labels[None, :]
    same_true = truth[:, None] == truth[None, :]
    iu = np.triu_indices(len(labels), 1)
    p, t = same_pred[iu], same_true[iu]
    tp = int((p & t).sum())
    precision = tp / max(int(p.sum()), 1)
    recall = tp / max(int(t.sum()), 1)
    f1 = 2 * precision * recall / max(precision + recall, 1e-12)
    return {"precision": round(precision, 3), "recall": round(recall, 3), "f1": round(f1, 3),
            "groups": int(len(set(labels.tolist())))}


def full_resolution(rows):
    pairs = [(r["embedding"], r["full"]) for r in rows if r["full"] is not None]
    if not pairs:
        return {}
    d = [float(np.linalg.norm(a - b)) for a, b in pairs]
    return {"pictures": len(pairs), "distance_scaled_to_full_mean": float(np.mean(d)),
            "distance_scaled_to_full_max": float(np.max(d)),
            "naming_full": naming(rows, "full")}


def detectors(folder: Path):
    import dlib  # noqa: PLC0415
    from PIL import Image  # noqa: PLC0415

    from pamir.facts.people import models_dir  # noqa: PLC0415

    hog = dlib.get_frontal_face_detector()
    cnn = dlib.cnn_face_detection_model_v1(str(models_dir() / "mmod_human_face_detector.dat"))
    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in SUFFIXES)
    images = [load_rgb(p) for p in paths]

    def scaled(a, side):
        h, w = a.shape[:2]
        s = side / max(h, w)
        return np.asarray(Image.fromarray(a).resize(
            (round(w * s), round(h * s)),
            Image.Resampling.BOX if s < 1 else Image.Resampling.BILINEAR))

    out = []
    for name, up, side in [("HOG", 0, 640), ("HOG", 0, 1024), ("HOG", 0, 1600),
                           ("HOG", 1, 640), ("HOG", 1, 1024), ("CNN (MMOD)", 0, 640),
                           ("CNN (MMOD)", 0, 1024)]:
        t = time.process_time()
        counts = [len(hog(scaled(a, side), up) if name == "HOG" else cnn(scaled(a, side), up))
                  for a in images]
        out.append({"detector": name, "upsample": up, "side": side, "faces": counts,
                    "total": sum(counts),
                    "ms_per_picture": (time.process_time() - t) / len(images) * 1000})
    return {"pictures": [p.name for p in paths], "runs": out}


def corel_cost(n: int, finder: FaceFinder):
    """Faces ms per picture on n Corel pictures, and `pamir index`'s own per picture on the
    same ones, its startup (loading the network) taken out: after a warm-up folder (the
    network's cold caches), a run that adds WARM_UP new pictures (B1) and one that adds the n
    (B2): per picture = (B2 - B1) / (n - WARM_UP)."""
    from pamir.data import find_corel5k  # noqa: PLC0415

    images = sorted((find_corel5k() / "images").rglob("*.jpeg"))
    step = max(1, len(images) // (n + 2 * WARM_UP))
    chosen = images[::step]
    warm, small, paths = chosen[:WARM_UP], chosen[WARM_UP:2 * WARM_UP], \
        chosen[2 * WARM_UP:2 * WARM_UP + n]
    t, w = time.process_time(), time.perf_counter()
    found = []
    for p in paths:
        image, size = load_for_detection(p)
        found.append(len(finder.find(image, size)))
    cpu = (time.process_time() - t) / len(paths) * 1000
    wall = (time.perf_counter() - w) / len(paths) * 1000
    out = {"pictures": len(paths), "faces_cpu_ms": cpu, "faces_wall_ms": wall,
           "pictures_with_faces": int(sum(1 for f in found if f)), "faces": int(sum(found))}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for folder, files in (("warm", warm), ("small", small), ("pics", paths)):
            (tmp / folder).mkdir()
            for p in files:
                shutil.copy(p, tmp / folder / p.name)
        env = dict(os.environ, PAMIR_CACHE=str(tmp / "cache"))

        def index(*folders) -> tuple[float, float]:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            w = time.perf_counter()
            subprocess.run([sys.executable, "-c", "from pamir.cli import main; main()",
                            "index", *map(str, folders), "--index", str(tmp / "index")],
                           env=env, check=True, capture_output=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            return (time.perf_counter() - w, after.ru_utime + after.ru_stime
                    - before.ru_utime - before.ru_stime)

        index(tmp / "warm")
        b1_wall, b1_cpu = index(tmp / "warm", tmp / "small")
        b2_wall, b2_cpu = index(tmp / "warm", tmp / "small", tmp / "pics")
    extra = len(paths) - len(small)
    out["index_wall_ms"] = (b2_wall - b1_wall) / extra * 1000
    out["index_cpu_ms"] = (b2_cpu - b1_cpu) / extra * 1000
    out["index_startup_cpu_s"] = b1_cpu - len(small) * out["index_cpu_ms"] / 1000
    out["ratio_cpu"] = (out["index_cpu_ms"] + cpu) / out["index_cpu_ms"]
    return out


def report(r: dict) -> str:
    lines = report_head("People: faces, names, strangers and unnamed people (issue 34)",
                        r["run"])
    lines += ["", "What pamir.facts.people chose from these measurements: dlib's HOG detector on the "
              f"picture scaled to a longer side of {DETECT_SIDE} px (enlarged at most "
              f"{MAX_ENLARGE:g}x: people.md), the "
              "embedding taken from that scaled picture (not the full-resolution one), a name "
              "carried to an unnamed face within NAME_DISTANCE of one of that person's named "
              "faces, unnamed faces grouped by Chinese whispers at GROUP_DISTANCE "
              "(pamir/facts/people/naming.py gives the numbers behind each).", "",
              "No package ships OpenCV's YuNet and SFace weights (the candidates on PyPI, "
              "alchemyface, moca-face-matcher and detekface, download them at run time or ship "
              "none), so they were not measured.", "",
              f"Identities: {r['identities']['folder_note']}, made by "
              "benchmarks/faces_pictures.py from git clones of face-api.js (commit a86f011d), "
              "deepface (243209fd) and face_recognition (2e2dccea), all three MIT-licensed "
              "(not committed: 27 MB).", "",
              f"{r['identities']['pictures']} pictures of {r['identities']['people']} people; "
              f"a face found in {r['identities']['with_face']}; faces "
              f"{r['identities']['ms_per_picture']:.0f} ms (CPU) per picture (decode at "
              f"{DETECT_SIDE} px, detect, embed).", "",
              "## Searching a name over the unnamed pictures",
              "", f"{NAMED_PER_PERSON} pictures of each person named, the rest unnamed; mean "
              "AvgP over the people with unnamed pictures, per seed. *ranked*: every unnamed "
              "picture ranked by its nearest face's distance to the person's named faces; "
              f"*given*: only the pictures given the name at NAME_DISTANCE = {NAME_DISTANCE} "
              "are returned.", "", "| seed | people | unnamed pictures | AvgP ranked | "
              "AvgP given |", "|---|---|---|---|---|"]
    for s in r["naming"]:
        lines.append(f"| {s['seed']} | {s['people']} | {s['unnamed']} | "
                     f"{s['avgp_ranked']:.3f} | {s['avgp_given']:.3f} |")
    lines.append(f"| mean | | | {np.mean([s['avgp_ranked'] for s in r['naming']]):.3f} | "
                 f"{np.mean([s['avgp_given'] for s in r['naming']]):.3f} |")
    st = r["strangers"]
    lines += ["", "## Strangers and the naming threshold", "",
              f"Each person left out of the named faces in turn ({st['strangers']} stranger "
              f"faces, {st['genuine']} faces of named people, counted once per person left out, "
              f"over {len(SEEDS)} seeds). "
              f"Chosen: the largest threshold whose stranger rate is at most "
              f"{MAX_STRANGER_RATE}: **{st['chosen']['threshold']}** (stranger named "
              f"{st['chosen']['stranger_named']:.3f}, right name "
              f"{st['chosen']['genuine_right']:.3f}, wrong name "
              f"{st['chosen']['genuine_wrong']:.3f}). A name's confidence, P(right | "
              f"distance d) = 1 / (1 + exp({st['confidence']['slope']:.1f} (d - "
              f"{st['confidence']['midpoint']:.3f}))): a logistic fit of right names against "
              "wrong names and strangers, both sides weighted equally.", "",
              "| threshold | strangers given a name | named people: right name | wrong name |",
              "|---|---|---|---|"]
    for t in st["table"]:
        lines.append(f"| {t['threshold']:.2f} | {t['stranger_named']:.3f} | "
                     f"{t['genuine_right']:.3f} | {t['genuine_wrong']:.3f} |")
    lines += ["", "## Unnamed people: Chinese whispers against DBSCAN", "",
              "Every picture's main face grouped; pairwise precision / recall / F1 against the "
              "identities (DBSCAN's noise faces are groups of one).", "",
              "| method | threshold | precision | recall | F1 | groups |",
              "|---|---|---|---|---|---|"]
    for c in r["clustering"]:
        lines.append(f"| {c['method']} | {c['threshold']} | {c['precision']} | {c['recall']} | "
                     f"{c['f1']} | {c['groups']} |")
    lines.append(f"\n(true groups: {r['identities']['people']})")
    fr = r.get("full_resolution")
    if fr:
        lines += ["", "## Embedding from the scaled picture or the full-resolution one", "",
                  f"{fr['pictures']} pictures larger than {DETECT_SIDE} px: distance between "
                  f"the two embeddings of one face, mean {fr['distance_scaled_to_full_mean']:.3f}"
                  f", max {fr['distance_scaled_to_full_max']:.3f}. Naming with the "
                  "full-resolution embeddings: mean AvgP ranked "
                  f"{np.mean([s['avgp_ranked'] for s in fr['naming_full']]):.3f}, given "
                  f"{np.mean([s['avgp_given'] for s in fr['naming_full']]):.3f}."]
    d = r.get("detectors")
    if d:
        lines += ["", "## Detectors on group photos", "", _ran(d["run"]), "",
                  f"Pictures: {', '.join(d['pictures'])}; faces found in each.", "",
                  "| detector | upsample | longer side | faces per picture | total | ms per "
                  "picture (CPU) |", "|---|---|---|---|---|---|"]
        for x in d["runs"]:
            lines.append(f"| {x['detector']} | {x['upsample']} | {x['side']} | {x['faces']} | "
                         f"{x['total']} | {x['ms_per_picture']:.0f} |")
    c = r.get("corel")
    if c:
        lines += ["", "## Cost on Corel 5k", "", _ran(c["run"]), "",
                  f"{c['pictures']} pictures spread over the 5,000: faces "
                  f"{c['faces_cpu_ms']:.0f} ms CPU ({c['faces_wall_ms']:.0f} ms wall) per "
                  f"picture; {c['faces']} faces in "
                  f"{c['pictures_with_faces']} pictures. `pamir index` (no model: the CNN's "
                  f"ImageNet classes) on the same pictures, new to its feature cache: "
                  f"{c['index_cpu_ms']:.0f} ms CPU ({c['index_wall_ms']:.0f} ms wall) per "
                  f"picture, its startup ({c['index_startup_cpu_s']:.0f} s CPU) taken out. "
                  f"Faces would make it **{c['ratio_cpu']:.2f}x** the CPU time per picture."]
    return "\n".join(lines) + "\n"


def _ran(info: dict) -> str:
    return (f"Measured by `{info['command']}` on {info['date']}, load average "
            f"{info['load_average']['start']} at start, {info['load_average']['end']} at end.")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--identities", type=Path, required=True)
    ap.add_argument("--note", default="", help="the identities folder, as the report names it")
    ap.add_argument("--groups", type=Path)
    ap.add_argument("--corel", type=int, default=0)
    args = ap.parse_args(argv)
    run = Run("bench_faces.py", argv)
    finder = FaceFinder()
    rows, ms = read_identities(args.identities, finder)
    r = {"run": None, "identities": {
        "folder_note": args.note or str(args.identities), "pictures": len(rows),
        "people": len({x["person"] for x in rows}),
        "with_face": sum(x["embedding"] is not None for x in rows), "ms_per_picture": ms,
        "missed": [x["path"] for x in rows if x["embedding"] is None]}}
    r["naming"] = naming(rows)
    r["strangers"] = strangers(rows)
    r["clustering"] = clustering(rows)
    r["full_resolution"] = full_resolution(rows)
    if args.groups:
        r["detectors"] = detectors(args.groups)
        r["detectors"]["run"] = run.info()
    if args.corel:
        r["corel"] = corel_cost(args.corel, finder)
        r["corel"]["run"] = run.info()
    r["run"] = run.info()
    # sections this run did not measure are kept from the last run that did
    old = RESULTS / f"{STEM}.json"
    if old.is_file():
        for key, value in json.loads(old.read_text()).items():
            r.setdefault(key, value)
    write_json(RESULTS / f"{STEM}.json", r)
    (RESULTS / f"{STEM}.md").write_text(report(r))
    print(report(r))


if __name__ == "__main__":
    main()
