import logging
import os
import shutil

import pytest

# The suite's expectations (the torch reference, exact scores, cached vectors) were written
# for the fp32 networks; the int8 ones, the default since issue 35, are tested by
# tests/test_cnn_int8.py, which names its precision. Set before pamir.config reads it; a run
# that sets PAMIR_CNN_PRECISION itself keeps its own.
os.environ.setdefault("PAMIR_CNN_PRECISION", "fp32")
# The same for text detection: int8 (the default) is tested by tests/test_ocr_int8.py; the
# other tests' readers detect in fp32 rather than quantize in every fresh cache.
os.environ.setdefault("PAMIR_OCR_PRECISION", "fp32")

from pamir.data import DataError, find_corel5k
from pictures import LOOKS, coloured_pictures, look_picture


@pytest.fixture(autouse=True, scope="session")
def feature_cache_of_the_session(tmp_path_factory):
    """The commands cache features in config.default_cache_dir(): the tests' go to a folder
    of their own (tests that need another set PAMIR_CACHE themselves), never the checkout's;
    the same for the default index folder."""
    mp = pytest.MonkeyPatch()
    if "PAMIR_CACHE" not in os.environ:
        mp.setenv("PAMIR_CACHE", str(tmp_path_factory.mktemp("feature-cache")))
    # No lexicon of word embeddings (pamir.text.lexicon): `pamir index` would embed 50,000 words in
    # each session's fresh cache. Words are mapped by the model, as without one;
    # tests/test_lexicon.py builds small lexicons of its own.
    mp.setenv("PAMIR_LEXICON_WORDS", "0")
    # The default index ($XDG_DATA_HOME/pamir/index) of the tests' own, never the person's:
    # a command run with no --index must not read an index made outside the tests.
    if "PAMIR_INDEX" not in os.environ:
        mp.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data-home")))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def cache_of_the_module(tmp_path_factory):
    """PAMIR_CACHE in a folder of the test module's own (what it caches, an exported .onnx
    for one, is not shared with other modules)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAMIR_CACHE", str(tmp_path_factory.mktemp("pamir-cache")))
        yield


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


# ----------------------------------------------------------- fixtures several modules share
@pytest.fixture
def no_embedding_model(monkeypatch):
    """Words outside the vocabulary stay unknown unless a test maps them (modules make it
    autouse with their own, or `pytestmark = pytest.mark.usefixtures(...)`)."""
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A model folder (model.json marks one) whose loading gives the stand-in system
    (tests/fakes.py), and a folder of make_pictures' pictures."""
    import pamir.commands.index as product
    from fakes import FakeSystem
    from pictures import make_pictures

    model = tmp_path / "model"
    model.mkdir()
    (model / "model.json").write_text('{"fake": 1}')
    system = FakeSystem()
    monkeypatch.setattr(product, "load_system", lambda path: system)
    monkeypatch.delenv("PAMIR_INDEX", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    pictures = tmp_path / "pictures"
    make_pictures(pictures)
    return model, pictures


@pytest.fixture(scope="module")
def looks_folder(tmp_path_factory):
    """120 pictures of LOOKS (a look each in turn, stripes on every third) and their
    captions table."""
    import numpy as np

    root = tmp_path_factory.mktemp("pictures")
    rng = np.random.default_rng(0)
    words = list(LOOKS)
    lines = ["path\tkeywords"]
    for i in range(120):
        caption = [words[i % 4]] + (["stripes"] if i % 3 == 0 else [])
        look_picture(caption, rng).save(root / f"p{i:03d}.png")
        lines.append(f"p{i:03d}.png\t{' '.join(caption)}")
    (root / "captions.tsv").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture(scope="module")
def looks_system(looks_folder, tmp_path_factory):
    """(collection, system, feature cache): a small visterm PAMIR system fitted on
    looks_folder, its grid chosen on validation."""
    from pamir.facts.collection import load_collection
    from pamir.features import FeatureSettings
    from pamir.training import fit_system

    settings = FeatureSettings(short_side=48, n_visterms=24, n_colours=8, kmeans_iterations=5,
                               colour_max_pictures=60)
    collection = load_collection(looks_folder / "captions.tsv")
    cache = tmp_path_factory.mktemp("cache")
    system = fit_system(collection, "pamir", settings, {"n_updates": 6_000, "eval_every": 1_000},
                        progress=False, cache_dir=cache, log=None, representation="visterms")
    return collection, system, cache


# ------------------------------------------------------------------ reliability (issue 15)
# A tiny real system (60 small generated pictures, visterms + PAMIR, a few seconds to fit),
# shared by the tests/test_reliability_*.py files, and a way to run the real `pamir` command
# in a child process (so a test can kill it). The pictures: pictures.coloured_pictures.


def reliability_fit(table, out, cache_dir, n_updates: int = 3_000):
    from pamir.facts.collection import load_collection
    from pamir.features import FeatureSettings
    from pamir.training import fit_system

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
    return coloured_pictures(root / "pictures", n=24, seed=5, size=(32, 40))


@pytest.fixture(scope="session")
def tiny_system(tmp_path_factory):
    """(root, model folder, pictures folder, captions table) of a tiny fitted real system."""
    root = tmp_path_factory.mktemp("reliability")
    table = coloured_pictures(root / "pictures")
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


# ----------------------------------------------------------- what the reliability tests share
def record(name: str, result: dict) -> None:
    """Add a result to the benchmark's report file, when one runs these tests."""
    out = os.environ.get("PAMIR_RELIABILITY_REPORT")
    if out:
        from pamir.storage import locked_json_update

        locked_json_update(out, {name: result})


def index_vectors(ix) -> dict:
    """{path: vector} of every picture an index holds."""
    from pamir.index import Index

    with Index.open(ix) as index:
        return {p.path: index.vector(p.id) for p in index.pictures("ok")}


def catalog_integrity(ix) -> str:
    """SQLite's integrity check of an index's catalogue ("ok")."""
    import sqlite3

    con = sqlite3.connect(f"file:{ix / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def clear_message(log: str, path) -> str:
    """'' if `log` is a clear refusal naming `path`; else what is wrong with it."""
    if "Traceback" in log:
        return "a traceback"
    if "error:" not in log:
        return "no `error:` line"
    if str(path) not in log.replace("\n", ""):
        return f"the message does not name {path}"
    if "--rebuild" in log:  # --rebuild would throw the whole index away
        return "the message advises --rebuild, which would discard a whole index"
    return ""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` now."""
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------- a server, a browser
def serve_in_thread(app, host: str = "127.0.0.1", port: int | None = None):
    """Run `app` with uvicorn on host in a thread; yields its base URL, stops it after."""
    import threading
    import time

    import uvicorn

    port = free_port(host) if port is None else port
    srv = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("the server did not start")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        srv.should_exit = True
        thread.join(10)


#: Debian's headless Chromium and its driver (the browser tests skip where they are absent).
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def chromium_or_skip():
    """selenium's webdriver; the calling test module is skipped, with the reason, where
    Chromium, its driver or selenium is absent (CI installs them)."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip("headless Chromium absent: apt-get install chromium chromium-driver",
                    allow_module_level=True)
    return pytest.importorskip("selenium.webdriver",
                               reason="selenium absent: pip install -e .[dev]")


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (selenium), one per module."""
    webdriver = chromium_or_skip()
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1200,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def wait(driver, seconds=15):
    """selenium's WebDriverWait of a driver.

    A page that redraws a list while the wait polls leaves the element just
    found stale; that is a reason to look again, not a failure (CI once
    failed on it in test_duplicates)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds,
                         ignored_exceptions=(StaleElementReferenceException,))
