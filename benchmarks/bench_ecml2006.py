"""The 2006 papers' representations on Corel 5k: ECML 2006 Tables 3, 5, 6 and AMR 2006
Tables 4, 5 (CMRM, CMTT, PLSA, PAMIR x Blobs, SIFT, Blobs+SIFT), our own Blobs beside
Duygulu's.

    flock /tmp/pamir-heavy.lock nice python benchmarks/bench_ecml2006.py

1. Representations (pamir.features.registry), fitted on the 4,000 training pictures:
   - Blobs: Duygulu's own ("blobs-arff", mulan's ARFF rows; what the papers used: the
     faithful-to-paper tables) and ours ("blobs", segmentation made here);
   - SIFT ("sift"): the picture size (128 native, 256 enlarged) and codebook size (SIFT_SIZES)
     chosen on validation with PAMIR at c = 0.1 (one point each: a full grid per size costs
     ~10x more); keypoints per picture reported;
   - Blobs+SIFT: [blobs, w sift], w chosen on validation per model among WEIGHTS (PLSA and
     PAMIR: at one grid point, then their grid at the chosen w).
2. Each model's parameters by pamir.training.selection.select on validation (PLSA on a reduced grid,
   REDUCED_GRIDS: its full grid is ~20 min per representation on this shared machine), then
   one test evaluation: 2,241 queries, Wilcoxon PAMIR vs each.
3. Writes benchmarks/results/ecml2006.md + .json and the corel5k.json keys MODEL-blobs,
   MODEL-sift, MODEL-blobs+sift (Blobs = Duygulu's ARFF blobs, as the paper) and
   cmrm-blobs-ours, pamir-blobs-ours (our segmentation), per-query files under perquery/.
   An existing MODEL-blobs entry is updated, not replaced (bench_compare's extra studies stay).
"""

from __future__ import annotations

import json
import time

import numpy as np

from common.corel import Corel, selection_rows, test_entry
from common.harness import (PERQUERY, RESULTS, Run, parser, read_summary, report_head,
                            write_json, write_results)
from pamir import config
from pamir.evaluation import wilcoxon
from pamir.features.blobs import ArffBlobs, BlobSettings, SegmentedBlobs
from pamir.features.registry import Concatenation
from pamir.features.sift import SIFT_SIZES, SiftVisterms

MODELS = ("cmrm", "cmtt", "plsa", "pamir")
REPS = ("blobs", "sift", "blobs+sift")
WEIGHTS = (0.5, 1.0, 2.0)
#: PLSA's aspects measured past the reduced grid's edge (200), for the explanations.
PLSA_BEYOND = (400,)
SIFT_SIDES = (128, 256)
#: Grids cut for the time this shared 2-core machine gives (the full grids are 120 CMRM,
#: 28 CMTT and 16 PLSA points per representation, x3 for the Blobs+SIFT weights): the points
#: kept bracket what validation chose on the blobs in bench_compare / bench_plsa_svm.
REDUCED_GRIDS = {"cmrm": {"alpha": [0.1, 0.3, 0.5], "beta": [0.1, 0.5, 0.9, 0.97, 0.99],
                          "mode": ["pacmrm", "drcmrm"]},
                 "cmtt": {"n_components": [50, 100, 200, 400],
                          "normalise": ["terms", "visterms"], "l2_pictures": [True]},
                 "plsa": {"n_aspects": [100, 200], "n_iter_fold": [10],
                          "output": ["probability", "log"]}}
#: The one point per model at which the Blobs+SIFT weight is chosen (then the grid runs at
#: the chosen weight): each model's choice on Duygulu's blobs.
WEIGHT_POINT = {"cmrm": {"alpha": 0.1, "beta": 0.97, "mode": "pacmrm"},
                "cmtt": {"n_components": 100, "normalise": "visterms"},
                "plsa": {"n_aspects": 200, "n_iter_fold": 10, "output": "probability"},
                "pamir": {"c": 0.1}}

