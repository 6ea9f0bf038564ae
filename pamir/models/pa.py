"""The Passive-Aggressive core both PAMIRs share (TPAMI 2008 §III-D, Crammer et al. 2006).

Linear PAMIR (pamir.py: W as a T x V matrix) and kernel PAMIR (kernel_pamir.py: W as support
sets, alpha over training pictures) differ only in how a score and a step are computed. What
they share lives here, under one vocabulary of names:

- `pa1_tau`: the PA-I step size tau = min(c, loss / ||v||^2) of eq. (10);
- `train_pa`: the training loop: `n_updates` triplets drawn in chunks of `eval_every`, the
  validation mean AvgP measured after each chunk, the best weights kept, and training stopped
  after `patience` evaluations without a better one (None: run every update). Progress goes
  through `callback(updates_done, n_updates, valid_avgp or None)`.

What a trained PA model reports, in both kinds: n_updates_ (drawn), best_update_ (where the
kept weights were), best_valid_avgp_ (None without validation data), history_ (rows of
[updates, valid AvgP or None, active fraction, mean loss, seconds]) and refit_params_.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def pa1_tau(loss, sq_norm, c):
    """The PA-I step: the smallest move that fixes the loss, capped by the aggressiveness."""
    return min(c, loss / sq_norm)


@dataclass
class PARun:
    """What train_pa returns: the kept weights and how training went."""

    best: np.ndarray
    best_update: int
    best_valid_avgp: float | None
    n_updates: int
    history: list = field(default_factory=list)
    seconds: float = 0.0  # in the update steps only, validation excluded
    cpu_seconds: float = 0.0
    # at the checkpoints: the weights ranked with and their validation AvgP (a
    # fit's validation is bounded, config.VALID_MAX_QUERIES; this says what it cost)
    valid_seconds: float = 0.0
    active: int = 0
    out_of_time: bool = False  # stopped by the time budget (`deadline`)


#: When every PA training in this process stops (time.monotonic()), None: never. Set by
#: `deadline`, for `pamir fit --time-budget`; one value for all the fit threads.
_DEADLINE: float | None = None


@contextmanager
def deadline(seconds: float | None):
    """Within the block, a PA training stops at its next evaluation once `seconds` have
    passed, keeping the best weights so far (its run says out_of_time). None: no limit."""
    global _DEADLINE
    before = _DEADLINE
    _DEADLINE = None if seconds is None else time.monotonic() + float(seconds)
    try:
        yield
    finally:
        _DEADLINE = before


def out_of_time() -> bool:
    """Whether the time budget of the enclosing `deadline` is spent."""
    return _DEADLINE is not None and time.monotonic() > _DEADLINE


def train_pa(steps: Callable[[int, int], tuple[int, float]], current: Callable[[int], np.ndarray],
             score: Callable[[np.ndarray], float] | None, *, n_updates: int, eval_every: int,
             patience: int | None, callback=None, keep=None) -> PARun:
    """Run PA updates with early stopping on validation.

    steps(done, k): apply k more updates (the first is update done + 1); returns (updates
        with a positive loss, their summed loss).
    current(done): the weights to rank with after `done` updates (a fresh array).
    score(weights): validation mean AvgP of those weights; None: no validation data, so
        every update runs and the last weights are kept.
    keep(weights): the form the best weights are held in until the end (None: as `current`
        gave them); PAMIR keeps float32, what it stores, instead of the float64 it scores.
    """
    keep = keep or (lambda weights: weights)
    total, done = int(n_updates), 0
    run = PARun(best=None, best_update=0, best_valid_avgp=None, n_updates=0)
    chunk = int(eval_every) if score is not None else max(total // 20, 1)
    best, waited = -np.inf, 0
    while done < total:
        k = min(chunk, total - done)
        t0, c0 = time.perf_counter(), time.process_time()
        active, loss = steps(done, k)
        run.seconds += time.perf_counter() - t0
        run.cpu_seconds += time.process_time() - c0
        done += k
        run.active += active
        avgp = None
        if score is not None:
            t0 = time.perf_counter()
            weights = current(done)
            avgp = float(score(weights))
            run.valid_seconds += time.perf_counter() - t0
            if avgp > best:
                best, waited = avgp, 0
                run.best, run.best_update = keep(weights), done
            else:
                waited += 1
        run.history.append([done, None if avgp is None else round(avgp, 6),
                            round(active / k, 4), round(loss / k, 6), round(run.seconds, 3)])
        if callback is not None:
            callback(done, total, avgp)
        if patience is not None and waited >= int(patience):
            break
        if out_of_time():
            run.out_of_time = done < total
            break
    if run.best is None:
        run.best, run.best_update = keep(current(done)), done
    run.n_updates = done
    run.best_valid_avgp = best if score is not None and best > -np.inf else None
    return run


def check_pa_params(name: str, c, n_updates, eval_every, patience) -> None:
    """The parameters both PAMIRs share, checked the same way."""
    if not (isinstance(c, (int, float)) and c > 0):
        raise ValueError(f"{name}: c (aggressiveness) must be > 0, got {c!r}")
    if int(n_updates) < 0 or int(eval_every) <= 0:
        raise ValueError(f"{name}: n_updates must be >= 0 and eval_every > 0, got "
                         f"{n_updates!r} and {eval_every!r}")
    if patience is not None and int(patience) < 1:
        raise ValueError(f"{name}: patience must be >= 1 or None, got {patience!r}")


__all__ = ["PARun", "check_pa_params", "deadline", "out_of_time", "pa1_tau", "train_pa"]
