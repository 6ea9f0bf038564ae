"""A query's filters, a part of `Index`: which columns of the score matrix its `in:` folders
and `date:` ranges keep (pamir.text.query), read from the catalogue and kept for the
committed state they were read in."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .lifecycle import IndexFolder

#: How many `in:` filters' columns a reader keeps for its state.
FOLDERS_KEPT = 64


class Filters:
    """The masks of `in:` and `date:` over an open index's columns (its folder's)."""

    def __init__(self, folder: IndexFolder):
        self._folder = folder
        self._folder_columns: dict[tuple, np.ndarray] = {}  # `_columns_under`, this state's
        folder.on_reload(self._folder_columns.clear)

    def mask(self, folders: Sequence[str], dates: Sequence[tuple[str, str]]
             ) -> np.ndarray | None:
        """(width,) the columns in:/folders and date: keep (both must), None when neither is
        set."""
        keep = self._folder_mask(folders) if folders else None
        if dates:
            keep = self._date_mask(dates) if keep is None else keep & self._date_mask(dates)
        return keep

    def _columns_under(self, folders: Sequence[str]) -> np.ndarray:
        """Columns of the pictures under the folders, kept for this state (a LIKE over every
        path: 0.2 s at 1,000,000 pictures; a server is asked the same `in:` again)."""
        key = tuple(folder_patterns(folders))
        cols = self._folder_columns.get(key)
        if cols is None:
            if len(self._folder_columns) >= FOLDERS_KEPT:
                self._folder_columns.clear()
            cols = np.asarray(self._folder._catalog.columns_under(list(key)), np.int64)
            self._folder_columns[key] = cols
        return cols

    def _folder_mask(self, folders: Sequence[str]) -> np.ndarray:
        """(width,) whether each column's picture is under one of the folders."""
        return self._mask_of(self._columns_under(folders))

    def _date_mask(self, dates: Sequence[tuple[str, str]]) -> np.ndarray:
        """(width,) whether each column's picture was taken within one of the ranges."""
        return self._mask_of(np.asarray(self._folder._catalog.columns_taken(dates), np.int64))

    def _mask_of(self, cols: np.ndarray) -> np.ndarray:
        width = len(self._folder._matrix.live_mask())
        keep = np.zeros(width, dtype=bool)
        keep[cols[cols < width]] = True
        return keep


def folder_patterns(folders: Sequence[str]) -> list[str]:
    """SQL LIKE patterns for `in:` filters: an absolute (or ~) folder matches the paths under
    it; a relative one ("holidays", "2021/beach") any path with those components in a row."""
    out = []
    for f in folders:
        f = str(f).strip()
        if not f:
            continue
        if f.startswith(("/", "~")):
            base = str(Path(f).expanduser().resolve()).rstrip("/")
            out.append(_like_escape(base + "/") + "%")
        else:
            out.append("%/" + _like_escape(f.strip("/") + "/") + "%")
    return out


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
