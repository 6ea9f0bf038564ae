"""A phone's camera roll through `pamir index` and `pamir watch` (issue 52): old code and new
in turn, in one run, on camera-size photos, iPhone-like HEICs, a 2,000-photo roll end to
end, and the watcher's delays.

    python benchmarks/camera_roll.py --build-only          # the media, once (tens of minutes)
    flock /tmp/pamir-heavy.lock python benchmarks/camera_roll.py [--old-tree /work/wt-old96]
        [--jpegs 300] [--heics 20] [--roll 2000] [--drops 5] [--videos 2] [--parts ...]

The media (built once under --work, kept; benchmarks/results say how they were made): No
phone library ships, so the folders are made from Corel 5k (mostly landscapes and animals:
few faces, little text, as the issue's photos):

- jpeg: --jpegs camera-size JPEGs, 4032 x 2688 (the issue's size; a portrait Corel picture
  stays portrait), Corel pictures 0, 7, 14, ... enlarged with a sensor's grain
  (tests/media.py, with_grain; GRAIN), quality 90 (3.0-3.5 MB), each with its EXIF date and
  GPS position;
- heic: --heics 12-MP HEICs laid out as an iPhone writes them: 4032 x 3024 in a grid of
  512-px HEVC tiles (8 x 6), a 320 x 240 HEVC thumbnail, 4:2:0, EXIF (pillow-heif's
  tile_size and thumbnails; x265 at preset `fast`, quality HEIC_QUALITY, grain HEIC_GRAIN:
  about 2-3 MB a photo, in an iPhone's range). Not an iPhone's: x265 rather than Apple's
  encoder, sRGB colours rather than Display P3, no depth map or HDR gain map beside;
- roll: --roll JPEGs of the jpeg kind, the jpeg folder's (hard links) and then others
  (distinct Corel pictures);
- video: --videos one-minute 1080p 30 fps H.264 videos at 12 Mbit/s (a phone's 1080p), a
  keyframe a second, of Corel pictures filmed with a pan and zoom (common.write_video);
- faces, text: a few camera-size JPEGs with people (tests/data/faces' portraits pasted at 120
  to 800 px wide) and with painted words (DejaVu, 2-15 % of the height), which
  benchmarks/profile_passes.py reads.

The runs (each a whole command as a person runs it, a fresh process with the side's source
tree on PYTHONPATH, from an empty index and a copy of the side's one-time cache: the CNN's
ONNX export, the int8 text detector, the word lexicon, made by indexing two other pictures
first; no picture's features cached; the pictures' files in the OS page cache):

- jpeg, heic: `pamir index FOLDER --json` (every pass, no model), old then new; wall seconds,
  photos_per_second, cpu_seconds, peak_rss_mb (/usr/bin/time -v's maximum resident set:
  the largest process) and peak_tree_rss_mb (the command and every process it started,
  summed, sampled every 0.2 s), the passes' own seconds;
- roll: the same on --roll photos, with first_answer_seconds: from the command's start until
  a reader of the index (the side's own Index.search("tiger"), polled every 0.25 s in
  another process) finds a picture, and all_done_seconds (the command's end: every pass
  read);
- watch (new code): `pamir watch FOLDER` (every pass) caught up on 5 Corel pictures; then,
  one after another, --drops pictures each carrying an IPTC keyword no dictionary holds
  ("quillfern3"), copied into the folder, and --videos one-minute videos, each
  `pamir search WORD -k 50` polled (one after another, as a person at a terminal) from the
  copy until it lists the file: picture_seconds, video_seconds (the copy to the end of the
  search that found it) and search_seconds (each search's own time).

Targets (issue 52, in one run on one machine): 300 JPEGs >= 2.0x the old code's photos per
second at a peak of 1.5 GB or less; 20 HEICs >= 2 photos/s; a video found within 10 s of
its copy, a picture by its keyword within 5 s, every time.

Writes results/camera_roll.json and .md (--report-only rewrites the .md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(1, str(ROOT / "tests"))  # tests/media.py, as phone_library.py reads it
import media  # noqa: E402 - tests/media.py: the one home of the camera-like writers
from common.folders import built, mark_built  # noqa: E402
from common.harness import Run, report_cli, report_head, save_report  # noqa: E402
from common.latency import TreeMemory  # noqa: E402
from common.videos import write_video  # noqa: E402

from pamir.data import find_corel5k  # noqa: E402

STEM = "camera_roll"
WORK = Path("/work/bench-data/camera_roll")
OLD = "96353846"  # main before issue 44's reading stage
JPEG_SIZE, HEIC_SIZE = (4032, 2688), (4032, 3024)
GRAIN = 10  # +-levels: a 12-MP JPEG weighs 3.0-3.5 MB at quality 90
#: An iPhone's 12-MP HEIC weighs 1.5-3.5 MB; x265 at these settings on an enlarged Corel
#: picture gives 2-3 MB (grain 10 would give 4-6 MB: noise no phone leaves in).
HEIC_QUALITY, HEIC_GRAIN, HEIC_TILE, HEIC_THUMBNAIL = 55, 6, 512, 320
HEIC_ENCODER = {"preset": "fast"}
PLACES = [(35.0116, 135.7681), (64.1466, -21.9426), (48.8566, 2.3522), (-33.4489, -70.6693),
          (40.7128, -74.0060), (-1.2921, 36.8219)]
FACES = ROOT / "tests" / "data" / "faces"
WORDS = ["BAKERY", "MUSEUM", "STATION", "HOTEL", "PHARMACY", "MARKET", "THEATRE", "LIBRARY"]
QUERY = "tiger"  # an ImageNet word: every indexed picture is ranked for it
PAMIR = "import sys; sys.argv[0] = 'pamir'; from pamir.cli import main; main()"
TARGETS = {"jpeg_ratio": 2.0, "jpeg_peak_mb": 1536, "heic_photos_per_second": 2.0,
           "video_seconds": 10.0, "picture_seconds": 5.0}


# ------------------------------------------------------------------------------ the media

def corel_pictures() -> list[Path]:
    return sorted((find_corel5k() / "images").glob("*/*.jpeg"),
                  key=lambda p: (int(p.parent.name), int(p.stem)))


def when_and_where(i: int):
    return datetime(2021, 5, 2, 8, 0) + timedelta(minutes=23 * i), PLACES[i % len(PLACES)]


def enlarged(path: Path, size, seed: int, grain: int = GRAIN) -> np.ndarray:
    return media.camera_size(path, size, seed, grain)


def _write(path: Path, write) -> None:
    """Written whole (a temporary name, then renamed): a stopped build resumes."""
    if not path.exists():
        tmp = path.with_name(f".tmp-{path.name}")
        write(tmp)
        tmp.rename(path)


def build_jpegs(folder: Path, n: int, link_from: Path | None = None) -> Path:
    spec = {"kind": "jpeg", "size": list(JPEG_SIZE), "n": n, "grain": GRAIN}
    if built(folder, spec):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    pictures = corel_pictures()
    for i in range(n):
        path = folder / f"IMG_{i:04d}.JPG"
        source = link_from / path.name if link_from else None
        if not path.exists() and source is not None and source.is_file():
            os.link(source, path)
            continue
        taken, place = when_and_where(i)
        _write(path, lambda tmp, i=i, taken=taken, place=place: media.jpeg(
            tmp, enlarged(pictures[(7 * i) % len(pictures)], JPEG_SIZE, i), taken=taken,
            position=place, quality=90))
    mark_built(folder, spec)
    return folder


def iphone_heic(path: Path, rgb: np.ndarray, taken, place) -> Path:
    """A HEIC laid out as an iPhone's (see the module's doc)."""
    import pillow_heif  # noqa: PLC0415
    from PIL import Image  # noqa: PLC0415

    pillow_heif.register_heif_opener()
    Image.fromarray(rgb).save(path, "HEIF", quality=HEIC_QUALITY, tile_size=HEIC_TILE,
                              thumbnails=[HEIC_THUMBNAIL], enc_params=HEIC_ENCODER,
                              exif=media.exif_bytes(taken, place))
    return path


def build_heics(folder: Path, n: int) -> Path:
    spec = {"kind": "heic", "size": list(HEIC_SIZE), "n": n, "grain": HEIC_GRAIN,
            "quality": HEIC_QUALITY, "tile": HEIC_TILE, "thumbnail": HEIC_THUMBNAIL}
    if built(folder, spec):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    pictures = corel_pictures()
    for i in range(n):
        taken, place = when_and_where(10_000 + i)
        _write(folder / f"IMG_{i:04d}.HEIC", lambda tmp, i=i, taken=taken, place=place:
               iphone_heic(tmp, enlarged(pictures[(7 * i + 3) % len(pictures)], HEIC_SIZE,
                                         10_000 + i, HEIC_GRAIN), taken, place))
    mark_built(folder, spec)
    return folder


def _heads() -> list:
    from PIL import Image, ImageDraw, ImageFilter  # noqa: PLC0415

    out = []
    for p in sorted(FACES.glob("*.jpg")):
        im = Image.open(p).convert("RGB")
        mask = Image.new("L", im.size, 0)
        ImageDraw.Draw(mask).ellipse((0, 0, im.width - 1, im.height - 1), fill=255)
        im.putalpha(mask.filter(ImageFilter.GaussianBlur(im.width / 20)))
        out.append(im)
    return out


def with_people(rgb: np.ndarray, seed: int) -> np.ndarray:
    """3-8 portraits pasted on the photo, each 120 to 800 px wide."""
    from PIL import Image  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    photo, heads = Image.fromarray(rgb), _heads()
    for _ in range(int(rng.integers(3, 9))):
        head = heads[int(rng.integers(len(heads)))]
        width = int(rng.integers(120, 800))
        head = head.resize((width, round(head.height * width / head.width)), Image.LANCZOS)
        photo.paste(head, (int(rng.integers(0, photo.width - head.width)),
                           int(rng.integers(0, photo.height - head.height))), head)
    return np.asarray(photo)


def with_words(rgb: np.ndarray, seed: int) -> np.ndarray:
    """One to three words painted on plates, 2 to 15 % of the photo's height."""
    import matplotlib  # noqa: PLC0415 - its DejaVu fonts are on every machine
    from PIL import Image, ImageDraw, ImageFont  # noqa: PLC0415

    font_path = Path(matplotlib.get_data_path(), "fonts/ttf/DejaVuSans-Bold.ttf")
    rng = np.random.default_rng(seed)
    photo = Image.fromarray(rgb)
    draw = ImageDraw.Draw(photo)
    for _ in range(int(rng.integers(1, 4))):
        font = ImageFont.truetype(str(font_path), int(photo.height * rng.uniform(0.02, 0.15)))
        word = WORDS[int(rng.integers(len(WORDS)))]
        x0, y0, x1, y1 = draw.textbbox((0, 0), word, font=font)
        x = int(rng.integers(0, max(1, photo.width - (x1 - x0) - 40)))
        y = int(rng.integers(0, max(1, photo.height - (y1 - y0) - 40)))
        draw.rectangle((x - 20, y - 20, x + x1 - x0 + 20, y + y1 + 20), fill=(240, 236, 220))
        draw.text((x - x0, y), word, font=font, fill=(20, 20, 30))
    return np.asarray(photo)


