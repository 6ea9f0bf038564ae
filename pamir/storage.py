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
    leaves half-written. A process killed while writing leaves its `.tmp-<pid>-*` file; the
    next process that writes into that folder deletes it (`remove_stale_temporaries`).
    (Unnamed O_TMPFILE files linked into place were tried: linking them through /proc failed
    now and then with EXDEV on this machine's file system, losing cache writes.)"""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if str(path.parent) not in _SWEPT:  # once per folder and process: a killed writer's
        _SWEPT.add(str(path.parent))
        remove_stale_temporaries(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{TEMP_PREFIX}{os.getpid()}-",
                               suffix=path.suffix)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; ours are ordinary files
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename is None:
            # a failed write() names no file (ENOSPC, EIO): say which one it was writing
            raise OSError(e.errno, e.strerror or str(e), str(path)) from e
        raise


#: Temporary files are named `.tmp-<pid>-...`: the pid tells a live writer's from a dead one's.
TEMP_PREFIX = ".tmp-"
_SWEPT: set[str] = set()


def _temporary_name(path: Path) -> str:
    return str(path.parent / f"{TEMP_PREFIX}{os.getpid()}-{os.urandom(6).hex()}{path.suffix}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(folder: str | Path) -> list[Path]:
    """Delete the `.tmp-<pid>-*` files in `folder` whose writing process is gone (killed
    between naming and renaming one); the paths deleted."""
    gone = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return gone
    for e in entries:
        if not e.name.startswith(TEMP_PREFIX):
            continue
        pid = e.name[len(TEMP_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            try:
                os.unlink(e.path)
                gone.append(Path(e.path))
            except OSError:
                pass
    return gone


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


__all__ = ["TEMP_PREFIX", "atomic_write", "atomic_write_bytes", "fsync_dir", "locked_json_update",
           "pid_alive", "remove_stale_temporaries"]


def shown_path(path: str) -> str:
    """A path as JSON can carry it (the API and `pamir search --json` alike): a name that is
    not UTF-8 comes from os.fsdecode with lone surrogates, which no strict encoder takes; its
    bytes are shown escaped (b'\\xff' -> '\\xff'). A picture is reached by its id or its
    real path, never by this text."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")
