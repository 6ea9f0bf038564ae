"""`pamir duplicates`: the groups of copies and bursts among the indexed pictures, and what to
do with them: a list (--list FILE) or the others moved aside (--move-to DIR). pamir never
deletes a file. The work is the library's: pamir.duplicates.groups."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from .. import config
from ..duplicates.grouping import KINDS
from ..duplicates.groups import copies_pass as run, find_duplicates, move_others, write_list
from ..index import Index, IndexDirError
from ..progress import Bar
from .common import INDEX_HELP, console, fail

#: What a kind is called in the printed list.
KIND_NAMES = {"exact": "exact copies", "near": "near-copies", "burst": "burst"}


def duplicates_command(
    index_dir: Path = typer.Option(None, "--index", help=INDEX_HELP),
    kinds: str = typer.Option("exact,near,burst", "--kind",
                              help="the kinds of group, comma-separated: exact (the same file "
                                   "or pixels), near (resized, recompressed, cropped a little, "
                                   "colour-adjusted, exported), burst (shots seconds apart)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    list_file: Path = typer.Option(None, "--list", metavar="FILE",
                                   help="write the groups as a tab-separated list (group, "
                                        "kind, keep or other, path)"),
    move_to: Path = typer.Option(None, "--move-to", metavar="DIR",
                                 help="move every picture of the groups but the one kept "
                                      "(and its sidecars) into DIR; never overwrites"),
):
    """Groups of copies and bursts among the indexed pictures, each marked as which, with the
    one to keep (the page's choice, else the largest). Nothing is deleted: --list writes
    them down, --move-to moves the others aside (run `pamir index` after, to forget them).
    Bursts are moved only when --kind names them alone or with the others."""
    wanted = [k.strip() for k in kinds.split(",") if k.strip()]
    unknown = [k for k in wanted if k not in KINDS]
    if unknown or not wanted:
        fail(f"--kind {kinds}: give some of {', '.join(KINDS)}, comma-separated")
    index_dir = index_dir or config.default_index_dir()
    try:
        with Index.open(index_dir, writable=True) as index:
            groups = [g for g in find_duplicates(index) if g.kind in wanted]
    except IndexDirError as e:
        fail(str(e))
    if list_file is not None:
        try:
            others = write_list(groups, list_file)
        except OSError as e:
            fail(f"{list_file}: cannot write the list ({e.strerror or e}); choose another FILE")
        console.print(f"{list_file}: {len(groups)} groups, {others} pictures besides the "
                      "ones to keep")
    moved = None
    if move_to is not None:
        try:
            moved = move_others(groups, move_to)
        except OSError as e:
            fail(f"{move_to}: cannot move pictures there ({e.strerror or e}); choose "
                 "another DIR")
    if as_json:
        out = {"groups": [g.as_dict() for g in groups]}
        if moved is not None:
            out.update(moved.as_dict())
        print(json.dumps(out))
        return
    _print(groups)
    if moved is not None:
        _print_moved(moved, move_to)


def _print(groups) -> None:
    if not groups:
        console.print("no copies or bursts found")
        return
    for n, g in enumerate(groups, 1):
        print(f"{n}. {KIND_NAMES[g.kind]} ({len(g.ids)} pictures)")
        for i, path in zip(g.ids, g.paths):
            print(f"   {'keep ' if i == g.keep else '     '} {path}")


def _print_moved(moved, folder: Path) -> None:
    for src, dst in moved.moved:
        console.print(f"moved {escape(src)} -> {escape(dst)}", markup=True)
    for path, why in moved.skipped:
        console.print(f"[yellow]not moved:[/yellow] {escape(path)} ({escape(why)})",
                      markup=True)
    console.print(f"{len(moved.moved)} pictures moved into {escape(str(folder))}; nothing "
                  "was deleted or overwritten (`pamir index` forgets the moved ones)",
                  markup=True)


def copies_pass(index: Index) -> dict | None:
    """The looks pass and the groups of `pamir index` (pamir.duplicates.groups.copies_pass), with
    its own progress."""
    try:
        with Bar("finding copies", console=console, unit="pictures") as bar:
            return run(index, progress=lambda done, total: bar.update(completed=done,
                                                                       total=total))
    except KeyboardInterrupt:
        console.print(f"interrupted: {len(index):,} pictures are indexed and searchable; the "
                      "same command finds the copies")
        raise typer.Exit(130) from None


def print_copies_report(r: dict) -> None:
    g = r["groups"]
    console.print(f"copies: {r['read']:,} pictures' looks read ({r['failed']} unreadable) "
                  f"in {r['seconds']:.1f} s; {g['exact']} groups of exact copies, {g['near']} "
                  f"of near-copies, {g['burst']} bursts (`pamir duplicates`)")


def register(app: typer.Typer) -> None:
    app.command("duplicates")(duplicates_command)
