"""Searching an index, a part of `Index`: the exact top-k of the score matrix (or every
picture's score where a query mixes in classes), the pictures holding a query's facts first,
similar pictures, and calibrated probabilities. Parsing a query on the vocabulary, and what a
hit is, are pamir.index.queries'; the facts a query's pictures hold pamir.index.fact_reading's;
its filters' columns pamir.index.filters'; folding copies into one hit pamir.index.looks'.

Scores are linear: score(picture, q) = z_picture . q, with q the query's vector (pamir.text.query:
the normalised idf vector of TPAMI §III-A for plain words, with weights, exclusions and words
mapped onto the vocabulary by pamir.text.bridge) and z the model's text-space vector. Models that
score otherwise (DRCMRM) are not served by this index.

A reader answers from the committed state it last read (IndexFolder._load), while another
process may commit meanwhile: `_consistent` makes each answer come from one state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from ..calibration import LIKELY, Calibration, floor_of, line_probability, load_calibration
from ..text.query import SORT_ORDERS, Query
from . import class_topk, frames
from .class_topk import class_part
from .filters import Filters
from .layout import FOLDER_LOOK
from .lifecycle import STALE_TRIES
from .queries import Hit, QueryError

if TYPE_CHECKING:
    from .fact_reading import FactReader
    from .lifecycle import IndexFolder
    from .looks import Looks
    from .queries import QueryParser

#: A class part certain of its classes (a mass score of 1) counts as a text score this many
#: standard deviations over the pictures' mean. Standardising the class part too, as before,
#: let one confident picture among pictures with none score sqrt(n) deviations and swamp
#: every word of the query (a standard score of 15 against 3 for the next picture).
CLASS_SCALE = 3.0


class _Stale(Exception):
    """A hit's picture was removed by another process after this reader's last refresh."""


class Searcher:
    """The searches of an open index (see `Index`), over its folder's committed state, with
    its query parser, facts and looks."""

    def __init__(self, folder: IndexFolder, queries: QueryParser, facts: FactReader,
                 looks: Looks):
        self._folder = folder
        self._catalog, self._lock = folder._catalog, folder._lock
        self._queries, self._facts, self._looks = queries, facts, looks
        self._filters = Filters(folder)
        self._calibration_key, self._calibration = None, False
        self._forget()
        folder.on_reload(self._forget)

    def _forget(self) -> None:
        """What this reader derived from an older committed state forgotten."""
        self._mean = None  # the pictures' mean text-space vector, for `similar`
        key = (self._folder.model_dir, self._folder.model_fingerprint)
        if self._calibration_key != key:
            self._calibration_key, self._calibration = key, False  # False: not read yet

    @property
    def _matrix(self):
        """The score matrix of the committed state last read."""
        return self._folder._matrix

    # ------------------------------------------------------------------ scores
    def scores(self, q: np.ndarray) -> np.ndarray:
        """z . q for every matrix column (free columns -inf)."""
        with self._lock:
            return self._matrix.scores(self._padded(q))

    def _padded(self, q: np.ndarray, start: int = 0) -> np.ndarray:
        """A (rows,) vector with q at rows start.. (the words' rows by default)."""
        q = np.asarray(q, dtype=np.float32).ravel()
        if start == 0 and q.size == self._folder.rows:
            return q
        if q.size != (self._folder.T if start == 0 else len(self._folder.classes)):
            raise ValueError(f"query vector of length {q.size}; the vocabulary has "
                             f"{self._folder.T}")
        out = np.zeros(self._folder.rows, dtype=np.float32)
        out[start:start + q.size] = q
        return out

    def _query_scores(self, q) -> np.ndarray:
        """Scores of every column for a Query or a (T,) vector: z . q; where the classes
        matched terms, their part: each term's weight x its mass score in [0, 1]
        (pamir.zeroshot.classes.mass_score), summed; alone when the query has no vocabulary word, else
        (1 - mix) x the standardised z . q (a standard score: how many standard deviations
        over the pictures' mean) + mix x CLASS_SCALE x the class part."""
        if not isinstance(q, Query):
            return self._matrix.scores(self._padded(q))
        if not q.class_terms or not self._folder.classes:
            return self._matrix.scores(self._padded(q.vector))
        base, mult = self.class_mix(q)
        c = class_part(self._matrix, q.class_terms, self._folder.T)
        out = (c if base is None else base + mult * c).astype(np.float32)
        out[~self._matrix._live[:len(out)]] = -np.inf
        return out

    def class_mix(self, q: Query) -> tuple[np.ndarray | None, float]:
        """(base, mult) of a query with classes: its score is base + mult x the class part
        (pamir.index.class_topk), base the words' part, None for classes alone.

        The words' part is a standard score: minus its mean over the pictures, over the
        spread the model's scores of the query's words have (`scales`, the prior's spreads),
        so that a certain class match, which the prior mixed into a word's score as SCALE of
        that spread, counts there as much as CLASS_SCALE counts it for a term outside the
        vocabulary. Over the pictures' own spread instead (an index without scales), a word
        the prior had mixed counted about twice an outside term, since a class-like score is
        skewed and its spread small: on Corel 5k, models of 50 captioned pictures searched
        the 2,028 validation queries at AvgP 16.70 that way against 18.06 with the scales
        (benchmarks/results/zero_caption.md)."""
        if not q.words:
            return None, 1.0
        standard = _standard(self._matrix.scores(self._padded(q.vector)),
                             None if self._folder.scales is None else float(np.linalg.norm(
                                 q.vector.astype(np.float64) * self._folder.scales)))
        base = np.full(len(standard), -np.inf)  # a picture left out stays out (0 x -inf)
        live = np.isfinite(standard)
        base[live] = (1 - q.class_mix) * standard[live]
        return base, q.class_mix * CLASS_SCALE

    @property
    def calibration(self) -> Calibration | None:
        """The model's calibrated probabilities (read from its folder once per model), None
        where it has none: a zero-caption index, a model saved before neighbours were added, a moved
        model folder."""
        with self._lock:
            if self._calibration is False:
                # a bare folder's index: its folder's words' (pamir.jobs.folder_look)
                f = self._folder
                cal = load_calibration(f.model_dir or f.directory / FOLDER_LOOK)
                self._calibration = cal if cal is not None and cal.T <= f.T else None
            return self._calibration

    def relevance_line(self, q: Query) -> tuple[float, float] | None:
        """(a, b) with the probability that a picture scoring s is relevant to the query =
        sigmoid(a s + b), or None where there is no calibrated probability (`uncalibrated`
        says why)."""
        return None if self.uncalibrated(q) else self._line(q)

    def _line(self, q: Query) -> tuple[float, float]:
        words = [self._folder.word_index[w] for m in q.matches if m.weight > 0 for w, _ in m.words]
        return self.calibration.logit_line(q.vector, words)

    def uncalibrated(self, q: Query) -> str:
        """Why the query's scores have no calibrated probability ("" when they have one):
        the calibration covers queries of the model's words (weights, phrases, inflections
        and exclusions included), not words mapped by meaning or ImageNet classes."""
        cal = self.calibration
        if cal is None:
            return ("this index has no captions, so no probability of relevance: `pamir fit` "
                    "on captioned pictures gives one" if not self._folder.vocabulary else
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

    def probability_note(self, q: Query) -> str:
        """Why the query's hits carry no probability ("" when they do): `uncalibrated`'s
        reason, except for a query of facts alone, whose pictures carry the facts' own."""
        if (q.fact_terms or q.fact_filters) and all(
                m.how == "fact" for m in q.matches if m.weight > 0):
            return ""
        return self.uncalibrated(q)

    def search(self, q: np.ndarray | str | Query, k: int = 10, *, floor: float | None = None,
               sort: str | None = None, folders: Sequence[str] | None = None,
               method: str = "auto", dates: Sequence[tuple[str, str]] | None = None,
               p_floor: float | None = None, collapse: str = "copies") -> list[Hit]:
        """The k best pictures for a query (`_unfolded` says which), a group of copies (and
        with collapse "bursts", a burst) as one hit, its best, the others in its `folded`
        (collapse "none": each picture a hit; pamir.index.looks)."""
        if isinstance(q, str):
            q = self._queries.parse_query(q)
        return self._looks.folded(lambda n: self._unfolded(
            q, n, floor=floor, sort=sort, folders=folders, method=method, dates=dates,
            p_floor=p_floor), k, collapse)

    def _unfolded(self, q: np.ndarray | str | Query, k: int = 10, *,
                  floor: float | None = None, sort: str | None = None,
                  folders: Sequence[str] | None = None, method: str = "auto",
                  dates: Sequence[tuple[str, str]] | None = None,
                  p_floor: float | None = None) -> list[Hit]:
        """The k best pictures for a query (`_search` says how). Sorted by date with no
        floor, the likely relevant ones (a calibrated probability of LIKELY or more) come
        first, by date, then the others by score: the one order of the CLI, the API and the
        page, so that a date sort never buries the pictures the query is about."""
        if isinstance(q, str):
            q = self._queries.parse_query(q)
        by_date = _sort_order(sort or (q.sort if isinstance(q, Query) else None)) != "score"
        bare = floor is None and p_floor is None and (
            not isinstance(q, Query) or (q.floor is None and q.p_floor is None))
        args = dict(folders=folders, method=method, dates=dates)
        if not (by_date and bare and isinstance(q, Query)) or (
                self.relevance_line(q) is None and not (q.fact_terms or q.fact_filters)):
            return self._search(q, k, floor=floor, sort=sort, p_floor=p_floor, **args)
        hits = self._search(q, k, sort=sort, p_floor=LIKELY, **args)
        if not hits:  # nothing likely: the k best, by date
            return self._search(q, k, sort=sort, **args)
        if len(hits) < k:  # then the others, best first
            seen = {h.id for h in hits}
            hits += [h for h in self._search(q, k + len(hits), sort="score", **args)
                     if h.id not in seen][:k - len(hits)]
        return hits

    def _search(self, q: np.ndarray | str | Query, k: int = 10, *, floor: float | None = None,
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
            q = self._queries.parse_query(q)
        line = None
        if isinstance(q, Query):
            p_floor = q.p_floor if p_floor is None else p_floor
            line = self.relevance_line(q)
            floor = q.floor if floor is None else floor
            sort = sort or q.sort
            folders = q.folders if folders is None else folders
            dates = q.dates if dates is None else dates
        has_facts = isinstance(q, Query) and bool(q.fact_terms or q.fact_filters)
        if p_floor is not None and (line is not None or not has_facts):
            # a query with facts and no line: the facts' own probability alone (`_factual`)
            floor = self._probability_floor(q, p_floor, line, floor)
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k = {k!r}: ask for at least one picture")
        if method not in ("auto", "brute", "scan", "ta"):
            raise ValueError(f"method {method!r}: auto, brute, scan or ta")
        sort = _sort_order(sort)
        mixed = isinstance(q, Query) and bool(q.class_terms) and bool(self._folder.classes)
        factual = isinstance(q, Query) and bool(q.fact_terms or q.fact_filters)

        def answer(last: bool) -> list[Hit]:
            if factual:
                return self._factual(q, int(k), floor, sort, folders or (), dates or (), last,
                                     line, p_floor)
            if mixed and method != "brute" and not (sort != "score" and floor is not None):
                base, mult = self.class_mix(q)
                keep = self._filters.mask(folders or (), dates or ())
                best = class_topk.top(self._matrix, q.class_terms, self._folder.T, int(k),
                                      base=base, mult=mult, keep=keep, floor=floor)
                if best is not None:  # None: an index without the class rows' bounds
                    return self._hits(best, int(k), sort, last)
            if method == "brute" or mixed or (sort != "score" and floor is not None):
                s = self._query_scores(q)
                return self._ranked(s, int(k), floor, sort, folders or (), last, dates or ())
            vector = self._padded(q.vector if isinstance(q, Query) else q)
            keep = self._filters.mask(folders or (), dates or ())
            best = self._matrix.top(vector, int(k), keep=keep, floor=floor, method=method)
            return self._hits(best, int(k), sort, last)

        hits = self._consistent(answer)
        if not factual:
            self._facts.with_facts(hits)
        # under the index's lock: the server's threads share its one SQLite connection
        found = self._folder.frames_of(h.id for h in hits)
        for h, t in frames.best_times(found, hits, q, self._folder.T):
            h.time = t  # a video's hit names its best frame for the query
        if line is not None:
            p = line_probability([h.score for h in hits], *line, self.calibration.ceiling)
            for h, ph in zip(hits, p):
                if h.probability is None:  # a fact's is set by `_factual`
                    h.probability = float(ph)
        return hits

    def _factual(self, q: Query, k: int, floor, sort: str, folders, dates, last: bool,
                 line, p_floor) -> list[Hit]:
        """The hits of a query with facts: the pictures holding its terms as facts first
        (most terms held first, then by the look's score, then by id), then the pictures
        that only look like it (model, classes), each after the filters; `sort` orders each
        of the two parts by date. A fact's probability is FACT_PROBABILITY x its confidence
        where the picture holds every positive term as a fact (FactReader.fact_state)."""
        live = self._matrix.live_mask()
        width = len(live)
        s = (self._query_scores(q)[:width] if q.looks else
             np.where(live, 0.0, -np.inf).astype(np.float32))
        keep, level, sure = self._facts.fact_state(q, width, self._filters.mask(folders, dates))
        s = np.where(keep, s, -np.inf)
        first = np.flatnonzero((level > 0) & np.isfinite(s))
        if p_floor is not None:  # facts under the floor go back to the look's hits
            first = first[sure[first] >= p_floor]
        first = first[np.lexsort((self._matrix.ids_of(first), -s[first], -level[first]))][:k]
        col_of = dict(zip(self._matrix.ids_of(first).tolist(), first.tolist()))
        hits = self._hits([(i, float(s[c])) for i, c in col_of.items()], k, sort, last)
        for h in hits:
            p = sure[col_of[h.id]]
            h.probability = float(p) if p > 0 else None
        rest = k - len(hits)
        if rest > 0 and q.looks and (p_floor is None or line is not None):
            s[first] = -np.inf  # shown already
            hits += self._ranked(s, rest, floor, sort, (), last)
        return self._facts.with_facts(hits, q)

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
        if line is None and not q.fact_terms:
            return None
        with self._lock:
            keep = self._filters.mask(q.folders if folders is None else folders, q.dates)
            width = len(self._matrix.live_mask())
            if q.fact_terms or q.fact_filters:
                keep, _, sure = self._facts.fact_state(q, width, keep)
                ok = keep & (sure >= p) & self._matrix.live_mask()
            else:
                ok = np.zeros(width, bool)
            if line is not None:
                s = self._query_scores(q)[:width]
                look = np.isfinite(s) & (s >= self._probability_floor(q, p, line, None))
                ok |= look & (keep if keep is not None else True)
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
            for attempt in range(STALE_TRIES):
                last = attempt == STALE_TRIES - 1
                if self._folder._moved():
                    self._folder._load()
                try:
                    hits = answer(last)
                except _Stale:
                    self._folder._load()
                    continue
                if last or not self._folder._moved():  # no move committed while it answered
                    return hits
            raise AssertionError("unreachable: the last try returns")

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
        sort (one of SORT_ORDERS)."""
        keep = self._filters.mask(folders, dates)
        if keep is not None:
            keep = np.concatenate([keep, np.zeros(max(0, len(s) - len(keep)), bool)])[:len(s)]
            s = np.where(keep, s, -np.inf)
        if floor is not None:
            s = np.where(s >= float(floor), s, -np.inf)
        many = k if sort == "score" or floor is None else int(np.isfinite(s).sum())
        return self._hits(self._matrix.best_of(s, many), k, sort, last)

    def similar(self, z: np.ndarray, k: int = 10, *, exclude: Iterable[int] = (),
                floor: float | None = None, sort: str = "score",
                folders: Sequence[str] = ()) -> list[Hit]:
        """More like this: the k pictures whose text-space vectors are nearest to z (cosine
        similarity, both centred on the pictures' mean vector, so the words every picture
        scores high on do not make everything alike), best first; `exclude`: ids left out
        (the picture itself)."""
        z = np.asarray(z, dtype=np.float32).ravel()[: self._folder.space]  # the text space only
        if z.shape != (self._folder.space,):
            raise ValueError(f"a vector of {z.size} scores; pictures here have "
                             f"{self._folder.space}")
        sort = _sort_order(sort)
        exclude = [int(i) for i in exclude]

        def answer(last: bool) -> list[Hit]:
            s = self._matrix.similarities(z, self.mean_vector())
            for i in exclude:
                p = self._catalog.picture(i)
                if p is not None and p.col is not None and p.col < len(s):
                    s[p.col] = -np.inf
            return self._ranked(s, int(k), floor, sort, folders, last)

        return self._consistent(answer)

    def mean_vector(self) -> np.ndarray:
        """The pictures' mean vector (`space`,): the centre of `similar`'s cosine."""
        with self._lock:
            if self._mean is None:
                self._mean = self._matrix.mean(self._folder.space)
            return self._mean


def _sort_order(sort: str | None) -> str:
    """The order hits are asked in (none: by score); QueryError for one not in SORT_ORDERS."""
    sort = sort or "score"
    if sort not in SORT_ORDERS:
        raise QueryError(f"sort {sort!r}: by {', '.join(SORT_ORDERS[:-1])} or {SORT_ORDERS[-1]}")
    return sort


def _date_key(row: tuple) -> tuple[str, int]:
    """A hit's date, sortable: the wall-clock time it was taken (offsets left out: the clock
    of the place it was taken), else its file's date; then the file's mtime in ns (within a
    second, and for files with no date read)."""
    path, col, mtime_ns, taken, caption = row
    if taken:
        return taken[:19], mtime_ns
    return datetime.fromtimestamp(mtime_ns / 1e9).strftime("%Y-%m-%dT%H:%M:%S"), mtime_ns


def _standard(s: np.ndarray, scale: float | None = None) -> np.ndarray:
    """Scores as standard scores over the finite ones (-inf stays -inf): minus their mean,
    over `scale` where given (the query's spread as the model's scores of its words have
    it: `Index.scales`), else over their standard deviation."""
    live = np.isfinite(s)
    out = np.full(len(s), -np.inf, dtype=np.float32)
    if live.any():
        v = s[live].astype(np.float64)
        sd = v.std() if scale is None else scale
        out[live] = (v - v.mean()) / sd if sd > 0 else 0.0
    return out
