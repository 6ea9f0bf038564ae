"""pamir.storage: atomic writes and the locked JSON update benchmarks share."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat

import pytest

from pamir.storage import atomic_write, atomic_write_bytes, fsync_dir, locked_json_update


def test_atomic_writes_replace_whole_files_with_ordinary_permissions(tmp_path):
    target = tmp_path / "sub" / "a.txt"
    atomic_write_bytes(target, b"first")
    atomic_write_bytes(target, b"second")
    assert target.read_bytes() == b"second"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask  # not mkstemp's 0600
    fsync_dir(target.parent)

    def broken(f):
        f.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(target, broken)
    assert target.read_bytes() == b"second"  # the old file stays whole
    assert [p.name for p in target.parent.iterdir()] == ["a.txt"]  # no temporary left


def _add_keys(path, worker: int, n: int) -> None:
    for i in range(n):
        locked_json_update(path, {f"w{worker}-{i}": {"worker": worker, "i": i}})


def test_locked_json_update_merges_and_loses_no_key(tmp_path):
    path = tmp_path / "results" / "r.json"
    assert locked_json_update(path, {"a": 1}) == {"a": 1}
    assert locked_json_update(path, {"b": [2], "a": 3}) == {"a": 3, "b": [2]}
    assert path.read_text().endswith("\n") and json.loads(path.read_text()) == {"a": 3, "b": [2]}

    # Several processes updating at once: every key of every one of them is kept.
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_add_keys, args=(path, w, 15)) for w in range(3)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(30)
    assert [p.exitcode for p in workers] == [0, 0, 0]
    data = json.loads(path.read_text())
    assert len(data) == 2 + 3 * 15 and data["w2-14"] == {"worker": 2, "i": 14}


def test_locked_json_update_refuses_a_file_that_is_not_an_object(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not an object"):
        locked_json_update(path, {"a": 1})
    assert path.read_text() == "[1, 2]"
