"""The index follows the folders: `pamir watch FOLDER...` and `pamir serve --watch FOLDER`.

File-system events (watchdog: inotify on Linux, FSEvents on macOS, ReadDirectoryChangesW on
Windows) name the folders where pictures or their sidecars were added, changed, renamed or
removed. Once the events have been quiet for `quiet` seconds (or `max_delay` after the first
one, so that a steady trickle is taken too), one incremental update over those folders runs
the library's index job (`index_job`): a 1,000-photo import is one update, each picture read
once; a renamed picture is recognised by its bytes and keeps its vector; a changed sidecar
has its picture's keywords, place and faces read again.

Half-written files. On Linux a file that was written to and not closed yet holds the update
back (inotify says when a writer closes it), so no picture is read half-copied; elsewhere the
quiet period does that job. A writer silent for `STALLED` seconds is not waited for.

Unplugged drives. A folder that is missing, or an empty folder under which the index holds
pictures (the mount point of an unplugged drive), is offline: nothing under it is updated,
so its pictures stay in the index and are still found. The watcher looks for it every `poll`
seconds and, once it is back, watches it again and catches up with one update. (The sync
itself refuses a missing folder; an empty mount point would look like a folder whose
pictures were all deleted.) On start, every folder catches up the same way with what changed
while nothing watched it.

Warm. What an update needs stays loaded between updates: the system, the text reader's
sessions (pamir.facts.ocr keeps its readers for the process: a reader built for each
update's text stream cost about half a second) and the face models, so that an update of
one picture takes a fraction of a second (0.2-0.4 s measured, after the QUIET second). The
search that then finds a new picture by a rare keyword of its files loads the word-embedding
model from this machine's ONNX export (pamir.text.embedding: about a second, where loading it
through torch took 11-16 s, which was the "20 s" between "1 added" and the keyword's
answer); the watcher makes that export on start where it is missing, in a process of its own.

One writer. The index is opened writable only for an update (its writer lock), so a
`pamir index` run by hand and the web page's Keep go between updates; an update that finds
the lock held puts its folders back and tries again a little later.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from . import loading
from .errors import WorkflowError
from .fact_passes import FACT_PASSES, chosen, fact_pass
from .indexing import IndexJob, run_index
from ..extras import MissingExtra, extra_of
from ..formats import MEDIA_SUFFIXES
from ..index import BATCH_SIZE, Index, IndexDirError, model_fingerprint
from ..index.queries import embeddings_enabled
from ..text.embedding import model_installed, onnx_path

logger = logging.getLogger(__name__)

#: Seconds without an event before the changed folders are updated: a copy of many files
#: sends events every few milliseconds, so an import is one update.
QUIET = 1.0
#: Seconds after the first change at most before an update, however busy the folders.
MAX_DELAY = 10.0
#: Seconds after its last write that an unclosed file is no longer waited for.
STALLED = 30.0
#: Seconds between looks at whether each folder is there (unplugged, back, replaced).
POLL = 1.0
#: Seconds before an update that could not run (the writer lock held, a disk error) is tried
#: again.
RETRY = 2.0
#: How often the loop looks at the gathered events.
TICK = 0.05
#: Files beside a picture that say something about it (pamir.facts.metadata's sidecars).
SIDECAR_SUFFIXES = frozenset({".xmp", ".json"})
#: A folder not looked at yet (the first look says where each one is).
_UNSEEN = ("unseen",)


class WatchError(RuntimeError):
    """What stops the watcher (the message says what to do)."""


def index_job(index_dir, model_dir, system, fingerprint: str, folders, *,
              passes: Sequence[str], say=logger.info, progress=None):
    """`pamir index`'s job (pamir.jobs.indexing.run_index) over `folders` with an already loaded
    system: the index opened for it (created, reopened, rescored after the model learnt),
    each new or changed picture decoded once for its look, thumbnails and the fact passes
    named (pamir.jobs.fact_passes), searchable batch by batch; then the passes over what
    they have not read yet. progress(done, total) follows the look. The one place this
    module runs the index job. Returns (UpdateReport, the index's status)."""
    job = IndexJob(list(folders), model_dir=model_dir, index_dir=index_dir, passes=passes)

    def look(name: str, done: int, total: int) -> None:
        if progress is not None and name == "look":
            progress(done, total)
    return run_index(job, system=system, fingerprint=fingerprint, progress=look, say=say)


def describe(report) -> str:
    """What an update did, for a person: "3 added, 1 renamed, 2 removed"."""
    counts = [("added", report.added), ("changed", report.changed),
              ("renamed", report.renamed), ("copies", report.copied),
              ("removed", report.removed), ("keywords read again", report.recaptioned),
              ("unreadable", len(report.failed))]
    said = ", ".join(f"{n:,} {what}" for what, n in counts if n)
    return said or "nothing changed"


def _pictures(n: int) -> str:
    return f"{n:,} picture{'' if n == 1 else 's'}"


class Changes:
    """The folders the events named since the last update, and the files still being
    written; thread-safe (watchdog's thread adds, the watcher's loop takes)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._folders: set[str] = set()
        self._writing: dict[str, float] = {}
        self._first = self._last = 0.0

    def changed(self, folder: str) -> None:
        now = self._clock()
        with self._lock:
            if not self._folders:
                self._first = now
            self._folders.add(folder)
            self._last = now

    def writing(self, path: str) -> None:
        with self._lock:
            self._writing[path] = self._clock()

    def closed(self, path: str) -> None:
        with self._lock:
            self._writing.pop(path, None)

    def take(self, quiet: float, max_delay: float) -> set[str]:
        """The folders to update now (emptied), or an empty set while the events are not
        quiet yet (and not max_delay old) or a file is still being written."""
        now = self._clock()
        with self._lock:
            self._writing = {p: t for p, t in self._writing.items() if now - t < STALLED}
            if (not self._folders or self._writing
                    or (now - self._last < quiet and now - self._first < max_delay)):
                return set()
            folders, self._folders = self._folders, set()
            return folders

    def put_back(self, folders: Iterable[str]) -> None:
        for f in folders:
            self.changed(f)


class _StoppedWatchNoise(logging.Filter):
    """watchdog logs an error when the watch of a folder that went is stopped; the watcher
    says that itself, in a person's words."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "thread is inactive" not in record.getMessage()


def _handler(watcher: Watcher):
    """A watchdog event handler that tells `watcher.changes` what each event changed."""
    from watchdog.events import FileSystemEventHandler  # noqa: PLC0415  (the [watch] extra)

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event):
            try:
                watcher.note(event)
            except Exception:  # noqa: BLE001  an event must never kill watchdog's thread
                logger.exception("event %r not understood", event)

    return Handler()


