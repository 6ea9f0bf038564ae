"""The `pamir` command."""

from __future__ import annotations

import importlib
import json

import typer
from rich.console import Console
from rich.markup import escape

from . import config
from .commands.common import console as errors, fail
from .data import DataError
from .extras import MissingExtra, optional

# Every command line imports this module and mounts every command (for the help and the
# dispatch), so what it and the command modules import at the top is paid by all of them,
# `pamir search` and `pamir --help` included: the heavy parts (scipy, scikit-learn, numba,
# torch, the models) are imported inside the commands that use them.

class _Commands(typer.core.TyperGroup):
    """pamir's commands, which refuse an argument holding a NUL byte before any command reads
    it: no file name or word can hold one (a shell cannot pass one; a script calling the CLI
    can), and as a path it would reach the operating system as "embedded null byte"."""

    def parse_args(self, ctx, args):
        held = [a for a in args if "\0" in a]
        if held:
            fail(f"argument {held[0]!r} holds a NUL byte, which no file name or word can hold")
        return super().parse_args(ctx, args)


app = typer.Typer(help="Retrieve pictures from text queries (PAMIR).", no_args_is_help=True,
                  pretty_exceptions_enable=False, cls=_Commands)
dataset_app = typer.Typer(help="Data sets and their retrieval protocol.", no_args_is_help=True)
app.add_typer(dataset_app, name="dataset")
console = Console()

#: Sub-command modules: ("name", module) mounts module.app as `pamir name`; (None, module)
#: calls module.register(app) to add top-level commands.
COMMAND_MODULES = [
    ("features", "pamir.commands.features"),
    (None, "pamir.commands.fit"),
    (None, "pamir.commands.index"),  # `pamir index`, then the commands of the index
    (None, "pamir.commands.search"),
    (None, "pamir.commands.annotate"),
    (None, "pamir.commands.learn"),
    (None, "pamir.commands.serve"),
    (None, "pamir.commands.watch"),  # `pamir watch`: the index follows the folders
    (None, "pamir.commands.people"),
    (None, "pamir.commands.duplicates"),
    (None, "pamir.commands.info"),  # `pamir info`: the processor and the networks' precision
]


@dataset_app.command("stats")
def dataset_stats(
    data: str = typer.Argument("corel5k", help="corel5k, or a captions table (.tsv/.csv/.jsonl)"),
    seed: int = typer.Option(config.SEED, help="seed of the train/validation split"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
):
    """The protocol statistics of train / valid / test, as TPAMI Table I."""
    from rich.table import Table  # noqa: PLC0415  start-up: rich.table (20 ms)

    # start-up: pictures' metadata (defusedxml), the protocol (scipy)
    from .facts.collection import load_collection  # noqa: PLC0415
    from .protocol import Protocol  # noqa: PLC0415

    try:
        stats = Protocol(load_collection(data), seed=seed).stats()
    except (DataError, ValueError) as e:
        fail(str(e))
    if as_json:
        print(json.dumps(stats, indent=2))
        return
    table = Table(title=f"{data}: vocabulary {stats['vocabulary']} words, seed {seed}")
    table.add_column("")
    splits = [s for s in ("train", "valid", "test") if s in stats]
    for s in splits:
        table.add_column(s, justify="right")
    for key, label in [("pictures", "pictures"), ("queries", "queries"),
                       ("relevant_per_query", "relevant pictures / query"),
                       ("words_per_query", "words / query"),
                       ("single_word_queries", "single-word queries")]:
        table.add_row(label, *(f"{stats[s][key]:,}" for s in splits))
    console.print(table)


def _mount_commands() -> None:
    for name, module in COMMAND_MODULES:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name == module:  # that part of the tool is not there yet
                continue
            raise
        if name:
            app.add_typer(mod.app, name=name)
        else:
            mod.register(app)


_mount_commands()


def main() -> None:
    try:
        with optional():
            app()
    except MissingExtra as e:  # an optional package missing: say which extra installs it
        errors.print(f"[red]error:[/red] {escape(str(e))}", markup=True)
        raise SystemExit(2) from None
