"""What every model shares: the fit/transform contract, training queries, and saving.

A model maps pictures into the text space: `transform(X) -> (n x T)` dense float32 scores, one
per vocabulary word, so retrieval (Z q), annotation (top words of a row) and evaluation need no
model-specific code. A fitted model is a directory: `model.json` (kind, version,
hyper-parameters, anything JSON) and `arrays.npz` (numbers), loaded with allow_pickle=False,
so a model file from someone else cannot run code.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import inspect
import json
import os
import shutil
import tempfile
import threading
import zipfile
import zlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .. import config
from ..protocol import QuerySet, generate_queries
from ..storage import pid_alive
from ..text.vectors import idf, text_vectors

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
        caps = [Y.indices[Y.indptr[j]:Y.indptr[j + 1]] for j in range(Y.shape[0])]
        vocab = [str(t) for t in range(Y.shape[1])]
        self.queries: QuerySet = generate_queries(caps, vocab, np.arange(Y.shape[0]), max_words)
        self.idf = idf(Y) if idf_weights is None else idf_weights
        self.vectors = text_vectors(self.queries.presence(), self.idf)
        self.relevance = self.queries.relevance

        self.total = len(self.queries)  # before any `sample`

    def __len__(self) -> int:
        return self.vectors.shape[0]

    def sample(self, most: int | None = config.VALID_MAX_QUERIES,
               seed: int = config.VALID_QUERY_SEED) -> "TrainingQueries":
        """At most `most` of the queries (all when None or fewer), a seeded uniform sample
        kept in their order: vectors and relevance only (validation's criterion), `total`
        still counting them all."""
        if most is None or len(self) <= int(most):
            return self
        keep = np.sort(np.random.default_rng(seed).choice(len(self), int(most), replace=False))
        out = object.__new__(TrainingQueries)
        out.__dict__.update(self.__dict__, queries=None, vectors=self.vectors[keep],
                            relevance=sp.csr_matrix(self.relevance)[keep])
        return out


_QUERY_MEMO: dict = {}
_QUERY_MEMO_LOCK = threading.RLock()
#: Query sets kept by `training_queries` (the last ones asked for).
QUERY_MEMO_SIZE = 4


def training_queries(Y, idf_weights: np.ndarray | None = None) -> TrainingQueries:
    """TrainingQueries(Y, idf_weights), computed once for the same captions and idf: the
    18 fits of a `pamir fit` all train on the same captions, and for long captions building
    the query set (every subset of every caption) is seconds of Python holding the GIL each
    time (4.5 s for 730,000 queries). Treat the result as read-only."""
    Y = sp.csr_matrix(Y)
    digest = hashlib.blake2b(digest_size=16)
    for a in (np.asarray(Y.shape), Y.indptr, Y.indices, Y.data,
              np.zeros(0) if idf_weights is None else np.asarray(idf_weights, np.float64),
              np.asarray([-1 if config.MAX_QUERY_WORDS is None else config.MAX_QUERY_WORDS])):
        digest.update(np.ascontiguousarray(a).tobytes())
    key = digest.hexdigest()
    # built under the lock: threads that start together wait for one set, not build two
    with _QUERY_MEMO_LOCK:
        if key in _QUERY_MEMO:
            _QUERY_MEMO[key] = _QUERY_MEMO.pop(key)  # most recent last
            return _QUERY_MEMO[key]
        queries = TrainingQueries(Y, idf_weights=idf_weights)
        _QUERY_MEMO[key] = queries
        while len(_QUERY_MEMO) > QUERY_MEMO_SIZE:
            _QUERY_MEMO.pop(next(iter(_QUERY_MEMO)))
    return queries


class NotFittedError(RuntimeError, ValueError, AttributeError):
    """A model used before it was fitted: a RuntimeError as pamir has always raised, and the
    ValueError / AttributeError that scikit-learn's NotFittedError is."""


def caption_matrix(Y, who: str = "the model") -> sp.csr_matrix:
    """Y as (n x T) CSR caption presence. A 2-D matrix is taken as it is; a 1-D vector of
    labels (scikit-learn's y) is one word a picture, the sorted distinct labels the words."""
    if Y is None:
        raise ValueError(f"{who} requires y to be passed, but the target y is None: give the "
                         "pictures' captions, an (n x T) presence matrix")
    if not sp.issparse(Y):
        Y = np.asarray(Y)
        if Y.ndim == 1:
            try:
                labels, codes = np.unique(Y, return_inverse=True)
            except TypeError:  # labels that cannot be ordered (numbers mixed with text)
                raise ValueError(f"Unknown label type: {who} takes y as labels of one kind "
                                 "(numbers or words), or as a presence matrix") from None
            return sp.csr_matrix((np.ones(len(codes)), (np.arange(len(codes)), codes)),
                                 shape=(len(codes), len(labels)))
        try:
            Y = Y.astype(np.float64)  # numbers held as objects are numbers
        except (TypeError, ValueError):
            raise ValueError(f"Unknown label type: {who} takes Y as an (n x T) presence "
                             "matrix of numbers") from None
    return sp.csr_matrix(Y)


def check_pictures(X, who: str, name: str = "X"):
    """What every picture matrix must be, said before any numbers are read: 2-D, real,
    with at least one picture and one dimension."""
    if not sp.issparse(X):
        X = np.asarray(X)
    shape = X.shape
    if np.iscomplexobj(X):  # reads the dtype, sparse or dense
        raise ValueError(f"{who}: {name} holds complex numbers; Complex data not supported")
    if len(shape) != 2:
        raise ValueError(f"{who}: {name} has shape {shape}; Reshape your data: one row of "
                         "numbers a picture (n x d)")
    if shape[0] == 0:
        raise ValueError(f"{who}: {name} has 0 sample(s) (shape={shape}) while a minimum of "
                         "1 is required: give at least one picture")
    if shape[1] == 0:
        raise ValueError(f"{who}: {name} has 0 feature(s) (shape={shape}) while a minimum of "
                         "1 is required: give at least one number a picture")
    return X


class TextSpaceModel:
    """Base of every model, in the manner of scikit-learn estimators.

    - Hyper-parameters are the keyword arguments of `__init__`, with literal defaults, stored
      unchanged under their own names (`get_params` reads them back from the signature);
      `__init__` does nothing else. They are checked in `fit`.
    - `param_grid`: the values pamir.training.selection tries on validation for each
      parameter; every key is a parameter of `__init__` (tests check it).
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
    #: The validation grid: parameter name -> values tried by pamir.training.selection.
    param_grid: dict[str, list] = {}

    @classmethod
    def default_params(cls) -> dict:
        """{name: default} of every hyper-parameter, read from `__init__`'s signature."""
        return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
                if name != "self" and p.kind == p.POSITIONAL_OR_KEYWORD}

    def get_params(self, deep: bool = True) -> dict:
        """The hyper-parameters as given to `__init__` (scikit-learn's contract, so that
        `sklearn.base.clone` and `GridSearchCV` drive the models). deep: scikit-learn's
        flag for estimators nested in parameters; no model here holds one, so deep and
        shallow are the same."""
        return {name: getattr(self, name) for name in self.default_params()}

    def __repr__(self) -> str:
        """PAMIR(c=1.0): the parameters that differ from the defaults, as scikit-learn does."""
        defaults = self.default_params()
        changed = [f"{k}={v!r}" for k, v in self.get_params().items()
                   if not _same(v, defaults.get(k))]
        return f"{type(self).__name__}({', '.join(changed)})"

    def __sklearn_tags__(self):
        """What scikit-learn's estimator checks may assume (sklearn.utils.Tags; imported here
        only: sklearn.base takes about a second to import). A model is fitted on pictures X
        and their caption presence Y (n x T, several words a picture: a 2-D target) and
        transforms pictures into T float32 scores; the bag models (CMRM, CMTT, PLSA) count
        visterms, so they take non-negative X only."""
        # sklearn: about 0.5 s to import; only scikit-learn's own checks ask
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags  # noqa: PLC0415

        return Tags(estimator_type=None,
                    target_tags=TargetTags(required=True, two_d_labels=True, multi_output=True,
                                           single_output=False),
                    transformer_tags=TransformerTags(preserves_dtype=["float32"]),
                    input_tags=InputTags(sparse=self.input != "blocks",
                                         positive_only=self.input == "bags"))

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

    def fit_transform(self, X, Y=None, **fit_params) -> np.ndarray:
        """fit(X, Y, **fit_params), then the (n x T) text-space vectors of X."""
        return self.fit(X, Y, **fit_params).transform(X)

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
        defaults = cls.default_params()
        # JSON has no tuples: a tuple parameter (WordSVM's Cs) comes back as one
        params = {k: tuple(v) if isinstance(defaults.get(k), tuple) and isinstance(v, list)
                  else v for k, v in head["params"].items()}
        model = cls(**params)
        model._set_state(head.get("state", {}), arrays)
        return model


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # arrays: compared element-wise
        return a is b


