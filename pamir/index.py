"""The searchable index of a picture collection: a catalogue and a word-major score matrix.

An index is a directory:

- ``catalog.sqlite``: the schema version, the vocabulary and idf weights queries are built
  with, the model the scores come from, and one row per picture (id, path, size, mtime,
  content hash, caption if any, state, and its column in the score matrix).
- ``scores-<generation>.f32``: the text-space vectors of the pictures, stored word-major as a
  raw float32 (T x capacity) matrix and memory-mapped, so that a query reads only the rows of
  its words (a 3-word query over 1M pictures reads 12 MB, not 716 MB).

Crash safety. The catalogue is the single source of truth and changes only by SQLite
transactions. Score columns are written in place only into slots that no committed catalogue
row references (fresh or freed ones), flushed to disk, and only then committed; a crash in
between leaves an unreferenced slot, never a referenced half-written one. When the matrix must
grow, a new file is written, fsynced and committed under a new name, and the old one deleted;
files that no committed row names are deleted when the index is next opened for writing. So
an update can be interrupted at any point and run again: it resumes from the last committed
batch.

Scores are linear: score(picture, q) = z_picture . q, with q the normalised idf query vector
(pamir.text) and z the model's text-space vector. Models that score otherwise (DRCMRM) are not
served by this index.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .data import IMAGE_SUFFIXES
from .text import STOP_WORDS, tokenize

SCHEMA_VERSION = 1
CATALOG = "catalog.sqlite"
#: Pictures whose features are computed and committed together by `update`.
BATCH_SIZE = 256
MIN_CAPACITY = 1024

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE pictures (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    path TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    hash TEXT NOT NULL,
    caption TEXT,
    state TEXT NOT NULL CHECK (state IN ('ok', 'failed')),
    reason TEXT,
    col INTEGER UNIQUE,
    CHECK ((state = 'ok') = (col IS NOT NULL))
);
CREATE INDEX pictures_hash ON pictures (hash);
"""


class IndexDirError(ValueError):
    """An index that cannot be opened or used as asked; the message says what to do."""


class QueryError(ValueError):
    """A query that cannot be answered: empty, or no word of it in the vocabulary."""

    def __init__(self, message: str, unknown: Sequence[str] = ()):
        super().__init__(message)
        self.unknown = list(unknown)


@dataclass
class Picture:
    id: int
    path: str
    size: int
    mtime_ns: int
    hash: str
    caption: tuple[str, ...] | None
    state: str
    reason: str | None = None
    col: int | None = None


@dataclass
class Hit:
    id: int
    path: str
    score: float


@dataclass
class Query:
    """A parsed text query: its vector, the vocabulary words used and the unknown ones."""

    text: str
    vector: np.ndarray  # (T,) float32, L2-normalised idf weights
    words: list[str]
    unknown: list[str]


@dataclass
class UpdateReport:
    added: int = 0
    changed: int = 0
    renamed: int = 0
    copied: int = 0  # same bytes as a picture already indexed: vector reused
    removed: int = 0
    unchanged: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["failed"] = [{"path": p, "reason": r} for p, r in self.failed]
        return d


