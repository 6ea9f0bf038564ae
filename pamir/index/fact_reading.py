"""Reading an index's facts, a part of `Index`: the pictures holding a query's terms as facts
(pamir.facts.fact: keywords, places, text, people, the camera) and how sure each is, which
search ranks first (pamir.index.reading), the facts a hit shows, and the collection's facts
listed (places with their counts, where the pictures were taken).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..facts.fact import FILTER_KINDS, KINDS, NAME_KINDS, shown, shown_order
from ..facts.nearby import closeness, distances_km, near_area, parse_position
from ..text.query import NEAR_KEY, Query, filter_term
from .queries import Hit, QueryError

if TYPE_CHECKING:
    from .lifecycle import IndexFolder

#: The probability that a picture holding a query word as a fact (pamir.facts.fact) is relevant to
#: it, times the fact's confidence. A keyword people wrote defines relevance in a model's
#: protocol, so on its validation every tag is right by construction and cannot measure this
#: lower than 1; 0.95 leaves room for a wrong tag, a wrongly read place or sign.
FACT_PROBABILITY = 0.95
#: The kinds of facts a hit shows beside its caption (its keywords are the caption; text read
#: on it can be long and is shown by the page's detail view).
SHOWN_FACTS = ("place", "person", "camera", "colour")
#: The kinds of facts a query's plain word meets (all but those only a filter finds).
TERM_KINDS = tuple(k for k in KINDS if k not in FILTER_KINDS)


class FactReader:
    """The facts of an open index (its folder's catalogue, under its lock)."""

    def __init__(self, folder: IndexFolder):
        self._catalog, self._lock = folder._catalog, folder._lock

    def fact_count(self, word: str) -> int:
        """How many pictures hold a folded term as a fact (a phrase: `fact_columns`)."""
        with self._lock:  # the catalogue's connection is shared by the server's threads
            n = self._catalog.facts.count(word)
            if n and self._catalog.facts.kinds(word) & set(FILTER_KINDS):  # "red", a colour
                n = len(self.fact_columns(word)[0])
            return n if n or " " not in word else len(self.fact_columns(word)[0])

    def name_only(self, word: str) -> bool:
        """Whether the pictures hold a folded term as a name (pamir.facts.fact.NAME_KINDS: a
        person, a place, a camera), and otherwise at most as a keyword, never as text read:
        then it is no look. A keyword beside the name is how tools write one: Lightroom and
        digiKam put "People|Isolde" and "Isolde" in the keywords of a picture of her."""
        with self._lock:
            kinds = self._catalog.facts.kinds(word) - set(FILTER_KINDS)
            if not kinds and " " in word:
                kinds = set().union(*(self._catalog.facts.kinds(w) for w in word.split())
                                    ) - set(FILTER_KINDS)
        return bool(kinds & set(NAME_KINDS)) and kinds <= {*NAME_KINDS, "keyword"}

    def fact_columns(self, word: str, kinds: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray]:
        """(columns, confidences) of the pictures holding a folded term as a fact (of
        `kinds`; none given: a plain word's, TERM_KINDS): the term itself, or for a phrase
        ("polar bear") every word of it (a keyword field holds one word a keyword), the
        lowest of their confidences."""
        if tuple(kinds) == (NEAR_KEY,):
            return self._near_columns(word)
        kinds = tuple(kinds) or TERM_KINDS
        cols, conf = self._catalog.facts.columns(word, kinds)
        words = word.split()
        if len(cols) or len(words) < 2:
            return cols, conf
        held = None
        for w in words:
            c, f = self._catalog.facts.columns(w, kinds)
            part = dict(zip(c.tolist(), f.tolist()))
            held = part if held is None else {k: min(v, part[k]) for k, v in held.items()
                                              if k in part}
            if not held:
                break
        return (np.array(list(held), np.int64), np.array(list(held.values()), np.float32))

    def _near_columns(self, value: str) -> tuple[np.ndarray, np.ndarray]:
        """(columns, closeness) of the pictures within a `near:` value's radius
        (pamir.facts.nearby): the nearer, the surer, so that a query of filters alone lists the
        nearest first."""
        try:
            lat, lon, km, _ = near_area(value)
        except ValueError as e:
            raise QueryError(str(e)) from None
        with self._lock:  # the catalogue's connection is shared by the server's threads
            positions = self._catalog.positions()
        rows = [(c, p) for _, c, text in positions if (p := parse_position(text)) is not None]
        if not rows:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        cols = np.array([c for c, _ in rows], np.int64)
        near = closeness(distances_km(np.array([p for _, p in rows]), lat, lon), km)
        inside = near > 0
        return cols[inside], near[inside].astype(np.float32)

    def fact_state(self, q: Query, width: int, keep: np.ndarray | None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For a query with facts, per column: (keep: the filters' mask with the fact filters
        and the excluded terms' facts applied; level: the summed weight of the positive terms
        the picture holds as facts, times their confidence; sure: the probability of the
        pictures holding every positive term as a fact, 0 for the others)."""
        keep = np.ones(width, bool) if keep is None else keep[:width].copy()
        # the filters' facts' confidence (a name carried to a face that looks like the
        # person's is less sure than one written): in the probability, and the order of a
        # query of filters alone
        filtered = np.ones(width, np.float64)
        for kind, word in q.fact_filters:
            cols, conf = self.fact_columns(word, (kind,))
            inside = cols < width
            held = np.zeros(width, np.float64)
            held[cols[inside]] = conf[inside]
            keep &= held > 0
            filtered *= held
        level = np.zeros(width, np.float64)
        sure = np.full(width, FACT_PROBABILITY, np.float64) * filtered
        positive = [term for term in q.fact_terms if term[0] > 0]
        for weight, word in q.fact_terms:
            cols, conf = self.fact_columns(word)
            inside = cols < width
            cols, conf = cols[inside], conf[inside]
            if weight < 0:
                keep[cols] = False
                continue
            level[cols] += weight * conf
            held = np.zeros(width, np.float64)
            held[cols] = conf
            sure *= held
        # a query whose terms are not all facts leaves no picture sure (its other words are
        # the model's to answer); one of filters alone holds in every picture it keeps
        terms = [m for m in q.matches if m.weight > 0]
        if len(positive) < len(terms) or not (positive or q.fact_filters):
            sure[:] = 0.0
        if not terms:
            level[:] = np.where(keep, filtered, 0.0)
        return keep, level, sure

    def with_facts(self, hits: list[Hit], q: Query | None = None) -> list[Hit]:
        """The hits with their facts of SHOWN_FACTS and the query's terms they hold."""
        with self._lock:  # the catalogue's connection is shared by the server's threads
            facts = self._catalog.facts.of(h.id for h in hits)
        terms = {w for weight, w in (q.fact_terms if q is not None else ()) if weight > 0}
        filters = set(q.fact_filters if q is not None else ())
        for h in hits:
            held = facts.get(h.id, ())
            for f in sorted(held, key=_shown_order):
                form = shown(f)
                if f.kind in SHOWN_FACTS and form not in h.facts.get(f.kind, ()):
                    h.facts.setdefault(f.kind, []).append(form)
            meets = [f for f in held if f.word in terms and f.kind not in FILTER_KINDS]
            h.matched = [w for w in dict.fromkeys(f.word for f in meets)]
            h.held = list({(f.kind, shown(f)): (f.kind, shown(f), float(f.confidence))
                           for f in sorted(held, key=shown_order)
                           if f in meets or (f.kind, f.word) in filters}.values())
        for _, value in (f for f in filters if f[0] == NEAR_KEY):
            self._held_distance(hits, value)
        return hits

    def _held_distance(self, hits: list[Hit], value: str) -> None:
        """Each hit's distance from a `near:` value's point, as it holds it ("near", "1.2 km
        from Kyoto", its closeness)."""
        lat, lon, km, name = near_area(value)
        where = self.positions() or {}
        for h in hits:
            if h.id in where:
                d = float(distances_km(np.array([where[h.id]]), lat, lon)[0])
                h.held.append((NEAR_KEY, f"{d:.1f} km from {name}",
                               float(closeness(np.array([d]), km)[0])))

    def facts_of(self, picture_id: int) -> list:
        """The picture's facts (pamir.facts.fact.Fact), by kind then word."""
        with self._lock:
            return self._catalog.facts.of([picture_id]).get(int(picture_id), [])

    def fact_counts(self, kind: str, limit: int = 100) -> list[tuple[str, int]]:
        """The most common words of one kind of fact, with their pictures' counts."""
        with self._lock:
            return self._catalog.facts.counts(kind, limit)

    def places(self, limit: int = 100) -> list[dict]:
        """The collection's places, the most pictures first (pamir.facts.places.listed_places:
        each with the form shown, its level, its count and the query that finds it)."""
        # start-up time: GeoNames' tables (0.18 s), which every command line would pay
        from ..facts.places import COUNTRY_ALIASES_MAX, listed_places  # noqa: PLC0415

        with self._lock:  # a country's other forms ("uk") are rows of their own: room for them
            rows = self._catalog.facts.words("place", limit * COUNTRY_ALIASES_MAX)
        return listed_places(rows)[:limit]

    def positions(self) -> dict[int, tuple[float, float]] | None:
        """{picture id: (lat, lon)} of the scored pictures whose files give a position; None
        for a catalogue older than the positions (schema 3)."""
        with self._lock:
            if not self._catalog.keeps_positions:
                return None
            rows = self._catalog.positions()
        return {int(i): p for i, _, text in rows if (p := parse_position(text)) is not None}

    def places_tree(self) -> list[dict]:
        """The collection's places as a tree, country → region → city → place, with their
        counts and the queries that find them (pamir.facts.place_tree)."""
        from ..facts.place_tree import places_tree  # noqa: PLC0415 - start-up time, as places

        with self._lock:
            return places_tree(self._catalog.facts.rows("place"))

    def place_points(self, limit: int = 5000) -> list[dict]:
        """Where the pictures were taken, for a map: {"id", "lat", "lon", "name", "query"}
        of up to `limit` pictures with a position (the lowest ids), name and query those of
        its city (else its nearest place, region or country; `near:` where it has none)."""
        from ..facts.place_tree import picture_places  # noqa: PLC0415 - start-up time

        with self._lock:
            rows = self._catalog.positions()[:limit]
            named = picture_places(self._catalog.facts.rows("place"))
        out = []
        for pid, _, text in rows:
            p = parse_position(text)
            if p is None:
                continue
            levels = named.get(pid, {})
            level = next((lv for lv in ("city", "place", "region", "country") if lv in levels),
                         None)
            word, name = levels[level] if level else (None, None)
            query = (filter_term("place", word) if word else
                     f'{NEAR_KEY}:"{p[0]:.4f},{p[1]:.4f}" 1km')
            out.append({"id": int(pid), "lat": round(p[0], 5), "lon": round(p[1], 5),
                        "name": name or f"{p[0]:.3f}, {p[1]:.3f}", "query": query})
        return out

    def shown_facts(self, picture_id: int) -> dict[str, list[str]]:
        """The picture's facts of SHOWN_FACTS as a hit shows them: {"place": ["Kyoto",
        "Japan"], ...}."""
        return self.with_facts([Hit(int(picture_id), "", 0.0)])[0].facts


def _shown_order(fact) -> tuple:
    """A hit's facts in the order shown (pamir.facts.fact.shown_order), a kind that only its
    filter finds (a picture's colours) the largest share first."""
    return (*shown_order(fact), -fact.confidence if fact.kind in FILTER_KINDS else 0.0)
