"""The index follows the folder (pamir.jobs.watch, `pamir watch`, `pamir serve --watch`): new,
renamed and removed pictures and changed sidecars taken from the file system's events, an
import read once, a half-copied file left alone, an unplugged folder kept and caught up with,
what changed while nothing watched caught up with on start, and the writer lock respected.

The watcher runs in a thread over the hand-made FakeSystem, with short quiet periods; each
test waits for what it expects (with a timeout), never for a fixed time."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fakes import FakeSystem, run
from pamir.index import Index, model_fingerprint
from pamir.jobs.watch import Watcher, watch_in_thread
from pictures import COLOURS, make_pictures

pytestmark = pytest.mark.usefixtures("no_embedding_model")

XMP = """<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF
 xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description
 xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:subject><rdf:Bag>{}</rdf:Bag></dc:subject>
</rdf:Description></rdf:RDF></x:xmpmeta>"""


def wait_for(condition, what: str, timeout: float = 20.0):
    """Wait until condition() holds (the watcher works in its own thread)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"waited {timeout} s for {what}")


def indexed(index_dir: Path) -> dict:
    """{file name: Picture} of what the index holds now."""
    if not Index.exists(index_dir):
        return {}
    with Index.open(index_dir) as ix:
        return {Path(p.path).name: p for p in ix.pictures()}


def new_picture(path: Path, colour: str = "blue", seed: int = 0) -> Path:
    a = np.zeros((24, 36, 3), np.uint8) + np.array(COLOURS[colour], np.uint8)
    a[seed % 24, :] = 255  # bytes of its own: not a copy of an indexed picture
    Image.fromarray(a).save(path)
    return path


class Counting(FakeSystem):
    """FakeSystem that counts how often each picture is read by the model."""

    def __init__(self):
        super().__init__()
        self.read: list[str] = []

    def transform_paths(self, paths):
        self.read += [Path(p).name for p in paths]
        return super().transform_paths(paths)


class Watching:
    """A watcher of `folder` in a thread, its lines, and its system; stop() ends it."""

    def __init__(self, tmp_path: Path, folders, quiet: float = 0.2):
        self.index = tmp_path / "index"
        model = tmp_path / "model"
        model.mkdir(exist_ok=True)
        (model / "model.json").write_text('{"fake": 1}')
        self.system = Counting()
        self.lines: list[str] = []
        self.watcher = Watcher(self.index, folders, model, self.system, model_fingerprint(model),
                               load=lambda m: self.system, text=False, faces=False,
                               say=self.lines.append, quiet=quiet, max_delay=3.0, poll=0.2)
        self.thread, self.stop_event = watch_in_thread(self.watcher, say=self.lines.append)
        wait_for(lambda: self.watcher.updates >= 1 or self.said("not there"), "the catch-up")

    def said(self, words: str) -> bool:
        return any(words in line for line in self.lines)

    def stop(self):
        self.stop_event.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


@pytest.fixture
def watching(tmp_path):
    folder = tmp_path / "pictures"
    make_pictures(folder)
    w = Watching(tmp_path, [folder])
    yield w, folder
    w.stop()


def test_a_new_picture_is_taken_and_searchable(watching):
    w, folder = watching
    assert len(indexed(w.index)) == 9 and w.said("9 added (caught up)")
    new_picture(folder / "new.png")
    wait_for(lambda: "new.png" in indexed(w.index), "the new picture")
    assert indexed(w.index)["new.png"].state == "ok"
    wait_for(lambda: w.said("1 added;"), "the line that says so")
    with Index.open(w.index) as ix:  # searchable: its look answers a query
        assert "new.png" in [Path(h.path).name for h in ix.search(ix.parse_query("blue"), 20)]


def test_a_renamed_picture_keeps_its_vector_without_being_read_again(watching):
    w, folder = watching
    before = indexed(w.index)["red-1.png"]
    reads = len(w.system.read)
    os.rename(folder / "red-1.png", folder / "moved.png")
    wait_for(lambda: "moved.png" in indexed(w.index), "the renamed picture")
    now = indexed(w.index)
    assert "red-1.png" not in now and now["moved.png"].id == before.id, w.lines
    assert len(w.system.read) == reads  # recognised by its bytes: no picture read
    wait_for(lambda: w.said("1 renamed"), "the line that says so")


