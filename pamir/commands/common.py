"""What every command shares: the console its messages go to, and how it fails."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

#: Messages for the person (progress, warnings, errors) go to stderr, so that stdout carries
#: only results a program can read; soft wrap keeps long paths whole.
console = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print `error: message` (in red on a terminal) and end the command with `code` (2: a
    usage error the message explains how to fix)."""
    console.print(f"[red]error:[/red] {escape(message)}", markup=True)  # "[x]" in a path stays
    raise typer.Exit(code)


__all__ = ["console", "fail"]
