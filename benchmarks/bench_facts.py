"""Keywords as facts (issue 37): a folder whose pictures carry their keywords is searched by
them with no model at all, and the untagged pictures are searched no worse than before.

The folder is issue 23's (bench_metadata.build, under /tmp, never in the repository): a copy of
Corel 5k's 5,000 JPEGs, the 4,500 development pictures' keywords written into their files by
exiftool seven ways (IPTC, XMP dc:subject, lr:hierarchicalSubject, digiKam TagsList,
XPKeywords, two kinds of sidecar), the 499 test pictures untagged. It is indexed with no model,
as a person's library is on the first day (`pamir index FOLDER`), then searched the way
`pamir search` does (Index.search):

1. every word some pictures are tagged with: recall at k = the number of pictures tagged with
   it (target 1.0: every tagged picture in the word's top ranks);
2. the test pictures' single-word queries (the protocol's 179 test words): AvgP over the
   untagged test pictures, from the order every picture gets, with the facts (the tagged
   pictures first) and without them (ImageNet's classes alone, the zero-caption search before
   issue 37). Target: no lower.

    flock /tmp/pamir-heavy.lock python benchmarks/bench_facts.py [--report-only]

Writes benchmarks/results/facts.json and facts.md.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from common.folders import (METADATA_WORK as WORK, build_tagged_folder,
                            run_pamir as pamir)
from common.harness import Run, report_cli, report_head, save_report

from pamir.data import find_corel5k, load_corel5k
from pamir.evaluation.metrics import average_precision
from pamir.index import Index, QueryError
from pamir.protocol import Protocol


def recall_of_tags(ix: Index) -> dict:
    """Recall at k = the tagged count, for every word the pictures are tagged with."""
    tagged: dict[str, set[int]] = {}
    for p in ix.pictures("ok"):
        for w in p.caption or ():
            tagged.setdefault(w, set()).add(p.id)
    recalls, worst, refused = [], [], []
    for word, ids in sorted(tagged.items()):
        try:
            hits = ix.search(word, len(ids))
        except QueryError as e:  # counted as recall 0, and listed
            hits = []
            refused.append(f"{word}: {e}")
        recall = len({h.id for h in hits} & ids) / len(ids)
        recalls.append(recall)
        if recall < 1:
            worst.append({"word": word, "tagged": len(ids), "recall": round(recall, 4)})
    return {"words": len(recalls), "mean_recall": round(float(np.mean(recalls)), 4),
            "words_below_1": worst[:20], "min_recall": round(float(min(recalls)), 4),
            "refused": refused}


def untagged_avgp(ix: Index, prot: Protocol) -> dict:
    """Single-word AvgP (%) of the test pictures, ranked among themselves in the order the
    index gives every picture: with facts, and with the facts set aside."""
    coll = prot.collection
    test = prot.split("test")
    position = {Path(coll.paths[i]).name: j for j, i in enumerate(test)}
    qs = prot.queries("test")
    one = np.flatnonzero(qs.n_words == 1)
    out = {}
    for with_facts in (True, False):
        S = np.full((len(one), len(test)), -np.inf)
        for row, qi in enumerate(one):
            try:
                q = ix.parse_query(" ".join(qs.words[qi]))
            except QueryError:
                continue
            if not with_facts:
                q = replace(q, fact_terms=[])
            hits = ix.search(q, len(ix))
            for rank, h in enumerate(hits):
                j = position.get(Path(h.path).name)
                if j is not None:
                    S[row, j] = -rank  # the index's order, among the test pictures
        S[np.isinf(S)] = -1e9  # not reached: last, tied
        avgp = average_precision(S, qs.relevance[one])
        out["facts" if with_facts else "no_facts"] = round(100 * float(avgp.mean()), 2)
    out["queries"] = int(len(one))
    return out


def main(argv=None) -> None:
    if report_cli(__doc__, "facts", report, argv) is None:
        return
    run = Run("bench_facts.py", argv, torch=True)
    root = find_corel5k()
    built = build_tagged_folder(root)
    index_dir = WORK / "index"
    seconds, output = pamir(["index", WORK / "pictures", "--index", index_dir])
    prot = Protocol(load_corel5k())
    started = time.perf_counter()
    with Index.open(index_dir) as ix:
        r = {**run.info(), "folder": built, "index_seconds": round(seconds, 1),
             "pictures": len(ix), "tags": recall_of_tags(ix),
             "untagged": untagged_avgp(ix, prot)}
    r["search_seconds"] = round(time.perf_counter() - started, 1)
    r["minutes"] = run.minutes()
    save_report("facts", r, report)


def report(r: dict) -> str:
    lines = report_head("Keywords as facts: a tagged folder searched with no model", r)
    t, u = r["tags"], r["untagged"]
    lines += ["", f"The folder: {r['folder']['pictures']:,} Corel pictures, "
                  f"{r['folder']['tagged']:,} with their keywords in their files "
                  f"({', '.join(f'{n} {w}' for w, n in r['folder']['ways'].items())}); "
                  f"`pamir index FOLDER` with no model took {r['index_seconds']} s.", "",
              "| measure | target | result |", "|---|---:|---:|",
              f"| recall at k = tagged count, mean over {t['words']} tagged words | 1.0 | "
              f"{t['mean_recall']} (lowest {t['min_recall']}) |",
              f"| untagged test pictures, single-word AvgP (%), {u['queries']} queries: with "
              f"facts | ≥ without | {u['facts']} |",
              f"| the same, facts set aside (ImageNet's classes alone) | | {u['no_facts']} |"]
    if t["words_below_1"]:
        lines += ["", "Words whose tagged pictures are not all in their top ranks: " + ", ".join(
            f"{w['word']} ({w['tagged']}: {w['recall']})" for w in t["words_below_1"])]
    lines += ["", f"Searches: {r['search_seconds']} s. Whole run: {r['minutes']} min.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
