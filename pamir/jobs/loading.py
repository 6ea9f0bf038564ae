"""Loading a system for a job, the one way the CLI, the server, the Dask workers and a script
do it: a trained system from its folder (`load_system`), or the zero-caption system
(`zero_caption_system`: ImageNet's words, no model), and what an index takes from either
(`text_side`, `word_scales`, `indexing_system`).

Errors are WorkflowError (pamir.jobs.errors), with a message for a person.
"""

from __future__ import annotations

import numpy as np

from .. import config
from ..index import model_fingerprint
from ..zeroshot.classes import ZeroCaptionSystem
from .errors import WorkflowError


def load_system(model_dir, *, vocabulary=None, cache_dir=None, progress: bool = False):
    """The trained system in model_dir, the one way the CLI, the server, the Dask workers and
    a script load one: features cached in cache_dir (default: the default cache, so that
    rescoring after `pamir learn` and re-indexing a moved folder hash pictures instead of
    decoding them again), no progress bars unless asked. With vocabulary (an index's), a
    model with another vocabulary is a WorkflowError."""
    # start-up: pamir.system loads numba and scipy (about 0.5 s); the commands that import
    # this module at their top (`pamir search` on a bare folder's index) need neither
    from ..system import System  # noqa: PLC0415

    cache_dir = config.default_cache_dir() if cache_dir is None else cache_dir
    system = System.load(model_dir, cache_dir=cache_dir, progress=progress)
    if vocabulary is not None:
        check_vocabulary(system, vocabulary, model_dir)
    return system


def check_vocabulary(system, vocabulary, model_dir) -> None:
    """WorkflowError unless the system's vocabulary is the index's (its words, in order)."""
    if list(system.vocabulary) != list(vocabulary):
        raise WorkflowError(f"the model in {model_dir} has another vocabulary than the index")


def text_side(system) -> tuple[list[str], np.ndarray]:
    """The vocabulary and idf that the system builds query vectors with."""
    return list(system.vocabulary), np.asarray(system.idf, dtype=np.float64)


def word_scales(system) -> np.ndarray | None:
    """The spread of the system's scores of each word (its prior's), which the index
    measures a query's words by (Index.create); None without a prior."""
    prior = getattr(system, "prior", None)
    return None if prior is None else prior.spreads


def rescore(index, system, model_dir, fingerprint: str):
    """Every picture of a writable `index` scored again by `system` (its features from the
    cache), the index then belonging to model_dir at `fingerprint`: after `pamir learn`, a
    kept feedback round, or a model that changed since the index was built."""
    # start-up: pamir.system (scipy); `pamir search` imports this module and rescores nothing
    from ..system import index_transform  # noqa: PLC0415

    vocabulary, idf = text_side(system)
    return index.rescore(vocabulary, idf, index_transform(system, bool(index.classes)),
                         model_dir=model_dir, fingerprint=fingerprint,
                         scales=word_scales(system))


def indexing_system(model_dir, *, load=load_system) -> tuple:
    """(system, fingerprint) that an index of model_dir is built with: the trained system
    (loaded by `load`), or for model_dir None the zero-caption system (ImageNet's words)."""
    if model_dir is None:
        system = zero_caption_system()
        return system, system.fingerprint
    return load(model_dir), model_fingerprint(model_dir)


def zero_caption_system(cache_dir=None):
    """The zero-caption system (pamir.zeroshot.classes: ImageNet's words, no model), the one way the
    CLI, the server and the Dask workers build it: features cached in cache_dir (default:
    the default cache)."""
    return ZeroCaptionSystem(config.default_cache_dir() if cache_dir is None else cache_dir)
