"""The folder sync as a plan: computed from the disk and the catalogue, writing nothing, then
applied by the index's writer."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import pamir.index.sync as sync_module
from pamir.index import Index
from pamir.index.sync import Reuse, plan_update

VOCAB = ["red", "green", "blue", "stripes"]


def colour_transform(paths):
    """A stand-in system: a picture's mean colour as its text-space vector."""
    Z = np.zeros((len(paths), len(VOCAB)), np.float32)
    for i, p in enumerate(paths):
        with Image.open(p) as im:
            Z[i, :3] = np.asarray(im.convert("RGB"), np.float32).mean(axis=(0, 1)) / 255
    return Z, np.ones(len(paths), bool), [None] * len(paths)


def bmp(path: Path, colour) -> Path:
    """An uncompressed picture: every one of a size has the same byte count, so that the
    sync hashes it against the indexed ones (renames, copies, swaps)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (16, 12), colour).save(path)
    return path


@pytest.fixture
def index(tmp_path):
    with Index.create(tmp_path / "idx", VOCAB, np.ones(len(VOCAB))) as ix:
        yield ix


def _rows(index) -> list[tuple]:
    return [(p.id, p.path, p.size, p.mtime_ns, p.hash, p.state) for p in index.pictures()]


def test_a_plan_writes_nothing_and_its_application_is_the_update(tmp_path, index):
    root = tmp_path / "pics"
    for name, colour in [("red", (250, 0, 0)), ("green", (0, 240, 0)),
                         ("blue", (0, 0, 230)), ("purple", (200, 0, 200))]:
        bmp(root / f"{name}.bmp", colour)
    assert index.update([root], colour_transform).added == 4
    ids = {Path(p.path).stem: p.id for p in index.pictures()}
    (root / "red.bmp").rename(root / "scarlet.bmp")                      # renamed
    (root / "copy.bmp").write_bytes((root / "green.bmp").read_bytes())  # copied
    bmp(root / "green.bmp", (0, 0, 255))                                 # changed
    (root / "purple.bmp").unlink()                                       # removed
    os.utime(root / "blue.bmp", ns=(1, 1))                               # touched
    bmp(root / "new.bmp", (9, 9, 9))                                     # added

    before = _rows(index)
    plan = plan_update([root], index.pictures(), exclude=index.directory)
    assert _rows(index) == before  # planning wrote nothing
    assert [(Path(r.entry["path"]).name, r.twin) for r in plan.reused] == [
        ("copy.bmp", None), ("scarlet.bmp", ids["red"])]
    assert [Path(e["path"]).name for e in plan.pictures] == ["green.bmp", "new.bmp"]
    assert plan.removed == [ids["purple"]]
    assert [(i, Path(e["path"]).name) for i, e in plan.touched] == [(ids["blue"], "blue.bmp")]
    assert len(plan.batches()) == 1 and plan.videos == [] and plan.unreadable == []

    r = index.apply(plan, colour_transform)
    assert (r.added, r.changed, r.renamed, r.copied, r.removed, r.unchanged) == (1, 1, 1, 1, 1, 1)
    assert index.picture(ids["red"]).path.endswith("scarlet.bmp")
    assert index.search("blue", k=2)[0].path.endswith(("green.bmp", "blue.bmp"))
    assert index.update([root], colour_transform).unchanged == 5  # nothing left to do


def test_swapped_files_copy_only_from_a_picture_that_still_holds_the_bytes(tmp_path, index):
    """a.bmp and b.bmp swap their bytes: a takes b's vector (b's row still holds them when
    a is written), but a's old row is gone by then, so b is read by the model."""
    root = tmp_path / "pics"
    a, b = bmp(root / "a.bmp", (250, 0, 0)), bmp(root / "b.bmp", (0, 0, 250))
    index.update([root], colour_transform)
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    plan = plan_update([root], index.pictures(), exclude=index.directory)
    assert plan.reused == [Reuse(plan.reused[0].entry)]  # a copy, no twin
    assert plan.reused[0].entry["path"] == str(a)
    assert [e["path"] for e in plan.pictures] == [str(b)]
    r = index.apply(plan, colour_transform)
    assert (r.copied, r.changed, r.failed) == (1, 1, [])
    assert index.search("blue", k=1)[0].path == str(a)
    assert index.search("red", k=1)[0].path == str(b)


def test_an_unreadable_file_is_planned_as_failed_and_recorded_when_applied(
        tmp_path, index, monkeypatch):
    root = tmp_path / "pics"
    bmp(root / "a.bmp", (250, 0, 0))
    index.update([root], colour_transform)
    bmp(root / "b.bmp", (0, 250, 0))  # the size of an indexed picture: hashed when planned
    hash_of = sync_module.file_hash

    def failing(path):
        if Path(path).name == "b.bmp":
            raise PermissionError(13, "Permission denied")
        return hash_of(path)

    monkeypatch.setattr(sync_module, "file_hash", failing)
    plan = plan_update([root], index.pictures(), exclude=index.directory)
    assert [(Path(e["path"]).name, reason) for e, reason in plan.unreadable] == [
        ("b.bmp", "unreadable (Permission denied)")]
    assert [p.state for p in index.pictures()] == ["ok"]  # recorded only when applied
    r = index.apply(plan, colour_transform)
    assert [Path(p).name for p, _ in r.failed] == ["b.bmp"]
    assert index.status()["failed"] == 1


def test_the_sync_never_calls_into_the_index():
    """The sync plans; the writer applies: sync.py imports none of the facade's parts."""
    tree = ast.parse(Path(sync_module.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.level == 1}
    assert imported <= {"catalog", "videos"}, imported