def build_marked(folder: Path, kind: str, n: int) -> Path:
    spec = {"kind": kind, "size": list(JPEG_SIZE), "n": n, "grain": GRAIN}
    if built(folder, spec):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    pictures = corel_pictures()
    mark = {"faces": with_people, "text": with_words}[kind]
    for i in range(n):
        seed = 20_000 + i + (0 if kind == "faces" else 1000)
        _write(folder / f"{kind}_{i:03d}.JPG", lambda tmp, i=i, seed=seed: media.jpeg(
            tmp, mark(enlarged(pictures[(7 * i + 5) % len(pictures)], JPEG_SIZE, seed),
                      seed), quality=90))
    mark_built(folder, spec)
    return folder


def build_videos(folder: Path, n: int) -> Path:
    """n one-minute 1080p 30 fps H.264 videos at 12 Mbit/s, a keyframe a second as a phone
    writes them: six Corel pictures filmed with a slow pan and zoom, ten seconds each
    (common.write_video)."""
    spec = {"kind": "video", "n": n, "seconds": 60, "bitrate": 12_000_000}
    if built(folder, spec):
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    pictures = corel_pictures()
    for i in range(n):
        shots = [pictures[(97 * i + 11 * k) % len(pictures)] for k in range(6)]
        _write(folder / f"VID_{i:04d}.mp4", lambda tmp, shots=shots: write_video(
            tmp, shots, seconds_each=10.0))
    mark_built(folder, spec)
    return folder


