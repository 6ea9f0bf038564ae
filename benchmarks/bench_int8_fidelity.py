"""int8 variants against fp32, per network, on this processor (issue 51): what the check sees.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_int8_fidelity.py --cache DIR \
        --save-graphs G --save-reference R.npz [--networks lite0 lite1 lite2 detector]

For each network and each int8 variant of pamir.features.cnn_int8.VARIANTS (and a signed one
with 7-bit weights, for the record):
  - the CNN trunks: the pooled vectors' cosine to fp32 (mean and worst) on the 72 calibration
    pictures (what the check measures) and on 200 Corel 5k pictures (every 25th of the
    sorted paths, prepared as each view sees them: lite0 at a 224-px short side, lite1 240,
    lite2 260), the whole vector (global average and the 2x2 cells) and the global average
    alone; whether the check keeps it (FAITHFUL_MEAN, FAITHFUL_WORST); milliseconds a Corel
    picture (one thread, one picture a call);
  - the text detector: of the words painted on the calibration pictures that fp32 reads, how
    many each variant reads in the same place (the check's measure);
  - the check itself, cold (int8_choice / detector_choice in an empty cache folder beside
    the exports): seconds, and the variant kept.

On a processor without VNNI that is not at hand, the same script runs under QEMU's user-mode
emulation, whose TCG emulates AVX2 but not AVX-512 or VNNI (QEMU 7.2), with the graphs and
the fp32 reference made natively (fp32 is emulated exactly, the same bits as native here, but
slowly: about 100 s a Corel picture), on a sample:

    qemu-x86_64 -cpu max $(which python) benchmarks/bench_int8_fidelity.py --name qemu \
        --graphs G --reference R.npz --calibration-every 3 --corel-every 5 --parts vectors

--name N writes results/int8_fidelity_N.json and .md (default: results/int8_fidelity.json);
timings under emulation mean nothing (the report says so). --compare NAME adds, for each
variant, the largest difference between these vectors and the ones results NAME saved (its
--save-vectors): 0 where the variant's integer arithmetic is the same on both processors.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common.harness import RESULTS, Run, parser, report_head, write_json

from pamir.features import cnn_int8
from pamir.features.cnn_network import MODELS, cpu_session, onnx_path

#: Every 25th of the sorted Corel paths: the issue's 200 pictures.
COREL_EVERY = 25
SIDES = {"lite0": 224, "lite1": 240, "lite2": 260}
#: Besides the check's VARIANTS: signed activations with 7-bit weights, for the record.
EXTRA = (cnn_int8.Variant("s8s8-7bit", "int8", True, "int8, signed, 7-bit weights"),)


def corel_pictures(side: int, every: int) -> list[np.ndarray]:
    from pamir.data import load_corel5k  # noqa: PLC0415
    from pamir.features.cnn import prepare_picture  # noqa: PLC0415
    from pamir.features.images import read_bytes  # noqa: PLC0415

    paths = sorted(str(p) for p in load_corel5k().paths)[::COREL_EVERY]
    return [prepare_picture(read_bytes(p), side) for p in paths[::every]]


def run_all(graph, pictures: list[np.ndarray]) -> tuple[np.ndarray, float]:
    """(pooled vectors, ms a picture) of a graph on pictures, one thread, one a call."""
    session = cpu_session(graph, threads=1)
    start = time.perf_counter()
    P = np.concatenate([session.run(None, {"pixels": p[None]})[0] for p in pictures])
    return P, 1000 * (time.perf_counter() - start) / max(1, len(pictures))


def closeness(reference: np.ndarray, P: np.ndarray) -> dict:
    whole, glob = cnn_int8.cosines(reference, P), cnn_int8.cosines(reference[:, :1280],
                                                                   P[:, :1280])
    return {"mean": round(float(whole.mean()), 4), "worst": round(float(whole.min()), 4),
            "global_mean": round(float(glob.mean()), 4),
            "global_worst": round(float(glob.min()), 4), "pictures": len(P)}


def graphs(model: str, args, feeds) -> dict[str, bytes]:
    """Each variant's quantized graph: made here (and kept in --save-graphs), or read from
    --graphs (made natively: emulated calibration would take hours)."""
    variants = [v for v in cnn_int8.VARIANTS + EXTRA if not args.variants or v.name in args.variants]
    if args.graphs:
        return {v.name: (args.graphs / f"{model}-{v.name}.onnx").read_bytes() for v in variants
                if (args.graphs / f"{model}-{v.name}.onnx").is_file()}
    fp32 = onnx_path(model).read_bytes()
    made = {v.name: data for v, data in cnn_int8.quantize_variants(fp32, feeds(), variants)}
    if args.save_graphs:
        args.save_graphs.mkdir(parents=True, exist_ok=True)
        for name, data in made.items():
            (args.save_graphs / f"{model}-{name}.onnx").write_bytes(data)
    return made


def vectors(model: str, args, reference: dict, saved: dict) -> dict:
    calibration = cnn_int8.calibration_pictures(MODELS[model].resolution)[::args.calibration_every]
    sets = {"calibration": calibration, "corel": corel_pictures(SIDES[model], args.corel_every)}
    made = graphs(model, args, lambda: [{"pixels": p[None]} for p in
                                        cnn_int8.calibration_pictures(MODELS[model].resolution)])
    out: dict = {}
    for name, pictures in sets.items():
        every = args.calibration_every if name == "calibration" else args.corel_every
        key = f"{model}/{name}/every{every}"
        if key not in reference and f"{model}/{name}/every1" in reference:
            reference[key] = reference[f"{model}/{name}/every1"][::every]
        if key not in reference:
            reference[key], ms = run_all(str(onnx_path(model)), pictures)
            out.setdefault("fp32", {})[f"{name}_ms"] = round(ms, 1)
        for variant, graph in made.items():
            P, ms = run_all(graph, pictures)
            row = {**closeness(reference[key], P), "ms": round(ms, 1)}
            saved[f"{key}/{variant}"] = P
            out.setdefault(variant, {})[name] = row
            print(model, name, variant, row, flush=True)
    for variant, row in out.items():
        if "calibration" in row:
            c = row["calibration"]
            row["kept_by_the_check"] = bool(c["mean"] >= cnn_int8.FAITHFUL_MEAN
                                            and c["worst"] >= cnn_int8.FAITHFUL_WORST)
    return out


def detector(args) -> dict:
    """Each variant's reads of the painted calibration words against fp32's."""
    from pamir.facts import ocr_int8  # noqa: PLC0415
    from pamir.facts.ocr import TextReader, bundled_models, fp32_reader  # noqa: PLC0415

    det = bundled_models()["det"]
    pictures = ocr_int8.calibration_bgr()
    feeds = [{"x": TextReader._blob(bgr, ocr_int8._size(bgr))} for bgr in pictures]
    if args.graphs:
        made = {v.name: (args.graphs / f"detector-{v.name}.onnx").read_bytes()
                for v in cnn_int8.VARIANTS}
    else:
        made = {v.name: d for v, d in cnn_int8.quantize_variants(det.read_bytes(), feeds)}
        if args.save_graphs:
            for name, data in made.items():
                (args.save_graphs / f"detector-{name}.onnx").write_bytes(data)
    measure = ocr_int8.read_fidelity(pictures, fp32_reader)
    out = {}
    for name, graph in made.items():
        t0 = time.perf_counter()
        out[name] = {**measure(graph), "seconds": round(time.perf_counter() - t0, 1)}
        print("detector", name, out[name], flush=True)
    return out


def check_seconds(cache: Path, networks: list[str]) -> dict:
    """The check as a first run on this processor makes it: each network's int8_choice
    (detector_choice) in a cache that holds the fp32 exports only."""
    from pamir.facts import ocr_int8  # noqa: PLC0415
    from pamir.facts.ocr import TextReader, bundled_models, fp32_reader  # noqa: PLC0415

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PAMIR_CACHE"] = tmp
        (Path(tmp) / "onnx").mkdir()
        for model in [n for n in networks if n in MODELS]:
            shutil.copy(cache / "onnx" / onnx_path(model).name, Path(tmp) / "onnx")
        cnn_int8._CHOICES.clear()
        for name in networks:
            t0 = time.perf_counter()
            choice = (ocr_int8.detector_choice(bundled_models()["det"], TextReader._blob,
                                               fp32_reader)
                      if name == "detector" else cnn_int8.int8_choice(name))
            out[name] = {"seconds": round(time.perf_counter() - t0, 1),
                         "kept": choice.variant, "says": choice.says()}
            print("check", name, out[name], flush=True)
        os.environ["PAMIR_CACHE"] = str(cache)
    return out


# ------------------------------------------------------------------------------ report

def report(r: dict) -> str:
    cpu = r["processor"]
    lines = report_head("int8 variants against fp32, per network (issue 51)", r, heavy=not r.get("emulated"))
    lines += [f"Processor as pamir sees it: {cpu['name']}, int8 instruction sets "
              f"{', '.join(cpu['flags']) or 'none'}, VNNI {cpu['vnni']}; ONNX Runtime "
              f"{r['onnxruntime']}.", ""]
    if r.get("emulated"):
        lines += [f"**Under emulation**: each command run as `{r['emulated']} python ...` "
                  "(QEMU 7.2's TCG: AVX2 without AVX-512 "
                  "or VNNI; /proc/cpuinfo above is the host's). Timings under emulation mean "
                  "nothing and are left out. The graphs and the fp32 reference vectors were "
                  "made natively (fp32 is emulated bit for bit).", ""]
    lines += [f"Thresholds of the check: mean >= {r['thresholds']['mean']}, worst >= "
              f"{r['thresholds']['worst']} (cosine of the whole pooled vectors, on the "
              "calibration pictures); the detector's: "
              f"{r['thresholds']['detector_reads']} of the painted words fp32 reads.", "",
              "Cosine to fp32, mean / worst: the whole vector (global average and the 2x2 "
              "cells), then the global average alone, (pictures); Corel: every 25th of the "
              "sorted paths (200), or every k-th of those; calibration: the 72 pictures, or "
              "every k-th.", "",
              "| network | variant | calibration | Corel | Corel, global | kept by the check |"
              + ("" if r.get("emulated") else " ms a Corel picture |"),
              "|---|---|---|---|---|---|" + ("" if r.get("emulated") else "---:|")]
    for model, rows in r.get("vectors", {}).items():
        for variant, row in rows.items():
            if variant == "fp32":
                if not r.get("emulated"):
                    lines.append(f"| {model} | fp32 | | | | | {row.get('corel_ms', '')} |")
                continue
            c, k = row.get("calibration"), row.get("corel")
            if not c or not k:
                continue
            diff = row.get("difference_to", {})
            kept = "yes" if row["kept_by_the_check"] else "no"
            lines.append(f"| {model} | {variant} | {c['mean']} / {c['worst']} ({c['pictures']}) | "
                         f"{k['mean']} / {k['worst']} ({k['pictures']}) | {k['global_mean']} / "
                         f"{k['global_worst']} | {kept}"
                         + (f" (vs {diff['name']}: largest difference {diff['largest']:.4g})"
                            if diff else "") + " |"
                         + ("" if r.get("emulated") else f" {k['ms']} |"))
    if r.get("detector"):
        lines += ["", "Text detector, the words painted on the calibration pictures:", "",
                  "| variant | painted words read as fp32 reads them, in the same place |",
                  "|---|---|"]
        lines += [f"| {v} | {d['same']} of {d['words']} |" for v, d in r["detector"].items()]
    if r.get("check"):
        lines += ["", "The check, cold (a first run on this processor, the fp32 exports made):",
                  ""]
        lines += [f"- {n}: {c['seconds']} s, kept {c['kept']}: {c['says']}"
                  for n, c in r["check"].items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--cache", type=Path, default=None, help="PAMIR_CACHE (the fp32 exports)")
    ap.add_argument("--name", default=None)
    ap.add_argument("--networks", nargs="+", default=["lite0", "lite1", "lite2", "detector"])
    ap.add_argument("--parts", nargs="+", default=["vectors", "detector", "check"],
                    choices=["vectors", "detector", "check"])
    ap.add_argument("--graphs", type=Path, help="read the variants' graphs from here")
    ap.add_argument("--save-graphs", type=Path, help="keep the variants' graphs here")
    ap.add_argument("--reference", type=Path, help="fp32 vectors to compare with (.npz)")
    ap.add_argument("--save-reference", type=Path, help="keep the fp32 vectors here (.npz)")
    ap.add_argument("--variants", nargs="+", help="only these variants (default: all)")
    ap.add_argument("--save-vectors", type=Path,
                    help="keep each variant's vectors here (.npz, for --compare)")
    ap.add_argument("--compare", type=Path,
                    help="vectors another run saved (.npz): each variant's largest difference")
    ap.add_argument("--merge", action="store_true",
                    help="add to the results of the same --name (another sample or variant)")
    ap.add_argument("--calibration-every", type=int, default=1)
    ap.add_argument("--corel-every", type=int, default=1)
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    stem = "int8_fidelity" + (f"_{args.name}" if args.name else "")
    if args.report_only:
        r = json.loads((RESULTS / f"{stem}.json").read_text())
    else:
        if args.cache:
            os.environ["PAMIR_CACHE"] = str(args.cache)
        run = Run("bench_int8_fidelity.py", argv)
        emulated = os.environ.get("PAMIR_EMULATED")  # the qemu command, said by the caller
        r = {**run.info(), "processor": cnn_int8.processor(), "emulated": emulated,
             "onnxruntime": cnn_int8.onnxruntime_version(),
             "thresholds": {"mean": cnn_int8.FAITHFUL_MEAN, "worst": cnn_int8.FAITHFUL_WORST,
                            "detector_reads": __import__("pamir.facts.ocr_int8").facts
                            .ocr_int8.FAITHFUL_READS},
             "calibration_every": args.calibration_every, "corel_every": args.corel_every}
        reference = dict(np.load(args.reference)) if args.reference else {}
        saved: dict = {}
        if "vectors" in args.parts:
            r["vectors"] = {m: vectors(m, args, reference, saved)
                            for m in args.networks if m in MODELS}
            if args.save_reference:
                np.savez(args.save_reference, **reference)
            if args.save_vectors:
                np.savez(args.save_vectors, **saved)
            if args.compare:
                compare(r, saved, args.compare)
        if "detector" in args.parts and "detector" in args.networks:
            r["detector"] = detector(args)
        if "check" in args.parts:
            r["check"] = check_seconds(Path(os.environ["PAMIR_CACHE"]), args.networks)
        r["minutes"] = run.minutes()
        if args.merge and (RESULTS / f"{stem}.json").is_file():
            r = merged(json.loads((RESULTS / f"{stem}.json").read_text()), r)
        write_json(RESULTS / f"{stem}.json", r)
    (RESULTS / f"{stem}.md").write_text(report(r))
    print(report(r))


def merged(old: dict, new: dict) -> dict:
    """The results of an earlier run with a new run's rows added (its variants, networks,
    samples), the commands of both kept."""
    out = {**old, **{k: v for k, v in new.items() if k not in ("vectors", "command")}}
    out["commands"] = old.get("commands", [old["command"]]) + [new["command"]]
    out["command"] = " ; ".join(out["commands"])
    for model, rows in new.get("vectors", {}).items():
        out.setdefault("vectors", {}).setdefault(model, {}).update(rows)
    return out


def compare(r: dict, saved: dict, path: Path) -> None:
    """Each variant's largest difference to the vectors another run saved (same pictures)."""
    other = dict(np.load(path))
    for key, P in saved.items():
        model, part, every, variant = key.split("/")
        native = f"{model}/{part}/every1/{variant}"
        if part == "corel" and native in other:
            r["vectors"][model][variant]["difference_to"] = {
                "name": "native", "pictures": len(P),
                "largest": float(np.abs(other[native][::int(every[5:])] - P).max())}


if __name__ == "__main__":
    sys.exit(main())
