import logging
import os

import pytest

# The suite's expectations (the torch reference, exact scores, cached vectors) were written
# for the fp32 networks; the int8 ones, the default since issue 35, are tested by
# tests/test_cnn_int8.py, which names its precision. Set before pamir.config reads it; a run
# that sets PAMIR_CNN_PRECISION itself keeps its own.
os.environ.setdefault("PAMIR_CNN_PRECISION", "fp32")

from pamir.data import DataError, find_corel5k


@pytest.fixture(autouse=True, scope="session")
def feature_cache_of_the_session(tmp_path_factory):
    """The commands cache features in config.default_cache_dir(): the tests' go to a folder
    of their own (tests that need another set PAMIR_CACHE themselves), never the checkout's."""
    mp = pytest.MonkeyPatch()
    if "PAMIR_CACHE" not in os.environ:
        mp.setenv("PAMIR_CACHE", str(tmp_path_factory.mktemp("feature-cache")))
    # No lexicon of word embeddings (pamir.lexicon): `pamir index` would embed 50,000 words in
    # each session's fresh cache. Words are mapped by the model, as without one;
    # tests/test_lexicon.py builds small lexicons of its own.
    mp.setenv("PAMIR_LEXICON_WORDS", "0")
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def extractor_warnings_restored():
    """The commands quiet the feature extractor's logger for the rest of the process (they
    report unreadable pictures themselves); other tests count its warnings."""
    logger = logging.getLogger("pamir.features.extract")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture(scope="session")
def corel_root():
    try:
        return find_corel5k()
    except DataError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def corel_protocol(corel_root):
    from pamir.data import load_corel5k
    from pamir.protocol import Protocol

    return Protocol(load_corel5k(corel_root))


# ------------------------------------------------------------------ reliability (issue 15)
# A tiny real system (60 small generated pictures, visterms + PAMIR, a few seconds to fit),
# shared by the tests/test_reliability_*.py files, and a way to run the real `pamir` command
# in a child process (so a test can kill it).
RELIABILITY_COLOURS = {"red": (220, 30, 30), "green": (40, 180, 50), "blue": (40, 60, 210),
                       "yellow": (230, 210, 40)}


def reliability_pictures(root, n: int = 60, seed: int = 0, size=(48, 64)):
    """n generated pictures (plain or striped colours) and a captions table in `root`."""
    from pathlib import Path

    import numpy as np
    from PIL import Image

    root = Path(root)
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    rows = ["path\tkeywords"]
    names = list(RELIABILITY_COLOURS)
    for i in range(n):
        colour = names[i % len(names)]
        striped = (i // len(names)) % 2 == 0
        a = np.empty((*size, 3), np.float32)
        a[:] = RELIABILITY_COLOURS[colour]
        a += rng.normal(0, 12, a.shape)
        if striped:
            a[:, (np.arange(size[1]) // 4) % 2 == 0] = 250
        Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(root / f"p{i:03d}.png")
        rows.append(f"p{i:03d}.png\t{colour} {'stripes' if striped else 'plain'}")
    (root / "captions.tsv").write_text("\n".join(rows) + "\n")
    return root / "captions.tsv"


def reliability_fit(table, out, cache_dir, n_updates: int = 3_000):
    from pamir.data import load_collection
    from pamir.features import FeatureSettings
    from pamir.system import fit_system

    settings = FeatureSettings(short_side=48, n_visterms=16, n_colours=8, kmeans_iterations=4,
                               colour_max_pictures=60)
    system = fit_system(load_collection(table), "pamir", settings,
                        {"n_updates": n_updates, "eval_every": 1_000}, progress=False,
                        representation="visterms", cache_dir=cache_dir, log=None, grid={})
    system.save(out)
    return system


def model_arrays(model) -> dict:
    import numpy as np

    with np.load(model / "arrays.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def same_model(a, b, with_json: bool = False) -> bool:
    """The same arrays (and, with_json, the same model.json bytes) in model folders a, b."""
    import numpy as np

    x, y = model_arrays(a), model_arrays(b)
    same = x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
    return same and (not with_json
                     or (a / "model.json").read_bytes() == (b / "model.json").read_bytes())


def fit_argv(table, out) -> list:
    """A quick `pamir fit` of the fit_table pictures into out."""
    return ["fit", table, "-o", out, "-r", "visterms", "--no-grid", "-q", "--visterms", "8",
            "-p", "n_updates=1500"]


@pytest.fixture(scope="module")
def fit_table(tmp_path_factory):
    root = tmp_path_factory.mktemp("fit")
    return reliability_pictures(root / "pictures", n=24, seed=5, size=(32, 40))


@pytest.fixture(scope="session")
def tiny_system(tmp_path_factory):
    """(root, model folder, pictures folder, captions table) of a tiny fitted real system."""
    root = tmp_path_factory.mktemp("reliability")
    table = reliability_pictures(root / "pictures")
    reliability_fit(table, root / "model", root / "fit-cache")
    return root, root / "model", root / "pictures", table


def pamir_command(*args, env=None, **popen):
    """A `pamir ARGS` child process (the package from this checkout), Popen'ed."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = str(Path(__file__).resolve().parents[1])
    e = dict(os.environ)
    e["PYTHONPATH"] = repo + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.setdefault("PAMIR_EMBEDDINGS", "0")
    e.update(env or {})
    return subprocess.Popen([sys.executable, "-c", "from pamir.cli import main; main()",
                             *map(str, args)], env=e, **popen)


_ZYGOTE = r'''
import json, os, sys
from pamir.cli import main  # imported once: each run below is a fork, started in ~ms
print("ready", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.environ.update(req["env"])
            fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            sys.argv = ["pamir", *req["argv"]]
            code = 0
            try:
                main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        except BaseException:
            import traceback
            traceback.print_exc()
            os._exit(99)
    print(pid, flush=True)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
'''


class PamirForkServer:
    """Runs `pamir ARGS` as forks of one process that has imported pamir already: a real
    `pamir` process each time (killable by its pid), without paying the imports every run.
    run(argv, kill_after=None) -> (exit status, log text); a negative status is the signal."""

    def __init__(self, log_dir):
        import subprocess
        from pathlib import Path

        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.proc = pamir_command_raw(_ZYGOTE, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        self.runs = 0

    def run(self, argv, kill_after: float | None = None, env=None):
        import json
        import os
        import signal
        import time

        self.runs += 1
        log = self.log_dir / f"run-{self.runs}.log"
        self.proc.stdin.write(json.dumps({"argv": [str(a) for a in argv], "env": env or {},
                                          "log": str(log)}) + "\n")
        self.proc.stdin.flush()
        pid = int(self.proc.stdout.readline())
        if kill_after is not None:
            time.sleep(kill_after)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        status = int(self.proc.stdout.readline())
        return status, log.read_text(errors="replace")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def pamir_command_raw(code: str, env=None, **popen):
    """`python -c CODE` with this checkout's pamir importable."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = str(Path(__file__).resolve().parents[1])
    e = dict(os.environ)
    e["PYTHONPATH"] = repo + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.setdefault("PAMIR_EMBEDDINGS", "0")
    e.update(env or {})
    return subprocess.Popen([sys.executable, "-c", code], env=e, **popen)


@pytest.fixture(scope="module")
def fork_server(tmp_path_factory):
    server = PamirForkServer(tmp_path_factory.mktemp("forks"))
    yield server
    server.close()