def build_all(work: Path, args) -> dict:
    m = work / "media"
    out = {"jpeg": build_jpegs(m / "jpeg", args.jpegs), "heic": build_heics(m / "heic", args.heics),
           "faces": build_marked(m / "faces", "faces", 10),
           "text": build_marked(m / "text", "text", 10),
           "video": build_videos(m / "video", args.videos)}
    if args.roll:
        out["roll"] = build_jpegs(m / "roll", args.roll, link_from=out["jpeg"])
    return out


def describe(folder: Path) -> dict:
    files = [p for p in folder.iterdir() if not p.name.startswith(".")]
    return {"files": len(files),
            "mean_mb": round(sum(p.stat().st_size for p in files) / len(files) / 2**20, 2)}


# ------------------------------------------------------------------------------ the sides

class Side:
    """One tree of pamir's code (old or new) and its one-time cache."""

    def __init__(self, name: str, src: Path, work: Path):
        self.name, self.src = name, src
        self.commit = subprocess.run(["git", "-C", str(src), "rev-parse", "--short=12", "HEAD"],
                                     capture_output=True, text=True).stdout.strip()
        self.template = work / "caches" / name

    def env(self, cache: Path) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in ("PAMIR_INDEX", "PYTHONPATH")}
        return {**env, "PYTHONPATH": str(self.src), "PAMIR_CACHE": str(cache)}

    def warm(self, log: Path) -> None:
        """Fill the one-time cache by indexing two other pictures (kept between runs of the
        same commit: another may make or check more once, as int8fid's fidelity check)."""
        mark = self.template / ".warm"
        if mark.is_file() and mark.read_text() == self.commit:
            return
        from PIL import Image  # noqa: PLC0415

        with tempfile.TemporaryDirectory() as tmp, open(log, "a") as out:
            rng = np.random.default_rng(0)
            for i in range(2):
                Image.fromarray(rng.integers(0, 255, (128, 192, 3), np.uint8)).save(
                    f"{tmp}/warm-{i}.jpg")
            subprocess.run([sys.executable, "-c", PAMIR, "index", tmp, "--index",
                            f"{tmp}/index"], env=self.env(self.template), cwd=tmp,
                           stdout=out, stderr=subprocess.STDOUT, check=True)
            # the word-embedding model's export, where this code makes one (a search of a
            # rare word made it: made here once, as the watcher makes it on start)
            subprocess.run([sys.executable, "-c", "from pamir.text import embedding as e; "
                            "e.embedder() if e.model_installed()[0] else None"],
                           env=self.env(self.template), cwd=tmp, stdout=out,
                           stderr=subprocess.STDOUT, check=False)
        (self.template / ".warm").write_text(self.commit)


