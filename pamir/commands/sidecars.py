"""What `pamir annotate --xmp` and `pamir index --write-xmp` share: the sidecar setting
checked and the report printed (the writing is pamir.jobs.sidecars')."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape

from .common import console, fail

#: How many sidecars left alone are listed before the count.
MAX_LISTED = 20


def check_sidecar_name(setting: str | None) -> None:
    """The command fails at once, saying the choices, where the sidecar setting (or
    $PAMIR_XMP_PROBABILITY) is none of them."""
    # start-up: the XMP reading (defusedxml, 40 ms); `pamir search` imports this module
    # (through commands.index) and writes no sidecar
    from ..jobs.sidecars import sidecar_name, word_probability  # noqa: PLC0415

    try:
        sidecar_name(setting)
        word_probability()
    except ValueError as e:
        fail(str(e))


def write_index_sidecars(index_dir: Path, folders: list[Path]):
    """pamir.jobs.sidecars.write_index_sidecars, a wrong setting said."""
    # start-up: as check_sidecar_name
    from ..jobs.sidecars import write_index_sidecars as write  # noqa: PLC0415

    check_sidecar_name(None)
    return write(index_dir, folders)


def print_sidecars_report(report) -> None:
    """What `pamir index --write-xmp` wrote (pamir.jobs.sidecars.SidecarReport)."""
    for target, why in report.left_alone[:MAX_LISTED]:
        console.print(f"[yellow]XMP sidecar {escape(target)}:[/yellow] {escape(why)}",
                      markup=True)
    console.print(f"XMP sidecars: {len(report.written):,} written, {report.unchanged:,} "
                  f"already up to date, {len(report.left_alone)} left alone")
