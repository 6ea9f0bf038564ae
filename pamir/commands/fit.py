"""`pamir fit`, `pamir evaluate` and `pamir models`: train a whole system on captioned
pictures, measure it, and list what can be trained.

    pamir fit corel5k --model pamir -o models/corel [--representation cnn]
    pamir evaluate models/corel --on corel5k:test [--json] [--run test.trec]
    pamir models [--json]
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .. import config
from ..config import DEFAULT_REPRESENTATIONS
from ..data import DataError, caption_sources
from ..distributed import DASK_BATCH, dask_client, on_cluster
from ..features.registry import names_help
from ..features.settings import FeatureSettings
from .common import console, fail

# The models, the training and the evaluation (scipy, scikit-learn, numba: about 3 s) are
# pamir.jobs.fitting's, which each command imports when it runs, not here: cli.py imports this
# module for `pamir fit --help` and `evaluate --help` too (with them at the top, `fit --help`
# took 4.3 s). rich.table costs these nothing: typer's help has imported it.

SPLITS = ("test", "valid", "train", "development")
METRICS = (("avgp", "AvgP"), ("bep", "BEP"), ("p10", "P10"))


def parse_params(items: list[str] | None) -> dict:
    """["c=0.1", "average=false", "margin=text"] -> {"c": 0.1, "average": False, ...}."""
    out = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            fail(f"--param {item!r}: write NAME=VALUE, e.g. --param c=0.1")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            low = value.strip().lower()
            out[key.strip()] = {"true": True, "false": False, "none": None}.get(low, value)
    return out


def parse_on(spec: str) -> tuple[str, str]:
    """"corel5k:test" -> ("corel5k", "test"); "table.tsv" -> ("table.tsv", "test")."""
    data, _, split = spec.rpartition(":")
    if data and split in SPLITS:
        return data, split
    return spec, "test"


# --------------------------------------------------------------------------------- fit
# fit_command is longer than 80 lines: its signature declares the command's 18 options, as
# typer reads them; the body is under 50 lines.
def fit_command(
    data: str = typer.Argument(..., help="corel5k, a captions table (.tsv/.csv/.jsonl), or a "
                                         "folder whose pictures carry keywords (IPTC/XMP/EXIF, "
                                         "sidecars)"),
    output: Path = typer.Option(..., "--output", "-o", help="directory to write the system to"),
    model: str = typer.Option("pamir", "--model", "-m", help="model kind (pamir, cmrm, ...)"),
    param: list[str] = typer.Option(None, "--param", "-p",
                                    help="fix a model parameter: NAME=VALUE (repeatable)"),
    no_grid: bool = typer.Option(False, "--no-grid",
                                 help="train only the defaults (+ --param), no validation grid"),
    retrain: bool = typer.Option(False, "--retrain",
                                 help="retrain the chosen settings on train + validation"),
    ensemble: int = typer.Option(1, "--ensemble", min=1,
                                 help="train the chosen PAMIR with this many seeds and average "
                                      "them into one model (searches cost the same)"),
    representation: list[str] = typer.Option(
        None, "--representation", "-r",
        help=f"picture representation: {names_help()} "
             "or a combination such as cnn+visterms or blobs+sift (repeatable: "
             "chosen on validation among those given; default: "
             f"{', '.join(DEFAULT_REPRESENTATIONS)}, those the model reads)"),
    block_fraction: float = typer.Option(FeatureSettings.block_fraction,
                                         help="block side / shorter picture side"),
    visterms: int = typer.Option(FeatureSettings.n_visterms, help="visterm codebook size"),
    scaling: str = typer.Option(FeatureSettings.scaling, help="block histogram scaling"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bars"),
    time_budget: float = typer.Option(
        None, "--time-budget", min=0.1, metavar="MINUTES",
        help="the best model found within this many minutes: fits still running then stop "
             "at their next validation, and the ensemble or retraining is left out if there "
             "is no time left (said in the summary)"),
    workers: int = typer.Option(None, min=1, help="extract features and assign visterms as "
                                                  "Dask tasks on a local cluster of this "
                                                  "many worker processes"),
    scheduler: str = typer.Option(None, help="the same on the cluster of this Dask scheduler "
                                             "(tcp://HOST:8786; docs/scale.md)"),
    folder_words: bool = typer.Option(False, "--folder-words",
                                      help="DATA a folder: its subfolders' names are caption "
                                           "words too (off: 'DCIM' or '2019' are no content)"),
    reselect: bool = typer.Option(False, "--reselect", "--full",
                                  help="run the full selection even where OUTPUT holds a model "
                                       "of DATA that a refit could start from"),
):
    """Train a system: features on the training pictures, the representation and the model's
    parameters chosen on validation. Where OUTPUT already holds a model fitted on DATA and
    the captions changed little, the model is refitted instead: its representation and
    parameters kept, PAMIR started from its weights (--reselect: the full selection)."""
    fitting = _jobs()
    if model not in fitting.MODELS:
        fail(f"unknown model {model!r}; choose one of {', '.join(fitting.MODELS)}")
    params = parse_params(param)
    try:
        fitting.check_request(output, representation)  # before minutes of features, not after
    except (OSError, ValueError) as e:
        fail(str(e))
    try:
        settings = FeatureSettings(block_fraction=block_fraction, n_visterms=visterms,
                                   scaling=scaling)
        collection = fitting.load_collection(data, folder_words=folder_words)
        if collection.sources:  # a folder read without a table: say what its files gave
            console.print(f"{data}: {caption_sources(collection)}", markup=False)
            _print_notes(collection.warnings)
        grid = fitting.validation_grid(model, params, no_grid)
        console.print(f"{data}: {len(collection):,} pictures; model {model}; grid "
                      f"{json.dumps(grid) if grid != [{}] else 'none'}; seed {config.SEED}")
        started = time.perf_counter()
        log = lambda line: console.print(line, markup=False)  # noqa: E731
        with _cluster(workers, scheduler):
            # a model of this folder already in OUTPUT is refitted unless --reselect or
            # the request changes what the selection chooses among (fit_or_refit)
            system = fitting.fit_or_refit(
                collection, output, model, reselect=reselect, feature_settings=settings,
                model_params=params, progress=not quiet, representation=representation or None,
                retrain=retrain, ensemble=ensemble, grid=grid, log=log,
                time_budget=None if time_budget is None else 60 * time_budget)
        system.info["command"] = " ".join(["pamir"] + sys.argv[1:])
        system.save(output)
    except (DataError, ValueError, OSError) as e:
        fail(str(e))
    print_fit_summary(system, output, time.perf_counter() - started,
                      fitting.precision_notes(system))


def _jobs():
    """pamir.jobs.fitting, the work of `pamir fit` and `evaluate`."""
    # start-up: the training, the models and the evaluation (about 3 s), which `pamir fit
    # --help` and `evaluate --help` must not wait for (see the note at the top)
    from ..jobs import fitting  # noqa: PLC0415
    return fitting


def _print_notes(notes: list[str], shown: int = 10) -> None:
    """The metadata that could not be read (those pictures are uncaptioned), the first few."""
    for n in notes[:shown]:
        console.print(f"[yellow]note:[/yellow] {escape(n)}", markup=True)
    if len(notes) > shown:
        console.print(f"... and {len(notes) - shown} more such notes")


@contextlib.contextmanager
def _cluster(workers, scheduler):
    """Feature extraction and visterm assignment as Dask tasks (pamir.distributed) inside
    the block, when asked for; else nothing changes."""
    if not workers and not scheduler:
        yield
        return
    with dask_client(workers, scheduler) as client, on_cluster(client, DASK_BATCH):
        yield


def print_fit_summary(system, output: Path, seconds: float, precision: list[str]) -> None:
    """The table of what `pamir fit` chose; `precision`: each CNN view's precision, and why."""
    info = system.info
    table = Table(title=f"{output}: {info['model']} on {info['data']}")
    table.add_column("")
    table.add_column("")
    table.add_row("vocabulary", f"{system.T:,} words")
    table.add_row("pictures", f"{info['pictures']['train']:,} train, "
                  f"{info['pictures']['valid']:,} validation")
    table.add_row("representation", info["representation"])
    if len(info.get("representations", [])) > 1:
        table.add_row("representations", "; ".join(
            f"{r['representation']} (weights {', '.join(map(str, r['weights']))}): "
            f"{r['valid_avgp']:.2f}" for r in info["representations"]))
    n_visterms = (info.get("representation_settings") or {}).get("n_visterms")
    if n_visterms:
        table.add_row("visterms", f"{n_visterms:,}")
    table.add_row("chosen", ", ".join(f"{k}={v}" for k, v in info["params"].items()))
    table.add_row("validation AvgP", f"{info['valid_avgp']:.2f} %")
    if len(info["grid"]) > 1:
        table.add_row("grid", "; ".join(
            f"{', '.join(f'{k}={v}' for k, v in g['params'].items())}: {g['valid_avgp']:.2f}"
            for g in info["grid"]))
    if info.get("ensemble"):
        table.add_row("ensemble", f"{len(info['ensemble'])} seeds averaged "
                      f"({', '.join(map(str, info['ensemble']))})")
    knn = info.get("neighbours")
    if knn:  # the label-transfer part mixed with the model (pamir.models.neighbours)
        table.add_row("neighbours", f"k {knn['k']}, temperature {knn['temperature']}, weight "
                      f"{knn['alpha']}: validation AvgP {knn['valid_avgp']:.2f} (the model alone "
                      f"{knn['model_valid_avgp']:.2f})" + ("" if knn["alpha"] else ": left out"))
    table.add_row("retrained on train+valid", "yes" if info["retrained"] else "no")
    for note in precision:
        table.add_row("precision", note)
    updates = info.get("updates")
    if updates:  # the update budget grows with the training pictures
        table.add_row("update budget", f"{updates['n_updates']:,} updates, validated every "
                      f"{updates['eval_every']:,} ({updates['train_pictures']:,} training "
                      "pictures)")
    refit = info.get("refit")
    if refit:  # a refit of the model that was there
        kept = (", ".join(f"{k}={v}" for k, v in refit["reused"]["params"].items())
                or "the default parameters")
        table.add_row("refit", f"kept {refit['reused']['representation']} and {kept}; "
                      f"PAMIR started from the model's weights ({len(refit['new_words'])} new "
                      f"words); {refit['development']['model']:,} -> "
                      f"{refit['development']['now']:,} captioned pictures (--reselect: the "
                      "full selection)")
    for skip in info.get("skipped") or []:
        table.add_row("skipped", skip["why"])
    budget = info.get("budget")
    if budget:
        cut = ([f"{budget['fits_stopped']} fits stopped early"] if budget["fits_stopped"] else []
               ) + [f"no {part}" for part in budget["skipped"]]
        table.add_row("time budget", f"{budget['seconds'] / 60:g} min: "
                      + ("reached (" + ", ".join(cut) + "): the best model found within it"
                         if budget["reached"] else "not reached"))
    if info.get("valid_queries"):
        v = info["valid_queries"]
        table.add_row("validation queries", f"{v['scored']:,} of {v['all']:,} scored"
                      + (f" (sample seeded {v['seed']})" if v["scored"] < v["all"] else ""))
    table.add_row("seconds", f"features and models {info['model_seconds']:.1f}, "
                  f"total {seconds:.1f}")
    Console().print(table)


