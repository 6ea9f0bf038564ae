"""Crash safety (issue 15): `pamir index`, `pamir fit -o`, `pamir learn` and the feature cache
killed with SIGKILL at random moments, then run again.

Each run is a real `pamir` process (a fork of one that imported pamir once, so a kill costs
milliseconds of start-up, not seconds): the kill lands anywhere in it, from loading the model
to the last commit. After each kill a rerun must complete, and then the SQLite catalogue passes
`integrity_check`, every picture is indexed exactly once, the scores are those of an index
built without interruption, and no temporary file is left behind.

Bounded for CI (20 index kills over 36 small pictures, batches of 6; a few fit and learn
kills); benchmarks/bench_reliability.py runs the same tests with more kills through the
environment knobs below, and collects what they record.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import fit_argv, index_vectors, pamir_command_raw, record, same_model
from pictures import coloured_pictures

INDEX_KILLS = int(os.environ.get("PAMIR_RELIABILITY_INDEX_KILLS", "20"))
FIT_KILLS = int(os.environ.get("PAMIR_RELIABILITY_FIT_KILLS", "4"))
LEARN_KILLS = int(os.environ.get("PAMIR_RELIABILITY_LEARN_KILLS", "3"))
PICTURES = int(os.environ.get("PAMIR_RELIABILITY_PICTURES", "36"))
SEED = int(os.environ.get("PAMIR_RELIABILITY_SEED", "15"))


# ------------------------------------------------------------------------------ checks
INDEX_FILES = {"catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm", ".writer.lock",
               "progress.json"}


def check_index(ix: Path, reference: dict[str, np.ndarray]) -> None:
    """The four promises of a crashed-then-rerun index."""
    from pamir.index import Index

    con = sqlite3.connect(f"file:{ix / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()
    with Index.open(ix) as index:
        pictures = index.pictures()
        paths = [p.path for p in pictures]
        assert len(paths) == len(set(paths)), "a picture indexed twice"
        assert sorted(paths) == sorted(reference), "pictures missing or extra"
        assert all(p.state == "ok" for p in pictures)
        cols = [p.col for p in pictures]
        assert len(set(cols)) == len(cols), "two pictures share a score column"
        assert len(index) == len(reference)
        for p in pictures:
            np.testing.assert_allclose(index.vector(p.id), reference[p.path], rtol=1e-5,
                                       atol=1e-6, err_msg=p.path)
    left = leftovers(ix)
    assert not left, f"temporary files left behind: {left}"


def leftovers(ix: Path) -> list[str]:
    """Files in and beside an index folder that a finished index should not hold: temporary
    files, folders made aside, and any generation of a numbered file (`scores-N.f32`) but
    the current one."""
    import re

    bad, families = [], {}
    for p in ix.iterdir():
        m = re.fullmatch(r"([a-z]+)-(\d+)\.(\w+)", p.name)
        if m:
            families.setdefault((m[1], m[3]), []).append((int(m[2]), p.name))
        elif p.name not in INDEX_FILES and p.name != "thumbnails":
            bad.append(p.name)
    for generations in families.values():
        bad += [name for _, name in sorted(generations)[:-1]]
    bad += [f"../{p.name}" for p in ix.parent.glob(f".{ix.name}.*")]
    return sorted(bad)


def run_index(fork_server, model, pictures, ix, kill_after=None, **env):
    return fork_server.run(["index", model, pictures, "--index", ix, "--batch", "6"],
                           kill_after=kill_after, env=env)


# ------------------------------------------------------------------------------ pamir index
def test_index_killed_at_random_moments_then_rerun(tiny_system, fork_server, tmp_path):
    _, model, _, _ = tiny_system
    pictures = tmp_path / "pictures"
    coloured_pictures(pictures, n=PICTURES, seed=3)
    (pictures / "captions.tsv").unlink()
    ref = tmp_path / "reference"
    t0 = time.perf_counter()
    status, log = run_index(fork_server, model, pictures, ref)
    full = time.perf_counter() - t0
    assert status == 0, log
    reference = index_vectors(ref)
    assert len(reference) == PICTURES

    rng = random.Random(SEED)
    killed, finished_first = 0, 0
    kill_times = []
    for i in range(INDEX_KILLS):
        ix = tmp_path / f"ix{i}"
        at = rng.uniform(0.0, full)
        status, _ = run_index(fork_server, model, pictures, ix, kill_after=at)
        if status == -signal.SIGKILL:
            killed += 1
            kill_times.append(round(at, 3))
        else:
            finished_first += 1  # the kill came after the end: still checked
        # half the time a second kill during the resumed run
        if i % 2 and ix.exists():
            status, _ = run_index(fork_server, model, pictures, ix,
                                  kill_after=rng.uniform(0.0, full / 2))
            killed += status == -signal.SIGKILL
        status, log = run_index(fork_server, model, pictures, ix)
        assert status == 0, log
        check_index(ix, reference)
    record("index_kills", {"pictures": PICTURES, "batch": 6, "runs": INDEX_KILLS,
                           "kills_landed": killed, "uninterrupted_seconds": round(full, 2),
                           "finished_before_kill": finished_first, "all_checks_passed": True})
    assert killed >= INDEX_KILLS * 0.75  # the kills were spread over the run, not after it


def test_index_killed_while_removing_and_adding(tiny_system, fork_server, tmp_path):
    """An update that drops and adds pictures, killed: the rerun gives exactly the new set."""
    _, model, _, _ = tiny_system
    pictures = tmp_path / "pictures"
    coloured_pictures(pictures, n=24, seed=4)
    ix = tmp_path / "ix"
    assert run_index(fork_server, model, pictures, ix)[0] == 0
    ref = tmp_path / "reference"
    rng = random.Random(SEED + 1)
    for round_ in range(3):
        for p in sorted(pictures.glob("p*.png"))[round_::4]:
            p.unlink()
        coloured_pictures(pictures / f"new{round_}", n=8, seed=10 + round_)
        status, _ = run_index(fork_server, model, pictures, ix, kill_after=rng.uniform(0.1, 0.8))
        assert run_index(fork_server, model, pictures, ix)[0] == 0
        if ref.exists():
            import shutil

            shutil.rmtree(ref)
        assert run_index(fork_server, model, pictures, ref)[0] == 0
        check_index(ix, index_vectors(ref))


def test_index_killed_while_creating_leaves_no_half_made_folder(tiny_system, tmp_path):
    """A kill inside Index.create, after its folder is made aside: the rerun completes, and
    the aside folder `.NAME.creating-PID` of the dead process is gone."""
    _, model, pictures, _ = tiny_system
    ix = tmp_path / "ix"
    code = (
        "import os, signal\n"
        "import pamir.index as ix\n"
        "real = ix.Catalog.create\n"
        "def create(*a, **k):\n"
        "    real(*a, **k); os.kill(os.getpid(), signal.SIGKILL)\n"
        "ix.Catalog.create = create\n"
        "from pamir.cli import main\n"
        f"import sys; sys.argv = ['pamir', 'index', {str(model)!r}, {str(pictures)!r}, "
        f"'--index', {str(ix)!r}]\n"
        "main()\n")
    p = pamir_command_raw(code, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.communicate(timeout=120)[0]
    assert p.returncode == -signal.SIGKILL, out
    assert not ix.exists()
    rerun = pamir_command_raw(
        f"from pamir.cli import main; import sys; sys.argv = ['pamir', 'index', "
        f"{str(model)!r}, {str(pictures)!r}, '--index', {str(ix)!r}]; main()",
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = rerun.communicate(timeout=120)[0]
    assert rerun.returncode == 0, out
    stale = [p.name for p in tmp_path.glob(".ix.creating-*")]
    assert not stale, f"left beside the index: {stale}"


# ------------------------------------------------------------------------------ pamir fit -o
def test_fit_over_a_model_killed_at_random_moments(tiny_system, fit_table, fork_server,
                                                   tmp_path):
    """`pamir fit -o MODEL` over an existing model, with a cold feature cache, killed: MODEL
    stays a whole, loadable model (the old or the new one, never a mix) and the rerun gives
    the model an uninterrupted fit gives; no temporary file is left in the cache or beside
    the model."""
    from pamir.system import System

    old_model = tiny_system[1]
    ref = tmp_path / "reference"
    t0 = time.perf_counter()
    status, log = fork_server.run(fit_argv(fit_table, ref),
                                  env={"PAMIR_CACHE": str(tmp_path / "ref-cache")})
    full = time.perf_counter() - t0
    assert status == 0, log
    rng = random.Random(SEED + 2)
    landed = 0
    for i in range(FIT_KILLS):
        out, cache = tmp_path / f"model{i}", tmp_path / f"cache{i}"
        import shutil

        shutil.copytree(old_model, out)
        env = {"PAMIR_CACHE": str(cache)}
        status, _ = fork_server.run(fit_argv(fit_table, out), env=env,
                                    kill_after=rng.uniform(0.0, full))
        landed += status == -signal.SIGKILL
        System.load(out, progress=False)  # whole: old or new
        assert same_model(out, old_model) or same_model(out, ref)
        status, log = fork_server.run(fit_argv(fit_table, out), env=env)
        assert status == 0, log
        assert same_model(out, ref), "the rerun's model is not an uninterrupted fit's"
        assert sorted(p.name for p in out.iterdir()) == ["arrays.npz", "model.json"]
        beside = [p.name for p in tmp_path.glob(f".{out.name}.*")]
        assert not beside, f"left beside the model: {beside}"
        temps = [str(p) for p in cache.rglob(".tmp-*")]
        assert not temps, f"temporary files left in the feature cache: {temps}"
    record("fit_kills", {"pictures": 24, "runs": FIT_KILLS, "kills_landed": landed,
                         "uninterrupted_seconds": round(full, 2), "all_checks_passed": True})


@pytest.mark.parametrize("moment", ["after_exchange", "between_renames"])
def test_model_save_killed_at_its_most_delicate_moment(tmp_path, moment):
    """The kill a random moment rarely hits: inside the swap itself. The model at the path
    stays loadable, and the next save removes what the killed one left."""
    from pamir.models.base import load_directory, save_directory

    model = tmp_path / "model"
    save_directory(model, {"kind": "x", "v": 1}, {"a": np.arange(3)})
    code = (
        "import os, signal, numpy as np\n"
        "import pamir.models.base as b\n"
        f"moment = {moment!r}\n"
        "real = b._exchange\n"
        "def exchange(x, y):\n"
        "    if moment == 'between_renames':\n"
        "        from pathlib import Path\n"
        "        real_rename = Path.rename\n"
        "        def rename(self, target):\n"
        "            real_rename(self, target); os.kill(os.getpid(), signal.SIGKILL)\n"
        "        Path.rename = rename\n"
        "        return False\n"
        "    real(x, y); os.kill(os.getpid(), signal.SIGKILL)\n"
        "b._exchange = exchange\n"
        f"b.save_directory({str(model)!r}, {{'kind': 'x', 'v': 2}}, {{'a': np.arange(4)}})\n")
    p = pamir_command_raw(code, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.communicate(timeout=60)[0]
    assert p.returncode == -signal.SIGKILL, out
    meta, arrays = load_directory(model)  # whole: the old one or the new one
    assert (meta["v"], len(arrays["a"])) in ((1, 3), (2, 4))
    save_directory(model, {"kind": "x", "v": 3}, {"a": np.arange(5)})
    assert load_directory(model)[0]["v"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


# ------------------------------------------------------------------------------ pamir learn
def test_learn_killed_at_random_moments(tiny_system, fork_server, tmp_path):
    """`pamir learn MODEL CAPTIONS --index IX` killed: MODEL stays loadable, the rerun
    completes, and the index it rescored is whole (integrity, each picture once, its scores
    those of the model the run saved)."""
    import shutil

    from pamir.system import System

    _, model0, pictures, _ = tiny_system
    new = tmp_path / "new"
    table = coloured_pictures(new, n=8, seed=7)
    text = table.read_text().replace("stripes", "stripes zebra")  # a new word too
    table.write_text(text)
    def learn_argv(model, ix):
        return ["learn", model, table, "--index", ix, "--updates", "400"]

    # kill times drawn within an uninterrupted run's length (its rescoring reads the cache
    # `pamir index` filled, so a fixed 0-3 s window mostly fell after it had ended)
    model, ix = tmp_path / "model-timed", tmp_path / "ix-timed"
    shutil.copytree(model0, model)
    assert run_index(fork_server, model, pictures, ix)[0] == 0
    t0 = time.perf_counter()
    status, log = fork_server.run(learn_argv(model, ix))
    full = time.perf_counter() - t0
    assert status == 0, log
    rng = random.Random(SEED + 3)
    landed = 0
    for i in range(LEARN_KILLS):
        model, ix = tmp_path / f"model{i}", tmp_path / f"ix{i}"
        shutil.copytree(model0, model)
        assert run_index(fork_server, model, pictures, ix)[0] == 0
        argv = learn_argv(model, ix)
        status, _ = fork_server.run(argv, kill_after=rng.uniform(0.0, full))
        landed += status == -signal.SIGKILL
        System.load(model, progress=False)
        status, log = fork_server.run(argv)
        assert status == 0, log
        system = System.load(model, progress=False)
        reference = dict(zip(*_transform_all(system, ix)))
        check_index(ix, reference)
        beside = [p.name for p in tmp_path.glob(f".{model.name}.*")]
        assert not beside, f"left beside the model: {beside}"
    record("learn_kills", {"runs": LEARN_KILLS, "kills_landed": landed,
                           "uninterrupted_seconds": round(full, 2), "all_checks_passed": True})


def _transform_all(system, ix):
    from pamir.index import Index

    with Index.open(ix) as index:
        paths = [p.path for p in index.pictures("ok")]
    Z, ok, _ = system.transform_paths(paths)
    assert np.asarray(ok).all()
    return paths, list(np.asarray(Z, np.float32))
