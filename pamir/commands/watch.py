"""`pamir watch [MODEL] FOLDER...`: the index follows the folders as their pictures change
(pamir.jobs.watch). `pamir serve --watch FOLDER` starts the same beside the server
(pamir.commands.serve)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from .. import config
from ..extras import optional
from ..jobs import loading
from ..jobs.watch import Watcher, WatchError
from . import index as product
from .common import INDEX_HELP, console, fail


def watch_command(
    model: Path = typer.Argument(..., help="a trained system (from `pamir fit`); leave it out "
                                            "for the model the index already has, or none "
                                            "(ImageNet's words)", metavar="[MODEL]"),
    folders: list[Path] = typer.Argument(None, help="folders of pictures, watched "
                                                    "recursively"),
    index_dir: Path = typer.Option(None, "--index", help=INDEX_HELP),
    **passes: bool,  # --text/--no-text, ...: a pass's option each (product.pass_options)
):
    """Keep the index up to date as pictures are added, changed, renamed or removed (Ctrl-C
    stops).

    It first catches up with what changed while nothing watched, then takes the folders'
    changes within seconds, an import in one update. A folder that goes away (an unplugged
    drive) keeps its pictures in the index and is caught up with when it comes back.
    """
    index_dir = index_dir or config.default_index_dir()
    model, folders = product._model_and_folders(model, list(folders or []), index_dir)
    watcher = make_watcher(index_dir, model, folders, **passes)
    console.print(f"watching {', '.join(map(str, watcher.roots))} for {index_dir} "
                  "(Ctrl-C stops)", markup=False)
    _run(watcher)


def make_watcher(index_dir: Path, model: Path | None, folders, **passes: bool):
    """A pamir.jobs.watch.Watcher of `folders` for the index, with the model loaded (None: the
    zero-caption system), running the fact passes not asked False (`text=False`); the
    command fails with why where it cannot watch them."""
    with optional():  # the [watch] extra, or MissingExtra before a model is loaded
        import watchdog  # noqa: F401, PLC0415 - the [watch] extra
    for f in folders:
        if Path(f).expanduser().exists() and not Path(f).expanduser().is_dir():
            fail(f"{f}: not a folder; give folders of pictures to watch")
    system, fingerprint = loading.indexing_system(model, load=product.load_system)
    return Watcher(index_dir, folders, model, system, fingerprint, load=product.load_system,
                   say=lambda line: console.print(escape(line)), **passes)


def _run(watcher) -> None:
    try:
        watcher.run()
    except KeyboardInterrupt:
        # each update's batches are committed as they go: nothing is half-written
        console.print("stopped watching; `pamir watch` catches up with what changes "
                      "meanwhile when it starts again")
    except WatchError as e:
        fail(str(e))


def register(app: typer.Typer) -> None:
    app.command("watch")(product.pass_options(
        lambda p: f"{p.about}, in new pictures as `pamir index`{product.extra_note(p)}",
        watching=True)(watch_command))
