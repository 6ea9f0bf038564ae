"""pamir: retrieve pictures from text queries (PAMIR, Grangier & Bengio 2008).

The names a script needs, imported on first use so that `import pamir` stays light (the
models pull numba, the CNN torch):

    import pamir
    system = pamir.fit_system(pamir.load_collection("pictures/"))   # README, "Use from Python"
    system.save("models/mine")
    pamir.index_folders("models/mine", ["pictures/"], index="my-index")
    with pamir.Index.open("my-index") as index:
        hits = index.search("sea sky", k=5)

pamir is quiet by default: fitting reports its steps to the `pamir` loggers (call
`logging.basicConfig(level=logging.INFO)` to see them) and shows progress bars only when
asked (`progress=True`).
"""

from __future__ import annotations

import importlib

#: name -> the module that defines it (one home each; this table is the library's face).
_EXPORTS = {
    # data
    "Collection": "pamir.data", "load_collection": "pamir.facts.collection",
    # a trained system: fitting, saving, loading, evaluating, learning
    "System": "pamir.system", "fit_system": "pamir.training", "fit_or_refit": "pamir.training",
    "FitSettings": "pamir.training",
    "evaluate_system": "pamir.system",
    # the index and the workflow over it (open / create / rebuild / rescore / learn / keep)
    "Index": "pamir.index", "Hit": "pamir.index",
    "open_index": "pamir.jobs.opening", "index_folders": "pamir.jobs.indexing",
    "learn_captions": "pamir.jobs.learning", "keep_feedback": "pamir.jobs.feedback",
    "feedback_round": "pamir.jobs.feedback",
    # the models: scikit-learn style estimators
    "PAMIR": "pamir.models.pamir", "MODELS": "pamir.models", "model_class": "pamir.models",
    "load_model": "pamir.models",
    # representations
    "REPRESENTATIONS": "pamir.features.registry",
    "make_representation": "pamir.features.registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pamir' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next look-up does not come here
    return value


def __dir__():
    # the library's names and the module's own dunders: not this file's helpers (importlib,
    # the `annotations` future, _EXPORTS), which a tab completion would offer as pamir's
    return sorted({*_EXPORTS, *(n for n in globals() if n.startswith("__"))})
