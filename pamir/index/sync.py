"""Folder synchronisation: bring an index in line with the pictures under some folders.

Each new or changed file's caption and date are read from its own files (pamir.facts.metadata:
sidecars, IPTC/XMP/EXIF), a captions table's caption winning, batch by batch (in this thread:
a thread of its own cost 30 % more CPU time, the GIL going back and forth, and saved no
time); an unchanged file whose sidecars changed (or whose metadata was never read) has them
read again, its vector kept.

Unchanged files (same size and mtime) are skipped; files whose bytes are already indexed
(renamed, copied, touched) reuse their vector; the others go through the system's transform in
batches, each committed, so an interrupted update resumes where it stopped. Pictures that
vanished from under the folders are dropped; pictures the transform could not read are
recorded with its reason, reported, and tried again once the file changes.

This module decides what to do, and writes nothing: `plan_update` compares the disk with the
catalogue's pictures and returns a `SyncPlan` (the files touched, read again, renamed,
copied, removed, unreadable, and the pictures and videos the model must read), which the
index's writer applies (pamir.index.writing: `Writer.apply`), batch by batch so that
the first pictures answer searches early. The plan is a value: the writer reads the files of a
batch (their metadata, their hash) when it comes to that batch, with this module's
`read_batch`, into entries and a report of its own.

A transform may run batches itself, elsewhere and concurrently (pamir.distributed: Dask
workers): it then has `map_batches(batches) -> iterator of (batch number, (Z, ok, reasons,
hashes))`, results in any order, and this process stays the one writer, committing each
batch as it comes back. A batch that never comes back is simply not committed: the next
update computes it (a committed picture is unchanged for it), so nothing is indexed twice.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..facts.fact import camera_facts
from ..facts.video import is_video
from ..formats import MEDIA_SUFFIXES
from .catalog import IndexDirError, Picture

#: Pictures whose features are computed and committed together by `update`.
BATCH_SIZE = 256
#: The first batch of an update: the first answer comes after this many pictures are read.
FIRST_BATCH = 16
#: The files an index holds: pictures, and videos (pamir.index.videos).
_SUFFIXES = MEDIA_SUFFIXES
#: The reason recorded when a transform says a picture failed but not why.
UNKNOWN_REASON = "could not be read"

#: transform(paths) -> (Z (n x T) float32, ok (n,) bool, reasons (n,) str or None):
#: `System.transform_paths`. It may also have map_batches (see the module's doc).
Transform = Callable[[Sequence[str]], tuple]


@dataclass
class UpdateReport:
    added: int = 0
    changed: int = 0
    renamed: int = 0
    copied: int = 0  # same bytes as a picture already indexed: vector reused
    removed: int = 0
    unchanged: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    recaptioned: int = 0  # unchanged pictures whose caption or date was read again
    captioned: int = 0    # pictures added or read again that have a caption
    notes: list[str] = field(default_factory=list)  # metadata that could not be read
    # what each fact pass read, by its name (pamir.jobs.fact_passes: "text", "faces",
    # "copies", ...), None for one that did not run; `report.text` is passes["text"]
    passes: dict[str, dict | None] = field(default_factory=dict)

    def __getattr__(self, name: str):
        passes = self.__dict__.get("passes", {})
        if name in passes:
            return passes[name]
        raise AttributeError(f"{type(self).__name__} has no {name!r}")

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "passes"}
        d["failed"] = [{"path": p, "reason": r} for p, r in self.failed]
        return {**d, **self.passes}


def file_hash(path: str | Path) -> str:
    """blake2b-128 of the file's bytes (the feature cache's identity for a picture)."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def scan_pictures(folders: Sequence[Path], exclude: Path | None = None
                  ) -> dict[str, tuple[int, int]]:
    """{path: (size, mtime_ns)} of the picture files under `folders` (resolved), recursively;
    hidden files and folders, and the `exclude` folder (the index's own thumbnails), are
    skipped."""
    found: dict[str, tuple[int, int]] = {}
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                                 and (exclude is None or Path(dirpath, d) != exclude))
            for name in sorted(filenames):
                if name.startswith(".") or Path(name).suffix.lower() not in _SUFFIXES:
                    continue
                path = Path(dirpath, name)
                try:
                    st = path.stat()
                except OSError:
                    continue  # vanished or a dangling link
                if path.is_file():
                    # the path as found, a link not followed to its target: a link to a
                    # picture elsewhere is indexed under this folder, and dropped with it
                    found[str(path)] = (st.st_size, st.st_mtime_ns)
    return found


