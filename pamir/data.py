"""Collections of pictures, some captioned: Corel 5k and any folder with a captions table.

A `Collection` is the list of pictures a system learns from or searches: ids, paths, the
caption of each (a tuple of words, or None when the picture is uncaptioned) and the split the
data set assigns it, if any ("train", "test" or "").

Captions tables are TSV, CSV or JSON lines, with a path column (paths relative to the table)
and a keywords column (words separated by spaces or commas) or a caption column (free text,
tokenised). Bad input raises `DataError` naming the file and line; nothing is dropped silently.
A folder whose pictures' files carry their keywords is read a layer up, beside the reading of
those keywords (pamir.facts.collection: `load_folder`, and `load_collection` for any kind).
"""

from __future__ import annotations

import csv
import io
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import config
from .formats import IMAGE_SUFFIXES  # the one home of the suffixes (pamir.formats)
from .text.words import STOP_WORDS, split_keywords, tokenize

log = logging.getLogger(__name__)

PATH_COLUMNS = ("path", "file", "filename", "image", "picture")
KEYWORD_COLUMNS = ("keywords", "tags", "labels", "words")
CAPTION_COLUMNS = ("caption", "captions", "text", "description")


class DataError(ValueError):
    """Input that cannot be read as a collection; the message says where and what to do."""