PAPER = {  # ECML 2006 Table 3 = AMR 2006 Table 3 (test AvgP, all 2,241 queries)
    "table3": {"blobs": {"cmrm": 10.4, "cmtt": 11.8, "plsa": 9.7, "pamir": 11.9},
               "sift": {"cmrm": 10.8, "cmtt": 9.1, "plsa": 12.3, "pamir": 16.0},
               "blobs+sift": {"cmrm": 14.7, "cmtt": 11.5, "plsa": 16.7, "pamir": 21.6}},
    # ECML 2006 Table 5 (Blobs+SIFT, all queries) and Table 6 (single-word): AvgP, BEP, P10
    "table5": {"cmrm": (14.7, 10.5, 5.8), "cmtt": (11.5, 5.9, 5.5), "plsa": (16.7, 10.5, 7.1),
               "pamir": (21.6, 13.4, 8.8)},
    "table6": {"cmrm": (19.2, 19.7, 17.8), "cmtt": (19.1, 17.4, 17.9),
               "plsa": (24.5, 22.2, 21.3), "pamir": (30.7, 27.2, 25.3)},
    # AMR 2006 Table 4: single-word AvgP per representation
    "amr4": {"blobs": {"cmrm": 14.2, "cmtt": 17.2, "plsa": 15.5, "pamir": 16.6},
             "sift": {"cmrm": 14.2, "cmtt": 15.1, "plsa": 17.1, "pamir": 23.8},
             "blobs+sift": {"cmrm": 19.2, "cmtt": 19.1, "plsa": 24.5, "pamir": 30.7}},
    # AMR 2006 Table 5: PAMIR Blobs+SIFT single-word AvgP by relevant pictures (queries)
    "amr5": {"<=2": (47, 15.5), "3-7": (69, 26.7), ">7": (63, 46.5)},
    "table1": {"blobs_per_picture": 9.4, "sift_per_picture": 229.5, "blob_clusters": 500,
               "sift_clusters": 1000},
}
METRICS = ("avgp", "bep", "p10")


def log(s: str) -> None:
    print(s, flush=True)


# -------------------------------------------------------------------------- features

def features(base: Corel, rep, name: str) -> Corel:
    """The pictures through a representation fitted on the training pictures."""
    t0 = time.perf_counter()
    train_paths = [base.collection.paths[i] for i in base.protocol.train]
    rep.fit(train_paths)
    F, ok, _ = rep.transform(base.collection.paths)
    dev = np.concatenate([base.protocol.train, base.protocol.valid, base.protocol.test])
    if not ok[dev].all():
        raise RuntimeError(f"{name}: {int((~ok[dev]).sum())} pictures could not be read")
    corel = base.with_features(F, name)
    corel.rep = rep
    corel.feature_seconds = time.perf_counter() - t0
    log(f"{name}: {F.shape[1]} dims, {corel.visterms_per_picture()} distinct visterms a "
        f"picture ({corel.feature_seconds:.0f} s)")
    return corel


def combine(blobs: Corel, sift: Corel, w: float) -> Corel:
    rep = Concatenation([blobs.rep, sift.rep], [1.0, w])
    corel = blobs.with_features(rep.combine([blobs.F, sift.F]), "blobs+sift")
    corel.rep = rep
    return corel


def choose_sift(base: Corel) -> tuple[Corel, list[dict]]:
    """SIFT picture size and codebook size by PAMIR's validation AvgP at c = 0.1."""
    rows, best = [], None
    for side in SIFT_SIDES:
        for k in SIFT_SIZES if side == SIFT_SIDES[0] else (1000,):
            corel = features(base, SiftVisterms(k, short_side=side,
                                                cache_dir=config.default_cache_dir()),
                             "sift")
            sel = corel.select("pamir", params={"c": 0.1}, grid={}, log=None)
            row = {"short_side": side, "n_visterms": k, "valid_avgp": round(sel.valid_avgp, 2),
                   "keypoints_per_picture": corel.rep.keypoints_per_picture_,
                   "visterms_per_picture": corel.visterms_per_picture(),
                   "seconds": round(corel.feature_seconds, 1)}
            rows.append(row)
            log(f"sift {row}")
            if best is None or sel.valid_avgp > best[0]:
                best = (sel.valid_avgp, corel)
    return best[1], rows


# ---------------------------------------------------------------------------- models

def fit_on(name: str, corel: Corel, **kw):
    grid = REDUCED_GRIDS.get(name)
    return corel.select(name, grid=grid, log=None, **kw)


def entry(name: str, key: str, sel, corel: Corel, describe: dict, run: Run) -> dict:
    model = sel.model
    ev = corel.test.evaluate(model)
    e = {**test_entry(key, ev), "params": sel.chosen, "valid_avgp": round(sel.valid_avgp, 2),
         "features": describe, "selection": selection_rows(sel, top=10),
         "fitted_on": "train (4,000 pictures); hyper-parameters from validation AvgP",
         **run.info()}
    e["_per_query"] = ev.per_query
    log(f"{key}: {sel.chosen}; valid {sel.valid_avgp:.2f}; test {e['test']}")
    return e


