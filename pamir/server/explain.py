"""Where on a picture its score for a query comes from: every view of a linear model, one map.

A linear model (PAMIR) scores a picture p for a query q as F(q, p) = q . W x, x being the
picture's vector: one view, or views side by side, each times its weight (cnn, cnn-lite1,
cnn-lite2 and visterms by default). The score is then the sum of each view's part,
g_v . x_v with g_v = weight_v q W[:, view v's columns], and each part is split over places
on the picture:

- visterms: each visterm v of the bag is the sum of the blocks quantised to it, so each of
  those tf_v blocks carries an equal share p_v / tf_v of its weight, and block b (visterm v_b)
  contributes c_b = (g . e_{v_b}) p[v_b] / tf[v_b]; sum_b c_b = g . p exactly. Taking p as
  given (the very row the model saw) keeps this exact whatever weighting the visual pipeline
  applies, as long as only visterms of the picture's blocks are non-zero in p.
- CNN views: each cell of the network's map, class-activation style
  (pamir.features.cnn_maps): exact shares of the score with the picture's L2 norm and power
  factors held fixed; as the effect of changing a cell they are first-order.
- any other view (sift, blobs): its part of the score, with no place on the picture.

The places are then merged into one heat map over the displayed picture: each contribution
spread evenly over its box (score per pixel), summed, and integrated over a grid of
HEAT_CELLS cells along the longer side, so the heat map's cells add up to the placed score.
"""

from __future__ import annotations

import os

import numpy as np

from ..features.cnn_maps import view_contributions
from ..features.registry import Concatenation, representation_name
from ..features.visterms import term_frequencies, tfidf

#: Cells of the merged heat map along the picture's longer side (the page smooths them).
HEAT_CELLS = 64

#: What the explanation's numbers are, for the JSON (pamir.features.cnn_maps derives it).
EXACTNESS = ("The contributions add up to score exactly. Visterm blocks: exact shares of a "
             "linear score. CNN cells: exact shares with the picture's L2 norm and power "
             "normalisation held as fixed per-picture scales; as the effect of changing one "
             "cell they are first-order (the power's marginal effect is gamma times the "
             "share: half of it for the default square root).")


def block_contributions(visterms: np.ndarray, bag: np.ndarray, W: np.ndarray,
                        q: np.ndarray) -> np.ndarray:
    """(n_blocks,) float64 contributions of each block to q . W bag.

    visterms: (n_blocks,) the visterm index of each block; bag: (V,) the picture's bag of
    visterms as the model saw it; W: (T x V) the linear map; q: (T,) the query vector.
    """
    visterms = np.asarray(visterms, dtype=np.int64)
    bag = np.asarray(bag, dtype=np.float64).ravel()
    q = np.asarray(q, dtype=np.float64).ravel()
    if W.shape != (q.size, bag.size):
        raise ValueError(f"W of shape {W.shape} for a query of {q.size} words and a bag of "
                         f"{bag.size} visterms")
    if len(visterms) == 0:
        return np.zeros(0)
    tf = np.bincount(visterms, minlength=bag.size)
    outside = np.flatnonzero((bag != 0) & (tf == 0))
    if len(outside):
        raise ValueError(f"the bag weights visterm {outside[0]} that no block has: the blocks "
                         "and the bag come from different pictures or pipelines")
    qW = q @ np.asarray(W[:, visterms], dtype=np.float64)  # (n_blocks,)
    return qW * bag[visterms] / tf[visterms]


def _linear_map(system) -> np.ndarray:
    """The model's W (T x D) from pamir.training.online.linear_map, the one home of which models are
    linear in the picture's vector (PAMIR; not kernel PAMIR, CMRM, ...: no exact
    decomposition), with its refusal worded for an explanation."""
    # start-up: pamir.training loads scikit-learn, numba and scipy, which the server's start
    # does not need
    from ..training.online import linear_map  # noqa: PLC0415

    try:
        return linear_map(system)
    except NotImplementedError:
        kind = getattr(system.model, "kind", type(system.model).__name__)
        raise NotImplementedError(f"the {kind} model is not linear in the picture's vector: "
                                  "explanations need a PAMIR model") from None


