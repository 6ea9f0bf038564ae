"""What every model shares: the fit/transform contract, training queries, and saving.

A model maps pictures into the text space: `transform(X) -> (n x T)` dense float32 scores, one
per vocabulary word, so retrieval (Z q), annotation (top words of a row) and evaluation need no
model-specific code. A fitted model is a directory: `model.json` (kind, version,
hyper-parameters, anything JSON) and `arrays.npz` (numbers), loaded with allow_pickle=False,
so a model file from someone else cannot run code.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .. import config
from ..protocol import QuerySet, generate_queries
from ..text import idf, text_vectors

FORMAT_VERSION = 1


class TrainingQueries:
    """The queries of a captioned picture set (every subset of a caption), as the papers do.

    Y: (n x T) caption presence. `idf` is computed from Y unless given (validation queries use
    the training idf). `vectors` are the normalised idf query vectors; `relevance` the
    (n_queries x n) relevance matrix.
    """

    def __init__(self, Y, idf_weights: np.ndarray | None = None,
                 max_words: int | None = config.MAX_QUERY_WORDS):
        Y = sp.csr_matrix(Y)
        self.idf = idf(Y) if idf_weights is None else idf_weights
        caps = [Y.indices[Y.indptr[j]:Y.indptr[j + 1]] for j in range(Y.shape[0])]
        vocab = [str(t) for t in range(Y.shape[1])]
        self.queries: QuerySet = generate_queries(caps, vocab, np.arange(Y.shape[0]), max_words)
        self.vectors = text_vectors(self.queries.presence(), self.idf)
        self.relevance = self.queries.relevance

    def __len__(self) -> int:
        return len(self.queries)


class TextSpaceModel:
    """Base of every model, in the manner of scikit-learn estimators.

    - Hyper-parameters are the keyword arguments of `__init__`, with literal defaults, stored
      unchanged under their own names (`get_params` reads them back from the signature);
      `__init__` does nothing else. They are checked in `fit`.
    - `param_grid`: the values pamir.selection tries on validation for each parameter; every
      key is a parameter of `__init__` (tests check it).
    - `fit(X, Y, *, validation=None, callback=None)`: X the pictures (what `input` says), Y
      the (n x T) caption presence; validation=(X_valid, Y_valid) for the models that
      early-stop or tune inside fit; callback(done, total, valid_avgp) reports progress.
    - `transform(X) -> (n x T)` text-space scores; learnt state in attributes ending in `_`.
    """

    kind = "base"
    #: What fit/transform take: "bags" (non-negative bags of visterms: the models that count
    #: visterms), "vectors" (any picture matrix, sparse or dense: bags, CNN features and
    #: their concatenations) or "blocks" (a BlockSet of per-block descriptors).
    input = "bags"
    #: The validation grid: parameter name -> values tried by pamir.selection.
    param_grid: dict[str, list] = {}

    @classmethod
    def default_params(cls) -> dict:
        """{name: default} of every hyper-parameter, read from `__init__`'s signature."""
        return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
                if name != "self" and p.kind == p.POSITIONAL_OR_KEYWORD}

    def get_params(self) -> dict:
        return {name: getattr(self, name) for name in self.default_params()}

    def set_params(self, **params) -> "TextSpaceModel":
        unknown = set(params) - set(self.default_params())
        if unknown:
            raise ValueError(f"{self.kind}: unknown parameters {', '.join(sorted(unknown))}; "
                             f"its parameters are {', '.join(self.default_params())}")
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def fit(self, X, Y, *, validation=None, callback=None):
        raise NotImplementedError

    def transform(self, X) -> np.ndarray:
        raise NotImplementedError

    # state that is not a hyper-parameter: (JSON-able dict, arrays) --------------------------
    def _state(self) -> tuple[dict, dict[str, np.ndarray]]:
        raise NotImplementedError

    def _set_state(self, meta: dict, arrays: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def save(self, path) -> Path:
        meta, arrays = self._state()
        head = {"kind": self.kind, "format_version": FORMAT_VERSION,
                "params": self.get_params(), "state": meta}
        return save_directory(path, head, arrays)

    @classmethod
    def load(cls, path) -> "TextSpaceModel":
        head, arrays = load_directory(path)
        if head.get("kind") != cls.kind:
            raise ValueError(f"{path}: holds a {head.get('kind')!r} model, not {cls.kind!r}")
        model = cls(**head["params"])
        model._set_state(head.get("state", {}), arrays)
        return model


def save_directory(path, meta: dict, arrays: dict[str, np.ndarray]) -> Path:
    """Write model.json + arrays.npz to a new directory, then swap it in atomically.

    The files are written and fsynced in a temporary sibling directory, which then replaces
    `path` by rename, so a crash never leaves a half-written model where a good one was. An
    existing `path` is replaced only if it is a model (it holds nothing but model.json and
    arrays.npz): a folder of the user's is never deleted.
    """
    path = Path(path).resolve()  # "." has no name to make a sibling from
    check_replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        with open(tmp / "arrays.npz", "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        with open(tmp / "model.json", "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1, default=_json_default)
            f.flush()
            os.fsync(f.fileno())
        old = None
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            path.rename(old)
        tmp.rename(path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


MODEL_FILES = frozenset({"model.json", "arrays.npz"})


def check_replaceable(path: Path) -> None:
    if path.is_file() or path.is_symlink():
        raise FileExistsError(f"{path}: is a file; give a folder name for the model")
    if path.is_dir():
        others = sorted(p.name for p in path.iterdir() if p.name not in MODEL_FILES)
        if others:
            shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
            raise FileExistsError(
                f"{path}: holds files that are not a pamir model ({shown}); a model folder "
                "is replaced whole, so give a new or empty folder"
            )


def load_directory(path) -> tuple[dict, dict[str, np.ndarray]]:
    path = Path(path)
    if not (path / "model.json").is_file() or not (path / "arrays.npz").is_file():
        raise FileNotFoundError(
            f"{path}: not a pamir model directory (expected model.json and arrays.npz); "
            "create one with `pamir fit`"
        )
    try:
        meta = json.loads((path / "model.json").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path / 'model.json'}: not a readable model description ({e}); "
                         "fit the model again") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path / 'model.json'}: not a model description; fit the model again")
    try:
        with np.load(path / "arrays.npz", allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path / 'arrays.npz'}: damaged or not a model's arrays ({e}); "
                         "fit the model again") from None
    return meta, arrays


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


def dense_float32(Z) -> np.ndarray:
    return np.ascontiguousarray(Z.toarray() if sp.issparse(Z) else Z, dtype=np.float32)
