"""The folder words' calibration, its cost and its quality (issue 54): every pair of a sample
of held-out queries, or every relevant pair and a weighted sample of the others.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_folder_calibration.py
        [--work /tmp/pamir-folder-look] [--seeds 0 1 2]

Reads the tagged library's index and feature cache that bench_folder_look.py left in --work
(index-new, cache-new: the pictures' pooled vectors, no picture decoded again), makes the
folder words' inputs as the refresh does (pamir.jobs.folder_look: views, smoothed classes,
pamir.zeroshot.folder.fit_folder_words up to its calibration), then fits the calibration
(pamir.calibration.fitting.fit_calibration) on each setting's sample of the held-out queries, for
each seed, and measures on every pair of every held-out query (all tagged pictures): the
seconds of the fit, the log loss, the calibration error, and of the pairs at p >= 0.5 their
count and the share relevant. The untagged pictures' figures are bench_folder_look.py's.

Writes benchmarks/results/folder_calibration.json and .md (--report-only rewrites the .md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from common.harness import Run, report_cli, report_head, save_report

#: (queries, non-relevant pairs; None: all) of each setting.
SETTINGS = ((1000, None), (1000, 100_000), (2000, 100_000), (4000, 100_000), (4000, 200_000))


def inputs(work: Path):
    """(mixed, queries, Y_held) of the library's refresh, as fit_folder_words makes them."""
    import os  # noqa: PLC0415

    os.environ["PAMIR_CACHE"] = str(work / "cache-new")
    from pamir.calibration import fitting as calibration  # noqa: PLC0415
    from pamir.index import Index  # noqa: PLC0415
    from pamir.jobs import folder_look  # noqa: PLC0415
    from pamir.jobs.loading import zero_caption_system  # noqa: PLC0415
    from pamir.models.base import training_queries  # noqa: PLC0415
    from pamir.text.vectors import idf  # noqa: PLC0415
    from pamir.zeroshot import folder  # noqa: PLC0415

    seen = {}

    def keep(Z, Q, terms, relevance, Y, **kw):  # the refresh's own inputs, then no fit
        seen.update(Z=Z, Y=Y)
        raise ValueError("measured here")

    real, calibration.fit_calibration = calibration.fit_calibration, keep
    try:
        system = zero_caption_system()
        with Index.open(work / "index-new") as index:
            pictures = list(index.pictures("ok"))
            tagged = [k for k, p in enumerate(pictures) if p.caption]
            pooled = folder_look.pooled_of(system, pictures)
            X = folder.views(pooled, *folder.standardisation(pooled))
            P = folder.smooth(folder_look.system_probabilities(system, pooled), X)
            folder.fit_folder_words(X[tagged], [pictures[k].caption for k in tagged],
                                    P[tagged], folder_look.classes_of,
                                    before=index.vocabulary)
    finally:
        calibration.fit_calibration = real
    Y = seen["Y"]
    return seen["Z"], training_queries(Y, idf_weights=idf(Y)).sample(), Y


def quality(cal, Z, queries) -> dict:
    """On every pair of every held-out query: log loss, calibration error, p >= 0.5."""
    import scipy.sparse as sp  # noqa: PLC0415

    from pamir.calibration import Calibration, expected_calibration_error  # noqa: PLC0415
    from pamir.zeroshot.folder import _terms  # noqa: PLC0415

    Q = sp.csr_matrix(queries.vectors, dtype=np.float64)
    own = Calibration(cal.coef, cal.intercept, Z, cal.word_pictures, cal.n_train,
                      ceiling=cal.ceiling)
    p = own.probabilities(Q, _terms(queries), np.asarray(Q @ Z.T.astype(np.float64))).ravel()
    y = np.asarray(sp.csr_matrix(queries.relevance).toarray(), bool).ravel()
    pc = np.clip(p, 1e-12, 1 - 1e-12)
    hits = p >= 0.5
    return {"log_loss": round(float(-np.mean(np.where(y, np.log(pc), np.log(1 - pc)))), 6),
            "ece": round(float(expected_calibration_error(p, y)[0]), 5),
            "pairs_at_p0.5": int(hits.sum()),
            "relevant_at_p0.5": round(float(y[hits].mean()), 3) if hits.any() else None,
            "ceiling": round(float(cal.ceiling), 3)}


def measure(args) -> dict:
    from pamir.calibration.fitting import fit_calibration  # noqa: PLC0415
    from pamir.features.cnn_int8 import processor  # noqa: PLC0415
    from pamir.zeroshot import folder  # noqa: PLC0415
    from pamir.zeroshot.folder import _terms  # noqa: PLC0415

    run = Run("bench_folder_calibration.py", args.argv)
    Z, queries, Y = inputs(args.work)
    r = {**run.info(), "processor": processor(), "pictures": int(Z.shape[0]),
         "queries": int(queries.vectors.shape[0]),
         "chosen": {"CALIBRATION_QUERIES": folder.CALIBRATION_QUERIES,
                    "CALIBRATION_NEGATIVES": folder.CALIBRATION_NEGATIVES},
         "settings": []}
    for n, negatives in SETTINGS:
        for seed in args.seeds:
            few = queries.sample(n, seed)
            t0 = time.perf_counter()
            cal = fit_calibration(Z, few.vectors, _terms(few), few.relevance, Y, seed=seed,
                                  negatives=negatives)
            row = {"queries": n, "negatives": negatives, "seed": seed,
                   "seconds": round(time.perf_counter() - t0, 2),
                   "pairs": cal.info["pairs"], "positives": cal.info["positives"],
                   **quality(cal, Z, queries)}
            print(row, flush=True)
            r["settings"].append(row)
    r["minutes"] = run.minutes()
    return r


def report(r: dict) -> str:
    lines = report_head("The folder words' calibration: its cost and quality (issue 54)", r)
    p = r["processor"]
    lines += [f"Processor flags: {', '.join(p['flags'])} (VNNI {p['vnni']}).", "",
              (f"The tagged library's {r['pictures']:,} tagged pictures, held out (each scored "
               f"by the others), and their {r['queries']:,} queries. Each setting fits on a "
               "seeded sample of the queries (and of the non-relevant pairs, each weighing as "
               "many as it stands for); measured on every pair of all the queries. Chosen "
               f"(pamir.zeroshot.folder): {r['chosen']['CALIBRATION_QUERIES']:,} queries, "
               f"{r['chosen']['CALIBRATION_NEGATIVES']:,} non-relevant pairs."), "",
              ("| queries | non-relevant pairs | seed | fit s | pairs (relevant) | log loss | "
               "calibration error | p >= 0.5: pairs | p >= 0.5: relevant | ceiling |"),
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in r["settings"]:
        neg = "all" if s["negatives"] is None else f"{s['negatives']:,}"
        lines.append(f"| {s['queries']:,} | {neg} | {s['seed']} | {s['seconds']} | "
                     f"{s['pairs']:,} ({s['positives']:,}) | {s['log_loss']} | {s['ece']} | "
                     f"{s['pairs_at_p0.5']:,} | {s['relevant_at_p0.5']} | {s['ceiling']} |")
    lines += ["", f"Whole run: {r['minutes']} min.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    def options(ap):
        ap.add_argument("--work", type=Path, default=Path("/tmp/pamir-folder-look"))
        ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])

    args = report_cli(__doc__, "folder_calibration", report, argv, options=options)
    if args is None:
        return
    args.argv = sys.argv[1:] if argv is None else argv
    save_report("folder_calibration", measure(args), report)


if __name__ == "__main__":
    main()
