"""What `fit_system` is asked to do, in one record: `FitSettings`. Every phase reads it;
none changes it (a refit or a caller changes a copy, `dataclasses.replace`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields, replace
from typing import Callable

from ..protocol import Protocol

#: Where fitting reports its steps unless given `log` (quiet unless logging is configured;
#: the CLI passes its own printer).
logger = logging.getLogger("pamir.training")


@dataclass(frozen=True, eq=False)
class FitSettings:
    """fit_system's request (its docstring says what each field does). The first four
    fields keep the order of fit_system's old positional arguments, so that
    `FitSettings(*args, **kwargs)` reads an old call."""

    model: str = "pamir"
    feature_settings: object = None
    model_params: dict | None = None
    progress: bool = False
    representation: str | list | None = None
    retrain: bool = False
    grid: dict | list | None = None
    protocol: Protocol | None = None
    inputs: tuple | None = None
    seeds: object = None
    cnn_settings: object = None
    ensemble: int = 1
    cache_dir: object = None
    log: Callable | None = logger.info
    time_budget: float | None = None
    neighbours: bool | None = None  # None: config.NEIGHBOURS
    coef_init: object = None

    @classmethod
    def of(cls, settings: "FitSettings | None" = None, *args, **kwargs) -> "FitSettings":
        """The record of a fit_system call: `settings` with `kwargs` changed, or, without
        it, the old call's arguments (positional and keyword) as a record."""
        if settings is None:
            return cls(*args, **kwargs)
        if args:
            raise TypeError("fit_system: give the settings record or positional settings, "
                            "not both")
        unknown = sorted(set(kwargs) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError(f"fit_system: unknown setting {', '.join(unknown)}")
        return replace(settings, **kwargs)


__all__ = ["FitSettings", "logger"]