# ---------------------------------------------------------------------------- evaluate
def evaluate_command(
    model: Path = typer.Argument(..., help="a trained system (from `pamir fit`)"),
    on: str = typer.Option("corel5k:test", "--on",
                           help="DATA:SPLIT, e.g. corel5k:test, corel5k:valid, table.tsv:test"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    run: Path = typer.Option(None, "--run", help="also write a TREC run file here"),
    qrels: Path = typer.Option(None, "--qrels", help="also write the TREC qrels here"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bars"),
):
    """AvgP, BEP and P10 of a trained system on a split's queries, overall and per subset
    (single/multi-word, easy/difficult, unseen: TPAMI Tables IX-XII)."""
    fitting = _jobs()
    data, split = parse_on(on)
    try:
        system, result = fitting.evaluate(model, data, split, scores=run is not None,
                                          progress=not quiet)
    except (DataError, ValueError, FileNotFoundError) as e:
        fail(str(e))
    fitting.write_trec(system, result, run, qrels)
    table = result["evaluation"].table([m for m, _ in METRICS])
    for row in table.values():  # an empty subset (no unseen queries on valid) has no mean
        row.update({m: None for m, _ in METRICS if row[m] != row[m]})
    if as_json:
        print(json.dumps({"model": str(model), "on": on, "subsets": table}, indent=2))
        return
    out = Table(title=f"{model} on {data} {split}: {len(result['qids']):,} queries, "
                f"{len(result['docids']):,} pictures")
    out.add_column("queries")
    out.add_column("n", justify="right")
    for _, label in METRICS:
        out.add_column(f"{label} %", justify="right")
    for subset, row in table.items():
        out.add_row(subset, f"{row['queries']:,}",
                    *("-" if row[m] is None else f"{row[m]:.2f}" for m, _ in METRICS))
    Console().print(out)
    if run is not None:
        console.print(f"run written to {run}")


# ------------------------------------------------------------------------------ models
def models_command(as_json: bool = typer.Option(False, "--json", help="print JSON")):
    """Every model kind: what it reads, its parameters with their defaults, and the
    validation grid `pamir fit` searches (fix a parameter with --param to drop it)."""
    # start-up: the models and their grids (numba, scipy: about 1 s), which `pamir fit
    # --help` must not wait for; not the rest of the training's jobs (pamir.jobs.fitting)
    from ..training.selection import models_description  # noqa: PLC0415

    described = models_description()
    if as_json:
        print(json.dumps(described, indent=2, default=list))
        return
    table = Table(title="pamir models: parameters (defaults) and validation grids")
    for column in ("model", "reads", "parameters", "validation grid"):
        table.add_column(column)
    for kind, d in described.items():
        grids = d["grid"] if isinstance(d["grid"], list) else [d["grid"]]
        table.add_row(kind, d["input"],
                      ", ".join(f"{k}={v}" for k, v in d["params"].items()),
                      "\n".join("; ".join(f"{k}: {v}" for k, v in g.items()) for g in grids)
                      + f"\n({d['points']} points)")
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.command("fit")(fit_command)
    app.command("evaluate")(evaluate_command)
    app.command("models")(models_command)


__all__ = ["parse_on", "parse_params", "register"]
