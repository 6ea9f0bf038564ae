"""Copies and bursts in an index: its pictures' looks read (a pass of `pamir index`), grouped
(pamir.duplicates.grouping), the groups kept in the index for search to fold and the page to show, and
what a person may do with a group: keep one, and list or move the others aside. pamir never
deletes a file.

`pamir duplicates` and the server call these; the grouping's rules and measures are
pamir.duplicates.grouping's and pamir.duplicates.looks'.
"""

from __future__ import annotations

import errno
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..index.passes import run_pass
from ..storage import atomic_write_bytes
from .grouping import KINDS, find_groups
from .looks import VERSION, FineLooks, Looks, read_looks

#: The pass that reads the looks (named after the look's version: another is read again).
LOOKS_PASS = f"looks {VERSION}"


@dataclass
class DuplicateGroup:
    """One group: kind ("exact", "near", "burst"), its pictures (ids and paths, in id order),
    the one to keep (an editor's choice, else the one with the most pixels, then one with the
    camera's time, then the oldest file: an export or a copy comes after its original; then
    the largest, then the first indexed), and `parts`: a copy group's sets of exact copies, a
    burst's shots (ids)."""
    kind: str
    ids: list[int]
    paths: list[str]
    keep: int
    chosen: bool = False  # an editor chose `keep`
    parts: list[list[int]] = field(default_factory=list)

    @property
    def others(self) -> list[str]:
        return [p for i, p in zip(self.ids, self.paths) if i != self.keep]

    def as_dict(self) -> dict:
        return {"kind": self.kind, "ids": self.ids, "paths": self.paths, "keep": self.keep,
                "chosen": self.chosen, "parts": self.parts}


def read_looks_pass(index, *, client=None, progress=None):
    """The looks pass (pamir.index.passes): the look of every scored picture not read yet as
    it is now. Returns the PassReport."""
    return run_pass(index, LOOKS_PASS, (), read_looks, client=client, progress=progress,
                    record=index.record_looks)


def find_duplicates(index, *, read: bool = True, progress=None) -> list[DuplicateGroup]:
    """The groups of copies and bursts of an index, found now from its pictures' looks
    (read first where missing, when `read` and the index is writable) and written back to
    it (writable), so that search folds them; copies first."""
    if read and index.writable:
        read_looks_pass(index, progress=progress)
    rows = index.look_rows()
    fine, source = FineLooks(), _fine_source(index, rows)
    groups = find_groups(
        rows.hashes, Looks(rows.pixels, rows.sizes), rows.shot,
        fine=lambda i, j: fine.alike(source(i), source(j)),
        same_pixels=lambda i, j: _same_pixels(rows.paths[i], rows.paths[j]))
    ids = rows.ids
    if index.writable:
        copies = {int(ids[m]): (int(ids[g.members[0]]), g.kind) for g in groups
                  if g.kind != "burst" for m in g.members}
        bursts = {int(ids[m]): int(ids[g.members[0]]) for g in groups if g.kind == "burst"
                  for m in g.members}
        index.set_groups(copies, bursts)
    return groups_of(index, [(g.kind, [int(ids[m]) for m in g.members],
                              [[int(ids[m]) for m in p] for p in g.parts]) for g in groups])


def _fine_source(index, rows) -> Callable[[int], str]:
    """Where the fine match reads picture i from: the largest thumbnail `pamir index` wrote
    from its one decode (pamir.features.thumbnails: 512 px, ample for the 96 px FINE reads,
    and a 12-MP photo is not decoded again), else its file."""
    # start-up: 6 ms
    from ..features.thumbnails import INDEXED_SIZES, thumbnail_path  # noqa: PLC0415

    folder = index.thumbnails_dir

    def source(i: int) -> str:
        thumb = thumbnail_path(folder, rows.hashes[i], max(INDEXED_SIZES))
        return str(thumb) if thumb.is_file() else rows.paths[i]
    return source


def copies_pass(index, *, client=None, progress=None, already: int = 0) -> dict:
    """What `pamir index` does last (pamir.jobs.indexing): the looks pass over the pictures the
    reading stage did not give a look (`already`: how many it did), then the groups found
    again. Returns what it read and found: {"read", "failed", "notes", "groups": {kind:
    count}, "seconds"}."""
    started = time.perf_counter()
    report = read_looks_pass(index, client=client, progress=progress)
    # no look read: no picture new or changed (a removed one leaves its groups by itself)
    read = report.read + already
    groups = find_duplicates(index, read=False) if read else stored_duplicates(index)
    return {"read": read, "failed": report.failed, "notes": report.notes[:20],
            "groups": {k: sum(g.kind == k for g in groups) for k in KINDS},
            "seconds": round(time.perf_counter() - started, 2)}


def stored_duplicates(index) -> list[DuplicateGroup]:
    """The groups as last found (`find_duplicates`, `pamir index`), without reading a
    picture: what the server shows."""
    return groups_of(index, [(g["kind"], g["ids"], []) for g in index.stored_groups()])


def groups_of(index, found: Sequence[tuple[str, list[int], list[list[int]]]]
              ) -> list[DuplicateGroup]:
    """DuplicateGroups of (kind, ids, parts), each with its paths and the one to keep."""
    wanted = {i for _, ids, _ in found for i in ids}
    pictures = {p.id: p for p in index.pictures() if p.id in wanted}
    rank = _keep_rank(index) if wanted else {}
    chosen = {(g["kind"], g["ids"][0]): g["kept"] for g in index.stored_groups()
              if g["kept"] is not None}
    out = []
    for kind, ids, parts in found:
        ids = sorted(i for i in ids if i in pictures)
        if len(ids) < 2:
            continue
        pick = chosen.get((kind, ids[0]))
        pick = pick if pick in ids else None
        keep = pick if pick is not None else max(
            ids, key=lambda i: (*rank.get(i, (0, False)), -pictures[i].mtime_ns,
                                pictures[i].size, -i))
        out.append(DuplicateGroup(kind, ids, [pictures[i].path for i in ids], keep,
                                  pick is not None, parts))
    return sorted(out, key=lambda g: (KINDS.index(g.kind), -len(g.ids), g.ids[0]))


