"""An index folder's life, the part of `Index` its other parts work from: creating, opening,
rebuilding and destroying a folder, the writer lock, (re)reading the committed state that
searching and writing work from, and looking its pictures up.

Crash safety. A new index is built aside (`.NAME.creating-<pid>`) and renamed into place, so
a crash never leaves a half-made one; the aside folder of a creator killed before the rename
is deleted by the next create or writer. The writer lock is an flock, which the kernel
releases with its holder, so a killed writer never leaves it held.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Self

import numpy as np

from ..storage import atomic_write, fsync_dir, pid_alive
from ..text.words import STOP_WORDS
from . import layout
from .catalog import CATALOG, Catalog, IndexDirError, Picture
from .people import Decisions, read_decisions, write_decisions
from .scores import ScoreMatrix
from .sync import file_hash

#: A reader copies the (column, id) map of its committed state into the folder
#: (layout.columns_copy) from this many pictures up: reading the map from SQLite costs about
#: 0.3 s at 1,000,000 pictures, on every `pamir search`; the copy, about 40 ms (profiled).
COLUMNS_COPY_FROM = 100_000
#: How often a reader re-reads the index when another process's commits keep deleting the
#: files of the state it reads (a newer layout committed meanwhile).
_LOAD_TRIES = 20
#: How often an answer is computed again when another process's commits keep changing what
#: it reads (a hit's picture removed, pictures moved by a compaction).
STALE_TRIES = 20


def model_fingerprint(model_dir: str | Path) -> str:
    """Hash of every file of a model directory: the index's scores are valid for it only."""
    h = hashlib.blake2b(digest_size=16)
    root = Path(model_dir)
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        rel = p.relative_to(root)
        if rel.parts[0] == "index" or any(part.startswith(".") for part in rel.parts):
            continue  # an index kept inside the model dir is not part of the model
        h.update(str(rel).encode())
        h.update(file_hash(p).encode())
    return h.hexdigest()


def _writer_lock(directory: Path) -> IO:
    """The open lock file, held until it is closed; IndexDirError if another writer has it,
    naming that writer (its pid and command, which the holder writes into the lock file).

    The lock is an flock on `.writer.lock`: the kernel releases it when its holder's file is
    closed, including when the holder is killed, so a dead writer's lock never needs
    clearing by hand; the stale pid and command it wrote are simply overwritten."""
    path = directory / layout.WRITER_LOCK
    try:
        f = open(path, "a+")
    except OSError as e:
        raise IndexDirError(f"{path}: cannot open the writer lock "
                            f"({e.strerror or e}); is the index folder read-only?") from None
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            f.seek(0)
            holder = f.read(4096).strip()
        except OSError:
            holder = ""
        f.close()
        who = f" (held by {holder})" if holder else ""
        raise IndexDirError(f"{directory}: another `pamir index` is updating this index{who}; "
                            "wait for it to finish") from None
    try:
        f.seek(0)
        f.truncate()
        command = " ".join(["pamir", *sys.argv[1:]])[:300].replace("\n", " ")
        f.write(f"pid {os.getpid()}: {command}\n")
        f.flush()
    except OSError:
        pass  # the lock holds all the same; only the holder's name is missing
    return f


def _sweep_dead_creates(directory: Path) -> list[Path]:
    """Delete the aside folders `.NAME.creating-<pid>` of creates whose process is gone
    (killed before the rename): nothing else ever would. A live creator's is left alone."""
    prefix = layout.creating_prefix(directory)
    gone = []
    try:
        entries = list(os.scandir(directory.parent))
    except OSError:
        return gone
    for e in entries:
        pid = e.name[len(prefix):] if e.name.startswith(prefix) else ""
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            shutil.rmtree(e.path, ignore_errors=True)
            gone.append(Path(e.path))
    return gone