class Watcher:
    """Keeps the index in `index_dir` up to date with the pictures under `folders` (see the
    module's doc) with `system` (model_dir's, or the zero-caption system for None, and its
    index fingerprint). load(model_dir) loads the model again when its folder changes
    (`pamir learn`, a refit). say(line) is told what happens. passes: a fact pass's name
    (pamir.jobs.fact_passes) = False leaves it out (`text=False`); the others the watcher
    runs after each update, as `pamir index` does, each left out, said once, where its
    extra is missing."""

    def __init__(self, index_dir, folders, model_dir, system, fingerprint: str, *,
                 load: Callable = loading.load_system,
                 say: Callable[[str], None] = logger.info, quiet: float = QUIET,
                 max_delay: float = MAX_DELAY, poll: float = POLL, **passes: bool):
        self.index_dir = Path(index_dir)
        self.roots = [Path(f).expanduser().resolve() for f in folders]
        self.model_dir = None if model_dir is None else Path(model_dir)
        self.system, self.fingerprint, self.load = system, fingerprint, load
        self.passes, self.say = list(chosen(passes, watching=True)[0]), say
        self.quiet, self.max_delay, self.poll = quiet, max_delay, poll
        self.changes = Changes()
        self._own = self.index_dir.resolve()
        self._model_files = self._model_signature()
        # each folder's (device, inode) while it is there and watched, None while it is not
        self._online: dict[Path, tuple | None] = {r: _UNSEEN for r in self.roots}
        self._held: dict[Path, tuple[int, bool]] = {}  # _indexed_under's answers
        self._watches: dict[Path, object] = {}
        self._observer = None
        self._close_events = False
        self._not_before = 0.0
        self._last_refusal = ""
        self.updates = 0  # updates that ran (a test waits for them)

    # ------------------------------------------------------------------ the loop
    def run(self, stop: threading.Event | None = None) -> None:
        """Watch until `stop` is set (or KeyboardInterrupt): catch up, then update as the
        events come. WatchError where it cannot go on (another model's index)."""
        from watchdog.observers import Observer  # noqa: PLC0415  (the [watch] extra)

        stop = stop or threading.Event()
        noise = logging.getLogger("watchdog.observers.inotify")
        if not any(isinstance(f, _StoppedWatchNoise) for f in noise.filters):
            noise.addFilter(_StoppedWatchNoise())
        self._observer = Observer()
        # inotify says when a writer closes a file; the other backends do not
        self._close_events = type(self._observer).__name__ == "InotifyObserver"
        self._observer.start()
        _export_embedder()
        _warm(self.passes)
        try:
            next_poll = 0.0
            while not stop.is_set():
                if time.monotonic() >= next_poll:
                    self.check_folders()
                    next_poll = time.monotonic() + self.poll
                if time.monotonic() >= self._not_before:
                    folders = self.changes.take(self.quiet, self.max_delay)
                    if folders:
                        self.update(folders)
                stop.wait(TICK)
        finally:
            self._observer.stop()
            self._observer.join(timeout=5)

    def note(self, event) -> None:
        """Gather a watchdog event: the folders it changed, and the files being written."""
        kind = event.event_type
        if kind in ("opened", "closed_no_write") or (event.is_directory and kind == "modified"):
            return  # a folder's "modified" only echoes its files' own events
        for path in filter(None, (event.src_path, getattr(event, "dest_path", ""))):
            path = os.fsdecode(path)
            if not self._relevant(path, event.is_directory):
                continue
            if self._close_events and kind == "modified":
                self.changes.writing(path)
            elif kind in ("closed", "deleted", "moved"):  # written, or no longer there
                self.changes.closed(path)
            parent = os.path.dirname(path)
            # a new folder is read whole; any other change is in its folder
            self.changes.changed(path if event.is_directory and kind == "created" else parent)

    def _relevant(self, path: str, is_dir: bool) -> bool:
        """Whether a path can change what the index holds: a picture or a video (any format
        `pamir index` reads: pamir.formats), a sidecar or a folder under a watched folder,
        not hidden (the sync skips those) and not the index's own folder (its thumbnails are
        pictures)."""
        p = Path(path)
        root = self._root_of(p)
        if root is None or p == self._own or p.is_relative_to(self._own):
            return False
        if any(part.startswith(".") for part in p.relative_to(root).parts):
            return False
        suffix = p.suffix.lower()
        return is_dir or suffix in MEDIA_SUFFIXES or suffix in SIDECAR_SUFFIXES

    def _root_of(self, path: Path) -> Path | None:
        return next((r for r in self.roots if path == r or path.is_relative_to(r)), None)

    # ------------------------------------------------------------------ folders come and go
    def check_folders(self) -> None:
        """Watch each folder that is (back) there and catch up with it; stop watching one
        that went, keeping its pictures in the index."""
        back = []
        for root in self.roots:
            was = self._online[root]
            now = self._identity(root) if self._present(root) else None
            if now == was:
                continue
            self._unwatch(root)
            self._online[root] = now
            if now is None:
                self.say(f"{root} is not there (unplugged?): its pictures stay in the index; "
                         "waiting for it to come back")
                continue
            if was is None:
                self.say(f"{root} is back: catching up")
            elif was is not _UNSEEN:  # deleted and made again: its old watch is dead
                self.say(f"{root} was replaced: watching it again")
            try:
                self._watches[root] = self._observer.schedule(_handler(self), str(root),
                                                              recursive=True)
            except OSError as e:  # gone again, or the system's limit of watches reached
                self.say(f"cannot watch {root} ({e.strerror or e}); trying again")
                self._online[root] = None
                continue
            back.append(root)
        if back:  # watched first, then read: nothing changed in between is missed
            self.update({str(r) for r in back}, catching_up=True)

    def _present(self, root: Path) -> bool:
        """Whether `root` is there: a folder, and not an empty one the index holds
        pictures under (an unplugged drive's mount point)."""
        try:
            if not root.is_dir():
                return False
            with os.scandir(root) as entries:
                if next(entries, None) is not None:
                    return True
        except OSError:
            return False
        return not self._indexed_under(root)

    def _indexed_under(self, root: Path) -> bool:
        """Whether the index holds pictures under `root` (asked again after each update:
        reading every path is not for each poll)."""
        asked = self._held.get(root)
        if asked is not None and asked[0] == self.updates:
            return asked[1]
        if not Index.exists(self.index_dir):
            return False
        try:
            with Index.open(self.index_dir) as ix:
                held = any(Path(p.path).is_relative_to(root) for p in ix.pictures())
        except (IndexDirError, OSError, sqlite3.Error):
            held = True  # cannot tell: never risk emptying the index
        self._held[root] = (self.updates, held)
        return held

    @staticmethod
    def _identity(root: Path) -> tuple | None:
        try:
            st = root.stat()
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def _unwatch(self, root: Path) -> None:
        watch = self._watches.pop(root, None)
        if watch is not None:
            try:
                self._observer.unschedule(watch)
            except Exception:  # noqa: BLE001  its emitter may have died with the folder
                logger.debug("unscheduling %s", root, exc_info=True)

    # ------------------------------------------------------------------ updates
    def update(self, folders: Iterable[str], catching_up: bool = False) -> None:
        """One incremental update over `folders` (those of online roots that are there);
        the lines it says. Folders it could not update go back to be tried again."""
        folders = self._to_update(folders)
        if not folders:
            return
        try:
            self._reload_if_model_changed()
            report, status = index_job(self.index_dir, self.model_dir, self.system,
                                       self.fingerprint, folders, passes=self.passes,
                                       say=self.say,
                                       progress=self._progress)
        except WorkflowError as e:
            raise WatchError(str(e)) from None
        except (IndexDirError, OSError, sqlite3.OperationalError, ValueError) as e:
            # the writer lock held (`pamir index`, a Keep), a folder gone meanwhile, a full
            # disk, a model that cannot be loaded: what was committed stays; the rest is
            # tried again
            if str(e) != self._last_refusal:
                self.say(f"not updated yet: {e}; trying again")
            self._last_refusal = str(e)
            self.changes.put_back(str(f) for f in folders)
            self._not_before = time.monotonic() + RETRY
            return
        except ImportError as e:  # a pass's extra missing: said once, the pass left off
            self._leave_off_pass(e)
            self.changes.put_back(str(f) for f in folders)
            return
        self._last_refusal = ""
        self.updates += 1
        what = describe(report)
        if catching_up or what != "nothing changed":
            where = ", ".join(str(f) for f in folders)
            self.say(f"{time.strftime('%H:%M:%S')} {where}: {what}"
                     f"{' (caught up)' if catching_up else ''}; "
                     f"{_pictures(status['pictures'])} indexed")
        for path, reason in report.failed[:5]:
            self.say(f"  skipped {path}: {reason}")
        for p in FACT_PASSES:  # the passes of facts (not the copies' looks) that read some
            done = report.passes.get(p.name)
            if p.kinds and done and done.get("read"):
                self.say(f"  {p.name}: {_pictures(done['read'])} read")

    def _progress(self, done: int, total: int) -> None:
        """A line a batch, for an update of more than one (a first catch-up, a big import):
        a watcher runs in a log or beside a server, where a bar has no terminal."""
        if total > BATCH_SIZE:
            self.say(f"  {done:,} of {total:,} pictures read")

    def _to_update(self, folders: Iterable[str]) -> list[Path]:
        """The folders to read: each one's nearest existing folder under a watched root
        that is online and there, none under another."""
        out: set[Path] = set()
        for f in map(Path, folders):
            root = self._root_of(f)
            if root is None or self._online[root] in (None, _UNSEEN) or not self._present(root):
                continue  # offline: read whole when it is back
            while f != root and not f.is_dir():
                f = f.parent
            out.add(f)
        return sorted(f for f in out if not any(f != g and f.is_relative_to(g) for g in out))

    def _leave_off_pass(self, e: ImportError) -> None:
        extra = e.extra if isinstance(e, MissingExtra) else extra_of(e.name)
        for p in FACT_PASSES:
            if p.extra is not None and p.extra == extra and p.name in self.passes:
                self.passes.remove(p.name)
                self.say(f"{p.missing}: {e}")
                return
        raise e

    def _model_signature(self) -> list:
        """Names, sizes and mtimes of the model folder's files: cheap to take at each
        update, and it changes when `pamir learn` or a refit writes the model."""
        if self.model_dir is None:
            return []
        out = []
        for p in sorted(self.model_dir.rglob("*")):
            rel = p.relative_to(self.model_dir).parts
            if rel[0] == "index" or any(part.startswith(".") for part in rel):
                continue  # not the model (as pamir.index.model_fingerprint reads it)
            try:
                st = p.stat()
            except OSError:
                continue
            out.append((str(p), st.st_size, st.st_mtime_ns))
        return out

    def _reload_if_model_changed(self) -> None:
        now = self._model_signature()
        if now == self._model_files:
            return
        self.say(f"{self.model_dir} has changed: loading it again")
        self.system = self.load(self.model_dir)
        self.fingerprint = model_fingerprint(self.model_dir)
        self._model_files = now


