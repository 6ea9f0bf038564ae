#!/usr/bin/env bash
# Every result under benchmarks/results, in the order they depend on each other:
#
#     bash benchmarks/run_all.sh
#
# About three hours on the 2-core development machine before issue 36 added the codebook,
# decode, calibration, small-selection and history lines (their times are in their results).
# The first script fits the 10,000-visterm codebook into the feature cache (.cache/,
# PAMIR_CACHE) that the others read; the per-query
# files of PAMIR, kernel PAMIR, PLSA, SVM and BBNN (results/perquery/) feed the comparison
# tables that bench_compare.py writes last. Each script takes the heavy-job lock so that two
# benchmarks never share the cores.
#
# Each script runs from the checkout's root as `python benchmarks/NAME.py`, the command its
# results name: Python puts benchmarks/ first on the path, where the scripts find what they
# share (benchmarks/common/, a module a concern). PYTHONPATH names this checkout, so that its
# pamir is the one measured (and the `pamir` lines below run it) whichever one is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

run() {
    echo "=== $(date -u +%H:%M:%S) python $*"
    flock /tmp/pamir-heavy.lock python "$@"
}

run benchmarks/bench_features.py                   # block speed, the visterm codebook
run benchmarks/bench_visterm_codebook.py           # the cheaper codebook against the papers' fit
run benchmarks/bench_decode_once.py                # a picture decoded once for every view
run benchmarks/bench_pa_speed.py                   # PA updates per second
run benchmarks/bench_pamir.py                      # PAMIR: TPAMI Tables III, V, VII-XII
run benchmarks/bench_kernels.py                    # kernel PAMIR: Table IV
run benchmarks/bench_cnn_speed.py                  # CNN extraction speed: model x size x engine
run benchmarks/bench_cnn.py                        # PAMIR on CNN features (pamir-cnn, svm-cnn)
run benchmarks/bench_cnn.py --quick                #   ... the short study (cnn_quick.md)
run benchmarks/bench_cnn_plateau.py                # seeds against settings, then the seeds an
                                                   #   ensemble needs (--ensembles alone)
run benchmarks/bench_annotation.py                 # the standard Corel 5k annotation protocol
run benchmarks/bench_annotation_rules.py           # other annotation rules, on validation
run benchmarks/bench_resolution.py                 # PAMIR against picture size
run benchmarks/bench_scaling.py                    # PAMIR against block histogram scaling
run benchmarks/bench_scaling.py --significance     #   ... and whether validation can tell them apart
run benchmarks/bench_margin.py                     # PAMIR: constant vs text-epsilon margin
run benchmarks/bench_resolution.py --scaling sqrt_std   # the same two studies on the
run benchmarks/bench_margin.py --scaling sqrt_std       #   scaling that was the default before
run benchmarks/bench_plsa_svm.py                   # PLSA and per-word SVMs
run benchmarks/bench_plsa_svm.py --features blobs
run benchmarks/bench_bbnn.py                       # BBNN: ICANN 2006 Tables 2 and 3
run benchmarks/bench_compare.py                    # CMRM, CMTT; every model side by side
run benchmarks/bench_compare.py --features blobs
# ECML / AMR 2006 tables on Blobs, SIFT and Blobs+SIFT (ecml2006.md); after the line above on
# purpose: its -blobs entries of corel5k.json take this script's reduced-grid choices and test
# figures, and keep the annotation and timing fields the blobs run above wrote (blobs.md
# keeps that run's own full-grid figures).
run benchmarks/bench_ecml2006.py   # and ECML Table 6's PAMIR, our blobs, the explanations
run benchmarks/bench_index.py --sizes 100000 1000000 10000000 --dir /work/bench-data  # index latency (23 GB at 10M)
run benchmarks/bench_search.py                     # unseen words, feedback, learning, mapping latency
for r in cnn+visterms cnn+cnn-lite2+visterms cnn+cnn-lite1+cnn-lite2+visterms; do
    run benchmarks/bench_search.py --representation "$r" --measures unseen feedback learn
done                                               #   ... on the CNN representations
run benchmarks/bench_dask.py --rounds 2            # pamir index / fit on a Dask cluster
run benchmarks/bench_dask.py --cnn-only            #   ... the CNN extraction of fit --workers
run benchmarks/bench_scale_training.py             # PAMIR trained from 1M pictures on disk
run benchmarks/bench_reliability.py                # load, kills, hostile input (15 min)
run benchmarks/bench_zero_caption.py                # search with no captions, and what captions add
run benchmarks/bench_zero_caption.py --gap          #   ... why the chosen look scores less on test
run benchmarks/bench_metadata.py                   # keywords from the files: fit FOLDER = fit TABLE
run benchmarks/bench_knn.py                        # neighbours beside PAMIR: train only, README command, cost
run benchmarks/bench_emoji.py                      # category words outside a model's captions
run benchmarks/bench_emoji.py --zero-old 5fef65d   #   ... with no model: main before issue 54 and this
                                                   #   tree side by side (emoji_zero.md)