def fresh_run(side: Side, work: Path, case: str) -> Path:
    run = work / "runs" / side.name / case
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(side.template, run / "cache")
    return run


POLLER = """
import sys, time
from pathlib import Path
from pamir.index import Index
ix, start = Path(sys.argv[1]), float(sys.argv[2])
while True:
    try:
        if Index.exists(ix):
            with Index.open(ix) as index:
                if index.search(sys.argv[3], 1):
                    print(round(time.time() - start, 2), flush=True)
                    break
    except Exception:
        pass
    time.sleep(0.25)
"""


def index_run(side: Side, folder: Path, work: Path, case: str, log: Path,
              first_answer: bool = False) -> dict:
    """`pamir index FOLDER --json` from an empty index, timed as a whole (see the doc)."""
    run = fresh_run(side, work, case)
    env = side.env(run / "cache")
    cmd = ["/usr/bin/time", "-v", sys.executable, "-c", PAMIR, "index", str(folder),
           "--index", str(run / "index"), "--json"]
    with open(run / "report.json", "w") as out, open(run / "stderr.txt", "w") as err:
        start = time.time()
        child = subprocess.Popen(cmd, cwd=run, env=env, stdout=out, stderr=err)
        memory = TreeMemory(child.pid)
        memory.start()
        poller = None
        if first_answer:
            poller = subprocess.Popen([sys.executable, "-c", POLLER, str(run / "index"),
                                       str(start), QUERY], cwd=run, env=env,
                                      stdout=subprocess.PIPE, text=True)
        child.wait()
        seconds = time.time() - start
        memory.done.set()
    memory.join()
    answered = None
    if poller is not None:
        try:
            answered = float(poller.communicate(timeout=30)[0].strip() or "nan")
        except (subprocess.TimeoutExpired, ValueError):
            poller.kill()
    stderr = (run / "stderr.txt").read_text()
    with open(log, "a") as f:
        f.write(f"\n$ pamir index {folder} ({side.name})\n{stderr[-4000:]}")
    if child.returncode:
        raise RuntimeError(f"{side.name}: pamir index {folder} failed (see {log})")
    timed = dict(re.findall(r"^\s*([^:\n]+): (.+)$", stderr, re.M))
    report = json.loads((run / "report.json").read_text())
    photos = report.get("added", 0)
    out = {"photos": photos, "failed": len(report.get("failed", [])),
           "seconds": round(seconds, 2),
           "photos_per_second": round(photos / seconds, 2) if photos else None,
           "cpu_seconds": round(float(timed["User time (seconds)"])
                                + float(timed["System time (seconds)"]), 1),
           "peak_rss_mb": round(int(timed["Maximum resident set size (kbytes)"]) / 1024),
           "peak_tree_rss_mb": round(memory.peak / 2**20),
           "passes": {k: v.get("seconds") for k, v in report.items()
                      if isinstance(v, dict) and "seconds" in v},
           "found": {k: v.get("with_facts") for k, v in report.items()
                     if isinstance(v, dict) and "with_facts" in v}}
    if first_answer:
        out["first_answer_seconds"] = answered
        out["all_done_seconds"] = round(seconds, 2)
    shutil.rmtree(run)
    return out