def file_hash(path: str | Path) -> str:
    """blake2b-128 of the file's bytes (the feature cache's identity for a picture)."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


def _writer_lock(directory: Path):
    """One writer at a time: two updates choosing the same free column would clash."""
    f = open(directory / ".writer.lock", "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise IndexDirError(f"{directory}: another `pamir index` is updating this index; "
                            "wait for it to finish") from None
    return f


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Index:
    """A picture index directory. Open with `Index.create(...)` or `Index.open(dir)`.

    Thread-safe: one lock serialises catalogue access (the server calls it from a pool).
    """

    def __init__(self, directory: Path, conn: sqlite3.Connection, writable: bool):
        self.directory = directory
        self._conn = conn
        self._writable = writable
        self._lock = threading.RLock()
        self._data_version = None
        self._load()

    # ------------------------------------------------------------------ creating and opening
    @classmethod
    def create(cls, directory, vocabulary: Sequence[str], idf: np.ndarray, *,
               model_dir: str | Path | None = None, fingerprint: str = "",
               stop_words: Iterable[str] = STOP_WORDS) -> "Index":
        """A new empty index. The directory is built aside and renamed into place, so a crash
        never leaves a half-made index; an existing index there is an error."""
        directory = Path(directory)
        if (directory / CATALOG).exists():
            raise IndexDirError(f"{directory}: an index already exists there; open it, or delete "
                                "the folder to start afresh")
        idf = np.asarray(idf, dtype=np.float64)
        if len(vocabulary) == 0 or idf.shape != (len(vocabulary),):
            raise IndexDirError(f"vocabulary of {len(vocabulary)} words with idf of shape "
                                f"{idf.shape}: both must have one entry per word")
        directory.parent.mkdir(parents=True, exist_ok=True)
        tmp = directory.with_name(f".{directory.name}.creating-{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(tmp / CATALOG)
        conn.executescript(_SCHEMA)
        meta = {
            "schema_version": SCHEMA_VERSION,
            "vocabulary": list(vocabulary),
            "idf": idf.tolist(),
            "stop_words": sorted(stop_words),
            "model_dir": str(Path(model_dir).resolve()) if model_dir else "",
            "model_fingerprint": fingerprint,
            "matrix": "",
            "capacity": 0,
        }
        conn.executemany("INSERT INTO meta VALUES (?, ?)",
                         [(k, json.dumps(v)) for k, v in meta.items()])
        conn.commit()
        conn.close()
        if directory.exists():
            if any(directory.iterdir()):
                raise IndexDirError(f"{directory}: folder exists and is not empty; choose another "
                                    "--index folder")
            directory.rmdir()
        tmp.rename(directory)
        _fsync_dir(directory.parent)
        return cls.open(directory, writable=True)

    @classmethod
    def open(cls, directory, writable: bool = False) -> "Index":
        directory = Path(directory)
        db = directory / CATALOG
        if not db.is_file():
            raise IndexDirError(f"{directory}: no index there (no {CATALOG}); build one with "
                                "`pamir index MODEL FOLDER --index DIR`")
        uri = f"file:{db}?mode={'rw' if writable else 'ro'}"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        try:
            version = json.loads(conn.execute(
                "SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])
        except (sqlite3.DatabaseError, TypeError) as e:
            conn.close()
            hint = "index again with `pamir index MODEL FOLDER --rebuild`, or use another --index"
            raise IndexDirError(f"{db}: not a pamir index catalogue ({e}); {hint}") from None
        if version != SCHEMA_VERSION:
            conn.close()
            raise IndexDirError(f"{db}: schema version {version}, this pamir reads "
                                f"{SCHEMA_VERSION}; rebuild the index")
        lock = None
        if writable:
            lock = _writer_lock(directory)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
        index = cls(directory, conn, writable)
        index._writer_lock = lock
        if writable:
            index._remove_orphan_matrices()
        return index

    def close(self) -> None:
        with self._lock:
            self._matrix = None
            self._conn.close()
            if getattr(self, "_writer_lock", None) is not None:
                self._writer_lock.close()  # releases the flock
                self._writer_lock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ in-memory state
    def _meta(self, key: str):
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def _set_meta(self, key: str, value) -> None:
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def _load(self) -> None:
        """(Re)read what searching needs: vocabulary, the matrix map, live columns."""
        with self._lock:
            self.vocabulary: list[str] = self._meta("vocabulary")
            self.word_index = {w: t for t, w in enumerate(self.vocabulary)}
            self.idf = np.asarray(self._meta("idf"), dtype=np.float64)
            self.stop_words = frozenset(self._meta("stop_words") or ())
            self.model_dir: str = self._meta("model_dir") or ""
            self.model_fingerprint: str = self._meta("model_fingerprint") or ""
            self._map_matrix()
            self._col_id = np.full(0, -1, dtype=np.int64)
            rows = self._conn.execute("SELECT col, id FROM pictures WHERE state = 'ok'")
            cols, ids = np.array(rows.fetchall(), dtype=np.int64).reshape(-1, 2).T
            self._mark(cols, ids)
            self._data_version = self._conn.execute("PRAGMA data_version").fetchone()[0]

    def _map_matrix(self) -> None:
        self._capacity = int(self._meta("capacity"))
        name = self._meta("matrix")
        self._matrix = None
        if name:
            mode = "r+" if self._writable else "r"
            self._matrix = np.memmap(self.directory / name, dtype=np.float32, mode=mode,
                                     shape=(self.T, self._capacity))

    def _mark(self, cols: np.ndarray, ids: np.ndarray | int) -> None:
        """Column -> picture id (-1: free), kept in step with each committed change."""
        cols = np.asarray(cols, dtype=np.int64)
        if len(cols) and cols.max() >= len(self._col_id):
            grown = np.full(int(cols.max()) + 1, -1, dtype=np.int64)
            grown[: len(self._col_id)] = self._col_id
            self._col_id = grown
        self._col_id[cols] = ids
        live = np.flatnonzero(self._col_id >= 0)
        self._width = int(live[-1]) + 1 if len(live) else 0
        self._col_id = self._col_id[: self._width]
        self._live = self._col_id >= 0

    def refresh(self) -> bool:
        """Re-read the catalogue if another process committed to it; True if it did."""
        with self._lock:
            if self._conn.execute("PRAGMA data_version").fetchone()[0] != self._data_version:
                self._load()
                return True
            return False

    @property
    def T(self) -> int:
        return len(self.vocabulary)

    def __len__(self) -> int:
        return int(self._live.sum())

    # ------------------------------------------------------------------ queries
    def parse_query(self, text: str) -> Query:
        """Tokenise `text` like captions are; raise QueryError if nothing searchable is left."""
        if not text or not text.strip():
            raise QueryError("empty query: type one or more words, e.g. \"tiger grass\"")
        words = list(dict.fromkeys(tokenize(text, self.stop_words)))
        known = [w for w in words if w in self.word_index]
        unknown = [w for w in words if w not in self.word_index]
        if not known:
            if not words:
                raise QueryError(f"query {text!r} has only stop words; use content words")
            common = [self.vocabulary[t] for t in np.argsort(self.idf, kind="stable")[:8]]
            raise QueryError(
                f"no word of the query is in the vocabulary: {', '.join(unknown)}; it has "
                f"{len(self.vocabulary)} words, e.g. {', '.join(common)}", unknown)
        q = np.zeros(self.T, dtype=np.float64)
        for w in known:
            q[self.word_index[w]] = self.idf[self.word_index[w]]
        q /= np.linalg.norm(q) or 1.0
        return Query(text, q.astype(np.float32), known, unknown)

    def scores(self, q: np.ndarray) -> np.ndarray:
        """z . q for every column (dead columns -inf), reading only the rows of q's words."""
        q = np.asarray(q, dtype=np.float32).ravel()
        if q.shape != (self.T,):
            raise ValueError(f"query vector of length {q.size}; the vocabulary has {self.T}")
        with self._lock:
            out = np.zeros(self._width, dtype=np.float32)
            for t in np.flatnonzero(q):
                out += q[t] * self._matrix[t, : self._width]
            out[~self._live] = -np.inf
        return out

    def search(self, q: np.ndarray | str, k: int = 10) -> list[Hit]:
        """The k best pictures for a query (text or a (T,) vector), best first."""
        if isinstance(q, str):
            q = self.parse_query(q).vector
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k = {k!r}: ask for at least one picture")
        with self._lock:
            s = self.scores(q)
            n = len(self)
            k = min(int(k), n)
            if k == 0:
                return []
            if k < len(s):
                # every picture tied with the k-th best competes, so that among equal scores
                # the smallest ids win and the top 3 are the first 3 of the top 8
                kth = s[np.argpartition(-s, k - 1)[k - 1]]
                top = np.flatnonzero(s >= kth)
            else:
                top = np.arange(len(s))
            # Highest score first; equal scores by id, so results are reproducible.
            ids = self._col_id[top]
            top = top[np.lexsort((ids, -s[top]))][:k]
            paths = self._paths_of(self._col_id[top])
            return [Hit(int(self._col_id[c]), paths[int(self._col_id[c])], float(s[c]))
                    for c in top]

    def _paths_of(self, ids: np.ndarray) -> dict[int, str]:
        ids = [int(i) for i in ids]
        rows = self._conn.execute(
            f"SELECT id, path FROM pictures WHERE id IN ({','.join('?' * len(ids))})", ids)
        return dict(rows.fetchall())

    # ------------------------------------------------------------------ pictures
    def picture(self, picture_id: int) -> Picture | None:
        with self._lock:
            row = self._conn.execute("SELECT * FROM pictures WHERE id = ?",
                                     (int(picture_id),)).fetchone()
        return None if row is None else _picture(row)

    def pictures(self, state: str | None = None) -> list[Picture]:
        sql, args = "SELECT * FROM pictures", ()
        if state:
            sql, args = sql + " WHERE state = ?", (state,)
        with self._lock:
            return [_picture(r) for r in self._conn.execute(sql + " ORDER BY id", args)]

    def vector(self, picture_id: int) -> np.ndarray:
        """The picture's text-space vector z (T,), a copy."""
        p = self.picture(picture_id)
        if p is None or p.col is None:
            raise KeyError(picture_id)
        with self._lock:
            return np.array(self._matrix[:, p.col], dtype=np.float32)

    def status(self) -> dict:
        with self._lock:
            counts = dict(self._conn.execute(
                "SELECT state, COUNT(*) FROM pictures GROUP BY state").fetchall())
            return {
                "directory": str(self.directory),
                "schema_version": SCHEMA_VERSION,
                "pictures": counts.get("ok", 0),
                "failed": counts.get("failed", 0),
                "vocabulary": self.T,
                "model_dir": self.model_dir,
                "capacity": self._capacity,
            }

    # ------------------------------------------------------------------ writing
    def _require_writable(self) -> None:
        if not self._writable:
            raise IndexDirError(f"{self.directory}: opened read-only")

    def add(self, entries: Sequence[dict], Z: np.ndarray) -> list[int]:
        """Insert pictures with their text-space rows Z (n x T), in one transaction.

        entries: dicts with path, size, mtime_ns, hash and optionally caption. A path already
        in the catalogue is replaced (its old column freed). Returns the new ids.
        """
        self._require_writable()
        Z = np.asarray(Z, dtype=np.float32)
        if Z.shape != (len(entries), self.T):
            raise ValueError(f"Z of shape {Z.shape}; expected ({len(entries)}, {self.T})")
        if not np.isfinite(Z).all():
            raise ValueError("Z has NaN or infinite scores; the model output is broken")
        with self._lock:
            cols = self._free_columns(len(entries))
            if len(entries):
                self._matrix[:, cols] = Z.T
                self._matrix.flush()  # on disk before any catalogue row points at it
            with self._conn:
                freed = self._delete_paths([str(e["path"]) for e in entries])
                ids = [self._insert(e, "ok", None, int(c)) for e, c in zip(entries, cols)]
            self._mark(freed, -1)
            self._mark(cols, ids)
            return ids

    def _delete_paths(self, paths: Sequence[str]) -> list[int]:
        """Delete catalogue rows by path (inside the caller's transaction); their columns."""
        freed = []
        for path in paths:
            row = self._conn.execute("DELETE FROM pictures WHERE path = ? RETURNING col",
                                     (path,)).fetchone()
            if row is not None and row[0] is not None:
                freed.append(row[0])
        return freed

    def add_failed(self, entry: dict, reason: str) -> None:
        """Record a picture that could not be read, so it is reported (and retried once the
        file changes) without stopping the update."""
        self._require_writable()
        with self._lock:
            with self._conn:
                freed = self._delete_paths([str(entry["path"])])
                self._insert(entry, "failed", reason, None)
            self._mark(freed, -1)

    def _insert(self, e: dict, state: str, reason: str | None, col: int | None) -> int:
        caption = e.get("caption")
        cur = self._conn.execute(
            "INSERT INTO pictures (path, size, mtime_ns, hash, caption, state, reason, col) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (str(e["path"]), int(e["size"]), int(e["mtime_ns"]), e["hash"],
             " ".join(caption) if caption else None, state, reason, col))
        return int(cur.lastrowid)

    def remove(self, ids: Iterable[int]) -> int:
        """Drop pictures by id (their columns become free). Returns how many were dropped."""
        self._require_writable()
        ids = [int(i) for i in ids]
        with self._lock:
            with self._conn:
                rows = [self._conn.execute("DELETE FROM pictures WHERE id = ? RETURNING col",
                                           (i,)).fetchone() for i in ids]
            self._mark([r[0] for r in rows if r is not None and r[0] is not None], -1)
        return sum(r is not None for r in rows)

    def move(self, picture_id: int, entry: dict) -> None:
        """A renamed file: same bytes, new path; its vector is kept."""
        self._require_writable()
        with self._lock, self._conn:
            self._conn.execute(
                "UPDATE pictures SET path = ?, size = ?, mtime_ns = ? WHERE id = ?",
                (str(entry["path"]), int(entry["size"]), int(entry["mtime_ns"]),
                 int(picture_id)))

    def touch(self, picture_id: int, entry: dict) -> None:
        """Same bytes, new mtime (a `touch`, a copy back): only the stat is updated."""
        self.move(picture_id, entry)

    def set_model(self, model_dir: str | Path, fingerprint: str) -> None:
        """Record where the model now lives (a moved model folder keeps its index)."""
        self._require_writable()
        with self._lock:
            with self._conn:
                self._set_meta("model_dir", str(Path(model_dir).resolve()))
                self._set_meta("model_fingerprint", fingerprint)
            self.model_dir, self.model_fingerprint = str(Path(model_dir).resolve()), fingerprint

    def set_caption(self, picture_id: int, caption: Sequence[str] | None) -> None:
        self._require_writable()
        with self._lock, self._conn:
            self._conn.execute("UPDATE pictures SET caption = ? WHERE id = ?",
                               (" ".join(caption) if caption else None, int(picture_id)))

    def _free_columns(self, n: int) -> np.ndarray:
        """n matrix columns that no committed row references, growing the matrix if needed."""
        free = np.flatnonzero(~self._live)[:n]
        free = np.concatenate([free, np.arange(self._width, self._width + n - len(free))])
        if len(free) and free.max() >= self._capacity:
            self._grow(max(2 * self._capacity, int(free.max()) + 1, MIN_CAPACITY))
        return free.astype(np.int64)

    def _grow(self, capacity: int) -> None:
        """Copy the matrix into a bigger new file, fsync it, then commit its name."""
        generation = int(self._meta("generation") or 0) + 1
        name = f"scores-{generation}.f32"
        path = self.directory / name
        new = np.memmap(path, dtype=np.float32, mode="w+", shape=(self.T, capacity))
        if self._matrix is not None:
            new[:, : self._capacity] = self._matrix
        new.flush()
        del new
        with open(path, "rb+") as f:
            os.fsync(f.fileno())
        _fsync_dir(self.directory)
        old = self._meta("matrix")
        with self._conn:
            self._set_meta("matrix", name)
            self._set_meta("capacity", capacity)
            self._set_meta("generation", generation)
        self._map_matrix()
        if old:
            (self.directory / old).unlink(missing_ok=True)

    def _remove_orphan_matrices(self) -> None:
        current = self._meta("matrix")
        for p in self.directory.glob("scores-*.f32"):
            if p.name != current:
                p.unlink(missing_ok=True)

    # ------------------------------------------------------------------ incremental update
    def update(self, folders: Sequence[str | Path], transform: Callable, *,
               captions: dict[str, Sequence[str]] | None = None,
               batch_size: int = BATCH_SIZE,
               progress: Callable[[int, int], None] | None = None) -> UpdateReport:
        """Bring the index in line with the pictures under `folders`.

        transform(paths) -> (Z (n x T) float32, ok (n,) bool): the system's pictures-to-text
        map. Unchanged files (same size and mtime) are skipped; files whose bytes are already
        indexed (renamed, copied, touched) reuse their vector; the others are computed in
        batches, each committed, so an interrupted update resumes where it stopped. Pictures
        that vanished from under `folders` are dropped. Unreadable pictures are recorded and
        reported, not fatal. progress(done, total) is called after each batch.
        """
        self._require_writable()
        report = UpdateReport()
        folders = [Path(f).resolve() for f in folders]
        for f in folders:
            if not f.is_dir():
                raise IndexDirError(f"{f}: not a folder; give folders of pictures to index")
        on_disk = scan_pictures(folders, exclude=self.directory.resolve())
        known = {p.path: p for p in self.pictures()}
        captions = {str(Path(k).resolve()): v for k, v in (captions or {}).items()}

        # Only a file with the size of an indexed picture can hold the same bytes: hash those
        # now (rename, copy, touch); the others are hashed with their batch, just before the
        # model reads them, so each new file is read from disk once.
        known_sizes = {p.size for p in known.values() if p.state == "ok"}
        todo: list[dict] = []
        for path, (size, mtime_ns) in on_disk.items():
            old = known.get(path)
            if old is not None and old.size == size and old.mtime_ns == mtime_ns:
                report.unchanged += 1
                if old.state == "failed":
                    report.failed.append((path, old.reason or "unreadable"))
                continue
            entry = {"path": path, "size": size, "mtime_ns": mtime_ns, "hash": None,
                     "caption": captions.get(path), "changed": old is not None}
            if size in known_sizes:
                if not self._hash(entry, report):
                    continue
                if old is not None and old.hash == entry["hash"] and old.state == "ok":
                    self.touch(old.id, entry)
                    report.unchanged += 1
                    continue
            todo.append(entry)

        vanished = {p.path: p for p in known.values()
                    if p.path not in on_disk and _under(p.path, folders)}
        todo = self._reuse_vectors(todo, vanished, report)
        if vanished:
            report.removed += self.remove(p.id for p in vanished.values())

        total = len(todo)
        for start in range(0, total, batch_size):
            batch = todo[start:start + batch_size]
            self._compute(batch, transform, report)
            if progress:
                progress(min(start + batch_size, total), total)
        return report

    def _reuse_vectors(self, todo: list[dict], vanished: dict[str, Picture],
                       report: UpdateReport) -> list[dict]:
        """Renamed files take their vanished twin's row; copies of indexed bytes copy a
        vector. Returns the entries that still need the model."""
        by_hash_vanished: dict[str, list[Picture]] = {}
        for p in vanished.values():
            if p.state == "ok":
                by_hash_vanished.setdefault(p.hash, []).append(p)
        rest = []
        for e in todo:
            if e["hash"] is None:  # no indexed picture has its size
                rest.append(e)
                continue
            twins = by_hash_vanished.get(e["hash"])
            if twins:
                p = twins.pop()
                del vanished[p.path]
                with self._lock:
                    with self._conn:  # a failed or stale row at the new path gives way
                        freed = self._delete_paths([e["path"]])
                    self._mark(freed, -1)
                self.move(p.id, e)
                report.renamed += 1
                continue
            same = self._conn.execute(
                "SELECT id FROM pictures WHERE hash = ? AND state = 'ok' AND path != ? "
                "LIMIT 1", (e["hash"], e["path"])).fetchone()
            if same is not None:
                self.add([e], self.vector(same[0])[None, :])
                report.copied += 1
                continue
            rest.append(e)
        return rest

    def _hash(self, entry: dict, report: UpdateReport) -> bool:
        """Fill entry["hash"]; an unreadable file is recorded and reported (False)."""
        try:
            entry["hash"] = file_hash(entry["path"])
            return True
        except OSError as e:
            entry["hash"] = ""
            reason = f"unreadable ({e.strerror or e})"
            self.add_failed(entry, reason)
            report.failed.append((entry["path"], reason))
            return False

    def _compute(self, batch: list[dict], transform: Callable, report: UpdateReport) -> None:
        batch = [e for e in batch if e["hash"] is not None or self._hash(e, report)]
        if not batch:
            return
        Z, ok = transform([e["path"] for e in batch])
        Z = np.asarray(Z, dtype=np.float32)
        ok = np.asarray(ok, dtype=bool)
        good = [e for e, o in zip(batch, ok) if o]
        self.add(good, Z[ok]) if good else None
        for e in good:
            if e["changed"]:
                report.changed += 1
            else:
                report.added += 1
        for e in (e for e, o in zip(batch, ok) if not o):
            reason = why_unreadable(e["path"])
            self.add_failed(e, reason)
            report.failed.append((e["path"], reason))


