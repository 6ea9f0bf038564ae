"""The index folder's on-disk format, in one place: every file's name, the catalogue's schema
and version, the byte layout of the score matrix's files, and the migrations that read or
upgrade an older index. What a reader must know to read a folder is here; the sizes a writer
chooses (a shard's capacity, a block's columns) are recorded with each file and tuned in
`pamir.index.tuning`.

An index folder holds:

    catalog.sqlite (+ -wal, -shm)   the catalogue: `meta` and one row per picture (CATALOG_SCHEMA)
    scores-<generation>.f32         a shard of the score matrix: raw float32, rows x capacity,
                                    row t holding word t's score of each of its columns
    lists-<generation>.bin          a segment's per-word sorted lists and block bounds, and
                                    the block bounds of the class rows (`_segment_parts`)
    columns-<commits>.npy           a reader's copy of one committed state's (column, id) map
    vocabulary-embeddings-<h>.npy   the bridge's embeddings of the vocabulary (pamir.text.bridge
                                    names and writes it)
    thumbnails/                     the server's thumbnail cache
    .writer.lock                    the writer's flock, naming its pid and command

and, beside the folder while `Index.create` builds it, `.NAME.creating-<pid>`.

The catalogue's `meta.shards` records the matrix: per shard {"matrix": file, "capacity": c,
"segments": [{"name": file, "length": L, "block": columns, "blocks": B, "class_rows": C,
"ordered": true}]},
and `meta.generation` the last generation a file was named with. A new file is always a new
name (the next generation), so a file a commit names is never rewritten in place but for its
free columns (see pamir.index.scores).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..text.embedding import CACHE_PREFIX

# ---------------------------------------------------------------------------- versions
#: 6: the frames of videos (`frames`: FRAMES_SCHEMA); 5: the faces found in the pictures,
#: the people they are and the editors' decisions (`faces`, `people`, `face_decisions`: FACES_SCHEMA); 4: the pictures' facts (the `facts`
#: table: keywords, places, text, people, camera) and their GPS position; 3: the pictures'
#: metadata columns (taken, source, sidecars); 2: the score matrix in shards with sorted
#: lists (`meta.shards`); 1: one matrix file
#: (`meta.matrix`, `meta.capacity`). Older ones are still read (no dates, no facts; see
#: `shards_of`), and upgraded when opened for writing (`upgrade`).
SCHEMA_VERSION = 6
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)

# ---------------------------------------------------------------------------- file names
#: The catalogue's file (SQLite adds -wal and -shm beside it).
CATALOG = "catalog.sqlite"
#: One writer at a time: two updates choosing the same free column would clash.
WRITER_LOCK = ".writer.lock"
#: The server's thumbnail cache, inside the index folder.
THUMBNAILS = "thumbnails"
#: A bare folder's own look (pamir.zeroshot.folder: its neighbours, its keywords' words), a
#: folder of its own that `Index.destroy` deletes with the index.
FOLDER_LOOK = "folder-look"
#: How far a running `pamir index` is, pass by pass (pamir.index.progress_record).
PROGRESS = "progress.json"
#: A reader's copy of the (column, id) map of one committed state: columns-<commits>.npy
#: (Catalog.transaction counts commits).
COLUMNS_PREFIX = "columns-"


def face_crop_name(digest: str, face_id: int, size: int) -> str:
    """A face's crop's name in the thumbnail cache (the server's people page): it shows the
    face, so `pamir people --forget` deletes it with the face (`face_crops`)."""
    return f"face-{digest}-{int(face_id)}-{int(size)}.jpg"


def face_crops(directory: Path, face_id: int) -> list[Path]:
    """Every cached crop of a face."""
    return sorted((Path(directory) / THUMBNAILS).glob(f"face-*-{int(face_id)}-*.jpg"))


def matrix_name(generation: int) -> str:
    return f"scores-{generation}.f32"


def lists_name(generation: int) -> str:
    return f"lists-{generation}.bin"


def columns_copy(directory: Path, commits: int) -> Path:
    return Path(directory) / f"{COLUMNS_PREFIX}{commits}.npy"


def columns_copies(directory: Path) -> list[Path]:
    return sorted(Path(directory).glob(f"{COLUMNS_PREFIX}*.npy"))


def creating_prefix(directory: Path) -> str:
    """The name prefix of `directory`'s folder while `Index.create` builds it aside; the
    creator's pid follows."""
    return f".{directory.name}.creating-"


def catalog_files(directory: Path) -> list[Path]:
    """The catalogue and SQLite's journal files beside it."""
    return sorted(Path(directory).glob(f"{CATALOG}*"))


def matrix_files(directory: Path) -> list[Path]:
    """Every score-matrix and sorted-list file in an index folder, current or orphaned."""
    d = Path(directory)
    return sorted(d.glob("scores-*.f32")) + sorted(d.glob("lists-*.bin"))


def own_files(directory: Path) -> list[Path]:
    """The files an index keeps in its folder (but the thumbnails and the writer lock):
    what `Index.destroy` deletes, never anything else a person put there."""
    return (catalog_files(directory) + matrix_files(directory)
            + sorted(Path(directory).glob(f"{CACHE_PREFIX}*.npy")) + columns_copies(directory)
            + sorted(Path(directory).glob(PROGRESS)))


# ---------------------------------------------------------------------------- the catalogue
CATALOG_SCHEMA = """
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
    taken TEXT,
    source TEXT,
    sidecars TEXT,
    position TEXT,
    CHECK ((state = 'ok') = (col IS NOT NULL))
);
CREATE INDEX pictures_hash ON pictures (hash);
"""
#: Schema 4's facts (pamir.facts.fact): one row per (word, kind, picture), found by word (a
#: query's term) or by picture (what a hit shows), and the passes that read them from the
#: pixels; a removed picture's facts and passes go with it.
#: Separate statements: `upgrade` runs them inside its transaction.
FACTS_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS facts (
    picture INTEGER NOT NULL,
    kind TEXT NOT NULL,
    word TEXT NOT NULL,
    confidence REAL NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (word, kind, picture)
) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS facts_picture ON facts (picture, kind)",
    # a pass of `pamir index` that reads pictures for facts (text, faces) records the bytes it
    # read (their hash): a picture whose hash differs, or that has no row, is read again
    """CREATE TABLE IF NOT EXISTS passes (
    picture INTEGER NOT NULL,
    pass TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (pass, picture)
) WITHOUT ROWID""",
    """CREATE TRIGGER IF NOT EXISTS facts_of_removed AFTER DELETE ON pictures BEGIN
    DELETE FROM facts WHERE picture = old.id;
    DELETE FROM passes WHERE picture = old.id;
END""")
#: Schema 5's people (pamir.facts.people). Face embeddings are biometric data: they
#: live here, in the index folder, and nowhere else.
#: - `faces`: one row per face a pass found (or a named region embedded): its box (JSON
#:   [x0, y0, x1, y1], fractions of the picture as shown), its embedding (128 float32, raw
#:   bytes), its quality (the detector's score, NULL for a region no detection matched;
#:   its shorter side in pixels), the name its files give (`written`, how they give it), and
#:   who it is now (`person`, `how`: "region", "tag", "keyword", "editor", "carried",
#:   "group"; `confidence`: 1 for a name given, the carried name's calibrated probability).
#: - `people`: one row per person, named (`name` folded, `shown` as written) or not (NULL);
#:   `same_as`: the person this one was merged into (its name keeps pointing there).
#: - `face_decisions`: what an editor said of a face ("is" this person, "not" this person),
#:   keyed by the face's picture (its hash or its path) and box, not by the face's row, so
#:   that a decision survives the picture being read again (a new `faces` row).
#: Deleting a picture deletes its faces (a trigger, as its facts); a person's decisions go
#: with the person (`pamir people --forget`).
FACES_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS faces (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    picture INTEGER NOT NULL,
    box TEXT NOT NULL,
    embedding BLOB NOT NULL,
    score REAL,
    size INTEGER NOT NULL,
    written TEXT,
    written_how TEXT NOT NULL DEFAULT '',
    person INTEGER,
    how TEXT NOT NULL DEFAULT '',
    confidence REAL NOT NULL DEFAULT 1
)""",
    "CREATE INDEX IF NOT EXISTS faces_picture ON faces (picture)",
    "CREATE INDEX IF NOT EXISTS faces_person ON faces (person)",
    """CREATE TABLE IF NOT EXISTS people (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT UNIQUE,
    shown TEXT,
    same_as INTEGER
)""",
    """CREATE TABLE IF NOT EXISTS face_decisions (
    hash TEXT NOT NULL,
    path TEXT NOT NULL,
    box TEXT NOT NULL,
    decision TEXT NOT NULL CHECK (decision IN ('is', 'not')),
    person INTEGER NOT NULL,
    PRIMARY KEY (hash, box, decision, person)
) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS face_decisions_path ON face_decisions (path)",
    """CREATE TRIGGER IF NOT EXISTS faces_of_removed AFTER DELETE ON pictures BEGIN
    DELETE FROM faces WHERE picture = old.id;
END""")
#: The pictures' looks (pamir.duplicates.looks: a 24-pixel colour thumbnail, the size as shown, when the
#: camera shot it) that copies and bursts are found with, read by a pass of `pamir index`
#: (the bytes it read: `hash`), and the groups found (`copy_group`, `burst_group`: the
#: smallest id of the group, NULL: none; `copy_kind`: "exact" or "near"), and the picture of
#: its group an editor chose to keep (`kept` 1). Optional: an index without the table (an
#: older one) gains it when its looks are first read, and has no groups until then.
LOOKS_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS looks (
    picture INTEGER PRIMARY KEY,
    hash TEXT NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    shot REAL,
    pixels BLOB NOT NULL,
    copy_group INTEGER,
    copy_kind TEXT,
    burst_group INTEGER,
    kept INTEGER NOT NULL DEFAULT 0
)""",
    """CREATE TRIGGER IF NOT EXISTS looks_of_removed AFTER DELETE ON pictures BEGIN
    DELETE FROM looks WHERE picture = old.id;
