"""The models: PAMIR and those it is compared with, all on one fit/transform contract."""

from __future__ import annotations

import importlib

from ..extras import optional
from .base import TextSpaceModel, load_directory

#: kind -> "module:Class". Modules are imported on demand (torch only for BBNN).
MODELS = {
    "pamir": "pamir.models.pamir:PAMIR",
    "kernel-pamir": "pamir.models.kernel_pamir:KernelPAMIR",
    "cmrm": "pamir.models.cmrm:CMRM",
    "cmtt": "pamir.models.cmtt:CMTT",
    "plsa": "pamir.models.plsa:PLSA",
    "svm": "pamir.models.svm:WordSVM",
    "bbnn": "pamir.models.bbnn:BBNN",
}


def model_class(kind: str) -> type[TextSpaceModel]:
    if kind not in MODELS:
        raise ValueError(f"unknown model {kind!r}; choose one of {', '.join(MODELS)}")
    module, _, name = MODELS[kind].partition(":")
    with optional():  # BBNN needs torch: the [cnn] extra
        return getattr(importlib.import_module(module), name)


def load_model(path) -> TextSpaceModel:
    """Load any saved model directory, dispatching on the kind in its model.json."""
    head, _ = load_directory(path)
    return model_class(head["kind"]).load(path)