def _warm(passes: Sequence[str]) -> threading.Thread:
    """The passes' models loaded on a thread of their own as the watcher starts (a stream
    loads them at its first pictures: the first picture dropped would wait for them)."""
    def load():
        for name in passes:
            row = fact_pass(name)
            if row.ready is not None:
                try:
                    row.part("ready")()
                except Exception:  # noqa: BLE001 - said by the pass when it runs
                    pass

    thread = threading.Thread(target=load, daemon=True, name="pamir-warm")
    thread.start()
    return thread


def _export_embedder() -> None:
    """The word-embedding model's ONNX export made, where it is missing, by a process of its
    own (torch and its memory are not kept in the watcher): the next `pamir search` of a
    rare word loads in about a second."""
    path = onnx_path()
    if not embeddings_enabled() or path is None or path.is_file() or not model_installed()[0]:
        return
    subprocess.Popen([sys.executable, "-c", "from pamir.text.embedding import embedder; "
                      "embedder()"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)


def watcher_of_index(index_dir, folders, *, say: Callable[[str], None] = logger.info,
                     **options) -> Watcher:
    """A Watcher of `folders` for the existing index in `index_dir`, with the model it was
    built with (or none: the zero-caption system), loaded (`pamir serve --watch`)."""
    with Index.open(index_dir) as ix:
        model = Path(ix.model_dir) if ix.model_dir else None
    system, fingerprint = loading.indexing_system(model)
    return Watcher(index_dir, folders, model, system, fingerprint, say=say, **options)


def watch_in_thread(watcher: Watcher, say: Callable[[str], None] = logger.info):
    """Run `watcher` in a daemon thread (`pamir serve --watch`): (thread, stop event). An
    error that stops it is said, never raised into the caller."""
    stop = threading.Event()

    def loop():
        try:
            watcher.run(stop)
        except Exception as e:  # noqa: BLE001  the server goes on without the watcher
            say(f"stopped watching the folders: {e}")

    thread = threading.Thread(target=loop, name="pamir-watch", daemon=True)
    thread.start()
    return thread, stop


__all__ = ["Changes", "MAX_DELAY", "POLL", "QUIET", "Watcher", "WatchError", "describe",
           "index_job", "watch_in_thread", "watcher_of_index"]
