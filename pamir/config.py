"""The protocol's rules and seeds, in one place: the numbers every result depends on.

Model hyper-parameters live with their models (literal defaults in each `__init__`, the
validation grid in `param_grid`: `pamir models` lists them), feature settings in
pamir.features.settings.FeatureSettings. Where the defaults came from, and what was measured
to choose them, is in benchmarks/results/ (defaults.md indexes it).
"""

from __future__ import annotations

import os
from pathlib import Path

#: The seed of every random choice that is not given one explicitly.
SEED = 0

#: The development set is split into train and validation pictures, seeded by SEED.
VALID_SIZE = 500

#: Corel 5k vocabulary rule: words of the development set that occur in at least this many
#: test pictures (Grangier & Bengio, Jeon et al.: 179 words).
COREL_MIN_TEST_PICTURES = 2

#: Vocabulary rule for a user's own collection: words in at least this many training pictures.
MIN_WORD_PICTURES = 2

#: Queries are subsets of a caption's words; this caps their size (None: every subset).
MAX_QUERY_WORDS: int | None = None

#: The most validation queries a fit scores: a seeded sample (VALID_QUERY_SEED)
#: beyond. Every subset of a caption is a query, so long captions make hundreds of thousands
#: (272,585 for 129 pictures captioned with 5-15 words), and early stopping scores them all
#: every `eval_every` updates. Corel 5k's 2,028 are all kept; what a smaller sample costs in
#: selection accuracy is measured in benchmarks/results/fit_speed.md.
VALID_MAX_QUERIES: int | None = 4000
VALID_QUERY_SEED = 0

#: Fits `pamir fit` runs at once (grid points, candidates, seeds, retraining), threads of one
#: process: PAMIR's update loop releases the GIL. None: one per core.
FIT_WORKERS: int | None = None

#: Racing the grid (successive halving, pamir.training.race.Race): at these fractions of a fit's
#: n_updates, the fits still in the race are ranked by their best validation AvgP so far and
#: the better half goes on; the last RACE_FINALISTS always run to their end. On Corel 5k's
#: 18 fits the final winner led at 300,000 updates and every rung kept it (the stored
#: curves, benchmarks/results/fit_speed.md), for a quarter of the updates. False: the full
#: loop, every point to its end.
RACE: bool = True
RACE_RUNGS = (1 / 16, 1 / 8, 1 / 4, 1 / 2)
RACE_FINALISTS = 2

#: Selection on a small collection: with fewer validation pictures than this, the
#: default point (pamir.training.race.default_point) is kept unless another beats it on the
#: validation queries in a one-sided paired Wilcoxon test at GUARD_ALPHA
#: (pamir.training.race.guarded_choice). Off (0): measured on Corel 5k subsamples of 700
#: pictures (70 validation, 5 seeds), the plain best mean already lands within 0.12 test AvgP
#: of the test-best point, and the guard did not beat it (-0.16: 0 seeds better, 2 worse;
#: benchmarks/results/small_selection.md). A small split inflates validation AvgP (70
#: pictures to rank instead of 500: 60 against 32 on test) without reordering the points.
SMALL_VALIDATION = 0
GUARD_ALPHA = 0.05

#: Queries with at least this many relevant pictures are "easy", the others "difficult"
#: (TPAMI Table X).
EASY_MIN_RELEVANT = 3

#: Cut-offs reported by the evaluation.
P_AT = (5, 10, 20)

#: Words per picture in the annotation evaluation (Jeon et al., Duygulu et al.).
ANNOTATION_WORDS = 5

#: How tied scores are ranked: "pessimistic" puts non-relevant pictures first among equals,
#: "random" shuffles them with SEED.
TIES = "pessimistic"


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def default_cache_dir() -> Path:
    """Where features and codebooks are cached (PAMIR_CACHE overrides): .cache/ of a source
    checkout, else the user's cache folder (an installed package must not write into
    site-packages)."""
    if "PAMIR_CACHE" in os.environ:
        return Path(os.environ["PAMIR_CACHE"])
    if (repo_root() / "pyproject.toml").is_file():
        return repo_root() / ".cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pamir"