def growing_batches(todo: list, batch_size: int) -> list[list]:
    """todo in batches of FIRST_BATCH, then twice as many each time up to batch_size: the
    first pictures are committed, and searchable, within seconds of the start (a batch of
    256 camera photos with text and faces read beside the look took over a minute on two
    cores: benchmarks/results/phone_library.md), later ones in batch_size's fewer commits."""
    out, start, size = [], 0, min(FIRST_BATCH, batch_size)
    while start < len(todo):
        out.append(todo[start:start + size])
        start += size
        size = min(2 * size, batch_size)
    return out


@dataclass
class Reuse:
    """A file whose bytes the index already holds: renamed from the vanished picture `twin`
    (its row moves, vector and all), or, with no twin, a copy (the vector of a picture that
    holds the same bytes, found when the plan is applied, is copied)."""

    entry: dict
    twin: int | None = None


@dataclass
class SyncPlan:
    """What an update does to an index (see the module's doc), in the order it is applied:
    `unreadable` recorded as failed, `touched` (same bytes, new stat) and `reread` (unchanged
    files whose metadata was read again) written by id, `reused` (renamed and copied, in this
    order), `removed` (ids of pictures gone from under the folders), then `pictures` read by
    the model in `batches`, and `videos` one by one. Entries are dicts (path, size, mtime_ns,
    hash, caption, ...) as `Index.add` takes them. `report` holds what the plan found so far
    (unchanged, renamed, copied, recaptioned, the failures found, the metadata's notes).

    A value: the writer reads the rest of the files into copies of the entries, and adds
    what it writes to a copy of the report (pamir.index.writing.Writer.apply), so that a
    plan applied is the plan it was."""

    captions: dict[str, Sequence[str]] = field(default_factory=dict)
    unreadable: list[tuple[dict, str]] = field(default_factory=list)
    touched: list[tuple[int, dict]] = field(default_factory=list)
    reread: list[tuple[int, dict]] = field(default_factory=list)
    reused: list[Reuse] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    pictures: list[dict] = field(default_factory=list)
    videos: list[dict] = field(default_factory=list)
    report: UpdateReport = field(default_factory=UpdateReport)

    def batches(self, batch_size: int = BATCH_SIZE) -> list[list[dict]]:
        """The pictures for the model, in growing batches (`growing_batches`)."""
        return growing_batches(self.pictures, batch_size)


def fill_metadata(entry: dict, captions: dict[str, Sequence[str]], report: UpdateReport
                  ) -> None:
    """Fill the entry's caption (a table's, else its files'), source, date, sidecars,
    position and facts; the notes and the count of captioned pictures go into `report`."""
    from ..facts.metadata import read_metadata  # noqa: PLC0415 - Pillow: not on a search's path

    meta = read_metadata(entry["path"])
    table = captions.get(entry["path"])
    entry.update(caption=tuple(table) if table else meta.caption,
                 source="captions table" if table else meta.source,
                 taken=meta.taken, sidecars=meta.sidecars,
                 position=getattr(meta, "position", None), facts=file_facts(meta))
    report.notes += meta.notes
    report.captioned += bool(entry["caption"])


def fill_hash(entry: dict, report: UpdateReport) -> str | None:
    """Fill entry["hash"]; for a file that cannot be read, the reason (also in `report`)."""
    try:
        entry["hash"] = file_hash(entry["path"])
        return None
    except OSError as e:
        entry["hash"] = ""
        reason = f"unreadable ({e.strerror or e})"
        report.failed.append((entry["path"], reason))
        return reason


