"""What a picture's files already say about it: keywords, a free-text caption, the date taken,
the GPS position and the camera.

The one home for reading them (longer than 600 lines for that: the sidecars', XMP's,
IPTC's and EXIF's readers share one precedence and one set of safety limits; other readers
of XMP, pamir.facts.people.regions and pamir.jobs.sidecars, use its `xmp_sidecars`, `embedded_xmp`
and `parse_xmp`). `read_metadata(path)` looks, in this order of precedence, at

1. sidecars beside the picture: `NAME.EXT.xmp` (darktable, digiKam), `NAME.xmp` (Lightroom),
   Google Takeout's `NAME.EXT.json` (its "description");
2. fields embedded in the picture: IPTC Keywords, XMP dc:subject, lr:hierarchicalSubject
   (the leaf and each level), digiKam TagsList, Microsoft XPKeywords; else free text:
   EXIF ImageDescription, XMP dc:description, IPTC Caption-Abstract.

The first of these that holds words is the caption; a captions table, when given, wins over
all of them (the caller decides that). Keywords become words as a table's `keywords` column
does (`split_keywords`), free text as its `caption` column does (`tokenize`).

The date taken: EXIF DateTimeOriginal (with OffsetTimeOriginal when present), else XMP
photoshop:DateCreated (sidecar, then embedded), else the file's mtime. It is kept as the
wall-clock time written in the picture, ISO 8601 ("2019-07-14T10:31:00", "+02:00" added when
the offset is known): `date:2019-07` means the July of the place the picture was taken.

The GPS position, from the first of: the sidecars (XMP exif:GPSLatitude/GPSLongitude, Google
Takeout's geoData), then EXIF GPS (GPSLatitude/GPSLongitude with their N/S/E/W refs), then the
embedded XMP exif:GPS*. A position that is not one (NaN, out of range, garbage) is skipped
with a note and the next source is read; exactly 0,0 (what cameras and Takeout write for "no
fix") counts as none, with a note, unless EXIF GPSStatus says the measurement was active.
pamir.facts.places names the position. The camera: EXIF Make and Model ("Canon EOS 5D").

Keywords pamir wrote itself (pamir.jobs.sidecars: `pamir|tiger` in lr:hierarchicalSubject, `pamir/tiger`
in digiKam:TagsList, "tiger" in dc:subject) are pamir's guesses, not the person's: a word
whose only place in a keyword hierarchy is under GUESS_PARENT is left out of every keyword
field of the picture (`guessed_words`), so that pamir never learns from its own guesses. A
word the person moved out of `pamir|` (to `Animals|tiger`, or to a plain keyword after
deleting `pamir|tiger`) is theirs again.

The reader is Pillow, already a dependency: opening a picture reads its header (EXIF, IPTC
and the XMP packet) and decodes no pixels. XMP is parsed with defusedxml (no DTDs, no
entities), after a size cap; anything broken or hostile gives no caption and a note, never an
exception (docs/usage.md, "Keywords your tools already wrote", says why this reader).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import warnings
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from defusedxml import ElementTree as SafeET
from PIL import Image, IptcImagePlugin, UnidentifiedImageError

from ..features.images import register_formats
from ..text.words import STOP_WORDS, split_keywords, tokenize
from .video import is_video, read_container_facts

#: XMP packets and sidecars larger than this are not parsed (a real one is a few kB; XMP
#: embedded in a JPEG is at most 64 kB).
MAX_XMP_BYTES = 1 << 20
#: Google Takeout's JSON sidecars are under a kilobyte or two.
MAX_JSON_BYTES = 1 << 20

_RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_LR = "{http://ns.adobe.com/lightroom/1.0/}"
_DIGIKAM = "{http://www.digikam.org/ns/1.0/}"
_PHOTOSHOP = "{http://ns.adobe.com/photoshop/1.0/}"
_EXIF_NS = "{http://ns.adobe.com/exif/1.0/}"

#: XMP properties read: (element, name in reports, kind): kind "keywords", "levels"
#: (a hierarchy: each level is a word) or "text".
_XMP_FIELDS = (
    (_DC + "subject", "XMP dc:subject", "keywords"),
    (_LR + "hierarchicalSubject", "XMP lr:hierarchicalSubject", "levels"),
    (_DIGIKAM + "TagsList", "XMP digiKam:TagsList", "levels"),
    (_DC + "description", "XMP dc:description", "text"),
)

#: The parent keyword of the words pamir writes into sidecars (pamir.jobs.sidecars), so that a
#: person tells them apart in their tool's keyword tree and can delete them or keep one.
GUESS_PARENT = "pamir"

_EXIF_IFD = 0x8769
_IMAGE_DESCRIPTION = 0x010E
_XP_KEYWORDS = 0x9C9E
_DATE_TIME_ORIGINAL = 0x9003
_OFFSET_TIME_ORIGINAL = 0x9011
_MAKE = 0x010F
_MODEL = 0x0110
_GPS_IFD = 0x8825
_GPS_LATITUDE_REF, _GPS_LATITUDE, _GPS_LONGITUDE_REF, _GPS_LONGITUDE = 1, 2, 3, 4
_GPS_STATUS = 9
_IPTC_KEYWORDS = (2, 25)
_IPTC_CAPTION = (2, 120)


@dataclass
class PictureMetadata:
    """What `read_metadata` found. caption: the caption's words (None: uncaptioned);
    source: where they came from ("sidecar NAME.xmp", "IPTC Keywords", ...); taken: ISO
    date-time; taken_from: "EXIF DateTimeOriginal", "XMP photoshop:DateCreated" or "file
    date"; position: (latitude, longitude) in degrees, north and east positive;
    position_from: "EXIF GPS", "XMP exif:GPSLatitude", "sidecar NAME.xmp", "sidecar
    NAME.EXT.json" (Google Takeout's geoData), ...; camera: EXIF Make and Model ("Canon EOS
    5D"); sidecars: the sidecars' names, sizes and mtimes (a change means reading again);
    notes: what could not be read, one line each."""

    caption: tuple[str, ...] | None = None
    source: str | None = None
    taken: str | None = None
    taken_from: str | None = None
    position: tuple[float, float] | None = None
    position_from: str | None = None
    camera: str | None = None
    sidecars: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class _Fields:
    """The fields one place (a sidecar, the picture itself) holds."""

    keywords: list[tuple[str, list[str]]] = field(default_factory=list)  # (source, keywords)
    hierarchies: list[str] = field(default_factory=list)  # lr:hierarchicalSubject, TagsList
    texts: list[tuple[str, str]] = field(default_factory=list)  # (source, free text)
    exif_taken: str | None = None  # EXIF DateTimeOriginal, ISO
    xmp_taken: str | None = None  # XMP photoshop:DateCreated, ISO
    exif_position: tuple[float, float] | None = None  # EXIF GPS, checked
    xmp_position: tuple[float, float] | None = None  # XMP exif:GPS* or Takeout's geoData
    camera: str | None = None  # EXIF Make + Model, tidied

    def caption(self, stop_words, guessed: frozenset = frozenset()
                ) -> tuple[tuple[str, ...] | None, str | None]:
        """Keywords if any (every keyword field together, pamir's `guessed` words left out),
        else the first free text."""
        sources, words = [], []
        for source, kws in self.keywords:
            got = split_keywords(", ".join(k for k in kws if k.strip().casefold() not in guessed))
            if got:
                sources.append(source)
                words += got
        if words:
            return tuple(dict.fromkeys(words)), " + ".join(dict.fromkeys(sources))
        for source, text in self.texts:
            got = tokenize(text, stop_words)
            if got:
                return tuple(dict.fromkeys(got)), source
        return None, None


def _sidecar_stats(path: str) -> list[tuple[str, os.stat_result]]:
    """The sidecars a picture has, most specific first, with their stat: one stat call per
    candidate name, plain strings (this runs for every picture of every `pamir index`)."""
    base = os.path.splitext(path)[0]
    found, seen = [], set()
    for c in (path + ".xmp", path + ".XMP", base + ".xmp", base + ".XMP", path + ".json",
              path + ".supplemental-metadata.json"):
        try:
            st = os.stat(c)
        except (OSError, ValueError):
            continue
        key = (st.st_dev, st.st_ino)  # NAME.xmp and NAME.XMP on a case-insensitive disk
        if stat.S_ISREG(st.st_mode) and key not in seen:
            seen.add(key)
            found.append((c, st))
    return found


def xmp_sidecars(path: str | Path, notes: list[str]) -> list[tuple[str, bytes]]:
    """The XMP sidecars' packets of a picture, most specific first, each as ("sidecar
    NAME.xmp", its bytes), each read up to MAX_XMP_BYTES (over it: a note, not read)."""
    out = []
    for s, st in _sidecar_stats(os.fspath(path)):
        if s.lower().endswith(".xmp"):
            data = _read_capped(Path(s), st.st_size, MAX_XMP_BYTES, notes)
            if data is not None:
                out.append((f"sidecar {_sidecar_kind(Path(path), Path(s))}", data))
    return out


def sidecar_paths(path: str | Path) -> list[Path]:
    """The sidecars a picture has, most specific first."""
    return [Path(c) for c, _ in _sidecar_stats(os.fspath(path))]


def _signature(stats: list[tuple[str, os.stat_result]]) -> str:
    return "|".join(f"{os.path.basename(c)}:{st.st_size}:{st.st_mtime_ns}" for c, st in stats)


def sidecar_signature(path: str | Path) -> str:
    """Names, sizes and mtimes of the picture's sidecars: changes when one is written,
    added or removed."""
    return _signature(_sidecar_stats(os.fspath(path)))


def read_metadata(path: str | Path, stop_words=STOP_WORDS) -> PictureMetadata:
    """The caption, its source and the date taken of one picture (see the module's doc).
    Never raises for what a file holds: problems become notes."""
    path = Path(path)
    stats = _sidecar_stats(os.fspath(path))
    out = PictureMetadata(sidecars=_signature(stats))
    sidecars = [_read_sidecar(Path(s), st.st_size, out.notes) for s, st in stats]
    embedded = _read_embedded(path, out.notes)
    # pamir's guesses, wherever written, are left out of every field (IPTC's included: a
    # tool that copies XMP keywords into IPTC copies the guesses with no hierarchy)
    guessed = guessed_words([h for f in sidecars + [embedded] for h in f.hierarchies])
    for (s, _), fields in zip(stats, sidecars):
        caption, _source = fields.caption(stop_words, guessed)
        if caption:
            out.caption, out.source = caption, f"sidecar {_sidecar_kind(path, Path(s))}"
            break
    if out.caption is None:
        out.caption, out.source = embedded.caption(stop_words, guessed)
    xmp_dates = [f.xmp_taken for f in sidecars + [embedded] if f.xmp_taken]
    taken = ((embedded.exif_taken, "EXIF DateTimeOriginal") if embedded.exif_taken else
             (xmp_dates[0], "XMP photoshop:DateCreated") if xmp_dates else None)
    video = read_container_facts(path, out.notes) if is_video(path) else (None, None)
    if taken is None and video[0] is not None:
        taken = (_iso(video[0]), "video container")
    if taken is None:
        try:
            taken = (_iso(datetime.fromtimestamp(path.stat().st_mtime)), "file date")
        except (OSError, ValueError, OverflowError):
            taken = None
    if taken:
        out.taken, out.taken_from = taken
    out.position, out.position_from = _first_position(
        [(f"sidecar {_sidecar_kind(path, Path(s))}", f) for (s, _), f in zip(stats, sidecars)]
        + [("EXIF GPS", embedded), ("XMP exif:GPSLatitude", embedded)])
    if out.position is None and video[1] is not None:
        out.position, out.position_from = video[1], "video container"
    out.camera = embedded.camera
    return out


def _first_position(sources):
    """The first position of (name, fields): a sidecar's (XMP or Takeout), then EXIF GPS,
    then the embedded XMP."""
    for name, fields in sources:
        pos = fields.exif_position if name == "EXIF GPS" else fields.xmp_position
        if pos is not None:
            return pos, name
    return None, None


def _sidecar_kind(picture: Path, sidecar: Path) -> str:
    """"NAME.EXT.xmp", "NAME.xmp" or "NAME.EXT.json": how the sidecar is named."""
    if sidecar.name.lower().startswith(picture.name.lower() + "."):
        return "NAME.EXT" + sidecar.name[len(picture.name):].lower()
    return "NAME" + sidecar.suffix.lower()


# ------------------------------------------------------------------------------- sidecars
def _read_capped(path: Path, size: int, limit: int, notes: list[str]) -> bytes | None:
    """The file's bytes, unless its size (from the stat already made) is over the limit."""
    try:
        if size > limit:
            notes.append(f"{path}: {size:,} bytes, over the {limit:,} read for metadata; "
                         "ignored")
            return None
        with open(path, "rb") as f:
            return f.read(limit + 1)[:limit]
    except OSError as e:
        notes.append(f"{path}: unreadable ({e.strerror or e}); ignored")
        return None


def _read_sidecar(path: Path, size: int, notes: list[str]) -> _Fields:
    fields = _Fields()
    if path.suffix.lower() == ".json":
        data = _read_capped(path, size, MAX_JSON_BYTES, notes)
        if data is None:
            return fields
        try:
            rec = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            notes.append(f"{path}: not valid JSON ({e}); ignored")
            return fields
        if isinstance(rec, dict) and isinstance(rec.get("description"), str):
            fields.texts.append(("Google Takeout description", rec["description"]))
        geo = rec.get("geoData") if isinstance(rec, dict) else None
        if isinstance(geo, dict) and ("latitude" in geo or "longitude" in geo):
            fields.xmp_position = checked_position(
                _number(geo.get("latitude")), _number(geo.get("longitude")),
                f"{path}: Google Takeout geoData", notes)
        return fields
    data = _read_capped(path, size, MAX_XMP_BYTES, notes)
    if data is not None:
        _parse_xmp(data, str(path), fields, notes)
    return fields


# ------------------------------------------------------------------------------- XMP
def parse_xmp(data: bytes, where: str, notes: list[str]):
    """An XMP packet's ElementTree root, or None with a note naming `where` (over
    MAX_XMP_BYTES, or not XML pamir reads): the one safe reading of XMP."""
    if _over_cap(data, where, notes):
        return None
    try:
        # defusedxml refuses DTDs, entity declarations and external references: an entity
        # bomb or an XXE packet raises here instead of expanding
        return SafeET.fromstring(data.strip(b"\x00 \t\r\n"))
    except Exception as e:  # noqa: BLE001 - any parse failure: the packet is ignored
        notes.append(f"{where}: XMP not readable ({type(e).__name__}: {e}); ignored")
        return None


def _over_cap(data: bytes, where: str, notes: list[str]) -> bool:
    if len(data) <= MAX_XMP_BYTES:
        return False
    notes.append(f"{where}: XMP packet of {len(data):,} bytes, over the {MAX_XMP_BYTES:,} "
                 "read; ignored")
    return True


def embedded_xmp(im, where: str, notes: list[str]) -> bytes | None:
    """The XMP packet in an opened picture's header (`open_picture`), as bytes; None when
    it has none, or one over MAX_XMP_BYTES (noted, naming `where`)."""
    xmp = im.info.get("xmp") or im.info.get("XML:com.adobe.xmp")
    if isinstance(xmp, str):
        xmp = xmp.encode("utf-8", "surrogatepass")
    return None if not xmp or _over_cap(xmp, where, notes) else xmp


def _parse_xmp(data: bytes, where: str, fields: _Fields, notes: list[str]) -> None:
    """Add an XMP packet's keywords, description and photoshop:DateCreated to `fields`."""
    root = parse_xmp(data, where, notes)
    if root is None:
        return
    for tag, source, kind in _XMP_FIELDS:
        values = _xmp_values(root, tag)
        if not values:
            continue
        if kind == "text":
            fields.texts.append((source, " ".join(values)))
        elif kind == "levels":
            fields.hierarchies += values
            fields.keywords.append((source, [w for v in values if not _is_guess(v)
                                             for w in _levels(v)]))
        else:
            fields.keywords.append((source, values))
    dates = _xmp_values(root, _PHOTOSHOP + "DateCreated")
    if dates and (iso := _iso_text(dates[0])):
        fields.xmp_taken = iso
    lat = _xmp_values(root, _EXIF_NS + "GPSLatitude")
    lon = _xmp_values(root, _EXIF_NS + "GPSLongitude")
    if lat or lon:
        fields.xmp_position = checked_position(
            xmp_coordinate(lat[0], "NS") if lat else None,
            xmp_coordinate(lon[0], "EW") if lon else None,
            f"{where}: XMP exif:GPSLatitude/GPSLongitude {(lat or [''])[0]!r}, "
            f"{(lon or [''])[0]!r}", notes)


def _xmp_values(root, tag: str) -> list[str]:
    """The texts of a property, written as an element (with rdf:li items or text) or as an
    attribute of rdf:Description."""
    out = []
    for el in root.iter(tag):
        items = [li.text.strip() for li in el.iter(_RDF + "li") if li.text and li.text.strip()]
        if items:
            out += items
        elif el.text and el.text.strip():
            out.append(el.text.strip())
    for desc in root.iter(_RDF + "Description"):
        value = desc.get(tag)
        if value and value.strip():
            out.append(value.strip())
    return out


def _is_guess(value: str) -> bool:
    """Whether a hierarchical keyword is under GUESS_PARENT ("pamir|tiger", "pamir")."""
    levels = _levels(value)
    return bool(levels) and levels[0].strip().casefold() == GUESS_PARENT


def guessed_words(hierarchies) -> frozenset[str]:
    """The words (casefolded) that are pamir's guesses, from a picture's hierarchical keywords
    ("Animals|Birds|Peacock", "pamir/tiger"): those whose only place is under GUESS_PARENT,
    and GUESS_PARENT itself where pamir wrote some (Lightroom puts a keyword's parents in
    dc:subject too)."""
    under, elsewhere = set(), set()
    for value in hierarchies:
        levels = [v.strip().casefold() for v in _levels(value)]
        if _is_guess(value):
            under.update(levels)
        else:
            elsewhere.update(levels)
    return frozenset(under - elsewhere)


def _levels(value: str) -> list[str]:
    """"Animals|Birds|Peacock" (Lightroom) or "Animals/Birds/Peacock" (digiKam): each level
    (the leaf among them) is a keyword."""
    return [v for v in re.split(r"[|/]", value) if v.strip()]


# ------------------------------------------------------------------------------- embedded
def _read_embedded(path: Path, notes: list[str]) -> _Fields:
    """EXIF, IPTC and XMP from the picture's header (no pixels decoded)."""
    fields = _Fields()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Pillow warns on odd EXIF; notes say enough
            with open_picture(path) as im:
                _exif_fields(im, fields, f"{path}", notes)
                _iptc_fields(im, fields)
                where = f"{path} (embedded XMP)"
                if xmp := embedded_xmp(im, where, notes):
                    _parse_xmp(xmp, where, fields, notes)
    except UnidentifiedImageError:
        pass  # a RAW Pillow does not know (RAF, ORF): no embedded fields read, sidecars are;
        # a file that is no picture at all is reported by the decoder, once
    except Exception as e:  # noqa: BLE001 - an unreadable header: no metadata, a note
        notes.append(f"{path}: metadata not readable ({type(e).__name__}: {e})")
    return fields


def iptc_keywords(path: str | Path) -> list[str]:
    """A picture's IPTC Keywords, as `read_metadata` reads them."""
    return dict(_read_embedded(Path(path), []).keywords).get("IPTC Keywords", [])


def open_picture(path: str | Path):
    """Pillow's lazy open (formats registered by pamir.features.images), header only."""
    register_formats()
    return Image.open(path)


def _exif_fields(im, fields: _Fields, where: str, notes: list[str]) -> None:
    exif = im.getexif()
    try:  # a broken GPS block must not cost the keywords below
        fields.camera = camera_name(exif.get(_MAKE), exif.get(_MODEL))
        gps = exif.get_ifd(_GPS_IFD)
        if gps and (_GPS_LATITUDE in gps or _GPS_LONGITUDE in gps):
            fields.exif_position = _exif_position(gps, where, notes)
    except Exception as e:  # noqa: BLE001 - any malformed GPS IFD: no position, a note
        notes.append(f"{where}: EXIF GPS not readable ({type(e).__name__}: {e}); no position")
    xp = exif.get(_XP_KEYWORDS)
    if xp:
        raw = bytes(xp) if not isinstance(xp, bytes) else xp
        text = raw.decode("utf-16-le", "replace").rstrip("\x00")
        fields.keywords.append(("EXIF XPKeywords", [k for k in text.split(";") if k.strip()]))
    desc = exif.get(_IMAGE_DESCRIPTION)
    if isinstance(desc, bytes):
        desc = desc.decode("utf-8", "replace")
    if isinstance(desc, str) and desc.strip(" \x00"):
        fields.texts.append(("EXIF ImageDescription", desc.strip(" \x00")))
    sub = exif.get_ifd(_EXIF_IFD)
    when = sub.get(_DATE_TIME_ORIGINAL)
    if isinstance(when, str):
        fields.exif_taken = _exif_date(when, sub.get(_OFFSET_TIME_ORIGINAL))


def _iptc_fields(im, fields: _Fields) -> None:
    if im.format not in ("JPEG", "TIFF"):
        return
    info = IptcImagePlugin.getiptcinfo(im) or {}
    kws = info.get(_IPTC_KEYWORDS)
    if kws:
        kws = kws if isinstance(kws, list) else [kws]
        fields.keywords.insert(0, ("IPTC Keywords", [_iptc_text(k) for k in kws]))
    cap = info.get(_IPTC_CAPTION)
    if cap:
        cap = cap[0] if isinstance(cap, list) else cap
        fields.texts.append(("IPTC Caption-Abstract", _iptc_text(cap)))


def _iptc_text(value: bytes) -> str:
    # IPTC says its coded character set in record 1; every current writer uses UTF-8
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


# ------------------------------------------------------------------------------- GPS, camera
def valid_position(lat, lon) -> bool:
    """A finite latitude in [-90, 90] and a finite longitude in [-180, 180]."""
    try:
        lat, lon = float(lat), float(lon)
    except (TypeError, ValueError, OverflowError):
        return False
    return math.isfinite(lat) and math.isfinite(lon) and abs(lat) <= 90 and abs(lon) <= 180


def checked_position(lat, lon, where: str, notes: list[str], active_fix: bool = False):
    """(lat, lon) as floats, or None and a note: a missing half, NaN, out of range, or exactly
    0,0 (the "no fix" cameras and Google Takeout write) unless `active_fix` (EXIF GPSStatus
    "A") says the receiver had one."""
    if lat is None or lon is None:
        notes.append(f"{where}: no usable latitude and longitude; no position")
        return None
    if not valid_position(lat, lon):
        notes.append(f"{where}: {lat!r}, {lon!r} is not a position on Earth; no position")
        return None
    lat, lon = float(lat), float(lon)
    if lat == 0.0 and lon == 0.0 and not active_fix:
        notes.append(f"{where}: 0, 0 (what is written when there is no GPS fix); no position")
        return None
    return lat, lon


def _number(value) -> float | None:
    """A JSON number (not a bool, not a string) as a float; None otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


_XMP_COORDINATE = re.compile(
    r"([+-]?\d{1,3}(?:\.\d+)?)(?:,(\d{1,2}(?:\.\d+)?))?(?:,(\d{1,2}(?:\.\d+)?))?\s*([NSEW])?")


def xmp_coordinate(text: str, refs: str) -> float | None:
    """An XMP GPS coordinate: "DDD,MM,SSk", "DDD,MM.mmk" (the XMP specification's forms, k
    one of `refs`: "NS" or "EW"), or decimal degrees ("35.01", "-135.75", "35.01N"); None
    when it is none of these."""
    m = _XMP_COORDINATE.fullmatch(text.strip().upper()) if len(text) < 64 else None
    if not m:
        return None
    deg, minutes, seconds, ref = m.groups()
    if ref and (ref not in refs or deg.startswith(("+", "-"))) or (
            (minutes or seconds) and deg.startswith(("+", "-"))):
        return None
    value = float(deg) + float(minutes or 0) / 60 + float(seconds or 0) / 3600
    if float(minutes or 0) >= 60 or float(seconds or 0) >= 60:
        return None
    return -value if ref == refs[1] else value


def _exif_position(gps, where: str, notes: list[str]):
    """EXIF GPSLatitude/GPSLongitude (degrees, minutes, seconds as rationals) with their
    N/S/E/W refs; a rational over 0 is NaN and gives a note."""
    coords = []
    for tag, ref_tag, refs in ((_GPS_LATITUDE, _GPS_LATITUDE_REF, "NS"),
                               (_GPS_LONGITUDE, _GPS_LONGITUDE_REF, "EW")):
        coords.append(_dms(gps.get(tag), _ref(gps.get(ref_tag)), refs))
    status = _ref(gps.get(_GPS_STATUS))
    return checked_position(*coords, f"{where}: EXIF GPS", notes, active_fix=status == "A")


def _ref(value) -> str:
    if isinstance(value, bytes):
        value = value.decode("latin-1", "replace")
    return value.strip(" \x00").upper()[:1] if isinstance(value, str) else ""


def _dms(value, ref: str, refs: str) -> float | None:
    """(degrees, minutes, seconds) -> signed degrees; a ref other than N/S or E/W (or none)
    is read as north or east, as exiftool does; None when the value is not three numbers."""
    try:
        parts = [float(v) for v in (value if isinstance(value, tuple | list) else (value,))]
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None
    if not 1 <= len(parts) <= 3:
        return None
    degrees = sum(p / 60 ** k for k, p in enumerate(parts))
    return -degrees if ref == refs[1] else degrees


#: Makers' names as EXIF spells them, as people call the make: a model name that does not
#: already begin with it gets this ("NIKON CORPORATION" + "D750" -> "Nikon D750").
_MAKES = {"nikon corporation": "Nikon", "nikon": "Nikon", "olympus imaging corp.": "Olympus",
          "olympus corporation": "Olympus", "olympus optical co.,ltd": "Olympus",
          "eastman kodak company": "Kodak", "samsung techwin": "Samsung",
          "fujifilm corporation": "Fujifilm", "ricoh imaging company, ltd.": "Ricoh",
          "pentax corporation": "Pentax", "sony": "Sony", "canon": "Canon",
          "panasonic": "Panasonic", "apple": "Apple", "google": "Google"}


def camera_name(make, model) -> str | None:
    """EXIF Make and Model as one name: the model alone when it already names the make
    ("Canon" + "Canon EOS 5D" -> "Canon EOS 5D", "NIKON CORPORATION" + "NIKON D750" ->
    "NIKON D750"), else the make then the model; None when neither is text."""
    make, model = (_exif_text(v) for v in (make, model))
    if not model:
        return make or None
    if not make:
        return model
    short = _MAKES.get(make.lower(), make)
    first = model.split()[0].lower()
    if first in (make.lower(), short.lower(), make.split()[0].lower()):
        return model
    return f"{short} {model}"


def _exif_text(value) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        return ""
    return " ".join(value.replace("\x00", " ").split())[:100]


# ------------------------------------------------------------------------------- dates
_EXIF_DATE = re.compile(r"(\d{4}):(\d\d):(\d\d)[ T](\d\d):(\d\d):(\d\d)")
_OFFSET = re.compile(r"[+-]\d\d:\d\d")
_ISO_DATE = re.compile(r"(\d{4})(?:-(\d\d)(?:-(\d\d)(?:T(\d\d):(\d\d)(?::(\d\d))?(?:\.\d+)?"
                       r"(Z|[+-]\d\d:\d\d)?)?)?)?$")


def _exif_date(text: str, offset) -> str | None:
    """"2019:07:14 10:31:00" (+ "+02:00") -> "2019-07-14T10:31:00+02:00"; None when blank
    ("0000:00:00 00:00:00", as cameras without a clock write) or not a date."""
    m = _EXIF_DATE.match(text.strip())
    if not m:
        return None
    try:
        dt = datetime(*map(int, m.groups()))
    except ValueError:
        return None
    suffix = offset.strip() if isinstance(offset, str) and _OFFSET.fullmatch(offset.strip()) \
        else ""
    return _iso(dt) + suffix


def _iso_text(text: str) -> str | None:
    """An XMP date ("2019", "2019-07", "2019-07-14T10:31+02:00") as a full ISO date-time."""
    m = _ISO_DATE.match(text.strip())
    if not m:
        return None
    y, mo, d, h, mi, s, tz = m.groups()
    try:
        dt = datetime(int(y), int(mo or 1), int(d or 1), int(h or 0), int(mi or 0), int(s or 0))
    except ValueError:
        return None
    return _iso(dt) + ("+00:00" if tz == "Z" else tz or "")


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S")


__all__ = ["GUESS_PARENT", "MAX_XMP_BYTES", "PictureMetadata", "camera_name", "checked_position",
           "guessed_words", "read_metadata", "sidecar_paths", "sidecar_signature", "valid_position",
           "xmp_coordinate"]
