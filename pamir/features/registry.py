"""Which representations exist, by name, and how a saved one is rebuilt.

    rep = make_representation("cnn+visterms", weights=(1.0, 0.5))
    rep = representation_from_saved(d, arrays)        # d, arrays from rep.to_dict/to_arrays

The names a user gives (`pamir fit --representation`, `pamir features extract`) are the
keys of REPRESENTATIONS, the one table of them: the class, what it gives a model and what the
product can explain with it. Names combine with "+" ("cnn+visterms", "blobs+sift": a
Concatenation). docs/representations.md describes each with its costs and measured figures.
"""

from __future__ import annotations

import ctypes
import importlib
from dataclasses import dataclass, field

import numpy as np

from ..extras import optional, require
from .representation import Extracted

# scipy and the representations' modules are imported where used: the CLI reads this table
# for its help, and every `pamir` command line pays what it imports (pamir/cli.py).


@dataclass(frozen=True)
class Entry:
    """One representation a user can name.

    home: "module:Class", imported when one is made (torch only for the CNN). kind: the
    class's saved `kind`. output: what it gives a model, one of OUTPUTS. explains: what the
    product can explain with it ("blocks": each block's contribution to a word's score, the
    web page's overlay, pamir.server.explain; "classes": ImageNet class probabilities beside
    the words, pamir.zeroshot.classes; "": nothing more than the words). settings: the keyword of
    make_representation that configures it. preset: CNN settings changed from the given ones.
    extract: whether `pamir features extract` extracts and caches it. about: a line of help.
    extra: the optional install it needs (pamir.extras), None for the base install.
    """

    home: str
    kind: str
    output: str
    explains: str
    settings: str | None
    about: str
    preset: dict = field(default_factory=dict)
    extract: bool = False
    extra: str | None = None

    def load(self):
        """The class (a missing optional package: MissingExtra, naming the extra)."""
        module, _, name = self.home.partition(":")
        with optional():
            return getattr(importlib.import_module(module), name)


#: The kinds of picture data, one vocabulary for what a representation gives (its `output`,
#: the narrowest kind that is true of its X) and what a model reads (its `input`, the widest
#: kind it can take):
#:   "bags"     CSR, non-negative tf-idf bags, rows L2-normalised (visterms, sift, blobs);
#:   "dense"    an (n x d) float32 array (the CNN's features);
#:   "vectors"  any picture matrix, sparse or dense: what a concatenation gives, and what a
#:              linear model (PAMIR, the SVMs) reads, bags and dense ones included (VECTORS);
#:   "blocks"   a BlockSet of per-block descriptors (BBNN, the block kernels).
OUTPUTS = ("bags", "dense", "vectors", "blocks")
#: The narrower kinds that are "vectors" too, so that a model reading vectors takes them.
VECTORS = ("bags", "dense")


def output_kind(rep) -> str:
    """What a representation gives, one of OUTPUTS (any other `output` breaks the contract)."""
    if rep.output not in OUTPUTS:
        raise ValueError(f"{type(rep).__name__}.output = {rep.output!r}: use one of "
                         f"{', '.join(OUTPUTS)}")
    return rep.output


#: Every representation a user can name (`pamir fit --representation`, `pamir features
#: extract`), in the order the help lists them. The one table: the names, classes, outputs
#: and what each can explain are read from here and nowhere else. Validation (PAMIR, Corel
#: 5k, square-rooted CNN features) for the presets: cnn+visterms 43.90, cnn+cnn-lite2+visterms
#: 45.42; cnn-lite2+visterms alone 43.27; cnn+cnn-lite1+cnn-lite2+visterms 46.66
#: (benchmarks/results/cnn.md).
REPRESENTATIONS: dict[str, Entry] = {
    "visterms": Entry("pamir.features.pipeline:VisualPipeline", "visual_pipeline", "bags",
                      "blocks", "feature_settings", "the papers' bags of visterms (uniform LBP "
                      "+ colour histograms of blocks, k-means codebook, tf-idf)", extract=True),
    "blocks": Entry("pamir.features.pipeline:BlockPipeline", "block_pipeline", "blocks", "",
                    "feature_settings", "per-block descriptors, for BBNN and the block kernels"),
    "cnn": Entry("pamir.features.cnn:CNNRepresentation", "cnn", "dense", "classes",
                 "cnn_settings", "pooled ImageNet EfficientNet-Lite0 features at a 224-px "
                 "short side", extract=True, extra="cnn"),
    "cnn-lite1": Entry("pamir.features.cnn:CNNRepresentation", "cnn", "dense", "classes",
                       "cnn_settings", "EfficientNet-Lite1 at 240 px with its 2x2 regions",
                       preset={"model": "lite1", "short_side": 240, "regions": 2},
                       extract=True, extra="cnn"),
    "cnn-lite2": Entry("pamir.features.cnn:CNNRepresentation", "cnn", "dense", "classes",
                       "cnn_settings", "EfficientNet-Lite2 at 260 px with its 2x2 regions",
                       preset={"model": "lite2", "short_side": 260, "regions": 2},
                       extract=True, extra="cnn"),
    "sift": Entry("pamir.features.sift:SiftVisterms", "sift_visterms", "bags", "",
                  "sift_visterms", "the 2006 papers' bags of DoG/SIFT visterms"),
    "blobs": Entry("pamir.features.blobs:SegmentedBlobs", "blobs", "bags", "",
                   "blob_settings", "Duygulu et al.'s Blobs, made here for any picture"),
    "blobs-arff": Entry("pamir.features.blobs:ArffBlobs", "blobs_arff", "bags", "", None,
                        "Duygulu's own blobs (Corel 5k only)"),
}

