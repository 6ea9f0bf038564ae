"""How the index's two big objects are made: the Index (pamir.index) and the score matrix
(pamir.index.scores) each hold a state and have their jobs as parts, members that work from
that state; each public method of theirs is one of its parts' (`delegate`)."""

from __future__ import annotations

import functools


def delegate(part: str, method):
    """A method (or property) answered by one of an object's parts, the attribute named
    `part`: the part's method, with its signature and documentation."""
    if isinstance(method, property):
        return property(lambda self: method.fget(getattr(self, part)), doc=method.__doc__)

    @functools.wraps(method)
    def answer(self, *args, **kwargs):
        return method(getattr(self, part), *args, **kwargs)

    return answer