class IndexFolder:
    """An open index folder and its committed state, which the Index's parts share (see
    `Index`): the catalogue (`_catalog`, all of the SQL), the score matrix of the state last
    read (`_matrix`), the vocabulary and model it was made with, and the one lock that
    serialises catalogue and matrix access (`_lock`)."""

    def __init__(self, directory: Path, catalog: Catalog, writable: bool, lock: IO | None):
        self.directory = directory
        self._catalog = catalog
        self._writable = writable
        self._writer_lock = lock
        self._lock = threading.RLock()
        self._on_reload: list[Callable[[], None]] = []
        self._load()

    def on_reload(self, forget: Callable[[], None]) -> None:
        """Call forget() each time the committed state is read again: a part's caches of
        the state before go (the pictures' mean, a query's bridge)."""
        self._on_reload.append(forget)

    @property
    def writable(self) -> bool:
        """Whether this process opened the index for writing (it holds the writer lock)."""
        return bool(self._writable)

    def require_writable(self) -> None:
        if not self._writable:
            raise IndexDirError(f"{self.directory}: opened read-only")

    # ------------------------------------------------------------------ the folder
    @staticmethod
    def exists(directory: str | Path) -> bool:
        """Whether an index (perhaps a damaged one) is in `directory`."""
        return (Path(directory) / CATALOG).exists()

    @classmethod
    def create(cls, directory, vocabulary: Sequence[str], idf: np.ndarray, *,
               model_dir: str | Path | None = None, fingerprint: str = "",
               stop_words: Iterable[str] = STOP_WORDS, classes: Sequence[str] = (),
               scales: np.ndarray | None = None,
               decisions: Decisions = Decisions()) -> Self:
        """A new empty index, open for writing. The folder is built aside and renamed into
        place; an existing index there is an error. classes: the ImageNet class names of a
        CNN representation, whose probabilities are stored after the T word scores (each
        picture's column then has T + C rows: see pamir.system.index_transform). scales: the
        spread of the model's scores of each word (pamir.zeroshot.prior.Prior.spreads), which puts a
        query's words on the class part's scale (Searcher.class_mix). decisions:
        editors' decisions about people to start with (`rebuild`)."""
        directory = Path(directory)
        if cls.exists(directory):
            raise IndexDirError(f"{directory}: an index already exists there; open it, or delete "
                                "the folder to start afresh")
        idf = np.asarray(idf, dtype=np.float64)
        # no words at all is the zero-caption system's index: its classes are what it scores
        if (len(vocabulary) == 0 and not classes) or idf.shape != (len(vocabulary),):
            raise IndexDirError(f"vocabulary of {len(vocabulary)} words with idf of shape "
                                f"{idf.shape}: both must have one entry per word")
        directory.parent.mkdir(parents=True, exist_ok=True)
        _sweep_dead_creates(directory)
        tmp = directory.with_name(f"{layout.creating_prefix(directory)}{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)  # a same-pid leftover (pid reused)
        tmp.mkdir(parents=True)
        try:
            cls._fill_new(tmp, vocabulary, idf, model_dir, fingerprint, stop_words, classes,
                          scales)
            write_decisions(tmp, decisions)  # in the new index before it is in place
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if directory.exists():
            if any(directory.iterdir()):
                shutil.rmtree(tmp)
                raise IndexDirError(f"{directory}: folder exists and is not empty; choose "
                                    "another --index folder")
            directory.rmdir()
        tmp.rename(directory)
        fsync_dir(directory.parent)
        return cls.open(directory, writable=True)

    @staticmethod
    def _fill_new(tmp: Path, vocabulary, idf, model_dir, fingerprint, stop_words,
                  classes, scales=None) -> None:
        Catalog.create(tmp, {
            "vocabulary": list(vocabulary),
            "idf": idf.tolist(),
            # a stop word that is a vocabulary word is searchable ("detail" in Corel 5k)
            "stop_words": sorted(set(stop_words) - set(vocabulary)),
            "model_dir": str(Path(model_dir).resolve()) if model_dir else "",
            "model_fingerprint": fingerprint,
            "classes": list(classes),
            **layout.scales_meta(scales, len(vocabulary)),
            "shards": [],  # no score matrix until the first picture
        })

    @classmethod
    def open(cls, directory, writable: bool = False) -> Self:
        """An existing index; writable takes the writer lock (IndexDirError if held), and
        tidies and upgrades the folder (layout.upgrade)."""
        directory = Path(directory)
        catalog = Catalog.open(directory, writable)
        lock = None
        try:
            lock = _writer_lock(directory) if writable else None
            index = cls(directory, catalog, writable, lock)
        except BaseException:
            catalog.close()
            if lock is not None:
                lock.close()
            raise
        if writable:
            index._matrix.remove_orphans()
            _sweep_dead_creates(directory)
            layout.upgrade(catalog, index._matrix.layout())
        return index

    @classmethod
    def destroy(cls, directory: str | Path) -> None:
        """Delete an index folder's own files, never anything else a person put there, and
        the folder if that empties it. Refused while a `pamir index` is writing it."""
        directory = Path(directory)
        if not directory.is_dir():
            return
        with _writer_lock(directory):
            for p in layout.own_files(directory):
                p.unlink()
            shutil.rmtree(directory / layout.THUMBNAILS, ignore_errors=True)
            for p in (directory / layout.FOLDER_LOOK, *directory.glob(f".{layout.FOLDER_LOOK}.*")):
                shutil.rmtree(p, ignore_errors=True)  # with what a killed save left beside it
            (directory / layout.WRITER_LOCK).unlink(missing_ok=True)
        if not any(directory.iterdir()):
            directory.rmdir()

    @classmethod
    def rebuild(cls, directory, vocabulary: Sequence[str], idf: np.ndarray,
                **create_options) -> Self:
        """A new empty index in place of whatever index is in `directory` (another model's,
        a damaged one): `destroy` then `create`. What editors decided about people (names
        given, people merged, "not this person") is read first and carried into the new
        index, whose faces pass finds the same faces again (names given on the
        page survive re-indexing)."""
        kept = read_decisions(directory)
        cls.destroy(directory)
        return cls.create(directory, vocabulary, idf, decisions=kept, **create_options)

    @property
    def thumbnails_dir(self) -> Path:
        """Where the server caches thumbnails (it may not exist yet)."""
        return self.directory / layout.THUMBNAILS

    def close(self) -> None:
        with self._lock:
            self._matrix.close()
            self._catalog.close()
            if self._writer_lock is not None:
                self._writer_lock.close()  # releases the flock
                self._writer_lock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ the committed state
    def _load(self) -> None:
        """(Re)read what searching needs: vocabulary, the matrix and its live columns, all
        from one committed state. Another process may commit a new layout and delete the
        files of this one meanwhile: then the newer state is read."""
        with self._lock:
            for attempt in range(_LOAD_TRIES):
                # read before the state: a commit in between only makes the next refresh
                # read again
                version = self._catalog.data_version()
                try:
                    with self._catalog.snapshot():
                        self._load_state()
                except FileNotFoundError:
                    if attempt == _LOAD_TRIES - 1:
                        raise
                    continue
                self._data_version = version
                return

    def _load_state(self) -> None:
        """The state `_load` reads, inside its snapshot."""
        meta = self._catalog.meta
        self.vocabulary: list[str] = meta("vocabulary")
        self.word_index = {w: t for t, w in enumerate(self.vocabulary)}
        self.idf = np.asarray(meta("idf"), dtype=np.float64)
        self.stop_words = frozenset(meta("stop_words") or ())
        self.model_dir: str = meta("model_dir") or ""
        self.model_fingerprint: str = meta("model_fingerprint") or ""
        self.classes: list[str] = meta("classes") or []
        scales = meta("scales")  # None: an index from before them, or a model with no prior
        self.scales = None if scales is None else np.asarray(scales, dtype=np.float64)
        self._moves = meta("moves") or 0  # compactions that moved pictures, as of this state
        self._matrix = ScoreMatrix(self.directory, self.rows, layout.shards_of(meta),
                                   int(meta("generation") or 0), self._writable,
                                   words=self.T or self.rows)  # zero-caption: the classes
        cols_ids = self._live_columns()
        self._matrix.assign(cols_ids[:, 0], cols_ids[:, 1])
        for forget in self._on_reload:
            forget()

    def _live_columns(self) -> np.ndarray:
        """(n, 2) (column, id) of this state's pictures (inside _load's snapshot): from the
        copy a reader of the same state left (named by the catalogue's commit count, checked
        against its count and largest column), else from the catalogue, then copied."""
        commits = self._catalog.meta("commits")
        copy = layout.columns_copy(self.directory, commits)
        if commits is not None and copy.is_file():
            try:
                cols_ids = np.load(copy, allow_pickle=False)
                n, last = self._catalog.column_extent()
                if (cols_ids.shape == (n, 2) and cols_ids.dtype == np.int64
                        and (n == 0 or int(cols_ids[:, 0].max()) == last)):
                    return cols_ids
            except (OSError, ValueError):
                pass  # gone (a newer state's reader replaced it) or damaged: read again
        cols_ids = self._catalog.live_columns()
        if commits is not None and len(cols_ids) >= COLUMNS_COPY_FROM:
            try:
                buf = io.BytesIO()
                np.save(buf, cols_ids, allow_pickle=False)
                atomic_write(copy, lambda f: f.write(buf.getvalue()))
                for old in layout.columns_copies(self.directory):
                    if old != copy:
                        old.unlink(missing_ok=True)
            except OSError:
                pass  # a read-only folder: read from the catalogue each time
        return cols_ids

    def refresh(self) -> bool:
        """Re-read the catalogue if another process committed to it; True if it did."""
        with self._lock:
            if self._catalog.data_version() != self._data_version:
                self._load()
                return True
            return False

    @property
    def T(self) -> int:
        return len(self.vocabulary)

    @property
    def rows(self) -> int:
        """Rows of the score matrix: the T words, then the C class probabilities if any."""
        return len(self.vocabulary) + len(self.classes)

    @property
    def space(self) -> int:
        """The rows pictures are compared on (`similar`, `vector`): the T words, or for an
        index with no vocabulary (the zero-caption system) the C class probabilities."""
        return self.T or self.rows

    def __len__(self) -> int:
        return len(self._matrix)

    def _moved(self) -> bool:
        """Whether a compaction has moved pictures to other columns since this reader's state
        was read: the catalogue's columns (folders, `vector`) would then not be this state's."""
        return (self._catalog.meta("moves") or 0) != self._moves

    # ------------------------------------------------------------------ pictures
    def picture(self, picture_id: int) -> Picture | None:
        with self._lock:
            return self._catalog.picture(picture_id)

    def pictures(self, state: str | None = None) -> list[Picture]:
        """Every picture ('ok' or 'failed' ones only if `state` says so), by id."""
        with self._lock:
            return self._catalog.pictures(state)

    def id_of_path(self, path: str | Path) -> int | None:
        """The id of the indexed picture at this path (resolved), if any."""
        with self._lock:
            return self._catalog.id_of_path(str(Path(path).resolve()))

    def same_bytes(self, digest: str, other_than: str) -> int | None:
        """The id of an indexed picture with this content hash at another path, if any."""
        with self._lock:
            return self._catalog.with_hash(digest, other_than)

    def vector(self, picture_id: int, classes: bool = False) -> np.ndarray:
        """The picture's text-space vector z (T,), a copy; with `classes`, followed by its
        class probabilities (T + C,)."""
        with self._lock:
            for _ in range(STALE_TRIES):
                with self._catalog.snapshot():  # its column and whether columns moved
                    moved, p = self._moved(), self._catalog.picture(picture_id)
                if not moved:
                    break
                self._load()
            if p is None or p.col is None:
                raise KeyError(picture_id)
            column = self._matrix.column(p.col)
            return column if classes else column[: self.space]

    def frames_of(self, ids: Iterable[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """{id: (frame times (f,), frame rows (f x rows))} of the videos among `ids`."""
        with self._lock:
            return self._catalog.frames.read(ids)

    def pass_todo(self, name: str) -> list[tuple[int, str, str]]:
        """(id, path, hash) of the pictures the pass `name` has not read as they are now."""
        with self._lock:
            return self._catalog.facts.pass_todo(name)

    def status(self) -> dict:
        with self._lock:
            counts = self._catalog.counts()
            return {
                "directory": str(self.directory),
                "schema_version": layout.SCHEMA_VERSION,
                "pictures": counts.get("ok", 0),
                "failed": counts.get("failed", 0),
                "vocabulary": self.T,
                "model_dir": self.model_dir,
                "capacity": self._matrix.capacity,
                "shards": len(self._matrix.shards),
                "segments": sum(self._matrix.segment_counts()),
                "unsorted": sum(self._matrix.tail_sizes()),
            }
