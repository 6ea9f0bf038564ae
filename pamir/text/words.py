"""Text side: tokenising captions and queries into words (bags of words), stop words,
folding, keywords. Their idf weights and vectors are pamir.text.vectors' (scipy).
"""

from __future__ import annotations

import ast
import re
import unicodedata
from collections.abc import Iterable

from ..extras import package_folder


def _english_stop_words() -> frozenset[str]:
    """scikit-learn's English stop words (318, from the Glasgow IR group's list), read from
    its source file: importing sklearn.feature_extraction would add about a second to every
    `pamir search`, which only needs this list."""
    source = package_folder("sklearn.feature_extraction") / "_stop_words.py"
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and getattr(node.targets[0], "id", "") == "ENGLISH_STOP_WORDS"):
            return frozenset(ast.literal_eval(node.value.args[0]))
    raise ImportError(f"{source}: no ENGLISH_STOP_WORDS; is scikit-learn installed whole?")


#: English stop words for free-text captions and queries: scikit-learn's list, the few this
#: project used before it, and the words of definitions that scikit-learn's list lacks (a
#: folder of one-line descriptions kept "called", "means" and "used" as words). Keywords are
#: not filtered; an index drops from this list the words its model's vocabulary holds
#: (Corel 5k's "detail" stays searchable).
STOP_WORDS = _english_stop_words() | frozenset(
    """a an and are as at be by for from has have in is it its of on or that the this to was
    were with without over under into onto near some his her their our your my""".split()
) | frozenset("called calls means meaning used uses using known named also".split())

_TOKEN = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*", re.UNICODE)


def tokenize(text: str, stop_words: Iterable[str] | None = STOP_WORDS,
             min_length: int = 2) -> list[str]:
    """Lower-case words of `text`, punctuation split off, stop words and tokens shorter than
    min_length (captions: one-character tokens, "a" or the "s" of "peacock's" typed with
    another apostrophe) removed, order kept."""
    stop = frozenset(stop_words or ())
    return [w for w in (m.group(0).lower() for m in _TOKEN.finditer(text))
            if len(w) >= min_length and w not in stop]


_SPACES = re.compile(r"\s+")


def fold(text: str) -> str:
    """A word as facts and queries are matched (pamir.facts.fact, pamir.text.query): lower
    case, accents taken off (NFKD, then the combining marks dropped), runs of spaces made one,
    so that a query word and a stored fact meet whatever the case and accents ("reykjavik"
    finds Reykjavík). "Reykjavík" -> "reykjavik", "  São  Paulo " -> "sao paulo". Letters with
    no decomposition (ø, ł, ß) keep theirs, casefolded."""
    decomposed = unicodedata.normalize("NFKD", str(text))
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _SPACES.sub(" ", bare.casefold()).strip()

def split_keywords(text: str) -> list[str]:
    """Keywords separated by spaces, commas or semicolons, lower-cased, duplicates dropped."""
    words = [w.strip().lower() for w in re.split(r"[\s,;]+", text)]
    return list(dict.fromkeys(w for w in words if w))
