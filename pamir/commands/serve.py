"""`pamir serve`: the web page and the HTTP API (pamir.server), who may use them (tokens, host
names) and how they are reached (TLS, a reverse proxy)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import typer

from .. import config
from ..index import IndexDirError
from ..jobs.errors import WorkflowError
from .common import INDEX_HELP, console, fail, own_the_reports

#: Host names a server bound to 127.0.0.1 answers to (Starlette's host check cuts the port at
#: the first colon, so the IPv6 loopback cannot be listed: a server on ::1 answers any name).
LOOPBACK_NAMES = ["127.0.0.1", "localhost"]


def serve_command(
    index_dir: Path = typer.Option(None, "--index", help=INDEX_HELP),
    model: Path = typer.Option(None, help="the trained system for uploads and explanations "
                                          "(default: the one the index was built with)"),
    host: str = typer.Option("127.0.0.1", help="address to bind; 127.0.0.1 keeps it private, "
                                               "any other needs a token"),
    port: int = typer.Option(8000, min=1, max=65535),
    token_file: Path = typer.Option(None, help="the viewer and editor tokens (JSON, made there "
                                               "if absent); given, tokens are needed even on "
                                               "loopback (behind a reverse proxy). Default off "
                                               "loopback: ~/.config/pamir/serve-tokens.json"),
    read_only: bool = typer.Option(False, "--read-only", help="nothing is kept: the feedback "
                                                              "loop's Keep is refused"),
    max_upload_mb: float = typer.Option(32.0, min=0.01, help="uploads over this are refused "
                                                              "(413)"),
    uploads_per_minute: int = typer.Option(
        None, min=0, help="uploads a client may send a minute (429 over it; 0: no limit; "
                          "default 60 with tokens, else no limit)"),
    max_pixels: int = typer.Option(None, min=1, help="pictures declaring more pixels are "
                                                     "refused as decompression bombs "
                                                     "(default 89,478,485, Pillow's)"),
    allowed_host: list[str] = typer.Option(None, help="a host name the server answers to "
                                                      "(repeatable; e.g. the reverse proxy's "
                                                      "public name)"),
    certfile: Path = typer.Option(None, help="TLS certificate (PEM), with --keyfile: HTTPS"),
    keyfile: Path = typer.Option(None, help="TLS private key (PEM)"),
    forwarded_allow_ips: str = typer.Option(
        None, help="addresses of reverse proxies whose X-Forwarded-For/-Proto are trusted "
                   "(uvicorn's; default 127.0.0.1)"),
    watch: list[Path] = typer.Option(None, "--watch", help="keep the index up to date with "
                                     "this folder as it changes, as `pamir watch` (repeatable)"),
):
    """Serve the web page and the HTTP API (OpenAPI schema at /docs)."""
    # the [server] extra (uvicorn); `pamir search` imports this module (commands.index's
    # LOOPBACK_NAMES) and serves nothing
    import uvicorn  # noqa: PLC0415

    # the [server] extra: pamir.server imports FastAPI
    from ..server import create_app  # noqa: PLC0415
    from ..server.sharing import Sharing  # noqa: PLC0415

    index_dir = index_dir or config.default_index_dir()
    own_the_reports()
    if (certfile is None) != (keyfile is None):
        fail("--certfile and --keyfile go together: give both for HTTPS")
    loopback = host in ("127.0.0.1", "localhost", "::1")
    tokens = _serve_tokens(token_file, loopback)
    # bound to this machine only: answer only to its own names (no DNS rebinding)
    hosts = LOOPBACK_NAMES if host in LOOPBACK_NAMES else None
    if allowed_host:
        hosts = [*(hosts or []), *allowed_host]
    if uploads_per_minute is None:
        uploads_per_minute = 60 if tokens else 0
    sharing = Sharing(tokens, read_only=read_only, uploads_per_minute=uploads_per_minute)
    try:
        app = create_app(index_dir, model, allowed_hosts=hosts, sharing=sharing,
                         max_upload_bytes=int(max_upload_mb * 2**20), max_pixels=max_pixels)
    except IndexDirError as e:
        fail(str(e))
    scheme = "https" if certfile else "http"
    console.print(f"serving {index_dir} on {scheme}://{host}:{port}/  (Ctrl-C stops)"
                  + ("; read-only" if read_only else ""))
    if tokens:  # printed once, here; never logged (uvicorn's access log is off)
        name = socket.gethostname() if host in ("0.0.0.0", "::") else host
        name = f"[{name}]" if ":" in name else name
        for role in ("viewer", "editor"):
            console.print(f"  {role}: {scheme}://{name}:{port}/?token={tokens[role]}",
                          markup=False, soft_wrap=True)
    extra = {"forwarded_allow_ips": forwarded_allow_ips} if forwarded_allow_ips else {}
    watching = _watching(index_dir, watch) if watch else None
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                ssl_certfile=str(certfile) if certfile else None,
                ssl_keyfile=str(keyfile) if keyfile else None, **extra)
    if watching is not None:
        watching[1].set()
        watching[0].join(timeout=10)


def _watching(index_dir: Path, folders):
    """`--watch`: pamir.jobs.watch's watcher of the folders in a thread of its own, the index's
    one writer (the server reads each commit as it comes); (thread, stop event)."""
    # start-up: the watcher and the index job (0.35 s), for --watch alone
    from ..jobs.watch import watch_in_thread, watcher_of_index  # noqa: PLC0415

    say = lambda line: console.print(line, markup=False)  # noqa: E731
    try:
        watcher = watcher_of_index(index_dir, folders, say=say)
    except (IndexDirError, WorkflowError, FileNotFoundError, ValueError) as e:
        fail(str(e))
    say(f"watching {', '.join(map(str, watcher.roots))}")
    return watch_in_thread(watcher, say=say)


def _serve_tokens(token_file: Path | None, loopback: bool) -> dict | None:
    """The viewer and editor tokens: needed off loopback (made in the default file if it has
    none) or wherever --token-file is given; None on loopback without it."""
    # the [server] extra: pamir.server imports FastAPI
    from ..server.sharing import TokenFileError, load_or_create_tokens  # noqa: PLC0415

    if token_file is None and loopback:
        return None
    if token_file is None:
        config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        token_file = config_home / "pamir" / "serve-tokens.json"
    try:
        tokens, made = load_or_create_tokens(token_file)
    except (TokenFileError, OSError) as e:
        fail(str(e))
    console.print(f"tokens {'made in' if made else 'read from'} {token_file} (owner-only); "
                  "a viewer searches and annotates, an editor also teaches the model")
    return tokens


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