END""")
#: Schema 6's videos (pamir.facts.video): per video, the times of the frames read (float32
#: seconds) and their rows of the score matrix (float16, frames x rows, row-major), so that a
#: hit on a video names its best frame for the query. A removed video's frames go with it.
FRAMES_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS frames (
    picture INTEGER PRIMARY KEY,
    times BLOB NOT NULL,
    rows BLOB NOT NULL
)""",
    """CREATE TRIGGER IF NOT EXISTS frames_of_removed AFTER DELETE ON pictures BEGIN
    DELETE FROM frames WHERE picture = old.id;
END""")
CATALOG_SCHEMA += "".join(f"{statement};\n" for statement
                          in FACTS_SCHEMA + FACES_SCHEMA + LOOKS_SCHEMA + FRAMES_SCHEMA)
#: Passes that read a picture's files besides its pixels, named "<prefix> <reader>": the
#: faces pass reads the names in the regions and People/ tags of its XMP and sidecars, so a
#: picture whose metadata is read again (a sidecar changed) is read by it again.
FILE_PASSES = ("faces",)
#: The metadata columns of schemas 3 and 4 (position: "lat,lon" in degrees): a catalogue
#: older than that, opened read-only, reads NULL for them (Catalog.columns); `upgrade` adds
#: them.
METADATA_COLUMNS = ("taken", "source", "sidecars", "position")


