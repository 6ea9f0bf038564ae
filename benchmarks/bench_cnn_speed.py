"""Speed of the CNN representation (pamir.features.cnn) on Corel 5k, end to end.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_cnn_speed.py [--pictures 1000]

End to end means what `CNNRepresentation.pooled` does for a picture that is not in the
cache: read the file, hash it, decode, resize, run the network, pool, write the cache entry.
Every run starts from an empty temporary feature cache; the network is built (and the ONNX
graph exported, a one-time cost reported apart) before the clock starts.

1. The default setting (lite0, short side 224: Corel's 192x128 becomes 336x224), ONNX
   Runtime against eager fp32 torch in the same run, alternated twice, and their ratio.
2. short side (128, 160, 224, 260) x model (lite0, lite1, lite2) x engine (onnx, torch):
   each cell runs on the same seeded sample of pictures, in chunks, until --cell-seconds have
   passed or --cell-pictures are done (at least one chunk).

Writes benchmarks/results/cnn_speed.json and cnn_speed.md. Other developers' jobs share the
2 cores: the load average before and after each measurement is recorded beside it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from importlib.metadata import version

import numpy as np

from pamir import config
from pamir.facts.collection import load_collection
from pamir.features import cnn_engines
from pamir.features.cnn import CNNRepresentation, CNNSettings
from pamir.features.registry import CNN_PRESETS

from common.harness import RESULTS, Run, parser, report_head, save_report

SHORT_SIDES = (128, 160, 224, 260)
MODELS = ("lite0", "lite1", "lite2")
ENGINES = ("onnx", "torch")


def load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def measure(settings: CNNSettings, paths: list, *, max_seconds: float | None = None,
            chunk: int = 100) -> dict:
    """Pictures/s of `pooled` from a cold cache; the network is built before timing."""
    rep = CNNRepresentation(settings, progress=False)
    t0 = time.perf_counter()
    engine = rep.engine
    build = time.perf_counter() - t0
    before = load()
    done, seconds, extracted = 0, 0.0, 0
    with tempfile.TemporaryDirectory() as cache:
        rep.cache_dir = cache
        while done < len(paths):
            part = paths[done:done + chunk] if max_seconds else paths[done:]
            rep.pooled(part)
            done += len(part)
            seconds += rep.stats_["seconds"]
            extracted += rep.stats_["extracted"]
            if max_seconds and seconds >= max_seconds:
                break
    return {"pictures": done, "extracted": extracted, "seconds": round(seconds, 2),
            "pictures_per_second": round(done / seconds, 1),
            "engine": engine.name, "build_seconds": round(build, 2),
            "export_seconds": round(getattr(engine, "export_seconds", 0.0), 2),
            "load_before": before, "load_after": load()}


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--pictures", type=int, default=1000,
                    help="pictures for the default setting's ONNX runs")
    ap.add_argument("--torch-pictures", type=int, default=400,
                    help="pictures for the default setting's torch runs")
    ap.add_argument("--cell-pictures", type=int, default=400)
    ap.add_argument("--cell-seconds", type=float, default=12.0)
    args = ap.parse_args(argv)

    collection = load_collection("corel5k")
    order = np.random.default_rng(config.SEED).permutation(len(collection.paths))
    paths = [collection.paths[i] for i in order]
    run = Run("bench_cnn_speed.py", argv, torch=True)
    t_start = time.perf_counter()
    out = {
        **run.info(), "machine": f"{run.machine}, onnxruntime {version('onnxruntime')}",
        "streams": cnn_engines.streams(), "threads_per_stream": cnn_engines.threads_per_stream(),
        "default_settings": CNNSettings().to_dict(),
    }

    # 1. the default setting, both engines, alternated twice
    default = []
    for round_ in (1, 2):
        for engine in ENGINES:
            n = args.pictures if engine == "onnx" else args.torch_pictures
            r = measure(CNNSettings(engine=engine), paths[:n])
            r["round"] = round_
            default.append(r)
            print(f"default {engine} round {round_}: {r['pictures_per_second']} pictures/s "
                  f"({r['pictures']} pictures, {r['seconds']} s, load {r['load_before']})",
                  flush=True)
    rate = {e: round(float(np.median([r["pictures_per_second"] for r in default
                                       if r["engine"] == e])), 1) for e in ENGINES}
    out["default"] = {"runs": default, "onnx_pictures_per_second": rate["onnx"],
                      "torch_pictures_per_second": rate["torch"],
                      "ratio": round(rate["onnx"] / rate["torch"], 2),
                      "target_pictures_per_second": 120}

    # 2. the table
    cells = []
    for side in SHORT_SIDES:
        for model in MODELS:
            for engine in ENGINES:
                s = CNNSettings(model=model, short_side=side, engine=engine)
                r = measure(s, paths[:args.cell_pictures], max_seconds=args.cell_seconds)
                r.update(model=model, short_side=side)
                cells.append(r)
                print(f"{model} {side} {engine}: {r['pictures_per_second']} pictures/s "
                      f"({r['pictures']} pictures, load {r['load_before']})", flush=True)
    out["table"] = cells
    out["load_average"] = run.info()["load_average"]
    out["total_seconds"] = round(time.perf_counter() - t_start, 1)

    save_report("cnn_speed", out, markdown)
    return 0


def run_info(out: dict) -> dict:
    """The run's command, machine, date and load average as common.harness.report_head reads them.
    Results measured before this script used common.harness.Run (cnn_speed.json of 2026-11-24) store
    the machine as a dict {cpu, cores, python, torch, onnxruntime, load_at_start,
    load_at_end}: they are read as they are, not rewritten."""
    m = out["machine"]
    if not isinstance(m, dict):
        return out
    return {"command": out["command"].strip(), "date": out["date"],
            "machine": f"{m['cpu']}, {m['cores']} cores, Python {m['python']}, "
                       f"torch {m['torch']}, onnxruntime {m['onnxruntime']}",
            "load_average": {"start": ", ".join(map(str, m["load_at_start"])),
                             "end": ", ".join(map(str, m["load_at_end"]))}}


def markdown(out: dict) -> str:
    d = out["default"]
    lines = [
        # pictures per second: the load makes each figure a lower bound, not an upper one
        *report_head("CNN representation: speed on Corel 5k", run_info(out),
                     note="other developers' jobs share the 2 cores: a figure is a lower bound "
                          "of what a quiet machine gives"),
        f"The load average before each run is in cnn_speed.json. Whole run: "
        f"{out['total_seconds'] / 60:.1f} min.",
        "",
        "End to end from an empty feature cache: read + content hash, decode, resize (shorter "
        "side = short side, aspect kept), network, pooling, cache write. The network is built "
        "before the clock starts (the one-time ONNX export is given apart). Batches of one "
        f"resized shape; {out['streams']} batches run side by side, "
        f"{out['threads_per_stream']} thread each (pamir.features.cnn_engines.streams says why).",
        "",
        "## The default setting",
        "",
        f"lite0, short side 224 (Corel's 192x128 -> 336x224), global average, batch "
        f"{out['default_settings']['batch_size']}, {out['default_settings']['n_jobs']} decoding "
        "threads:",
        "",
        "| engine | round | pictures | seconds | pictures/s | load before |",
        "|---|---|---|---|---|---|",
    ]
    for r in d["runs"]:
        lines.append(f"| {r['engine']} | {r['round']} | {r['pictures']:,} | {r['seconds']} | "
                     f"{r['pictures_per_second']} | {r['load_before'][0]} |")
    export = max((r["export_seconds"] for r in d["runs"]), default=0)
    lines += [
        "",
        f"**ONNX Runtime {d['onnx_pictures_per_second']} pictures/s, eager torch "
        f"{d['torch_pictures_per_second']} pictures/s (medians of the two rounds): "
        f"{d['ratio']}x.** The issue's target was {d['target_pictures_per_second']} "
        f"pictures/s." + (f" Exporting the ONNX graph (once, then cached): {export} s."
                          if export else ""),
        "",
        "## Short side x model x engine (pictures/s)",
        "",
        "| short side | Corel picture | " + " | ".join(f"{m_} onnx | {m_} torch" for m_ in MODELS)
        + " |",
        "|---|---|" + "---|" * (2 * len(MODELS)),
    ]
    by = {(c["short_side"], c["model"], c["engine"]): c for c in out["table"]}
    for side in SHORT_SIDES:
        row = [str(side), f"{side * 3 // 2}x{side}"]
        for model in MODELS:
            for engine in ENGINES:
                c = by[(side, model, engine)]
                row.append(f"{c['pictures_per_second']}")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Pictures per cell: " + ", ".join(
        f"{c['model']}/{c['short_side']}/{c['engine']} {c['pictures']}" for c in out["table"])
        + "."]
    lines += quality_of_cells(by)
    return "\n".join(lines) + "\n"


def quality_of_cells(by: dict) -> list[str]:
    """Speed against validation AvgP, for the settings bench_cnn.py measured (cnn.json)."""
    view_cells = {v: (p["short_side"], p["model"], "onnx") for v, p in CNN_PRESETS.items()}
    study = RESULTS / "cnn.json"
    if not study.is_file():
        return []
    rows = [r for r in json.loads(study.read_text())["rows"] if r.get("cnn")]
    lines = ["", "## Speed against quality",
             "", "PAMIR's validation AvgP on each setting that `benchmarks/bench_cnn.py` "
             "measured (cnn.md), beside this run's ONNX Runtime speed of its network and size:",
             "", "| setting | pictures/s (onnx) | valid AvgP |", "|---|---:|---:|"]
    for r in rows:
        c = r["cnn"]
        cell = by.get((c.get("short_side", 224), c.get("model", "lite0"), "onnx"))
        speed = cell["pictures_per_second"] if cell and not c.get("flip") else None
        # every network runs on each picture (regions cost nothing); "second_view": cnn.json
        # before the third view
        views = r.get("views") or ([r["second_view"]] if r.get("second_view") else [])
        others = [by.get(view_cells[v]) for v in views]
        if speed and others:  # unknown where a view's size was not timed
            speed = round(1 / (1 / speed + sum(1 / o["pictures_per_second"] for o in others)),
                          1) if all(others) else None
        lines.append(f"| {r['representation']} | {speed or '-'} | {r['valid_avgp']:.2f} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
