"""`pamir people`: who is in the indexed pictures, and `--forget NAME`; and the lines of the
faces pass that `pamir index` runs (pamir.jobs.indexing). The work is the library's:
pamir.jobs.indexing.read_pass and pamir.facts.people.who."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from .. import config
from ..index import Index, IndexDirError
from .common import console, fail

INDEX_HELP = "index folder (default: $PAMIR_INDEX, else ~/.local/share/pamir/index)"
#: How many unreadable pictures the faces pass lists.
MAX_LISTED = 20


def print_faces_report(r: dict) -> None:
    for note in r["notes"][:MAX_LISTED]:
        console.print(f"[yellow]faces not read:[/yellow] {escape(note)}", markup=True)
    p = r["people"]
    console.print(f"faces: {r['read']:,} pictures read ({r['with_facts']:,} with faces, "
                  f"{r['failed']} unreadable) in {r['seconds']:.1f} s; {p['faces']:,} faces: "
                  f"{p['named']:,} named, {p['carried']:,} given a name they look like, "
                  f"{p['unnamed']:,} in {p['groups']:,} unnamed people (`pamir people`)")


def people_command(
    index_dir: Path = typer.Option(None, "--index", help=INDEX_HELP),
    forget: str = typer.Option(None, "--forget", metavar="NAME",
                               help="remove this person from the index: their faces, face "
                                    "embeddings, name and the person facts they gave (a name, "
                                    "or \"person 3\")"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
):
    """The people in the indexed pictures, with how many pictures each is in; unnamed people
    are "person N" (name them on the page: `pamir serve`).

    Face embeddings are biometric data: they stay in the index folder and are never sent
    anywhere; --forget removes a person's.
    """
    index_dir = index_dir or config.default_index_dir()
    if forget is not None:
        _forget(index_dir, forget, as_json)
        return
    try:
        with Index.open(index_dir) as index:
            people = [p for p in index.people() if p.faces]
    except IndexDirError as e:
        fail(str(e))
    if as_json:
        print(json.dumps([{"id": p.id, "name": p.shown, "label": p.label,
                           "pictures": p.pictures, "faces": p.faces} for p in people]))
        return
    if not people:
        console.print(f"{index_dir}: no faces found yet (`pamir index FOLDER` finds them, "
                      "with the [faces] extra)")
        return
    for p in people:  # results on stdout, as `pamir search` prints its hits
        print(f"{p.pictures:6,}  {p.label}")


def _forget(index_dir: Path, name: str, as_json: bool) -> None:
    # start-up: the XMP reading (defusedxml, 20 ms); `pamir search` imports this module
    # (through commands.index's faces report) and forgets no one
    from ..facts.people.who import PeopleError, forget  # noqa: PLC0415

    try:
        with Index.open(index_dir, writable=True) as index:
            removed = forget(index, name)
    except (IndexDirError, PeopleError) as e:
        fail(str(e))
    if as_json:
        print(json.dumps(removed))
        return
    console.print(f"{escape(removed['person'])}: forgotten ({removed['faces']:,} faces in "
                  f"{removed['pictures']:,} pictures, their embeddings and name removed from "
                  f"{index_dir})", markup=True)


def register(app: typer.Typer) -> None:
    app.command("people")(people_command)