def top_words(z: np.ndarray, vocabulary: Sequence[str], k: int) -> list[dict]:
    """Annotation: the k highest-scoring words of a text-space vector z, best first."""
    z = np.asarray(z).ravel()
    k = min(int(k), len(vocabulary))
    top = np.argpartition(-z, k - 1)[:k]
    top = top[np.argsort(-z[top], kind="stable")]
    return [{"word": vocabulary[t], "score": float(z[t])} for t in top]


def scan_pictures(folders: Sequence[Path], exclude: Path | None = None
                  ) -> dict[str, tuple[int, int]]:
    """{path: (size, mtime_ns)} of the picture files under `folders` (resolved), recursively;
    hidden files and folders, and the `exclude` folder (the index's own thumbnails), are
    skipped."""
    found: dict[str, tuple[int, int]] = {}
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                                 and (exclude is None or Path(dirpath, d) != exclude))
            for name in sorted(filenames):
                if name.startswith(".") or Path(name).suffix.lower() not in IMAGE_SUFFIXES:
                    continue
                path = Path(dirpath, name)
                try:
                    st = path.stat()
                except OSError:
                    continue  # vanished or a dangling link
                if path.is_file():
                    # the path as found, a link not followed to its target: a link to a
                    # picture elsewhere is indexed under this folder, and dropped with it
                    found[str(path)] = (st.st_size, st.st_mtime_ns)
    return found


def _under(path: str, folders: Sequence[Path]) -> bool:
    return any(Path(path).is_relative_to(f) for f in folders)


def why_unreadable(path: str) -> str:
    """The decoder's one-line reason for a picture the system could not use."""
    try:
        from .features.images import ImageError, load_rgb
    except ImportError:  # pragma: no cover - features not installed
        return "could not be decoded"
    try:
        load_rgb(path)
    except ImageError as e:
        return str(e)
    return "no features could be computed"


def _picture(row) -> Picture:
    pid, path, size, mtime_ns, h, caption, state, reason, col = row
    return Picture(pid, path, size, mtime_ns, h, tuple(caption.split()) if caption else None,
                   state, reason, col)