def views(pipeline) -> list[tuple[object, float]]:
    """(representation, weight) of each view the model reads, in column order."""
    if isinstance(pipeline, Concatenation):
        return list(zip(pipeline.parts, pipeline.weights))
    return [(pipeline, 1.0)]


def view_name(part) -> str:
    if getattr(part, "kind", None) is None:  # a stand-in pipeline (tests)
        return "visterms" if _has_blocks(part) else type(part).__name__
    return representation_name(part)


def _has_blocks(part) -> bool:
    return getattr(part, "output", None) == "bags" and hasattr(part, "picture_visterms")


def _is_cnn(part) -> bool:
    return getattr(part, "kind", None) == "cnn"


def picture_blocks(system_or_pipeline, path) -> dict:
    """visterms (n_blocks,), boxes (n_blocks x 4: x, y, w, h on the displayed picture),
    width, height (displayed) and the bag (V,) of one picture, from a visterms pipeline.

    The bag is rebuilt from the blocks' visterms with the pipeline's own tf-idf, so blocks
    and bag cannot disagree (transform() of the same file gives the same row).
    """
    pipeline = getattr(system_or_pipeline, "pipeline", system_or_pipeline)
    pv = pipeline.picture_visterms(path)
    V = len(pipeline.idf_)
    tf = term_frequencies(pv.visterms, np.array([0, len(pv.visterms)]), V)
    bag = tfidf(tf, np.asarray(pipeline.idf_)).toarray().ravel()
    return {"visterms": pv.visterms, "boxes": pv.boxes, "width": pv.size[0],
            "height": pv.size[1], "bag": bag}


def heat_map(boxes: np.ndarray, values: np.ndarray, width: float, height: float,
             longer: int = HEAT_CELLS) -> np.ndarray:
    """(rows x cols) float64: each value spread evenly over its box (x, y, w, h) and
    integrated over a grid of `longer` cells along the picture's longer side; the cells add
    up to values.sum() for boxes inside the picture."""
    cols = max(1, round(longer * width / max(width, height)))
    rows = max(1, round(longer * height / max(width, height)))
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    values = np.asarray(values, np.float64).ravel()
    area = boxes[:, 2] * boxes[:, 3]
    density = np.divide(values, area, out=np.zeros_like(values), where=area > 0)

    def overlap(start, size, edges):  # (n, cells): length of each box inside each cell
        return np.clip(np.minimum((start + size)[:, None], edges[None, 1:])
                       - np.maximum(start[:, None], edges[None, :-1]), 0, None)

    ox = overlap(boxes[:, 0], boxes[:, 2], np.linspace(0, width, cols + 1))
    oy = overlap(boxes[:, 1], boxes[:, 3], np.linspace(0, height, rows + 1))
    return (oy * density[:, None]).T @ ox


def _rounded(boxes: np.ndarray, values: np.ndarray) -> list:
    boxes = np.round(np.asarray(boxes, np.float64), 2).tolist()
    return [[*box, float(v)] for box, v in zip(boxes, values)]


def _explain_view(part, weight: float, g_of, path) -> tuple:
    """(the view's JSON, boxes, contributions, (width, height) or None, columns) of one view;
    g_of(columns) gives the view's score weights once its width is known."""
    name = view_name(part)
    if _is_cnn(part):
        v = view_contributions(part, path, g_of(part.dim))
        values = v["cells"].ravel()
        return ({"name": name, "weight": weight, "score": v["score"], "placed": "cells",
                 "grid": list(v["cells"].shape), "mean_term": v["mean_term"],
                 "power": part.settings.power, "cells": _rounded(v["boxes"], values)},
                v["boxes"], values, (v["width"], v["height"]), part.dim)
    if _has_blocks(part):
        b = picture_blocks(part, path)
        g = g_of(len(b["bag"]))
        c = block_contributions(b["visterms"], b["bag"], g[None, :], np.ones(1))
        return ({"name": name, "weight": weight, "score": float(c.sum()), "placed": "blocks",
                 "blocks": len(c)}, b["boxes"], c, (b["width"], b["height"]), len(b["bag"]))
    X = part.transform([path]).X  # no place on the picture: its part of the score only
    row = np.asarray(X.todense() if hasattr(X, "todense") else X, np.float64).ravel()
    return ({"name": name, "weight": weight, "score": float(g_of(row.size) @ row),
             "placed": None}, np.zeros((0, 4)), np.zeros(0), None, row.size)


