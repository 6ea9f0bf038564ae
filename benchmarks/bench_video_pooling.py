"""A video's row from its frames' rows: the best frame's score for each word (max) or the
frames' mean? Measured on videos made of Corel's test pictures (issue 44).

    flock /tmp/pamir-heavy.lock python benchmarks/bench_video_pooling.py --model MODEL

MODEL: a system fitted on Corel 5k (`pamir fit corel5k -o MODEL -r cnn`). Corel's 499 test
pictures, by CD in id order, are cut into videos of five pictures each (one CD per video;
benchmarks/video_making.py: each picture a 5 s shot at 192x128, 2 fps, panned and zoomed with
noise, a keyframe at each shot). `pamir index` reads them with the model (the look alone),
keeping each video's frames' rows; then each of the model's words that some video holds
(a video holds the words of its pictures' captions, and is found by them) ranks the videos
by their max-pooled and by their mean-pooled rows. Results: results/video_pooling.json, .md.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from common.harness import Run, report_cli, report_head, save_report
from common.videos import write_video

from pamir.data import find_corel5k

COREL = find_corel5k()  # $PAMIR_COREL5K in a worktree
STEM = "video_pooling"
PER_VIDEO = 5


def videos_of_test(folder: Path) -> dict[str, set[str]]:
    """The test pictures as videos of PER_VIDEO pictures of one CD; {video path: its words}."""
    by_cd: dict[str, list[tuple[int, str, list[str]]]] = {}
    with open(COREL / "annotations.tsv") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["split"] == "test":
                cd = Path(row["path"]).parent.name
                by_cd.setdefault(cd, []).append((int(row["image_id"]), row["path"],
                                                 row["keywords"].split()))
    out = {}
    folder.mkdir(parents=True, exist_ok=True)
    for cd, pictures in sorted(by_cd.items()):
        pictures = sorted(set((i, p, tuple(w)) for i, p, w in pictures))
        for k in range(0, len(pictures), PER_VIDEO):
            group = pictures[k:k + PER_VIDEO]
            path = folder / f"cd{cd}-{k // PER_VIDEO}.mp4"
            if not path.is_file():
                write_video(path, [COREL / p for _, p, _ in group], seconds_each=5.0, fps=2,
                            size=(192, 128), gop=10, bitrate=400_000)
            out[str(path.resolve())] = {w for _, _, words in group for w in words}
    return out


def average_precision(scores: np.ndarray, relevant: np.ndarray) -> float:
    order = np.argsort(-scores, kind="stable")
    hits = relevant[order]
    ranks = np.flatnonzero(hits) + 1
    return float(np.mean(np.arange(1, len(ranks) + 1) / ranks)) if len(ranks) else 0.0


def measure(model: Path, work: Path) -> dict:
    from pamir.index import Index  # noqa: PLC0415
    from pamir.facts.video import video_row  # noqa: PLC0415
    from pamir.jobs.indexing import index_folders  # noqa: PLC0415

    words_of = videos_of_test(work / "videos")
    index_folders(model, [work / "videos"], index=work / "index", rebuild=True)
    with Index.open(work / "index") as ix:
        pictures = [p for p in ix.pictures() if p.state == "ok"]
        frames = ix.frames_of(p.id for p in pictures)
        vocabulary, T = ix.vocabulary, ix.T
    paths = [p.path for p in pictures if p.id in frames]
    rows = {name: np.array([video_row(frames[p.id][1][:, :T], name) for p in pictures
                            if p.id in frames]) for name in ("max", "mean")}
    out = {"videos": len(paths), "frames": int(sum(len(f[0]) for f in frames.values())),
           "pooling": {}}
    queries = [t for t, w in enumerate(vocabulary)
               if 0 < sum(w in words_of[p] for p in paths) < len(paths)]
    for name, Z in rows.items():
        aps = [average_precision(Z[:, t], np.array([vocabulary[t] in words_of[p]
                                                    for p in paths])) for t in queries]
        top1 = [vocabulary[t] in words_of[paths[int(np.argmax(Z[:, t]))]] for t in queries]
        out["pooling"][name] = {"avgp": 100 * float(np.mean(aps)),
                                "p1": 100 * float(np.mean(top1)), "queries": len(queries)}
    return out


def report(r: dict) -> str:
    lines = [*report_head("A video's row: its best frame's (max) or its frames' mean", r), "",
             f"{r['videos']} videos made of Corel 5k's test pictures (five of one CD each, "
             f"{r['frames']} frames read), indexed with `{r['model_command']}`'s model; one "
             "query per word of the model that some videos hold and others not (a video "
             "holds its pictures' words):\n",
             "| pooling | AvgP | P@1 | queries |", "|---|---:|---:|---:|"]
    for name, x in r["pooling"].items():
        lines.append(f"| {name} | {x['avgp']:.2f} | {x['p1']:.1f} | {x['queries']} |")
    return "\n".join(lines) + "\n"


def _options(ap) -> None:
    ap.add_argument("--model", type=Path,
                    help="a system fitted on Corel 5k (pamir fit corel5k -o MODEL -r cnn)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/pamir-video-pooling"),
                    help="where the videos and their index are made (kept between runs)")


def main(argv=None) -> None:
    args = report_cli(__doc__, STEM, report, argv, options=_options)
    if args is None:  # --report-only
        return
    if args.model is None:
        raise SystemExit("--model MODEL: a system fitted on Corel 5k "
                         "(pamir fit corel5k -o MODEL -r cnn)")
    run = Run("bench_video_pooling.py", argv)
    r = {**run.info(), "model_command": "pamir fit corel5k -o MODEL -r cnn",
         **measure(args.model, args.work), "minutes": run.minutes()}
    save_report(STEM, r, report)


if __name__ == "__main__":
    main()
