"""Writing files so that a reader, or a crash, never sees half of one.

Every file pamir writes in place of another goes through here: feature caches, fitted
pipelines, sidecars, thumbnails, benchmark results. The recipe is always the same: write a
temporary file beside the target (same folder, so the same file system) and rename it over the
target, which POSIX makes atomic.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def _umask() -> int:
    mask = os.umask(0)  # the only way to read the umask is to set it
    os.umask(mask)
    return mask


_UMASK = _umask()


def atomic_write(path: str | Path, write: Callable[[BinaryIO], object]) -> None:
    """write(file object) into a temporary file next to `path`, then rename it into place.

    The folder is made if needed. Not fsynced: for caches, which a crash may lose but never
    leaves half-written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; ours are ordinary files
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Replace `path` by `data` atomically, the bytes on disk before the rename: for files a
    person keeps (sidecars, results), which a crash must leave either old or new."""

    def write(f: BinaryIO) -> None:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())

    atomic_write(path, write)


def fsync_dir(path: str | Path) -> None:
    """Make a folder's entries (a rename, a new file) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def locked_json_update(path: str | Path, updates: dict) -> dict:
    """Merge `updates` into the top-level keys of the JSON object in `path`; the merged object.

    Several programs may finish at once and each add its own keys (benchmarks writing one
    results file): the read-modify-write holds an exclusive lock on a sibling lock file
    (`.NAME.lock`), so none loses another's keys, and the file is replaced atomically. A file
    that is not a JSON object is an error rather than silently overwritten.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: holds a JSON {type(data).__name__}, not an object")
        data.update(updates)
        text = json.dumps(data, indent=1, sort_keys=True) + "\n"
        atomic_write_bytes(path, text.encode("utf-8"))
    return data


__all__ = ["atomic_write", "atomic_write_bytes", "fsync_dir", "locked_json_update"]
