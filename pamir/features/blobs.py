"""Duygulu et al.'s "blobs" for Corel 5k, from mulan's sparse ARFF files.

Each picture is segmented into regions, each region quantised to one of 499 blob clusters;
mulan stores which clusters a picture contains (presence, not counts) followed by its 374
labels. Rows follow labels/training_label and labels/test_label line for line (the test file
lists picture 161092 twice, as the original distribution does). This is the "Blobs"
representation of the 2006 papers (AMR 2006, ECML 2006).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..data import Collection, find_corel5k

log = logging.getLogger(__name__)

N_BLOBS = 499
FILES = (("training_label", "Corel5k-train-sparse.arff"),
         ("test_label", "Corel5k-test-sparse.arff"))


def read_sparse_arff(path: str | Path, n_columns: int) -> sp.csr_matrix:
    """The first n_columns attributes of a sparse ARFF file ({index value, ...} per row)."""
    path = Path(path)
    rows, cols, vals = [], [], []
    n = 0
    in_data = False
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not in_data:
                in_data = line.lower() == "@data"
                continue
            if not line or line.startswith("%"):
                continue
            if not (line.startswith("{") and line.endswith("}")):
                raise ValueError(f"{path}:{lineno}: expected a sparse row {{index value, ...}}")
            for item in filter(None, (s.strip() for s in line[1:-1].split(","))):
                index, value = item.split()
                if int(index) < n_columns:
                    rows.append(n)
                    cols.append(int(index))
                    vals.append(float(value))
            n += 1
    if not in_data:
        raise ValueError(f"{path}: no @data section; is this an ARFF file?")
    return sp.csr_matrix((np.asarray(vals, np.float32), (rows, cols)), shape=(n, n_columns))


def load_blobs(collection: Collection, root: str | Path | None = None
               ) -> tuple[sp.csr_matrix, np.ndarray]:
    """(B, ok): B (len(collection) x 499) float32 blob presence in collection order; ok is
    False for pictures the files do not cover (Corel's unlabelled 121060), whose rows are 0."""
    root = find_corel5k(root or collection.root)
    position = {pid: i for i, pid in enumerate(collection.ids)}
    ok = np.zeros(len(collection), dtype=bool)
    parts, dest = [], []
    for labels, arff in FILES:
        ids = [line.split()[0] for line in (root / "labels" / labels).read_text().splitlines()
               if line.strip()]
        rows = read_sparse_arff(root / "blobs" / arff, N_BLOBS)
        if rows.shape[0] != len(ids):
            raise ValueError(f"{arff}: {rows.shape[0]} rows for {len(ids)} lines of {labels}")
        first: dict[str, int] = {}
        for r, pid in enumerate(ids):
            if pid in first:
                if (rows[first[pid]] != rows[r]).nnz:
                    log.warning("%s: picture %s listed twice with different blobs; the first "
                                "is kept", arff, pid)
                continue
            first[pid] = r
        keep = [(r, position[pid]) for pid, r in first.items() if pid in position]
        parts.append(rows[[r for r, _ in keep]])
        dest += [i for _, i in keep]
    dest = np.asarray(dest, dtype=np.int64)
    ok[dest] = True
    stacked = sp.vstack(parts).tocoo()
    B = sp.csr_matrix((stacked.data, (dest[stacked.row], stacked.col)),
                      shape=(len(collection), N_BLOBS), dtype=np.float32)
    return B, ok
