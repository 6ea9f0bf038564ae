"""On-disk caches: block histograms per picture, and fitted pipelines with their bags.

Block histograms are keyed by the picture's content hash (the same bytes under another name
or path hit the cache; an edited picture misses it) inside a folder keyed by the settings that
change the counts and by the colour codebook. Each picture is one small .npy file of integer
counts (uint16 for blocks up to 255x255), written atomically, read with allow_pickle=False.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..storage import atomic_write
from .colour import ColourCodebook
from .settings import FeatureSettings


#: Bumped when a change of code changes block counts, so that stale entries are not read.
#: Version 1 keys omit it.
BLOCKS_VERSION = 1


class BlockCache:
    """cache_dir/blocks/<settings + codebook key>/<hash[:2]>/<hash>.npy"""

    def __init__(self, cache_dir: str | Path, settings: FeatureSettings, codebook: ColourCodebook):
        what = {"blocks": settings.block_key(), "colours": codebook.digest()}
        if BLOCKS_VERSION > 1:
            what["version"] = BLOCKS_VERSION
        key = _key(what)
        self.root = Path(cache_dir) / "blocks" / key
        self.dim = settings.dim
        self.root.mkdir(parents=True, exist_ok=True)
        settings_file = self.root / "settings.json"
        if not settings_file.exists():  # what the folder holds, for a person looking at it
            info = {"block_settings": settings.block_key(), "colour_codebook": codebook.digest()}
            atomic_write(settings_file, lambda f: f.write(json.dumps(info, indent=2).encode()))

    def _path(self, digest: str) -> Path:
        return self.root / digest[:2] / f"{digest}.npy"

    def get(self, digest: str) -> np.ndarray | None:
        path = self._path(digest)
        try:
            counts = np.load(path, allow_pickle=False)
            if counts.ndim != 2 or counts.shape[1] != self.dim or counts.dtype.kind != "u":
                raise ValueError(f"{counts.dtype} {counts.shape}")
            return counts
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            path.unlink(missing_ok=True)  # a damaged entry is recomputed, not trusted
            return None

    def put(self, digest: str, counts: np.ndarray) -> None:
        atomic_write(self._path(digest), lambda f: np.save(f, counts, allow_pickle=False))


def _key(obj) -> str:
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


# ------------------------------------------------------------------- pipelines and bags

def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    atomic_write(path, lambda f: np.savez(f, **arrays))


def load_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def csr_to_arrays(X: sp.csr_matrix, prefix: str = "X") -> dict[str, np.ndarray]:
    return {f"{prefix}_data": X.data, f"{prefix}_indices": X.indices,
            f"{prefix}_indptr": X.indptr, f"{prefix}_shape": np.asarray(X.shape, np.int64)}


def csr_from_arrays(a: dict[str, np.ndarray], prefix: str = "X") -> sp.csr_matrix:
    return sp.csr_matrix(
        (a[f"{prefix}_data"], a[f"{prefix}_indices"], a[f"{prefix}_indptr"]),
        shape=tuple(int(v) for v in a[f"{prefix}_shape"]),
    )