# ------------------------------------------------------------------------------ watching

class Watching:
    """A running `pamir watch` of a folder (every pass); its lines kept."""

    def __init__(self, side: Side, work: Path, seed: list[Path]):
        self.run = fresh_run(side, work, "watch")
        self.folder, self.index = self.run / "folder", self.run / "index"
        self.folder.mkdir()
        for p in seed:
            shutil.copy(p, self.folder / p.name)
        self.env = side.env(self.run / "cache")
        self.proc = subprocess.Popen([sys.executable, "-c", PAMIR, "watch", str(self.folder),
                                      "--index", str(self.index)], env=self.env, cwd=self.run,
                                     stderr=subprocess.STDOUT, stdout=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.caught_up = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.caught_up.wait(600):
            raise RuntimeError("pamir watch did not catch up:\n" + "\n".join(self.lines))

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            if "(caught up)" in line:
                self.caught_up.set()

    def search(self, word: str) -> tuple[str, float]:
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", PAMIR, "search", word, "--index",
                              str(self.index), "-k", "50"], env=self.env, cwd=self.run,
                             capture_output=True, text=True)
        return out.stdout, time.perf_counter() - t0

    def found_after(self, source: Path, name: str, word: str, limit: float = 120) -> dict:
        """Copy `source` in as `name`; the seconds until a search of `word` lists it."""
        searches = []
        t0 = time.perf_counter()
        shutil.copy(source, self.folder / f".{name}.part")
        os.rename(self.folder / f".{name}.part", self.folder / name)  # as a copy lands
        while time.perf_counter() - t0 < limit:
            out, took = self.search(word)
            searches.append(round(took, 2))
            if f"/{name}" in out:
                return {"seconds": round(time.perf_counter() - t0, 2), "searches": searches}
        return {"seconds": None, "searches": searches}

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.run, ignore_errors=True)


