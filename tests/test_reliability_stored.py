"""Stored files (issue 15): a damaged, tampered or foreign model gets a clear message naming
the file, never a traceback and never code run from it; and no code path of pamir loads a
pickle."""

from __future__ import annotations

import ast
import io
import json
import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import pamir
from pamir.cli import app

runner = CliRunner()
PACKAGE = Path(pamir.__file__).resolve().parent


class Boom:
    """Unpickling this would run code: the test fails if it ever does."""

    def __reduce__(self):
        return (Path("/nonexistent-pamir-pickle-ran").mkdir, ())


def _truncate(f: Path, keep: float = 0.5):
    f.write_bytes(f.read_bytes()[: int(f.stat().st_size * keep)])


def _flip(f: Path):
    b = bytearray(f.read_bytes())
    for i in range(len(b) // 3, len(b) // 3 + 64):
        b[i] ^= 0x5A
    f.write_bytes(bytes(b))


def _pickle_as_npz(f: Path):
    f.write_bytes(pickle.dumps({"idf": Boom()}))


def _npz_with_pickled_member(f: Path):
    with zipfile.ZipFile(f, "w") as z:
        buf = io.BytesIO()
        np.save(buf, np.array([Boom()], dtype=object), allow_pickle=True)
        z.writestr("idf.npy", buf.getvalue())


def _single_npy(f: Path):
    buf = io.BytesIO()
    np.save(buf, np.arange(4))
    f.write_bytes(buf.getvalue())


def _missing_array(f: Path):
    with np.load(f, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k != "idf"}
    with open(f, "wb") as out:
        np.savez(out, **arrays)


def _json_truncated(f: Path):
    _truncate(f, 0.6)


def _json_not_object(f: Path):
    f.write_text("[1, 2, 3]")


def _json_newer(f: Path):
    meta = json.loads(f.read_text())
    meta["format_version"] = 999
    f.write_text(json.dumps(meta))


def _json_missing_key(f: Path):
    meta = json.loads(f.read_text())
    del meta["vocabulary"]
    f.write_text(json.dumps(meta))


def _json_binary(f: Path):
    f.write_bytes(b"\xff\xfe\x00garbage\x80")


def _json_deep(f: Path):
    f.write_text("[" * 100_000 + "]" * 100_000)


TAMPERINGS = {
    "arrays.npz": [_truncate, _flip, _pickle_as_npz, _npz_with_pickled_member, _single_npy,
                   _missing_array, lambda f: f.write_bytes(b""), lambda f: f.unlink()],
    "model.json": [_json_truncated, _json_not_object, _json_newer, _json_missing_key,
                   _json_binary, _json_deep, lambda f: f.write_bytes(b"")],
}
CASES = [(name, fn) for name, fns in TAMPERINGS.items() for fn in fns]


@pytest.mark.parametrize("name,tamper", CASES,
                         ids=[f"{n}-{getattr(f, '__name__', 'x').strip('_')}{i}"
                              for i, (n, f) in enumerate(CASES)])
def test_a_damaged_model_gets_a_clear_message(tiny_system, tmp_path, name, tamper):
    """`pamir index` and `pamir annotate` with a damaged model: exit 2, `error:` and the
    file named, no traceback, no pickle run; System.load raises ValueError or
    FileNotFoundError (what the commands turn into that message)."""
    from pamir.system import System

    _, model0, pictures, _ = tiny_system
    model = tmp_path / "model"
    shutil.copytree(model0, model)
    tamper(model / name)
    with pytest.raises((ValueError, FileNotFoundError)) as e:
        System.load(model, progress=False)
    assert str(model) in str(e.value)
    for argv in (["index", model, pictures, "--index", tmp_path / "ix"],
                 ["annotate", model, pictures / "p000.png"]):
        r = runner.invoke(app, [str(a) for a in argv])
        assert r.exit_code == 2, (r.output, r.exception)
        assert "error:" in r.output and "Traceback" not in r.output
        assert str(model.name) in r.output.replace("\n", "")
    assert not Path("/nonexistent-pamir-pickle-ran").exists()


def test_a_newer_format_is_named_as_such(tiny_system, tmp_path):
    from pamir.models.base import load_directory

    model = tmp_path / "model"
    shutil.copytree(tiny_system[1], model)
    _json_newer(model / "model.json")
    with pytest.raises(ValueError, match="newer pamir"):
        load_directory(model)


def test_a_model_swapped_for_a_pickle_file_is_refused_before_reading(tmp_path):
    """A model *folder* that is a file, or a folder with other files, is never replaced."""
    from pamir.models.base import save_directory

    f = tmp_path / "model"
    f.write_bytes(pickle.dumps(Boom()))
    with pytest.raises(FileExistsError, match="is a file"):
        save_directory(f, {}, {"a": np.arange(2)})
    d = tmp_path / "mine"
    d.mkdir()
    (d / "holiday.jpg").write_bytes(b"x")
    with pytest.raises(FileExistsError, match="not a pamir model"):
        save_directory(d, {}, {"a": np.arange(2)})
    assert (d / "holiday.jpg").exists()


# ----------------------------------------------------------------------------- no pickles
PICKLE_CALLS = {
    ("pickle", "load"), ("pickle", "loads"), ("pickle", "Unpickler"),
    ("cPickle", "load"), ("cPickle", "loads"), ("dill", "load"), ("dill", "loads"),
    ("joblib", "load"), ("cloudpickle", "load"), ("cloudpickle", "loads"),
    ("pd", "read_pickle"), ("pandas", "read_pickle"),
    ("shelve", "open"), ("marshal", "loads"), ("marshal", "load"),
}


#: np.load refuses pickles unless told otherwise (numpy >= 1.16.3): a call that leaves
#: allow_pickle out is safe as long as that stays the default, which this checks.
NP_LOAD_DEFAULT = __import__("inspect").signature(np.load).parameters["allow_pickle"].default


def _calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def _name(func) -> tuple[str, str] | None:
    if isinstance(func, ast.Attribute):
        base = func.value
        if isinstance(base, ast.Name):
            return base.id, func.attr
        if isinstance(base, ast.Attribute):
            return base.attr, func.attr
    if isinstance(func, ast.Name):
        return "", func.id
    return None


def pickle_findings(root: Path = PACKAGE) -> list[str]:
    """Every place in the package that could load a pickle: pickle/joblib/dill/torch loads,
    any allow_pickle=True (or not a literal False), np.load without allow_pickle=False,
    and imports of pickle-loading modules."""
    out = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root.parent)
        text = f.read_text(encoding="utf-8")
        tree = ast.parse(text, str(f))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                        else [node.module or ""])
                names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
                for m in mods:
                    if m.split(".")[0] in ("pickle", "cPickle", "dill", "cloudpickle",
                                           "shelve", "marshal", "joblib"):
                        if not (m == "joblib" and set(names) <= {"Parallel", "delayed",
                                                                 "cpu_count"}):
                            out.append(f"{rel}:{node.lineno}: imports {m}")
        for call in _calls(tree):
            name = _name(call.func)
            kw = {k.arg: k.value for k in call.keywords if k.arg}
            if "allow_pickle" in kw:
                v = kw["allow_pickle"]
                if not (isinstance(v, ast.Constant) and v.value is False):
                    out.append(f"{rel}:{call.lineno}: allow_pickle={ast.unparse(v)}")
            if name in PICKLE_CALLS:
                out.append(f"{rel}:{call.lineno}: {'.'.join(name)}")
            if name and name[1] == "load" and name[0] in ("np", "numpy") \
                    and "allow_pickle" not in kw and NP_LOAD_DEFAULT is not False:
                out.append(f"{rel}:{call.lineno}: np.load relies on a default that allows "
                           "pickles")
            if name and name[1] == "load" and name[0] == "torch" \
                    and not (isinstance(kw.get("weights_only"), ast.Constant)
                             and kw["weights_only"].value is True):
                out.append(f"{rel}:{call.lineno}: torch.load without weights_only=True")
        for needle in ("allow_pickle=True", "pickle.load", "joblib.load", "read_pickle"):
            for lineno, line in enumerate(text.splitlines(), 1):
                code = line.split("#", 1)[0]
                if needle in code and not code.strip().startswith(('"', "'")):
                    out.append(f"{rel}:{lineno}: {needle}")
    return sorted(set(out))


def test_no_code_path_loads_a_pickle():
    findings = pickle_findings()
    assert not findings, "pamir must never load a pickle:\n" + "\n".join(findings)


def test_the_pickle_guard_catches_what_it_should(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "bad.py").write_text(
        "import pickle\nimport numpy as np\n"
        "a = np.load('x.npy')\n"
        "import torch\n"
        "m = torch.load('w.pt')\n"
        "b = np.load('x.npy', allow_pickle=True)\n"
        "c = pickle.loads(b'')\n"
        "flag = True\n"
        "d = np.load('x.npz', allow_pickle=flag)\n")
    (pkg / "good.py").write_text("import numpy as np\na = np.load('x', allow_pickle=False)\n")
    found = pickle_findings(pkg)
    assert any("imports pickle" in f for f in found)
    assert NP_LOAD_DEFAULT is False
    assert any("allow_pickle=True" in f for f in found)
    assert any("allow_pickle=flag" in f for f in found)
    assert any("pickle.loads" in f for f in found)
    assert any("torch.load without weights_only" in f for f in found)
    assert not any("good.py" in f for f in found)