run benchmarks/bench_zero_typical.py              # a table word's typical classes (the clip-art fruit): not kept
run benchmarks/bench_folder_look.py --old 5fef65d --fit   # a library with keywords and `pamir index`
                                                   #   alone: old, new, fitted; the look's cost
run benchmarks/bench_folder_look.py --old 5fef65d --costs-only   # the look's cost, the library too
run benchmarks/bench_folder_calibration.py --seeds 0 1   # the folder words' calibration: every pair or a sample
run benchmarks/bench_annotate_xmp.py --old 5fef65d --library-index /tmp/pamir-folder-look/index-new \
    --library-folder /tmp/pamir-folder-look/folder-1500   # annotate --xmp with no model (after the above)
run benchmarks/bench_facts.py                      # keywords as facts, searched with no model
run benchmarks/bench_places.py                     # places from GPS: the district rule, P@k
run benchmarks/bench_ocr.py                        # text in pictures: its cost, words read
run benchmarks/bench_ocr.py --search-only          #   ... and text: queries (ocr_search.md)
run benchmarks/phone_library.py                    # a phone's library: camera-size photos, HEIC,
                                                   #   videos; old (96353846) and new side by side
run benchmarks/bench_video.py                       # reading a video's frames: the interval and cap
run benchmarks/watch.py                           # pamir watch: a file's delay, a 1,000-file import
run benchmarks/bench_text_sizes.py --per 1 --blank 10 --corel 50 --search 50   # words of every
                                                   #   size and angle, and two pictures of each:
run benchmarks/bench_text_sizes.py --per 2 --blank 20 --corel 100 --stem text_sizes_per2
run benchmarks/bench_corel_passes.py                # Corel 5k's index time: bare, text, text +
                                                   #   faces, side by side
run benchmarks/bench_corel_passes.py --reverse --stem corel_passes_reversed  # other order
run benchmarks/bench_ocr_int8.py                   # Corel 5k's text: fp32 and int8 detection
run benchmarks/bench_small_faces.py --seeds 2 --faceless 10 --corel 50   # faces of every size
run benchmarks/bench_cities.py                      # cities as people name them: recall, wrong city
python benchmarks/camera_roll.py --build-only        # a camera roll's media, once (no lock: no timing)
run benchmarks/camera_roll.py                       # a camera roll: 300 JPEGs, 20 HEICs, 2,000 end
                                                   #   to end, old (96353846) and new; the watcher
run benchmarks/profile_passes.py --src /work/wt-base --old /work/wt-old96 \
    --stem profile_passes_before                   # where the time went before issue 52 (worktrees
                                                   #   of 45c8fc3 and 96353846)
run benchmarks/profile_passes.py --old /work/wt-old96   # ... and now
run benchmarks/profile_faces_pass.py --n 20 --repeats 2   # the faces pass alone, old and new, CPU a stage
run benchmarks/duplicates.py --million --text-space # copies and bursts: per kind, hard negatives, scale
# A cnn model of Corel 5k for the sidecars' word threshold and the videos' pooling.
V=/work/bench-data/model-cnn
[ -d "$V" ] || flock /tmp/pamir-heavy.lock pamir fit corel5k -o "$V" -r cnn -q
run benchmarks/bench_sidecars.py --model "$V"        # the words written into XMP sidecars
run benchmarks/bench_video_pooling.py --model "$V"   # a video's score: best frame or mean
I=/work/bench-data/int8                            # int8 CNN views against fp32: quality, speed,
run benchmarks/bench_int8.py --cache "$I/cache"    #   then each view's cosines, added to int8.json
run benchmarks/bench_int8.py --cache "$I/cache" --parts cosines
# each int8 variant against fp32 per network, natively (then under QEMU: the module's docstring)
run benchmarks/bench_int8_fidelity.py --cache "$I/cache"
run benchmarks/bench_int8_options.py --cache "$I/cache"  # where lite1's int8 error starts; quantization's options
# People (issue 34): the identities folder is made once by benchmarks/faces_pictures.py from
# git clones of three MIT-licensed face libraries (its docstring says how); nothing is
# downloaded here, so without the folder these two are skipped, and say so.
F=/work/faces-bench
if [ -d "$F/pictures" ]; then
    run benchmarks/bench_faces.py --identities "$F/pictures" --groups "$F/groups" --corel 100 \
        --note "$F/pictures"
    run benchmarks/bench_people.py --identities "$F/pictures" --corel 1000 \
        --note "$F/pictures (benchmarks/faces_pictures.py)"
