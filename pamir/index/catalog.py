"""The catalogue: one SQLite file, the index's single source of truth.

It holds `meta` (the schema version, the vocabulary and idf queries are built with, the model
the scores come from, and which score-matrix file is current) and one `pictures` row per
picture: id, path, size, mtime, content hash, caption if any, state ('ok' or 'failed' with the
reason), its column in the score matrix, and what pamir.facts.metadata read from its files: the
date taken (ISO, wall clock), where the caption came from, and its sidecars' stat (NULL: not
read yet, as in an index built before these columns). It changes only by SQLite transactions.

The file's name, its schema and version, and the upgrade of an older one are the folder's
format (pamir.index.layout). The catalogue is the one home of the index's SQL: this module
(the connection, `meta`, the pictures) and its parts, one module a concern, each a member of
`Catalog`: `catalog_facts` (facts and passes), `catalog_people` (faces, people, editors'
decisions), `catalog_looks` (looks and groups) and `catalog_frames` (videos' frames). They
know SQL and nothing of the score matrix or of folders; methods that write do so inside the
caller's `transaction()`, so the Index's parts decide what commits together
(tests/test_index_parts.py checks that no other module runs SQL).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import urllib.parse
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..facts.fact import FILE_KINDS, keyword_facts
from .catalog_facts import FactTables
from .catalog_frames import FrameTables
from .catalog_looks import LookTables
from .catalog_people import PeopleTables
from .catalog_base import Schema, marks, path_of, stored_path
from .layout import (CATALOG, CATALOG_SCHEMA, FACES_SCHEMA, FACTS_SCHEMA, FILE_PASSES,
                     FRAMES_SCHEMA, READABLE_VERSIONS, SCHEMA_VERSION, added_columns_sql)


class IndexDirError(ValueError):
    """An index that cannot be opened or used as asked; the message says what to do."""


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
    taken: str | None = None     # ISO date-time the picture was taken (pamir.facts.metadata)
    source: str | None = None    # where its caption came from
    sidecars: str | None = None  # its sidecars' stat when read; None: metadata never read
    position: str | None = None  # "lat,lon" in degrees where its files give one


class Catalog:
    """An open catalogue: its connection, transactions, `meta` and pictures, and its parts,
    one a concern, each the SQL of its tables: `facts` (and the passes), `people`, `looks`,
    `frames`. Not thread-safe by itself: the Index facade serialises calls."""

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn
        self._schema = Schema(conn)
        self.facts = FactTables(conn, self._schema)
        self.people = PeopleTables(conn, self._schema)
        self.looks = LookTables(conn, self._schema)
        self.frames = FrameTables(conn, self._schema)

    @property
    def columns(self) -> str:
        """The pictures columns read (Schema.columns)."""
        return self._schema.columns

    def upgrade(self) -> None:
        """Add the metadata columns, the facts and the faces tables an older catalogue lacks
        (inside the caller's transaction): its pictures' metadata is read at the next
        update, their captions' keywords become facts at once, their faces are found by the
        next `pamir index`."""
        have = {r[1] for r in self._conn.execute("PRAGMA table_info(pictures)")}
        for statement in added_columns_sql(have):
            self._conn.execute(statement)
        had_facts = self.has_facts
        for statement in FACTS_SCHEMA + FACES_SCHEMA + FRAMES_SCHEMA:
            self._conn.execute(statement)
        self._schema.forget()
        if not had_facts:
            rows = self._conn.execute("SELECT id, caption FROM pictures WHERE caption IS NOT NULL")
            self._write_keywords(rows.fetchall())
            # their files' other facts (a place, a camera) are read at the next update
            self._conn.execute("UPDATE pictures SET sidecars = NULL")

    @property
    def has_facts(self) -> bool:
        """Whether the catalogue has its facts table (Schema.has_facts)."""
        return self._schema.has_facts

    @property
    def keeps_positions(self) -> bool:
        """Whether the pictures table has the position column (schema 3 and later)."""
        return "NULL AS position" not in self.columns

    # ------------------------------------------------------------------ creating and opening
    @staticmethod
    def create(directory: Path, meta: dict) -> None:
        """Write a new catalogue with its schema and `meta` into `directory`."""
        conn = sqlite3.connect(Path(directory) / CATALOG)
        try:
            conn.executescript(CATALOG_SCHEMA)
            conn.executemany("INSERT INTO meta VALUES (?, ?)",
                             [(k, json.dumps(v))
                              for k, v in {"schema_version": SCHEMA_VERSION, **meta}.items()])
            conn.commit()
        finally:
            conn.close()

    @classmethod
    def open(cls, directory: Path, writable: bool) -> "Catalog":
        db = Path(directory) / CATALOG
        if not db.is_file():
            raise IndexDirError(f"{directory}: no index there (no {CATALOG}); build one with "
                                "`pamir index MODEL FOLDER --index DIR`")
        try:
            catalog = cls._connect(db, "rw" if writable else "ro")
        except IndexDirError as e:
            if writable or not _cannot_open(e.__cause__) or _writable_folder(db.parent):
                raise
            # A read-only folder: SQLite cannot make the -shm file a WAL reader needs. No
            # writer can commit here either (a writer takes its lock in this folder), so
            # the file is read as immutable, as long as no write-ahead log is pending.
            if Path(f"{db}-wal").exists() and Path(f"{db}-wal").stat().st_size:
                raise IndexDirError(
                    f"{directory}: the folder is read-only and the catalogue has changes not "
                    f"yet merged ({CATALOG}-wal); open the index once where the folder is "
                    "writable (any `pamir search` does), then it can be read here") from None
            catalog = cls._connect(db, "ro", immutable=True)
        # A search looks up its hits' paths: random rows of a catalogue that can hold
        # millions. Memory-mapped reads and a 64 MB page cache keep that off read(2).
        catalog._conn.execute("PRAGMA mmap_size = 17179869184")
        catalog._conn.execute("PRAGMA cache_size = -65536")
        if writable:
            # WAL: readers (the server) keep reading while `pamir index` commits; FULL: a
            # commit is on disk when it returns, since score columns are written before it.
            catalog._conn.execute("PRAGMA journal_mode = WAL")
            catalog._conn.execute("PRAGMA synchronous = FULL")
            # a deleted row is overwritten, not left in free pages: face embeddings are
            # biometric data (`pamir people --forget`, a picture's faces read again)
            catalog._conn.execute("PRAGMA secure_delete = ON")
        return catalog

    @classmethod
    def _connect(cls, db: Path, mode: str, immutable: bool = False) -> "Catalog":
        """A connection whose schema version was read (IndexDirError, caused by SQLite's
        error, if it cannot be)."""
        path = urllib.parse.quote(os.fsencode(Path(db).absolute()))  # '?', '#', '%' in names
        uri = f"file:{path}?mode={mode}" + ("&immutable=1" if immutable else "")
        # The server reads from a thread pool; the facade's lock serialises the calls.
        catalog = cls(sqlite3.connect(uri, uri=True, check_same_thread=False))
        try:
            catalog._check_version(db)
        except IndexDirError:
            catalog.close()
            raise
        return catalog

    def _check_version(self, db: Path) -> None:
        try:
            version = self.meta("schema_version")
        except sqlite3.DatabaseError as e:
            if _cannot_open(e):
                raise IndexDirError(
                    f"{db}: SQLite cannot open the catalogue ({e}); check that the index "
                    "folder and its files can be read (and, while another process may be "
                    "writing the index, written)") from e
            if _disk_trouble(e):  # the file may be fine: --rebuild would throw it away
                raise IndexDirError(
                    f"{db}: SQLite cannot read the catalogue ({e}); the disk is full or "
                    "failing: free some space (or check the disk) and run the command again; "
                    "the index is kept as it was") from e
            raise _not_a_catalogue(db, e) from e
        if version is None:
            raise _not_a_catalogue(db, "no schema version")
        if version not in READABLE_VERSIONS:
            raise IndexDirError(f"{db}: schema version {version}, this pamir reads "
                                f"{', '.join(map(str, READABLE_VERSIONS))}; rebuild the index "
                                "with `pamir index MODEL FOLDER --rebuild`")

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def transaction(self):
        """Commit what is done inside, or roll all of it back. Every commit is counted in
        meta `commits`: a number that names one committed state, under which readers may keep
        a copy of what they read of it (Index's columns file)."""
        with self._conn:
            yield
            self._conn.execute("INSERT INTO meta VALUES ('commits', '1') ON CONFLICT (key) DO "
                               "UPDATE SET value = CAST(value AS INTEGER) + 1")

    @contextmanager
    def snapshot(self):
        """Reads inside see one committed state (a read transaction), unless a transaction
        is already open on this connection."""
        if self._conn.in_transaction:
            yield
            return
        self._conn.execute("BEGIN")
        try:
            yield
        finally:
            self._conn.rollback()  # nothing was written: ends the read transaction

    def data_version(self) -> int:
        """Changes when another connection commits (the server sees `pamir index`'s work)."""
        return self._conn.execute("PRAGMA data_version").fetchone()[0]

    # ------------------------------------------------------------------ meta
    def meta(self, key: str):
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, **values) -> None:
        self._conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                               [(k, json.dumps(v)) for k, v in values.items()])

    # ------------------------------------------------------------------ reading pictures
    def picture(self, picture_id: int) -> Picture | None:
        row = self._conn.execute(f"SELECT {self.columns} FROM pictures WHERE id = ?",
                                 (int(picture_id),)).fetchone()
        return None if row is None else _picture(row)

    def pictures(self, state: str | None = None) -> list[Picture]:
        sql, args = f"SELECT {self.columns} FROM pictures", ()
        if state:
            sql, args = sql + " WHERE state = ?", (state,)
        return [_picture(r) for r in self._conn.execute(sql + " ORDER BY id", args)]

    def live_columns(self) -> np.ndarray:
        """(n, 2) int64: (column, id) of every picture with scores. Every reader (each
        `pamir search`) reads them all: SQLite joins them into one string that numpy parses,
        from the column index alone (a picture has a column exactly when its state is 'ok'),
        about a quarter of the time of fetching 1,000,000 rows as Python tuples."""
        (text,) = self._conn.execute("SELECT group_concat(col || ' ' || id, ' ') FROM pictures "
                                     "WHERE col IS NOT NULL").fetchone()
        if not text:
            return np.zeros((0, 2), dtype=np.int64)
        return np.fromstring(text, dtype=np.int64, sep=" ").reshape(-1, 2)

    def column_extent(self) -> tuple[int, int]:
        """(pictures with scores, their largest column; -1 if none), from the column index."""
        # two statements: together, SQLite reads every entry for max() too (3x slower)
        (n,) = self._conn.execute("SELECT count(*) FROM pictures WHERE col IS NOT NULL"
                                  ).fetchone()
        (last,) = self._conn.execute("SELECT max(col) FROM pictures").fetchone()
        return int(n), -1 if last is None else int(last)

    def hits_of(self, ids: Iterable[int]) -> dict[int, tuple]:
        """{id: (path, col, mtime_ns, taken, caption)} of these pictures, read in one
        statement (so from one committed state); ids no longer in the catalogue are
        missing."""
        ids = [int(i) for i in ids]
        if not ids:
            return {}
        taken = "taken" if "NULL AS taken" not in self.columns else "NULL"
        rows = self._conn.execute(
            f"SELECT id, path, col, mtime_ns, {taken}, caption FROM pictures WHERE id IN "
            f"({marks(ids)})", ids)
        return {i: (path_of(p), c, m, t, tuple(cap.split()) if cap else None)
                for i, p, c, m, t, cap in rows.fetchall()}

    def columns_taken(self, ranges: Sequence[tuple[str, str]]) -> list[int]:
        """Columns of the 'ok' pictures taken on a day within one of the closed ranges
        ("YYYY-MM-DD", "YYYY-MM-DD")."""
        if not ranges or "NULL AS taken" in self.columns:
            return []
        where = " OR ".join("substr(taken, 1, 10) BETWEEN ? AND ?" for _ in ranges)
        rows = self._conn.execute(
            f"SELECT col FROM pictures WHERE state = 'ok' AND ({where})",
            [d for r in ranges for d in r])
        return [r[0] for r in rows.fetchall()]

    def paths_of(self, ids: Iterable[int]) -> dict[int, str]:
        ids = [int(i) for i in ids]
        rows = self._conn.execute(
            f"SELECT id, path FROM pictures WHERE id IN ({marks(ids)})", ids)
        return {i: path_of(p) for i, p in rows.fetchall()}

    def columns_under(self, patterns: Sequence[str]) -> list[int]:
        """Columns of the 'ok' pictures whose path matches one of the LIKE patterns."""
        if not patterns:
            return []
        clauses = [_path_like(p) for p in patterns]
        where = " OR ".join(sql for sql, _ in clauses)
        rows = self._conn.execute(
            f"SELECT col FROM pictures WHERE state = 'ok' AND ({where})",
            [a for _, args in clauses for a in args])
        return [r[0] for r in rows.fetchall()]

    def mtimes_of(self, ids: Iterable[int]) -> dict[int, int]:
        ids = [int(i) for i in ids]
        rows = self._conn.execute(
            f"SELECT id, mtime_ns FROM pictures WHERE id IN ({marks(ids)})", ids)
        return dict(rows.fetchall())

    def id_of_path(self, path: str) -> int | None:
        row = self._conn.execute("SELECT id FROM pictures WHERE path = ? AND state = 'ok'",
                                 (stored_path(path),)).fetchone()
        return None if row is None else int(row[0])

    def with_hash(self, digest: str, other_than: str) -> int | None:
        """The id of an indexed picture with these bytes at another path, if any."""
        row = self._conn.execute(
            "SELECT id FROM pictures WHERE hash = ? AND state = 'ok' AND path != ? LIMIT 1",
            (digest, stored_path(other_than))).fetchone()
        return None if row is None else int(row[0])

    def counts(self) -> dict[str, int]:
        """Pictures per state."""
        return dict(self._conn.execute(
            "SELECT state, COUNT(*) FROM pictures GROUP BY state").fetchall())

    def positions(self) -> list[tuple[int, int, str]]:
        """(id, column, "lat,lon") of the scored pictures whose files give a position
        (pamir.facts.nearby, the map, the places pass)."""
        if not self.keeps_positions:
            return []
        rows = self._conn.execute("SELECT id, col, position FROM pictures WHERE col IS NOT "
                                  "NULL AND position IS NOT NULL ORDER BY id")
        return rows.fetchall()

    # ------------------------------------------------------------------ writing pictures
    # Inside the caller's transaction; those that delete rows return the columns they freed.
    def insert(self, entry: dict, state: str, reason: str | None, col: int | None) -> int:
        caption = entry.get("caption")
        cur = self._conn.execute(
            "INSERT INTO pictures (path, size, mtime_ns, hash, caption, state, reason, col, "
            "taken, source, sidecars, position) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (stored_path(entry["path"]), int(entry["size"]), int(entry["mtime_ns"]), entry["hash"],
             _caption_text(caption), state, _text(reason), col, *_metadata_of(entry)))
        self._write_file_facts(cur.lastrowid, entry)
        return int(cur.lastrowid)

    def insert_ok(self, entries: Sequence[dict], cols: Sequence[int]) -> list[int]:
        """Insert scored pictures, entry i owning column cols[i], in one statement; their
        ids in the entries' order (found by column, which is unique)."""
        cols = [int(c) for c in cols]
        self._conn.executemany(
            "INSERT INTO pictures (path, size, mtime_ns, hash, caption, state, reason, col, "
            "taken, source, sidecars, position) VALUES (?, ?, ?, ?, ?, 'ok', NULL, ?, ?, ?, ?, ?)",
            [(stored_path(e["path"]), int(e["size"]), int(e["mtime_ns"]), e["hash"],
              _caption_text(e.get("caption")), c, *_metadata_of(e))
             for e, c in zip(entries, cols)])
        if not cols:
            return []
        rows = self._conn.execute("SELECT col, id FROM pictures WHERE col BETWEEN ? AND ?",
                                  (min(cols), max(cols))).fetchall()
        by_col = dict(rows)
        ids = [int(by_col[c]) for c in cols]
        for i, e in zip(ids, entries):
            self._write_file_facts(i, e)
            if e.get("frames") is not None:  # a video: its frames' times and rows
                self.frames.write(i, *e["frames"])
        return ids

    def checkpoint(self) -> None:
        """Merge the write-ahead log into the catalogue and empty it (after a compaction,
        whose moves leave a log about half the catalogue's size until the last connection
        closes); a reader in the way only makes it do less."""
        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def move_columns(self, old: Sequence[int], new: Sequence[int]) -> None:
        """The pictures of columns old[i] now own columns new[i] (a compaction's reorder);
        meta "moves" counts such moves, so that a reader knows its columns are stale.
        col is UNIQUE and SQLite checks that row by row, so every moved picture goes through
        a column of its own below zero first; the moves are joined from a temporary table
        (one statement: at 1M pictures, 3x faster than an UPDATE per picture)."""
        c = self._conn
        c.execute("CREATE TEMP TABLE IF NOT EXISTS moved (old INTEGER PRIMARY KEY, new INTEGER)")
        c.execute("DELETE FROM moved")
        moved = [(int(o), int(n)) for o, n in zip(old, new) if o != n]
        if not moved:
            return
        c.executemany("INSERT INTO moved VALUES (?, ?)", moved)
        c.execute("UPDATE pictures SET col = -1 - moved.new FROM moved "
                  "WHERE pictures.col = moved.old")
        c.execute("UPDATE pictures SET col = -1 - col WHERE col < 0")
        c.execute("DELETE FROM moved")
        self.set_meta(moves=(self.meta("moves") or 0) + 1)  # readers reload on a change

    def delete_paths(self, paths: Sequence[str], keep_id: int | None = None) -> list[int]:
        """Delete the rows of these paths (but the row `keep_id`)."""
        rows = [self._conn.execute(
            "DELETE FROM pictures WHERE path = ? AND id IS NOT ? RETURNING col",
            (stored_path(path), keep_id)).fetchone() for path in paths]
        return [r[0] for r in rows if r is not None and r[0] is not None]

    def delete_ids(self, ids: Sequence[int]) -> tuple[int, list[int]]:
        """(how many rows were deleted, their columns)."""
        rows = [self._conn.execute("DELETE FROM pictures WHERE id = ? RETURNING col",
                                   (int(i),)).fetchone() for i in ids]
        rows = [r for r in rows if r is not None]
        return len(rows), [r[0] for r in rows if r[0] is not None]

    def set_stat(self, picture_id: int, entry: dict) -> None:
        """A new path, size and mtime for the same bytes."""
        self._conn.execute(
            "UPDATE pictures SET path = ?, size = ?, mtime_ns = ? WHERE id = ?",
            (stored_path(entry["path"]), int(entry["size"]), int(entry["mtime_ns"]),
             int(picture_id)))
        if entry.get("sidecars") is not None:  # read for the new path: its sidecars, its date
            self.set_metadata(picture_id, entry)

    def set_caption(self, picture_id: int, caption: Sequence[str] | None) -> None:
        self._conn.execute("UPDATE pictures SET caption = ? WHERE id = ?",
                           (_caption_text(caption), int(picture_id)))
        self._write_keywords([(picture_id, caption)])

    def set_metadata(self, picture_id: int, entry: dict) -> None:
        """The caption, date taken, source, sidecars' stat and position read again (a
        sidecar changed; an index built before these columns)."""
        self._conn.execute(
            "UPDATE pictures SET caption = ?, taken = ?, source = ?, sidecars = ?, position = ? "
            "WHERE id = ?",
            (_caption_text(entry.get("caption")), *_metadata_of(entry), int(picture_id)))
        self._write_file_facts(picture_id, entry)
        if self.has_facts:  # the passes that read the files too read them again
            self.facts.forget_passes(picture_id, FILE_PASSES)

    # ------------------------------------------------------------------ the files' facts
    def _write_file_facts(self, picture_id: int, entry: dict) -> None:
        """The facts an entry's files gave: its caption's keywords, and where its metadata
        was read, the facts of FILE_KINDS it holds (`entry["facts"]`: a place, a camera)."""
        self._write_keywords([(picture_id, entry.get("caption"))])
        if entry.get("sidecars") is not None:  # metadata read: its facts, none included
            self.facts.replace(picture_id, FILE_KINDS, entry.get("facts") or ())

    def _write_keywords(self, captions: Iterable[tuple[int, object]]) -> None:
        """Keyword facts from captions: (id, words or the stored space-joined text)."""
        for picture_id, caption in captions:
            words = caption.split() if isinstance(caption, str) else caption
            self.facts.replace(picture_id, ("keyword",), keyword_facts(words))


