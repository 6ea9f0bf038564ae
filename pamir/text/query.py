"""The query language: one parser for the CLI, the HTTP API and the web page.

    tiger grass                 words; stop words dropped ("a red flower in a garden" works)
    -water                      exclude: the word's score is subtracted
    tiger^2   2:tiger           weight a word (or a phrase) twice as much as the others
    "polar bear"                a phrase: one concept, mapped as a whole when not all of
                                its words are in the vocabulary
    floor:0.5                   drop pictures scoring under 0.5 (an empty answer is allowed)
    p:0.5  prob:0.9             drop pictures less likely than that to be relevant: the
                                probability is calibrated on validation (pamir.calibration),
                                p:0.5 keeps the pictures more likely relevant than not
    sort:date  sort:oldest      order the hits by the date taken, newest (or oldest) first
    date:2019  date:2019-07     only pictures taken that year, month or day (2019-07-14);
    date:2019-06..2019-08       a closed range of them (either end may be left open)
    in:holidays  in:/abs/path   only pictures under a folder (a path component, or a prefix)
    tag:sky  place:kyoto        only pictures holding that fact (pamir.facts.fact): a keyword
    place:"united kingdom"      people wrote, where it was taken, text read on it, a person,
    text:bakery person:alice    the camera; a quoted value is one phrase
    camera:canon colour:red     (color:red too: a dominant colour, pamir.facts.colour)
    near:kyoto                  only pictures taken near a place (within its city's reach)
    near:"35.01,135.77" 5km     or within a radius of a position (pamir.facts.nearby), nearest first

A term that pictures hold as a fact (a keyword of theirs, their place, ...) finds those
pictures first, with or without a model (pamir.index.reading ranks them); -term leaves them
out.

`parse(text)` gives a ParsedQuery (terms and options); `resolve(parsed, vocabulary, idf,
bridge)` turns it into a Query: the (T,) vector the index scores, and for each term how it was
matched (the word itself, an inflection, or the embedding model's nearest vocabulary words).

The vector: each term contributes weight x (its matched words' idf, times their similarity for
an embedding match); the sum is L2-normalised. A query of plain vocabulary words gives exactly
pamir.text.vectors.query_vector (presence x idf, normalised: TPAMI §III-A); an excluded word enters
with a negative weight, and the index scores z . q exactly, negative entries included.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from .words import STOP_WORDS, fold, tokenize

if TYPE_CHECKING:  # annotations only: the bridges load lazily
    from .bridge import Bridge
    from ..zeroshot.classes import ClassWords

#: Options of the grammar (key:value); other "x:y" tokens are words.
SORTS = {"score": "score", "date": "newest", "newest": "newest", "oldest": "oldest"}
#: The orders hits come in, which SORTS' words name: what Index.search and similar take.
SORT_ORDERS = tuple(dict.fromkeys(SORTS.values()))
FLOOR_KEYS = ("floor", "min")
PROBABILITY_KEYS = ("p", "prob")
FOLDER_KEYS = ("in", "folder")
#: The grammar's filter keys and the kind of fact (pamir.facts.fact.KINDS) each narrows to.
FILTER_KEYS = {"tag": "keyword", "keyword": "keyword", "place": "place", "text": "text",
               "person": "person", "camera": "camera", "colour": "colour", "color": "colour"}
#: The filter on distance (pamir.facts.nearby): a (NEAR_KEY, "place or lat,lon [radius]") filter.
NEAR_KEY = "near"
#: The largest radius `near:` takes (a quarter of the Earth's circumference is far enough).
MAX_NEAR_KM = 10_000.0
_RADIUS = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*(km|m)$", re.IGNORECASE)
#: Whether a word outside the vocabulary that ImageNet's classes reach is searched by them
#: alone (True), or also by the vocabulary's nearest words by meaning (False, as before issue
#: 37): "fish" by its fish classes, not by penguin and language. On the Corel 5k validation
#: pictures, for models of 50, 200 and 1,000 captioned pictures (3 draws each), all-query AvgP
#: rose 1.0, 0.0 and 0.2 (benchmarks/results/zero_caption.md, "How a query meets the
#: classes"). `resolve` reads it at each call, so that a benchmark can switch it.
CLASSES_ALONE = True
#: The largest weight a term may carry (a guard against "1e30:word").
MAX_WEIGHT = 100.0

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_TOKEN = re.compile(
    r'\s*(?:'
    r'(?P<opt>(?:floor|min|prob|p|sort|in|folder|date|near|' + "|".join(FILTER_KEYS) + r')):'
    r'(?:"(?P<optq>[^"]*)"|(?P<optv>\S+))'
    r'|(?P<sign>[-+])?(?:(?P<pre>' + _NUMBER + r'):)?'
    r'(?:"(?P<phrase>[^"]*)"?|(?P<word>[^\s"^]+))'
    r'(?:\^(?P<post>' + _NUMBER + r'))?'
    r'|(?P<junk>\S)'
    r')', re.IGNORECASE)


class QuerySyntaxError(ValueError):
    """A query the grammar cannot read (a bad option value)."""


@dataclass
class Term:
    """One searchable unit: a word or a quoted phrase, with its weight (negative: excluded)."""

    text: str                 # as the person wrote it, lower-cased: "flowers", "polar bear"
    words: list[str]          # its tokens, stop words dropped
    weight: float = 1.0
    phrase: bool = False


@dataclass
class ParsedQuery:
    text: str
    terms: list[Term] = field(default_factory=list)
    floor: float | None = None
    p_floor: float | None = None  # a floor on the calibrated probability of relevance
    sort: str = "score"       # "score", "newest" or "oldest"
    folders: list[str] = field(default_factory=list)
    stop_only: list[str] = field(default_factory=list)  # words dropped as stop words
    dates: list[tuple[str, str]] = field(default_factory=list)  # closed ("YYYY-MM-DD", ...)
    facts: list[tuple[str, str]] = field(default_factory=list)  # filters (kind, folded word)


@dataclass
class Match:
    """How a term met the vocabulary. how: "vocabulary" (the word itself), "phrase" (a
    phrase's words, all in the vocabulary), "inflection" (flowers -> flower), "embedding"
    (nearest vocabulary words by the sentence-embedding model), "classes" (ImageNet's
    only), "fact" (pictures' facts only) or "unknown". facts: how many pictures hold the
    term as a fact (pamir.facts.fact), whatever else it met."""

    term: str
    weight: float
    how: str
    words: list[tuple[str, float]]  # (vocabulary word, similarity or 1.0)
    note: str = ""                  # why an unknown word found nothing
    #: ImageNet table words (1.0) or classes (similarity) the term's class part reads
    classes: list[tuple[str, float]] = field(default_factory=list)
    facts: int = 0

    def as_dict(self) -> dict:
        return {"term": self.term, "weight": self.weight, "how": self.how,
                "words": [{"word": w, "similarity": round(float(s), 4)} for w, s in self.words],
                **({"classes": [{"class": c, "similarity": round(float(s), 4)}
                                for c, s in self.classes]} if self.classes else {}),
                **({"facts": self.facts} if self.facts else {}),
                **({"note": self.note} if self.note else {})}

    def describe(self) -> str:
        """'bird -> parrot 0.71, eagle 0.66' (weights and exclusions marked)."""
        head = ("-" if self.weight < 0 else "") + self.term
        if abs(self.weight) != 1:
            head += f"^{abs(self.weight):g}"
        held = f"{self.facts} picture{' says' if self.facts == 1 else 's say'} so"
        if self.how == "fact":
            return f"{head} ({held})"
        if self.facts:
            return f"{head} ({held}; then " + self._look() + ")"
        return self._look(head)

    def _look(self, head: str | None = None) -> str:
        """How the term met the vocabulary and the classes, after `head` (none: without)."""
        if head is None:
            if self.how in ("vocabulary", "phrase", "inflection"):
                return "the model's " + " ".join(w for w, _ in self.words)
            return self._look("looks like").replace("looks like -> ", "looks like ")
        if self.how == "unknown":
            quiet = not self.note or self.note == "not in the vocabulary"
            return head if quiet else f"{head} ({self.note})"
        if self.how in ("vocabulary", "phrase"):
            return f"{head} -> " + " ".join(w for w, _ in self.words)
        if self.how == "inflection":
            return f"{head} -> {self.words[0][0]}"
        out = f"{head} -> " + ", ".join(f"{w} {s:.2f}" for w, s in self.words)
        if self.classes:
            out += ("; " if self.words else "") + "ImageNet: " + ", ".join(
                c if s == 1.0 else f"{c} {s:.2f}" for c, s in self.classes)  # 1.0: a word
        return out


@dataclass
class Query:
    """A resolved query: what the index scores, and how each term was understood."""

    text: str
    vector: np.ndarray            # (T,) float32, L2-normalised; negative entries exclude
    words: list[str]              # vocabulary words used, in order
    unknown: list[str]            # terms that matched nothing
    matches: list[Match] = field(default_factory=list)
    floor: float | None = None
    sort: str = "score"
    folders: list[str] = field(default_factory=list)
    #: (weight, (C,) class weights) of each term that the classes matched (pamir.zeroshot.classes):
    #: the term scores log(eps + its classes' probability mass) times its weight; and how
    #: much of the class part's standardised score is mixed with the words'
    class_terms: list[tuple[float, np.ndarray]] = field(default_factory=list)
    class_mix: float = 0.0
    #: date: filters, closed ranges of days ("2019-06-01", "2019-08-31"); any of them
    dates: list[tuple[str, str]] = field(default_factory=list)
    p_floor: float | None = None
    #: (weight, folded term) of each term that pictures hold as a fact, and the filters on
    #: facts (kind, folded word): pamir.index.reading ranks and narrows by them
    fact_terms: list[tuple[float, str]] = field(default_factory=list)
    fact_filters: list[tuple[str, str]] = field(default_factory=list)

    @property
    def searchable(self) -> bool:
        return bool(self.words or self.class_terms or self.fact_terms or self.fact_filters)

    @property
    def looks(self) -> bool:
        """Whether the query has a part the pictures' scores answer (model words, classes)."""
        return bool(self.words or self.class_terms)

    @property
    def mapped(self) -> list[Match]:
        """The terms that were not vocabulary words as written (inflections, embeddings,
        ImageNet classes), and those pictures hold as facts."""
        return [m for m in self.matches
                if m.how in ("inflection", "embedding", "classes", "fact") or m.facts]

    def mapping_json(self) -> list[dict]:
        return [m.as_dict() for m in self.matches]

    def options_json(self) -> dict:
        return {"floor": self.floor, "p_floor": self.p_floor, "sort": self.sort, "folders": self.folders,
                "dates": [list(d) for d in self.dates],
                "facts": [{"kind": k, "word": w} for k, w in self.fact_filters]}


def _number(text: str, what: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise QuerySyntaxError(f"{what}: {text!r} is not a number") from None
    if not np.isfinite(x):
        raise QuerySyntaxError(f"{what}: {text!r} is not a finite number")
    return x


_DAY = re.compile(r"(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?$")


def _day(text: str, end: bool) -> str:
    """"2019" / "2019-07" / "2019-07-14" -> its first (or, end, its last) day."""
    m = _DAY.match(text.strip())
    if not m:
        raise QuerySyntaxError(f"date:{text}: write a year, a month or a day: 2019, 2019-07, "
                               "2019-07-14, or a range 2019-06..2019-08")
    y, mo, d = int(m.group(1)), m.group(2), m.group(3)
    try:
        if mo is None:
            day = date(y, 12, 31) if end else date(y, 1, 1)
        elif d is None:
            day = date(y, int(mo), calendar.monthrange(y, int(mo))[1] if end else 1)
        else:
            day = date(y, int(mo), int(d))
    except ValueError:
        raise QuerySyntaxError(f"date:{text}: no such date") from None
    return day.isoformat()


def date_range(value: str) -> tuple[str, str]:
    """A date: value as a closed range of days: "2019-07" -> ("2019-07-01", "2019-07-31");
    "2019-06..2019-08" -> ("2019-06-01", "2019-08-31"); "2019.." and "..2019" are open."""
    lo, dots, hi = value.partition("..")
    if not dots:
        return _day(value, False), _day(value, True)
    if not lo.strip() and not hi.strip():
        raise QuerySyntaxError(f"date:{value}: give at least one end of the range")
    first = _day(lo, False) if lo.strip() else "0001-01-01"
    last = _day(hi, True) if hi.strip() else "9999-12-31"
    if first > last:
        raise QuerySyntaxError(f"date:{value}: the range ends before it starts")
    return first, last


def radius_km(text: str) -> float | None:
    """"5km" -> 5.0, "500m" -> 0.5; None when the text is not a radius."""
    m = _RADIUS.match(text.strip())
    if not m:
        return None
    km = float(m.group(1)) / (1000.0 if m.group(2).lower() == "m" else 1.0)
    return km if 0 < km <= MAX_NEAR_KM else None


def parse(text: str, stop_words: Sequence[str] | frozenset = STOP_WORDS) -> ParsedQuery:
    """Read a query string (the grammar is in the module docstring). Never raises for words;
    QuerySyntaxError for a bad option value (floor:abc, sort:size)."""
    out = ParsedQuery(text=text or "")
    stop = frozenset(stop_words)
    seen: set[tuple[str, bool]] = set()
    near = False  # the last token was near:, which a radius ("5km") may follow
    for m in _TOKEN.finditer(text or ""):
        if m.group("junk") is not None:
            continue
        if near and m.group("word") and not m.group("sign") and radius_km(m.group("word")):
            kind, value = out.facts[-1]
            out.facts[-1] = (kind, f"{value} {m.group('word').lower()}")
            near = False
            continue
        near = m.group("opt") is not None and m.group("opt").lower() == NEAR_KEY
        if m.group("opt"):
            key = m.group("opt").lower()
            value = m.group("optq") if m.group("optq") is not None else m.group("optv")
            if key in FLOOR_KEYS:
                out.floor = _number(value, key)
            elif key in PROBABILITY_KEYS:
                out.p_floor = _number(value.rstrip("%"), key) / (100 if value.endswith("%")
                                                                  else 1)
                if not 0 <= out.p_floor <= 1:
                    raise QuerySyntaxError(f"{key}:{value}: a probability is between 0 and 1 "
                                           "(p:0.5, or p:50%)")
            elif key == "date":
                out.dates.append(date_range(value))
            elif key == NEAR_KEY:
                if fold(value):
                    out.facts.append((NEAR_KEY, fold(value)))
            elif key in FILTER_KEYS:
                if fold(value):
                    out.facts.append((FILTER_KEYS[key], fold(value)))
            elif key == "sort":
                if value.lower() not in SORTS:
                    raise QuerySyntaxError(f"sort:{value}: sort by one of "
                                           f"{', '.join(sorted(SORTS))}")
                out.sort = SORTS[value.lower()]
            elif value:
                out.folders.append(value)
            continue
        phrase = m.group("phrase")
        raw = phrase if phrase is not None else m.group("word")
        weight = 1.0
        for g in ("pre", "post"):
            if m.group(g):
                weight *= _number(m.group(g), "weight")
        weight = min(weight, MAX_WEIGHT)
        if m.group("sign") == "-":
            weight = -weight
        # one-letter words are kept: a vocabulary may hold them, else they are reported unknown
        words = tokenize(raw, stop, min_length=1)
        if not words:
            out.stop_only += tokenize(raw, (), min_length=1)
            continue
        if weight == 0:
            continue
        if phrase is not None and len(words) > 1:
            key = (" ".join(words), True)
            if key not in seen:
                seen.add(key)
                out.terms.append(Term(" ".join(words), words, weight, True))
            continue
        # an unquoted run ("red-flowers", "a,b") or a one-word phrase: one term per word
        for w in words:
            if (w, False) not in seen:
                seen.add((w, False))
                out.terms.append(Term(w, [w], weight, False))
    return out


#: The longest run of unquoted words `join_fact_phrases` looks up as one fact.
FACT_PHRASE_WORDS = 3


def filter_term(key: str, value: str) -> str:
    """The grammar's filter `key:value` for a value (a fact's word): quoted where it has
    spaces (`place:"united kingdom"`); a double quote in it, which the grammar cannot
    quote, is left out."""
    value = str(value).replace('"', "").strip()
    return f'{key}:"{value}"' if not value or any(c.isspace() for c in value) else f"{key}:{value}"


def join_fact_phrases(parsed: ParsedQuery, facts: Callable[[str], int]) -> ParsedQuery:
    """Runs of unquoted words (of one weight) that pictures hold as one fact become one
    phrase term, the longest first: `united kingdom` as `"united kingdom"`, `new york` as
    `"new york"`; and a stop word that pictures hold as a fact (a tag `detail`, `top`) is a
    term again. `facts(folded word or phrase)` counts the pictures holding it."""
    held = [w for w in dict.fromkeys(parsed.stop_only) if facts(fold(w))]
    parsed.terms += [Term(w, [w]) for w in held]
    parsed.stop_only = [w for w in parsed.stop_only if w not in held]
    terms, out, i = parsed.terms, [], 0
    while i < len(terms):
        for n in range(min(FACT_PHRASE_WORDS, len(terms) - i), 1, -1):
            run = terms[i:i + n]
            if any(t.phrase or t.weight != run[0].weight for t in run):
                continue
            text = " ".join(t.text for t in run)
            if facts(fold(text)):
                out.append(Term(text, [w for t in run for w in t.words], run[0].weight, True))
                i += n
                break
        else:
            out.append(terms[i])
            i += 1
    parsed.terms = out
    return parsed


def resolve(parsed: ParsedQuery, vocabulary: Sequence[str], idf: np.ndarray,
            bridge: "Bridge | None" = None, word_index: dict[str, int] | None = None,
            classes: "ClassWords | None" = None, class_mix: float = 0.0,
            table_words: bool = False, facts: "Callable[[str], int] | None" = None,
            names: "Callable[[str], bool] | None" = None) -> Query:
    """The Query of a parsed query over a vocabulary (with idf weights). Terms not in the
    vocabulary go through `bridge` (inflections, then the embedding model) when one is given;
    without it they are unknown. `classes`: the ImageNet classes of a CNN representation
    (pamir.zeroshot.classes), which also match those terms (not the vocabulary's own words or their
    inflections); `class_mix` of their standardised scores is mixed in. With `table_words`,
    vocabulary words that name ImageNet classes (the WordNet table, or an inflection) reach
    their classes too. An index with no vocabulary (no captions at all) answers with the
    classes alone. `facts(folded term)`: how many pictures hold the term as a fact; such a
    term is searchable whatever else it meets. `names(folded term)`: whether they hold it
    only as a name (a person, a place: pamir.facts.fact.NAME_KINDS); such a term outside the
    vocabulary is searched as a fact alone, not by its look (ImageNet's classes, the
    embedding's nearest words)."""
    word_index = word_index if word_index is not None else {w: t for t, w in
                                                            enumerate(vocabulary)}
    idf = np.asarray(idf, dtype=np.float64)
    v = np.zeros(len(vocabulary), dtype=np.float64)
    matches, used, unknown, class_terms, fact_terms = [], [], [], [], []
    share = [0.0, 0.0]  # the weights of the terms with classes, of all terms searched
    for term in parsed.terms:
        held = int(facts(fold(term.text))) if facts is not None else 0
        name = bool(held) and names is not None and names(fold(term.text))
        match = _match(term, word_index, bridge if vocabulary else None)
        if name and match.how == "embedding":  # a name's nearest words by meaning: no look
            match = Match(term.text, term.weight, "unknown", [])
        matches.append(match)
        match.facts = held
        if match.facts:
            fact_terms.append((term.weight, fold(term.text)))
        found = None
        if classes is not None:
            if match.how in ("embedding", "unknown"):
                found = classes.match(term.text, term.words)
            elif table_words and classes.lookup(term.words) is not None:
                found = classes.match(term.text, term.words)  # the table's: no embedding
        if found is not None and name and found.how == "embedding":
            found = None  # "isolde" is no echidna; a name that is a class's word ("buffalo") is
        if found is not None:
            if found.vector is not None:
                if match.how == "embedding" and CLASSES_ALONE:
                    match.how, match.words = "unknown", []
                class_terms.append((term.weight, found.vector))
                match.classes = found.words
                if match.how == "unknown":
                    match.how, match.note = "classes", ""
                share[0] += abs(term.weight)
            elif match.how == "unknown" and not vocabulary:
                match.note = found.note
        share[1] += abs(term.weight) if match.how != "unknown" else 0.0
        if match.how == "unknown" and match.facts:
            match.how, match.note = "fact", ""
        if match.how in ("unknown", "classes", "fact"):
            if match.how == "unknown":
                unknown.append(term.text)
            continue
        for w, s in match.words:
            t = word_index[w]
            v[t] += term.weight * s * idf[t]
            if w not in used:
                used.append(w)
    norm = np.linalg.norm(v)
    vector = (v / norm if norm > 0 else v).astype(np.float32)
    # the class scores take the mix only of the share of the query their terms carry: for
    # "lion cub", cub's classes weigh half what they would for "cub" alone
    mix = class_mix * share[0] / share[1] if class_terms and share[1] else 0.0
    return Query(parsed.text, vector, used, unknown, matches, parsed.floor, parsed.sort,
                 list(parsed.folders), class_terms, mix, list(parsed.dates), parsed.p_floor,
                 fact_terms, list(parsed.facts))


def _match(term: Term, word_index: dict[str, int], bridge) -> Match:
    if term.text in word_index:
        return Match(term.text, term.weight, "vocabulary", [(term.text, 1.0)])
    if term.phrase:
        for joined in ("_".join(term.words), "".join(term.words), "-".join(term.words)):
            if joined in word_index:
                return Match(term.text, term.weight, "vocabulary", [(joined, 1.0)])
        if all(w in word_index for w in term.words):  # a bag of words: order carries nothing
            return Match(term.text, term.weight, "phrase", [(w, 1.0) for w in term.words])
    if bridge is None:
        return Match(term.text, term.weight, "unknown", [], "not in the vocabulary")
    if not term.phrase:
        lemma = bridge.inflection(term.text)
        if lemma is not None:
            return Match(term.text, term.weight, "inflection", [(lemma, 1.0)])
    near, note = bridge.neighbours(term.text)
    if near:
        return Match(term.text, term.weight, "embedding", near)
    return Match(term.text, term.weight, "unknown", [], note)


__all__ = ["Match", "NEAR_KEY", "ParsedQuery", "Query", "QuerySyntaxError", "Term", "filter_term",
           "join_fact_phrases", "parse", "radius_km", "resolve"]
