"""Queries on an index, the part of `Index` that reads them (pamir.index.reading answers
them): a query's text parsed with the grammar of pamir.text.query and resolved on the index's
vocabulary, words outside it reaching it through pamir.text.bridge and, for an index with class
rows, ImageNet's classes through pamir.zeroshot.classes; the error a query that cannot be answered
raises, and what an answer is made of (`Hit`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..text.bridge import CLASS_MIX, Bridge
from ..config import default_cache_dir
from ..text.query import Query, QuerySyntaxError, join_fact_phrases, parse, resolve
from ..zeroshot.classes import ClassWords

if TYPE_CHECKING:
    from .fact_reading import FactReader
    from .lifecycle import IndexFolder

#: Whether the model's own words that name ImageNet classes reach them too (mixed as a word
#: outside the vocabulary is). Off, on validation alone: with the classes mixed at their share
#: of the query (pamir.text.bridge.CLASS_MIX = 1.0), Corel 5k validation all-query AvgP for models
#: of 50, 200 and 1,000 captioned pictures (3 draws each) was 16.3 / 22.7 / 32.2 with it and
#: 15.6 / 22.9 / 34.9 without (benchmarks/bench_zero_caption.py's QUERY_RULES; the run
#: committed in results/ predates that rule's column, and a probe of the same fits measured
#: it): a model's word mixes with its classes through the prior
#: (pamir.zeroshot.prior: the weight chosen per word on validation, in the stored scores, so that the
#: top-k stays on sorted lists), its successor. `Index.parse_query` reads it here at each
#: query, so that a benchmark or a test can switch it (pamir.index.queries.TABLE_WORDS).
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



@dataclass
class Hit:
    id: int
    path: str
    score: float
    taken: str | None = None  # ISO date-time taken (pamir.facts.metadata; None: not read yet)
    caption: list[str] | None = None  # the caption's words, from a table or the files
    #: the calibrated probability that the picture is relevant (pamir.calibration); None
    #: where the model has no calibration or the query is not made of its words
    probability: float | None = None
    #: the query's terms the picture holds as facts ("sky", "kyoto"): why it ranks first
    matched: list[str] = field(default_factory=list)
    #: (kind, form shown, confidence) of the facts that matched the query's terms and
    #: filters (("place", "Kyoto", 1.0), ("person", "Alice", 0.8)): what the page shows
    #: instead of a score
    held: list[tuple[str, str, float]] = field(default_factory=list)
    #: its facts of SHOWN_FACTS, as shown: {"place": ["Kyoto", "Japan"], ...}
    facts: dict[str, list[str]] = field(default_factory=dict)
    #: the other pictures of its group of copies (or burst) that search folded into it (ids)
    folded: list[int] = field(default_factory=list)
    #: a video's: the time (seconds) of its frame that scores best for the query
    time: float | None = None


class QueryParser:
    """Reads queries on an open index's vocabulary, classes and facts: the bridges it keeps
    for the folder's committed state, and parsing."""

    def __init__(self, folder: IndexFolder, facts: FactReader):
        self._folder, self._facts, self._lock = folder, facts, folder._lock
        self._bridge: Bridge | None = None
        self._forget()
        folder.on_reload(self._forget)

    def _forget(self) -> None:
        """A bridge of another vocabulary, and the class words, let go (a new committed
        state)."""
        old = self._bridge
        self._bridge = (old if old is not None and old.vocabulary == self._folder.vocabulary
                        else None)
        self._class_words = None

    @property
    def bridge(self) -> Bridge:
        """Unknown words onto the vocabulary (pamir.text.bridge): its embeddings are cached in
        the index folder, the model loaded on the first word that needs it."""
        with self._lock:
            if self._bridge is None:
                self._bridge = Bridge(self._folder.vocabulary, cache_dir=self._folder.directory)
            return self._bridge

    def parse_query(self, text: str, *, mapping: bool | None = None) -> Query:
        """Read a query (the grammar of pamir.text.query) and resolve it on the vocabulary: words
        outside it go through the bridge (inflections, then the embedding model unless
        `mapping` is False or $PAMIR_EMBEDDINGS is 0). QueryError if nothing searchable is
        left, or for a bad option."""
        if not text or not text.strip():
            raise QueryError("empty query: type one or more words, e.g. \"tiger grass\"")
        f = self._folder
        try:
            parsed = join_fact_phrases(parse(text, f.stop_words), self._facts.fact_count)
        except QuerySyntaxError as e:
            raise QueryError(str(e)) from None
        bridge = self.bridge
        use_model = embeddings_enabled() if mapping is None else mapping
        if bridge.use_model != use_model:
            bridge = Bridge(f.vocabulary, cache_dir=f.directory, use_model=use_model)
        classes = self.class_words if f.classes else None
        if classes is not None and classes.use_model != use_model:
            classes = ClassWords(f.classes, cache_dir=_class_cache(), use_model=use_model)
        query = resolve(parsed, f.vocabulary, f.idf, bridge, f.word_index,
                        classes=classes, class_mix=CLASS_MIX, table_words=TABLE_WORDS,
                        facts=self._facts.fact_count, names=self._facts.name_only)
        if not query.searchable:
            raise self._nothing_searchable(text, parsed, query)
        return query

    @property
    def class_words(self) -> ClassWords | None:
        """The words of an index with class scores (pamir.zeroshot.classes): the ImageNet word table,
        then the embedding bridge over the classes' descriptions, whose embeddings are the
        same for every index: cached once per machine, in the feature cache."""
        with self._lock:
            if self._class_words is None and self._folder.classes:
                self._class_words = ClassWords(self._folder.classes, cache_dir=_class_cache())
            return self._class_words

    def _nothing_searchable(self, text: str, parsed, query: Query) -> QueryError:
        if not parsed.terms:
            if parsed.stop_only:
                return QueryError(f"query {text!r} has only stop words; use content words")
            return QueryError(f"query {text!r} has no words to search for")
        notes = sorted({m.note for m in query.matches if m.note and m.note !=
                        "not in the vocabulary"})
        why = f" ({'; '.join(notes)})" if notes else ""
        if not self._folder.vocabulary:  # the zero-caption system's index
            return QueryError(
                f"no word of the query names an ImageNet class: {', '.join(query.unknown)}"
                f"{why}; with no captions pamir knows ImageNet's words (dog, bird, car, "
                "flower, boat, ...), and `pamir fit` on captioned pictures teaches it yours",
                query.unknown)
        vocabulary = self._folder.vocabulary
        common = [vocabulary[t] for t in np.argsort(self._folder.idf, kind="stable")[:8]]
        return QueryError(
            f"no word of the query is in the vocabulary: {', '.join(query.unknown)}{why}; it "
            f"has {len(vocabulary)} words, e.g. {', '.join(common)}", query.unknown)


def _class_cache() -> Path:
    return default_cache_dir() / "class-words"

