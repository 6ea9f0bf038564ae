"""SIFT visterms (AMR 2006): Difference-of-Gaussians keypoints, 128-bin edge histograms,
k-means codebook, tf-idf bags.

    sift = SiftVisterms(n_visterms=1000).fit(train_paths)
    X, ok, reasons = sift.transform(paths)   # an Extracted: (n x K) CSR float32, rows unit L2

The representation "sift" of pamir.features.registry (the contract of
pamir.features.representation: transform gives an Extracted, a picture that cannot be read
an empty row and its reason; descriptors cached by content hash and picture size).

Corel pictures are enlarged to a 256-px shorter side first (the papers' resolution): at
192x128 OpenCV finds ~70 keypoints a picture, at 384x256 ~130. OpenCV SIFT descriptors are
integers in 0..255, so the cache stores them as uint8, losslessly.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np
import scipy.sparse as sp

from .. import config
from .cache import atomic_write
from .extract import BlockSet
from .images import ImageError, content_hash, decode_rgb, read_bytes
from .representation import Extracted, reasons_from_failures
from .settings import JOBS
from .visterms import (Assigner, fit_codebook, inverse_document_frequency, term_frequencies,
                       tfidf)

KIND = "sift_visterms"
VERSION = 1

#: The codebook size `make_representation("sift")` uses, with SiftVisterms' 256-px shorter
#: side: chosen on validation by benchmarks/bench_ecml2006.py (PAMIR, Corel 5k: 256 px and
#: 1,000 visterms 12.04; 128 px: 500 / 1,000 / 2,000 / 4,000 visterms 8.97 / 9.38 / 10.01 /
#: 11.11; the papers: 1,000).
SIFT_VISTERMS = 1000
SIFT_SIZES = (500, 1000, 2000, 4000)


def sift_descriptors(rgb: np.ndarray) -> np.ndarray:
    """(n_keypoints, 128) uint8 SIFT descriptors of an RGB picture."""
    grey = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)
    _, desc = cv2.SIFT_create().detectAndCompute(grey, None)
    if desc is None:  # a flat picture has no keypoint
        return np.zeros((0, 128), np.uint8)
    return np.clip(np.rint(desc), 0, 255).astype(np.uint8)


def _picture(path, short_side, cache_root: Path | None):
    try:
        data = read_bytes(path)
        cached = cache_root / f"{content_hash(data)}.npy" if cache_root else None
        if cached is not None and cached.exists():
            return np.load(cached, allow_pickle=False), "cached", ""
        desc = sift_descriptors(decode_rgb(data, short_side))
        if cached is not None:
            atomic_write(cached, lambda f: np.save(f, desc, allow_pickle=False))
        return desc, "extracted", ""
    except ImageError as e:
        return None, "skipped", str(e)
    except Exception as e:  # count it, keep going
        return None, "failed", f"{type(e).__name__}: {e}"


def extract_sift(paths: Sequence, *, short_side: int | None = 256,
                 cache_dir: str | Path | None = None,
                 n_jobs: int = JOBS) -> BlockSet:
    """SIFT descriptors of every picture, as a BlockSet (descriptors (n, 128) float32)."""
    cv2.setNumThreads(1)  # parallel over pictures instead
    root = Path(cache_dir) / "sift" / f"short{short_side}" if cache_dir else None
    if root is not None:
        root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max(1, n_jobs)) as pool:
        results = list(pool.map(lambda p: _picture(p, short_side, root), paths))
    arrays = [r[0] if r[0] is not None else np.zeros((0, 128), np.uint8) for r in results]
    offsets = np.zeros(len(arrays) + 1, np.int64)
    np.cumsum([len(a) for a in arrays], out=offsets[1:])
    status = [r[1] for r in results]
    return BlockSet(
        np.concatenate(arrays).astype(np.float32) if arrays else np.zeros((0, 128), np.float32),
        offsets, np.array([s in ("extracted", "cached") for s in status], bool),
        [(str(p), r[2]) for p, r in zip(paths, results) if r[0] is None], False,
        status.count("extracted"), status.count("cached"), status.count("skipped"),
        status.count("failed"), time.perf_counter() - t0)


class SiftVisterms:
    """SIFT descriptors -> K visterms (faiss k-means on training descriptors) -> tf-idf bags.

    Fitted: codebook_, idf_, n_train_, keypoints_per_picture_ (training pictures read)."""

    kind = KIND
    output = "bags"

    def __init__(self, n_visterms: int = 1000, *, short_side: int | None = 256,
                 n_iter: int = 20, max_descriptors: int = 500_000,
                 seed: int = config.SEED, cache_dir: str | Path | None = None,
                 n_jobs: int = JOBS, progress: bool = True):
        self.n_visterms, self.short_side, self.n_iter = n_visterms, short_side, n_iter
        self.max_descriptors, self.seed = max_descriptors, seed
        self.cache_dir, self.n_jobs = cache_dir, n_jobs

    def params(self) -> dict:
        return {"n_visterms": self.n_visterms, "short_side": self.short_side,
                "n_iter": self.n_iter, "max_descriptors": self.max_descriptors,
                "seed": self.seed}

    def _extract(self, paths) -> BlockSet:
        return extract_sift(list(paths), short_side=self.short_side, cache_dir=self.cache_dir,
                            n_jobs=self.n_jobs)

    def fit(self, train_paths: Sequence) -> "SiftVisterms":
        self.fit_transform(train_paths)
        return self

    def fit_transform(self, train_paths: Sequence) -> Extracted:
        train_paths = list(train_paths)
        sift = self._extract(train_paths)
        x = sift.descriptors
        if len(x) == 0:
            raise ValueError("no SIFT keypoint in any training picture")
        k = min(self.n_visterms, max(1, len(x) // 10))  # a tiny collection: fewer visterms
        if k < self.n_visterms:
            self.n_visterms = k
        if len(x) > self.max_descriptors:
            pick = np.random.default_rng(self.seed).choice(len(x), self.max_descriptors,
                                                           replace=False)
            x = x[np.sort(pick)]
        self.codebook_, self.objective_, self.kmeans_seconds_ = fit_codebook(
            x, self.n_visterms, n_iter=self.n_iter, seed=self.seed)
        tf = term_frequencies(Assigner(self.codebook_)(sift.descriptors), sift.offsets,
                              self.n_visterms)
        self.n_train_ = int(sift.ok.sum())
        self.keypoints_per_picture_ = round(float(np.diff(sift.offsets)[sift.ok].mean()), 1)
        self.idf_ = inverse_document_frequency(tf[sift.ok], self.n_train_)
        return Extracted(tfidf(tf, self.idf_), sift.ok,
                         reasons_from_failures(train_paths, sift.ok, sift.failures))

    def counts(self, paths: Sequence) -> tuple[sp.csr_matrix, BlockSet]:
        """(term frequencies, the BlockSet of descriptors) of the pictures."""
        sift = self._extract(paths)
        x = sift.descriptors
        ids = Assigner(self.codebook_)(x) if len(x) else np.zeros(0, np.int64)
        return term_frequencies(ids, sift.offsets, self.n_visterms), sift

    def transform(self, paths: Sequence) -> Extracted:
        paths = list(paths)
        tf, sift = self.counts(paths)
        return Extracted(tfidf(tf, self.idf_), sift.ok,
                         reasons_from_failures(paths, sift.ok, sift.failures))

    def to_dict(self) -> dict:
        return {"kind": KIND, "version": VERSION, **self.params(), "n_train": self.n_train_,
                "keypoints_per_picture": getattr(self, "keypoints_per_picture_", None)}

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"sift_codebook": self.codebook_, "sift_idf": self.idf_}

    @classmethod
    def from_saved(cls, d: dict, arrays: dict[str, np.ndarray], **kwargs) -> "SiftVisterms":
        if d.get("kind") != KIND or d.get("version") != VERSION:
            raise ValueError(f"not a {KIND} v{VERSION}: kind={d.get('kind')} v{d.get('version')}")
        params = {k: d[k] for k in ("n_visterms", "short_side", "n_iter", "max_descriptors",
                                    "seed")}
        model = cls(**params, **kwargs)
        model.codebook_ = np.asarray(arrays["sift_codebook"], np.float32)
        model.idf_ = np.asarray(arrays["sift_idf"], np.float32)
        model.n_train_ = int(d.get("n_train", 0))
        model.keypoints_per_picture_ = d.get("keypoints_per_picture")
        return model

    def __repr__(self) -> str:
        return f"SiftVisterms({json.dumps(self.params())})"