#: What each name gives (derived from the table).
NAMES = {name: e.output for name, e in REPRESENTATIONS.items()}

#: CNN representations with settings of their own: the CNNSettings given for "cnn" with
#: these changed (derived from the table).
CNN_PRESETS = {name: e.preset for name, e in REPRESENTATIONS.items() if e.preset}

#: The user-facing name of each saved representation `kind` (derived from the table).
KIND_NAMES = {e.kind: name for name, e in REPRESENTATIONS.items() if not e.preset}

#: The names `pamir features extract` takes.
EXTRACTABLE = tuple(name for name, e in REPRESENTATIONS.items() if e.extract)


def names_help() -> str:
    """"visterms, blocks, cnn, ..., blobs-arff (Corel 5k only)": the names, for CLI help."""
    return ", ".join(name + (" (Corel 5k only)" if name == "blobs-arff" else "")
                     for name in REPRESENTATIONS)


def parse_name(name: str) -> list[str]:
    parts = [p.strip() for p in str(name).split("+")]
    bad = [p for p in parts if p not in NAMES]
    if bad or not parts:
        raise ValueError(f"representation {name!r}: use one of {', '.join(NAMES)} or a "
                         "combination such as cnn+visterms or blobs+sift")
    if len(parts) > 1 and "blocks" in parts:
        raise ValueError(f"representation {name!r}: blocks cannot be combined")
    return parts


def output_of(name: str) -> str:
    """What a named representation gives its model (a combination: "vectors")."""
    parts = parse_name(name)
    return NAMES[parts[0]] if len(parts) == 1 else Concatenation.output


def takes(model_input: str, name: str) -> bool:
    """Whether a model whose `input` is model_input can read the representation `name`."""
    out = output_of(name)
    return out == model_input or (model_input == "vectors" and out in VECTORS)


def make_representation(name: str, *, feature_settings=None, cnn_settings=None, weights=None,
                        cache_dir=None, progress=True, sift_visterms: int | None = None,
                        blob_settings=None):
    """An unfitted representation of that name (weights: one per part of a combination;
    feature_settings: a FeatureSettings; sift_visterms: the SIFT codebook size,
    SIFT_VISTERMS by default; blob_settings: a pamir.features.blobs.BlobSettings)."""
    given = {"feature_settings": feature_settings, "cnn_settings": cnn_settings,
             "blob_settings": blob_settings}
    parts = []
    for part in parse_name(name):
        entry = REPRESENTATIONS[part]
        if entry.extra:
            require(entry.extra)  # said now, not after minutes of other work
        cls = entry.load()
        if entry.settings == "sift_visterms":
            # start-up: OpenCV (0.5 s)
            from .sift import SIFT_VISTERMS  # noqa: PLC0415

            first = (sift_visterms or SIFT_VISTERMS,)
        elif entry.settings == "cnn_settings":
            from .cnn import CNNSettings  # noqa: PLC0415  heavy: torch, onnxruntime

            settings = cnn_settings or CNNSettings()
            first = (settings.replace(**entry.preset) if entry.preset else settings,)
        elif entry.settings:
            first = (given[entry.settings],)
        else:
            first = ()
        parts.append(cls(*first, cache_dir=cache_dir, progress=progress))
    if len(parts) == 1:
        return parts[0]
    return Concatenation(parts, weights or [1.0] * len(parts))


#: Rows a Concatenation combines at a time: its temporaries are this many rows of the
#: parts, not the whole collection's.
COMBINE_ROWS = 2_048


def _scaled_rows(M, start: int, stop: int, weight: float):
    """Rows start..stop of a part as float32 CSR times its weight (a copy: M is left as
    it was); a dense part's exact zeros are not stored, as sp.csr_matrix drops them."""
    # start-up: scipy (0.3 s)
    import scipy.sparse as sp  # noqa: PLC0415

    block = sp.csr_matrix(M[start:stop], dtype=np.float32, copy=True)
    block.data *= weight  # float32, as the product of the whole part was
    return block