@dataclass
class Collection:
    name: str
    root: Path
    ids: list[str]
    paths: list[Path]
    captions: list[tuple[str, ...] | None]
    splits: list[str]
    #: Problems that did not stop loading (empty captions...), one "file:line: what" each.
    warnings: list[str] = field(default_factory=list)
    #: Where each caption came from, for a folder read without a table ("IPTC Keywords",
    #: "sidecar NAME.xmp"...; None: uncaptioned); empty for tables and Corel 5k.
    sources: list[str | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def indices(self, split: str) -> np.ndarray:
        return np.array([i for i, s in enumerate(self.splits) if s == split], dtype=np.int64)

    @property
    def captioned(self) -> np.ndarray:
        return np.array([i for i, c in enumerate(self.captions) if c], dtype=np.int64)

    @property
    def uncaptioned(self) -> np.ndarray:
        return np.array([i for i, c in enumerate(self.captions) if not c], dtype=np.int64)


# ---------------------------------------------------------------------------------- Corel 5k

def find_corel5k(root: str | Path | None = None) -> Path:
    candidates = [Path(root)] if root else config.corel5k_candidates()
    for c in candidates:
        if (c / "labels" / "words").is_file():
            return c.resolve()
    tried = ", ".join(str(c) for c in candidates)
    raise DataError(
        f"Corel 5k not found (looked in {tried}): point PAMIR_COREL5K at the folder that "
        "holds labels/ and images/"
    )


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    raw = path.read_bytes()
    try:
        # utf-8-sig: spreadsheets save CSV with a byte-order mark, which would otherwise
        # become part of the first column's name
        return raw.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(
            f"{path}:{line}: not UTF-8 (byte {e.start}); save the file as UTF-8"
        ) from None


def load_corel5k(root: str | Path | None = None) -> Collection:
    """Corel 5k from its labels/ files: 4,500 development and 499 test pictures.

    The test file lists picture 161092 twice (as the original distribution does): a test line
    that repeats an earlier one word for word is kept once, with a note in `warnings`; a
    repeated id with another caption is an error. Picture 121060 has no label anywhere: it is
    kept as an uncaptioned picture with no split, as any uncaptioned picture of a user's folder
    would be. Every labelled picture must exist under images/.
    """
    root = find_corel5k(root)
    words = [w.strip() for w in _read_lines(root / "labels" / "words")]
    ids, paths, captions, splits, notes = [], [], [], [], []
    seen: dict[str, tuple[str, int, list[str]]] = {}  # id -> (file, line, its words)
    for split, fname in (("train", "training_label"), ("test", "test_label")):
        lfile = root / "labels" / fname
        for lineno, line in enumerate(_read_lines(lfile), 1):
            parts = line.split()
            if not parts:
                continue
            pid = parts[0]
            if pid in seen:
                first_file, first_line, first_words = seen[pid]
                if first_file == fname == "test_label" and first_words == parts[1:]:
                    notes.append(f"{lfile}:{lineno}: picture {pid} repeats line {first_line}; "
                                 "kept once")
                    continue  # the duplicated test line of the original distribution
                raise DataError(f"{lfile}:{lineno}: picture {pid} already listed in "
                                f"{first_file}:{first_line}; each picture must appear once")
            try:
                caption = tuple(words[int(k) - 1] for k in parts[1:])
            except (ValueError, IndexError):
                raise DataError(f"{lfile}:{lineno}: word index out of 1..{len(words)}") from None
            seen[pid] = (fname, lineno, parts[1:])
            ids.append(pid)
            paths.append(_corel_path(root, pid))
            captions.append(caption or None)
            splits.append(split)
    _check_corel_pictures(root, paths)
    for path in sorted((root / "images").glob("*/*.jpeg")):
        if path.stem not in seen:
            ids.append(path.stem)
            paths.append(path)
            captions.append(None)
            splits.append("")
    for n in notes:
        log.info(n)
    return Collection("corel5k", root, ids, paths, captions, splits, notes)


def _check_corel_pictures(root: Path, paths: list[Path]) -> None:
    """A copy of Corel 5k whose labels name pictures it lacks is broken: say which."""
    missing = [p for p in paths if not p.is_file()]
    if not missing:
        return
    if not (root / "images").is_dir():
        raise DataError(f"{root / 'images'}: folder not found; Corel 5k needs labels/ and "
                        "images/ side by side")
    shown = ", ".join(str(p) for p in missing[:3])
    raise DataError(f"{root}: {len(missing)} labelled pictures are missing from images/ "
                    f"(first: {shown}); copy the data set again")


def _corel_path(root: Path, pid: str) -> Path:
    # Pictures live in their CD folder: id 1234 is in images/1000/, 161092 in images/161000/.
    return root / "images" / f"{int(pid) // 1000 * 1000}" / f"{pid}.jpeg"


# --------------------------------------------------------------------------- captions tables

def load_captions_table(
    table: str | Path,
    *,
    folder: str | Path | None = None,
    stop_words=STOP_WORDS,
    include_uncaptioned: bool = True,
) -> Collection:
    """A folder of pictures with a captions table (.tsv, .csv or .jsonl).

    Paths in the table are relative to the table's folder (or `folder`). Pictures of that folder
    that the table does not list are added as uncaptioned when `include_uncaptioned` is set.
    """
    table = Path(table)
    if not table.exists():
        raise DataError(f"{table}: captions table not found")
    if table.is_dir():
        raise DataError(f"{table}: is a folder; give the captions table (.tsv, .csv, .jsonl)")
    base = Path(folder) if folder else table.parent
    if not base.is_dir():
        raise DataError(f"{base}: picture folder not found")
    text = "\n".join(_read_lines(table))
    suffix = table.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        records = _jsonl_records(table, text)
    elif suffix in (".tsv", ".csv", ".txt"):
        records = _delimited_records(table, text, "\t" if suffix != ".csv" else ",")
    else:
        raise DataError(f"{table}: unknown table type {suffix!r}; use .tsv, .csv or .jsonl")
    coll = _collection_from_records(table, base, records, stop_words)
    if include_uncaptioned:
        _add_unlisted_pictures(coll, base)
    return coll


def _jsonl_records(table: Path, text: str):
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{table}:{lineno}: not valid JSON ({e.msg})") from None
        if not isinstance(rec, dict):
            raise DataError(f"{table}:{lineno}: expected a JSON object per line")
        yield lineno, {str(k).lower(): v for k, v in rec.items()}


def _delimited_records(table: Path, text: str, delimiter: str):
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    header = next(reader, None)
    if not header:
        raise DataError(f"{table}:1: empty table; the first line must name the columns")
    header = [h.strip().lower() for h in header]
    for row in reader:
        lineno = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) > len(header):
            raise DataError(
                f"{table}:{lineno}: {len(row)} cells for {len(header)} columns; "
                "quote captions that contain the delimiter"
            )
        yield lineno, dict(zip(header, row + [""] * (len(header) - len(row))))


def _pick(table: Path, lineno: int, rec: dict, names: tuple[str, ...]) -> str | None:
    for n in names:
        if n in rec:
            return n
    return None


