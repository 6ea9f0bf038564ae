"""How far a `pamir index` is, pass by pass, in a small record in the index folder that the
server reads for the page ("text: 4,210 of 10,000 pictures").

    record = ProgressRecord(index.directory, labels={"look": "indexing", "text": "reading text"})
    record.set("look", done=256, total=10_000)
    record.add("text", 32)
    record.finish()
    read_progress(index.directory)   # {"running": True, "passes": [...], ...}

The writer names the passes, their labels and their order (pamir.jobs.fact_passes'
table); the record carries them, so the page shows what it reads.

The writer writes it atomically at most once a second (and at the end), so a reader never
sees half of it and indexing is not slowed; a record left "running" by an indexer that was
killed reads as stopped (its process is gone, or the record is STALE_S old).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from ..storage import atomic_write
from .layout import PROGRESS

#: Seconds between two writes of the record, at least (the page asks every two seconds).
EVERY_S = 1.0
#: A record "running" but not written for this long is an indexer that stopped.
STALE_S = 120.0


class ProgressRecord:
    """The writer's side. on_change(name, done, total): called at each change (the CLI's
    bars, a script's callback). labels: {name: label} of the passes, in the order the page
    lists them (a pass not named comes after them, by name, labelled by its name)."""

    def __init__(self, directory: str | Path,
                 on_change: Callable[[str, int, int], None] | None = None,
                 labels: dict[str, str] | None = None):
        self.path = Path(directory) / PROGRESS
        self.on_change = on_change
        self.labels = dict(labels or {})
        self.passes: dict[str, dict] = {}
        self.started = time.time()
        self._written = 0.0
        self._shown: set[str] = set()
        self._write(running=True)

    def set(self, name: str, done: int | None = None, total: int | None = None) -> None:
        entry = self.passes.setdefault(name, {"done": 0, "total": 0})
        if done is not None:
            entry["done"] = int(done)
        if total is not None:
            entry["total"] = int(total)
        entry["total"] = max(entry["total"], entry["done"])
        if self.on_change is not None:
            self.on_change(name, entry["done"], entry["total"])
        first = name not in self._shown  # a pass's first figures are written at once
        self._shown.add(name)
        if first or time.time() - self._written >= EVERY_S:
            self._write(running=True)

    def flush(self) -> None:
        """Write the figures now (before a wait: the page shows where the job waits)."""
        self._write(running=True)

    def add(self, name: str, done: int = 0, total: int = 0) -> None:
        entry = self.passes.get(name, {"done": 0, "total": 0})
        self.set(name, entry["done"] + done, entry["total"] + total)

    def finish(self) -> None:
        self._write(running=False)

    def _ordered(self) -> list[str]:
        order = list(self.labels)
        return sorted(self.passes, key=lambda n: (order.index(n) if n in order else len(order),
                                                  n))

    def _write(self, running: bool) -> None:
        self._written = time.time()
        record = {"running": running, "pid": os.getpid(), "started": self.started,
                  "updated": self._written,
                  "passes": [{"name": n, "label": self.labels.get(n, n), **self.passes[n]}
                             for n in self._ordered()]}
        try:
            atomic_write(self.path, lambda f: f.write(json.dumps(record).encode()))
        except OSError:
            pass  # the page's progress only: indexing goes on


def read_progress(directory: str | Path) -> dict:
    """The record as the page shows it: {"running": bool, "passes": [{"name", "label",
    "done", "total"}], "updated"}; {"running": False, "passes": []} where there is none."""
    try:
        record = json.loads((Path(directory) / PROGRESS).read_text(encoding="utf-8"))
        record["passes"] = [dict(p) for p in record.get("passes", [])]
    except (OSError, ValueError, TypeError, AttributeError):
        return {"running": False, "passes": []}
    if record.get("running") and (time.time() - float(record.get("updated", 0)) > STALE_S
                                  or not _alive(record.get("pid"))):
        record["running"] = False
        record["stopped"] = True
    return record


def _alive(pid) -> bool:
    """Whether the process that wrote the record is still there (on this machine; a record
    written elsewhere, on shared storage, is judged by its age alone)."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (OSError, TypeError, ValueError):
        return True  # not ours to signal, or no pid: alive as far as we can tell
    return True


__all__ = ["ProgressRecord", "read_progress"]