def run_models(rep_name: str, corel: Corel | None, describe: dict, run: Run, models,
               blobs=None, sift=None) -> dict:
    out = {}
    for name in models:
        t0 = time.perf_counter()
        if rep_name == "blobs+sift":
            tried = []
            for w in WEIGHTS:
                c = combine(blobs, sift, w)
                point = WEIGHT_POINT.get(name)
                s = (c.select(name, params=point, grid={}, log=None) if point
                     else fit_on(name, c))
                tried.append((s.valid_avgp, w, c, s))
                log(f"  {name} blobs+sift w={w}: valid {s.valid_avgp:.2f}")
            _, w, corel, sel = max(tried, key=lambda t: t[0])
            if name in WEIGHT_POINT:
                sel = fit_on(name, corel)
            d = {**describe, "sift_weight": w,
                 "weights_tried": {str(t[1]): round(t[0], 2) for t in tried}}
        else:
            sel = fit_on(name, corel)
            d = describe
        e = entry(name, f"{name}-{rep_name}", sel, corel, d, run)
        e["seconds"] = round(time.perf_counter() - t0, 1)
        if REDUCED_GRIDS.get(name):
            e["grid"] = REDUCED_GRIDS[name]
        out[name] = e
    return out


# ---------------------------------------------------------------------------- report

def rel(ours: float, paper: float) -> str:
    return f"{100 * (ours - paper) / paper:+.0f}%"


