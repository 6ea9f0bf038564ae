"""Progress of long steps (features, fits, indexing), in one place.

In a terminal a step draws a transient rich bar (label, bar, done/total, rate, elapsed,
remaining) that is gone when the step ends. Outside one (a log file, CI, a pipe) a bar would
draw nothing but leave an empty line behind each time it stops, so a step writes instead one
informative line when it ends: "blocks: 4,000 pictures in 35.2 s (114 pictures/s)".

    with Bar("blocks", total=len(paths), enabled=progress, unit="pictures") as bar:
        for ...:
            bar.update(completed=done)
        bar.note("skipped broken.jpg: not a picture")   # above the bar, or a line of its own

A whole `pamir fit` has one `FitDisplay` (its phase, a bar per running fit, the phase's
ETA), which each fit's `progress_callback` joins.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

#: Outside a terminal a bar's line is written only for a step that lasted at least this long
#: (seconds): a cached extraction or a short fit would otherwise add a line of noise each.
QUIET_UNDER_S = 1.0


def stderr_console() -> Console:
    """The console progress is drawn on: standard error, so standard output stays the
    command's result (JSON, paths)."""
    return Console(stderr=True)


def in_terminal(console: Console | None = None) -> bool:
    """Whether bars can be drawn (a terminal), else a step writes one line."""
    return (console or stderr_console()).is_terminal


def rich_bar(console: Console, *, label: str = "{task.description}", rate_unit: str = ""
             ) -> Progress:
    """The one look of a bar, for a terminal: label, bar, done/total, [rate], elapsed and
    remaining time; transient. rate_unit: a rate column fed by the task's `rate` field."""
    rate = [TextColumn("{task.fields[rate]} " + rate_unit + "/s")] if rate_unit else []
    return Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), *rate,
                    TimeElapsedColumn(), TimeRemainingColumn(), console=console,
                    transient=True)


def report(line: str, console: Console | None, log) -> None:
    """A line about one item (an unreadable picture): on the console where progress is
    shown, else a warning to the module's logger `log`."""
    if console is not None:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    else:
        log.warning(line)


class Bar:
    """A step's progress (see the module's doc). enabled False: silent. unit: what is
    counted ("pictures"); rate: show pictures/s in the terminal bar. say: where the line
    outside a terminal goes (default: the console)."""

    def __init__(self, label: str, total: int | None = None, *, enabled: bool = True,
                 unit: str = "", rate: bool = False, console: Console | None = None,
                 say: Callable[[str], None] | None = None):
        self.label, self.total, self.unit, self.enabled = label, total, unit, enabled
        self.console = console or stderr_console()
        self.live = enabled and self.console.is_terminal
        self.say = say or (lambda line: self.console.print(line, highlight=False, markup=False,
                                                           soft_wrap=True))
        self.done, self.description, self.start = 0, label, time.perf_counter()
        self.rate = rate
        self.bar = (rich_bar(self.console, rate_unit=unit if rate else "") if self.live
                    else None)
        self.task = None

    def __enter__(self) -> "Bar":
        self.start = time.perf_counter()
        if self.bar is not None:
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=self.total, rate="-")
        return self

    def update(self, *, completed: int | None = None, advance: int = 0,
               total: int | None = None, description: str | None = None) -> None:
        self.done = completed if completed is not None else self.done + advance
        self.total = total if total is not None else self.total
        self.description = description or self.description
        if self.bar is not None:
            fields = {"rate": f"{self.done / max(self.elapsed(), 1e-9):,.0f}"} if self.rate else {}
            self.bar.update(self.task, completed=self.done, total=self.total,
                            description=self.description, **fields)

    def note(self, line: str) -> None:
        """A line for the person (an unreadable picture): above the bar in a terminal."""
        report(line, self.console, None)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def summary(self) -> str:
        """"blocks: 4,000 pictures in 35.2 s (114 pictures/s)"."""
        seconds = self.elapsed()
        of = f"/{self.total:,}" if self.total and self.total != self.done else ""
        unit = f" {self.unit}" if self.unit else ""
        per_s = self.done / seconds if seconds > 0 else 0.0
        # under 10 a second, a decimal: a few 12-MP photos read at 0.1/s, not "0 pictures/s"
        rate = (f" ({per_s:,.{0 if per_s >= 10 else 1}f}{unit}/s)"
                if self.unit and self.done and seconds > 0 else "")
        return f"{self.description}: {self.done:,}{of}{unit} in {seconds:.1f} s{rate}"

    def stop(self) -> None:
        """End the bar now (before printing a message that must stay on screen)."""
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def __exit__(self, exc_type, *exc) -> None:
        self.stop()
        if (self.enabled and not self.live and exc_type is None and self.done
                and self.elapsed() >= QUIET_UNDER_S):
            self.say(self.summary())


