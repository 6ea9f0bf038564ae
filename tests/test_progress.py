"""pamir.progress: bars in a terminal; outside one, one line per step and no empty line."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

import pamir.progress as progress
from pamir.progress import Bar


@pytest.fixture
def log_file(monkeypatch):
    monkeypatch.setattr(progress, "QUIET_UNDER_S", 0.0)
    out = io.StringIO()
    return out, Console(file=out, force_terminal=False, width=100)


def test_outside_a_terminal_each_step_writes_one_line(log_file):
    out, console = log_file
    for label in ("blocks", "cnn lite0"):
        with Bar(label, 300, unit="pictures", rate=True, console=console) as bar:
            for done in (*range(0, 300, 64), 300):
                bar.update(completed=done)
            bar.note(f"skipped broken.jpg: not a picture ({label})")
    with Bar("pamir c=1", unit="updates", console=console) as bar:
        bar.update(completed=3_000, total=6_000, description="pamir c=1  valid AvgP 45.09")
    lines = out.getvalue().splitlines()
    assert "" not in lines  # rich's transient bars leave an empty line each outside a terminal
    assert lines[1].startswith("blocks: 300 pictures in ") and lines[1].endswith("pictures/s)")
    assert lines[3].startswith("cnn lite0: 300 pictures in ")
    assert lines[4].startswith("pamir c=1  valid AvgP 45.09: 3,000/6,000 updates in ")
    assert len(lines) == 5


def test_silent_when_disabled_or_quick(monkeypatch):
    out = io.StringIO()
    console = Console(file=out, force_terminal=False)
    with Bar("blocks", 10, enabled=False, console=console) as bar:
        bar.update(completed=10)
    with Bar("cached", 10, console=console) as bar:  # under QUIET_UNDER_S: no line
        bar.update(completed=10)
    assert out.getvalue() == ""


def test_a_terminal_draws_a_bar_and_leaves_no_line():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    with Bar("indexing", 4, unit="pictures", console=console) as bar:
        assert bar.live
        bar.update(completed=4)
    assert "indexing" in out.getvalue() and "4/4" in out.getvalue()
    assert "pictures in" not in out.getvalue()  # the summary line is for logs only


def test_a_slow_step_says_its_rate_with_a_decimal(log_file, monkeypatch):
    out, console = log_file
    now = [0.0]
    monkeypatch.setattr("pamir.progress.time.perf_counter", lambda: now[0])
    with Bar("indexing", 7, unit="pictures", rate=True, console=console) as bar:
        bar.update(completed=7)
        now[0] = 70.0
    assert out.getvalue().splitlines()[-1].endswith("(0.1 pictures/s)")
