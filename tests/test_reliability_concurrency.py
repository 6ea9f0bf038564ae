"""Concurrency (issue 15): readers (searches, `pamir serve`) keep answering consistently while
a writer adds and removes pictures; a second writer is refused with the holder named; a lock
left by a killed writer is recovered.

The writer is another process adding and dropping pictures through the Index API with vectors
known in advance (a function of the picture's path), so a reader can check every answer it
gets exactly: a hit's score is its picture's vector . q, its path is a picture that some
committed state held, and the scores are in order. Bounded: a few seconds of writing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import pamir_command_raw
from fakes import name_vector

T = 12
VOCAB = [f"w{t}" for t in range(T)]
SECONDS = float(os.environ.get("PAMIR_RELIABILITY_CONCURRENCY_SECONDS", "4"))


def vector_of(path: str) -> np.ndarray:
    """The vector the writer stores for a picture: a function of its name only."""
    return name_vector(path, T)


WRITER = r'''
import sys, time, numpy as np
from pathlib import Path
sys.path.insert(0, {tests!r})
from fakes import name_vector
from pamir.index import Index
ix = Index.open({ix!r}, writable=True)
print("writing", flush=True)
end = time.time() + {seconds}
r = 0
ids = {{}}
while time.time() < end:
    paths = [f"/nowhere/r{{r}}-{{j}}.png" for j in range(7 + r % 5)]
    entries = [{{"path": p, "size": 1, "mtime_ns": r, "hash": f"{{r}}-{{j}}"}}
               for j, p in enumerate(paths)]
    ids[r] = ix.add(entries, np.stack([name_vector(p, {T}) for p in paths]))
    if r >= 3:
        ix.remove(ids.pop(r - 3))
    r += 1
ix.close()
print("rounds", r, flush=True)
'''


def start_writer(ix: Path, seconds: float):
    code = WRITER.format(tests=str(Path(__file__).parent), ix=str(ix), seconds=seconds, T=T)
    p = pamir_command_raw(code, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "writing", p.stderr.read()
    return p


@pytest.fixture
def index_dir(tmp_path):
    from pamir.index import Index

    ix = tmp_path / "ix"
    Index.create(ix, VOCAB, np.ones(T)).close()
    return ix


def check_hits(hits, q: np.ndarray, k: int) -> None:
    scores = [h.score if hasattr(h, "score") else h["score"] for h in hits]
    paths = [h.path if hasattr(h, "path") else h["path"] for h in hits]
    assert len(set(paths)) == len(paths), "a picture twice in one answer"
    assert scores == sorted(scores, reverse=True)
    for p, s in zip(paths, scores):
        assert s == pytest.approx(float(vector_of(p) @ q), rel=1e-5, abs=1e-6), p
    assert len(hits) <= k


def _stale_reader_fails(tmp_path) -> str:
    """'' if a reader whose picture was removed by another process since its last refresh
    still answers; else the error it gets (the bug the strict xfail below pins)."""
    from pamir.index import Index

    ix = tmp_path / "stale"
    with Index.create(ix, VOCAB, np.ones(T)) as w:
        paths = [f"/nowhere/r0-{j}.png" for j in range(3)]
        ids = w.add([{"path": p, "size": 1, "mtime_ns": 1, "hash": p} for p in paths],
                    np.stack([vector_of(p) for p in paths]))
    reader = Index.open(ix)
    with Index.open(ix, writable=True) as w:  # another writer commits after the refresh
        w.remove(ids[:1])
    try:
        reader.search(reader.parse_query("w1", mapping=False), 3)
        return ""
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    finally:
        reader.close()


def test_a_search_racing_a_removal_answers(tmp_path):
    why = _stale_reader_fails(tmp_path)
    assert not why, why


def test_readers_never_see_a_torn_state(index_dir, tmp_path):
    """Searches through the Index API and through the HTTP API (each request refreshes)
    while another process adds and removes pictures: every answer is exact for its
    pictures, no request fails, and the readers see the writer's progress. While the race
    pinned above is not fixed, its KeyError (500) is counted and reported, not failed on:
    every other error, and any wrong answer, fails."""
    from fastapi.testclient import TestClient

    from pamir.index import Index
    from pamir.server import create_app

    known = _stale_reader_fails(tmp_path)
    writer = start_writer(index_dir, SECONDS)
    errors, answers, seen, tolerated = [], [0], set(), []
    reader = Index.open(index_dir)
    app = create_app(index_dir, warm_mapping=False)

    def api_reader(client):
        rng = np.random.default_rng(1)
        while writer.poll() is None:
            t = int(rng.integers(T))
            r = client.get("/api/search", params={"q": VOCAB[t], "k": 20})
            if r.status_code != 200:
                if known and r.status_code == 500:
                    tolerated.append(r.status_code)
                else:
                    errors.append((r.status_code, r.text[:300]))
                continue
            q = np.zeros(T, np.float32)
            q[t] = 1.0
            try:
                check_hits(r.json()["hits"], q, 20)
            except AssertionError as e:
                errors.append(("api", str(e)[:300]))
            answers[0] += 1

    with TestClient(app, raise_server_exceptions=False) as client:
        threads = [threading.Thread(target=api_reader, args=(client,)) for _ in range(2)]
        for th in threads:
            th.start()
        rng = np.random.default_rng(0)
        while writer.poll() is None:
            try:
                reader.refresh()
                t = int(rng.integers(T))
                q = np.zeros(T, np.float32)
                q[t] = 1.0
                hits = reader.search(reader.parse_query(VOCAB[t], mapping=False), 20)
                check_hits(hits, q, 20)
                seen.update(h.path for h in hits)
                answers[0] += 1
            except KeyError as e:
                if not known:
                    errors.append(("index", f"KeyError: {e}"))
                tolerated.append("KeyError")
            except Exception as e:  # noqa: BLE001 - every failure is a finding
                errors.append(("index", f"{type(e).__name__}: {e}"[:300]))
        for th in threads:
            th.join()
    reader.close()
    out, err = writer.communicate(timeout=30)
    assert writer.returncode == 0, err
    from conftest import record

    record("concurrency", {"seconds": SECONDS, "writer_rounds": int(out.split()[-1]),
                           "exact_answers": answers[0], "wrong_answers": len(errors),
                           "torn_read_errors_known_bug": len(tolerated)})
    assert not errors, f"{len(errors)} of {answers[0] + len(errors)} answers wrong: {errors[:5]}"
    assert answers[0] > 20 and len(seen) > 10


def _hold_lock(ix: Path):
    code = ("import sys, time\nfrom pamir.index import Index\n"
            f"ix = Index.open({str(ix)!r}, writable=True)\nprint('held', flush=True)\n"
            "time.sleep(600)\n")
    p = pamir_command_raw(code, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held", p.stderr.read()
    return p


def test_a_second_writer_is_refused_naming_the_holder_and_a_dead_ones_lock_recovered(
        index_dir, tiny_system):
    from pamir.cli import app
    from pamir.index import Index, IndexDirError

    holder = _hold_lock(index_dir)
    try:
        with pytest.raises(IndexDirError) as e:
            Index.open(index_dir, writable=True)
        assert f"pid {holder.pid}" in str(e.value) and "another `pamir index`" in str(e.value)
        _, model, pictures, _ = tiny_system
        r = CliRunner().invoke(app, ["index", str(model), str(pictures), "--index",
                                     str(index_dir)])
        assert r.exit_code == 2 and f"pid {holder.pid}" in r.output.replace("\n", "")
        Index.open(index_dir).close()  # readers are never refused
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # a writer killed while holding the lock
        holder.wait(timeout=30)
    with Index.open(index_dir, writable=True) as ix:  # the kernel released it: recovered
        ix.add([{"path": "/nowhere/r0-0.png", "size": 1, "mtime_ns": 1, "hash": "x"}],
               vector_of("/nowhere/r0-0.png")[None, :])
    assert f"pid {os.getpid()}" in (index_dir / ".writer.lock").read_text()
    with Index.open(index_dir) as ix:
        assert len(ix) == 1


def test_a_killed_pamir_index_leaves_a_lock_the_next_run_takes(tiny_system, fork_server,
                                                               tmp_path):
    """The real command: killed mid-run while holding the lock, then run again."""
    from pictures import coloured_pictures

    _, model, _, _ = tiny_system
    pictures = tmp_path / "pictures"
    coloured_pictures(pictures, n=30, seed=9)
    ix = tmp_path / "ix"
    status, _ = fork_server.run(["index", model, pictures, "--index", ix, "--batch", "5"],
                                kill_after=1.0)
    status, log = fork_server.run(["index", model, pictures, "--index", ix, "--batch", "5"])
    assert status == 0, log
    assert "31 pictures indexed" in log or "30 pictures indexed" in log


@pytest.fixture
def read_only(index_dir, tmp_path):
    """The index folder, read-only: a read-only bind mount (root ignores permissions), or
    permissions for another user."""
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() == 0:
        r = subprocess.run(["mount", "--bind", "-o", "ro", str(index_dir), str(ro)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot make a read-only bind mount here: {r.stderr.strip()}")
    else:
        os.rmdir(ro)
        ro = index_dir
        os.chmod(ro, 0o555)
    yield ro
    if os.geteuid() == 0:
        subprocess.run(["umount", str(ro)], check=False)
    else:
        os.chmod(ro, 0o755)


def test_a_read_only_index_folder_gets_a_clear_message(read_only, tiny_system):
    """Writing into a read-only index: exit 2 and an error naming the folder, no traceback."""
    from pamir.cli import app
    from pamir.index import Index, IndexDirError

    with pytest.raises((IndexDirError, OSError)) as e:
        Index.open(read_only, writable=True)
    assert str(read_only) in str(e.value)
    _, model, pictures, _ = tiny_system
    r = CliRunner().invoke(app, ["index", str(model), str(pictures), "--index", str(read_only)])
    assert r.exit_code == 2 and "error:" in r.output, (r.output, r.exception)
    assert "Traceback" not in r.output and "ro" in r.output


def test_a_read_only_index_can_be_searched(read_only):
    from pamir.index import Index

    with Index.open(read_only) as ix:
        assert len(ix) == 0