class Concatenation:
    """Representations side by side, each scaled by its weight: [w_1 x_1, w_2 x_2, ...].

    Each part keeps its own normalisation (unit L2 rows for visterms and cnn), so a weight is
    the share of the part in a dot product; the weights are chosen on validation
    (`pamir fit` tries COMBINATION_WEIGHTS for the second part). The result is CSR: the
    sparse bags stay sparse beside the dense part, which is what PAMIR's updates walk.
    """

    kind = "concatenation"
    output = "vectors"

    def __init__(self, parts, weights):
        if len(parts) != len(weights) or len(parts) < 2:
            raise ValueError("a combination needs two or more representations, one weight each")
        if any(output_kind(p) == "blocks" for p in parts):
            raise ValueError("block descriptors cannot be concatenated with picture vectors")
        self.parts = list(parts)
        self.weights = [float(w) for w in weights]

    @property
    def name(self) -> str:
        return "+".join(representation_name(p) for p in self.parts)

    def combine(self, matrices, rows=None):
        """The parts' matrices side by side as one float32 CSR (of their `rows`: None, all),
        built COMBINE_ROWS rows at a time into arrays sized once: converting each
        whole dense part to CSR, scaling it, and stacking held about four copies of the
        result at once (3.5 GB for Corel 5k's widest). The numbers, and the stored entries,
        are the same."""
        # start-up: scipy (0.3 s)
        import scipy.sparse as sp  # noqa: PLC0415

        n = matrices[0].shape[0] if rows is None else len(rows)

        def block(start):
            return self.csr_rows(matrices, start, min(start + COMBINE_ROWS, n), rows)

        starts = range(0, n, COMBINE_ROWS)
        counts = np.concatenate([[0]] + [np.diff(block(s).indptr) for s in starts])
        indptr = np.cumsum(counts, dtype=np.int64)
        width = sum(M.shape[1] for M in matrices)
        index = np.int32 if max(indptr[-1], width) < np.iinfo(np.int32).max else np.int64
        data, indices = np.empty(indptr[-1], np.float32), np.empty(indptr[-1], index)
        for s in starts:  # the rows again, each block copied into its place
            b = block(s)
            data[indptr[s]:indptr[s] + b.nnz] = b.data
            indices[indptr[s]:indptr[s] + b.nnz] = b.indices
        return sp.csr_matrix((data, indices, indptr.astype(index)), shape=(n, width))

    def csr_rows(self, matrices, start: int, stop: int, rows=None):
        """Rows start..stop (of `rows`, None: all) of the parts side by side as float32 CSR,
        the numbers `combine` stores for them."""
        # start-up: scipy (0.3 s)
        import scipy.sparse as sp  # noqa: PLC0415

        if rows is None:
            return sp.hstack([_scaled_rows(M, start, stop, w)
                              for M, w in zip(matrices, self.weights)], format="csr")
        picked = rows[start:stop]
        return sp.hstack([_scaled_rows(M[picked], 0, len(picked), w)
                          for M, w in zip(matrices, self.weights)], format="csr")

    def stack(self, matrices) -> "ColumnBlocks":
        """The parts' matrices side by side without copying them (ColumnBlocks): what a fit
        reads, with the dense views at 4 bytes a number instead of CSR's 8."""
        return ColumnBlocks(self, list(matrices))

    def fit(self, train_paths) -> "Concatenation":
        for p in self.parts:
            p.fit(train_paths)
        return self

    def transform(self, paths) -> Extracted:
        paths = list(paths)
        done = [p.transform(paths) for p in self.parts]
        ok = np.logical_and.reduce([d.ok for d in done])
        reasons = [next((d.reasons[i] for d in done if d.reasons[i]), None) if not ok[i]
                   else None for i in range(len(paths))]
        return Extracted(self.combine([d.X for d in done]), ok, reasons)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "weights": self.weights,
                "parts": [p.to_dict() for p in self.parts]}

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {f"{i}/{k}": v for i, p in enumerate(self.parts)
                for k, v in p.to_arrays().items()}

    @classmethod
    def from_saved(cls, d: dict, arrays: dict, **kwargs) -> "Concatenation":
        parts = []
        for i, part in enumerate(d["parts"]):
            mine = {k.partition("/")[2]: v for k, v in arrays.items() if k.startswith(f"{i}/")}
            parts.append(representation_from_saved(part, mine, **kwargs))
        return cls(parts, d["weights"])


