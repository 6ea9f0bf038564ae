"""`pamir features`: extract and cache the picture features of a collection."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from .. import config
from ..data import DataError
from ..facts.collection import load_collection
from ..features.registry import EXTRACTABLE, REPRESENTATIONS as TABLE, make_representation
from ..features.settings import JOBS, FeatureSettings

app = typer.Typer(help="Visual features: blocks, LBP and colour histograms, visterms, CNN.",
                  no_args_is_help=True)
console = Console(stderr=True)

#: What `extract --representation` can extract and cache (the registry's table says).
REPRESENTATIONS = EXTRACTABLE


@app.callback()
def _features():
    """Visual features: blocks, LBP and colour histograms, visterms, CNN."""


@app.command("extract")
def extract(
    data: str = typer.Argument(..., help="corel5k, or a captions table (.tsv/.csv/.jsonl)"),
    representation: str = typer.Option(
        "visterms", "--representation", "-r",
        help="visterms: block descriptors (LBP + colour histograms) the visterms are made "
             "of; " + "; ".join(f"{n}: {TABLE[n].about}" for n in EXTRACTABLE if n != "visterms")),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1,
                                        help="only the first N pictures"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
    jobs: int = typer.Option(JOBS, "--jobs", "-j", min=1, help="worker threads"),
    cache_dir: Path = typer.Option(None, help="feature cache [default: config.default_cache_dir()]"),
    no_cache: bool = typer.Option(False, "--no-cache", help="extract everything, store nothing"),
):
    """Extract and cache the features of every picture.

    visterms: block descriptors (uniform LBP + colour histograms); the colour codebook is
    learnt on the training pictures first (cached). cnn: each picture's pooled
    EfficientNet-Lite vector. Pictures already in the cache are not extracted again;
    unreadable pictures are skipped, one line each.
    """
    if representation not in REPRESENTATIONS:
        console.print(f"[red]error:[/red] --representation {representation!r}: use one of "
                      f"{', '.join(REPRESENTATIONS)}", highlight=False)
        raise typer.Exit(2)
    cache_dir = None if no_cache else (cache_dir or config.default_cache_dir())
    try:
        collection = load_collection(data)
    except DataError as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        raise typer.Exit(2)
    paths = collection.paths[:limit] if limit else collection.paths
    if representation.startswith("cnn"):
        summary = _extract_cnn(paths, representation, jobs, cache_dir, as_json)
    else:
        summary = _extract_blocks(collection, paths, jobs, cache_dir, as_json)
    summary = {"data": data, "representation": representation, **summary}
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{data}: {len(paths):,} pictures, {summary['done']:,} done "
              f"({summary['extracted']:,} extracted, {summary['cached']:,} from the cache), "
              f"{summary['skipped']:,} skipped, {summary['failed']:,} failed; "
              f"{summary['pictures_per_second'] or 0:,.0f} pictures/s "
              f"({summary['seconds']:.1f} s)")
    if summary["done"] == 0 and len(paths):
        raise typer.Exit(1)


def _extract_cnn(paths, name: str, jobs: int, cache_dir, as_json: bool) -> dict:

    from ..features.cnn import CNNSettings  # torch, onnxruntime: on demand

    rep = make_representation(name, cnn_settings=CNNSettings(n_jobs=jobs), cache_dir=cache_dir,
                              progress=not as_json)
    rep.pooled(paths)  # the pooled vectors are what is cached; standardising needs a fit
    settings = rep.settings  # after the run: int8 that could not run here is fp32 (cnn_int8)
    stats = rep.stats_  # engine: None when every picture came from the cache
    return {**{k: stats[k] for k in ("pictures", "done", "extracted", "cached", "skipped",
                                     "failed", "seconds", "pictures_per_second", "engine",
                                     "engine_seconds")},
            "dim": rep.dim,
            "cache_dir": str(cache_dir) if cache_dir else None, "settings": settings.to_dict()}


def _extract_blocks(collection, paths, jobs: int, cache_dir, as_json: bool) -> dict:
    # start-up: the blocks' code is numba's (0.4 s to import), which the other
    # representations' extraction does not need
    from ..features import iter_blocks  # noqa: PLC0415
    from ..features.collection import colour_codebook_for, training_pictures  # noqa: PLC0415

    settings = FeatureSettings()
    t0 = time.perf_counter()
    codebook = colour_codebook_for(collection, training_pictures(collection), settings,
                                   cache_dir=cache_dir)
    codebook.lut  # built (or read from the cache) before timing the blocks
    colour_seconds = time.perf_counter() - t0

    counts = dict.fromkeys(("extracted", "cached", "skipped", "failed", "blocks"), 0)
    t0 = time.perf_counter()
    for part in iter_blocks(paths, settings, codebook, cache_dir=cache_dir, n_jobs=jobs,
                            progress=not as_json):
        for k, v in part.summary().items():
            if k in counts:
                counts[k] += v
    seconds = time.perf_counter() - t0
    return {
        "pictures": len(paths), "done": counts["extracted"] + counts["cached"],
        **counts, "seconds": round(seconds, 2),
        "pictures_per_second": round(len(paths) / seconds, 1) if seconds else None,
        "colour_codebook_seconds": round(colour_seconds, 2),
        "cache_dir": str(cache_dir) if cache_dir else None, "settings": settings.to_dict(),
    }