def _keep_rank(index) -> dict[int, tuple[int, bool]]:
    """{id: (its pixels, whether the camera's time is in it)}: a copy that kept its EXIF is
    more of the original than a PNG export of the same pixels."""
    rows = index.look_rows()
    pixels = (rows.sizes[:, 0] * rows.sizes[:, 1]).tolist()
    return {int(i): (n, bool(np.isfinite(t))) for i, n, t in zip(rows.ids, pixels, rows.shot)}


def _same_pixels(a: str, b: str) -> bool:
    """Whether two pictures decode to the same pixels (False if either cannot be read)."""
    # start-up: Pillow's plugins (15 ms)
    from ..features.images import ImageError, load_rgb  # noqa: PLC0415

    try:
        return np.array_equal(load_rgb(a), load_rgb(b))
    except ImageError:
        return False


# ------------------------------------------------------------------------ acting on groups
def write_list(groups: Sequence[DuplicateGroup], path: str | Path) -> int:
    """A tab-separated list of the groups (group number, kind, "keep" or "other", path),
    written atomically; returns how many pictures are "other"."""
    lines = ["group\tkind\taction\tpath"]
    for n, g in enumerate(groups, 1):
        for i, p in zip(g.ids, g.paths):
            lines.append(f"{n}\t{g.kind}\t{'keep' if i == g.keep else 'other'}\t{p}")
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
    return sum(len(g.ids) - 1 for g in groups)


@dataclass
class Moved:
    moved: list[tuple[str, str]] = field(default_factory=list)  # (from, to)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)

    def as_dict(self) -> dict:
        return {"moved": [{"from": a, "to": b} for a, b in self.moved],
                "skipped": [{"path": a, "why": b} for a, b in self.skipped]}


def move_others(groups: Sequence[DuplicateGroup], folder: str | Path,
                say: Callable[[str], None] | None = None) -> Moved:
    """Move every picture of the groups but the one kept (and its sidecars) into `folder`
    (made if missing), under its own name; a name already taken there gets " (2)", " (3)"...:
    nothing is ever overwritten, and a picture is moved at most once."""
    folder = Path(folder).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    report = Moved()
    kept = {p for g in groups for i, p in zip(g.ids, g.paths) if i == g.keep}
    done: set[str] = set()
    for g in groups:
        for path in g.others:
            if path in done or path in kept:
                continue
            done.add(path)
            try:
                target = _move_new(Path(path), folder)
            except OSError as e:
                report.skipped.append((path, e.strerror or str(e)))
                continue
            report.moved.append((path, str(target)))
            for sidecar in _sidecars(Path(path)):
                try:
                    _move_new(sidecar, folder, stem=target.name)
                except OSError as e:
                    report.skipped.append((str(sidecar), e.strerror or str(e)))
            if say:
                say(f"moved {path} -> {target}")
    return report


def _sidecars(path: Path) -> list[Path]:
    """The picture's XMP sidecars: NAME.EXT.xmp (digiKam, darktable) and NAME.xmp."""
    return [s for s in (path.with_name(path.name + ".xmp"), path.with_suffix(".xmp"))
            if s.is_file()]


def _move_new(src: Path, folder: Path, stem: str | None = None) -> Path:
    """Move src into folder under a name not taken there (a sidecar named after its
    picture's new name `stem`); the move is a hard link then an unlink (never over a
    file), or, across file systems, a copy under a new name then the same."""
    base = src.name if stem is None else _sidecar_name(src, stem)
    for n in range(1, 10_000):
        target = folder / (base if n == 1 else _numbered(base, n))
        if target.exists() or target.is_symlink():
            continue
        try:
            os.link(src, target)
        except FileExistsError:
            continue
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EMLINK):
                raise
            if not _copy_new(src, target):
                continue
        os.unlink(src)
        return target
    raise OSError(errno.EEXIST, f"no free name for {src.name} in {folder}")


def _sidecar_name(sidecar: Path, picture_name: str) -> str:
    """A sidecar's name beside its picture's new name: NAME.EXT.xmp or NAME.xmp."""
    if sidecar.name.lower().endswith(".xmp") and "." in sidecar.name[:-4]:
        return picture_name + ".xmp"  # NAME.EXT.xmp
    return Path(picture_name).stem + ".xmp"


def _numbered(name: str, n: int) -> str:
    stem, dot, rest = name.partition(".")
    return f"{stem} ({n}){dot}{rest}"


def _copy_new(src: Path, target: Path) -> bool:
    """Copy src to target, which must not exist (False if it came meanwhile)."""
    try:
        with open(src, "rb") as fin, open(target, "xb") as fout:
            shutil.copyfileobj(fin, fout)
            fout.flush()
            os.fsync(fout.fileno())
    except FileExistsError:
        return False
    shutil.copystat(src, target)
    return True


__all__ = ["DuplicateGroup", "LOOKS_PASS", "Moved", "copies_pass", "find_duplicates", "move_others",
           "read_looks_pass", "stored_duplicates", "write_list"]