def _cannot_open(e: BaseException | None) -> bool:
    """Whether SQLite failed to open the files (permissions, a read-only folder), not to
    read a database in them."""
    return isinstance(e, sqlite3.OperationalError) and (
        "unable to open" in str(e) or "readonly" in str(e) or "read-only" in str(e))


def _disk_trouble(e: BaseException | None) -> bool:
    """Whether SQLite failed for want of space or a working disk, not for what a file holds."""
    return isinstance(e, sqlite3.OperationalError) and (
        "disk is full" in str(e) or "disk I/O error" in str(e))


def _writable_folder(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def _not_a_catalogue(db: Path, why) -> IndexDirError:
    return IndexDirError(f"{db}: not a pamir index catalogue ({why}); index again with "
                         "`pamir index MODEL FOLDER --rebuild`, or use another --index")


def _path_like(pattern: str) -> tuple[str, list]:
    """SQL for `path LIKE pattern`. A pattern that is not UTF-8 (a folder whose name is
    not), which LIKE cannot compare, is matched on the stored bytes instead: the patterns
    `folder_patterns` makes are a literal prefix (`L%`) or a literal run (`%L%`)."""
    stored = stored_path(pattern)
    if isinstance(stored, str):
        return "path LIKE ? ESCAPE '\\'", [stored]
    inner = pattern[1:] if pattern.startswith("%") else pattern
    literal = re.sub(r"\\(.)", r"\1", inner[:-1] if inner.endswith("%") else inner)
    raw = os.fsencode(literal)
    if pattern.startswith("%"):
        return "instr(CAST(path AS BLOB), ?) > 0", [raw]
    return "substr(CAST(path AS BLOB), 1, ?) = ?", [len(raw), raw]


def _text(value: str | None) -> str | None:
    """Text for display (a reason, a caption) that SQLite can store: lone
    surrogates (from a name that is not UTF-8) written as escapes."""
    if value is None:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return value


def _caption_text(caption: Sequence[str] | None) -> str | None:
    return _text(" ".join(caption)) if caption else None


def _metadata_of(entry: dict) -> tuple:
    """(taken, source, sidecars, position) of an entry; sidecars None when its metadata was
    not read (an entry made without pamir.facts.metadata: the next update reads it)."""
    position = entry.get("position")
    return (entry.get("taken"), _text(entry.get("source")),
            _text(entry["sidecars"]) if entry.get("sidecars") is not None else None,
            f"{position[0]:.6f},{position[1]:.6f}" if position else None)


def _picture(row) -> Picture:
    pid, path, size, mtime_ns, digest, caption, state, reason, col, *meta = row
    return Picture(pid, path_of(path), size, mtime_ns, digest,
                   tuple(caption.split()) if caption else None, state, reason, col, *meta)