def tables(results: dict, ours_blobs: dict, corel: Corel, sift_rows, info: dict) -> tuple:
    test = corel.test
    single = test.subsets["single-word"]
    nrel = test.queries.n_relevant
    data = {"table3": {}, "table5": {}, "table6": {}, "amr4": {}, "amr5": {}, "wilcoxon": {},
            "sift_choice": sift_rows, "ours_vs_arff": {}}
    lines = report_head("The 2006 papers' representations on Corel 5k (ECML 2006, AMR 2006)",
                        info)
    lines.append(f"\nSeed {config.SEED}; {len(corel.protocol.train)} train / "
                 f"{len(corel.protocol.valid)} valid / {len(corel.protocol.test)} test pictures; "
                 f"vocabulary {corel.protocol.T}; {len(test.queries)} test queries, "
                 f"{int(single.sum())} single-word. Every parameter chosen on validation; test "
                 "figures measured once. `*`: PAMIR differs from that model by the two-sided "
                 "Wilcoxon signed-rank test at 95% (paper: bold). Cells in the paper's +-15% "
                 "band are marked `ok`.")
    # Table 3
    lines.append("\n## ECML 2006 Table 3 (= AMR 2006 Table 3): test AvgP, all queries\n")
    lines.append("| representation | " + " | ".join(f"{m.upper()} ours | paper" for m in MODELS)
                 + " |")
    lines.append("|---|" + "---|---|" * len(MODELS))
    for rep in REPS:
        row = results.get(rep, {})
        cells = []
        for m in MODELS:
            e = row.get(m)
            paper = PAPER["table3"][rep][m]
            if not e:
                cells += ["-", f"{paper}"]
                continue
            v = e["test"]["avgp"]
            star = ""
            if m != "pamir" and "pamir" in row:
                w = wilcoxon(row["pamir"]["_per_query"]["avgp"], e["_per_query"]["avgp"])
                star = "*" if w["significant"] else ""
                data["wilcoxon"].setdefault(rep, {})[m] = {"pvalue": float(f"{w['pvalue']:.3g}"),
                                                           "significant": bool(w["significant"])}
            band = "ok" if abs(v - paper) <= 0.15 * paper else rel(v, paper)
            cells += [f"{v:.1f}{star}", f"{paper} ({band})"]
            data["table3"].setdefault(rep, {})[m] = v
        label = {"blobs": "Blobs (Duygulu's, ARFF)", "sift": "SIFT",
                 "blobs+sift": "Blobs+SIFT"}[rep]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    # Tables 5, 6
    row = results.get("blobs+sift", {})
    for tab, subset, title in (("table5", "all", "all 2,241 test queries"),
                               ("table6", "single-word", f"{int(single.sum())} single-word "
                                                         "test queries")):
        lines.append(f"\n## ECML 2006 Table {tab[-1]}: Blobs+SIFT, {title}\n")
        lines.append("| | " + " | ".join(f"{m.upper()} ours | paper" for m in MODELS) + " |")
        lines.append("|---|" + "---|---|" * len(MODELS))
        for i, metric in enumerate(METRICS):
            cells = []
            for m in MODELS:
                e = row.get(m)
                paper = PAPER[tab][m][i]
                if not e:
                    cells += ["-", str(paper)]
                    continue
                v = e["subsets"][subset][metric]
                star = ""
                if m != "pamir" and "pamir" in row:
                    mask = test.subsets[subset]
                    w = wilcoxon(row["pamir"]["_per_query"][metric][mask],
                                 e["_per_query"][metric][mask])
                    star = "*" if w["significant"] else ""
                band = "ok" if abs(v - paper) <= 0.15 * paper else rel(v, paper)
                cells += [f"{v:.1f}{star}", f"{paper} ({band})"]
                data[tab].setdefault(m, {})[metric] = v
            lines.append(f"| {metric.upper() if metric != 'avgp' else 'AvgP'} | "
                         + " | ".join(cells) + " |")
    one = results.get("1word", {}).get("pamir")
    if one:
        cells = []
        for i, metric in enumerate(METRICS):
            v, paper = one["subsets"]["single-word"][metric], PAPER["table6"]["pamir"][i]
            band = "ok" if abs(v - paper) <= 0.15 * paper else rel(v, paper)
            cells.append(f"{metric.upper() if metric != 'avgp' else 'AvgP'} {v:.1f} "
                         f"(paper {paper}, {band})")
            data["table6"].setdefault("pamir-1word", {})[metric] = v
        lines.append("\nPAMIR trained (and early-stopped, and chosen) on single-word queries "
                     f"only, as the paper's Table 6 (c = {one['params'].get('c')}, validation "
                     f"{one['valid_avgp']}): " + "; ".join(cells) + ".")
    lines.append("\nIn the table above PAMIR is the model trained on all queries (Table 5's), "
                 "evaluated on the single-word ones; the other models do not train on "
                 "queries.")
    # AMR Table 4
    lines.append("\n## AMR 2006 Table 4: test AvgP, single-word queries\n")
    lines.append("| representation | " + " | ".join(f"{m.upper()} ours | paper" for m in MODELS)
                 + " |")
    lines.append("|---|" + "---|---|" * len(MODELS))
    for rep in REPS:
        cells = []
        for m in MODELS:
            e = results.get(rep, {}).get(m)
            paper = PAPER["amr4"][rep][m]
            if not e:
                cells += ["-", str(paper)]
                continue
            v = e["subsets"]["single-word"]["avgp"]
            band = "ok" if abs(v - paper) <= 0.15 * paper else rel(v, paper)
            cells += [f"{v:.1f}", f"{paper} ({band})"]
            data["amr4"].setdefault(rep, {})[m] = v
        lines.append(f"| {rep} | " + " | ".join(cells) + " |")
    # AMR Table 5
    for e, how in ((row.get("pamir"), "trained on all queries"),
                   (one, "trained on single-word queries")):
        if not e:
            continue
        ap = e["_per_query"]["avgp"]
        lines.append("\n## AMR 2006 Table 5: PAMIR on Blobs+SIFT, single-word queries by "
                     f"relevant test pictures ({how})\n")
        lines.append("| relevant pictures | queries (ours) | queries (paper) | AvgP ours | "
                     "AvgP paper |\n|---|---|---|---|---|")
        for label, mask in (("<=2", single & (nrel <= 2)),
                            ("3-7", single & (nrel > 2) & (nrel <= 7)),
                            (">7", single & (nrel > 7))):
            v = round(100 * float(ap[mask].mean()), 2)
            nq, paper = PAPER["amr5"][label]
            band = "ok" if abs(v - paper) <= 0.15 * paper else rel(v, paper)
            lines.append(f"| {label} | {int(mask.sum())} | {nq} | {v:.1f} | {paper} ({band}) |")
            data["amr5"].setdefault(how, {})[label] = {"queries": int(mask.sum()), "avgp": v}
    # our blobs
    if ours_blobs:
        lines.append("\n## Our Blobs (segmentation made here) beside Duygulu's (ARFF)\n")
        lines.append("| model | ARFF blobs: valid / test AvgP | our blobs: valid / test AvgP |"
                     "\n|---|---|---|")
        for m, e in ours_blobs.items():
            a = results.get("blobs", {}).get(m)
            w = wilcoxon(e["_per_query"]["avgp"], a["_per_query"]["avgp"]) if a else None
            lines.append(f"| {m.upper()} | {a['valid_avgp']} / {a['test']['avgp']} | "
                         f"{e['valid_avgp']} / {e['test']['avgp']}"
                         + (f" (Wilcoxon p {w['pvalue']:.3g})" if w else "") + " |"
                         if a else f"| {m.upper()} | - | {e['valid_avgp']} / "
                         f"{e['test']['avgp']} |")
            data["ours_vs_arff"][m] = {"ours": e["test"]["avgp"],
                                       "arff": a["test"]["avgp"] if a else None}
    return lines, data


