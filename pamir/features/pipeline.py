"""Pictures -> L2-normalised tf-idf bags of visterms, learnt on training pictures.

    pipe = VisualPipeline(FeatureSettings())
    X_train, ok_train, _ = pipe.fit_transform(train_paths)  # colour codebook, scaling, visterms, idf
    X, ok, reasons = pipe.transform(paths)                  # (n x K) CSR float32, rows unit L2

The visterm representation of pamir.features.representation: transform gives an Extracted.

A saved pipeline is `to_dict()` (JSON) + `to_arrays()` (npz, no pickle):
`VisualPipeline.from_saved(d, arrays)` rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from ..distributed import active_cluster, cluster_chunks, once_per_worker
from .blocks import block_histograms
from .cache import BlockCache, load_npz, save_npz
from .colour import ColourCodebook
from .extract import (
    CHUNK_PICTURES,
    BlockSet,
    _picture,
    _report,
    extract_blocks,
    iter_blocks,
    worker_colour_codebook,
)
from .images import decode_rgb, displayed_size, read_bytes
from .representation import Extracted, reasons_from_failures
from .settings import JOBS, FeatureSettings
from .visterms import (
    Assigner,
    fit_codebook,
    inverse_document_frequency,
    scale_blocks,
    scaling_statistics,
    term_frequencies,
    tfidf,
)

KIND = "visual_pipeline"
VERSION = 1


@dataclass
class PictureVisterms:
    """The blocks of one picture and their visterms, for showing what drives a score.

    visterms: (n_blocks,) int64; boxes: (n_blocks, 4) float (x, y, w, h) in the pixels of
    the picture as displayed (EXIF orientation applied, before any resizing); size: (w, h).
    """

    visterms: np.ndarray
    boxes: np.ndarray
    size: tuple[int, int]


class VisualPipeline:
    """The "visterms" representation: colour codebook + block scaling + visterm codebook + idf, fitted on training pictures.

    Fitted attributes: colour_codebook_, scale_mean_ / scale_std_ (sqrt_std only),
    codebook_ (K, dim) float32, idf_ (K,) float32, objective_ (k-means objective per
    iteration), n_train_ (training pictures read), fit_seconds_ (per stage).
    """

    def __init__(self, settings: FeatureSettings | None = None, *,
                 cache_dir: str | Path | None = None, n_jobs: int = JOBS,
                 progress: bool = True):
        self.settings = settings or FeatureSettings()
        self.cache_dir = cache_dir
        self.n_jobs = n_jobs
        self.progress = progress
        self._assigner: Assigner | None = None

    kind = KIND
    output = "bags"

    # ------------------------------------------------------------------------------- fit
    def fit(self, train_paths: Sequence[str | Path], *,
            colour_codebook: ColourCodebook | None = None) -> "VisualPipeline":
        self.fit_transform(train_paths, colour_codebook=colour_codebook)
        return self

    def fit_transform(self, train_paths: Sequence[str | Path], *,
                      colour_codebook: ColourCodebook | None = None
                      ) -> Extracted:
        """Learn everything from `train_paths` (the colour codebook too, unless given);
        return their bags as transform would."""
        s = self.settings
        train_paths = list(train_paths)
        seconds = {}
        t0 = time.perf_counter()
        self.colour_codebook_ = colour_codebook or ColourCodebook.fit(
            train_paths, s.n_colours, s.seed, pixels_per_picture=s.colour_pixels_per_picture,
            max_pictures=s.colour_max_pictures, short_side=s.short_side)
        seconds["colour_codebook"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        fit_idx, fit_blocks = self._sample_blocks(train_paths)
        seconds["blocks"] = time.perf_counter() - t0
        counts = fit_blocks.counts()
        if len(counts) > s.kmeans_max_blocks:  # the last chunk went past the cap
            pick = np.random.default_rng(s.seed).choice(len(counts), s.kmeans_max_blocks,
                                                        replace=False)
            counts = counts[np.sort(pick)]
        if s.scaling == "sqrt_std":
            self.scale_mean_, self.scale_std_ = scaling_statistics(counts)
        x = self._scale(counts)
        del counts
        self.codebook_, self.objective_, seconds["kmeans"] = fit_codebook(
            x, s.n_visterms, n_iter=s.kmeans_iterations, seed=s.seed)
        del x
        self._assigner = None

        t0 = time.perf_counter()
        ok = np.zeros(len(train_paths), dtype=bool)
        tf_fit = self._tf(fit_blocks)
        rest = np.setdiff1d(np.arange(len(train_paths)), fit_idx)
        rest_paths = [train_paths[i] for i in rest]
        tf_rest, ok_rest, failures = self._tf_paths(rest_paths)
        tf = _reorder(sp.vstack([tf_fit, tf_rest]).tocsr(), np.concatenate([fit_idx, rest]))
        ok[fit_idx], ok[rest] = fit_blocks.ok, ok_rest
        self.n_train_ = int(ok.sum())
        self.idf_ = inverse_document_frequency(tf[ok], self.n_train_)
        seconds["bags"] = time.perf_counter() - t0
        self.fit_seconds_ = {k: round(v, 3) for k, v in seconds.items()}
        return Extracted(tfidf(tf, self.idf_), ok,
                         reasons_from_failures(train_paths, ok, fit_blocks.failures + failures))

    def _sample_blocks(self, paths: list) -> tuple[np.ndarray, BlockSet]:
        """Blocks of training pictures in a random order, stopping once kmeans_max_blocks is
        reached: (their positions in `paths`, their BlockSet)."""
        s = self.settings
        order = np.random.default_rng(s.seed).permutation(len(paths))
        parts, n_blocks, taken = [], 0, 0
        chunks = iter_blocks([paths[i] for i in order], s, self.colour_codebook_,
                             cache_dir=self.cache_dir, n_jobs=self.n_jobs,
                             progress=self.progress)
        with closing(chunks):
            for part in chunks:
                parts.append(part)
                n_blocks += int(part.offsets[-1])
                taken += len(part)
                if n_blocks >= s.kmeans_max_blocks:
                    break  # enough to fit the codebook: the rest are only assigned, in chunks
        return order[:taken], BlockSet.concatenate(parts, s.dim)

    # ------------------------------------------------------------------------- transform
    def _check_fitted(self):
        if not hasattr(self, "idf_"):
            raise RuntimeError("VisualPipeline is not fitted: call fit() or from_saved() first")

    def _scale(self, counts: np.ndarray) -> np.ndarray:
        return scale_blocks(counts, self.settings.scaling,
                            getattr(self, "scale_mean_", None), getattr(self, "scale_std_", None))

    @property
    def assigner(self) -> Assigner:
        if self._assigner is None:
            self._assigner = Assigner(self.codebook_)
        return self._assigner

    def assign(self, counts: np.ndarray) -> np.ndarray:
        """Visterm id (int64) of each block histogram (counts, n_blocks x dim)."""
        return self.assigner(self._scale(counts))

    def _tf(self, blocks: BlockSet) -> sp.csr_matrix:
        return term_frequencies(self.assign(blocks.counts()), blocks.offsets,
                                self.settings.n_visterms)

    def _tf_paths(self, paths: Sequence) -> tuple[sp.csr_matrix, np.ndarray, list]:
        """(term frequencies, ok, (path, reason) failures) of pictures, in chunks."""
        if active_cluster() is not None:
            return self._tf_paths_on_cluster(list(paths))
        tfs, oks = [sp.csr_matrix((0, self.settings.n_visterms), dtype=np.float32)], [np.zeros(0, bool)]
        failures = []
        for part in iter_blocks(paths, self.settings, self.colour_codebook_,
                                cache_dir=self.cache_dir, n_jobs=self.n_jobs,
                                progress=self.progress):
            tfs.append(self._tf(part))
            oks.append(part.ok)
            failures += part.failures
        return sp.vstack(tfs).tocsr(), np.concatenate(oks), failures

    def _tf_paths_on_cluster(self, paths: list) -> tuple[sp.csr_matrix, np.ndarray, list]:
        """_tf_paths with blocks and their visterms computed by Dask tasks (on_cluster): the
        codebooks go to every worker once, as numpy arrays; visterm ids come back."""
        client, _ = active_cluster()
        arrays = {**self.colour_codebook_.to_arrays(), "visterm_codebook": self.codebook_}
        if self.settings.scaling == "sqrt_std":
            arrays["scale_mean"], arrays["scale_std"] = self.scale_mean_, self.scale_std_
        # hash=False: a key of its own each call (the same codebook scattered again under
        # its content key could be forgotten by the scheduler as the last call's is released)
        shared = client.scatter([arrays], broadcast=True, hash=False)[0]
        ids, counts, ok, failures = [], [], [], []
        cache_dir = None if self.cache_dir is None else str(self.cache_dir)
        for chunk, results in cluster_chunks(paths, CHUNK_PICTURES, visterms_task,
                                             self.settings.to_dict(), shared, cache_dir):
            for path, (v, status, reason) in zip(chunk, results):
                good = status in ("extracted", "cached")
                ids.append(v if good else np.zeros(0, np.int64))
                counts.append(len(ids[-1]))
                ok.append(good)
                if not good:
                    failures.append((str(path), reason))
                    _report(f"{status} {path}: {reason}", None)
        offsets = np.zeros(len(paths) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        tf = term_frequencies(np.concatenate(ids) if ids else np.zeros(0, np.int64), offsets,
                              self.settings.n_visterms)
        return tf, np.asarray(ok, bool), failures

    def transform(self, paths: Sequence[str | Path]) -> Extracted:
        """(X, ok, reasons): X (n x K) CSR float32 tf-idf bags with unit L2 rows (empty rows
        where ok is False: pictures that could not be read, reasons saying why)."""
        self._check_fitted()
        paths = list(paths)
        tf, ok, failures = self._tf_paths(paths)
        return Extracted(tfidf(tf, self.idf_), ok, reasons_from_failures(paths, ok, failures))

    def transform_blocks(self, blocks: BlockSet) -> sp.csr_matrix:
        """Bags of already extracted blocks (with this pipeline's colour codebook)."""
        self._check_fitted()
        return tfidf(self._tf(blocks), self.idf_)

    def picture_visterms(self, path: str | Path) -> PictureVisterms:
        """Each block of one picture with its visterm and its box on the displayed picture."""
        self._check_fitted()
        s = self.settings
        data = read_bytes(path)
        width, height = displayed_size(data)
        rgb = decode_rgb(data, s.short_side)  # exactly as extraction sees it
        counts, grid = block_histograms(rgb, s, self.colour_codebook_)
        sx, sy = width / rgb.shape[1], height / rgb.shape[0]
        boxes = grid.astype(np.float64) * np.array([sx, sy, sx, sy])
        return PictureVisterms(self.assign(counts), boxes, (width, height))

    # ------------------------------------------------------------------------ saving
    def to_dict(self) -> dict:
        self._check_fitted()
        return {"kind": KIND, "version": VERSION, "settings": self.settings.to_dict(),
                "n_train": self.n_train_, "fit_seconds": getattr(self, "fit_seconds_", {}),
                "kmeans_objective": [float(v) for v in self.objective_]}

    def to_arrays(self) -> dict[str, np.ndarray]:
        self._check_fitted()
        arrays = {**self.colour_codebook_.to_arrays(), "visterm_codebook": self.codebook_,
                  "idf": self.idf_}
        if self.settings.scaling == "sqrt_std":
            arrays["scale_mean"], arrays["scale_std"] = self.scale_mean_, self.scale_std_
        return arrays

    @classmethod
    def from_saved(cls, d: dict, arrays: dict[str, np.ndarray], **kwargs) -> "VisualPipeline":
        if d.get("kind") != KIND or d.get("version") != VERSION:
            raise ValueError(f"not a {KIND} v{VERSION}: kind={d.get('kind')} v{d.get('version')}")
        pipe = cls(FeatureSettings.from_dict(d["settings"]), **kwargs)
        pipe.colour_codebook_ = ColourCodebook.from_arrays(arrays)
        pipe.codebook_ = np.asarray(arrays["visterm_codebook"], dtype=np.float32)
        pipe.idf_ = np.asarray(arrays["idf"], dtype=np.float32)
        if "scale_mean" in arrays:
            pipe.scale_mean_, pipe.scale_std_ = arrays["scale_mean"], arrays["scale_std"]
        pipe.n_train_ = int(d.get("n_train", 0))
        pipe.objective_ = np.asarray(d.get("kmeans_objective", []), dtype=np.float64)
        pipe.fit_seconds_ = d.get("fit_seconds", {})
        return pipe

    def save(self, folder: str | Path) -> None:
        """folder/features.json + folder/features.npz."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_npz(folder / "features.npz", self.to_arrays())
        (folder / "features.json").write_text(json.dumps(self.to_dict(), indent=2))

    @classmethod
    def load(cls, folder: str | Path, **kwargs) -> "VisualPipeline":
        folder = Path(folder)
        d = json.loads((folder / "features.json").read_text())
        return cls.from_saved(d, load_npz(folder / "features.npz"), **kwargs)


class BlockPipeline:
    """Pictures -> block descriptors (a BlockSet) for models that take blocks (BBNN).

    Only the colour codebook is learnt (on training pictures); the descriptors are the
    block histograms of pamir.features (uniform LBP + colour), cached by content hash.
    """

    kind = "block_pipeline"
    output = "blocks"

    def __init__(self, settings=None, *, cache_dir=None, n_jobs: int = JOBS,
                 progress: bool = True):
        self.settings = settings or FeatureSettings()
        self.cache_dir = cache_dir
        self.n_jobs = n_jobs
        self.progress = progress

    def fit(self, train_paths: Sequence) -> "BlockPipeline":
        s = self.settings
        self.colour_codebook_ = ColourCodebook.fit(
            list(train_paths), s.n_colours, s.seed, pixels_per_picture=s.colour_pixels_per_picture,
            max_pictures=s.colour_max_pictures, short_side=s.short_side)
        return self

    def transform(self, paths: Sequence) -> Extracted:
        """(BlockSet, ok, reasons) of the pictures, in order."""
        paths = list(paths)
        blocks = extract_blocks(paths, self.settings, self.colour_codebook_,
                                cache_dir=self.cache_dir, n_jobs=self.n_jobs,
                                progress=self.progress)
        return Extracted(blocks, blocks.ok, reasons_from_failures(paths, blocks.ok,
                                                                  blocks.failures))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "version": 1, "settings": self.settings.to_dict()}

    def to_arrays(self) -> dict[str, np.ndarray]:
        return self.colour_codebook_.to_arrays()

    @classmethod
    def from_saved(cls, d: dict, arrays: dict, **kwargs) -> "BlockPipeline":
        pipe = cls(FeatureSettings.from_dict(d["settings"]), **kwargs)
        pipe.colour_codebook_ = ColourCodebook.from_arrays(arrays)
        return pipe


def visterms_task(settings: dict, arrays: dict, cache_dir, paths) -> list:
    """(visterm ids of each block, status, reason) per picture, on a Dask worker: blocks as
    extract._picture computes them (cache included), assigned over the whole batch as
    VisualPipeline._tf assigns a chunk."""
    key = hashlib.blake2b(np.ascontiguousarray(arrays["visterm_codebook"]).tobytes()
                          + json.dumps(settings, sort_keys=True).encode(),
                          digest_size=8).hexdigest()
    pipe = once_per_worker(("visterms", key), lambda: _worker_pipeline(settings, arrays))
    s = pipe.settings
    cache = BlockCache(cache_dir, s, pipe.colour_codebook_) if cache_dir else None
    done = [_picture(p, s, pipe.colour_codebook_, cache) for p in paths]
    blocks = [d[0] if d[0] is not None else np.zeros((0, s.dim), np.uint16) for d in done]
    lengths = [len(b) for b in blocks]
    counts = np.concatenate(blocks).astype(np.float32) if blocks else np.zeros((0, s.dim),
                                                                              np.float32)
    if s.log_counts:  # as BlockSet stores them, and counts() reads them back
        counts = np.rint(np.expm1(np.log1p(counts))).astype(np.float32)
    ids = pipe.assign(counts) if len(counts) else np.zeros(0, np.int64)
    cuts = np.cumsum(lengths)[:-1]
    return [(v, d[1], d[2]) for v, d in zip(np.split(ids, cuts), done)]


def _worker_pipeline(settings: dict, arrays: dict) -> VisualPipeline:
    """A fitted pipeline from the arrays a Dask task is given (its codebooks, its scaling)."""
    pipe = VisualPipeline(FeatureSettings.from_dict(settings), n_jobs=1, progress=False)
    pipe.colour_codebook_ = worker_colour_codebook(arrays)
    pipe.codebook_ = np.asarray(arrays["visterm_codebook"], np.float32)
    if "scale_mean" in arrays:
        pipe.scale_mean_, pipe.scale_std_ = arrays["scale_mean"], arrays["scale_std"]
    return pipe


def _reorder(M: sp.csr_matrix, positions: np.ndarray) -> sp.csr_matrix:
    """Rows of M, where row j belongs at `positions[j]`."""
    inverse = np.empty_like(positions)
    inverse[positions] = np.arange(len(positions))
    return M[inverse]
