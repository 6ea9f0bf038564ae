"""The representations `pamir fit` chooses among: which candidates a model is tried on
(DEFAULT_REPRESENTATIONS, the combinations' weights, the small-folder rule). Every picture's
features under one of them is read by `extraction.py` (the features phase of `fit_system`).
"""

from __future__ import annotations

from ..config import DEFAULT_REPRESENTATIONS
from ..features.registry import output_of, parse_name, takes
from ..models import model_class

# DEFAULT_REPRESENTATIONS (pamir.config): the representations `pamir fit` chooses among.
COMBINATION_WEIGHTS = (0.5, 1.0)
#: Combinations of three or more parts are tried at these weights only (each point costs a
#: PAMIR fit on 18,000 to 24,000 dimensions): on Corel 5k cnn+cnn-lite2+visterms gave
#: validation AvgP 45.42 at (1, 1, 1) against 45.24 with cnn-lite2 at 0.7, and other
#: weights move it by less than a seed does (benchmarks/results/cnn_plateau.md).
WIDE_COMBINATION_WEIGHTS = (1.0,)

#: A folder with fewer captioned pictures than this fits only the richest default
#: representation (the last of DEFAULT_REPRESENTATIONS the model reads), not every
#: candidate: on Corel 5k subsamples of 700 captioned pictures (5 seeds,
#: benchmarks/results/small_selection.md) it won the validation every time, each narrower
#: candidate scored below it on validation and on test, and choosing its c on validation
#: rather than keeping the default gained 0.15 test AvgP on average (sd over seeds 0.3-0.5).
#: At 1,500 (3 seeds of Corel's training pictures, benchmarks/results/folder_rule.md) the
#: one fit did as well on Corel's 500 validation pictures, which neither path saw: the race
#: chose the same point twice, and once a narrower one that did 0.77 worse; 27 s against
#: 81 s. At 2,000 and 4,000 the race chose the richest too (fit_memory.md, fit_speed.md).
#: The other candidates and the grid cannot pay there: one fit, the model's defaults.
SMALL_FOLDER_PICTURES = 2_000

def representation_candidates(model: str, names=None, model_params: dict | None = None
                              ) -> list[tuple[str, tuple]]:
    """(name, weights) pairs to try for a model: `names` (one name or several) or the
    defaults, kept to what the model reads."""
    model_input = model_class(model)(**(model_params or {})).input
    asked = [names] if isinstance(names, str) else list(names or ())
    pool = asked or ([r for r in DEFAULT_REPRESENTATIONS] if model_input != "blocks"
                     else ["blocks"])
    out = []
    for name in pool:
        parts = parse_name(name)
        if not takes(model_input, name):
            if asked:
                raise ValueError(f"{model} reads {model_input}, and the {name} representation "
                                 f"gives {output_of(name)}; choose another representation")
            continue
        if len(parts) == 1:
            out.append((name, (1.0,)))
        else:
            weights = COMBINATION_WEIGHTS if len(parts) == 2 else WIDE_COMBINATION_WEIGHTS
            out += [(name, (1.0,) + (w,) * (len(parts) - 1)) for w in weights]
    return out


def small_folder_candidates(candidates, representation, inputs, protocol) -> dict | None:
    """What a small folder leaves out of the default candidates (SMALL_FOLDER_PICTURES):
    {"what", "why"}, or None when every candidate runs (representations named by the
    caller, features given, or enough captioned pictures)."""
    n = len(protocol.development)
    if representation is not None or inputs is not None or len(candidates) < 2 \
            or n >= SMALL_FOLDER_PICTURES:
        return None
    return {"what": [name for name, _ in candidates[:-1]],
            "why": f"{n:,} captioned pictures (under {SMALL_FOLDER_PICTURES:,}): the richest "
                   "representation does as well there (Corel 5k subsamples of 700 and "
                   f"1,500), so the {len(candidates) - 1} narrower candidates are skipped"}


__all__ = ["COMBINATION_WEIGHTS", "DEFAULT_REPRESENTATIONS", "SMALL_FOLDER_PICTURES",
           "WIDE_COMBINATION_WEIGHTS", "representation_candidates", "small_folder_candidates"]
