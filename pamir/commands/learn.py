"""`pamir learn`: a model taught new captioned pictures and new words (pamir.jobs.learning.
learn_pictures), and the indexes built with it brought up to date."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from ..data import DataError, load_captions_table
from . import index as product
from .common import console, fail

# `load_system` is looked up on pamir.commands.index when a command runs, so that a test's
# stand-in for it (monkeypatch) reaches every command that loads a model.


def learn_command(
    model: Path = typer.Argument(..., help="a trained PAMIR system (from `pamir fit`): updated "
                                           "in place, the previous one kept as MODEL.previous"),
    captions: Path = typer.Argument(..., help="a captions table of new pictures (.tsv/.csv/"
                                              ".jsonl); new words are allowed"),
    index_dirs: list[Path] = typer.Option(None, "--index", help="indexes built with MODEL to "
                                          "update (default: the default index, if it was)"),
    updates: int = typer.Option(None, min=1, help="PA updates to run (default: 200 a picture)"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
):
    """Teach a model new captioned pictures (and new words) without refitting from scratch.

    PAMIR learns online: Passive-Aggressive updates on triplets drawn from the new captions
    move only the rows of their words; a new word gets a row of its own. Indexes built with
    the model are brought up to date (features come from the cache; pictures are not decoded
    again when cached).
    """
    system = product.load_system(model)
    try:
        coll = load_captions_table(captions, include_uncaptioned=False)
    except DataError as e:
        fail(str(e))
    pairs = [(p, c) for p, c in zip(coll.paths, coll.captions) if c]
    if not pairs:
        fail(f"{captions}: no captioned picture to learn from")
    # start-up: the learning loads the models and the training (numba, scipy), which the
    # other commands, and --help, do not need
    from ..jobs.learning import learn_pictures  # noqa: PLC0415

    try:
        report = learn_pictures(model, system, pairs, index_dirs=index_dirs, n_updates=updates)
    except (ValueError, NotImplementedError, OSError) as e:
        # OSError: a full or failing disk, the previous model stays, whole
        fail(str(e))
    for path, why in report.pop("skipped"):
        console.print(f"[yellow]skipped[/yellow] {path}: {why}", markup=True)
    if as_json:
        print(json.dumps(report))
        return
    added = ", ".join(report["new_words"]) or "none"
    console.print(f"{model}: learnt {report['pictures']} pictures with {report['updates']:,} "
                  f"PA updates ({report['active']:,} moved the model); new words: {added}; "
                  f"vocabulary {report['vocabulary']} words; the previous model is in "
                  f"{report['previous']}")
    for w in report["words_without_negatives"]:
        console.print(f"[yellow]every new picture has '{escape(w)}':[/yellow] add pictures "
                      "without it, so that pamir learns what it is not", markup=True)
    for ix in report["indexes"]:
        console.print(f"index {ix['index']}: {ix['status']}")
    if any(ix["status"].startswith("not updated,") for ix in report["indexes"]):
        fail(f"{model}: learnt and saved, but an index could not be updated (above)")


def register(app: typer.Typer) -> None:
    app.command("learn")(learn_command)
