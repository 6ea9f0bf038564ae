"""The numbers that matter, in one place: seeds, splits, protocol rules and model grids.

Every script and command reads its defaults from here and prints the values it used, so a
result can be traced back to the settings that produced it.
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


# ------------------------------------------------------------------------------- FEATURES
# Visual features (pamir/features): blocks, uniform LBP + colour histograms, visterms.

#: Pictures are resized so their shorter side has this many pixels before the blocks are cut
#: (None: native size). Corel 5k is 192x128 already; the same scale everywhere keeps LBP
#: texture and block histogram counts comparable across a user's mixed-size photos.
FEATURE_SHORT_SIDE: int | None = 128

#: Block side as a fraction of the (resized) picture's shorter side, step = half a block:
#: 128 px -> 32-px blocks every 16 px -> 77 blocks on 192x128 (the papers' 64/32 on 384x256).
FEATURE_BLOCK_FRACTION = 0.25

#: Colours of the colour codebook (TPAMI §V-B: 50).
N_COLOURS = 50

#: Uniform LBP: P neighbours on a circle of radius R (LBP_{8,2}; nri_uniform gives 59 bins).
LBP_POINTS = 8
LBP_RADIUS = 2.0

#: Scaling of the block histograms before the visterm k-means: "none", "sqrt", "quarter",
#: "log1p", "sqrt_std". Chosen on validation by benchmarks/bench_scaling.py (PAMIR, mean of 3
#: seeds): quarter 23.74, sqrt_std 23.50, log1p 22.44, sqrt 21.57, none 19.13. quarter and
#: sqrt_std are within the validation set's noise of each other (Wilcoxon p = 0.13); the
#: rule is the best validation mean. (It was sqrt_std, from DESIGN.md's calibration run,
#: where a test figure had settled a tie; the baselines' results still name it.)
FEATURE_SCALING = "quarter"

#: Visterms (TPAMI Table IV: 10,000 codewords).
N_VISTERMS = 10_000

#: k-means iterations for the visterm codebook, and the most blocks it is fitted on (a
#: random sample of training pictures beyond that keeps memory bounded).
KMEANS_ITERATIONS = 20
KMEANS_MAX_BLOCKS = 500_000

#: Colour codebook: pixels sampled per picture, from at most this many training pictures.
COLOUR_PIXELS_PER_PICTURE = 256
COLOUR_MAX_PICTURES = 1_000

#: Worker threads for block extraction (the machine has 2 cores).
FEATURE_JOBS = 2


# ----------------------------------------------------------------------------------- BBNN
# The block-based neural network (pamir/models/bbnn.py; Grangier & Bengio, ICANN 2006).

#: Hidden units of L1 (per block) and of T3's hidden layer; the learning rate of SGD. The
#: defaults are the model's, the grid what `benchmarks/bench_bbnn.py` selects from on
#: validation (§5.1: lambda, N1 and N2 "selected through cross-validation"). The grid is
#: small because each point costs 0.5-1 min on this 2-core machine; it is centred on the
#: first grid's winner (lr 1.0, N1 100, N2 150, each on an edge of lr 1-2, N1 50-100,
#: N2 50-150), so that a winner on an edge again says the grid should move.
BBNN_N1 = 100
BBNN_N2 = 150
BBNN_LEARNING_RATE = 1.0
BBNN_GRID = {
    "learning_rate": (0.5, 1.0, 2.0),
    "n_hidden1": (100, 200),
    "n_hidden2": (150, 300),
}

#: The text-epsilon margin (§3.1, eq. 4): eps_k = max(epsilon, q.c+ - q.c-).
BBNN_EPSILON = 0.1

#: Triplets per SGD step (1 is the paper's one-triplet SGD; the loss is the batch mean).
BBNN_BATCH = 32

#: "sampled": one p- per triplet (the paper); "pooled": each (q, p+) of a batch against
#: every sampled p- of the batch (see BBNN). Measured on Corel 5k, 20k triplets of batch 32
#: at lr 1.0: validation AvgP 15.6 pooled vs 10.8 sampled, for the same time.
BBNN_NEGATIVES = "pooled"

#: Training length in triplets (~10 min here), validation AvgP measured every
#: BBNN_EVAL_EVERY triplets; training stops after BBNN_PATIENCE measurements without a new
#: best (early stopping) and keeps the best weights.
BBNN_MAX_TRIPLETS = 900_000
BBNN_EVAL_EVERY = 50_000
BBNN_PATIENCE = 4

#: Triplets per grid point during the selection (the final model gets BBNN_MAX_TRIPLETS).
BBNN_SELECT_TRIPLETS = 100_000

#: Torch threads. One, although the machine has two cores: the matrices are small (a batch is
#: ~5k blocks x 109) and with other processes running, two OpenMP threads spin against them:
#: measured 29 s with 2 threads vs 4.5 s with 1 for the same 10k triplets.
BBNN_THREADS = 1


# ------------------------------------------------------------------------------ PLSA / SVM
# Baselines of TPAMI §II (issue 5): text-constrained PLSA and per-word concept SVMs.
# Defaults are used when nothing is tuned; the *_GRID values are what the benchmark
# (benchmarks/bench_plsa_svm.py) tries on the validation pictures.

#: PLSA aspects K (TPAMI Table VI: 400 on Corel Small, with a 50,000-visterm codebook).
PLSA_N_ASPECTS = 400
PLSA_ASPECTS_GRID = (50, 100, 200, 400)

#: What PLSA counts: "counts" (visterm counts, the model as defined) or "tfidf" (the L2
#: tf-idf bags read as fractional counts; tried because the bags weight rare visterms up).
PLSA_INPUT_GRID = ("counts", "tfidf")

#: Visterm codebooks PLSA is tried on (TPAMI Table VI validated up to 50,000; here the sizes
#: whose k-means is affordable on 2 cores, the others' benchmarks having cached 3,000).
PLSA_CODEBOOK_GRID = (3_000, 10_000)

#: EM iterations: on the captions, for P(v|z) with P(z|d) fixed, and to fold a picture in.
#: Each stops early once the relative log-likelihood gain falls under PLSA_TOL.
PLSA_ITER_TEXT = 100
PLSA_ITER_VISUAL = 100
PLSA_ITER_FOLD = 50
PLSA_FOLD_GRID = (10, 50)
PLSA_TOL = 1e-6

#: What PLSA's transform gives: "probability" P(t|p) (TPAMI) or "log" log P(t|p), so that
#: Z q is an idf-weighted query log-likelihood (see pamir/models/plsa.py).
PLSA_OUTPUT = "probability"
PLSA_OUTPUT_GRID = ("probability", "log")

#: Per-word linear SVMs on the tf-idf bags (the linear "visterm kernel"): the C values tried
#: for each word (chosen per word on validation, TPAMI §V-A), the class weightings tried for
#: all words at once, and how a multi-word query fuses its words' normalised scores
#: ("mean": plain average as in TPAMI §II-A; "idf": weighted by the idf query vector).
SVM_C_GRID = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
SVM_C_DEFAULT = 1.0
SVM_CLASS_WEIGHT = "none"
SVM_CLASS_WEIGHT_GRID = ("none", "balanced")
SVM_FUSION = "mean"
SVM_FUSION_GRID = ("mean", "idf")
SVM_JOBS = 2


# ---------------------------------------------------------------------------------- PAMIR
# Linear PAMIR (pamir/models/pamir.py), TPAMI §III and Table V.

#: Aggressiveness c of the PA-I update (TPAMI Table V: 0.1) and its validation grid.
PAMIR_C = 0.1
PAMIR_GRID = {"c": [0.01, 0.1, 1.0]}

#: The most PA updates (TPAMI Table V: 2.53M chosen on validation), the updates between two
#: validation evaluations (the best point is kept), and how many evaluations without
#: improvement stop training (DESIGN.md: validation AvgP plateaus after ~1M updates).
PAMIR_UPDATES = 4_000_000
PAMIR_EVAL_EVERY = 100_000
PAMIR_PATIENCE: int | None = 10

#: Rank with the average of W over the updates (DESIGN.md: +0.1-0.3 AvgP).
PAMIR_AVERAGE = True

#: Margin: "constant" (eps_k = PAMIR_EPSILON, TPAMI eq. 7) or "text" (eps_k =
#: max(PAMIR_EPSILON, F_text(q, c+) - F_text(q, c-)), BBNN ICANN 2006 eq. 4).
PAMIR_MARGIN = "constant"
PAMIR_EPSILON = 1.0


# ------------------------------------------------------------------------------- CMRM / CMTT
# Cross-Media Relevance Model and Cross-Media Translation Table (pamir/models/cmrm.py, cmtt.py).
# Defaults are the values benchmarks/bench_compare.py chose on Corel 5k validation AvgP (77
# blocks, 10,000 visterms); it selects again from the grids and prints what it chose.

#: Jelinek-Mercer smoothing of words (alpha) and visterms (beta) (TPAMI Table VI: 0.5, 0.1;
#: the SIGIR paper's FACMRM, tuned on F-measure: 0.1, 0.9).
CMRM_ALPHA = 0.3
CMRM_BETA = 0.3
#: Ranking: "pacmrm" (query likelihood), "drcmrm" (negative KL), "dot" (q . P(.|I)).
#: DRCMRM led validation by ~4.5 AvgP; a text-space index (Z q) uses P(w|I) whatever the mode.
CMRM_MODE = "drcmrm"
CMRM_ALPHA_GRID = (0.1, 0.3, 0.5, 0.7, 0.9)
CMRM_BETA_GRID = (0.1, 0.3, 0.5, 0.7, 0.9, 0.97, 0.99, 0.999)
CMRM_MODE_GRID = ("pacmrm", "drcmrm", "dot")

#: Singular values kept (TPAMI Table VI: 50 on Corel Small; 400 led validation with 10,000
#: visterms, 200 within 0.1 AvgP) and how the cosine table is
#: normalised: "terms" (P(t|v), each visterm's row sums to one over the words) or "visterms"
#: (ECML 2006 §4.2: sim(t, v) normalised over the visterms, P(t|p) renormalised per picture).
CMTT_COMPONENTS = 400
CMTT_NORMALISE = "terms"
CMTT_COMPONENTS_GRID = (10, 25, 50, 100, 200, 400, 800)
CMTT_NORMALISE_GRID = ("terms", "visterms")
#: L2-normalise each picture's word and visterm tf-idf vectors before the SVD (the papers say
#: "tf-idf" only; on blobs, validation AvgP barely differs).
CMTT_L2_PICTURES = True
CMTT_L2_PICTURES_GRID = (True, False)

#: Features tried for CMRM / CMTT, as (block fraction, visterms, input): 0.25 / 0.5 / 0.75 /
#: 1.0 of the shorter side give 77 / 15 / 3 / 2 blocks per Corel picture, the papers' 64 /
#: 128 / 192 / 256-px blocks (TPAMI Table VI chose 192 px and 3,000 visterms for CMRM, 256 px
#: and 2,000 for CMTT). input: "counts" (the models as defined) or "tfidf" (the L2 tf-idf bags
#: PAMIR reads, taken as fractional counts: ~0.1 a block, which tempers CMRM's likelihood).
#: Blocks are cached, so each point costs one k-means.
CMRM_CMTT_FEATURE_GRID = ((0.25, 10_000, "counts"), (0.25, 10_000, "tfidf"),
                          (0.25, 3_000, "counts"), (0.5, 3_000, "counts"),
                          (0.75, 3_000, "counts"), (1.0, 2_000, "counts"))


# ----------------------------------------------------------------------------- KERNEL PAMIR
# PAMIR with W as support sets and a picture kernel (pamir/models/kernel_pamir.py, TPAMI
# §III-E, §IV-C, Table IV). The benchmark (benchmarks/bench_kernels.py) selects every value
# below on validation mean AvgP and prints what it chose.

#: PA-I aggressiveness, PA steps at most, steps between validation evaluations, and
#: evaluations without improvement before stopping.
KERNEL_PAMIR_C = 0.1
KERNEL_PAMIR_MAX_UPDATES = 3_000_000
KERNEL_PAMIR_EVAL_EVERY = 100_000
KERNEL_PAMIR_PATIENCE = 5

#: Block histograms (counts) -> descriptors for the block kernels: "sqrt", "log1p", "none".
KERNEL_BLOCK_SCALING = "sqrt"

#: Match kernel: width of the RBF minor kernel on (sqrt) block descriptors. With 32-px
#: blocks, sqrt counts have squared norm 2 x 1024, and a block's nearest block in another
#: Corel picture lies at 23 / 34 / 46 (10% / 50% / 90%): sigma below ~8 makes every match 0.
KERNEL_MATCH_SIGMA = 16.0
KERNEL_MATCH_SIGMA_GRID = (8.0, 16.0, 32.0, 64.0)

#: Expected likelihood kernel: one Gaussian per picture, its covariance ("diag" or "full"),
#: and the ridge added to every variance (the kernel's smoothing). Per-picture variances of
#: sqrt counts are 0 / 1.3 / 13 (10% / 50% / 90%); with a ridge of 1 the median normalised
#: kernel between two Corel pictures is 1e-11 (every picture alone), with 64 it is 0.09.
KERNEL_ELK_COVARIANCE = "diag"
KERNEL_ELK_RIDGE = 64.0
KERNEL_ELK_RIDGE_GRID = (4.0, 16.0, 64.0, 256.0)

#: Aggressiveness tried for every kernel setting.
KERNEL_PAMIR_C_GRID = (0.01, 0.1, 1.0)