def read_batch(batch: list[dict], captions: dict[str, Sequence[str]], report: UpdateReport, *,
               hashes: bool = True) -> tuple[list[dict], list[tuple[dict, str]]]:
    """Read a batch's metadata and (with `hashes`: not when the batch ran elsewhere and
    brought its hashes) the hashes not known yet: (the entries for the model, the
    unreadable ones with their reason)."""
    for entry in batch:
        fill_metadata(entry, captions, report)
    if not hashes:
        return batch, []
    ready, unreadable = [], []
    for entry in batch:
        reason = None if entry["hash"] is not None else fill_hash(entry, report)
        if reason is None:
            ready.append(entry)
        else:
            unreadable.append((entry, reason))
    return ready, unreadable


def plan_update(folders: Sequence[str | Path], known: Sequence[Picture], *,
                captions: dict[str, Sequence[str]] | None = None,
                exclude: Path | None = None) -> SyncPlan:
    """What bringing an index whose pictures are `known` in line with the pictures under
    `folders` takes (see the module's doc); `exclude`: the index's own folder."""
    folders = [Path(f).resolve() for f in folders]
    for f in folders:
        if not f.is_dir():
            raise IndexDirError(f"{f}: not a folder; give folders of pictures to index")
    on_disk = scan_pictures(folders, exclude=exclude)
    plan = SyncPlan(captions={str(Path(k).resolve()): v for k, v in (captions or {}).items()})
    known = {p.path: p for p in known}
    holders = _Holders(known.values())
    todo = _changed_files(plan, on_disk, known, holders)
    vanished = {p.path: p for p in known.values()
                if p.path not in on_disk and _under(p.path, folders)}
    todo = _reuse_vectors(plan, todo, vanished, holders)
    plan.removed = [p.id for p in vanished.values()]
    # videos are read after the pictures, one by one (pamir.index.videos)
    plan.videos = [e for e in todo if is_video(e["path"])]
    plan.pictures = [e for e in todo if not is_video(e["path"])]
    return plan


class _Holders:
    """Which paths hold which bytes among the catalogue's readable pictures, as the plan's
    writes leave them so far: a copy takes its vector from a picture that still holds its
    bytes when the plan is applied (a row replaced or renamed before no longer does)."""

    def __init__(self, pictures):
        self.hash_at: dict[str, str] = {}
        self.paths: dict[str, set[str]] = {}
        for p in pictures:
            if p.state == "ok":
                self.put(p.path, p.hash)

    def put(self, path: str, digest: str) -> None:
        self.drop(path)
        self.hash_at[path] = digest
        self.paths.setdefault(digest, set()).add(path)

    def drop(self, path: str) -> None:
        digest = self.hash_at.pop(path, None)
        if digest is not None:
            self.paths[digest].discard(path)

    def elsewhere(self, digest: str, path: str) -> bool:
        """Whether a picture at another path than `path` holds these bytes."""
        return bool(self.paths.get(digest, set()) - {path})


def _changed_files(plan: SyncPlan, on_disk: dict[str, tuple[int, int]],
                   known: dict[str, Picture], holders: _Holders) -> list[dict]:
    """Entries (path, stat, hash if known yet, changed) of the files that need work; the
    unchanged ones are counted, and read again where their sidecars or caption changed."""
    # Only a file with the size of an indexed picture can hold the same bytes: hash those
    # now (rename, copy, touch); the others are hashed with their batch, just before the
    # model reads them, so each new file is read from disk once.
    known_sizes = {p.size for p in known.values() if p.state == "ok"}
    todo = []
    for path, (size, mtime_ns) in on_disk.items():
        old = known.get(path)
        if old is not None and old.size == size and old.mtime_ns == mtime_ns:
            plan.report.unchanged += 1
            if old.state == "failed":
                plan.report.failed.append((path, old.reason or UNKNOWN_REASON))
            _refresh_metadata(plan, old)
            continue
        entry = {"path": path, "size": size, "mtime_ns": mtime_ns, "hash": None,
                 "changed": old is not None}
        if size in known_sizes:
            reason = fill_hash(entry, plan.report)
            if reason is not None:
                plan.unreadable.append((entry, reason))
                holders.drop(path)  # its row gives way to the failed one
                continue
            if old is not None and old.hash == entry["hash"] and old.state == "ok":
                fill_metadata(entry, plan.captions, plan.report)
                plan.touched.append((old.id, entry))  # same bytes, new mtime
                plan.report.unchanged += 1
                continue
        todo.append(entry)
    return todo


