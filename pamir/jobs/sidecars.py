"""Writing back: what pamir knows of a picture, in the XMP sidecar that people's other tools
read, never in the picture itself (`pamir annotate --xmp`, `pamir index --write-xmp`).

What is written (`Known`: `known_of_pictures` for `pamir annotate`, `write_index_sidecars`
for an index's pictures):

- pamir's words: the model's words whose calibrated probability reaches WORD_PROBABILITY
  (with no model, the folder's own words, pamir.zeroshot.folder, and ImageNet's words, whose
  probability is calibrated on Corel 5k's captions: `confident_words`), in
  dc:subject and, under the parent keyword `pamir` (pamir.facts.metadata.GUESS_PARENT), in
  lr:hierarchicalSubject (`pamir|tiger`; digiKam:TagsList `pamir/tiger` where the sidecar
  has that field): digiKam and Lightroom show them under a keyword "pamir", apart from the
  person's, where they delete one or move it out to keep it;
- people: named faces as MWG regions (mwg-rs:Regions, a normalised box whose x, y is its
  centre, in the picture as stored, Type "Face"), as digiKam and Lightroom write them: the
  names an editor gave in pamir (mwg-rs:Description "pamir: confirmed") and those pamir
  carried to a face with a confidence of NAME_CONFIDENCE or more ("pamir: guessed 0.93");
- the place its GPS position names (pamir.facts.places): photoshop:City, photoshop:State,
  photoshop:Country and Iptc4xmpCore:Location (the nearest populated place).

Which sidecar (SIDECAR_NAMES, $PAMIR_XMP_SIDECAR): digiKam and darktable read NAME.EXT.xmp,
Lightroom NAME.xmp (for raw files), Immich either. NAME.EXT.xmp is the default: a camera's
RAW+JPEG pair (IMG_1.CR2, IMG_1.JPG) shares one NAME.xmp, which Lightroom keeps for the raw
file, so pamir's words of the JPEG would land in the raw file's sidecar. "NAME.xmp" or
"both" pick the others.

Merging (pamir.facts.xmp.merge_xmp): an existing sidecar keeps every field it had; pamir's own
earlier words and regions are replaced and nobody else's; a place field already there is
kept (the person's or pamir's earlier, from the same position). A new sidecar starts as a
copy of the picture's embedded XMP, as exiftool's `-o NAME.xmp` and digiKam make one, since
tools that find a sidecar read it in place of the picture's XMP. The result is written
atomically (temporary file, fsync, rename: pamir.storage), and not at all when it is the
same bytes. A sidecar that is not XMP pamir can read (broken, hostile, too large) is left
alone, with a message.

Why XML with defusedxml, as pamir.facts.metadata reads it, and not a library of XMP: it installs
with the base package on every platform (pyexiftool needs the exiftool program on every
user's machine, python-xmp-toolkit the Exempi library), and it parses a person's files with
no native code (no DTDs, no entities, a size cap), where pyexiv2 would parse them with Exiv2's
C++ inside pamir's process. RDF/XML is all a sidecar is; the tests read every sidecar back
with exiftool and check other tools' fields kept.

Round trip: pamir.facts.metadata reads a `pamir|` word as pamir's guess and pamir.facts.people.regions
skips a guessed region, so `pamir index` and `pamir fit` learn only what the person kept.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ..facts.fact import detail_of
from ..facts.metadata import (MAX_XMP_BYTES, embedded_xmp, iptc_keywords, open_picture,
                              read_metadata)
from ..facts.places import place_of
from ..facts.xmp import PLACE_FIELDS, Face, Known, SidecarError, is_packet, merge_xmp
from ..index import Index
from ..storage import atomic_write_bytes
from ..zeroshot.classes import WRITE_PROBABILITY, is_zero_caption
from .annotation import keywords_of_rows

#: The least calibrated probability of a word pamir writes ($PAMIR_XMP_PROBABILITY changes
#: it). The goal was the smallest at which 90 % of the words written on Corel 5k's validation
#: pictures are right; none is (benchmarks/results/sidecars.md: precision climbs to 72 % at
#: 0.6 and stays about there until almost no word is written), so the most precise that
#: still gives half the pictures a word: 0.6, 72 % right on validation, 74 % on test, where
#: a right word missing from Corel's short captions counts wrong.
WORD_PROBABILITY = 0.6
PROBABILITY_ENV = "PAMIR_XMP_PROBABILITY"
#: The least confidence of a name pamir carried to a face (pamir.facts.people.naming's calibrated
#: name_confidence) for it to be written: the words' bar of 90 % right.
NAME_CONFIDENCE = 0.9
#: Pictures whose words are computed at a time by `pamir index --write-xmp`.
WORDS_BATCH = 256
#: How a face was named (pamir.facts.people.who) -> whether it is written as confirmed: an editor's
#: naming, or a name the person's files gave (a region, a People tag, a keyword of a picture
#: with one face); a name carried by likeness is a guess. Others (unnamed) are not written.
_FACE_HOW = {"editor": True, "region": True, "tag": True, "keyword": True, "carried": False}
#: The sidecar names a setting picks from, and the default (the module's doc says why).
SIDECAR_NAMES = ("NAME.EXT.xmp", "NAME.xmp", "both")
DEFAULT_SIDECAR_NAME = "NAME.EXT.xmp"
SIDECAR_ENV = "PAMIR_XMP_SIDECAR"


@dataclass
class SidecarReport:
    """What a round of writing did: sidecars written, already as they should be, left alone
    (with why), and pictures with nothing to write."""

    written: list[str] = field(default_factory=list)
    unchanged: int = 0
    nothing: int = 0
    left_alone: list[tuple[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"written": len(self.written), "unchanged": self.unchanged,
                "nothing_to_write": self.nothing,
                "left_alone": [{"path": p, "reason": r} for p, r in self.left_alone]}


# ------------------------------------------------------------------------------ settings
def word_probability(setting: float | None = None) -> float:
    """The least probability of a word written: `setting`, else $PAMIR_XMP_PROBABILITY,
    else WORD_PROBABILITY."""
    value = setting if setting is not None else os.environ.get(PROBABILITY_ENV)
    if value is None or value == "":
        return WORD_PROBABILITY
    try:
        p = float(value)
    except ValueError:
        p = -1.0
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"the least probability of a word written into XMP sidecars, "
                         f"{value!r}: a number from 0 to 1 (${PROBABILITY_ENV})")
    return p



def sidecar_name(setting: str | None = None) -> str:
    """The sidecar convention: `setting`, else $PAMIR_XMP_SIDECAR, else NAME.EXT.xmp."""
    name = setting or os.environ.get(SIDECAR_ENV) or DEFAULT_SIDECAR_NAME
    if name not in SIDECAR_NAMES:
        raise ValueError(f"XMP sidecar name {name!r}: one of {', '.join(SIDECAR_NAMES)} "
                         f"(--xmp-name or ${SIDECAR_ENV})")
    return name


def sidecar_targets(picture: str | Path, setting: str | None = None) -> list[Path]:
    """The sidecars pamir writes for a picture: PICTURE.EXT.xmp, PICTURE.xmp or both. An
    existing one spelt .XMP is that one."""
    picture = Path(picture)
    name = sidecar_name(setting)
    out = []
    if name in ("NAME.EXT.xmp", "both"):
        out.append(Path(f"{picture}.xmp"))
    if name in ("NAME.xmp", "both"):
        out.append(picture.with_suffix(".xmp"))
    return [p if p.exists() or not p.with_suffix(".XMP").exists() else p.with_suffix(".XMP")
            for p in out]


# ------------------------------------------------------------------------------ writing
def write_xmp(picture: str | Path, known: Known, setting: str | None = None
              ) -> list[tuple[str, str]]:
    """Merge `known` into the picture's sidecars (sidecar_targets) and write each that
    changed, atomically: [(sidecar, "written" | "unchanged" | "nothing" | why it was left
    alone)]. Never raises for what a file holds."""
    out = []
    for target in sidecar_targets(picture, setting):
        try:
            old = _read_existing(target)
            if old is None and not known:
                out.append((str(target), "nothing"))
                continue
            base = old if old is not None else _embedded_xmp(Path(picture))
            theirs = iptc_keywords(Path(picture)) if old is None else ()
            new = merge_xmp(base, known, _picture_geometry(Path(picture)), theirs)
            if new == old:
                out.append((str(target), "unchanged"))
                continue
            atomic_write_bytes(target, new)
            out.append((str(target), "written"))
        except SidecarError as e:
            out.append((str(target), str(e)))
        except OSError as e:
            out.append((str(target), f"not written: {e.strerror or e}"))
    return out


def _read_existing(target: Path) -> bytes | None:
    try:
        size = target.stat().st_size
    except FileNotFoundError:
        return None
    if size > MAX_XMP_BYTES:
        raise SidecarError(f"{size:,} bytes, over the {MAX_XMP_BYTES:,} pamir reads; left "
                           "alone")
    return target.read_bytes()


def _embedded_xmp(picture: Path) -> bytes | None:
    """The picture's own XMP packet, which a new sidecar starts from (None: none, or not
    readable XMP)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with open_picture(picture) as im:
                xmp = embedded_xmp(im, str(picture), [])  # over the cap: none
    except Exception:  # noqa: BLE001 - no readable header: the sidecar starts empty
        return None
    return xmp if xmp and is_packet(xmp) else None