def test_a_changed_picture_is_read_again(watching):
    w, folder = watching
    before = indexed(w.index)["red-2.png"]
    new_picture(folder / "red-2.png", colour="green", seed=5)  # edited in place
    wait_for(lambda: indexed(w.index)["red-2.png"].hash != before.hash, "the new bytes read")
    assert w.system.read[-1] == "red-2.png"
    wait_for(lambda: w.said("1 changed"), "the line that says so")


def test_a_renamed_folder_keeps_its_pictures_vectors(tmp_path):
    folder = tmp_path / "pictures"
    make_pictures(folder / "trip")
    w = Watching(tmp_path, [folder])
    try:
        ids = {p.id for p in indexed(w.index).values()}
        reads = len(w.system.read)
        os.rename(folder / "trip", folder / "kyoto 2019")
        wait_for(lambda: all("kyoto 2019" in p.path for p in indexed(w.index).values()),
                 "the pictures under their new folder")
        # the same rows moved (two flat pictures of a colour are the same bytes: either
        # row serves either name), none read again
        assert {p.id for p in indexed(w.index).values()} == ids
        assert len(w.system.read) == reads
    finally:
        w.stop()


def test_a_removed_picture_leaves_the_index(watching):
    w, folder = watching
    (folder / "green-2.png").unlink()
    wait_for(lambda: "green-2.png" not in indexed(w.index), "the removal")
    assert len(indexed(w.index)) == 8
    wait_for(lambda: w.said("1 removed"), "the line that says so")


def test_a_changed_sidecar_reads_the_pictures_keywords_again(watching):
    w, folder = watching
    sidecar = folder / "blue-0.png.xmp"
    sidecar.write_text(XMP.format("<rdf:li>kyoto</rdf:li><rdf:li>temple</rdf:li>"))
    wait_for(lambda: indexed(w.index)["blue-0.png"].caption == ("kyoto", "temple"),
             "the sidecar's keywords")
    sidecar.write_text(XMP.format("<rdf:li>osaka</rdf:li>"))
    wait_for(lambda: indexed(w.index)["blue-0.png"].caption == ("osaka",),
             "the changed sidecar's keywords")
    assert w.said("1 keywords read again")


def test_an_import_is_read_once_in_few_updates(watching):
    w, folder = watching
    updates, reads = w.watcher.updates, len(w.system.read)
    for i in range(40):
        new_picture(folder / f"import-{i:02d}.png", seed=i)
    wait_for(lambda: len(indexed(w.index)) == 49, "the import")
    assert sorted(w.system.read[reads:]) == [f"import-{i:02d}.png" for i in range(40)]
    assert w.watcher.updates - updates <= 3  # one, unless the copy paused for the quiet time


