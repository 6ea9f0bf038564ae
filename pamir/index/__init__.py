"""The searchable index of a picture collection, kept in one folder.

The package's rooms:

- `layout`: the folder's on-disk format, in one place: every file's name, the catalogue's
  schema and version, the score matrix's file layout, the migrations of an older index.
- `catalog`: the SQLite catalogue (`catalog.sqlite`), the single source of truth and the one
  home of the index's SQL: vocabulary, idf and model in `meta`, one row per picture, and its
  parts, one a concern: `catalog_facts` (facts and passes), `catalog_people` (faces, people,
  editors' decisions), `catalog_looks` (looks, groups of copies and bursts) and
  `catalog_frames` (videos' frames), with `catalog_base` (the schema present, paths as
  stored).
- `scores`: the memory-mapped word-major score matrix, in shards, and which picture owns each
  column, with its jobs as members: `columns` (reserving, growing, writing), `scoring` (a
  query's scores; the top-k dispatch over `topk`'s numba kernels) and `compaction`
  (segments of sorted lists), with their sizes and thresholds in `tuning`.
- `sync`: walks folders and plans what brings the index in line with them (`plan_update`:
  hashes, renames, copies, removals, batches, unreadable pictures), writing nothing; the
  writer applies the plan (`Writer.apply`), reading each batch's files as it comes to it.
- `Index`, the facade the CLI, the server and the workflow use: an open folder
  (`lifecycle.IndexFolder`: create, open, rebuild, destroy, the writer lock, reading the
  committed state, looking pictures up) and its parts, each a member that works from the
  folder: `reading.Searcher` (search, similar pictures, probabilities; with `filters` for
  a query's in: and date:), `queries.QueryParser` (a query parsed on the vocabulary),
  `fact_reading.FactReader` (a query's facts, places), `writing.Writer` (add, remove, move,
  rescore, update and apply a sync's plan, seal, compact), `people.People` and
  `looks.Looks`. Each public method of the Index is its part's (`parts.delegate`).

The index takes what it stores from its callers: a transform from pictures to text-space
vectors (with class probabilities for an index with classes) and the class names, which
pamir.system.index_transform and class_names_of make from a system.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import IO

from ..text.query import Query
from .catalog import Catalog, IndexDirError, Picture
from .catalog_people import FaceRow, PersonRow
from .fact_reading import FactReader
from .filters import folder_patterns
from .layout import CATALOG, SCHEMA_VERSION
from .lifecycle import IndexFolder, model_fingerprint
from .looks import Looks
from .parts import delegate
from .people import People
from .queries import EMBEDDINGS_ENV, Hit, QueryError, QueryParser, embeddings_enabled
from .reading import CLASS_SCALE, Searcher
from .sync import BATCH_SIZE, UpdateReport, file_hash, scan_pictures
from .writing import Writer


class Index(IndexFolder):
    """A picture index folder. Get one with `Index.create`, `Index.open` or `Index.rebuild`.

    Thread-safe: one lock serialises catalogue and matrix access (the server calls it from a
    pool). Opened writable, it holds the folder's writer lock until closed.

    An open folder (IndexFolder: its life, its committed state, its pictures) with its parts
    as members, each answering its share of the methods below.
    """

    def __init__(self, directory: Path, catalog: Catalog, writable: bool, lock: IO | None):
        super().__init__(directory, catalog, writable, lock)
        # the parts hold the folder weakly (it holds them: `on_reload`), so that an Index
        # dropped without `close` still closes its files and lock at once
        folder = weakref.proxy(self)
        self._facts = FactReader(folder)
        self._queries = QueryParser(folder, self._facts)
        self._looks = Looks(folder)
        self._searcher = Searcher(folder, self._queries, self._facts, self._looks)
        self._writer = Writer(folder)
        self._people = People(folder)

    # ------------------------------------------------------------------ searching
    search = delegate("_searcher", Searcher.search)
    similar = delegate("_searcher", Searcher.similar)
    scores = delegate("_searcher", Searcher.scores)
    count_likely = delegate("_searcher", Searcher.count_likely)
    mean_vector = delegate("_searcher", Searcher.mean_vector)
    calibration = delegate("_searcher", Searcher.calibration)
    relevance_line = delegate("_searcher", Searcher.relevance_line)
    uncalibrated = delegate("_searcher", Searcher.uncalibrated)
    probability_note = delegate("_searcher", Searcher.probability_note)
    parse_query = delegate("_queries", QueryParser.parse_query)
    bridge = delegate("_queries", QueryParser.bridge)
    class_words = delegate("_queries", QueryParser.class_words)

    # ------------------------------------------------------------------ facts and places
    facts_of = delegate("_facts", FactReader.facts_of)
    shown_facts = delegate("_facts", FactReader.shown_facts)
    fact_counts = delegate("_facts", FactReader.fact_counts)
    places = delegate("_facts", FactReader.places)
    places_tree = delegate("_facts", FactReader.places_tree)
    place_points = delegate("_facts", FactReader.place_points)
    positions = delegate("_facts", FactReader.positions)

    # ------------------------------------------------------------------ writing
    add = delegate("_writer", Writer.add)
    add_failed = delegate("_writer", Writer.add_failed)
    remove = delegate("_writer", Writer.remove)
    move = delegate("_writer", Writer.move)
    touch = delegate("_writer", Writer.touch)
    set_metadata = delegate("_writer", Writer.set_metadata)
    set_caption = delegate("_writer", Writer.set_caption)
    set_facts = delegate("_writer", Writer.set_facts)
    record_pass = delegate("_writer", Writer.record_pass)
    set_model = delegate("_writer", Writer.set_model)
    update = delegate("_writer", Writer.update)
    apply = delegate("_writer", Writer.apply)
    rescore = delegate("_writer", Writer.rescore)
    seal = delegate("_writer", Writer.seal)
    compact = delegate("_writer", Writer.compact)

    # ------------------------------------------------------------------ people
    faces = delegate("_people", People.faces)
    face = delegate("_people", People.face)
    people = delegate("_people", People.people)
    person = delegate("_people", People.person)
    person_named = delegate("_people", People.person_named)
    all_people = delegate("_people", People.all_people)
    cover_faces = delegate("_people", People.cover_faces)
    face_decisions = delegate("_people", People.face_decisions)
    face_captions = delegate("_people", People.face_captions)
    picture_of_face = delegate("_people", People.picture_of_face)
    person_fact_pictures = delegate("_people", People.person_fact_pictures)
    record_faces = delegate("_people", People.record_faces)
    new_people = delegate("_people", People.new_people)
    set_who = delegate("_people", People.set_who)
    decide = delegate("_people", People.decide)
    rename_person = delegate("_people", People.rename_person)
    merge_people = delegate("_people", People.merge_people)
    forget_person = delegate("_people", People.forget_person)

    # ------------------------------------------------------------------ looks and groups
    record_looks = delegate("_looks", Looks.record_looks)
    look_rows = delegate("_looks", Looks.look_rows)
    set_groups = delegate("_looks", Looks.set_groups)
    groups_of = delegate("_looks", Looks.groups_of)
    stored_groups = delegate("_looks", Looks.stored_groups)
    group_members = delegate("_looks", Looks.group_members)
    keep_picture = delegate("_looks", Looks.keep_picture)


__all__ = [
    "BATCH_SIZE", "CATALOG", "CLASS_SCALE", "EMBEDDINGS_ENV", "SCHEMA_VERSION",
    "Catalog", "FaceRow", "Hit", "Index", "IndexDirError", "Picture", "Query", "QueryError",
    "PersonRow", "UpdateReport", "embeddings_enabled", "file_hash", "folder_patterns", "model_fingerprint",
    "scan_pictures",
]