def _picture_geometry(picture: Path) -> tuple[int, tuple[int, int], tuple[int, int]]:
    """(EXIF orientation, size as stored, size as shown) of the picture, from its header."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with open_picture(picture) as im:
                orientation, stored = im.getexif().get(0x0112, 1), im.size
    except Exception:  # noqa: BLE001 - unreadable: regions are written as stored, unsized
        return 1, (0, 0), (0, 0)
    orientation = orientation if orientation in range(1, 9) else 1
    return orientation, stored, stored[::-1] if orientation >= 5 else stored


# ------------------------------------------------------------------------------ what is known
def write_bars(threshold: float | None = None, *, zero_caption: bool = False,
               folder=None) -> dict:
    """{a word's source: the least probability of the words of that source written}: source
    None, a fitted model's words, at `threshold` (word_probability: WORD_PROBABILITY, or
    $PAMIR_XMP_PROBABILITY). With no model (zero_caption), ImageNet's words ("imagenet") at
    pamir.zeroshot.classes.WRITE_PROBABILITY, chosen on Corel 5k's validation pictures, and
    the folder's own ("folder"; folder: its pamir.zeroshot.folder.FolderWords) at the bar
    chosen on its held-out tagged pictures (pamir.zeroshot.folder.write_bar; none where no
    bar is right half the time; WORD_PROBABILITY for words learnt before bars were chosen),
    and where the folder has words, ImageNet's at the bar its tags chose for them
    (pamir.zeroshot.folder.imagenet_bar; none where no bar is right half the time there);
    a threshold given, or $PAMIR_XMP_PROBABILITY, sets them all."""
    p = word_probability(threshold)
    if not zero_caption:
        return {None: p}
    if threshold is not None or os.environ.get(PROBABILITY_ENV):
        return {"imagenet": p, "folder": p}
    bars = {"imagenet": WRITE_PROBABILITY}
    if folder is not None:
        chosen = folder.held_out.get("write")
        bar = WORD_PROBABILITY if chosen is None else chosen["bar"]
        if bar is not None:
            bars["folder"] = bar
        if chosen is not None and "imagenet" in chosen:  # judged by the folder's own tags
            if chosen["imagenet"]["bar"] is None:
                del bars["imagenet"]
            else:
                bars["imagenet"] = chosen["imagenet"]["bar"]
    return bars


def confident_words(keywords: list[dict], threshold: float | None = None, *,
                    bars: dict | None = None) -> list[str]:
    """The words of a picture's keyword records (pamir.jobs.annotation.keyword_records) whose
    calibrated probability reaches the bar of their source (bars, `write_bars`; by default
    a fitted model's words at `threshold`). Never facts (they are facts), nor words without
    a probability (a system with no calibration)."""
    bars = bars if bars is not None else write_bars(threshold)
    return [w["word"] for w in keywords if w.get("source") in bars
            and w.get("probability") is not None and w["probability"] >= bars[w.get("source")]]


def place_fields(facts) -> dict[str, str]:
    """A picture's place facts (pamir.facts.places.place_facts) as the XMP fields written."""
    levels = {}
    for f in facts:
        if f.kind == "place":
            d = detail_of(f)
            levels.setdefault(d.get("level"), str(d.get("shown") or f.word))
    return _fields(levels.get("place") or levels.get("city"), levels.get("city"),
                   levels.get("region"), levels.get("country"))


def position_place_fields(position) -> dict[str, str]:
    """The XMP place fields of a GPS position (lat, lon), named by pamir.facts.places; {} for none."""
    place = place_of(*position) if position is not None else None
    if place is None:
        return {}
    return _fields(place.name, place.city, place.region, place.country)


def _fields(location, city, state, country) -> dict[str, str]:
    values = dict(zip(PLACE_FIELDS, (city, state, country, location)))
    return {k: v for k, v in values.items() if v}


def index_faces(index, picture_id: int, names: dict[int, str] | None = None,
                confidence: float = NAME_CONFIDENCE) -> list[Face]:
    """The named faces of an indexed picture that are written (_FACE_HOW; a carried name at
    `confidence` or more). names: {person id: name} (people_names), read once for many."""
    names = people_names(index) if names is None else names
    out = []
    for f in index.faces(picture=picture_id):
        confirmed = _FACE_HOW.get(f.how)
        name = names.get(f.person) if f.person is not None else None
        if confirmed is None or not name or (not confirmed and f.confidence < confidence):
            continue
        out.append(Face(name, tuple(f.box), confirmed, float(f.confidence)))
    return out


def people_names(index) -> dict[int, str]:
    """{person id: the name shown} of an index's named people, merged ones by the name of
    the one they were merged into."""
    rows = index.all_people()
    out = {}
    for pid in rows:
        seen, at = set(), pid
        while rows.get(at) and rows[at][2] is not None and at not in seen:
            seen.add(at)
            at = rows[at][2]
        name, shown, _ = rows.get(at, (None, None, None))
        if shown or name:
            out[pid] = shown or name
    return out


def known_of_pictures(paths, keywords: list[list[dict]], index=None, bars=None
                      ) -> list[Known]:
    """What `pamir annotate --xmp` writes of each picture: its words of `keywords`
    (pamir.jobs.annotation.annotate_pictures') at their source's bar (`confident_words`);
    with an `index` that holds it, its named faces and place facts; else the place its GPS
    position names."""
    names = people_names(index) if index is not None else {}
    out = []
    for path, records in zip(paths, keywords):
        picture_id = index.id_of_path(str(path)) if index is not None else None
        if picture_id is not None:
            faces, place = index_faces(index, picture_id, names), \
                place_fields(index.facts_of(picture_id))
        else:
            faces, place = [], position_place_fields(read_metadata(path).position)
        out.append(Known(confident_words(records, bars=bars), faces, place))
    return out


def write_index_sidecars(index_dir, folders=(), setting: str | None = None,
                         threshold: float | None = None) -> SidecarReport:
    """`pamir index --write-xmp`, after its passes: the sidecars of the pictures of the index
    in `index_dir` (opened to read) under `folders` (every picture where none is given)."""
    sidecar_name(setting)  # a wrong setting fails before any work
    with Index.open(index_dir) as index:
        return write_sidecars_of(index, folders, setting, threshold)


def write_sidecars_of(index, folders=(), setting: str | None = None,
                      threshold: float | None = None) -> SidecarReport:
    """The sidecars of the pictures of an open index (pamir.index.Index) under `folders`
    (all where none is given), each with its model's words at `threshold` (None:
    word_probability()), its named faces and its place: for a job that holds the index
    already (a watcher after a batch)."""
    sidecar_name(setting)
    word_probability(threshold)  # a wrong setting fails before any work
    roots = [os.path.abspath(f).rstrip(os.sep) + os.sep for f in folders]
    report = SidecarReport()
    names = people_names(index)
    pictures = [p for p in index.pictures("ok")
                if not roots or os.path.abspath(p.path).startswith(tuple(roots))]
    bars = _index_bars(index, threshold)  # once: the folder look is read from disk
    for start in range(0, len(pictures), WORDS_BATCH):
        batch = pictures[start:start + WORDS_BATCH]
        for picture, words in zip(batch, _index_words(index, batch, bars)):
            known = Known(words, index_faces(index, picture.id, names),
                          place_fields(index.facts_of(picture.id)))
            _count(report, write_xmp(picture.path, known, setting))
    return report


def _bare(index) -> bool:
    """Whether the index is a bare folder's (no model: ImageNet's class rows)."""
    return is_zero_caption(index.model_fingerprint) and bool(index.classes)


def _index_bars(index, threshold: float | None):
    """The bars an index's words are written at (`write_bars`: a model's at `threshold`; of a
    bare folder's index, ImageNet's words and the folder's words each at its own unless
    `threshold` is given)."""
    if not _bare(index):
        return write_bars(threshold)
    # the folder look's reader imports scipy and the models (0.4 s): only for a bare index,
    # not wherever `pamir annotate --xmp` starts
    from .folder_look import folder_words  # noqa: PLC0415

    return write_bars(threshold, zero_caption=True, folder=folder_words(index))


def _index_words(index, pictures, bars) -> list[list[str]]:
    """The words written of indexed pictures: their stored rows' words at `bars`
    (`_index_bars`), a batch at a time (the calibration reads its reference once a call)."""
    bare = _bare(index)
    if not bare and (not index.vocabulary or index.calibration is None):
        return [[] for _ in pictures]
    rows = [index.vector(p.id, classes=bare) for p in pictures]
    P = [r[index.T:] for r in rows] if bare else None
    return [confident_words(records, bars=bars) for records in
            keywords_of_rows([r[:index.T] for r in rows], index.vocabulary,
                             index.calibration, P, folder=bare)]


def _count(report: SidecarReport, results) -> None:
    for target, what in results:
        if what == "written":
            report.written.append(target)
        elif what == "unchanged":
            report.unchanged += 1
        elif what == "nothing":
            report.nothing += 1
        else:
            report.left_alone.append((target, what))


__all__ = ["DEFAULT_SIDECAR_NAME", "Face", "Known", "NAME_CONFIDENCE", "PROBABILITY_ENV",
           "SIDECAR_ENV", "SIDECAR_NAMES", "SidecarReport", "WORD_PROBABILITY", "confident_words",
           "index_faces", "known_of_pictures", "people_names", "place_fields",
           "position_place_fields", "sidecar_name", "sidecar_targets", "word_probability",
           "write_bars", "write_index_sidecars", "write_sidecars_of", "write_xmp"]
