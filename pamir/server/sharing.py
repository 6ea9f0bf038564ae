"""Who may do what on a shared server: tokens, roles, and per-client limits.

Off loopback every request needs a token: a viewer's (search, pictures, thumbnails, similar,
annotate an upload) or an editor's (also the feedback loop and Keep, which changes everyone's
results). The API takes `Authorization: Bearer TOKEN`; the page gets the token once in its
URL (`/?token=...`), keeps it in an HttpOnly, SameSite=Strict cookie and forgets the URL.
Tokens are compared in constant time and never written to a log or an answer. A client that
sends too many wrong tokens, or too many uploads, is refused (429) until its minute is over.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

#: The name of the cookie the page keeps its token in.
COOKIE = "pamir_token"
ROLES = ("viewer", "editor")
#: Routes only an editor may call: they teach the model.
EDITOR_ROUTES = frozenset({"/api/feedback", "/api/feedback/keep"})
#: Routes that write (the model, the index): off with --read-only.
WRITE_ROUTES = frozenset({"/api/feedback/keep"})
#: Routes that take an upload: counted per client per minute.
UPLOAD_ROUTES = frozenset({"/api/annotate", "/api/similar"})
#: Wrong tokens a client may send per minute before it is refused (429) for the rest of it.
MAX_FAILED_ATTEMPTS = 10
#: Uploads a client may send per minute (0: no limit).
UPLOADS_PER_MINUTE = 60


class TokenFileError(ValueError):
    """A token file that cannot be used, with what to do about it."""


class PerMinute:
    """How many times each client did something in its current minute: a fixed window per
    client, so memory stays bounded by the clients of one minute."""

    def __init__(self, limit: int, clock=time.monotonic, window: float = 60.0):
        self.limit, self.clock, self.window = limit, clock, window
        self._counts: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def _current(self, client: str, now: float) -> int:
        start, n = self._counts.get(client, (now, 0))
        if now - start >= self.window:
            self._counts.pop(client, None)
            return 0
        return n

    def over(self, client: str) -> bool:
        """Whether the client is already over the limit in its minute."""
        with self._lock:
            return bool(self.limit) and self._current(client, self.clock()) >= self.limit

    def add(self, client: str) -> bool:
        """Count one more; False if that is over the limit (the request is refused)."""
        if not self.limit:
            return True
        with self._lock:
            now = self.clock()
            if len(self._counts) > 10_000:  # forget the clients whose minute is over
                self._counts = {c: v for c, v in self._counts.items()
                                if now - v[0] < self.window}
            n = self._current(client, now)
            start = self._counts.get(client, (now, 0))[0]
            self._counts[client] = (start, n + 1)
            return n < self.limit

    def retry_after(self, client: str) -> int:
        with self._lock:
            start, _ = self._counts.get(client, (self.clock(), 0))
        return max(1, int(self.window - (self.clock() - start)) + 1)


@dataclass
class Sharing:
    """The server's access rules. tokens: role -> token (None: no token needed, loopback);
    read_only: no route writes; the per-client limits of one minute."""

    tokens: dict[str, str] | None = None
    read_only: bool = False
    max_failed_attempts: int = MAX_FAILED_ATTEMPTS
    uploads_per_minute: int = UPLOADS_PER_MINUTE
    clock: object = time.monotonic
    failures: PerMinute = field(init=False)
    uploads: PerMinute = field(init=False)

    def __post_init__(self):
        self.failures = PerMinute(self.max_failed_attempts, self.clock)
        self.uploads = PerMinute(self.uploads_per_minute, self.clock)

    def role_of(self, token: str | None) -> str | None:
        """The role a token gives, compared in constant time with every role's token."""
        if not token or not self.tokens:
            return None
        given = token.encode("utf-8", "surrogateescape")
        found = None
        for role in ROLES:  # every role compared, whichever matches
            want = self.tokens.get(role)
            if want and hmac.compare_digest(given, want.encode()) and found is None:
                found = role
        return found


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def new_tokens() -> dict[str, str]:
    return {role: secrets.token_urlsafe(24) for role in ROLES}


def load_or_create_tokens(path: Path) -> tuple[dict[str, str], bool]:
    """The tokens in `path` (JSON {"viewer": ..., "editor": ...}), made and saved there with
    owner-only permissions if the file does not exist; (tokens, made)."""
    path = Path(path)
    if not path.exists():
        tokens = new_tokens()
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        # created 0600 (never readable by others, not even for a moment), then renamed in
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(tokens, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tokens, True
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenFileError(f"{path}: readable by other users (mode {stat.filemode(mode)}): "
                             f"run `chmod 600 {path}`, or delete it to have new tokens made")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise TokenFileError(f"{path}: not a pamir token file ({e}); delete it to have new "
                             "tokens made") from None
    if (not isinstance(data, dict) or not all(isinstance(data.get(r), str) and
                                              len(data[r]) >= 16 for r in ROLES)
            or data["viewer"] == data["editor"]):
        raise TokenFileError(f'{path}: a token file holds {{"viewer": TOKEN, "editor": TOKEN}}, '
                             "two different tokens of at least 16 characters; delete it to "
                             "have new ones made")
    return {r: data[r] for r in ROLES}, False