def measure_watch(side: Side, work: Path, media_dirs: dict, args) -> dict:
    """The watcher's delays (see the module's doc)."""
    corel = corel_pictures()
    w = Watching(side, work, corel[:5])
    try:
        pictures, videos = [], []
        for i in range(args.drops):
            word = f"quillfern{i}"  # in no dictionary: `pamir search` embeds it itself
            with tempfile.TemporaryDirectory() as tmp:
                source = Path(tmp) / "p.jpg"
                shutil.copy(corel[100 + 37 * i], source)
                subprocess.run(["exiftool", "-q", "-overwrite_original",
                                f"-IPTC:Keywords={word}", str(source)], check=True)
                pictures.append({"word": word, **w.found_after(source, f"drop-{i}.jpg", word)})
            time.sleep(2)
        for i, video in enumerate(sorted(media_dirs["video"].glob("*.mp4"))[:args.videos]):
            videos.append({"word": QUERY, **w.found_after(video, f"clip-{i}.mp4", QUERY)})
            time.sleep(2)
        return {"pictures": pictures, "videos": videos, "said": w.lines[-40:]}
    finally:
        w.stop()


# ------------------------------------------------------------------------------ the run

def measure(args) -> dict:
    work = Path(args.work).resolve()
    run = Run("camera_roll.py", sys.argv[1:])
    media_dirs = build_all(work, args)
    log = work / "camera_roll.log"
    sides = [Side("old", Path(args.old_tree).resolve(), work), Side("new", ROOT, work)]
    for s in sides:
        s.warm(log)
    r = {"run": run.info(), "cpu_flags": cpu_flags(),
         "sides": {s.name: {"src": str(s.src), "commit": s.commit} for s in sides},
         "media": {k: describe(v) for k, v in media_dirs.items()}, "cases": {}}
    parts = args.parts.split(",")
    for case in ("jpeg", "heic", "roll"):
        if case not in parts:
            continue
        r["cases"][case] = {}
        for s in sides:
            print(f"{case} {s.name} ...", flush=True)
            r["cases"][case][s.name] = index_run(s, media_dirs[case], work, case, log,
                                                 first_answer=case == "roll")
            print(f"  {r['cases'][case][s.name]}", flush=True)
    if "watch" in parts:
        r["watch"] = measure_watch(sides[1], work, media_dirs, args)
    r["run"] = {**r["run"], "minutes": run.minutes()}
    r["run"]["load_average"]["end"] = run.info()["load_average"]["end"]
    return r


