"""Duygulu et al.'s "blobs" for Corel 5k, from mulan's sparse ARFF files.

Each picture is segmented into regions, each region quantised to one of 499 blob clusters;
mulan stores which clusters a picture contains (presence, not counts) followed by its 374
labels. Rows follow labels/training_label and labels/test_label line for line (the test file
lists picture 161092 twice, as the original distribution does). This is the "Blobs"
representation of the 2006 papers (AMR 2006, ECML 2006).

Two representations live here (pamir.features.registry names them):
- "blobs-arff" (ArffBlobs): those ARFF rows as tf-idf bags, Corel 5k pictures only;
- "blobs" (SegmentedBlobs): Blobs made here for any picture, as Duygulu et al. made theirs
  (normalised-cut regions, 36 descriptors, standardised, 500-blob k-means codebook).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from joblib import Parallel, delayed

from .. import config
from ..data import Collection, DataError, find_corel5k, load_corel5k
from ..storage import atomic_write
from .images import ImageError, content_hash, decode_rgb, read_bytes
from .representation import Extracted
from .segmentation import N_FEATURES, picture_regions
from .settings import JOBS, SettingsRecord
from .visterms import Assigner, fit_codebook, inverse_document_frequency, term_frequencies, tfidf

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


# ------------------------------------------------------------------ representations

def _bags(tf: sp.csr_matrix, idf: np.ndarray) -> sp.csr_matrix:
    return tfidf(sp.csr_matrix(tf, dtype=np.float32), idf)


class ArffBlobs:
    """The representation "blobs-arff": Duygulu's blobs as mulan distributes them, for the
    pictures of Corel 5k only (what the 2006 papers used). A picture is found by its path in
    the Corel 5k folder; any other picture gets an empty row and a reason. Bags: blob
    presence -> tf-idf with the training idf -> unit L2 rows."""

    kind = "blobs_arff"
    output = "bags"

    def __init__(self, root: str | Path | None = None, *, cache_dir=None, progress=True,
                 **_):
        self.root = root

    def _table(self, paths=()):
        """(presence of every Corel 5k picture, {resolved path: row}); the Corel 5k folder is
        `root`, else the one the pictures lie in (ROOT/images/CD/ID.jpeg), else the default."""
        if getattr(self, "_rows", None) is None:
            root = self.root
            for p in list(paths)[:1]:
                up = Path(p).resolve().parents
                if root is None and len(up) > 2 and (up[2] / "labels" / "words").is_file():
                    root = up[2]
            try:
                collection = load_corel5k(root)
            except DataError as e:
                raise ValueError(f"blobs-arff: {e}") from None
            B, ok = load_blobs(collection)
            self._B = B
            self._rows = {str(Path(p).resolve()): i for i, p in enumerate(collection.paths)
                          if ok[i]}
        return self._B, self._rows

    def presence(self, paths) -> tuple[sp.csr_matrix, np.ndarray, list]:
        B, rows = self._table(paths)
        idx = [rows.get(str(Path(p).resolve()), -1) for p in paths]
        ok = np.array([i >= 0 for i in idx], bool)
        M = B[[max(i, 0) for i in idx]].tocsr() if idx else sp.csr_matrix((0, N_BLOBS))
        M = sp.diags(ok.astype(np.float32)) @ M
        reasons = [None if good else "no ARFF blobs for this picture: Duygulu's blobs exist "
                   "for the Corel 5k pictures only (use the 'blobs' representation)"
                   for good in ok]
        return sp.csr_matrix(M, dtype=np.float32), ok, reasons

    def fit(self, train_paths) -> "ArffBlobs":
        P, ok, _ = self.presence(list(train_paths))
        self.n_train_ = int(ok.sum())
        if self.n_train_ == 0:
            raise ValueError("no training picture has ARFF blobs: they exist for Corel 5k "
                             "only; use the 'blobs' representation for other pictures")
        self.idf_ = inverse_document_frequency(P[ok], self.n_train_)
        return self

    def transform(self, paths):
        P, ok, reasons = self.presence(list(paths))
        return Extracted(_bags(P, self.idf_), ok, reasons)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "version": 1, "n_train": self.n_train_}

    def to_arrays(self) -> dict:
        return {"idf": self.idf_}

    @classmethod
    def from_saved(cls, d: dict, arrays: dict, **kwargs) -> "ArffBlobs":
        rep = cls(**kwargs)
        rep.idf_ = np.asarray(arrays["idf"], np.float32)
        rep.n_train_ = int(d.get("n_train", 0))
        return rep


@dataclass(frozen=True)
class BlobSettings(SettingsRecord):
    """How pictures become Blobs (pamir.features.segmentation), chosen as
    docs/representations.md says: short_side 128 is Corel 5k's own size (half the papers');
    60 SLIC superpixels and a normalised-cut threshold of 0.2 keep 8.6 regions a Corel
    picture (20 pictures; the papers' Table 1: 9.4 blobs) at ~0.15 s a picture under load,
    so that 5,000 pictures take ~12 min on 2 shared cores; 500 blobs (the papers')."""

    short_side: int | None = 128
    n_segments: int = 60
    compactness: float = 10.0
    thresh: float = 0.2
    max_regions: int = 10
    min_area: float = 0.01
    n_blobs: int = 500
    kmeans_iterations: int = 20
    seed: int = config.SEED

    what = "blob settings"

    def region_key(self) -> dict:
        names = ("short_side", "n_segments", "compactness", "thresh", "max_regions", "min_area")
        return {"version": REGIONS_VERSION, **{n: getattr(self, n) for n in names}}


#: Bumped when a change of code changes region descriptors (the cache key carries it).
REGIONS_VERSION = 1


def _regions_of(path, settings: BlobSettings, root: Path | None):
    """(descriptors (n, 36) float32 or None, status, reason) of one picture, cached."""
    try:
        data = read_bytes(path)
        cached = root / f"{content_hash(data)}.npy" if root else None
        if cached is not None and cached.exists():
            try:
                F = np.load(cached, allow_pickle=False)
                if F.ndim == 2 and F.shape[1] == N_FEATURES and F.dtype == np.float32:
                    return F, "cached", ""
            except (OSError, ValueError):
                pass
            cached.unlink(missing_ok=True)  # damaged: recomputed, not trusted
        rgb = decode_rgb(data, settings.short_side)
        F = picture_regions(rgb, n_segments=settings.n_segments,
                            compactness=settings.compactness, thresh=settings.thresh,
                            max_regions=settings.max_regions, min_area=settings.min_area)
        if cached is not None:
            atomic_write(cached, lambda f: np.save(f, F, allow_pickle=False))
        return F, "extracted", ""
    except ImageError as e:
        return None, "skipped", str(e)
    except Exception as e:  # noqa: BLE001 - count it, keep going
        return None, "failed", f"{type(e).__name__}: {e}"


def _regions_batch(paths, settings, root):
    return [_regions_of(p, settings, root) for p in paths]


def extract_regions(paths, settings: BlobSettings, *, cache_dir=None, n_jobs: int = JOBS,
                    progress: bool = False) -> tuple[list, np.ndarray, list]:
    """([descriptors per picture], ok, reasons): segmentation is the costly part (~0.3 s a
    Corel picture), run in `n_jobs` processes, each picture cached by content hash."""
    paths = list(paths)
    root = None
    if cache_dir is not None:
        key = hashlib.blake2b(json.dumps(settings.region_key(), sort_keys=True).encode(),
                              digest_size=8).hexdigest()
        root = Path(cache_dir) / "regions" / key
        root.mkdir(parents=True, exist_ok=True)
    chunk = 25
    batches = [paths[i:i + chunk] for i in range(0, len(paths), chunk)]
    if n_jobs > 1 and len(paths) > 4 * chunk:  # processes cost ~1 s to start
        done = Parallel(n_jobs=n_jobs)(delayed(_regions_batch)(b, settings, root)
                                       for b in batches)
    else:
        done = [_regions_batch(b, settings, root) for b in batches]
    results = [r for batch in done for r in batch]
    feats = [r[0] if r[0] is not None else np.zeros((0, N_FEATURES), np.float32)
             for r in results]
    ok = np.array([r[0] is not None for r in results], bool)
    reasons = [None if r[0] is not None else r[2] for r in results]
    return feats, ok, reasons


class SegmentedBlobs:
    """The representation "blobs": Duygulu et al.'s Blobs for any picture. Segmentation and
    36 region descriptors (pamir.features.segmentation), standardised with the training
    regions' mean and std, quantised to the nearest of n_blobs k-means centres (training
    regions), counted per picture -> tf-idf (training idf) -> unit L2 rows."""

    kind = "blobs"
    output = "bags"

    def __init__(self, settings: BlobSettings | None = None, *, cache_dir=None,
                 n_jobs: int = JOBS, progress: bool = True):
        self.settings = settings or BlobSettings()
        self.cache_dir, self.n_jobs, self.progress = cache_dir, n_jobs, progress

    def _counts(self, feats) -> sp.csr_matrix:
        offsets = np.zeros(len(feats) + 1, np.int64)
        np.cumsum([len(f) for f in feats], out=offsets[1:])
        x = np.concatenate(feats) if feats else np.zeros((0, N_FEATURES), np.float32)
        ids = (Assigner(self.codebook_)(self._standardise(x)) if len(x)
               else np.zeros(0, np.int64))
        return term_frequencies(ids, offsets, self.codebook_.shape[0])

    def _standardise(self, x):
        return np.ascontiguousarray((x - self.mean_) / self.std_, dtype=np.float32)

    def fit(self, train_paths) -> "SegmentedBlobs":
        self.fit_transform(train_paths)
        return self

    def fit_transform(self, train_paths):
        s = self.settings
        feats, ok, reasons = extract_regions(train_paths, s, cache_dir=self.cache_dir,
                                             n_jobs=self.n_jobs, progress=self.progress)
        x = np.concatenate([f for f in feats]) if feats else np.zeros((0, N_FEATURES))
        if len(x) == 0:
            raise ValueError("no training picture could be segmented")
        self.mean_ = x.mean(0).astype(np.float32)
        std = x.std(0)
        std[std < 1e-6] = 1.0
        self.std_ = std.astype(np.float32)
        k = min(s.n_blobs, max(1, len(x) // 4))  # a tiny collection: fewer blobs
        self.codebook_, _, _ = fit_codebook(self._standardise(x), k,
                                            n_iter=s.kmeans_iterations, seed=s.seed)
        tf = self._counts(feats)
        self.n_train_ = int(ok.sum())
        self.regions_per_picture_ = round(float(len(x) / max(self.n_train_, 1)), 2)
        self.idf_ = inverse_document_frequency(tf[ok], self.n_train_)
        return Extracted(_bags(tf, self.idf_), ok, reasons)

    def counts(self, paths) -> tuple[sp.csr_matrix, np.ndarray, list]:
        """Blob counts per picture (what the bags weight), ok and reasons."""
        feats, ok, reasons = extract_regions(list(paths), self.settings,
                                             cache_dir=self.cache_dir, n_jobs=self.n_jobs,
                                             progress=self.progress)
        return self._counts(feats), ok, reasons

    def transform(self, paths):
        tf, ok, reasons = self.counts(paths)
        return Extracted(_bags(tf, self.idf_), ok, reasons)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "version": 1, "settings": self.settings.to_dict(),
                "n_train": self.n_train_,
                "regions_per_picture": getattr(self, "regions_per_picture_", None)}

    def to_arrays(self) -> dict:
        return {"blob_codebook": self.codebook_, "blob_mean": self.mean_,
                "blob_std": self.std_, "idf": self.idf_}

    @classmethod
    def from_saved(cls, d: dict, arrays: dict, **kwargs) -> "SegmentedBlobs":
        rep = cls(BlobSettings.from_dict(d["settings"]), **kwargs)
        rep.codebook_ = np.asarray(arrays["blob_codebook"], np.float32)
        rep.mean_ = np.asarray(arrays["blob_mean"], np.float32)
        rep.std_ = np.asarray(arrays["blob_std"], np.float32)
        rep.idf_ = np.asarray(arrays["idf"], np.float32)
        rep.n_train_ = int(d.get("n_train", 0))
        rep.regions_per_picture_ = d.get("regions_per_picture")
        return rep