else
    echo "=== skipped bench_faces.py and bench_people.py: no $F/pictures (benchmarks/faces_pictures.py)"
fi
# Calibrated probabilities on a train-only `pamir fit corel5k` (calibration.md's model was
# one made at an earlier commit: validation AvgP 51.908).
T=/work/bench-data/train-only
[ -d "$T" ] || flock /tmp/pamir-heavy.lock pamir fit corel5k -o "$T" -q
run benchmarks/bench_calibration.py --model "$T"
# Small collections (issue 26): export here, the 90 fits (a lent 16-core machine ran them for
# small_selection.md; here they run on this one), then the report.
S=/work/bench-data/small-selection
mkdir -p "$S"
run benchmarks/bench_small_selection.py --export "$S/X.npz" --seeds 0 1 2 3 4 --pool 1500
run benchmarks/bench_small_selection.py --from "$S/X.npz" --out "$S/small.json"
run benchmarks/bench_small_selection.py --report "$S/small.json"
# Search latency (issue 25): a cnn model, its Corel 5k index and the tree before issue 25; the
# benchmark builds its 1,000,000-picture index beside them the first time (6.4 GB).
L=/work/bench-data/latency
flock /tmp/pamir-heavy.lock pamir fit corel5k -r cnn --no-grid -q -o "$L/model"
flock /tmp/pamir-heavy.lock pamir index "$L/model" ../shared/data/corel5k/images --index "$L/idx" \
    --captions ../shared/data/corel5k/annotations.tsv
mkdir -p "$L/old" && git archive 574a405 | tar -x -C "$L/old"
run benchmarks/bench_search_latency.py --index "$L/idx" --model "$L/model" --old "$L/old" \
    --old-label "git archive 574a405, main before issue 25" --big "$L/big" --runs 5
# The Index as a composition (issue 53): its shape, and a search's cost on the same two
# indexes, the code before it (45c8fc3) and this one side by side.
run benchmarks/bench_index_parts.py --before 45c8fc3 --index "$L/idx" --big "$L/big" --runs 5
# The command's start-up (issue 53): --help, a search on a tiny index and info --help, main
# before the commands were loaded on first use (a9fcd28) against this tree.
run benchmarks/bench_cli_startup.py --old a9fcd28 --runs 15
# Words that reach ImageNet classes at 1,000,000 pictures (issue 37), on the same model: the
# old scan (bf8d204) against the class rows' block bounds.
run benchmarks/bench_class_latency.py --model "$L/model" --folder ../shared/data/corel5k/images \
    --work "$L/class" --old-commit bf8d204 --size 1000000 --rounds 2 --requests 200
# One-off comparisons against older commits (benchmarks/history/): each runs the code of the
# commits it names from a `git archive`, so its result stays what it was.
run benchmarks/bench_fit_speed.py --parts main --before 7418ef7 --after HEAD   # fit_speed.md
run benchmarks/history/bench_library.py --before 9a94e5d --model "$T"   # library.md (its run read the
                                                   #   README command's model): import cost, same results
run benchmarks/bench_fit_memory.py --before 91bf3af --updates 40000 --train 1000 2000   # fit_memory.md
run benchmarks/bench_fit_memory_synthetic.py --train 1000 2000 4500 10000 20000 --updates 40000
run benchmarks/bench_fit_memory_synthetic.py --train 4500 20000 100000 --updates 20000 \
    --most-mb 16000 --stem fit_memory_synthetic_blocks   # towards 100,000 pictures, synthetic
run benchmarks/bench_fit_speed_refit_share.py      # the share of updates a refit needs
run benchmarks/bench_folder_rule.py --pictures 1500 --seeds 0 1 2   # the small-folder rule
run benchmarks/bench_retrain_warm.py --seeds 0 1   # the retraining from the train-only weights
run benchmarks/bench_small_folders.py --sizes 300:100 1500:500 --before 91bf3af --before-upto 300
run benchmarks/bench_small_folders.py --sizes 300:100 --before 91bf3af --stem small_folders_300
run benchmarks/bench_small_folders.py --sizes 300:100 --stem small_folders_300_one_fit
# Refactorings that changed nothing (issue 36): outputs and saved systems of two trees compared;
# same_behaviour.md and same_fit.md keep what each run printed.
run scripts/same_behaviour.py --before 965eb15     # same_behaviour.md
run scripts/same_fit.py --before bf8d204           # same_fit.md
# By hand, each noting its commands: readme_command.md (the README's two commands, timed as a
# newcomer runs them) and fit_memory_readme.md (/usr/bin/time -v of the README's main fit on
# each commit's tree); defaults.md says where the defaults came from.