def cpu_flags() -> str:
    """The vector extensions the CPU reports (what the kernels may use)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    flags = set(re.search(r"^flags\s*:(.*)$", text, re.M).group(1).split())
    return " ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni") if f in flags)


def _options(ap) -> None:
    ap.add_argument("--work", default=str(WORK))
    ap.add_argument("--old-tree", default="/work/wt-old96",
                    help=f"the old code's checkout (git worktree add DIR {OLD})")
    ap.add_argument("--jpegs", type=int, default=300)
    ap.add_argument("--heics", type=int, default=20)
    ap.add_argument("--roll", type=int, default=2000)
    ap.add_argument("--drops", type=int, default=5)
    ap.add_argument("--videos", type=int, default=2)
    ap.add_argument("--parts", default="jpeg,heic,roll,watch")
    ap.add_argument("--build-only", action="store_true", help="build the media and stop")
    ap.add_argument("--stem", default=STEM, help="results/STEM.json and .md (a part alone)")


def main(argv=None) -> None:
    args = report_cli(__doc__, STEM, report, argv, options=_options)
    if args is None:
        return
    if args.build_only:
        for kind, folder in build_all(Path(args.work).resolve(), args).items():
            print(kind, folder, describe(folder))
        return
    save_report(args.stem, measure(args), report)


# ------------------------------------------------------------------------------ the report

def _mb(v) -> str:
    return "–" if v is None else f"{v:,}"


def report(r: dict) -> str:
    head = dict(r["run"])
    head["machine"] = f"{head['machine']} ({r.get('cpu_flags', '')})"
    lines = [*report_head("A camera roll: `pamir index` and `pamir watch`, old and new (issue 52)",
                          head), ""]
    sides = r["sides"]
    lines += [f"Sides: **old** = {sides['old']['src']} ({sides['old']['commit']}); **new** = "
              f"{sides['new']['src']} ({sides['new']['commit']}). Media: "
              + "; ".join(f"{k} {v['files']:,} files of {v['mean_mb']} MB"
                          for k, v in r["media"].items()) + ".", "",
              "JSON keys: cases.{jpeg,heic,roll}.{old,new}.{photos, seconds, photos_per_second, "
              "cpu_seconds, peak_rss_mb, peak_tree_rss_mb, passes, found}; cases.roll.*."
              "{first_answer_seconds, all_done_seconds}; watch.{pictures,videos}[].{word, "
              "seconds, searches}.", "",
              "| case | side | photos | seconds | photos/s | CPU s | peak MB (largest / tree) "
              "| first answer s | passes s |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for case, by_side in r["cases"].items():
        for side, m in by_side.items():
            passes = ", ".join(f"{k} {v}" for k, v in m["passes"].items())
            lines.append(f"| {case} | {side} | {m['photos']:,} | {m['seconds']:,.1f} | "
                         f"{m['photos_per_second']} | {m['cpu_seconds']:,} | "
                         f"{_mb(m['peak_rss_mb'])} / {_mb(m['peak_tree_rss_mb'])} | "
                         f"{m.get('first_answer_seconds', '–')} | {passes} |")
    lines += ["", "Against the targets:", "", "| figure | measured | target | met |",
              "|---|---:|---:|---|"]
    lines += [_target_row(*t) for t in targets(r)]
    if r.get("watch"):
        w = r["watch"]
        lines += ["", "`pamir watch` (new code, every pass): seconds from a file's copy until "
                  "`pamir search WORD -k 50` lists it (each search's own seconds after):", ""]
        for kind in ("pictures", "videos"):
            for x in w[kind]:
                lines.append(f"- {kind[:-1]} `{x['word']}`: **{x['seconds']}** s (searches: "
                             f"{', '.join(map(str, x['searches']))})")
    return "\n".join(lines) + "\n"


def targets(r: dict) -> list[tuple]:
    out = []
    jpeg = r["cases"].get("jpeg")
    if jpeg:
        ratio = jpeg["new"]["photos_per_second"] / jpeg["old"]["photos_per_second"]
        out.append(("300 JPEGs, new photos/s over old's", round(ratio, 2), "≥ 2.0",
                    ratio >= TARGETS["jpeg_ratio"]))
        peak = max(jpeg["new"]["peak_rss_mb"], jpeg["new"]["peak_tree_rss_mb"])
        out.append(("300 JPEGs, new peak MB", peak, "≤ 1,536", peak <= TARGETS["jpeg_peak_mb"]))
    heic = r["cases"].get("heic")
    if heic:
        v = heic["new"]["photos_per_second"]
        out.append(("20 HEICs, new photos/s", v, "≥ 2", v >= TARGETS["heic_photos_per_second"]))
    w = r.get("watch")
    if w:
        for kind, key in (("videos", "video_seconds"), ("pictures", "picture_seconds")):
            worst = max((x["seconds"] or float("inf")) for x in w[kind]) if w[kind] else None
            out.append((f"watch: slowest {kind[:-1]} found, s", worst, f"≤ {TARGETS[key]:g}",
                        worst is not None and worst <= TARGETS[key]))
    return out


def _target_row(what, value, target, met) -> str:
    return f"| {what} | {value} | {target} | {'yes' if met else '**no**'} |"


if __name__ == "__main__":
    main()