# ------------------------------------------------------------------ a fit's phases
class FitDisplay:
    """One progress display for a whole `pamir fit`: the phase, a bar per running fit, and
    the ETA of the phase (from the fits finished so far and the threads). In a terminal it
    is a live rich display; elsewhere (a log, a pipe) the log lines carry the same: each
    phase's start and each finished point with `[fits k/n, ETA]`.

        with FitDisplay(progress, log) as display:
            display.phase("selection", fits=18, workers=2)
            ...   # progress_callback bars join this display
    """

    _active: "FitDisplay | None" = None

    def __init__(self, enabled: bool, log=print):
        console = stderr_console()
        self.live = enabled and in_terminal(console)
        self.bar = rich_bar(console) if self.live else None
        self.say = log or (lambda *a: None)
        self.lock = threading.Lock()
        self.task = None
        self.total = self.done = 0
        self.workers = 1
        self.started = time.perf_counter()

    def __enter__(self) -> "FitDisplay":
        FitDisplay._active = self
        return self

    def __exit__(self, *exc) -> None:
        FitDisplay._active = None
        if self.bar is not None and self.bar.live.is_started:
            self.bar.stop()

    def phase(self, name: str, fits: int, workers: int = 1) -> None:
        with self.lock:
            self.total, self.done, self.workers = int(fits), 0, int(workers)
            self.started = time.perf_counter()
            if self.bar is not None:
                # started at the first phase, not before: feature extraction draws its own
                # bars first, and a terminal holds one live display at a time
                if not self.bar.live.is_started:
                    self.bar.start()
                if self.task is not None:
                    self.bar.remove_task(self.task)
                self.task = self.bar.add_task(f"[bold]{name}", total=fits)
        self.say(f"{name}: {fits} fit{'s' * (fits != 1)} on {workers} thread"
                 f"{'s' * (workers != 1)}")

    def finished_fit(self) -> None:
        with self.lock:
            self.done += 1
            if self.bar is not None and self.task is not None:
                self.bar.update(self.task, completed=self.done)

    def eta(self) -> float | None:
        """Seconds left in the phase, from the fits finished so far (None before the first)."""
        if self.done == 0:
            return None
        return (time.perf_counter() - self.started) / self.done * (self.total - self.done)

    @classmethod
    def eta_text(cls) -> str:
        d = cls._active
        if d is None or d.total == 0:
            return ""
        eta = d.eta()
        return f" [fits {d.done}/{d.total}" + ("" if eta is None else f", ETA {eta:.0f} s") + "]"


@contextmanager
def progress_callback(label: str, enabled: bool):
    """A callback(done, total, valid_avgp) drawing a progress bar (None if not enabled): a
    bar of the active FitDisplay when there is one (several fits may run at once), else a
    transient bar of its own. A fit that ends counts towards the display's phase."""
    display = FitDisplay._active
    if display is not None:
        task = display.bar.add_task(label, total=None) if (enabled and display.bar) else None

        def update(done, total, score):
            extra = f"  valid AvgP {100 * score:.2f}" if score is not None else ""
            display.bar.update(task, total=total, completed=done, description=f"{label}{extra}")

        try:
            yield update if task is not None else None
        finally:
            if task is not None:
                display.bar.remove_task(task)
            display.finished_fit()
        return
    if not enabled:
        yield None
        return
    with Bar(label, unit="updates") as bar:

        def update(done, total, score):
            extra = f"  valid AvgP {100 * score:.2f}" if score is not None else ""
            bar.update(total=total, completed=done, description=f"{label}{extra}")

        yield update


# ------------------------------------------------------------- the passes of an index
class PassBars:
    """The passes of `pamir index` at once (they run side by side: the text and faces
    passes read behind the look): a bar each in a terminal; elsewhere one line per pass
    when the job ends ("reading text: 4,210 pictures in 310.2 s (14 pictures/s)").

        with PassBars(console, labels) as bars:
            run_index(job, progress=bars.update)    # update(name, done, total)

    labels: {name: label} as the bars and lines name each pass (pamir.jobs.fact_passes'
    progress_labels; a pass not named is called by its name).
    """

    def __init__(self, console: Console | None = None, labels: dict[str, str] | None = None):
        self.console = console or stderr_console()
        self.labels = dict(labels or {})
        self.bars: dict[str, Bar] = {}
        self.live = rich_bar(self.console, rate_unit="pictures") if self.console.is_terminal \
            else None
        self.tasks: dict[str, int] = {}
        self.lock = threading.Lock()

    def __enter__(self) -> "PassBars":
        if self.live is not None:
            self.live.start()
        return self

    def update(self, name: str, done: int, total: int) -> None:
        with self.lock:
            bar = self.bars.get(name)
            if bar is None:
                bar = self.bars[name] = Bar(self.labels.get(name, name), total,
                                            unit="pictures", console=self.console,
                                            enabled=False)
            bar.done, bar.total = done, total
            if self.live is not None:
                if name not in self.tasks:
                    self.tasks[name] = self.live.add_task(bar.label, total=total, rate="-")
                rate = f"{done / max(bar.elapsed(), 1e-9):,.0f}"
                self.live.update(self.tasks[name], completed=done, total=total, rate=rate)

    def stop(self) -> None:
        """End the bars now (before a message that must stay on screen)."""
        if self.live is not None:
            self.live.stop()
            self.live = None

    def __exit__(self, exc_type, *exc) -> None:
        was_live = self.live is not None
        self.stop()
        if exc_type is None and not was_live:
            for bar in self.bars.values():
                if bar.done and bar.elapsed() >= QUIET_UNDER_S:
                    self.console.print(bar.summary(), highlight=False, markup=False,
                                       soft_wrap=True)


__all__ = ["Bar", "FitDisplay", "PassBars", "QUIET_UNDER_S", "in_terminal",
           "progress_callback", "report", "rich_bar", "stderr_console"]
