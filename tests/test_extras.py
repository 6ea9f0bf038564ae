"""Optional extras (pyproject.toml, pamir.extras): a base install opens and searches an index;
a missing optional package is a message naming the extra that installs it. Packages are
"uninstalled" by blocking their import (None in sys.modules), in a child process where the
process must not have imported them already."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from pamir.extras import EXTRAS, MissingExtra, extra_of, optional
from pamir.index import Index

ROOT = Path(__file__).resolve().parents[1]
EVERY_EXTRA = sorted({m for modules in EXTRAS.values() for m in modules})


def run_without(modules, *argv, code=None):
    """`pamir ARGV` (or python `code`) in a child process where `modules` cannot be imported."""
    body = code or f"import sys; sys.argv = ['pamir', *{list(map(str, argv))!r}]\n" \
                   "from pamir.cli import main\nmain()"
    script = f"import sys\nfor m in {list(modules)!r}:\n    sys.modules[m] = None\n{body}"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_every_extra_is_in_pyproject_and_dev_installs_them_all():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert set(EXTRAS) | {"all", "dev"} == set(extras)
    assert extras["all"] == [f"pamir[{','.join(EXTRAS)}]"] and "pamir[all]" in extras["dev"]
    base = " ".join(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "dependencies"])
    for heavy in ("torch", "fastapi", "uvicorn", "dask", "sentence-transformers", "onnx"):
        assert heavy not in base


def test_a_base_install_opens_and_searches_an_index(tmp_path):
    with Index.create(tmp_path / "idx", ["red", "green", "stripes"], np.ones(3)) as ix:
        Z = np.array([[1, 0, 1], [0, 1, 0], [1, 0, 0]], np.float32)
        ix.add([{"path": f"/p/{i}.png", "size": 1, "mtime_ns": 1, "hash": f"h{i}"}
                for i in range(3)], Z)
    done = run_without(EVERY_EXTRA, "search", "red stripes", "--index", tmp_path / "idx",
                       "--json")
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)["hits"]
    assert [Path(h["path"]).name for h in hits[:2]] == ["0.png", "2.png"]


def test_a_missing_extra_is_named_by_the_command(tmp_path):
    done = run_without(["uvicorn", "fastapi"], "serve", "--index", tmp_path / "idx")
    assert done.returncode == 2
    assert "pip install 'pamir[server]'" in done.stderr and "Traceback" not in done.stderr


def test_a_missing_extra_is_named_by_the_library():
    done = run_without(["torch"], code="from pamir.models import model_class\n"
                                       "model_class('bbnn')")
    assert "MissingExtra: torch is not installed" in done.stderr
    assert "pip install 'pamir[cnn]'" in done.stderr


def test_make_representation_says_it_before_any_work(monkeypatch):
    from pamir.features.registry import make_representation

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(MissingExtra, match=r"pamir\[cnn\]") as e:
        make_representation("cnn+visterms")
    assert e.value.extra == "cnn" and isinstance(e.value, ImportError)


def test_dask_without_its_extra(monkeypatch):
    from pamir.distributed import dask_client

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(MissingExtra, match=r"pamir\[dask\]"):
        with dask_client(workers=1):
            pass


def test_other_import_errors_pass_unchanged():
    assert extra_of("torch.nn") == "cnn" and extra_of("numpy") is None
    with pytest.raises(ModuleNotFoundError, match="no_such_module"):
        with optional():
            import no_such_module  # noqa: F401
