"""The words pamir writes into XMP sidecars: the calibrated probability they must reach.

    pamir fit corel5k -o /tmp/sc/model-cnn -r cnn
    flock /tmp/pamir-heavy.lock python benchmarks/bench_sidecars.py --model /tmp/sc/model-cnn

`pamir annotate --xmp` and `pamir index --write-xmp` write a picture's model words whose
calibrated probability (pamir.calibration: P(the picture's caption has the word)) reaches
pamir.jobs.sidecars.WORD_PROBABILITY. A word written into a person's files should be right at
least 9 times in 10, so the threshold is the smallest at which the words written on the
model's validation pictures are right 90 % of the time (precision >= 0.9); where no
threshold of the grid reaches it, the one of the highest validation precision among those
that still give at least half the pictures a word (FALLBACK_PICTURES). For each
threshold on a grid: precision (written words in the caption / written words), recall
(caption words written / caption words), words written a picture and pictures with at
least one word; on the validation pictures (where the threshold is chosen; the calibration's
logistic was fitted on these same pictures' scores, five coefficients for every word) and on
test, read once as the check. Beside them, the annotation rule `pamir annotate` prints.

The model is any `pamir fit` of Corel 5k (its validation pictures are read from it); the
figures committed are of `-r cnn` (one CNN view: a fit of a few minutes), the threshold being
a probability, which the calibration makes mean the same across models.

Writes benchmarks/results/sidecars.json and sidecars.md.
"""

from __future__ import annotations


import numpy as np

from common.harness import Run, parser, report_head, rerender, save_report

GRID = [round(t, 2) for t in np.arange(0.30, 0.96, 0.05)]
GOAL = 0.9
#: Where no threshold reaches GOAL: the share of the validation pictures that must still get
#: a word (a threshold that writes on almost no picture is no default).
FALLBACK_PICTURES = 0.5


def measure(model: str) -> dict:
    from pamir.calibration import annotate
    from pamir.data import load_corel5k
    from pamir.protocol import Protocol
    from pamir.jobs.loading import load_system

    system = load_system(model)
    collection = load_corel5k()
    protocol = Protocol(collection, valid_ids=system.info["split"]["valid"])
    vocabulary = list(system.vocabulary)
    out = {"model": model, "representation": system.info.get("representation"),
           "vocabulary": len(vocabulary), "splits": {}}
    for split in ("valid", "test"):
        idx = protocol.split(split)
        paths = [str(collection.paths[i]) for i in idx]
        Z, ok, _ = system.transform_paths(paths)
        Z = np.asarray(Z)[np.asarray(ok, bool)]
        Y = _presence(collection, idx[np.asarray(ok, bool)], vocabulary)
        P = system.calibration.word_probabilities(Z)[:, :len(vocabulary)]
        rows = [_row(P >= t, Y) | {"threshold": t} for t in GRID]
        chosen = np.zeros_like(Y)
        for i, words in enumerate(annotate(system.calibration, Z, vocabulary)):
            chosen[i, [vocabulary.index(w) for w, _, _ in words]] = True
        out["splits"][split] = {"pictures": int(len(Y)), "grid": rows,
                                "rule": _row(chosen, Y) | {
                                    "name": system.calibration.annotation_rule}}
    out["chosen"], out["rule"] = choose(out["splits"]["valid"]["grid"])
    return out


def choose(grid: list[dict]) -> tuple[float, str]:
    """(threshold, why): the smallest whose precision reaches GOAL, else the most precise of
    those that give FALLBACK_PICTURES of the pictures a word."""
    for r in grid:
        if r["precision"] is not None and r["precision"] >= GOAL:
            return r["threshold"], f"the smallest whose validation precision is {GOAL} or more"
    wide = [r for r in grid if r["pictures_with_words"] >= FALLBACK_PICTURES]
    best = max(wide, key=lambda r: r["precision"])
    return best["threshold"], (
        f"none reaches a validation precision of {GOAL}; the most precise of those that give "
        f"at least {FALLBACK_PICTURES:.0%} of the validation pictures a word")


def _presence(collection, idx, vocabulary) -> np.ndarray:
    where = {w: k for k, w in enumerate(vocabulary)}
    Y = np.zeros((len(idx), len(vocabulary)), bool)
    for row, i in enumerate(idx):
        for w in collection.captions[i] or ():
            if w in where:
                Y[row, where[w]] = True
    return Y


def _row(written: np.ndarray, Y: np.ndarray) -> dict:
    n = int(written.sum())
    right = int((written & Y).sum())
    return {"precision": round(right / n, 4) if n else None,
            "recall": round(right / max(int(Y.sum()), 1), 4),
            "words_a_picture": round(n / len(Y), 3),
            "pictures_with_words": round(float(written.any(axis=1).mean()), 4)}


def report(r: dict) -> str:
    L = report_head("The words written into XMP sidecars: the probability they must reach", r)
    L += ["", f"Model: `{r['model']}` ({r['representation']}, {r['vocabulary']} words; "
          f"`pamir fit corel5k -r cnn`, not retrained: its validation pictures are the ones "
          f"its calibration was fitted on). Threshold chosen ({r['rule']}): "
          f"**{r['chosen']}** (pamir.jobs.sidecars.WORD_PROBABILITY).", "",
          "Precision counts a word right where the picture's Corel caption has it: the "
          "captions have at most 5 words and leave out much of what a picture shows, so "
          "these precisions are lower bounds.", ""]
    valid, test = r["splits"]["valid"], r["splits"]["test"]
    L += ["| probability at least | valid precision | recall | words a picture | pictures "
          "with a word | test precision | recall | words a picture |",
          "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for v, t in zip(valid["grid"], test["grid"]):
        mark = " (chosen)" if v["threshold"] == r["chosen"] else ""
        L.append(f"| {v['threshold']:.2f}{mark} | {_pct(v['precision'])} | {_pct(v['recall'])}"
                 f" | {v['words_a_picture']} | {_pct(v['pictures_with_words'])} | "
                 f"{_pct(t['precision'])} | {_pct(t['recall'])} | {t['words_a_picture']} |")
    for name, s in (("valid", valid), ("test", test)):
        rule = s["rule"]
        L.append(f"\n`pamir annotate`'s rule ({rule['name']}) on {name} ({s['pictures']} "
                 f"pictures): precision {_pct(rule['precision'])}, recall "
                 f"{_pct(rule['recall'])}, {rule['words_a_picture']} words a picture.")
    return "\n".join(L) + "\n"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--model", help="a `pamir fit corel5k` model folder")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite results/sidecars.md from sidecars.json, measuring nothing")
    args = ap.parse_args(argv)
    if args.report_only:
        rerender("sidecars", report)
        return
    if not args.model:
        ap.error("--model is needed (or --report-only)")
    run = Run("bench_sidecars.py", argv)
    r = measure(args.model)
    save_report("sidecars", {**run.info(), "minutes": run.minutes(), **r}, report)


if __name__ == "__main__":
    main()