def added_columns_sql(have: set[str]) -> list[str]:
    """The statements that add the metadata columns a pictures table lacks."""
    return [f"ALTER TABLE pictures ADD COLUMN {c} TEXT" for c in METADATA_COLUMNS
            if c not in have]


def scales_meta(scales, words: int) -> dict:
    """The catalogue's "scales" entry: each word's spread of the model's scores (floats,
    one per word, positive), or nothing where the model has none (an index without it
    standardises a query's words by the pictures' own spread)."""
    if scales is None:
        return {}
    out = [float(x) for x in np.asarray(scales, dtype=np.float64).ravel()]
    if len(out) != words or not all(np.isfinite(x) and x > 0 for x in out):
        raise ValueError(f"{len(out)} word scales for {words} words: each must be a "
                         "positive number")
    return {"scales": out}


def shards_of(meta: Callable[[str], object]) -> list[dict]:
    """The score matrix's shards as `meta` (Catalog.meta) records them; a version-1 index's
    single matrix file is one shard without sorted lists (searched brute force until
    `compact`)."""
    shards = meta("shards")
    if shards is not None:
        return shards
    name = meta("matrix") or ""
    return [{"matrix": name, "capacity": int(meta("capacity")), "segments": []}] if name else []


def upgrade(catalog, matrix_layout: dict) -> None:
    """Bring an older index, opened for writing, to SCHEMA_VERSION in one transaction: its
    pictures table gains the metadata columns (read at the next update), the facts table
    (its captions' keywords written as facts at once) and the faces tables (empty: the
    next `pamir index` finds the faces), and its matrix is recorded as shards
    (`matrix_layout`: ScoreMatrix.layout())."""
    if catalog.meta("schema_version") == SCHEMA_VERSION:
        return
    with catalog.transaction():
        catalog.upgrade()
        catalog.set_meta(schema_version=SCHEMA_VERSION, **matrix_layout)


# ---------------------------------------------------------------------------- the matrix
#: A shard's layout as the catalogue records it: {"matrix", "capacity", "segments": [...]}.
ShardMeta = dict
#: commit(layout) records new files in the catalogue; a compaction's commit(layout, moves)
#: also records where its pictures went: moves = (old global columns, new global columns).
Commit = Callable[..., None]