def explain(base: Corel, blobs: Corel, sift: Corel | None) -> dict:
    """Validation measurements behind the cells outside the paper's band (never test):
    PAMIR at the paper's C (ECML Table 4: 0.001 on SIFT, 0.01 on Blobs, outside or at the
    edge of PAMIR's grid), CMTT beyond its grid's largest rank, PLSA beyond its reduced
    grid's largest number of aspects (at the chosen output and Blobs+SIFT weight), and the
    SIFT sizes around the chosen one."""
    out = {}
    if sift is None:
        side, k = 256, 1000
        sift = features(base, SiftVisterms(k, short_side=side,
                                           cache_dir=config.default_cache_dir()), "sift")
    for c in (0.001, 0.01):
        s = sift.select("pamir", params={"c": c}, grid={}, log=None)
        out[f"pamir-sift c={c}"] = round(s.valid_avgp, 2)
        log(f"explain: pamir-sift c={c}: valid {s.valid_avgp:.2f}")
    s = blobs.select("pamir", params={"c": 0.01}, grid={}, log=None)
    out["pamir-blobs c=0.01"] = round(s.valid_avgp, 2)
    for n in (800,):
        s = sift.select("cmtt", params={"n_components": n, "normalise": "visterms"}, grid={},
                        log=None)
        out[f"cmtt-sift n_components={n}"] = round(s.valid_avgp, 2)
        log(f"explain: cmtt-sift {n}: valid {s.valid_avgp:.2f}")
    summary = read_summary()
    for name, corel in (("blobs", blobs), ("sift", sift), ("blobs+sift", combine(
            blobs, sift, summary["plsa-blobs+sift"]["features"]["sift_weight"]))):
        chosen = summary[f"plsa-{name}"]["params"]
        for n in PLSA_BEYOND:
            s = corel.select("plsa", params={**chosen, "n_aspects": n}, grid={}, log=None)
            out[f"plsa-{name} n_aspects={n}"] = round(s.valid_avgp, 2)
            log(f"explain: plsa-{name} {n} aspects: valid {s.valid_avgp:.2f}")
    return out


def single_word_pamir(blobs: Corel, sift: Corel, w: float, run: Run) -> dict:
    """ECML Table 6's PAMIR as the paper trained it: on the single-word training queries,
    early-stopped and chosen on the single-word validation queries, on Blobs+SIFT at the
    weight validation chose for PAMIR. (pamir's TrainingQueries builds every subset of a
    caption; here it is given max_words=1, in this process only.)"""
    import functools  # noqa: PLC0415

    import pamir.models.pamir as pm  # noqa: PLC0415
    import pamir.training.selection as ps  # noqa: PLC0415

    saved_tq = pm.TrainingQueries, ps.TrainingQueries
    one = functools.partial(saved_tq[0], max_words=1)
    pm.TrainingQueries = ps.TrainingQueries = one
    try:
        corel = combine(blobs, sift, w)
        sel = fit_on("pamir", corel)
    finally:
        pm.TrainingQueries, ps.TrainingQueries = saved_tq
    e = entry("pamir", "pamir-blobs+sift-1word", sel, corel,
              {"kind": "blobs-arff+sift", "sift_weight": w,
               "trained_on": "single-word queries only (ECML 2006 Table 6)"}, run)
    return e


