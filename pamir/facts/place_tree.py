"""A collection's places as a tree: country → region → city → place (a district, a suburb,
a town), each with how many pictures were taken there, from the pictures' place facts
(pamir.facts.places.place_facts: each fact's detail holds its level and the form shown).

GeoNames names one area several ways: Lima is a city in "Lima Province" and its districts
are in "Lima region"; Kyoto is a city in the prefecture "Kyoto". A level named like the one
under it is left out, and nodes are merged by their name with the generic parts off
(pamir.facts.places.bare_name), so that the page shows one "Lima" under Peru, not "Lima", "Lima
Province" and "Lima region" side by side.
"""

from __future__ import annotations

import json
from collections import defaultdict

from .fact import fold
from .places import bare_name
from ..text.query import filter_term

#: The levels of the tree, from the top.
LEVELS = ("country", "region", "city", "place")


def picture_places(rows) -> dict[int, dict[str, tuple[str, str]]]:
    """{picture: {level: (word, form shown)}} from (picture, word, detail) rows of place
    facts; a level's first word whose folded form is its form shown wins (a country's "uk"
    is one of its words, "united kingdom" the one it is shown by)."""
    out: dict[int, dict[str, tuple[str, str]]] = defaultdict(dict)
    for picture, word, detail in rows:
        try:
            d = json.loads(detail) if detail else {}
        except ValueError:
            continue
        level = d.get("level") if isinstance(d, dict) else None
        if level not in LEVELS:
            continue
        shown = str(d.get("shown") or word)
        have = out[picture].get(level)
        if have is None or (word == fold(shown) and have[0] != fold(shown)):
            out[picture][level] = (word, shown)
    return out


def path_of(levels: dict[str, tuple[str, str]]) -> list[tuple[str, str, str, str]]:
    """A picture's (key, level, word, shown) from the country down, a level named like
    the one below it left out (the region "Lima Province" above the city Lima, the city
    Kyoto above itself as its nearest place)."""
    path = []
    for level in LEVELS:
        if level in levels:
            word, shown = levels[level]
            key = bare_name(shown, area=True) if level == "region" else fold(shown)
            path.append((key, level, word, shown))
    out = []
    for i, step in enumerate(path):
        below = path[i + 1] if i + 1 < len(path) else None
        if below is not None and below[0] in (step[0], bare_name(step[3], area=True)):
            continue
        if out and out[-1][0] == step[0]:
            continue
        out.append(step)
    return out


def places_tree(rows) -> list[dict]:
    """The tree of (picture, word, detail) rows of place facts: a list of countries, each
    {"name", "level", "pictures", "query", "children"}, the most pictures first. Nodes of
    one parent with one key (a city and a region named after it) are one node, shown by
    the lower level's form."""
    root: dict = {"children": {}}
    for picture, levels in picture_places(rows).items():
        node = root
        for key, level, word, shown in path_of(levels):
            child = node["children"].get(key)
            if child is None:
                child = node["children"][key] = {"name": shown, "level": level, "word": word,
                                                 "pictures": set(), "children": {}}
            elif LEVELS.index(level) > LEVELS.index(child["level"]):
                child.update(name=shown, level=level, word=word)
            child["pictures"].add(picture)
            node = child
    return _listed(root["children"])


def _listed(children: dict) -> list[dict]:
    out = [{"name": c["name"], "level": c["level"], "pictures": len(c["pictures"]),
            "query": filter_term("place", c["word"]), "children": _listed(c["children"])}
           for c in children.values()]
    return sorted(out, key=lambda n: (-n["pictures"], n["name"].casefold()))


__all__ = ["LEVELS", "path_of", "picture_places", "places_tree"]
