"""`pamir dataset`: the data sets and their retrieval protocol (TPAMI Table I)."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from .. import config
from ..data import DataError
from ..facts.collection import load_collection
from ..protocol import Protocol
from .common import fail

app = typer.Typer(help="Data sets and their retrieval protocol.", no_args_is_help=True)
console = Console()  # the table is the result: stdout (messages go to stderr)


@app.command("stats")
def dataset_stats(
    data: str = typer.Argument("corel5k", help="corel5k, or a captions table (.tsv/.csv/.jsonl)"),
    seed: int = typer.Option(config.SEED, help="seed of the train/validation split"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
):
    """The protocol statistics of train / valid / test, as TPAMI Table I."""
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