def default_index_dir() -> Path:
    """Where an index is when no --index names one: $PAMIR_INDEX, else
    $XDG_DATA_HOME/pamir/index (~/.local/share/pamir/index)."""
    if os.environ.get("PAMIR_INDEX"):
        return Path(os.environ["PAMIR_INDEX"])
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "pamir" / "index"


def corel5k_candidates() -> list[Path]:
    """Where the Corel 5k folder is looked for, first match wins (PAMIR_COREL5K overrides)."""
    found = []
    if "PAMIR_COREL5K" in os.environ:
        found.append(Path(os.environ["PAMIR_COREL5K"]))
    found += [
        Path.cwd() / "../shared/data/corel5k",
        repo_root() / "../shared/data/corel5k",
    ]
    return found

#: The representations `pamir fit` chooses among on validation when none is named, in order
#: (the first wins a tie); those the model cannot read are left out. A combination's second
#: part is tried at each of pamir.training.COMBINATION_WEIGHTS. (Kept here, not in
#: pamir.training, so that `pamir fit --help` shows them without importing the models.)
DEFAULT_REPRESENTATIONS = ("visterms", "cnn", "cnn+visterms", "cnn+cnn-lite2+visterms",
                           "cnn+cnn-lite1+cnn-lite2+visterms")

# ------------------------------------------------------------------------------- CNN views
#: The precision the CNN views run at unless their settings say otherwise
#: (pamir.features.cnn.CNNSettings.precision): "int8", the networks quantized once per
#: machine (pamir.features.cnn_int8), or "fp32", the exported networks as they are. The
#: environment's PAMIR_CNN_PRECISION overrides it for every command. Saved models keep the
#: precision they were fitted with. int8 because validation on Corel 5k shows no loss beyond
#: noise (two seeds each; two fp32 seeds alone differ by 1.6 test AvgP): `pamir fit` on cnn
#: validation AvgP 47.85 fp32 / 48.20 int8, on cnn+cnn-lite1+cnn-lite2 51.7 / 52.1 (seed 0),
#: zero captions single-word 23.01 / 23.05; and it is faster: `pamir index` of 1,000 bare
#: pictures 41 -> 71 pictures/s, the views 1.9-2.4x (benchmarks/results/int8.md).
CNN_PRECISION = os.environ.get("PAMIR_CNN_PRECISION", "int8")

# ------------------------------------------------------------------------------- prior
#: A system with an ImageNet CNN view mixes each of its words' scores with the
#: zero-caption system's score of the word (pamir.zeroshot.prior), the weights chosen on validation.
#: False: the model alone, as before.
PRIOR = True

# ------------------------------------------------------------------------------- neighbours
#: A PAMIR system on a representation with CNN views mixes its scores with a
#: label-transfer vote of the nearest captioned pictures (pamir.models.neighbours). False:
#: PAMIR alone, as before.
NEIGHBOURS = True
#: What `pamir fit` tries on validation, after PAMIR is trained (PAMIR is fitted once; each
#: point costs a vote and an AvgP on the validation pictures): neighbours asked, softmax
#: temperature over their cosines, and the weight of the vote in the mix (0: PAMIR alone).
#: The grid and why are in benchmarks/results/knn.md.
NEIGHBOUR_K = (20, 40, 80, 160, 320)
NEIGHBOUR_TEMPERATURE = (0.03, 0.05, 0.1, 0.2)
NEIGHBOUR_ALPHA = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: Added to a vote before its logarithm: a word no neighbour carries scores log(floor).
NEIGHBOUR_FLOOR = 1e-3
#: Only the global average of each CNN view is kept for the neighbours (not its 2x2 region
#: cells): a model file 3.7x smaller and a search as much faster (knn.md measures the cost).
NEIGHBOUR_GLOBAL_VIEWS = True
#: The views are compared on this many principal axes of the training pictures' (None: all
#: of them): the stored vectors and the search shrink by as much (knn.md).
NEIGHBOUR_DIMS: int | None = 256
