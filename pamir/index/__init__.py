"""The searchable index of a picture collection, kept in one folder.

The package's rooms:

- `layout`: the folder's on-disk format, in one place: every file's name, the catalogue's
  schema and version, the score matrix's file layout, the migrations of an older index.
- `catalog`: the SQLite catalogue (`catalog.sqlite`), the single source of truth: vocabulary,
  idf and model in `meta`, one row per picture.
- `scores`: the memory-mapped word-major score matrix, in shards, made of its jobs: `columns`
  (which picture owns each column; growing), `scoring` (a query's scores; the top-k
  dispatch over `topk`'s numba kernels) and `compaction` (segments of sorted lists), with
  their sizes and thresholds in `tuning`.
- `sync`: walks folders and plans what brings the index in line with them (`plan_update`:
  hashes, renames, copies, removals, batches, unreadable pictures), writing nothing; the
  writer applies the plan (`IndexWriting.apply`).
- `Index`, the facade the CLI, the server and the workflow use, made of its three jobs:
  `lifecycle` (create, open, rebuild, destroy, the writer lock, reading the committed
  state), `reading` (search, similar pictures, look-ups; made with `queries`, parsing a
  query on the vocabulary, and `fact_reading`, a query's facts) and `writing` (add,
  remove, move, rescore, update and apply a sync's plan, seal, compact).

The index takes what it stores from its callers: a transform from pictures to text-space
vectors (with class probabilities for an index with classes) and the class names, which
pamir.system.index_transform and class_names_of make from a system.
"""

from __future__ import annotations

from ..text.query import Query
from .catalog import Catalog, IndexDirError, Picture
from .layout import CATALOG, SCHEMA_VERSION
from .people import FaceRow, IndexPeople, PersonRow
from .lifecycle import model_fingerprint
from .looks import IndexLooks
from .queries import EMBEDDINGS_ENV, Hit, QueryError, embeddings_enabled
from .reading import CLASS_SCALE, IndexReading, folder_patterns
from .sync import BATCH_SIZE, UpdateReport, file_hash, scan_pictures
from .writing import IndexWriting


class Index(IndexReading, IndexWriting, IndexPeople, IndexLooks):
    """A picture index folder. Get one with `Index.create`, `Index.open` or `Index.rebuild`.

    Thread-safe: one lock serialises catalogue and matrix access (the server calls it from a
    pool). Opened writable, it holds the folder's writer lock until closed.
    """


__all__ = [
    "BATCH_SIZE", "CATALOG", "CLASS_SCALE", "EMBEDDINGS_ENV", "SCHEMA_VERSION",
    "Catalog", "FaceRow", "Hit", "Index", "IndexDirError", "Picture", "Query", "QueryError",
    "PersonRow", "UpdateReport", "embeddings_enabled", "file_hash", "folder_patterns", "model_fingerprint",
    "scan_pictures",
]
