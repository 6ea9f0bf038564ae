"""The Index as a composition (issue 53): a facade with one base, its parts as members, the
catalogue's modules the only ones that run SQL, and a sync plan that applying leaves as it was.
Read from the source with `ast` where it is about the code's shape."""

from __future__ import annotations

import ast
import copy
import gc
from pathlib import Path

import numpy as np
from PIL import Image

import pamir.index
from pamir.index import Index
from pamir.index.scores import ScoreMatrix
from pamir.index.sync import plan_update

INDEX = Path(pamir.index.__file__).resolve().parent
#: The catalogue's modules and the folder's format: the only ones that may run SQL.
SQL_HOMES = {"layout.py"} | {p.name for p in INDEX.glob("catalog*.py")}
SQL_CALLS = {"execute", "executemany", "executescript"}


def _calls(path: Path) -> set[str]:
    """The attribute names called in a module (x.execute(...) -> "execute")."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.func.attr for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}


def test_only_the_catalogue_runs_sql():
    running = sorted(p.name for p in INDEX.glob("*.py")
                     if p.name not in SQL_HOMES and _calls(p) & SQL_CALLS)
    assert running == []
    # and the finder finds them where they are
    assert _calls(INDEX / "catalog_people.py") >= {"execute", "executemany"}


def test_no_part_reaches_into_the_catalogues_connection():
    reaching = sorted(p.name for p in INDEX.glob("*.py") if p.name not in SQL_HOMES
                      and "_conn" in p.read_text(encoding="utf-8"))
    assert reaching == []


def test_the_index_has_one_base_and_its_parts_are_members(tmp_path):
    assert len(Index.__bases__) == 1
    assert ScoreMatrix.__bases__ == (object,)  # its jobs are members too
    with Index.create(tmp_path / "ix", ["red", "blue"], np.ones(2)) as ix:
        parts = {type(getattr(ix, name)).__name__ for name in vars(ix) if name.startswith("_")}
        assert {"Searcher", "Writer", "People", "Looks", "QueryParser", "FactReader",
                "ScoreMatrix", "Catalog"} <= parts
        # a public method is its part's, with its documentation
        assert Index.search.__doc__ == type(ix._searcher).search.__doc__


def _bmp(path: Path, colour) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 6), colour).save(path)


def _colours(paths):
    Z = np.array([np.asarray(Image.open(p).convert("RGB"), np.float32).mean(axis=(0, 1))[:2]
                  for p in paths], np.float32) / 255
    return Z, np.ones(len(paths), bool), [None] * len(paths)


def test_applying_a_plan_leaves_it_as_it_was(tmp_path):
    """The writer reads each batch's files into copies of the plan's entries and counts into
    a copy of its report: the plan is a value, applied twice to two indexes alike."""
    root = tmp_path / "pics"
    _bmp(root / "red.bmp", (250, 0, 0))
    _bmp(root / "blue.bmp", (0, 0, 250))
    with Index.create(tmp_path / "a", ["red", "blue"], np.ones(2)) as a, \
            Index.create(tmp_path / "b", ["red", "blue"], np.ones(2)) as b:
        plan = plan_update([root], a.pictures())
        before = copy.deepcopy(plan)
        first = a.apply(plan, _colours)
        assert plan == before
        assert first.added == 2 and plan.report.added == 0
        assert b.apply(plan, _colours).as_dict() == first.as_dict()
        assert [p.hash for p in a.pictures()] == [p.hash for p in b.pictures()]
        assert all(e["hash"] is None for e in plan.pictures)  # read by the writer, not here


def test_an_index_dropped_unclosed_lets_go_of_its_folder_at_once(tmp_path):
    """Its parts hold it weakly: no reference cycle keeps its catalogue and writer lock until
    the garbage collector runs, so the next writer opens it at once."""
    gc.disable()
    try:
        ix = Index.create(tmp_path / "ix", ["red", "blue"], np.ones(2))
        assert ix.search("red", k=1) == []
        del ix
        Index.open(tmp_path / "ix", writable=True).close()
    finally:
        gc.enable()
