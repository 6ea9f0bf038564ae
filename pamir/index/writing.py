"""Writing an index, the part of `Index` that changes it: adding, removing, moving and
recaptioning pictures, synchronising folders (applying the plan pamir.index.sync makes, and
reading the files of each batch as it comes to it), rescoring every picture for a model that
has learnt, sealing and compacting the score matrix, and recording the model.

Crash safety. The catalogue changes only by SQLite transactions, and a score column is on disk
before any committed row points at it (pamir.index.scores), so an update can be interrupted
at any point and run again: it resumes from the last committed batch. Each change is one
catalogue transaction; the matrix's column owners follow it only once it is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..facts.video import VideoError, is_video
from . import tuning
from .catalog import IndexDirError
from .layout import scales_meta
from .sync import (
    BATCH_SIZE,
    Reuse,
    SyncPlan,
    Transform,
    UpdateReport,
    growing_batches,
    plan_update,
    read_batch,
    settle,
)
from .videos import rows_of_video

if TYPE_CHECKING:
    from .lifecycle import IndexFolder


class Writer:
    """The changes of an index opened writable (see `Index`), to its folder's catalogue and
    score matrix; each refuses a read-only one."""

    def __init__(self, folder: IndexFolder):
        self._folder = folder
        self._catalog, self._lock = folder._catalog, folder._lock

    @property
    def _matrix(self):
        """The score matrix of the committed state last read."""
        return self._folder._matrix

    def _require_writable(self) -> None:
        self._folder.require_writable()

    def add(self, entries: Sequence[dict], Z: np.ndarray) -> list[int]:
        """Insert pictures with their text-space rows Z (n x T), in one transaction.

        entries: dicts with path, size, mtime_ns, hash and optionally caption. A path already
        in the catalogue is replaced (its old column freed). Returns the new ids.
        """
        self._require_writable()
        Z, rows = np.asarray(Z, dtype=np.float32), self._folder.rows
        if Z.shape != (len(entries), rows):
            raise ValueError(f"Z of shape {Z.shape}; expected ({len(entries)}, {rows})")
        if not np.isfinite(Z).all():
            raise ValueError("Z has NaN or infinite scores; the model output is broken")
        with self._lock:
            cols = self._matrix.reserve(len(entries), self._commit_matrix)
            self._matrix.write(cols, Z)  # on disk before any catalogue row points at it
            with self._catalog.transaction():
                freed = self._catalog.delete_paths([e["path"] for e in entries])
                ids = self._catalog.insert_ok(entries, cols)
            self._matrix.release(freed)
            self._matrix.assign(cols, ids)
            if max(self._matrix.tail_sizes(), default=0) >= tuning.SEAL_AT:
                self._matrix.seal(self._commit_matrix, tuning.SEAL_AT)
            return ids

    def _commit_matrix(self, layout: dict, moves=None) -> None:
        """Record new matrix or list files, once they are durable, as the current ones, and
        (a compaction's) moves = (old columns, new columns) of the pictures it moved."""
        with self._catalog.transaction():
            self._catalog.set_meta(**layout)
            if moves is not None:
                self._catalog.move_columns(*moves)
        if moves is not None:  # this state is the mover's own: no reload for it
            self._folder._moves = self._catalog.meta("moves") or 0

    def compact(self) -> bool:
        """Merge every shard's segments and tail into one segment of sorted lists over its
        live pictures, which move to new columns so that alike pictures are neighbours
        (`pamir index --compact`); ids and search results do not change. True if anything
        was rewritten."""
        self._require_writable()
        with self._lock:
            changed = self._matrix.compact(self._commit_matrix)
            if changed:
                self._catalog.checkpoint()
            return changed

    def seal(self) -> bool:
        """Give the pictures added since the last seal their own sorted lists when there are
        enough of them (tuning.SEAL_MIN per shard); merges a shard's segments once they pile
        up. Called at the end of `update`."""
        self._require_writable()
        with self._lock:
            return self._matrix.seal(self._commit_matrix)

    def add_failed(self, entry: dict, reason: str) -> None:
        """Record a picture that could not be read, so it is reported (and retried once the
        file changes) without stopping the update."""
        self._require_writable()
        with self._lock:
            with self._catalog.transaction():
                freed = self._catalog.delete_paths([entry["path"]])
                self._catalog.insert(entry, "failed", reason, None)
            self._matrix.release(freed)

    def remove(self, ids: Iterable[int]) -> int:
        """Drop pictures by id (their columns become free). Returns how many were dropped."""
        self._require_writable()
        with self._lock:
            with self._catalog.transaction():
                removed, freed = self._catalog.delete_ids([int(i) for i in ids])
            self._matrix.release(freed)
        return removed

    def move(self, picture_id: int, entry: dict) -> None:
        """A renamed file: same bytes, new path (and stat); its vector is kept. A failed or
        stale row at the new path gives way."""
        self._require_writable()
        with self._lock:
            with self._catalog.transaction():
                freed = self._catalog.delete_paths([entry["path"]], keep_id=int(picture_id))
                self._catalog.set_stat(picture_id, entry)
            self._matrix.release(freed)

    def touch(self, picture_id: int, entry: dict) -> None:
        """Same bytes, new mtime (a `touch`, a copy back): only the stat is updated."""
        self.move(picture_id, entry)

    def set_model(self, model_dir: str | Path, fingerprint: str) -> None:
        """Record where the model now lives (a moved model folder keeps its index)."""
        self._require_writable()
        model_dir = str(Path(model_dir).resolve())
        with self._lock:
            with self._catalog.transaction():
                self._catalog.set_meta(model_dir=model_dir, model_fingerprint=fingerprint)
            self._folder.model_dir, self._folder.model_fingerprint = model_dir, fingerprint

    def set_metadata(self, picture_id: int, entry: dict) -> None:
        """A picture's caption, date taken, source and sidecars' stat, read again."""
        self._require_writable()
        with self._lock, self._catalog.transaction():
            self._catalog.set_metadata(picture_id, entry)

    def set_caption(self, picture_id: int, caption: Sequence[str] | None) -> None:
        self._require_writable()
        with self._lock, self._catalog.transaction():
            self._catalog.set_caption(picture_id, caption)

    def record_pass(self, name: str, kinds: Sequence[str], facts: dict[int, Sequence],
                    done: Sequence[tuple[int, str]]) -> None:
        """A batch of a pass (pamir.index.passes): the pictures' facts of `kinds` and the
        record that the pass read them (id, hash), in one commit."""
        self._require_writable()
        with self._lock, self._catalog.transaction():
            for picture_id, held in facts.items():
                self._catalog.facts.replace(picture_id, kinds, held)
            self._catalog.facts.pass_done(name, done)

    def set_facts(self, facts: dict[int, Sequence], kinds: Sequence[str]) -> None:
        """Pictures' facts of these kinds (pamir.facts.fact) replaced, in one commit: {id: the
        picture's Facts}; a pass that reads pictures (text, faces) writes its batches so."""
        self._require_writable()
        with self._lock, self._catalog.transaction():
            for picture_id, held in facts.items():
                self._catalog.facts.replace(picture_id, kinds, held)

    def rescore(self, vocabulary: Sequence[str], idf: np.ndarray, transform: Transform, *,
                model_dir: str | Path | None = None, fingerprint: str = "",
                batch_size: int = BATCH_SIZE, scales: np.ndarray | None = None,
                progress: Callable[[int, int], None] | None = None) -> dict:
        """Bring every picture's scores in line with a model that has learnt since the index
        was built (`pamir learn`, the web page's feedback): the vocabulary may have grown by
        words at its end. Pictures go through transform (System.transform_paths: features
        come from the feature cache, so pictures are not decoded again when cached) in
        batches into a new score matrix, which replaces the old one with the new vocabulary,
        idf, word scales (Index.create) and model in one transaction. A picture
        that cannot be read now keeps its old scores (0 for new words) and is reported. Returns {"rescored", "kept": [paths]}."""
        self._require_writable()
        vocabulary = list(vocabulary)
        if vocabulary[: self._folder.T] != self._folder.vocabulary:
            raise IndexDirError(f"{self._folder.directory}: the model's vocabulary is not this "
                                "index's (grown at its end); rebuild the index with --rebuild")
        idf = np.asarray(idf, dtype=np.float64)
        scales = scales_meta(scales, len(vocabulary)) or {"scales": None}
        report = {"rescored": 0, "kept": []}
        frames = {}  # a video's frames scored again, written with the new matrix
        with self._lock:
            pictures = [p for p in self._catalog.pictures("ok") if p.col is not None]

            def fill(put):
                for start in range(0, len(pictures), batch_size):
                    batch = pictures[start:start + batch_size]
                    Z, ok = self._rescored(batch, transform, frames)
                    cols = np.array([p.col for p in batch], dtype=np.int64)
                    if ok.any():
                        put(cols[ok], Z[ok])
                    report["rescored"] += int(ok.sum())
                    report["kept"] += [p.path for p, o in zip(batch, ok) if not o]
                    if progress:
                        progress(min(start + batch_size, len(pictures)), len(pictures))

            def commit(layout):
                with self._catalog.transaction():
                    self._catalog.set_meta(
                        **layout, **scales, vocabulary=vocabulary, idf=idf.tolist(),
                        **({"model_fingerprint": fingerprint} if fingerprint else {}),
                        **({"model_dir": str(Path(model_dir).resolve())} if model_dir else {}))
                    for picture_id, (times, rows) in frames.items():
                        self._catalog.frames.write(picture_id, times, rows)

            C = len(self._folder.classes)
            old_rows = np.arange(self._folder.T + C)
            new_rows = np.concatenate([np.arange(self._folder.T), len(vocabulary) + np.arange(C)])
            self._matrix.rewrite(len(vocabulary) + C, fill, commit, (old_rows, new_rows))
            self._folder._load()
            self._matrix.compact(self._commit_matrix)
        return report

    @staticmethod
    def _rescored(batch, transform: Transform, frames: dict) -> tuple[np.ndarray, np.ndarray]:
        """(Z, ok) of a rescore's batch: the pictures through `transform`, each video
        through its frames as `pamir index` reads it (its frames' rows put in `frames`); a
        video that cannot be read now is not ok, as an unreadable picture."""
        videos = [k for k, p in enumerate(batch) if is_video(p.path)]
        pictures = [k for k, p in enumerate(batch) if not is_video(p.path)]
        Z, ok = None, np.zeros(len(batch), bool)
        if pictures:
            Zp, okp, _ = transform([batch[k].path for k in pictures])
            Zp = np.asarray(Zp, np.float32)
            Z = np.zeros((len(batch), Zp.shape[1]), np.float32)
            Z[pictures], ok[pictures] = Zp, np.asarray(okp, bool)
        for k in videos:
            try:
                row, frames[batch[k].id] = rows_of_video(transform, batch[k].path)
            except VideoError:
                continue
            if Z is None:
                Z = np.zeros((len(batch), len(row)), np.float32)
            Z[k], ok[k] = row, True
        return (np.zeros((len(batch), 0), np.float32) if Z is None else Z), ok

    def update(self, folders: Sequence[str | Path], transform: Transform, *,
               captions: dict[str, Sequence[str]] | None = None,
               batch_size: int = BATCH_SIZE,
               progress: Callable[[int, int], None] | None = None) -> UpdateReport:
        """Bring the index in line with the pictures under `folders` (pamir.index.sync).

        transform(paths) -> (Z (n x T) float32, ok (n,) bool, reasons (n,)): the system's
        pictures-to-text map, `System.transform_paths`; reasons[i] says why picture i could
        not be read and is what the index records. Unchanged files are skipped, renamed and
        copied ones reuse their vector, the others are computed and committed in batches;
        pictures gone from under `folders` are dropped. progress(done, total) follows the
        batches.
        """
        self._require_writable()
        plan = plan_update(folders, self._folder.pictures(), captions=captions,
                           exclude=self._folder.directory.resolve())
        report = self.apply(plan, transform, batch_size=batch_size, progress=progress)
        self.seal()
        return report

    def apply(self, plan: SyncPlan, transform: Transform, *, batch_size: int = BATCH_SIZE,
              progress: Callable[[int, int], None] | None = None) -> UpdateReport:
        """Carry out an update's plan (pamir.index.sync.plan_update) in its order: the
        unreadable files, the stats and metadata, the renames and copies, the removals, then
        the pictures the model reads, a batch a commit, each batch's files read as it comes
        (`transform`'s `map_batches`, where it has one, runs them elsewhere and hands them
        back in any order), then the videos. progress(done, total) follows the pictures and
        videos. Returns the plan's report with what was written; the plan is left as it was
        (the files are read into copies of its entries)."""
        report = replace(plan.report, failed=list(plan.report.failed),
                         notes=list(plan.report.notes))
        pictures = [dict(e) for e in plan.pictures]
        videos = [dict(e) for e in plan.videos]
        for entry, reason in plan.unreadable:
            self.add_failed(entry, reason)
        for picture_id, entry in plan.touched:
            self.touch(picture_id, entry)
        for picture_id, entry in plan.reread:
            self.set_metadata(picture_id, entry)
        for entry in [reuse.entry for reuse in plan.reused if not self._reuse(reuse)]:
            # no picture holds its bytes any more (the catalogue is not the one planned
            # from): the model reads it
            report.copied -= 1
            (videos if is_video(entry["path"]) else pictures).append(dict(entry))
        if plan.removed:
            report.removed += self.remove(plan.removed)
        total = len(pictures)
        if progress and videos:
            progress = _counting_videos(progress, total + len(videos))
        batches = growing_batches(pictures, batch_size)
        map_batches = getattr(transform, "map_batches", None)
        done = 0
        if map_batches is None:
            for batch in batches:
                self._compute(report, batch, transform, plan.captions)
                done += len(batch)
                if progress:
                    progress(done, total)
        else:
            for k, result in map_batches([[e["path"] for e in b] for b in batches]):
                # its hashes came back with it; its metadata is read here, which waits anyway
                read_batch(batches[k], plan.captions, report, hashes=False)
                self._commit(report, batches[k], result)
                done += len(batches[k])
                if progress:
                    progress(done, total)
        for k, entry in enumerate(videos):
            self._commit_video(report, entry, transform, plan.captions)
            if progress:
                progress(total + k + 1, total + len(videos))
        return report

    def _reuse(self, reuse: Reuse) -> bool:
        """A renamed file's row moved, or a copy's vector (and a video's frames) copied from
        a picture with the same bytes; False when none holds them now."""
        entry = reuse.entry
        if reuse.twin is not None:
            self.move(reuse.twin, entry)
            return True
        same = self._folder.same_bytes(entry["hash"], entry["path"])
        if same is None:
            return False
        if is_video(entry["path"]):
            entry = {**entry, "frames": self._folder.frames_of([same]).get(same)}
        self.add([entry], self._folder.vector(same, classes=True)[None, :])
        return True

    def _compute(self, report: UpdateReport, batch: list[dict], transform: Transform,
                 captions: dict) -> None:
        """Read a batch's files, run the model on them and commit them: the good pictures
        with their vectors, the others with the transform's reason (no second decode to
        find out why). A transform that decodes on threads of its own (the reading stage)
        starts on the batch's first pictures while their metadata and hashes are read."""
        prefetch = getattr(transform, "prefetch", None)
        if prefetch is not None:
            prefetch([e["path"] for e in batch])
        ready, unreadable = read_batch(batch, captions, report)
        for entry, reason in unreadable:
            self.add_failed(entry, reason)
        if ready:
            self._commit(report, ready, transform([e["path"] for e in ready]))

    def _commit_video(self, report: UpdateReport, entry: dict, transform: Transform,
                      captions: dict) -> None:
        """Read a video (its metadata, then its frames through the transform) and commit it
        with its frames; a video that cannot be read is recorded with the reason."""
        # the reading stage's system transform (pamir.index.stage): a video's frames are
        # handed to its look as files of their own, and its passes read videos alone after
        ready, unreadable = read_batch([entry], captions, report)
        for failed, reason in unreadable:
            self.add_failed(failed, reason)
        if not ready:
            return
        try:
            row, entry["frames"] = rows_of_video(transform, entry["path"])
        except VideoError as e:
            self.add_failed(entry, str(e))
            report.failed.append((entry["path"], str(e)))
        else:
            self._commit(report, [entry], (row[None, :], [True], [None]))

    def _commit(self, report: UpdateReport, batch: list[dict], result: tuple) -> None:
        """Commit a batch's transform result (pamir.index.sync.settle): the pictures read,
        counted as added or changed, and the others recorded as failed with their reason."""
        good, Z, failed = settle(batch, result)
        if good:
            self.add(good, Z)
        for entry in good:
            if entry["changed"]:
                report.changed += 1
            else:
                report.added += 1
        for entry, reason in failed:
            self.add_failed(entry, reason)
            report.failed.append((entry["path"], reason))


def _counting_videos(progress: Callable[[int, int], None], total: int):
    """progress(done, total) over pictures and videos, from the pictures' own calls."""
    return lambda done, _: progress(done, total)
