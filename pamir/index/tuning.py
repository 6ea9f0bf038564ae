"""The score matrix's sizes and thresholds, each with the measurement that chose it: how a
shard grows (`columns`), when a tail is sealed and segments merged (`compaction`), and when
a query walks the sorted lists or scans (`scoring`). None of them is needed to read an index:
each file records its own capacity and block size (`layout`).

The score matrix's modules read these at call time (`tuning.X`), so a test or a benchmark can
set one here for a run (small shards, a bulk load that never seals).
"""

#: The smallest matrix, in columns: growing by doubling from here keeps copies rare.
MIN_CAPACITY = 1024
#: Most columns in one shard (see docs/scale.md for the choice): 2^20, so a 1M-picture
#: collection is one shard and a shard's lists are built by sorts of a million scores.
SHARD_COLUMNS = 1 << 20
#: A shard's tail is sealed into a segment by `Index.add` once it has this many columns;
#: `seal` at the end of an indexing run seals tails of at least SEAL_MIN columns.
SEAL_AT = 1 << 18
SEAL_MIN = 1 << 14
#: Segments per shard beyond which `seal` merges them.
MAX_SEGMENTS = 8
#: The threshold algorithm gives up (and the shard is scanned) after L / (TA_DEPTH_DIVISOR
#: x m^2) steps of a list of L for a query of m words: a step costs m^2 random reads (m new
#: pictures, m rows each), the scan m sequential rows, and at 1M Corel-like pictures a
#: 3-word step cost ~80 ns against ~2 ms for the scan: the limit keeps a losing TA to about
#: half a scan. (A flat 1/16 of the list, best at 200k where everything fits in cache, let
#: 3-word queries at 1M run 7 ms: docs/scale.md.)
TA_DEPTH_DIVISOR = 8
#: Columns per block of the block bounds (the highest and lowest score of each word in each
#: block of a segment). Small blocks bound tightly: at 1M Corel-like pictures, the blocks a
#: 2-word (3-word) top 100 cannot skip were 1.6 % (3.1 %) of them at 16 columns, 2.8 %
#: (7.3 %) at 32 and about 12 % (29 %) at 64, medians of 30 random queries; the bounds then
#: take 2 x 4 / 16 bytes a score, an eighth of the matrix's size.
BLOCK = 16
#: Clusters of the column order a compaction writes (`block_order`). Measured at 1M Corel-like
#: pictures (docs/scale.md), the blocks a 3-word top 100 cannot skip: 3.5 % of them in
#: insertion order, 0.99 % with 256 clusters (k-means 0.7 s), 0.93 % with 1,024 (3.3 s) and
#: 0.89 % with 4,096 (17 s): 256 takes nearly all of the gain for a second a million.
ORDER_CLUSTERS = 256
#: Pictures per cluster the order's k-means trains on (a sample: the order only has to be
#: good, never exact, as it changes no answer).
ORDER_SAMPLE_PER_CLUSTER = 64
#: Before scanning a shard with block bounds, the threshold algorithm takes at most this
#: many steps per k results: its first scores let the scan skip most blocks (with 4 k steps
#: the blocks left were 3.0 % / 7.5 % at 1M for 2 / 3 words, against 6.2 % / 17.5 % with k).
BOOT_STEPS_PER_RESULT = 4
#: Queries with more word rows than this are scanned (3+ words, bridged words, mixtures).
#: Measured at 1M Corel-like pictures, warm, one core (benchmarks/bench_index.py, docs/
#: scale.md): the TA (with the limit above) took 7.8 ms median for 3 words and 12.3 ms for 4,
#: the scan 2.4 and 2.7 ms; for 2 words they tied (2.2 against 2.0 ms), for 1 word the TA
#: won (0.7 against 1.5 ms).
TA_MAX_WORDS = 2