def explanations(data: dict, ex: dict, sift_rows: list) -> list[str]:
    """Why the cells outside the paper's +-15% band are there, from what was measured."""
    rows = {(r["short_side"], r["n_visterms"]): r for r in sift_rows}
    small, big = rows.get((128, 1000)), rows.get((256, 1000))
    out = ["\n## Cells outside the paper's +-15%: what was measured\n"]
    if small and big:
        sizes = [rows[k] for k in sorted(rows) if k[0] == 128]
        out.append(
            "- **SIFT (every model) and what builds on it.** Corel 5k here is half the papers' "
            "resolution (192x128). At that size OpenCV finds "
            f"{small['keypoints_per_picture']} keypoints a picture (the papers: 229.5 on "
            "384x256), but each describes a patch twice as large in the scene: the fine "
            "scales the papers' keypoints saw are gone. Enlarging to a 256-px shorter side "
            f"gives {big['keypoints_per_picture']} keypoints and PAMIR's validation AvgP goes "
            f"from {small['valid_avgp']} to {big['valid_avgp']} at 1,000 visterms; at 128 px it "
            "rises with the codebook ("
            + ", ".join(f"{r['n_visterms']}: {r['valid_avgp']}" for r in sizes)
            + ") and the largest size tried is still the best, so the 256-px codebook (only "
            "1,000 tried, for time) is probably short of its best too. Interpolated pixels "
            "do not bring back the lost detail: that is the gap no setting here closes.")
    if ex:
        c001, c01 = ex.get("pamir-sift c=0.001"), ex.get("pamir-sift c=0.01")
        out.append(
            "- **PAMIR on SIFT.** The paper chose C = 0.001 on SIFT (ECML Table 4), below "
            f"PAMIR's grid (0.01, 0.1, 1): on validation C = 0.001 gives {c001} and C = 0.01 "
            f"{c01}, against {data.get('valid', {}).get('pamir-sift', '-')} at the chosen "
            "0.1: a smaller C is worse here, so the grid is not what holds PAMIR back; the "
            "SIFT bags are.")
        n800 = ex.get("cmtt-sift n_components=800")
        out.append(
            "- **CMTT on SIFT.** Validation chose 400 components, the reduced grid's edge; "
            f"800 components give {n800} on validation (against "
            f"{data.get('valid', {}).get('cmtt-sift', '-')}): the grid's edge is not the "
            "cause either. CMTT is also the model the paper found weakest on SIFT (9.1).")
    beyond = {r: ex.get(f"plsa-{r} n_aspects={PLSA_BEYOND[-1]}") for r in REPS} if ex else {}
    chosen = {r: data.get("valid", {}).get(f"plsa-{r}") for r in REPS}
    if beyond and all(v is not None for v in (*beyond.values(), *chosen.values())):
        gain = max(beyond[r] - chosen[r] for r in REPS)
        out.append(
            "- **PLSA.** Its grid was cut to 100 / 200 aspects and 10 fold-in iterations "
            "(REDUCED_GRIDS, for time) and validation chose 200 aspects everywhere, the edge "
            f"(TPAMI chose 400 on visterms). At {PLSA_BEYOND[-1]} aspects (the chosen output "
            "and weight), validation AvgP is "
            + ", ".join(f"{beyond[r]} on {r} (200: {chosen[r]})" for r in REPS) + ": "
            + (f"lower on every representation (by {-gain:.2f} to "
               f"{max(chosen[r] - beyond[r] for r in REPS):.2f})" if gain < 0 else
               f"at most {gain:+.2f}, within the validation set's noise (about +-1.5)"
               if gain < 1.5 else
               f"up to {gain:+.2f}: the reduced grid cost PLSA that much on validation")
            + ("" if gain >= 1.5 else ", so the grid's edge is not what holds PLSA back; its "
               "SIFT and Blobs+SIFT cells carry the SIFT gap above")
            + ".")
    else:
        out.append(
            "- **PLSA.** Its grid was cut to 100 / 200 aspects and 10 fold-in iterations "
            "(REDUCED_GRIDS, for time) and validation chose 200 aspects everywhere, the edge; "
            "TPAMI chose 400 on visterms. Not measured beyond, for time.")
    one = data["table6"].get("pamir-1word")
    out.append(
        "- **Table 6 and AMR Tables 4-5 (single-word queries).** The paper trained PAMIR on "
        "single-word queries only for Table 6; the tables show the model trained on every "
        "query subset, evaluated on the single-word ones"
        + (f", and PAMIR trained on single-word queries only is reported under Table 6 "
           f"(AvgP {one['avgp']}): training as the paper did "
           + ("does not close" if one["avgp"] < 0.85 * 30.7 else "closes") + " the gap"
           if one else "") + ". What remains is the SIFT gap above: PAMIR's single-word AvgP "
        "on SIFT alone is the furthest from the paper (AMR Table 4). CMRM's single-word "
        "figures are above the paper's (+22 % on Blobs+SIFT): it chose the largest SIFT weight "
        "tried (2.0).")
    return out