def save_directory(path, meta: dict, arrays: dict[str, np.ndarray]) -> Path:
    """Write model.json + arrays.npz to a new directory, then swap it in atomically.

    The files are written and fsynced in a temporary sibling directory
    (`.NAME.saving-<pid>-*`), which then takes the place of `path`: by one atomic exchange
    of the two folders where the system has it (Linux renameat2), so that `path` is a whole
    model at every instant, else by two renames (the old model set aside as `.NAME.old`, which
    `load_directory` reads if a crash fell between them). A killed save's leftovers are
    deleted by the next save. An existing `path` is replaced only if it is a model (it holds
    nothing but model.json and arrays.npz): a folder of the user's is never deleted. A full
    disk or a read-only folder is an OSError naming the path, the previous model unchanged.
    """
    path = Path(path).resolve()  # "." has no name to make a sibling from
    check_replaceable(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_saves(path)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.saving-{os.getpid()}-",
                                    dir=path.parent))
    except OSError as e:
        raise OSError(e.errno, f"{path}: cannot save the model ({e.strerror or e}); "
                               "the previous model, if any, is unchanged") from None
    try:
        with open(tmp / "arrays.npz", "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        with open(tmp / "model.json", "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1, default=_json_default)
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(tmp)
        if path.exists():
            if _exchange(tmp, path):  # tmp now holds the old model
                _fsync_dir(path.parent)
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                old = path.with_name(f".{path.name}.old")
                shutil.rmtree(old, ignore_errors=True)
                path.rename(old)
                tmp.rename(path)
                _fsync_dir(path.parent)
                shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(path)
            _fsync_dir(path.parent)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OSError(e.errno, f"{path}: cannot save the model ({e.strerror or e}); "
                               "the previous model, if any, is unchanged") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def remove_stale_saves(path: Path) -> list[Path]:
    """Delete what killed saves of the model at `path` left beside it: `.NAME.saving-<pid>-*`
    folders of dead processes, and `.NAME.old` once `path` is a whole model again."""
    gone = []
    prefix = f".{path.name}.saving-"
    for p in path.parent.glob(f".{glob_escape(path.name)}.saving-*"):
        pid = p.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)
            gone.append(p)
    old = path.with_name(f".{path.name}.old")
    if old.is_dir() and (path / "model.json").is_file() and (path / "arrays.npz").is_file():
        shutil.rmtree(old, ignore_errors=True)
        gone.append(old)
    elif old.is_dir() and not path.exists():
        old.rename(path)  # a save killed between its two renames: the old model back
    return gone


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where the system
    or file system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(b))


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


