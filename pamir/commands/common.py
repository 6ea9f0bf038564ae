"""What every command shares: the console its messages go to, how it fails, the help of the
--index option, and who reports unreadable pictures."""

from __future__ import annotations

import logging
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

#: Messages for the person (progress, warnings, errors) go to stderr, so that stdout carries
#: only results a program can read; soft wrap keeps long paths whole.
console = Console(stderr=True, highlight=False, soft_wrap=True)
INDEX_HELP = "index folder (default: $PAMIR_INDEX, else ~/.local/share/pamir/index)"


def fail(message: str, code: int = 2) -> NoReturn:
    """Print `error: message` (in red on a terminal) and end the command with `code` (2: a
    usage error the message explains how to fix)."""
    console.print(f"[red]error:[/red] {escape(message)}", markup=True)  # "[x]" in a path stays
    raise typer.Exit(code)


class _Say(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        console.print(record.getMessage(), markup=False)


def say_once_work() -> None:
    """Show on the console what pamir does once on a machine while a person waits (the
    logger `pamir.once`: an int8 network made and checked against fp32)."""
    once = logging.getLogger("pamir.once")
    if not any(isinstance(h, _Say) for h in once.handlers):
        once.addHandler(_Say())
    once.setLevel(logging.INFO)
    once.propagate = False  # said once: not again by a root handler a library set up (rapidocr)


def own_the_reports() -> None:
    """The commands that read pictures list the unreadable ones themselves, with the reason;
    the feature extractor's own warning line for each would say it a second time."""
    logging.getLogger("pamir.features.extract").setLevel(logging.ERROR)


__all__ = ["INDEX_HELP", "console", "fail", "own_the_reports", "say_once_work"]