def _refresh_metadata(plan: SyncPlan, old: Picture) -> None:
    """Read an unchanged picture's metadata again when a sidecar changed, appeared or went,
    when a table gives it another caption, or when it was never read."""
    # start-up: the XMP reading (defusedxml, 60-170 ms)
    from ..facts.metadata import sidecar_signature  # noqa: PLC0415

    table = plan.captions.get(old.path)
    if (old.sidecars is not None and old.sidecars == sidecar_signature(old.path)
            and (table is None or tuple(table) == old.caption)):
        return
    entry = {"path": old.path}
    fill_metadata(entry, plan.captions, plan.report)
    plan.reread.append((old.id, entry))
    plan.report.recaptioned += 1


def _reuse_vectors(plan: SyncPlan, todo: list[dict], vanished: dict[str, Picture],
                   holders: _Holders) -> list[dict]:
    """Renamed files take their vanished twin's row (removed from `vanished`); copies of
    indexed bytes copy a vector. Returns the entries that still need the model."""
    vanished_by_hash: dict[str, list[Picture]] = {}
    for p in vanished.values():
        if p.state == "ok":
            vanished_by_hash.setdefault(p.hash, []).append(p)
    rest = []
    for e in todo:
        if e["hash"] is None:  # no indexed picture has its size
            rest.append(e)
        elif vanished_by_hash.get(e["hash"]):
            twin = vanished_by_hash[e["hash"]].pop()
            del vanished[twin.path]
            fill_metadata(e, plan.captions, plan.report)
            plan.reused.append(Reuse(e, twin.id))
            holders.drop(twin.path)
            holders.put(e["path"], e["hash"])
            plan.report.renamed += 1
        elif holders.elsewhere(e["hash"], e["path"]):
            fill_metadata(e, plan.captions, plan.report)
            plan.reused.append(Reuse(e))
            holders.put(e["path"], e["hash"])
            plan.report.copied += 1
        else:
            rest.append(e)
    return rest


def _under(path: str, folders: Sequence[Path]) -> bool:
    return any(Path(path).is_relative_to(f) for f in folders)


def settle(batch: list[dict], result: tuple) -> tuple[list[dict], np.ndarray, list]:
    """A batch's transform result (Z, ok, reasons[, hashes]) as (the entries read, their rows,
    [(entry, reason)] of the others): hashes, computed where the batch ran (None for a file
    that could not be read there), fill the entries that have none."""
    Z, ok, reasons, *rest = result
    if rest:
        ok = np.array(ok, dtype=bool)
        reasons = list(reasons)
        for i, (e, h) in enumerate(zip(batch, rest[0])):
            if e["hash"] is None:
                e["hash"] = h or ""
                if not h:
                    ok[i] = False
                    reasons[i] = reasons[i] or UNKNOWN_REASON
    Z = np.asarray(Z, dtype=np.float32)
    ok = np.asarray(ok, dtype=bool)
    good = [e for e, o in zip(batch, ok) if o]
    failed = [(e, reason or UNKNOWN_REASON) for e, o, reason in zip(batch, ok, reasons) if not o]
    return good, Z[ok], failed


def file_facts(meta) -> list:
    """The facts a picture's metadata (pamir.facts.metadata.PictureMetadata) gives beside its
    keywords: its place, named offline from its GPS position (pamir.facts.places), and its
    camera."""
    facts = camera_facts(getattr(meta, "camera", None))
    position = getattr(meta, "position", None)
    if position is not None:
        from ..facts.places import place_facts  # noqa: PLC0415 - GeoNames, read once on first use

        facts += place_facts(position)
    return facts
