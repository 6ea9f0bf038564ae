"""Text read on Corel 5k's pictures with the detection network in fp32 and in int8, picture by
picture (pamir.facts.ocr_int8).

    flock /tmp/pamir-heavy.lock python benchmarks/bench_ocr_int8.py [--every 1]

Corel 5k's pictures (192 x 128) are mostly without text; some show signs, shop fronts,
banners. Each picture is read by both readers (pamir.facts.ocr.TextReader, the same
settings but `detect_precision`), from the same decode, in batches of 64 as the index's pass
reads them. Reported: the pictures given text facts by each, the words each reads (folded
words of three letters or more, Latin letters only: what a person searches for) at all and
on lines recognised with a score of at least 0.9 (real text; most lower-scored lines on
Corel are textures read as letters), how many of fp32's words int8 reads on the same
picture, the words read by one only, and the ms a picture of each reader (one thread).

Writes benchmarks/results/ocr_int8.json and .md (--report-only rewrites the .md).
"""

from __future__ import annotations

import time

from common.harness import (Run, checkout_commit, corel5k_folder, report_cli,
                            report_head, save_report)

STEM = "ocr_int8"
BATCH = 64
#: the score at which a line is counted as real text in the second comparison
REAL = 0.9


def _options(ap) -> None:
    ap.add_argument("--every", type=int, default=1, metavar="K",
                    help="read every K-th Corel picture (1: all 5,000)")


def words(lines, least: float) -> set[str]:
    from pamir.facts.ocr import text_facts  # noqa: PLC0415

    kept = [line for line in lines if line.confidence >= least]
    return {f.word for f in text_facts(kept)
            if len(f.word) >= 3 and f.word.isascii() and f.word.isalpha()}


def main(argv=None) -> None:
    args = report_cli(__doc__, STEM, report, argv, options=_options)
    if args is None:
        return
    from pamir.facts.ocr import OcrSettings, TextReader, text_facts  # noqa: PLC0415

    run = Run("bench_ocr_int8.py", argv)
    paths = sorted((corel5k_folder() / "images").glob("*/*.jpeg"))[::args.every]
    readers = {p: TextReader(OcrSettings(detect_precision=p)) for p in ("fp32", "int8")}
    assert readers["int8"].settings.detect_precision == "int8", "int8 could not be made"
    read: dict[str, list] = {p: [] for p in readers}
    seconds = dict.fromkeys(readers, 0.0)
    for lo in range(0, len(paths), BATCH):
        prepared = [readers["fp32"].prepare(p) for p in paths[lo:lo + BATCH]]
        for p, reader in readers.items():
            t = time.process_time()
            read[p] += reader.read_many(prepared)
            seconds[p] += time.process_time() - t
    r = {**run.info(), "minutes": run.minutes(), "commit": checkout_commit(),
         "pictures": len(paths), "every": args.every, "real_score": REAL,
         "ms": {p: round(1000 * s / len(paths), 1) for p, s in seconds.items()},
         "with_text": {p: sum(bool(text_facts(lines)) for lines in read[p]) for p in read}}
    for name, least in (("all", 0.0), ("real", REAL)):
        old = [words(lines, least) for lines in read["fp32"]]
        new_any = [words(lines, 0.0) for lines in read["int8"]]
        new = [words(lines, least) for lines in read["int8"]]
        old_any = [words(lines, 0.0) for lines in read["fp32"]]
        r[name] = {"fp32_words": sum(map(len, old)), "int8_words": sum(map(len, new)),
                   "fp32_read_by_int8": sum(len(a & b) for a, b in zip(old, new_any)),
                   "fp32_only": sorted(w for a, b in zip(old, new_any) for w in a - b),
                   "int8_only": sorted(w for a, b in zip(new, old_any) for w in a - b)}
    save_report(STEM, r, report)


def report(r: dict) -> str:
    lines = report_head("Text on Corel 5k: detection in fp32 and in int8", r)
    lines += [f"Code: commit {r['commit']}." if r.get("commit") else "", "",
              f"{r['pictures']:,} Corel pictures (every {r['every']}), each read by both "
              "readers from the same decode; ms a picture: one thread, CPU time.", "",
              "| detection | ms/picture | pictures given text facts |", "|---|---:|---:|"]
    for p in ("fp32", "int8"):
        lines.append(f"| {p} | {r['ms'][p]} | {r['with_text'][p]} |")
    lines += ["", "| words (3+ Latin letters) | fp32's | int8's | fp32's read by int8 on the "
              "same picture | fp32's only | int8's only |", "|---|---:|---:|---:|---|---|"]
    for name, what in (("all", "every line read"),
                       ("real", f"lines scored at least {r['real_score']}")):
        x = r[name]
        lines.append(f"| {what} | {x['fp32_words']} | {x['int8_words']} | "
                     f"{x['fp32_read_by_int8']} | {', '.join(x['fp32_only']) or '-'} | "
                     f"{', '.join(x['int8_only']) or '-'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
