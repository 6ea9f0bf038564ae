"""Folder synchronisation: bring an index in line with the pictures under some folders.

Each new or changed file's caption and date are read from its own files (pamir.metadata:
sidecars, IPTC/XMP/EXIF), a captions table's caption winning, batch by batch (in this thread:
a thread of its own cost 30 % more CPU time, the GIL going back and forth, and saved no
time); an unchanged file whose sidecars changed (or whose metadata was never read) has them
read again, its vector kept.

Unchanged files (same size and mtime) are skipped; files whose bytes are already indexed
(renamed, copied, touched) reuse their vector; the others go through the system's transform in
batches, each committed, so an interrupted update resumes where it stopped. Pictures that
vanished from under the folders are dropped; pictures the transform could not read are
recorded with its reason, reported, and tried again once the file changes.

This module decides what to do and asks the Index facade to do it; it never touches the
catalogue or the score matrix itself.

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
from typing import TYPE_CHECKING

import numpy as np

from ..data import IMAGE_SUFFIXES
from ..video import VIDEO_SUFFIXES, VideoError, is_video
from .catalog import IndexDirError, Picture

if TYPE_CHECKING:  # annotations only: the facade imports this module
    from . import Index

#: Pictures whose features are computed and committed together by `update`.
BATCH_SIZE = 256
#: The files an index holds: pictures, and videos (pamir.index.videos).
_SUFFIXES = IMAGE_SUFFIXES | frozenset(VIDEO_SUFFIXES)
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
    text: dict | None = None  # what the text pass read (pamir.index.passes), if it ran
    faces: dict | None = None  # what the faces pass read and who they are, if it ran

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["failed"] = [{"path": p, "reason": r} for p, r in self.failed]
        return d


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


def update(index: Index, folders: Sequence[str | Path], transform: Transform, *,
           captions: dict[str, Sequence[str]] | None = None, batch_size: int = BATCH_SIZE,
           progress: Callable[[int, int], None] | None = None) -> UpdateReport:
    """Bring `index` in line with the pictures under `folders` (see the module's doc).
    progress(done, total) is called after each batch."""
    folders = [Path(f).resolve() for f in folders]
    for f in folders:
        if not f.is_dir():
            raise IndexDirError(f"{f}: not a folder; give folders of pictures to index")
    on_disk = scan_pictures(folders, exclude=index.directory.resolve())
    captions = {str(Path(k).resolve()): v for k, v in (captions or {}).items()}
    known = {p.path: p for p in index.pictures()}

    sync = _Sync(index, captions)
    todo = sync.changed_files(on_disk, known)
    vanished = {p.path: p for p in known.values()
                if p.path not in on_disk and _under(p.path, folders)}
    todo = sync.reuse_vectors(todo, vanished)
    if vanished:
        sync.report.removed += index.remove([p.id for p in vanished.values()])
    # videos are read here, one by one, after the pictures (pamir.index.videos)
    videos = [e for e in todo if is_video(e["path"])]
    todo = [e for e in todo if not is_video(e["path"])]
    if progress and videos:
        progress = _counting_videos(progress, len(todo) + len(videos))
    batches = [todo[start:start + batch_size] for start in range(0, len(todo), batch_size)]
    map_batches = getattr(transform, "map_batches", None)
    if map_batches is None:
        for k, batch in enumerate(batches):
            sync.compute(batch, transform)
            if progress:
                progress(min((k + 1) * batch_size, len(todo)), len(todo))
        sync.compute_videos(videos, transform, progress, len(todo))
        return sync.report
    done = 0
    for k, result in map_batches([[e["path"] for e in b] for b in batches]):
        sync.read_batch_metadata(batches[k])  # the workers compute; this process waits anyway
        sync.commit(batches[k], result)
        done += len(batches[k])
        if progress:
            progress(done, len(todo))
    sync.compute_videos(videos, transform, progress, len(todo))
    return sync.report


def _counting_videos(progress: Callable[[int, int], None], total: int):
    """progress(done, total) over pictures and videos, from the pictures' own calls."""
    return lambda done, _: progress(done, total)


def _under(path: str, folders: Sequence[Path]) -> bool:
    return any(Path(path).is_relative_to(f) for f in folders)


class _Sync:
    """One update's steps, sharing the index and the report."""

    def __init__(self, index: Index, captions: dict[str, Sequence[str]]):
        self.index = index
        self.captions = captions  # {resolved path: a table's caption}
        self.report = UpdateReport()

    def changed_files(self, on_disk: dict[str, tuple[int, int]], known: dict[str, Picture]
                      ) -> list[dict]:
        """Entries (path, stat, hash if known yet, caption) of the files that need work."""
        # Only a file with the size of an indexed picture can hold the same bytes: hash those
        # now (rename, copy, touch); the others are hashed with their batch, just before the
        # model reads them, so each new file is read from disk once.
        known_sizes = {p.size for p in known.values() if p.state == "ok"}
        todo = []
        for path, (size, mtime_ns) in on_disk.items():
            old = known.get(path)
            if old is not None and old.size == size and old.mtime_ns == mtime_ns:
                self.report.unchanged += 1
                if old.state == "failed":
                    self.report.failed.append((path, old.reason or UNKNOWN_REASON))
                self.refresh_metadata(old)
                continue
            entry = {"path": path, "size": size, "mtime_ns": mtime_ns, "hash": None,
                     "changed": old is not None}
            if size in known_sizes:
                if not self.fill_hash(entry):
                    continue
                if old is not None and old.hash == entry["hash"] and old.state == "ok":
                    self.fill_metadata(entry)
                    self.index.touch(old.id, entry)  # same bytes, new mtime
                    self.report.unchanged += 1
                    continue
            todo.append(entry)
        return todo

    def reuse_vectors(self, todo: list[dict], vanished: dict[str, Picture]) -> list[dict]:
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
                self.fill_metadata(e)
                self.index.move(twin.id, e)
                self.report.renamed += 1
            elif (same := self.index.same_bytes(e["hash"], e["path"])) is not None:
                self.fill_metadata(e)
                if is_video(e["path"]):  # a copied video: its frames too
                    e["frames"] = self.index.frames_of([same]).get(same)
                self.index.add([e], self.index.vector(same, classes=True)[None, :])
                self.report.copied += 1
            else:
                rest.append(e)
        return rest

    def read_batch_metadata(self, batch: list[dict]) -> None:
        for entry in batch:
            self.fill_metadata(entry)

    def fill_metadata(self, entry: dict) -> None:
        """The entry's caption (a table's, else its files'), source, date and sidecars."""
        from ..metadata import read_metadata  # noqa: PLC0415 - Pillow: not on a search's path

        meta = read_metadata(entry["path"])
        table = self.captions.get(entry["path"])
        entry.update(caption=tuple(table) if table else meta.caption,
                     source="captions table" if table else meta.source,
                     taken=meta.taken, sidecars=meta.sidecars,
                     position=getattr(meta, "position", None), facts=file_facts(meta))
        self.report.notes += meta.notes
        self.report.captioned += bool(entry["caption"])

    def refresh_metadata(self, old: Picture) -> None:
        """Read an unchanged picture's metadata again when a sidecar changed, appeared or
        went, when a table gives it another caption, or when it was never read."""
        from ..metadata import sidecar_signature  # noqa: PLC0415

        table = self.captions.get(old.path)
        if (old.sidecars is not None and old.sidecars == sidecar_signature(old.path)
                and (table is None or tuple(table) == old.caption)):
            return
        entry = {"path": old.path}
        self.fill_metadata(entry)
        self.index.set_metadata(old.id, entry)
        self.report.recaptioned += 1

    def fill_hash(self, entry: dict) -> bool:
        """Fill entry["hash"]; a file that cannot be read is recorded and reported (False)."""
        try:
            entry["hash"] = file_hash(entry["path"])
            return True
        except OSError as e:
            entry["hash"] = ""
            self.record_failure(entry, f"unreadable ({e.strerror or e})")
            return False

    def record_failure(self, entry: dict, reason: str) -> None:
        self.index.add_failed(entry, reason)
        self.report.failed.append((entry["path"], reason))

    def compute(self, batch: list[dict], transform: Transform) -> None:
        """Read a batch's metadata, run the model on it and commit it: the good pictures with
        their vectors, the others with the transform's reason (no second decode to find out
        why)."""
        self.read_batch_metadata(batch)
        batch = [e for e in batch if e["hash"] is not None or self.fill_hash(e)]
        if not batch:
            return
        self.commit(batch, transform([e["path"] for e in batch]))

    def compute_videos(self, videos: list[dict], transform: Transform, progress,
                       done: int) -> None:
        """Read each video (its metadata, then its frames through the transform) and commit
        it with its frames; a video that cannot be read is recorded with the reason."""
        from .videos import video_rows  # noqa: PLC0415 - PyAV: only where videos are

        # the reading stage's system transform (pamir.index.stage): a video's frames are
        # handed to it as files of their own, and its passes read videos alone after
        transform = getattr(transform, "look", transform)
        for k, entry in enumerate(videos):
            self.read_batch_metadata([entry])
            if entry["hash"] is not None or self.fill_hash(entry):
                try:
                    row, entry["frames"], _ = video_rows(entry["path"], transform)
                except VideoError as e:
                    self.record_failure(entry, str(e))
                else:
                    self.commit([entry], (row[None, :], [True], [None]))
            if progress:
                progress(done + k + 1, done + len(videos))

    def commit(self, batch: list[dict], result: tuple) -> None:
        """Commit a batch's (Z, ok, reasons[, hashes]): hashes, computed where the batch ran
        (None for a file that could not be read there), fill the entries that have none."""
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
        if good:
            self.index.add(good, Z[ok])
        for e in good:
            if e["changed"]:
                self.report.changed += 1
            else:
                self.report.added += 1
        for e, o, reason in zip(batch, ok, reasons):
            if not o:
                self.record_failure(e, reason or UNKNOWN_REASON)


def file_facts(meta) -> list:
    """The facts a picture's metadata (pamir.metadata.PictureMetadata) gives beside its
    keywords: its place, named offline from its GPS position (pamir.places), and its
    camera."""
    from ..facts import camera_facts  # noqa: PLC0415

    facts = camera_facts(getattr(meta, "camera", None))
    position = getattr(meta, "position", None)
    if position is not None:
        from ..places import place_facts  # noqa: PLC0415 - GeoNames, read once on first use

        facts += place_facts(position)
    return facts
