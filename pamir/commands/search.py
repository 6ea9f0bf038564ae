"""`pamir search`: the indexed pictures ranked for a text query, or for a picture (--like)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import typer
from rich.markup import escape

from .. import config
from ..calibration import LIKELY
from ..facts.video import clock
from ..index import Index, IndexDirError, QueryError
from ..jobs.errors import WorkflowError
from ..jobs.loading import check_vocabulary
from ..storage import shown_path
from ..text.query import SORTS
from . import index as product
from .common import INDEX_HELP, console, fail

# `load_system` is looked up on pamir.commands.index when a command runs, so that a test's
# stand-in for it (monkeypatch) reaches every command that loads a model.

QUERY_HELP = ('words, e.g. "tiger grass"; -word excludes, word^2 or 2:word weighs, "a phrase" '
              'is one concept, p:0.5 keeps the pictures more likely relevant than not (a '
              'calibrated probability), floor:0.5 keeps scores >= 0.5, sort:date orders by the date '
              'taken, date:2019-07 (or 2019-06..2019-08) keeps pictures taken then, in:FOLDER '
              'keeps pictures under a folder (docs/usage.md, "Queries", "Dates")')


#: `pamir search` answers one query and exits. Scoring every picture with numpy (about 3 ms a
#: query word at 1,000,000 pictures, benchmarks/results/index.md) costs far less than
#: importing and loading the exact top-k kernels (numba: 0.4 s and more), up to indexes of
#: this size; `pamir serve`, which answers many queries, keeps the kernels. Same answers.
NUMPY_SEARCH_UP_TO = 10_000_000


def search_command(
    query: str = typer.Argument("", help=QUERY_HELP, show_default=False),
    index_dir: Path = typer.Option(None, "--index", help=INDEX_HELP),
    k: int = typer.Option(10, "-k", "--top", min=1, help="how many pictures"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    files_only: bool = typer.Option(False, "-f", "--files", help="print paths only"),
    floor: float = typer.Option(None, help="leave out pictures scoring under this (as floor:X)"),
    p_floor: float = typer.Option(None, "--p", "--probability",
                                  help="leave out pictures less likely than this to be "
                                       "relevant, 0-1 (as p:X)"),
    sort: str = typer.Option(None, help="score (default), date / newest, or oldest (as sort:X)"),
    folder: list[str] = typer.Option(None, "--in", help="only pictures under this folder (as "
                                                        "in:X); may be repeated"),
    like: Path = typer.Option(None, "--like", help="pictures like this one (indexed or not), "
                                                   "nearest in the model's text space"),
    model: Path = typer.Option(None, help="the model for --like on a picture that is not "
                                          "indexed (default: the one the index was built with)"),
    collapse: str = typer.Option("copies", "--collapse",
                                 help="none, copies (default: a picture and its copies are one "
                                      "hit) or bursts (a burst too; `pamir duplicates`)"),
    mapping: bool = typer.Option(None, "--mapping/--no-mapping",
                                 help="map words outside the vocabulary onto it with the "
                                      "word-embedding model (default: on, unless "
                                      "$PAMIR_EMBEDDINGS is 0)"),
):
    """Rank the indexed pictures for a text query, or for a picture (--like)."""
    index_dir = index_dir or config.default_index_dir()
    if not query.strip() and like is None:
        fail("empty query: type one or more words, e.g. \"tiger grass\", or give --like PICTURE")
    try:
        index = Index.open(index_dir)
    except IndexDirError as e:
        fail(str(e))
    with index:
        if like is not None:
            _search_like(index, like, model, query, k, floor, sort, folder, as_json, files_only)
            return
        try:
            q = index.parse_query(query, mapping=mapping)
            hits = index.search(q, k, floor=floor, sort=_sort_name(sort),
                                folders=(q.folders + list(folder)) if folder else None,
                                method="brute" if len(index) <= NUMPY_SEARCH_UP_TO else "auto",
                                p_floor=p_floor, collapse=collapse)
            likely = index.count_likely(q, LIKELY, (q.folders + list(folder)) if folder
                                        else None)
        except QueryError as e:
            if as_json:
                print(json.dumps({"query": query, "error": str(e), "unknown": e.unknown}))
            fail(str(e))
        except ValueError as e:  # a --collapse it does not know
            fail(str(e))
    for m in q.mapped:
        console.print(f"[cyan]mapped:[/cyan] {escape(m.describe())}", markup=True)
    if q.unknown:
        notes = [m.describe() for m in q.matches if m.how == "unknown"]
        console.print(f"[yellow]not in the vocabulary, ignored:[/yellow] "
                      f"{escape('; '.join(notes))}", markup=True)
    used_floor = q.floor if floor is None else floor
    used_p = q.p_floor if p_floor is None else p_floor
    if not hits and used_p is not None:
        console.print(f"nothing is relevant with a probability of at least {used_p:g}")
    elif not hits and used_floor is not None:
        console.print(f"nothing scores at least {used_floor:g}: no picture is relevant enough")
    if likely is not None and not as_json and not files_only and (hits or used_p is None):
        console.print(f"{likely:,} {'picture is' if likely == 1 else 'pictures are'} likely "
                      f"relevant (a calibrated probability of {LIKELY:g} or more)")
    _print_hits(hits, as_json, files_only, {
        "query": query, "words": q.words, "unknown": q.unknown, "mapping": q.mapping_json(),
        "likely": likely, "likely_probability": LIKELY,
        "options": {**q.options_json(), "floor": used_floor, "p_floor": used_p,
                    "sort": _sort_name(sort) or q.sort,
                    "folders": q.folders + list(folder or [])}})


def _sort_name(sort: str | None) -> str | None:
    if sort is None:
        return None
    if sort.lower() not in SORTS:
        fail(f"--sort {sort}: one of {', '.join(sorted(SORTS))}")
    return SORTS[sort.lower()]


def _print_hits(hits, as_json: bool, files_only: bool, head: dict) -> None:
    if as_json:
        print(json.dumps({**head, "hits": [{**h.__dict__, "path": shown_path(h.path)}
                                           for h in hits]}))
    elif files_only:
        # the name's own bytes, so that `| xargs` opens a file whose name is not UTF-8
        sys.stdout.flush()
        for h in hits:
            sys.stdout.buffer.write(os.fsencode(h.path) + b"\n")
        sys.stdout.buffer.flush()
    else:
        for rank, h in enumerate(hits, 1):  # plain lines: paths never wrapped, easy to grep
            when = f"{h.taken[:10]}  " if getattr(h, "taken", None) else ""
            caption = f"\t{' '.join(h.caption)}" if getattr(h, "caption", None) else ""
            p = getattr(h, "probability", None)
            chance = f"p {p:4.2f}  " if p is not None else ""  # none: nothing invented
            place = ", ".join((getattr(h, "facts", None) or {}).get("place", ()))
            where = f"{place}  " if place else ""
            held = getattr(h, "matched", None)
            said = f"[{', '.join(held)}]  " if held else ""  # the facts that put it first
            folded = getattr(h, "folded", None)  # its copies, folded into it
            more = f"(+{len(folded)} like it)  " if folded else ""
            t = getattr(h, "time", None)  # a video's best frame: path@mm:ss
            at = f"@{clock(t)}" if t is not None else ""
            print(f"{rank:>3}  {h.score:8.4f}  {chance}{when}{where}{said}{more}"
                  f"{shown_path(h.path)}{at}{caption}")


def _search_like(index: Index, like: Path, model: Path | None, query: str, k: int, floor,
                 sort, folder, as_json: bool, files_only: bool) -> None:
    """More like this: an indexed picture's stored vector, or a new picture through the
    model; nearest pictures by cosine in the text space (Index.similar says why)."""
    if query.strip():
        fail("give either a query or --like PICTURE, not both")
    if not like.is_file():
        fail(f"{like}: no such picture file")
    picture_id = index.id_of_path(like)
    if picture_id is not None:
        z, source = index.vector(picture_id), "indexed"
    else:
        model = model or (Path(index.model_dir) if index.model_dir else None)
        if model is None or not model.is_dir():
            fail(f"{like} is not indexed, and the model to read it is not here; give --model "
                 "MODEL or index the picture")
        system = product.load_system(model)
        try:
            check_vocabulary(system, index.vocabulary, model)
        except WorkflowError as e:
            fail(str(e))
        Z, ok, reasons = system.transform_paths([str(like)])
        if not np.asarray(ok)[0]:
            fail(f"{like}: {reasons[0] or 'could not be read'}")
        z, source = np.asarray(Z, np.float32)[0], "computed by the model"
    hits = index.similar(z, k, exclude=[picture_id] if picture_id is not None else [],
                         floor=floor, sort=_sort_name(sort) or "score", folders=folder or ())
    if not as_json and not files_only:
        space = "the model's text space" if index.T else "ImageNet's class probabilities"
        console.print(f"pictures like {like} ({source}), by cosine similarity in {space}")
    _print_hits(hits, as_json, files_only, {"like": str(like), "source": source,
                                            "space": "text", "id": picture_id})


def register(app: typer.Typer) -> None:
    app.command("search")(search_command)
