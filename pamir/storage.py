"""Writing files so that a reader, or a crash, never sees half of one.

Every file pamir writes in place of another goes through here: feature caches, fitted
pipelines, sidecars, thumbnails, benchmark results. The recipe is always the same: write a
temporary file beside the target (same folder, so the same file system) and rename it over the
target, which POSIX makes atomic.
"""

from __future__ import annotations

import errno
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
    leaves half-written. Where the file system allows it (Linux: O_TMPFILE), the bytes go
    into an unnamed file that is given a name only once whole, just before the rename, so a
    process killed while writing leaves nothing behind; elsewhere a `.tmp-*` file would
    stay, and is deleted by the next process that writes into that folder
    (`remove_stale_temporaries`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if str(path.parent) not in _SWEPT:  # once per folder and process: a killed writer's
        _SWEPT.add(str(path.parent))
        remove_stale_temporaries(path.parent)
    fd = _unnamed_file(path.parent)
    if fd is not None:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            tmp = _temporary_name(path)
            os.link(f"/proc/self/fd/{f.fileno()}", tmp, follow_symlinks=True)
        try:
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{TEMP_PREFIX}{os.getpid()}-",
                               suffix=path.suffix)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; ours are ordinary files
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: Temporary files are named `.tmp-<pid>-...`: the pid tells a live writer's from a dead one's.
TEMP_PREFIX = ".tmp-"
_O_TMPFILE_WORKS: dict[str, bool] = {}
_SWEPT: set[str] = set()


def _temporary_name(path: Path) -> str:
    return str(path.parent / f"{TEMP_PREFIX}{os.getpid()}-{os.urandom(6).hex()}{path.suffix}")


def _unnamed_file(folder: Path) -> int | None:
    """An O_TMPFILE descriptor in `folder` (ordinary permissions), or None where the system
    or file system has none (then the caller names its temporary file)."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):
        return None
    key = str(folder)
    if _O_TMPFILE_WORKS.get(key) is False:
        return None
    try:
        fd = os.open(folder, flag | os.O_WRONLY, 0o666)  # the umask applies
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
            _O_TMPFILE_WORKS[key] = False
            return None
        raise  # a full disk, a read-only folder, no permission: the caller's error
    if key not in _O_TMPFILE_WORKS:  # can it be named? (overlayfs answers EXDEV)
        probe = _temporary_name(folder / "probe")
        try:
            os.link(f"/proc/self/fd/{fd}", probe, follow_symlinks=True)
            os.unlink(probe)
            _O_TMPFILE_WORKS[key] = True
        except OSError:
            _O_TMPFILE_WORKS[key] = False
            os.close(fd)
            return None
    return fd


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