def saved(summary: dict, key: str) -> dict:
    """A results entry with its per-query scores, as written by an earlier run."""
    with np.load(PERQUERY / f"{key}.npz", allow_pickle=False) as z:
        return {**summary[key], "_per_query": {m: z[m] for m in METRICS}}


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--reps", default=",".join(REPS))
    ap.add_argument("--no-ours", action="store_true", help="skip our own blobs")
    ap.add_argument("--single-word-only", action="store_true",
                    help="only PAMIR trained on single-word queries (ECML Table 6)")
    ap.add_argument("--explain-only", action="store_true",
                    help="only the validation measurements behind the explanations")
    ap.add_argument("--report-only", action="store_true",
                    help="rebuild the report from corel5k.json and perquery/ without fitting")
    args = ap.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    reps = [r for r in args.reps.split(",") if r]
    run = Run("bench_ecml2006.py", argv)
    base = Corel(F=np.zeros((5000, 1)), representation="none")  # collection + protocol
    blobs = features(base, ArffBlobs(), "blobs")
    explain_file = RESULTS / "ecml2006_explain.json"
    if args.explain_only:
        write_json(explain_file, {**explain(base, blobs, None), **run.info()})
        return
    if args.single_word_only:
        sift = features(base, SiftVisterms(1000, short_side=256,
                                           cache_dir=config.default_cache_dir()), "sift")
        w = read_summary()["pamir-blobs+sift"]["features"]["sift_weight"]
        e = single_word_pamir(blobs, sift, w, run)
        write_results({"pamir-blobs+sift-1word": {k: v for k, v in e.items()
                                                  if not k.startswith("_")}})
        return
    if args.report_only:
        sift_rows = read_summary().get("pamir-sift", {}).get("features", {}).get("choice", [])
        sift = None
    else:
        sift, sift_rows = (choose_sift(base) if ("sift" in reps or "blobs+sift" in reps)
                           else (None, []))
    describe = {
        "blobs": {"kind": "blobs-arff", "n_visterms": 499,
                  "visterms_per_picture": blobs.visterms_per_picture()},
        "sift": (sift and {"kind": "sift", "short_side": sift.rep.short_side,
                          "n_visterms": sift.rep.n_visterms,
                          "keypoints_per_picture": sift.rep.keypoints_per_picture_,
                          "visterms_per_picture": sift.visterms_per_picture(),
                          "choice": sift_rows}) or {},
    }
    if sift:
        describe["blobs+sift"] = {"kind": "blobs-arff+sift", "blobs": describe["blobs"],
                                  "sift": describe["sift"]}
    results = {}
    summary = read_summary()
    if args.report_only:
        reps, ours = [], {}
        for rep in REPS:
            for m in MODELS:
                if f"{m}-{rep}" in summary and (PERQUERY / f"{m}-{rep}.npz").is_file():
                    results.setdefault(rep, {})[m] = saved(summary, f"{m}-{rep}")
        if "pamir-blobs+sift-1word" in summary:
            results["1word"] = {"pamir": saved(summary, "pamir-blobs+sift-1word")}
        for m in ("cmrm", "pamir"):
            if f"{m}-blobs-ours" in summary:
                ours[m] = saved(summary, f"{m}-blobs-ours")
        args.no_ours = True
    for rep in reps:
        log(f"== {rep}")
        corel = {"blobs": blobs, "sift": sift}.get(rep)
        results[rep] = run_models(rep, corel, describe[rep], run, models, blobs, sift)
        keys = {}
        for m, e in results[rep].items():
            key = f"{m}-{rep}"
            clean = {k: v for k, v in e.items() if not k.startswith("_")}
            keys[key] = {**summary.get(key, {}), **clean} if rep == "blobs" else clean
        write_results(keys)
    if not args.report_only and "pamir" in results.get("blobs+sift", {}):
        e = single_word_pamir(blobs, sift, results["blobs+sift"]["pamir"]["features"]
                              ["sift_weight"], run)
        write_results({"pamir-blobs+sift-1word": {k: v for k, v in e.items()
                                                  if not k.startswith("_")}})
        results["1word"] = {"pamir": e}
    ours = ours if args.report_only else {}
    ours_d = summary.get("cmrm-blobs-ours", {}).get("features") if args.report_only else None
    if not args.no_ours:
        log("== our blobs")
        own = features(base, SegmentedBlobs(BlobSettings(), cache_dir=config.default_cache_dir()),
                       "blobs-ours")
        d = ours_d = {"kind": "blobs", "settings": BlobSettings().to_dict(),
             "regions_per_picture": own.rep.regions_per_picture_,
             "visterms_per_picture": own.visterms_per_picture()}
        for m in [m for m in ("cmrm", "pamir") if m in models]:
            ours[m] = entry(m, f"{m}-blobs-ours", fit_on(m, own), own, d, run)
        write_results({f"{m}-blobs-ours": {k: v for k, v in e.items() if not k.startswith("_")}
                       for m, e in ours.items()})
    if not args.report_only and sift is not None:
        write_json(explain_file, {**explain(base, blobs, sift), **run.info()})
    info = run.info()
    lines, data = tables(results, ours, blobs, sift_rows, info)
    if args.report_only:
        first = summary.get("pamir-sift", {})
        lines.insert(3, f"Rebuilt from corel5k.json and perquery/; the figures were measured by "
                        f"`{first.get('command')}` ({first.get('date')}), the single-word PAMIR "
                        "by its `--single-word-only` stage; each entry records its own command.  ")
    if explain_file.is_file():
        ex = json.loads(explain_file.read_text())
        lines.append("\n## Validation measurements behind the explanations (never test)\n")
        lines += [f"- {k}: validation AvgP {v}" for k, v in ex.items()
                  if k not in ("command", "machine", "date", "load_average")]
        lines.append(f"\n(measured by `{ex.get('command')}`, {ex.get('date')}; the SIFT "
                     "codebook is fitted again when its cache is empty, and faiss's k-means is "
                     "not bit-reproducible, so these can differ by a few tenths from the same "
                     "settings in the tables' run)")
        data["explain"] = ex
    else:
        ex = {}
    data["valid"] = {f"{m}-{rep}": e["valid_avgp"] for rep, row in results.items()
                     for m, e in row.items()}
    lines += explanations(data, ex, sift_rows)
    lines.append("\n## SIFT: picture and codebook size chosen on validation (PAMIR, c = 0.1)"
                 "\n\n| short side | codebook | keypoints a picture | distinct visterms a "
                 "picture | valid AvgP |\n|---|---|---|---|---|")
    for r in sift_rows:
        lines.append(f"| {r['short_side']} | {r['n_visterms']} | {r['keypoints_per_picture']} | "
                     f"{r['visterms_per_picture']} | {r['valid_avgp']} |")
    lines.append(f"\nThe papers (Table 1): {PAPER['table1']['sift_per_picture']} SIFT keypoints "
                 f"and {PAPER['table1']['blobs_per_picture']} blobs a picture, "
                 f"{PAPER['table1']['sift_clusters']} SIFT and "
                 f"{PAPER['table1']['blob_clusters']} blob clusters. Ours: "
                 f"{describe['blobs']['visterms_per_picture']} ARFF blobs a picture (presence)"
                 + (f"; our segmentation {ours_d['regions_per_picture']} regions a picture"
                    if ours_d else "") + ".")
    lines.append("\n## Chosen parameters\n")
    for rep, row in results.items():
        for m, e in row.items():
            extra = (f"; SIFT weight {e['features']['sift_weight']} (validation "
                     f"{e['features']['weights_tried']})" if "weights_tried" in e["features"]
                     else "")
            where = rep if rep != "1word" else "blobs+sift, trained on single-word queries"
            lines.append(f"- {m} on {where}: {e['params']}, validation AvgP {e['valid_avgp']}"
                         f"{extra}; {e.get('seconds', '-')} s")
    if not args.report_only:
        lines.append(f"\n({run.minutes()} min)")
    (RESULTS / "ecml2006.md").write_text("\n".join(lines) + "\n")
    write_json(RESULTS / "ecml2006.json", {**data, **info, "paper": PAPER})
    log("\n".join(lines))


if __name__ == "__main__":
    main()
