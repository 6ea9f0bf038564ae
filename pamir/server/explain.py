"""Which blocks of a picture drive its score for a query: exact for linear PAMIR.

PAMIR scores a picture p for a query q as F(q, p) = q . W p, with p the picture's bag of
visterms (tf-idf weighted, L2-normalised). Each visterm v of the bag is the sum of the blocks
quantised to it, so each of those tf_v blocks carries an equal share p_v / tf_v of its weight,
and block b (visterm v_b) contributes

    c_b = (q . W[:, v_b]) * p[v_b] / tf[v_b],      with  sum_b c_b = q . W p  exactly.

Taking p as given (the very row the model saw) keeps this exact whatever weighting the visual
pipeline applies, as long as only visterms of the picture's blocks are non-zero in p.
"""

from __future__ import annotations

import os

import numpy as np

from ..features.visterms import term_frequencies, tfidf


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


#: Model inputs a bag of visterms can be ("vectors": any picture vector, bags included).
_BAG_INPUTS = ("bags", "vectors")


def linear_map(system) -> np.ndarray:
    """The model's W (T x V), or NotImplementedError when the score has no exact block
    decomposition: a model that is not linear in its input, or a representation that is not
    the blocks' bag of visterms (a CNN feature belongs to no block)."""
    model = getattr(system, "model", None)
    W = getattr(model, "W_", None)
    if W is None or getattr(model, "input", "bags") not in _BAG_INPUTS:
        kind = getattr(model, "kind", type(model).__name__)
        raise NotImplementedError(f"the {kind} model is not linear in the visterms: block "
                                  "explanations need a PAMIR model")
    output = getattr(system.pipeline, "output", "bags")
    if output != "bags" or not hasattr(system.pipeline, "picture_visterms"):
        raise NotImplementedError(f"the model reads {output}, not bags of visterms: block "
                                  "explanations need a PAMIR model on the visterms "
                                  "representation")
    return W


def picture_blocks(system, path) -> dict:
    """visterms (n_blocks,), boxes (n_blocks x 4: x, y, w, h on the displayed picture),
    width, height (displayed) and the bag (V,) of one picture, from the system's pipeline.

    The bag is rebuilt from the blocks' visterms with the pipeline's own tf-idf, so blocks
    and bag cannot disagree (transform() of the same file gives the same row).
    """
    pipeline = system.pipeline
    pv = pipeline.picture_visterms(path)
    V = len(pipeline.idf_)
    tf = term_frequencies(pv.visterms, np.array([0, len(pv.visterms)]), V)
    bag = tfidf(tf, np.asarray(pipeline.idf_)).toarray().ravel()
    return {"visterms": pv.visterms, "boxes": pv.boxes, "width": pv.size[0],
            "height": pv.size[1], "bag": bag}


def explanation(system, path, q: np.ndarray) -> dict:
    """The JSON-able explanation of a picture's score for the query vector q: each block's
    box and exact contribution; the contributions sum to `score`."""
    W = linear_map(system)
    if not os.path.isfile(path):
        raise FileNotFoundError(path)
    b = picture_blocks(system, path)
    c = block_contributions(b["visterms"], b["bag"], W, q)
    boxes = np.round(np.asarray(b["boxes"], dtype=np.float64), 2).tolist()
    return {"width": int(b["width"]), "height": int(b["height"]),
            "score": float(c.sum()),
            "blocks": [[*box, float(v)] for box, v in zip(boxes, c)]}