class _Stored(dict):
    """A dict read from a model's files: a missing key is a damaged model (ValueError naming
    the file), not a KeyError deep inside loading."""

    where = "model"

    def __missing__(self, key):
        raise ValueError(f"{self.where}: has no {key!r}; the file is damaged or from another "
                         "version of pamir; fit the model again")


def load_directory(path) -> tuple[dict, dict[str, np.ndarray]]:
    path = Path(path)
    if not (path / "model.json").exists() and not path.exists():
        old = path.with_name(f".{path.name}.old")
        if (old / "model.json").is_file() and (old / "arrays.npz").is_file():
            path = old  # a save was killed between its two renames: the previous model
    if not (path / "model.json").is_file() or not (path / "arrays.npz").is_file():
        raise FileNotFoundError(
            f"{path}: not a pamir model directory (expected model.json and arrays.npz); "
            "create one with `pamir fit`"
        )
    where = str(path / "model.json")

    def stored(d):
        d = _Stored(d)
        d.where = where
        return d

    try:
        meta = json.loads((path / "model.json").read_text(encoding="utf-8"),
                          object_hook=stored)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{path / 'model.json'}: not a readable model description ({e}); "
                         "fit the model again") from None
    except OSError as e:
        raise ValueError(f"{path / 'model.json'}: cannot be read ({e.strerror or e})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path / 'model.json'}: not a model description; fit the model again")
    version = meta.get("format_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise ValueError(f"{path / 'model.json'}: model format {version} was written by a newer "
                         f"pamir (this one reads format {FORMAT_VERSION}); upgrade pamir or fit "
                         "the model again")
    arrays = _Stored()
    arrays.where = str(path / "arrays.npz")
    try:
        z = np.load(path / "arrays.npz", allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise ValueError("a single array, not an archive of them")
        with z:
            for k in z.files:
                arrays[k] = z[k]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error,
            NotImplementedError) as e:
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
