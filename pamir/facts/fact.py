"""Facts: the words a picture has for certain, as opposed to the scores a model guesses.

People look for their pictures by what they know about them: the keywords they wrote, where a
picture was taken, what is written on it, who is in it, the camera. Each of these is a fact of
one kind (KINDS). A fact is found with or without a model; a picture that holds a query word as
a fact ranks above pictures that only look like the word (pamir.index.reading), and the
grammar's `tag:`, `place:`, `text:`, `person:` and `camera:` filter on one kind
(pamir.text.query).

This module is the one home of what a fact is. Its words are written as a query's are
(`fold`, pamir.text.words', named here too), so that a query word and a stored fact meet
whatever the case and accents ("reykjavik" finds Reykjavík). Producers turn what they read
into Facts: the catalogue stores them per picture and kind (pamir.index.catalog), the index's
sync writes them when a picture is read. Which grammar key narrows to which kind is the
grammar's (pamir.text.query.FILTER_KEYS).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..text.words import fold

#: The kinds of facts, in the order a picture's facts are shown.
KINDS = ("keyword", "place", "text", "person", "camera", "colour")
#: The kinds read from a picture's files with its metadata (pamir.facts.metadata), written again
#: whenever they are read (a sidecar's change included).
FILE_KINDS = ("place", "camera")
#: The kinds of facts that name someone or somewhere (or a camera) rather than say what a
#: picture shows: a query word held only as one of these is not also searched by its look
#: (ImageNet's classes, the embedding's nearest words): "isolde" is a person, not an
#: echidna; "kyoto" a place, not a temple. A keyword and text read on a picture ("bakery",
#: "tiger") are also looks, and keep them.
NAME_KINDS = ("person", "place", "camera")
#: The kinds of facts that only their filter finds (`colour:red`, pamir.text.query.FILTER_KEYS),
#: never a query's plain word: a picture's dominant colour is not what "red" in a query
#: means ("red car" is a car, not a red picture), so a plain word neither ranks such a
#: picture first nor, excluded ("flowers -red"), leaves it out.
FILTER_KINDS = ("colour",)

@dataclass(frozen=True)
class Fact:
    """One word (or phrase) a picture has for certain. word: folded (`fold`); confidence in
    [0, 1] (an OCR word's recognition score; 1 for a keyword people wrote); detail: JSON
    text of what the producer wants to keep with it (the form shown, a box)."""

    kind: str
    word: str
    confidence: float = 1.0
    detail: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"fact kind {self.kind!r}: one of {', '.join(KINDS)}")
        if not self.word or self.word != fold(self.word):
            raise ValueError(f"fact word {self.word!r}: write it folded ({fold(self.word)!r})")
        if not 0.0 <= float(self.confidence) <= 1.0:
            raise ValueError(f"fact confidence {self.confidence!r}: between 0 and 1")


#: The order a place's words are shown in: "Kamigyō-ku, Kyoto, Kyoto, Japan".
PLACE_LEVELS = ("place", "city", "region", "country")


def detail_of(fact: Fact) -> dict:
    """A fact's detail as a dict ({} where it has none or it is not JSON of a dict)."""
    try:
        detail = json.loads(fact.detail) if fact.detail else {}
    except ValueError:
        return {}
    return detail if isinstance(detail, dict) else {}


def shown(fact: Fact) -> str:
    """A fact as a person reads it: the form its producer kept ("Kyōto"), else its word."""
    form = detail_of(fact).get("shown")
    return str(form) if form else fact.word


def shown_order(fact: Fact) -> tuple:
    """Facts in the order they are shown: by kind, a place from the nearest to the country."""
    level = detail_of(fact).get("level")
    return (fact.kind, PLACE_LEVELS.index(level) if level in PLACE_LEVELS else len(PLACE_LEVELS))


def camera_facts(camera: str | None) -> list[Fact]:
    """A camera's make and model (pamir.facts.metadata: "Canon EOS 5D") as camera facts: the whole
    name, the make and the model ("canon eos 5d", "canon", "eos 5d"), so that `camera:canon`
    and `camera:"eos 5d"` both find it."""
    name = fold(camera or "")
    if not name:
        return []
    make, _, model = name.partition(" ")
    shown = json.dumps({"shown": camera.strip()}, ensure_ascii=False)
    return [Fact("camera", w, 1.0, shown) for w in dict.fromkeys((name, make, model)) if w]


def keyword_facts(caption) -> list[Fact]:
    """A picture's caption words (from its files, a sidecar or a table) as keyword facts."""
    words = dict.fromkeys(fold(w) for w in caption or ())
    return [Fact("keyword", w) for w in words if w]


__all__ = ["FILE_KINDS", "FILTER_KINDS", "Fact", "KINDS", "NAME_KINDS", "camera_facts", "fold",
           "keyword_facts"]