def _caption_of(table, lineno, rec, stop_words) -> tuple[str, ...] | None:
    kcol = _pick(table, lineno, rec, KEYWORD_COLUMNS)
    ccol = _pick(table, lineno, rec, CAPTION_COLUMNS)
    if kcol is None and ccol is None:
        names = ", ".join(KEYWORD_COLUMNS + CAPTION_COLUMNS)
        raise DataError(f"{table}:{lineno}: no caption column; name one of: {names}")
    value = rec[kcol] if kcol is not None else rec[ccol]
    if value is None:
        return None
    if isinstance(value, list):
        words = [str(v).strip().lower() for v in value if str(v).strip()]
    elif kcol is not None:
        words = split_keywords(str(value))
    else:
        words = tokenize(str(value), stop_words)
    return tuple(dict.fromkeys(words)) or None


def _collection_from_records(table: Path, base: Path, records, stop_words) -> Collection:
    coll = Collection(table.stem, base.resolve(), [], [], [], [])
    first_line: dict[str, int] = {}
    for lineno, rec in records:
        pcol = _pick(table, lineno, rec, PATH_COLUMNS)
        if pcol is None:
            raise DataError(
                f"{table}:{lineno}: no path column; name one of: {', '.join(PATH_COLUMNS)}"
            )
        rel = str(rec[pcol] or "").strip()
        if not rel:
            raise DataError(f"{table}:{lineno}: empty path; every row must name its picture")
        try:
            path = (base / rel).resolve()
            found = path.is_file()
        except (OSError, ValueError) as e:  # a NUL byte, a name too long for the file system
            raise DataError(
                f"{table}:{lineno}: the path {rel[:200]!r} cannot name a file ({e}); "
                "fix or remove the row"
            ) from None
        if not found:
            raise DataError(
                f"{table}:{lineno}: picture {rel!r} not found under {base}; "
                "fix the path or remove the row"
            )
        if not path.is_relative_to(coll.root):
            # A table speaks for its own folder: pictures elsewhere would be indexed under ids
            # that escape it (and a shared table could point at any file on the machine).
            raise DataError(
                f"{table}:{lineno}: picture {rel!r} lies outside {coll.root}; put the table in "
                "a folder that holds all its pictures"
            )
        pid = str(rec.get("id") or rec.get("image_id") or rel).strip()
        if pid in first_line:
            raise DataError(
                f"{table}:{lineno}: duplicated id {pid!r} (first on line {first_line[pid]}); "
                "each picture must appear once"
            )
        first_line[pid] = lineno
        caption = _caption_of(table, lineno, rec, stop_words)
        if caption is None:
            coll.warnings.append(f"{table}:{lineno}: empty caption; {rel} kept as uncaptioned")
        split = str(rec.get("split") or "").strip().lower()
        coll.ids.append(pid)
        coll.paths.append(path)
        coll.captions.append(caption)
        coll.splits.append(split)
    if not coll.ids:
        raise DataError(f"{table}: no rows; list at least one picture")
    for w in coll.warnings:
        log.warning(w)
    return coll


def _add_unlisted_pictures(coll: Collection, base: Path) -> None:
    listed = set(coll.paths)
    ids = Counter(coll.ids)
    for path in sorted(base.rglob("*")):
        if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file():
            path = path.resolve()
            if path not in listed:
                pid = str(path.relative_to(coll.root))
                if pid in ids:
                    raise DataError(f"{path}: not in the table, but the table uses its path "
                                    f"{pid!r} as the id of another picture; give that row "
                                    "another id")
                coll.ids.append(pid)
                coll.paths.append(path)
                coll.captions.append(None)
                coll.splits.append("")


def caption_sources(coll: Collection) -> str:
    """"812 of 1,000 pictures captioned: 700 IPTC Keywords, 112 sidecar NAME.xmp" (a
    picture whose keywords sit in several fields counts under each)."""
    counts = Counter(part for s in coll.sources if s for part in s.split(" + "))
    parts = ", ".join(f"{n:,} {s}" for s, n in counts.most_common())
    return (f"{sum(1 for s in coll.sources if s):,} of {len(coll):,} pictures captioned"
            + (f": {parts}" if parts else " (no keywords in their files or sidecars)"))