class ColumnBlocks:
    """A Concatenation's part matrices side by side as they are: a dense view
    stays a float32 array (4 bytes a number), where the combined CSR stores 8 (the number
    and its column); rows taken (`X[rows]`) are remembered, not copied. `pamir fit` holds
    its candidates' features so; what reads them takes CSR rows a block at a time
    (`csr_rows`: the numbers `Concatenation.combine` stores), dense columns of the leading
    dense parts (`columns`), or the whole CSR (`tocsr`, for a few hundred validation rows).
    At 100,000 pictures of cnn+cnn-lite1+cnn-lite2+visterms the CSR was 12 GB."""

    ndim = 2
    dtype = np.dtype(np.float32)

    def __init__(self, concatenation: Concatenation, matrices: list, rows=None):
        self.concatenation, self.matrices = concatenation, matrices
        self.rows = None if rows is None else np.asarray(rows, dtype=np.int64)
        n = matrices[0].shape[0] if rows is None else len(self.rows)
        self.shape = (n, sum(M.shape[1] for M in matrices))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, idx) -> "ColumnBlocks":
        idx = np.arange(self.shape[0])[idx] if isinstance(idx, slice) else np.asarray(idx)
        idx = np.flatnonzero(idx) if idx.dtype == bool else idx.astype(np.int64)
        return ColumnBlocks(self.concatenation, self.matrices,
                            idx if self.rows is None else self.rows[idx])

    def csr_rows(self, start: int, stop: int):
        """Its rows start..stop as float32 CSR."""
        return self.concatenation.csr_rows(self.matrices, start, stop, self.rows)

    def tocsr(self):
        return self.concatenation.combine(self.matrices, self.rows)

    @property
    def nnz(self) -> int:
        """The numbers its CSR would store (a dense view's exact zeros are not)."""
        pick = slice(None) if self.rows is None else self.rows
        return int(sum(M[pick].nnz if hasattr(M, "nnz") else np.count_nonzero(M[pick])
                       for M in self.matrices))

    def columns(self, start: int, stop: int) -> np.ndarray | None:
        """Columns [start, stop) as a dense float32 array, weighted, where they lie in one
        dense part; None otherwise."""
        at = 0
        for M, w in zip(self.matrices, self.concatenation.weights):
            if at <= start and stop <= at + M.shape[1] and isinstance(M, np.ndarray):
                # (rows taken are a fresh array already: not copied twice)
                out = (np.array(M[:, start - at:stop - at], dtype=np.float32)
                       if self.rows is None else
                       np.asarray(M[self.rows, start - at:stop - at], dtype=np.float32))
                out *= w  # as _scaled_rows scales a part's stored numbers
                return out
            at += M.shape[1]
        return None


def release_networks(rep) -> None:
    """Let a representation's networks go (CNNRepresentation.release_network), each part's
    of a combination, and give the freed memory back to the system: what a fit holds once
    the features are made is the features. glibc keeps freed memory for the process until
    `malloc_trim` (measured on a folder of 400 pictures from an empty cache: 1,142 MB held
    after the features, 832 MB with the sessions let go, 550 MB trimmed)."""
    for part in getattr(rep, "parts", [rep]):
        release = getattr(part, "release_network", None)
        if release is not None:
            release()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc (macOS, musl): the memory is reused by the process, not returned


def as_matrix(X):
    """X as a matrix a model reads: a ColumnBlocks' CSR, anything else as it is."""
    return X.tocsr() if isinstance(X, ColumnBlocks) else X


def representation_class(kind: str):
    """The class of a saved representation's `kind`, imported on demand (torch and
    onnxruntime only for the CNN)."""
    if kind == Concatenation.kind:
        return Concatenation
    for entry in REPRESENTATIONS.values():
        if entry.kind == kind:
            return entry.load()
    kinds = [Concatenation.kind, *dict.fromkeys(e.kind for e in REPRESENTATIONS.values())]
    raise ValueError(f"unknown representation kind {kind!r}; this pamir knows "
                     f"{', '.join(kinds)}: was the model made by a newer one?")


def representation_from_saved(d: dict, arrays: dict, **kwargs):
    return representation_class(d.get("kind")).from_saved(d, arrays, **kwargs)


def representation_name(rep) -> str:
    """The user-facing name: visterms, blocks, cnn, cnn-lite2, sift, blobs, cnn+visterms, ..."""
    if isinstance(rep, Concatenation):
        return rep.name
    for name, preset in CNN_PRESETS.items():
        if rep.kind == "cnn" and all(getattr(rep.settings, k) == v for k, v in preset.items()):
            return name
    return KIND_NAMES.get(rep.kind, rep.kind)


__all__ = ["CNN_PRESETS", "ColumnBlocks", "Concatenation", "as_matrix", "EXTRACTABLE", "Entry", "KIND_NAMES", "NAMES",
           "OUTPUTS", "REPRESENTATIONS", "VECTORS", "make_representation", "names_help",
           "output_kind", "output_of", "parse_name", "release_networks",
           "representation_class", "representation_from_saved", "representation_name", "takes"]