def explanation(system, path, q: np.ndarray) -> dict:
    """The JSON-able explanation of a picture's linear score for the query vector q.

    score: q . W x, the sum of the views' parts; views: each view's name, weight, part of the
    score and how it is placed ("cells" with each cell's box and contribution, "blocks", or
    null); blocks: the visterm blocks' boxes and contributions; heat: the merged map (rows x
    cols cells over the displayed width x height), adding up to score - unplaced; exact:
    what is exact and what is first-order; voters: the captioned pictures whose vote the model
    mixes into its vector with neighbour_weight (none, 0, for PAMIR alone), for the page to
    show beside the map: the map explains the linear part, the voters the rest.
    """
    W = np.asarray(_linear_map(system))
    q = np.asarray(q, np.float64).ravel()
    if not os.path.isfile(path):
        raise FileNotFoundError(path)
    parts = views(system.pipeline)
    if not any(_is_cnn(p) or _has_blocks(p) for p, _ in parts):
        names = "+".join(view_name(p) for p, _ in parts)
        raise NotImplementedError(f"the model reads {names}: no part of it has a place on the "
                                  "picture; explanations need cnn or visterms views")
    qW = q @ W  # (D,) the query's weight on each column of x
    start, out, placed, size = 0, [], [], None
    for part, weight in parts:
        def g_of(columns, start=start, weight=weight):
            if start + columns > qW.size:
                raise ValueError(f"the model reads {qW.size} numbers a picture; its views "
                                 "give more: the model and representation do not match")
            return weight * qW[start:start + columns]

        view, boxes, values, shape, columns = _explain_view(part, weight, g_of, path)
        start += columns
        out.append(view)
        placed.append((boxes, values))
        size = size or shape
    if start != qW.size:
        raise ValueError(f"the views give {start} numbers a picture; the model reads "
                         f"{qW.size}: the model and representation do not match")
    heat = heat_map(np.concatenate([b for b, _ in placed]),
                    np.concatenate([v for _, v in placed]), *size)
    blocks = [x for (b, v), view in zip(placed, out) if view["placed"] == "blocks"
              for x in _rounded(b, v)]
    return {"width": int(size[0]), "height": int(size[1]),
            "score": float(sum(v["score"] for v in out)),
            "unplaced": float(sum(v["score"] for v in out if v["placed"] is None)),
            "views": out, "blocks": blocks,
            "heat": {"rows": heat.shape[0], "cols": heat.shape[1],
                     "values": heat.tolist()},
            "exact": EXACTNESS, **_neighbour_part(system, path, q)}


#: Captioned pictures shown as the neighbour part's explanation.
VOTERS = 6


def _neighbour_part(system, path, q: np.ndarray) -> dict:
    """The other part of a mixed model's score (pamir.models.neighbours): its weight in the mix
    and the captioned pictures that voted for the query's words, heaviest first (none for
    PAMIR alone)."""
    part = getattr(system, "neighbours", None)
    if part is None:
        return {"voters": [], "neighbour_weight": 0.0}
    F, ok, _ = system.features([path])
    words = [system.vocabulary[t] for t in np.flatnonzero(q) if t < system.T]
    found = system.voters(F, words, VOTERS)[0] if ok[0] else []
    return {"voters": found, "neighbour_weight": part.alpha}