def test_a_file_still_being_written_is_not_read_half_copied(watching):
    w, folder = watching
    data = (folder / "red-2.png").read_bytes()
    reads = len(w.system.read)
    with open(folder / "copying.png", "wb") as f:
        f.write(data[: len(data) // 2])
        f.flush()
        time.sleep(w.watcher.quiet * 4)  # quiet, but not closed: not read
        assert "copying.png" not in indexed(w.index) and len(w.system.read) == reads
        f.write(data[len(data) // 2:])
    wait_for(lambda: "copying.png" in indexed(w.index), "the copied picture")
    assert indexed(w.index)["copying.png"].state == "ok"


def test_an_unplugged_folder_keeps_its_pictures_and_is_caught_up_with(tmp_path):
    root = tmp_path / "drive"
    folder = root / "photos"
    make_pictures(folder)
    w = Watching(tmp_path, [folder])
    try:
        os.rename(root, tmp_path / "elsewhere")  # unplugged
        wait_for(lambda: w.said("is not there"), "the folder noticed gone")
        away = tmp_path / "elsewhere" / "photos"
        (away / "red-0.png").unlink()  # changed on another machine meanwhile
        new_picture(away / "new.png")
        time.sleep(1.0)  # several polls
        assert len(indexed(w.index)) == 9  # nothing removed while it is away
        os.rename(tmp_path / "elsewhere", root)  # plugged in again
        wait_for(lambda: w.said("is back"), "the folder noticed back")
        wait_for(lambda: "new.png" in indexed(w.index), "the catch-up")
        assert "red-0.png" not in indexed(w.index) and len(indexed(w.index)) == 9
        new_picture(folder / "after.png", seed=3)  # watched again
        wait_for(lambda: "after.png" in indexed(w.index), "a picture after its return")
    finally:
        w.stop()


def test_an_empty_mount_point_is_not_taken_for_deleted_pictures(tmp_path):
    """An unmounted drive leaves its mount point, empty: the index keeps its pictures."""
    folder = tmp_path / "mnt"
    make_pictures(folder)
    w = Watching(tmp_path, [folder])
    try:
        aside = tmp_path / "aside"
        aside.mkdir()
        for p in list(folder.iterdir()):
            os.rename(p, aside / p.name)
        wait_for(lambda: w.said("is not there"), "the empty mount point noticed")
        time.sleep(1.0)
        assert len(indexed(w.index)) == 9
        for p in list(aside.iterdir()):
            os.rename(p, folder / p.name)
        wait_for(lambda: w.said("is back"), "the folder noticed back")
        wait_for(lambda: w.said("(caught up)") and w.watcher.updates >= 2, "the catch-up")
        assert len(indexed(w.index)) == 9
    finally:
        w.stop()


def test_what_changed_while_nothing_watched_is_caught_up_on_start(tmp_path):
    folder = tmp_path / "pictures"
    make_pictures(folder)
    first = Watching(tmp_path, [folder])
    first.stop()
    assert len(indexed(tmp_path / "index")) == 9
    kept = indexed(tmp_path / "index")["green-0.png"].id
    (folder / "red-0.png").unlink()
    os.rename(folder / "green-0.png", folder / "renamed.png")
    new_picture(folder / "new.png")
    w = Watching(tmp_path, [folder])
    try:
        assert w.said("1 added, 1 renamed, 1 removed (caught up)"), w.lines
        now = indexed(w.index)
        assert now["renamed.png"].id == kept and "new.png" in now and "red-0.png" not in now
        assert w.system.read == ["new.png"]
    finally:
        w.stop()


def test_the_writer_lock_is_respected(watching):
    w, folder = watching
    with Index.open(w.index, writable=True):  # a `pamir index` run by hand
        new_picture(folder / "new.png")
        wait_for(lambda: w.said("another `pamir index` is updating"), "the watcher waiting")
        assert "new.png" not in indexed(w.index)
    wait_for(lambda: "new.png" in indexed(w.index), "the update after the lock")


def test_the_index_own_folder_inside_the_watched_one_is_left_out(tmp_path):
    folder = tmp_path / "pictures"
    make_pictures(folder)
    w = Watching(tmp_path, [folder])
    w.stop()
    # an index inside the folder writes its files (and thumbnails) as it updates
    inside = Watcher(folder / "index", [folder], None, w.system, "", text=False, faces=False)
    assert not inside._relevant(str(folder / "index" / "thumbnails" / "a.jpg"), False)
    assert not inside._relevant(str(folder / ".hidden" / "a.jpg"), False)
    assert not inside._relevant(str(folder / "notes.txt"), False)
    assert inside._relevant(str(folder / "a.JPG"), False)
    assert inside._relevant(str(folder / "a.jpg.xmp"), False)


def test_pamir_watch_catches_up_and_stops_cleanly_on_ctrl_c(fake, tmp_path, monkeypatch):
    import pamir.jobs.watch as watch

    model, pictures = fake
    check = watch.Watcher.check_folders

    def then_ctrl_c(self):
        check(self)
        if self.updates:
            raise KeyboardInterrupt

    monkeypatch.setattr(watch.Watcher, "check_folders", then_ctrl_c)
    r = run("watch", model, pictures, "--index", tmp_path / "ix", "--no-text", "--no-faces")
    assert "9 added (caught up)" in r.output and "stopped watching" in r.output
    assert len(indexed(tmp_path / "ix")) == 9


def test_serve_watch_answers_with_pictures_added_while_it_serves(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    import pamir.jobs.loading as loading
    from pamir.commands.serve import _watching
    from pamir.jobs import indexing
    from pamir.server import create_app

    folder = tmp_path / "pictures"
    make_pictures(folder)
    first = Watching(tmp_path, [folder])  # the index `pamir index` built
    first.stop()
    # the index's model is the stand-in; its passes read nothing here
    monkeypatch.setattr(loading, "indexing_system", lambda model: (first.system, model_fingerprint(model)))
    # called as the real ones are (pamir.jobs.indexing: client, progress), a pass's report
    nothing = {"read": 0, "with_facts": 0, "failed": 0, "seconds": 0.0, "notes": []}
    alone = indexing._alone
    monkeypatch.setattr(indexing, "_alone", lambda ix, p, *a: dict(nothing)
                        if p.name in ("text", "faces") else alone(ix, p, *a))
    thread, stop = _watching(first.index, [folder])  # `pamir serve --watch FOLDER`
    try:
        with TestClient(create_app(first.index, system=first.system, warm_mapping=False)) as c:
            new_picture(folder / "new.png")
            wait_for(lambda: "new.png" in [Path(h["path"]).name for h in
                                           c.get("/api/search", params={"q": "blue"})
                                           .json()["hits"]], "the server's answer")
    finally:
        stop.set()
        thread.join(timeout=10)


def test_a_folder_missing_at_start_is_waited_for(tmp_path):
    folder = tmp_path / "later"
    w = Watching(tmp_path, [folder])
    try:
        assert w.said("is not there")
        make_pictures(folder)
        wait_for(lambda: len(indexed(w.index)) == 9, "the folder once it is there")
    finally:
        w.stop()


def test_without_watchdog_pamir_watch_names_the_extra(tmp_path):
    import subprocess

    from conftest import pamir_command_raw

    argv = ["pamir", "watch", str(tmp_path), "--index", str(tmp_path / "ix")]
    proc = pamir_command_raw(f"import sys\nsys.modules['watchdog'] = None\nsys.argv = {argv!r}\n"
                             "from pamir.cli import main\nmain()",
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "pip install 'pamir[watch]'" in err, err
    assert "Traceback" not in err


def test_a_model_that_learnt_is_loaded_again(watching, tmp_path):
    w, folder = watching
    loads = []
    w.watcher.load = lambda model: loads.append(model) or w.system
    (tmp_path / "model" / "model.json").write_text('{"fake": 2}')  # `pamir learn` saved it
    new_picture(folder / "new.png")
    wait_for(lambda: "new.png" in indexed(w.index), "the new picture")
    assert loads == [tmp_path / "model"] and w.said("has changed: loading it again")
    with Index.open(w.index) as ix:  # the index follows the model (rescored for it)
        assert ix.model_fingerprint == model_fingerprint(tmp_path / "model")


def test_every_format_pamir_index_reads_is_followed(watching):
    """The watcher's events and `pamir index`'s walk go by one list (pamir.formats): a
    picture of every format, a video, a sidecar; not a stray text file."""
    from pamir.formats import MEDIA_SUFFIXES

    w, folder = watching
    for suffix in MEDIA_SUFFIXES:
        assert w.watcher._relevant(str(folder / f"x{suffix.upper()}"), False), suffix
    assert w.watcher._relevant(str(folder / "x.jpg.xmp"), False)
    assert not w.watcher._relevant(str(folder / "notes.txt"), False)


def test_a_video_copied_in_is_indexed(watching, tmp_path):
    """A video (here an .mp4 written aside, then moved in, as a copy lands) is taken as a
    picture is: indexed within the update, its frames looked at."""
    from media import video

    w, folder = watching
    clip = video(tmp_path / "clip.mp4", seconds=2.0)
    os.rename(clip, folder / "clip.mp4")
    wait_for(lambda: "clip.mp4" in indexed(w.index), "the video")
    assert indexed(w.index)["clip.mp4"].state == "ok"


def test_the_watcher_loads_its_passes_models_as_it_starts(monkeypatch):
    """A stream loads a pass's models at its first pictures; the watcher loads them as it
    starts, so that the first picture dropped does not wait for them (and a pass that
    cannot load them is left to say so when it runs)."""
    from dataclasses import replace

    from pamir.jobs import fact_passes, watch

    loaded = []

    def ready(name):
        def load():
            if name == "faces":
                raise RuntimeError("no models here")
            loaded.append(name)
        return load

    rows = {p.name: replace(p, ready=f"{p.name}-models") for p in fact_passes.FACT_PASSES}
    monkeypatch.setattr(fact_passes.FactPass, "part",
                        lambda row, field: ready(row.name) if field == "ready" else None)
    monkeypatch.setattr(watch, "fact_pass", rows.__getitem__)
    watch._warm(["faces", "text"]).join(30)
    assert loaded == ["text"]
