"""The int8 studies' shared parts (bench_int8_fidelity.py, bench_int8_options.py): the issue's
200 Corel pictures prepared for a view, and a graph run over them one picture a call."""

from __future__ import annotations

import time

import numpy as np
from pamir.data import load_corel5k
from pamir.features.cnn import prepare_picture
from pamir.features.images import read_bytes
from pamir.runtime import cpu_session

#: Every 25th of the sorted Corel paths: the issue's 200 pictures.
COREL_EVERY = 25
SIDES = {"lite0": 224, "lite1": 240, "lite2": 260}


def corel_pictures(side: int, every: int) -> list[np.ndarray]:
    paths = sorted(str(p) for p in load_corel5k().paths)[::COREL_EVERY]
    return [prepare_picture(read_bytes(p), side) for p in paths[::every]]


def run_all(graph, pictures: list[np.ndarray]) -> tuple[np.ndarray, float]:
    """(pooled vectors, ms a picture) of a graph on pictures, one thread, one a call."""
    session = cpu_session(graph, threads=1)
    start = time.perf_counter()
    P = np.concatenate([session.run(None, {"pixels": p[None]})[0] for p in pictures])
    return P, 1000 * (time.perf_counter() - start) / max(1, len(pictures))
