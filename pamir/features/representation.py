"""The representation contract: how pictures become the vectors a model reads.

PAMIR and its baselines only see a picture through its vector (TPAMI §III-IV), so any
representation that keeps this contract can sit under any model that takes its `output`:

    rep = make_representation("visterms", settings)   # or "cnn", "blocks", ...
    rep.fit(train_paths)                              # codebooks, standardisation: train only
    X, ok, reasons = rep.transform(paths)             # an Extracted
    d, arrays = rep.to_dict(), rep.to_arrays()        # saved in the model (JSON + npz)
    rep = representation_from_saved(d, arrays)

- `output`: what `X` is, one of pamir.features.registry.OUTPUTS: "bags" (CSR, rows
  L2-normalised tf-idf), "dense" ((n x d) float32, the CNN's features), "vectors" (any
  picture matrix: a CSR concatenation) or "blocks" (a BlockSet of per-block descriptors).
- `transform` never raises for a bad picture: its row is empty (zeros) with ok False, and
  `reasons[i]` says why (the decoder's message), so no caller needs to decode it again.
- Features are cached on disk by picture content hash plus the settings that change them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class Extracted(NamedTuple):
    """What a representation gives for n pictures, in order.

    X: (n x d) CSR bags, (n x d) float32 array, or a BlockSet.
    ok: (n,) bool, False where the picture could not be read (its row is empty).
    reasons: (n,) the reason a picture could not be read, None where ok.
    """

    X: Any
    ok: np.ndarray
    reasons: list


def reasons_from_failures(paths, ok: np.ndarray, failures) -> list:
    """Per-picture reasons from (path, reason) pairs; positions follow `paths` (a path given
    twice gets the same reason)."""
    why = {str(p): r for p, r in failures}
    return [None if good else why.get(str(p), "could not be read")
            for p, good in zip(paths, np.asarray(ok, bool))]




def take_rows(X, idx):
    """Rows `idx` of what a representation gives: a matrix (sparse or dense) or a BlockSet."""
    idx = np.asarray(idx, dtype=np.int64)
    return X.take(idx) if hasattr(X, "offsets") else X[idx]


__all__ = ["Extracted", "reasons_from_failures", "take_rows"]