@dataclass
class Segment:
    """One sealed set of a shard's columns with its per-word sorted lists (a lists file)."""
    name: str
    length: int
    ids: np.ndarray  # (words, L) int32 local columns, by score descending
    vals: np.ndarray  # (words, L) float32 their scores
    block: int = 0  # columns per block of the bounds (0: no bounds)
    bmax: np.ndarray | None = None  # (words, blocks) float32 the highest score in a block
    bmin: np.ndarray | None = None  # (words, blocks) float32 the lowest (-inf/+inf: none)
    ordered: bool = False  # its columns were put in block_order by a compaction
    #: (classes, blocks) float32 the highest class probability in a block, for the class rows
    #: after a model's words (a zero-caption index's classes are its words: bmax has them)
    cmax: np.ndarray | None = None

    def row_bounds(self, row: int, words: int) -> np.ndarray | None:
        """The highest score of matrix row `row` in each block (None: no bounds for it)."""
        if not self.block:
            return None
        if row < words:
            return self.bmax[row]
        return None if self.cmax is None or row - words >= len(self.cmax) else \
            self.cmax[row - words]

    def meta(self) -> dict:
        meta = {"name": self.name, "length": self.length}
        if self.block:
            meta.update(block=self.block, blocks=self.bmax.shape[1])
        if self.cmax is not None and len(self.cmax):
            meta.update(class_rows=len(self.cmax))
        if self.ordered:
            meta.update(ordered=True)
        return meta


@dataclass
class Shard:
    """One matrix file: the global columns offset .. offset + capacity, and its segments."""
    offset: int
    capacity: int
    name: str
    map: np.ndarray | None
    segments: list[Segment] = field(default_factory=list)

    def meta(self) -> ShardMeta:
        return {"matrix": self.name, "capacity": self.capacity,
                "segments": [s.meta() for s in self.segments]}


def open_matrix(path: Path, rows: int, capacity: int, writable: bool) -> np.memmap:
    return np.memmap(path, dtype=np.float32, mode="r+" if writable else "r",
                     shape=(rows, capacity))


def create_matrix(path: Path, rows: int, capacity: int) -> np.memmap:
    """A new matrix file of zeros, to fill and then make durable (`make_durable`)."""
    return np.memmap(path, dtype=np.float32, mode="w+", shape=(rows, capacity))


def make_durable(matrix: np.memmap, path: Path) -> None:
    """A new file on disk before any commit names it."""
    matrix.flush()
    _fsync(path)


def open_shard(directory: Path, offset: int, meta: ShardMeta, rows: int, words: int,
               writable: bool) -> Shard:
    capacity = int(meta["capacity"])
    return Shard(offset, capacity, meta["matrix"],
                 open_matrix(Path(directory) / meta["matrix"], rows, capacity, writable),
                 [open_segment(directory, g, words) for g in meta.get("segments", [])])


def _segment_parts(W: int, L: int, B: int, C: int = 0
                   ) -> list[tuple[type, tuple[int, int], int]]:
    """(dtype, shape, byte offset) of a lists file's arrays, one after another: per word row
    the local columns sorted by that word's score, descending (int32, W x L), the scores in
    that order (float32, W x L), then per word row the highest and the lowest score of the
    segment's columns in each block of `block` local columns (float32, W x B each), then per
    class row (C of them, "class_rows"; older files have none) the highest score
    in each block (float32, C x B). Class rows get no sorted lists: at 1,000 classes they
    would take 8 KB a picture, and their bounds answer a class query's top-k alone."""
    end = 8 * W * L + 8 * W * B
    return [(np.int32, (W, L), 0), (np.float32, (W, L), 4 * W * L),
            (np.float32, (W, B), 8 * W * L), (np.float32, (W, B), 8 * W * L + 4 * W * B),
            (np.float32, (C, B), end)]


def open_segment(directory: Path, meta: dict, words: int) -> Segment:
    """A segment's lists, read-only."""
    L, path = int(meta["length"]), Path(directory) / meta["name"]

    def read(part) -> np.ndarray:
        dtype, shape, offset = part
        return np.asarray(np.memmap(path, dtype=dtype, mode="r", shape=shape, offset=offset))

    if "blocks" not in meta:  # written before block bounds: the shard is scanned whole
        return Segment(meta["name"], L, *map(read, _segment_parts(words, L, 0)[:2]))
    C = int(meta.get("class_rows", 0))
    ids, vals, bmax, bmin, cmax = map(read, _segment_parts(words, L, int(meta["blocks"]), C))
    return Segment(meta["name"], L, ids, vals, int(meta["block"]), bmax, bmin,
                   bool(meta.get("ordered")), cmax if C else None)


def write_segment(path: Path, W: int, L: int, B: int,
                  fill: Callable[..., None], C: int = 0) -> None:
    """A new lists file of W word rows, L columns, B blocks and C class rows:
    fill(ids, vals, bmax, bmin, cmax) writes its arrays, which are on disk when this
    returns."""
    out = np.memmap(path, dtype=np.uint8, mode="w+", shape=(max(1, 8 * W * (L + B) + 4 * C * B),))
    fill(*(out[offset: offset + np.dtype(dtype).itemsize * shape[0] * shape[1]]
           .view(dtype).reshape(shape) for dtype, shape, offset in _segment_parts(W, L, B, C)))
    out.flush()
    del out
    _fsync(path)


def _fsync(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())
