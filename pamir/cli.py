"""The `pamir` command."""

from __future__ import annotations

import importlib

import typer
from rich.markup import escape

from .commands.common import console as errors, fail, say_once_work
from .extras import MissingExtra, optional

#: Every command, with the module that defines it and the first sentence of its help (what
#: `pamir --help` lists). A command's module is imported only when that command runs or its own
#: --help is asked: what a command module imports at its top is then paid by that command alone,
#: so `pamir search` and `pamir --help` do not pay for fit's, serve's or index's imports.
#: tests/test_cli.py checks this table against the modules' commands. A module registers its
#: commands with register(app), or is a Typer app mounted under its command's name.
COMMANDS = {
    "fit": ("pamir.commands.fit", "Train a system: features on the training pictures, the "
            "representation and the model's parameters chosen on validation."),
    "evaluate": ("pamir.commands.fit", "AvgP, BEP and P10 of a trained system on a split's "
                 "queries, overall and per subset"),
    "models": ("pamir.commands.fit", "Every model kind: what it reads, its parameters with their "
               "defaults, and the validation grid `pamir fit` searches"),
    "index": ("pamir.commands.index", "Index folders of pictures, incrementally: only new and "
              "changed files are computed."),
    "search": ("pamir.commands.search", "Rank the indexed pictures for a text query, or for a "
               "picture (--like)."),
    "annotate": ("pamir.commands.annotate", "The words that best describe each picture, with "
                 "their scores and calibrated probabilities"),
    "learn": ("pamir.commands.learn", "Teach a model new captioned pictures (and new words) "
              "without refitting from scratch."),
    "serve": ("pamir.commands.serve", "Serve the web page and the HTTP API (OpenAPI schema at "
              "/docs)."),
    "watch": ("pamir.commands.watch", "Keep the index up to date as pictures are added, changed, "
              "renamed or removed (Ctrl-C stops)."),
    "people": ("pamir.commands.people", "The people in the indexed pictures, with how many "
               "pictures each is in"),
    "duplicates": ("pamir.commands.duplicates", "Groups of copies and bursts among the indexed "
                   "pictures, each marked as which, with the one to keep"),
    "info": ("pamir.commands.info", "The processor, ONNX Runtime and the precision each network "
             "runs at here, and why."),
    "features": ("pamir.commands.features", "Visual features: blocks, LBP and colour "
                 "histograms, visterms, CNN."),
    "dataset": ("pamir.commands.dataset", "Data sets and their retrieval protocol."),
}


def load_commands(module: str) -> dict:
    """The click commands that `module` defines, by name; none where the module is not there
    (that part of the tool is not installed yet)."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name == module:
            return {}
        raise
    holder = typer.Typer()
    if hasattr(mod, "register"):
        mod.register(holder)
    else:
        holder.add_typer(mod.app, name=next(n for n, (m, _) in COMMANDS.items() if m == module))
    return typer.main.get_group(holder).commands


class _Commands(typer.core.TyperGroup):
    """pamir's commands, loaded from COMMANDS on first use (click's lazy loading of
    subcommands). They refuse an argument holding a NUL byte before any command reads it: no
    file name or word can hold one (a shell cannot pass one; a script calling the CLI can), and
    as a path it would reach the operating system as "embedded null byte"."""

    _listing = False  # while the group's help is written: COMMANDS' lines stand for the commands

    def parse_args(self, ctx, args):
        held = [a for a in args if "\0" in a]
        if held:
            fail(f"argument {held[0]!r} holds a NUL byte, which no file name or word can hold")
        return super().parse_args(ctx, args)

    def list_commands(self, ctx):
        return [*COMMANDS, *(n for n in self.commands if n not in COMMANDS)]

    def get_command(self, ctx, cmd_name):
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return self.commands.get(cmd_name)
        if self._listing:
            return self._stand_in(cmd_name)
        self.commands.update(load_commands(COMMANDS[cmd_name][0]))
        return self.commands.get(cmd_name)

    @staticmethod
    def _stand_in(cmd_name: str) -> typer.core.TyperCommand:
        """A command that only says what `cmd_name` does, for lists of the commands."""
        return typer.core.TyperCommand(cmd_name, help=COMMANDS[cmd_name][1])

    def format_help(self, ctx, formatter):
        self._listing = True
        try:
            return super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(self, ctx, args):
        if not args or args[0] in self.commands or args[0] in COMMANDS:
            return super().resolve_command(ctx, args)
        # an unknown command: typer's "Did you mean" reads self.commands, so show it them all
        loaded = dict(self.commands)
        self.commands.update((n, self._stand_in(n)) for n in COMMANDS if n not in loaded)
        try:
            return super().resolve_command(ctx, args)
        finally:
            self.commands = loaded


app = typer.Typer(help="Retrieve pictures from text queries (PAMIR).", no_args_is_help=True,
                  pretty_exceptions_enable=False, cls=_Commands)


@app.callback()
def _pamir() -> None:
    """Typer builds a group only around a callback or a command, and every command of pamir's
    is loaded on first use."""


def main() -> None:
    say_once_work()
    try:
        with optional():
            app()
    except MissingExtra as e:  # an optional package missing: say which extra installs it
        errors.print(f"[red]error:[/red] {escape(str(e))}", markup=True)
        raise SystemExit(2) from None
