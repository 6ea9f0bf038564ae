"""The searchable index of a picture collection, kept in one folder.

The package has five rooms. `layout` is the folder's on-disk format: every file's name, the
catalogue's schema and version, the score matrix's file layout, the migrations of an older
index. `catalog` is the SQLite catalogue, the single source of truth: vocabulary, idf and
model in `meta`, one row per picture. `scores` is the memory-mapped word-major score matrix,
made of its jobs (`columns`, `scoring`, `compaction`, sized by `tuning`). `sync` walks folders
and brings the index in line with them: hashes, renames, copies, removals, batches,
unreadable pictures. This module is the facade over them: `Index` opens, creates, rebuilds
and destroys an index folder, parses queries and searches, so that the CLI and the server
never spell a file name.

Crash safety. The catalogue changes only by SQLite transactions, and a score column is on disk
before any committed row points at it (see `scores`), so an update can be interrupted at any
point and run again: it resumes from the last committed batch. A new index is built aside and
renamed into place, so a crash never leaves a half-made one.

Scores are linear: score(picture, q) = z_picture . q, with q the query's vector (pamir.query:
the normalised idf vector of TPAMI §III-A for plain words, with weights, exclusions and words
mapped onto the vocabulary by pamir.bridge) and z the model's text-space vector. Models that
score otherwise (DRCMRM) are not served by this index.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

import numpy as np

from ..calibration import Calibration, floor_of, line_probability, load_calibration
from ..bridge import CLASS_MIX, Bridge
from ..config import default_cache_dir
from ..query import Query, QuerySyntaxError, parse, resolve
from ..storage import atomic_write, fsync_dir, pid_alive
from ..zeroshot import ClassWords, mass_score
from ..text import STOP_WORDS
from . import layout, tuning
from .catalog import Catalog, IndexDirError, Picture
from .layout import CATALOG, SCHEMA_VERSION
from .scores import ScoreMatrix
from .sync import BATCH_SIZE, Transform, UpdateReport, file_hash, scan_pictures
from .sync import update as sync_update

#: How many `in:` filters' columns a reader keeps for its state.
FOLDERS_KEPT = 64
#: A reader copies the (column, id) map of its committed state into the folder
#: (layout.columns_copy) from this many pictures up: reading the map from SQLite costs about
#: 0.3 s at 1,000,000 pictures, on every `pamir search`; the copy, about 40 ms (profiled).
COLUMNS_COPY_FROM = 100_000
#: How often a reader re-reads the index when another process's commits keep changing what
#: it reads (a state's files deleted after a newer commit, a hit's picture removed).
_LOAD_TRIES = 20
_SEARCH_TRIES = 20
#: A class part certain of its classes (a mass score of 1) counts as a text score this many
#: standard deviations over the pictures' mean. Standardising the class part too, as before,
#: let one confident picture among pictures with none score sqrt(n) deviations and swamp
#: every word of the query (a standard score of 15 against 3 for the next picture).
CLASS_SCALE = 3.0
#: Whether the model's own words that name ImageNet classes reach them too (mixed as a word
#: outside the vocabulary is). Measured on the Corel 5k validation pictures by
#: benchmarks/bench_zero_caption.py, for a model fitted on n captioned pictures: all-query
#: AvgP +0.9, +0.8, +1.0 for n = 50, 200, 1,000 and -0.4 for 4,000, each within the
#: validation set's noise (about 1.5). Off: it takes every such word off the sorted lists'
#: top-k onto a scan of every picture (a served query at 1,000,000 pictures: p50 34 ms
#: against 3 ms, benchmarks/bench_search_latency.py), for a gain validation cannot confirm.
TABLE_WORDS = False
#: Set to 0 to keep queries to the vocabulary and its inflections (no embedding model).
EMBEDDINGS_ENV = "PAMIR_EMBEDDINGS"


def embeddings_enabled() -> bool:
    return os.environ.get(EMBEDDINGS_ENV, "1").strip().lower() not in ("0", "no", "off", "false")


class QueryError(ValueError):
    """A query that cannot be answered: empty, or no word of it in the vocabulary."""

    def __init__(self, message: str, unknown: Sequence[str] = ()):
        super().__init__(message)
        self.unknown = list(unknown)


class _Stale(Exception):
    """A hit's picture was removed by another process after this reader's last refresh."""


@dataclass
class Hit:
    id: int
    path: str
    score: float
    taken: str | None = None  # ISO date-time taken (pamir.metadata; None: not read yet)
    caption: list[str] | None = None  # the caption's words, from a table or the files
    #: the calibrated probability that the picture is relevant (pamir.calibration); None
    #: where the model has no calibration or the query is not made of its words
    probability: float | None = None


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
    import sys  # noqa: PLC0415

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


class Index:
    """A picture index folder. Get one with `Index.create`, `Index.open` or `Index.rebuild`.

    Thread-safe: one lock serialises catalogue and matrix access (the server calls it from a
    pool). Opened writable, it holds the folder's writer lock until closed.
    """

    def __init__(self, directory: Path, catalog: Catalog, writable: bool, lock: IO | None):
        self.directory = directory
        self._catalog = catalog
        self._writable = writable
        self._writer_lock = lock
        self._lock = threading.RLock()
        self._load()

    # ------------------------------------------------------------------ the folder
    @staticmethod
    def exists(directory: str | Path) -> bool:
        """Whether an index (perhaps a damaged one) is in `directory`."""
        return (Path(directory) / CATALOG).exists()

    @classmethod
    def create(cls, directory, vocabulary: Sequence[str], idf: np.ndarray, *,
               model_dir: str | Path | None = None, fingerprint: str = "",
               stop_words: Iterable[str] = STOP_WORDS, classes: Sequence[str] = ()) -> "Index":
        """A new empty index, open for writing. The folder is built aside and renamed into
        place, so a crash never leaves a half-made index (the aside folder of a creator
        killed before the rename is deleted by the next create or writer); an existing index
        there is an error. classes: the ImageNet class names of a CNN representation, whose
        probabilities are stored after the T word scores (each picture's column then has
        T + C rows: see pamir.system.index_transform)."""
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
            cls._fill_new(tmp, vocabulary, idf, model_dir, fingerprint, stop_words, classes)
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
                  classes) -> None:
        Catalog.create(tmp, {
            "vocabulary": list(vocabulary),
            "idf": idf.tolist(),
            # a stop word that is a vocabulary word is searchable ("detail" in Corel 5k)
            "stop_words": sorted(set(stop_words) - set(vocabulary)),
            "model_dir": str(Path(model_dir).resolve()) if model_dir else "",
            "model_fingerprint": fingerprint,
            "classes": list(classes),
            "shards": [],  # no score matrix until the first picture
        })

    @classmethod
    def open(cls, directory, writable: bool = False) -> "Index":
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
            (directory / layout.WRITER_LOCK).unlink(missing_ok=True)
        if not any(directory.iterdir()):
            directory.rmdir()

    @classmethod
    def rebuild(cls, directory, vocabulary: Sequence[str], idf: np.ndarray,
                **create_options) -> "Index":
        """A new empty index in place of whatever index is in `directory` (another model's,
        a damaged one): `destroy` then `create`."""
        cls.destroy(directory)
        return cls.create(directory, vocabulary, idf, **create_options)

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

    # ------------------------------------------------------------------ in-memory state
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
        old = getattr(self, "_bridge", None)
        self._bridge = old if old is not None and old.vocabulary == self.vocabulary else None
        self._mean = None  # the pictures' mean text-space vector, for `similar`
        self.classes: list[str] = meta("classes") or []
        self._moves = meta("moves") or 0  # compactions that moved pictures, as of this state
        self._class_words = None
        key = (self.model_dir, self.model_fingerprint)
        if getattr(self, "_calibration_key", None) != key:
            self._calibration_key, self._calibration = key, False  # False: not read yet
        self._folder_columns: dict[tuple, np.ndarray] = {}  # `_columns_under`, this state's
        self._matrix = ScoreMatrix(self.directory, self.rows, layout.shards_of(meta),
                                   int(meta("generation") or 0), self._writable,
                                   words=self.T or self.rows)  # zero-caption: the classes
        cols_ids = self._live_columns()
        self._matrix.assign(cols_ids[:, 0], cols_ids[:, 1])

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

    # ------------------------------------------------------------------ queries
    @property
    def bridge(self) -> Bridge:
        """Unknown words onto the vocabulary (pamir.bridge): its embeddings are cached in
        the index folder, the model loaded on the first word that needs it."""
        with self._lock:
            if self._bridge is None:
                self._bridge = Bridge(self.vocabulary, cache_dir=self.directory)
            return self._bridge

    def parse_query(self, text: str, *, mapping: bool | None = None) -> Query:
        """Read a query (the grammar of pamir.query) and resolve it on the vocabulary: words
        outside it go through the bridge (inflections, then the embedding model unless
        `mapping` is False or $PAMIR_EMBEDDINGS is 0). QueryError if nothing searchable is
        left, or for a bad option."""
        if not text or not text.strip():
            raise QueryError("empty query: type one or more words, e.g. \"tiger grass\"")
        try:
            parsed = parse(text, self.stop_words)
        except QuerySyntaxError as e:
            raise QueryError(str(e)) from None
        bridge = self.bridge
        use_model = embeddings_enabled() if mapping is None else mapping
        if bridge.use_model != use_model:
            bridge = Bridge(self.vocabulary, cache_dir=self.directory, use_model=use_model)
        classes = self.class_words if self.classes else None
        if classes is not None and classes.use_model != use_model:
            classes = ClassWords(self.classes, cache_dir=_class_cache(), use_model=use_model)
        query = resolve(parsed, self.vocabulary, self.idf, bridge, self.word_index,
                        classes=classes, class_mix=CLASS_MIX, table_words=TABLE_WORDS)
        if not query.searchable:
            raise self._nothing_searchable(text, parsed, query)
        return query

    @property
    def class_words(self) -> ClassWords | None:
        """The words of an index with class scores (pamir.zeroshot): the ImageNet word table,
        then the embedding bridge over the classes' descriptions, whose embeddings are the
        same for every index: cached once per machine, in the feature cache."""
        with self._lock:
            if self._class_words is None and self.classes:
                self._class_words = ClassWords(self.classes, cache_dir=_class_cache())
            return self._class_words

    def _nothing_searchable(self, text: str, parsed, query: Query) -> QueryError:
        if not parsed.terms:
            if parsed.stop_only:
                return QueryError(f"query {text!r} has only stop words; use content words")
            return QueryError(f"query {text!r} has no words to search for")
        notes = sorted({m.note for m in query.matches if m.note and m.note !=
                        "not in the vocabulary"})
        why = f" ({'; '.join(notes)})" if notes else ""
        if not self.vocabulary:  # the zero-caption system's index
            return QueryError(
                f"no word of the query names an ImageNet class: {', '.join(query.unknown)}"
                f"{why}; with no captions pamir knows ImageNet's words (dog, bird, car, "
                "flower, boat, ...), and `pamir fit` on captioned pictures teaches it yours",
                query.unknown)
        common = [self.vocabulary[t] for t in np.argsort(self.idf, kind="stable")[:8]]
        return QueryError(
            f"no word of the query is in the vocabulary: {', '.join(query.unknown)}{why}; it "
            f"has {len(self.vocabulary)} words, e.g. {', '.join(common)}", query.unknown)

    def scores(self, q: np.ndarray) -> np.ndarray:
        """z . q for every matrix column (free columns -inf)."""
        with self._lock:
            return self._matrix.scores(self._padded(q))

    def _padded(self, q: np.ndarray, start: int = 0) -> np.ndarray:
        """A (rows,) vector with q at rows start.. (the words' rows by default)."""
        q = np.asarray(q, dtype=np.float32).ravel()
        if start == 0 and q.size == self.rows:
            return q
        if q.size != (self.T if start == 0 else len(self.classes)):
            raise ValueError(f"query vector of length {q.size}; the vocabulary has {self.T}")
        out = np.zeros(self.rows, dtype=np.float32)
        out[start:start + q.size] = q
        return out

    def _query_scores(self, q) -> np.ndarray:
        """Scores of every column for a Query or a (T,) vector: z . q; where the classes
        matched terms, their part: each term's weight x its mass score in [0, 1]
        (pamir.zeroshot.mass_score), summed; alone when the query has no vocabulary word, else
        (1 - mix) x the standardised z . q (a standard score: how many standard deviations
        over the pictures' mean) + mix x CLASS_SCALE x the class part."""
        if not isinstance(q, Query):
            return self._matrix.scores(self._padded(q))
        if not q.class_terms or not self.classes:
            return self._matrix.scores(self._padded(q.vector))
        c = sum(w * mass_score(self._matrix.scores(self._padded(v, start=self.T)))
                for w, v in q.class_terms)
        if not q.words:
            return c.astype(np.float32)
        s = self._matrix.scores(self._padded(q.vector))
        return ((1 - q.class_mix) * _standard(s) + q.class_mix * CLASS_SCALE * c
                ).astype(np.float32)

    @property
    def calibration(self) -> Calibration | None:
        """The model's calibrated probabilities (read from its folder once per model), None
        where it has none: a zero-caption index, a model saved before issue 26, a moved
        model folder."""
        with self._lock:
            if self._calibration is False:
                cal = load_calibration(self.model_dir)
                self._calibration = cal if cal is not None and cal.T <= self.T else None
            return self._calibration

    def relevance_line(self, q: Query) -> tuple[float, float] | None:
        """(a, b) with the probability that a picture scoring s is relevant to the query =
        sigmoid(a s + b), or None where there is no calibrated probability (`uncalibrated`
        says why)."""
        return None if self.uncalibrated(q) else self._line(q)

    def _line(self, q: Query) -> tuple[float, float]:
        words = [self.word_index[w] for m in q.matches if m.weight > 0 for w, _ in m.words]
        return self.calibration.logit_line(q.vector, words)

    def uncalibrated(self, q: Query) -> str:
        """Why the query's scores have no calibrated probability ("" when they have one):
        the calibration covers queries of the model's words (weights, phrases, inflections
        and exclusions included), not words mapped by meaning or ImageNet classes."""
        cal = self.calibration
        if cal is None:
            return ("this index has no captions, so no probability of relevance: `pamir fit` "
                    "on captioned pictures gives one" if not self.vocabulary else
                    "the index's model has no calibrated probabilities (a model fitted before "
                    "them, or its folder moved): fit it again, or use floor: with a score")
        mapped = [m.describe() for m in q.matches
                  if m.how not in ("vocabulary", "phrase", "inflection")]
        if mapped:
            return (f"probabilities are calibrated for the model's own words, and "
                    f"{'; '.join(mapped)} is not one: use floor: with a score")
        if not cal.covers(q.vector):
            return ("a word of the query was learnt after the model's calibration (or scores "
                    "every picture alike): use floor: with a score")
        return ""

    def search(self, q: np.ndarray | str | Query, k: int = 10, *, floor: float | None = None,
               sort: str | None = None, folders: Sequence[str] | None = None,
               method: str = "auto", dates: Sequence[tuple[str, str]] | None = None,
               p_floor: float | None = None) -> list[Hit]:
        """The k best pictures for a query (text, a parsed Query or a (T,) vector), best
        first; equal scores by id. floor: leave out pictures scoring under it (the answer may
        be empty); sort: "score", or "newest" / "oldest" (by date taken) for the k best, or
        for all those over the floor when there is one; folders: only pictures under one of
        them (a path prefix, or a run of path components); dates: only pictures taken on a
        day within one of these closed ranges ("YYYY-MM-DD", "YYYY-MM-DD"). A Query's own
        options apply unless given here.

        method: "auto" (the default) takes the exact top-k from the sorted lists where it
        can (`ScoreMatrix.top`: threshold algorithm or fused scan); "brute" scores every
        picture and ranks them (the reference; also what answers a class-mixed query and a
        date sort of everything over a floor); "scan" / "ta" force one top-k kernel.

        p_floor: leave out pictures whose calibrated probability of relevance is under it
        (the grammar's p:X); it becomes the query's raw floor, since the probability rises
        with the score. Each hit carries its probability where the query has one."""
        if isinstance(q, str):
            q = self.parse_query(q)
        line = None
        if isinstance(q, Query):
            p_floor = q.p_floor if p_floor is None else p_floor
            line = self.relevance_line(q)
            floor = q.floor if floor is None else floor
            sort = sort or q.sort
            folders = q.folders if folders is None else folders
            dates = q.dates if dates is None else dates
        if p_floor is not None:
            floor = self._probability_floor(q, p_floor, line, floor)
        sort = sort or "score"
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k = {k!r}: ask for at least one picture")
        if method not in ("auto", "brute", "scan", "ta"):
            raise ValueError(f"method {method!r}: auto, brute, scan or ta")
        if sort not in ("score", "newest", "oldest"):
            raise QueryError(f"sort {sort!r}: by score, newest or oldest")
        mixed = isinstance(q, Query) and bool(q.class_terms) and bool(self.classes)

        def answer(last: bool) -> list[Hit]:
            if method == "brute" or mixed or (sort != "score" and floor is not None):
                s = self._query_scores(q)
                return self._ranked(s, int(k), floor, sort, folders or (), last, dates or ())
            vector = self._padded(q.vector if isinstance(q, Query) else q)
            keep = self._filter_mask(folders or (), dates or ())
            best = self._matrix.top(vector, int(k), keep=keep, floor=floor, method=method)
            return self._hits(best, int(k), sort, last)

        hits = self._consistent(answer)
        if line is not None:
            p = line_probability([h.score for h in hits], *line, self.calibration.ceiling)
            for h, ph in zip(hits, p):
                h.probability = float(ph)
        return hits

    def _probability_floor(self, q, p: float, line, floor: float | None) -> float:
        """The raw floor of a probability floor p for the query (the higher of it and a raw
        floor given too); QueryError where the query has no probability."""
        if not 0 <= float(p) <= 1:
            raise QueryError(f"p:{p:g}: a probability floor is between 0 and 1")
        if line is None:
            why = (self.uncalibrated(q) if isinstance(q, Query)
                   else "a query vector has no words to calibrate")
            raise QueryError(f"p:{p:g} needs a calibrated probability, and {why}")
        raw = floor_of(float(p), *line, self.calibration.ceiling)
        raw = np.nextafter(np.float32(raw), np.float32(np.inf)) if np.isfinite(raw) else raw
        return float(raw if floor is None else max(raw, floor))

    def count_likely(self, q: Query, p: float = 0.5, folders: Sequence[str] | None = None
                     ) -> int | None:
        """How many pictures (under the query's folders, or these, and its dates) have a
        calibrated probability of at least p of being relevant: the page's count of the
        likely relevant ones. None where the query has no calibrated probability."""
        line = self.relevance_line(q)
        if line is None:
            return None
        floor = self._probability_floor(q, p, line, None)
        with self._lock:
            s = self._query_scores(q)
            keep = self._filter_mask(q.folders if folders is None else folders, q.dates)
            ok = np.isfinite(s) & (s >= floor)
            if keep is not None:
                ok[:len(keep)] &= keep
                ok[len(keep):] = False
            return int(ok.sum())

    def _consistent(self, answer: Callable[[bool], list[Hit]]) -> list[Hit]:
        """answer(last) under the lock, from one state of the index. This reader's state is
        the catalogue as of its last refresh, while another process may since have removed
        pictures (and written others into their freed columns): a hit whose picture is gone
        makes `_hits` raise _Stale, and the answer is computed again after a refresh. A hit
        whose picture is still there is exact: its column cannot have been rewritten while
        a committed row pointed at it. A compaction moves pictures to other columns: the
        state is read again before answering when one has, and the answer computed again
        when one committed while it was computed (the catalogue's columns of folders and
        pictures would not be this state's). On the last try (a writer committing faster
        than a search runs) stale hits are left out rather than retried."""
        with self._lock:
            for attempt in range(_SEARCH_TRIES):
                last = attempt == _SEARCH_TRIES - 1
                if self._moved():
                    self._load()
                try:
                    hits = answer(last)
                except _Stale:
                    self._load()
                    continue
                if last or not self._moved():  # no move committed while it answered
                    return hits
            raise AssertionError("unreachable: the last try returns")

    def _moved(self) -> bool:
        """Whether a compaction has moved pictures to other columns since this reader's state
        was read: the catalogue's columns (folders, `vector`) would then not be this state's."""
        return (self._catalog.meta("moves") or 0) != self._moves

    def _columns_under(self, folders: Sequence[str]) -> np.ndarray:
        """Columns of the pictures under the folders, kept for this state (a LIKE over every
        path: 0.2 s at 1,000,000 pictures; a server is asked the same `in:` again)."""
        key = tuple(folder_patterns(folders))
        cols = self._folder_columns.get(key)
        if cols is None:
            if len(self._folder_columns) >= FOLDERS_KEPT:
                self._folder_columns.clear()
            cols = np.asarray(self._catalog.columns_under(list(key)), np.int64)
            self._folder_columns[key] = cols
        return cols

    def _folder_mask(self, folders: Sequence[str]) -> np.ndarray:
        """(width,) whether each column's picture is under one of the folders."""
        width = len(self._matrix.live_mask())
        keep = np.zeros(width, dtype=bool)
        cols = self._columns_under(folders)
        keep[cols[cols < width]] = True
        return keep

    def _date_mask(self, dates: Sequence[tuple[str, str]]) -> np.ndarray:
        """(width,) whether each column's picture was taken within one of the ranges."""
        width = len(self._matrix.live_mask())
        keep = np.zeros(width, dtype=bool)
        cols = np.asarray(self._catalog.columns_taken(dates), np.int64)
        keep[cols[cols < width]] = True
        return keep

    def _filter_mask(self, folders: Sequence[str], dates: Sequence[tuple[str, str]]
                     ) -> np.ndarray | None:
        """The columns in:/folders and date: keep (both must), None when neither is set."""
        keep = self._folder_mask(folders) if folders else None
        if dates:
            keep = self._date_mask(dates) if keep is None else keep & self._date_mask(dates)
        return keep

    def _hits(self, best: list[tuple[int, float]], k: int, sort: str,
              last: bool = False) -> list[Hit]:
        """Hits from (id, score) pairs best first, re-sorted by date if asked; their paths
        and dates read in one statement. _Stale if a hit's picture is no longer the one
        this reader's state has in its column (removed by another process since the last
        refresh); on the `last` try such hits are left out."""
        rows = self._catalog.hits_of(i for i, _ in best)
        if best:
            ids = np.array([i for i, _ in best], np.int64)
            cols = np.array([rows[i][1] if i in rows and rows[i][1] is not None else -1
                             for i, _ in best], np.int64)
            fresh = (cols >= 0) & (self._matrix.ids_of(np.maximum(cols, 0)) == ids)
            if not fresh.all():
                if not last:
                    raise _Stale
                best = [b for b, f in zip(best, fresh) if f]
        if sort != "score" and best:
            # by date taken (the file's date when none was read), ties by score then id;
            # Python's sort is stable in reverse too
            best = sorted(best, key=lambda b: (-b[1], b[0]))
            best = sorted(best, key=lambda b: _date_key(rows[b[0]]),
                          reverse=sort == "newest")[:k]
        return [Hit(i, rows[i][0], score, rows[i][3], list(rows[i][4]) if rows[i][4] else None)
                for i, score in best]

    def _ranked(self, s: np.ndarray, k: int, floor, sort: str, folders,
                last: bool = False, dates: Sequence[tuple[str, str]] = ()) -> list[Hit]:
        """Hits from per-column scores (-inf: left out), after the floor, folders, dates and
        sort."""
        keep = self._filter_mask(folders, dates)
        if keep is not None:
            keep = np.concatenate([keep, np.zeros(max(0, len(s) - len(keep)), bool)])[:len(s)]
            s = np.where(keep, s, -np.inf)
        if floor is not None:
            s = np.where(s >= float(floor), s, -np.inf)
        if sort not in ("score", "newest", "oldest"):
            raise QueryError(f"sort {sort!r}: by score, newest or oldest")
        many = k if sort == "score" or floor is None else int(np.isfinite(s).sum())
        return self._hits(self._matrix.best_of(s, many), k, sort, last)

    def similar(self, z: np.ndarray, k: int = 10, *, exclude: Iterable[int] = (),
                floor: float | None = None, sort: str = "score",
                folders: Sequence[str] = ()) -> list[Hit]:
        """More like this: the k pictures whose text-space vectors are nearest to z (cosine
        similarity, both centred on the pictures' mean vector, so the words every picture
        scores high on do not make everything alike), best first; `exclude`: ids left out
        (the picture itself)."""
        z = np.asarray(z, dtype=np.float32).ravel()[: self.space]  # the text space only
        if z.shape != (self.space,):
            raise ValueError(f"a vector of {z.size} scores; pictures here have {self.space}")
        exclude = [int(i) for i in exclude]

        def answer(last: bool) -> list[Hit]:
            s = self._matrix.similarities(z, self.mean_vector())
            for i in exclude:
                p = self._catalog.picture(i)
                if p is not None and p.col is not None and p.col < len(s):
                    s[p.col] = -np.inf
            return self._ranked(s, int(k), floor, sort or "score", folders, last)

        return self._consistent(answer)

    def mean_vector(self) -> np.ndarray:
        """The pictures' mean vector (`space`,): the centre of `similar`'s cosine."""
        with self._lock:
            if self._mean is None:
                self._mean = self._matrix.mean(self.space)
            return self._mean

    def id_of_path(self, path: str | Path) -> int | None:
        """The id of the indexed picture at this path (resolved), if any."""
        with self._lock:
            return self._catalog.id_of_path(str(Path(path).resolve()))

    # ------------------------------------------------------------------ pictures
    def picture(self, picture_id: int) -> Picture | None:
        with self._lock:
            return self._catalog.picture(picture_id)

    def pictures(self, state: str | None = None) -> list[Picture]:
        """Every picture ('ok' or 'failed' ones only if `state` says so), by id."""
        with self._lock:
            return self._catalog.pictures(state)

    def vector(self, picture_id: int, classes: bool = False) -> np.ndarray:
        """The picture's text-space vector z (T,), a copy; with `classes`, followed by its
        class probabilities (T + C,)."""
        with self._lock:
            for _ in range(_SEARCH_TRIES):
                with self._catalog.snapshot():  # its column and whether columns moved
                    moved, p = self._moved(), self._catalog.picture(picture_id)
                if not moved:
                    break
                self._load()
            if p is None or p.col is None:
                raise KeyError(picture_id)
            column = self._matrix.column(p.col)
            return column if classes else column[: self.space]

    def same_bytes(self, digest: str, other_than: str) -> int | None:
        """The id of an indexed picture with this content hash at another path, if any."""
        with self._lock:
            return self._catalog.with_hash(digest, other_than)

    def status(self) -> dict:
        with self._lock:
            counts = self._catalog.counts()
            return {
                "directory": str(self.directory),
                "schema_version": SCHEMA_VERSION,
                "pictures": counts.get("ok", 0),
                "failed": counts.get("failed", 0),
                "vocabulary": self.T,
                "model_dir": self.model_dir,
                "capacity": self._matrix.capacity,
                "shards": len(self._matrix.shards),
                "segments": sum(self._matrix.segment_counts()),
                "unsorted": sum(self._matrix.tail_sizes()),
            }

    # ------------------------------------------------------------------ writing
    # Each change is one catalogue transaction; the matrix's column owners follow it only
    # once it is committed.
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
        if Z.shape != (len(entries), self.rows):
            raise ValueError(f"Z of shape {Z.shape}; expected ({len(entries)}, {self.rows})")
        if not np.isfinite(Z).all():
            raise ValueError("Z has NaN or infinite scores; the model output is broken")
        with self._lock:
            cols = self._matrix.reserve(len(entries), self._commit_matrix)
            self._matrix.write(cols, Z)  # on disk before any catalogue row points at it
            with self._catalog.transaction():
                freed = self._catalog.delete_paths([e["path"] for e in entries])
                ids = self._catalog.insert_ok(entries, cols)
            self._matrix.release(freed)
            self._matrix.assign(cols, ids)
            if max(self._matrix.tail_sizes(), default=0) >= tuning.SEAL_AT:
                self._matrix.seal(self._commit_matrix, tuning.SEAL_AT)
            return ids

    def _commit_matrix(self, layout: dict, moves=None) -> None:
        """Record new matrix or list files, once they are durable, as the current ones, and
        (a compaction's) moves = (old columns, new columns) of the pictures it moved."""
        with self._catalog.transaction():
            self._catalog.set_meta(**layout)
            if moves is not None:
                self._catalog.move_columns(*moves)
        if moves is not None:  # this state is the mover's own: no reload for it
            self._moves = self._catalog.meta("moves") or 0

    def compact(self) -> bool:
        """Merge every shard's segments and tail into one segment of sorted lists over its
        live pictures, which move to new columns so that alike pictures are neighbours
        (`pamir index --compact`); ids and search results do not change. True if anything
        was rewritten."""
        self._require_writable()
        with self._lock:
            changed = self._matrix.compact(self._commit_matrix)
            if changed:
                self._catalog.checkpoint()
            return changed

    def seal(self) -> bool:
        """Give the pictures added since the last seal their own sorted lists when there are
        enough of them (tuning.SEAL_MIN per shard); merges a shard's segments once they pile
        up. Called at the end of `update`."""
        self._require_writable()
        with self._lock:
            return self._matrix.seal(self._commit_matrix)

    def add_failed(self, entry: dict, reason: str) -> None:
        """Record a picture that could not be read, so it is reported (and retried once the
        file changes) without stopping the update."""
        self._require_writable()
        with self._lock:
            with self._catalog.transaction():
                freed = self._catalog.delete_paths([entry["path"]])
                self._catalog.insert(entry, "failed", reason, None)
            self._matrix.release(freed)

    def remove(self, ids: Iterable[int]) -> int:
        """Drop pictures by id (their columns become free). Returns how many were dropped."""
        self._require_writable()
        with self._lock:
            with self._catalog.transaction():
                removed, freed = self._catalog.delete_ids([int(i) for i in ids])
            self._matrix.release(freed)
        return removed

    def move(self, picture_id: int, entry: dict) -> None:
        """A renamed file: same bytes, new path (and stat); its vector is kept. A failed or
        stale row at the new path gives way."""
        self._require_writable()
        with self._lock:
            with self._catalog.transaction():
                freed = self._catalog.delete_paths([entry["path"]], keep_id=int(picture_id))
                self._catalog.set_stat(picture_id, entry)
            self._matrix.release(freed)

    def touch(self, picture_id: int, entry: dict) -> None:
        """Same bytes, new mtime (a `touch`, a copy back): only the stat is updated."""
        self.move(picture_id, entry)

    def set_model(self, model_dir: str | Path, fingerprint: str) -> None:
        """Record where the model now lives (a moved model folder keeps its index)."""
        self._require_writable()
        model_dir = str(Path(model_dir).resolve())
        with self._lock:
            with self._catalog.transaction():
                self._catalog.set_meta(model_dir=model_dir, model_fingerprint=fingerprint)
            self.model_dir, self.model_fingerprint = model_dir, fingerprint

    def set_metadata(self, picture_id: int, entry: dict) -> None:
        """A picture's caption, date taken, source and sidecars' stat, read again."""
        self._require_writable()
        with self._lock, self._catalog.transaction():
            self._catalog.set_metadata(picture_id, entry)

    def set_caption(self, picture_id: int, caption: Sequence[str] | None) -> None:
        self._require_writable()
        with self._lock, self._catalog.transaction():
            self._catalog.set_caption(picture_id, caption)

    def rescore(self, vocabulary: Sequence[str], idf: np.ndarray, transform: Transform, *,
                model_dir: str | Path | None = None, fingerprint: str = "",
                batch_size: int = BATCH_SIZE,
                progress: Callable[[int, int], None] | None = None) -> dict:
        """Bring every picture's scores in line with a model that has learnt since the index
        was built (`pamir learn`, the web page's feedback): the vocabulary may have grown by
        words at its end. Pictures go through transform (System.transform_paths: features
        come from the feature cache, so pictures are not decoded again when cached) in
        batches into a new score matrix, which replaces the old one with the new vocabulary,
        idf and model in one transaction. A picture that cannot be read now keeps its old
        scores (0 for new words) and is reported. Returns {"rescored", "kept": [paths]}."""
        self._require_writable()
        vocabulary = list(vocabulary)
        if vocabulary[: self.T] != self.vocabulary:
            raise IndexDirError(f"{self.directory}: the model's vocabulary is not this "
                                "index's (grown at its end); rebuild the index with --rebuild")
        idf = np.asarray(idf, dtype=np.float64)
        report = {"rescored": 0, "kept": []}
        with self._lock:
            pictures = [p for p in self._catalog.pictures("ok") if p.col is not None]

            def fill(put):
                for start in range(0, len(pictures), batch_size):
                    batch = pictures[start:start + batch_size]
                    Z, ok, _ = transform([p.path for p in batch])
                    ok = np.asarray(ok, dtype=bool)
                    cols = np.array([p.col for p in batch], dtype=np.int64)
                    if ok.any():
                        put(cols[ok], np.asarray(Z, np.float32)[ok])
                    report["rescored"] += int(ok.sum())
                    report["kept"] += [p.path for p, o in zip(batch, ok) if not o]
                    if progress:
                        progress(min(start + batch_size, len(pictures)), len(pictures))

            def commit(layout):
                with self._catalog.transaction():
                    self._catalog.set_meta(
                        **layout, vocabulary=vocabulary, idf=idf.tolist(),
                        **({"model_fingerprint": fingerprint} if fingerprint else {}),
                        **({"model_dir": str(Path(model_dir).resolve())} if model_dir else {}))

            C = len(self.classes)
            old_rows = np.arange(self.T + C)
            new_rows = np.concatenate([np.arange(self.T), len(vocabulary) + np.arange(C)])
            self._matrix.rewrite(len(vocabulary) + C, fill, commit, (old_rows, new_rows))
            self._load()
            self._matrix.compact(self._commit_matrix)
        return report

    def update(self, folders: Sequence[str | Path], transform: Transform, *,
               captions: dict[str, Sequence[str]] | None = None,
               batch_size: int = BATCH_SIZE,
               progress: Callable[[int, int], None] | None = None) -> UpdateReport:
        """Bring the index in line with the pictures under `folders` (pamir.index.sync).

        transform(paths) -> (Z (n x T) float32, ok (n,) bool, reasons (n,)): the system's
        pictures-to-text map, `System.transform_paths`; reasons[i] says why picture i could
        not be read and is what the index records. Unchanged files are skipped, renamed and
        copied ones reuse their vector, the others are computed and committed in batches;
        pictures gone from under `folders` are dropped. progress(done, total) follows the
        batches.
        """
        self._require_writable()
        report = sync_update(self, folders, transform, captions=captions,
                             batch_size=batch_size, progress=progress)
        self.seal()
        return report


def _class_cache() -> Path:
    return default_cache_dir() / "class-words"


def _date_key(row: tuple) -> tuple[str, int]:
    """A hit's date, sortable: the wall-clock time it was taken (offsets left out: the clock
    of the place it was taken), else its file's date; then the file's mtime in ns (within a
    second, and for files with no date read)."""
    path, col, mtime_ns, taken, caption = row
    if taken:
        return taken[:19], mtime_ns
    return datetime.fromtimestamp(mtime_ns / 1e9).strftime("%Y-%m-%dT%H:%M:%S"), mtime_ns


def _standard(s: np.ndarray) -> np.ndarray:
    """Scores as standard scores over the finite ones (-inf stays -inf)."""
    live = np.isfinite(s)
    out = np.full(len(s), -np.inf, dtype=np.float32)
    if live.any():
        v = s[live].astype(np.float64)
        sd = v.std()
        out[live] = (v - v.mean()) / sd if sd > 0 else 0.0
    return out


def folder_patterns(folders: Sequence[str]) -> list[str]:
    """SQL LIKE patterns for `in:` filters: an absolute (or ~) folder matches the paths under
    it; a relative one ("holidays", "2021/beach") any path with those components in a row."""
    out = []
    for f in folders:
        f = str(f).strip()
        if not f:
            continue
        if f.startswith(("/", "~")):
            base = str(Path(f).expanduser().resolve()).rstrip("/")
            out.append(_like_escape(base + "/") + "%")
        else:
            out.append("%/" + _like_escape(f.strip("/") + "/") + "%")
    return out


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


__all__ = [
    "BATCH_SIZE", "CATALOG", "SCHEMA_VERSION", "Hit", "Index", "IndexDirError", "Picture",
    "Query", "QueryError", "UpdateReport", "file_hash", "folder_patterns", "model_fingerprint",
    "scan_pictures",
]
