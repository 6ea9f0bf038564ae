"""Would decoding each picture once for the three CNN views pay? (issue 24)

    python benchmarks/bench_decode_once.py [--pictures 500]

The default representation reads every picture three times, once per network (Lite0 at a
224-px short side, Lite1 at 240, Lite2 at 260), and each time decodes the JPEG and resizes
it (pamir.features.cnn.prepare_picture). Decoding once would save the two extra decodes; the
resizes stay, one per view, for the features to stay the same. This times, on Corel
pictures, the decode alone, each view's resize of the decoded picture, and the whole
per-view preparation, in one thread, and sets what decoding once would save against the
networks' time (the main job's feature seconds in results/fit_speed.json).
Results: results/decode_once.json and .md.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from common.harness import RESULTS, Run, parser, report_head, save_report

from pamir.features.cnn import prepare_picture
from pamir.features.images import decode_rgb, read_bytes, resize_short_side
from pamir.features.registry import CNN_PRESETS

COREL = Path(__file__).resolve().parent.parent.parent / "shared/data/corel5k"
SIDES = {"cnn": 224, **{k: v["short_side"] for k, v in CNN_PRESETS.items()}}


def per_picture_ms(fn, items) -> float:
    t0 = time.perf_counter()
    for x in items:
        fn(x)
    return 1000 * (time.perf_counter() - t0) / len(items)


def report(r: dict) -> str:
    lines = [*report_head("Decoding each picture once for the three CNN views", r, heavy=False,
                          note="a shared machine: the times are upper bounds, their ratios "
                               "are what counts"), "",
             f"On {r['pictures']} Corel pictures (192x128 JPEG), one thread, ms per picture:\n",
             "| step | ms |", "|---|---:|",
             f"| decode (JPEG to RGB) | {r['decode_ms']:.2f} |"]
    for view, v in r["views"].items():
        lines.append(f"| {view}: resize to a {v['short_side']}-px short side | "
                     f"{v['resize_ms']:.2f} |")
        lines.append(f"| {view}: today's preparation (decode + resize) | {v['prepare_ms']:.2f} |")
    lines.append(f"\nDecoding once saves {r['saved_ms']:.2f} ms of CPU per picture (two decodes of "
                 f"three), {r['saved_seconds_corel']:.0f} s on Corel's 5,000 pictures, against "
                 f"{r['network_seconds_corel']:.0f} s of CNN features in the main job "
                 f"({100 * r['saved_fraction']:.1f} %). The resizes, most of the preparation, "
                 "stay: one per view.\n")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--pictures", type=int, default=500)
    args = ap.parse_args(argv)
    rows = [line.split("\t") for line in (COREL / "annotations.tsv").read_text().splitlines()[1:]]
    data = [read_bytes(COREL / row[2]) for row in rows[:args.pictures]]
    decoded = [decode_rgb(d) for d in data]
    run = Run("bench_decode_once.py", argv)
    r = {**run.info(), "pictures": len(data),
         "decode_ms": per_picture_ms(decode_rgb, data), "views": {}}
    for view, side in SIDES.items():
        r["views"][view] = {
            "short_side": side,
            "resize_ms": per_picture_ms(lambda a: resize_short_side(a, side), decoded),
            "prepare_ms": per_picture_ms(lambda d: prepare_picture(d, side), data)}
    # the same pixels either way: decoding once changes no feature
    assert all(np.array_equal(prepare_picture(d, s), resize_short_side(decode_rgb(d), s))
               for d in data[:50] for s in SIDES.values())
    main_job = json.loads((RESULTS / "fit_speed.json").read_text())["main_job"]["after"]
    reps = main_job["model"]["representations"]
    network = sum(p["feature_seconds"] for p in reps if "cnn" in p["representation"]
                  and p["feature_seconds"] > 10)  # the candidates that computed a network
    r["saved_ms"] = 2 * r["decode_ms"]
    r["saved_seconds_corel"] = r["saved_ms"] * 5000 / 1000
    r["network_seconds_corel"] = network
    r["saved_fraction"] = r["saved_seconds_corel"] / network
    save_report("decode_once", r, report)


if __name__ == "__main__":
    main()
