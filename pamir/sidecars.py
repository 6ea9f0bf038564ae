"""Writing back: what pamir knows of a picture, in the XMP sidecar that people's other tools
read, never in the picture itself (`pamir annotate --xmp`, `pamir index --write-xmp`).

What is written (`Known`, `known_of_index`):

- pamir's words: the model's words whose calibrated probability reaches WORD_PROBABILITY, in
  dc:subject and, under the parent keyword `pamir` (pamir.metadata.GUESS_PARENT), in
  lr:hierarchicalSubject (`pamir|tiger`; digiKam:TagsList `pamir/tiger` where the sidecar
  has that field): digiKam and Lightroom show them under a keyword "pamir", apart from the
  person's, where they delete one or move it out to keep it;
- people: named faces as MWG regions (mwg-rs:Regions, a normalised box whose x, y is its
  centre, in the picture as stored, Type "Face"), as digiKam and Lightroom write them: the
  names an editor gave in pamir (mwg-rs:Description "pamir: confirmed") and those pamir
  carried to a face with a confidence of NAME_CONFIDENCE or more ("pamir: guessed 0.93");
- the place its GPS position names (pamir.places): photoshop:City, photoshop:State,
  photoshop:Country and Iptc4xmpCore:Location (the nearest populated place).

Which sidecar (SIDECAR_NAMES, $PAMIR_XMP_SIDECAR): digiKam and darktable read NAME.EXT.xmp,
Lightroom NAME.xmp (for raw files), Immich either. NAME.EXT.xmp is the default: a camera's
RAW+JPEG pair (IMG_1.CR2, IMG_1.JPG) shares one NAME.xmp, which Lightroom keeps for the raw
file, so pamir's words of the JPEG would land in the raw file's sidecar. "NAME.xmp" or
"both" pick the others.

Merging (`merge_xmp`): an existing sidecar keeps every field it had; pamir's own earlier
words and regions are replaced and nobody else's; a place field already there is kept (the
person's or pamir's earlier, from the same position). A new sidecar starts as a copy of the
picture's embedded XMP, as exiftool's `-o NAME.xmp` and digiKam make one, since tools that
find a sidecar read it in place of the picture's XMP. The result is written atomically
(temporary file, fsync, rename: pamir.storage), and not at all when it is the same bytes.
A sidecar that is not XMP pamir can read (broken, hostile, too large) is left alone, with
a message.

Why XML with defusedxml, as pamir.metadata reads it, and not pyexiv2 or exiftool: it
installs with the base package on every platform (exiftool through pyexiftool needs the
system's exiftool; python-xmp-toolkit the Exempi library), it parses a person's files with
no native code (no DTDs, no entities, a size cap), and RDF/XML is all a sidecar is. The
tests read every sidecar back with exiftool and check other tools' fields kept.

Round trip: pamir.metadata reads a `pamir|` word as pamir's guess and pamir.people.regions
skips a guessed region, so `pamir index` and `pamir fit` learn only what the person kept.
"""

from __future__ import annotations

import io
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree as ET
from xml.sax.saxutils import escape, quoteattr

from defusedxml import ElementTree as SafeET

from .metadata import GUESS_PARENT, MAX_XMP_BYTES, guessed_words, open_picture
from .people.naming import REGION_IOU
from .people.regions import CONFIRMED_REGION, GUESSED_REGION, PAMIR_REGION, as_stored, iou
from .storage import atomic_write_bytes

#: The least calibrated probability of a word pamir writes: the smallest at which the words
#: written on Corel 5k's validation pictures were right 90 % of the time
#: (benchmarks/results/sidecars.md).
WORD_PROBABILITY = 0.5
#: The least confidence of a name pamir carried to a face (pamir.people.naming's calibrated
#: name_confidence) for it to be written: the words' bar of 90 % right.
NAME_CONFIDENCE = 0.9
#: How a face was named (pamir.people.who) -> whether it is written as confirmed: an editor's
#: naming, or a name the person's files gave (a region, a People tag, a keyword of a picture
#: with one face); a name carried by likeness is a guess. Others (unnamed) are not written.
_FACE_HOW = {"editor": True, "region": True, "tag": True, "keyword": True, "carried": False}
#: The sidecar names a setting picks from, and the default (the module's doc says why).
SIDECAR_NAMES = ("NAME.EXT.xmp", "NAME.xmp", "both")
DEFAULT_SIDECAR_NAME = "NAME.EXT.xmp"
SIDECAR_ENV = "PAMIR_XMP_SIDECAR"

NS = {
    "x": "adobe:ns:meta/",
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "dc": "http://purl.org/dc/elements/1.1/",
    "lr": "http://ns.adobe.com/lightroom/1.0/",
    "digiKam": "http://www.digikam.org/ns/1.0/",
    "photoshop": "http://ns.adobe.com/photoshop/1.0/",
    "Iptc4xmpCore": "http://iptc.org/std/Iptc4xmpCore/1.0/xmlns/",
    "mwg-rs": "http://www.metadataworkinggroup.com/schemas/regions/",
    "stArea": "http://ns.adobe.com/xmp/sType/Area#",
    "stDim": "http://ns.adobe.com/xap/1.0/sType/Dimensions#",
    # not written by pamir: registered so that other tools' fields keep their usual prefix
    "xmp": "http://ns.adobe.com/xap/1.0/",
    "xmpMM": "http://ns.adobe.com/xap/1.0/mm/",
    "stEvt": "http://ns.adobe.com/xap/1.0/sType/ResourceEvent#",
    "stRef": "http://ns.adobe.com/xap/1.0/sType/ResourceRef#",
    "xmpRights": "http://ns.adobe.com/xap/1.0/rights/",
    "exif": "http://ns.adobe.com/exif/1.0/",
    "exifEX": "http://cipa.jp/exif/1.0/",
    "aux": "http://ns.adobe.com/exif/1.0/aux/",
    "tiff": "http://ns.adobe.com/tiff/1.0/",
    "crs": "http://ns.adobe.com/camera-raw-settings/1.0/",
    "darktable": "http://darktable.sf.net/",
    "Iptc4xmpExt": "http://iptc.org/std/Iptc4xmpExt/2008-02-29/",
    "MP": "http://ns.microsoft.com/photo/1.2/",
    "MPRI": "http://ns.microsoft.com/photo/1.2/t/RegionInfo#",
    "MPReg": "http://ns.microsoft.com/photo/1.2/t/Region#",
    "MicrosoftPhoto": "http://ns.microsoft.com/photo/1.0/",
    "acdsee": "http://ns.acdsee.com/iptc/1.0/",
}
def _q(name: str) -> str:
    """"dc:subject" -> "{http://purl.org/dc/elements/1.1/}subject"."""
    prefix, _, local = name.partition(":")
    return f"{{{NS[prefix]}}}{local}"


_RDF, _DESC, _LI, _BAG = _q("rdf:RDF"), _q("rdf:Description"), _q("rdf:li"), _q("rdf:Bag")
_PARSE_TYPE = _q("rdf:parseType")
_PLACE_FIELDS = ("photoshop:City", "photoshop:State", "photoshop:Country",
                 "Iptc4xmpCore:Location")
_EMPTY = (f'<x:xmpmeta xmlns:x="{NS["x"]}"><rdf:RDF xmlns:rdf="{NS["rdf"]}">'
          f'<rdf:Description rdf:about=""/></rdf:RDF></x:xmpmeta>').encode()


class SidecarError(ValueError):
    """A sidecar pamir will not merge into (not XMP it can read); left alone."""


@dataclass
class Face:
    """A named face to write: box (x0, y0, x1, y1) in [0, 1] of the picture as shown;
    confirmed: an editor's naming (else a name pamir carried, at `confidence`)."""

    name: str
    box: tuple[float, float, float, float]
    confirmed: bool
    confidence: float = 1.0


@dataclass
class Known:
    """What pamir writes of one picture: its words (pamir's guesses), named faces and place
    ({"photoshop:City": "Kyoto", ...})."""

    words: list[str] = field(default_factory=list)
    faces: list[Face] = field(default_factory=list)
    place: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.words or self.faces or self.place)


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


# ------------------------------------------------------------------------------ which file
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
            new = merge_xmp(base, known, _picture_geometry(Path(picture)))
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
                xmp = im.info.get("xmp") or im.info.get("XML:com.adobe.xmp")
    except Exception:  # noqa: BLE001 - no readable header: the sidecar starts empty
        return None
    if isinstance(xmp, str):
        xmp = xmp.encode("utf-8", "surrogatepass")
    if not xmp or len(xmp) > MAX_XMP_BYTES:
        return None
    try:
        _rdf_of(_parse(xmp)[0])
    except SidecarError:
        return None
    return xmp


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
def confident_words(keywords: list[dict], threshold: float = WORD_PROBABILITY) -> list[str]:
    """The model's words of a picture's keyword records (pamir.annotation.keyword_records)
    whose calibrated probability reaches `threshold`; ImageNet's words and facts are not
    among them (the first are not calibrated on the person's words, the second are facts),
    nor words without a probability (a system with no calibration)."""
    return [w["word"] for w in keywords if "source" not in w
            and w.get("probability") is not None and w["probability"] >= threshold]


def place_fields(facts) -> dict[str, str]:
    """A picture's place facts (pamir.places.place_facts) as the XMP fields written."""
    from .facts import detail_of  # noqa: PLC0415

    levels = {}
    for f in facts:
        if f.kind == "place":
            d = detail_of(f)
            levels.setdefault(d.get("level"), str(d.get("shown") or f.word))
    return _fields(levels.get("place") or levels.get("city"), levels.get("city"),
                   levels.get("region"), levels.get("country"))


def position_place_fields(position) -> dict[str, str]:
    """The XMP place fields of a GPS position (lat, lon), named by pamir.places; {} for none."""
    from .places import place_of  # noqa: PLC0415

    place = place_of(*position) if position is not None else None
    if place is None:
        return {}
    return _fields(place.name, place.city, place.region, place.country)


def _fields(location, city, state, country) -> dict[str, str]:
    values = dict(zip(_PLACE_FIELDS, (city, state, country, location)))
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


def known_of_pictures(paths, keywords: list[list[dict]], index=None,
                      threshold: float = WORD_PROBABILITY) -> list[Known]:
    """What `pamir annotate --xmp` writes of each picture: its words of `keywords`
    (pamir.annotation.annotate_pictures') at `threshold`; with an `index` that holds it,
    its named faces and place facts; else the place its GPS position names."""
    from .metadata import read_metadata  # noqa: PLC0415

    names = people_names(index) if index is not None else {}
    out = []
    for path, records in zip(paths, keywords):
        picture_id = index.id_of_path(str(path)) if index is not None else None
        if picture_id is not None:
            faces, place = index_faces(index, picture_id, names), \
                place_fields(index.facts_of(picture_id))
        else:
            faces, place = [], position_place_fields(read_metadata(path).position)
        out.append(Known(confident_words(records, threshold), faces, place))
    return out


def write_index_sidecars(index_dir, folders=(), setting: str | None = None,
                         threshold: float = WORD_PROBABILITY) -> SidecarReport:
    """`pamir index --write-xmp`, after its passes: the sidecars of the pictures of the index
    in `index_dir` under `folders` (every picture where none is given), each with its
    model's words at `threshold`, its named faces and its place."""
    from .annotation import keywords_of_rows  # noqa: PLC0415
    from .index import Index  # noqa: PLC0415

    sidecar_name(setting)  # a wrong setting fails before any work
    roots = [os.path.abspath(f) for f in folders]
    report = SidecarReport()
    with Index.open(index_dir) as index:
        names = people_names(index)
        for picture in index.pictures("ok"):
            path = os.path.abspath(picture.path)
            if roots and not any(path == r or path.startswith(r.rstrip(os.sep) + os.sep)
                                 for r in roots):
                continue
            words = []
            if index.vocabulary:
                [records] = keywords_of_rows(index.vector(picture.id)[None, :index.T],
                                             index.vocabulary, index.calibration)
                words = confident_words(records, threshold)
            known = Known(words, index_faces(index, picture.id, names),
                          place_fields(index.facts_of(picture.id)))
            _count(report, write_xmp(path, known, setting))
    return report


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


# ------------------------------------------------------------------------------ merging
def merge_xmp(existing: bytes | None, known: Known,
              geometry: tuple[int, tuple[int, int], tuple[int, int]] = (1, (0, 0), (0, 0))
              ) -> bytes:
    """An XMP sidecar: `existing` (a packet, or None for a new one) with pamir's earlier
    words and regions replaced by `known`'s, its other fields kept (the module's doc).
    geometry: the picture's (EXIF orientation, size as stored, size as shown). Raises
    SidecarError where `existing` is not XMP pamir can read."""
    root, prefixes = _parse(existing if existing is not None else _EMPTY)
    rdf = _rdf_of(root)
    descriptions = [d for d in rdf if d.tag == _DESC]
    if not descriptions:
        descriptions = [ET.SubElement(rdf, _DESC, {_q("rdf:about"): ""})]
    _merge_words(descriptions, known.words)
    _merge_place(descriptions, known.place)
    _merge_faces(descriptions, known.faces, geometry)
    ET.indent(root, space=" ")
    body = _serialise(root, prefixes)
    return ('<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>\n' + body
            + '\n<?xpacket end="w"?>\n').encode("utf-8")


def _parse(data: bytes):
    """The packet's tree, with the prefixes it gives its namespaces in `root.prefixes`."""
    if len(data) > MAX_XMP_BYTES:
        raise SidecarError(f"{len(data):,} bytes, over the {MAX_XMP_BYTES:,} pamir reads; "
                           "left alone")
    prefixes: dict[str, str] = {}
    try:
        # defusedxml refuses DTDs, entity declarations and external references
        events = SafeET.iterparse(io.BytesIO(data.strip(b"\x00 \t\r\n")), ("start-ns",))
        for _, (prefix, uri) in events:
            prefixes.setdefault(uri, prefix)
        root = events.root
    except Exception as e:  # noqa: BLE001 - any parse failure: the file is left alone
        raise SidecarError(f"not XMP pamir can read ({type(e).__name__}: {e}); left "
                           "alone") from None
    return root, prefixes


def _serialise(root, prefixes: dict[str, str]) -> str:
    """The tree as XML, each namespace under the prefix the packet gave it, else NS's, else
    ns1, ns2, ...: ElementTree's own writer names every namespace it was not told of "ns0",
    and exiftool names a field's group by its prefix (a tool's "own:mark" would read as
    "ns0:mark"); the namespaces are declared on the root, as Adobe's XMP toolkit does."""
    names = {uri: prefix for prefix, uri in NS.items()}
    names["http://www.w3.org/XML/1998/namespace"] = "xml"
    taken = set(names.values())
    for uri, prefix in prefixes.items():
        if uri not in names and prefix and prefix not in taken:
            names[uri] = prefix
            taken.add(prefix)
    used: dict[str, str] = {}

    def qname(clark: str) -> str:
        if not clark.startswith("{"):
            return clark
        uri, local = clark[1:].split("}", 1)
        if uri not in names:
            names[uri] = next(f"ns{i}" for i in range(1, len(names) + 2)
                              if f"ns{i}" not in taken)
            taken.add(names[uri])
        if names[uri] != "xml":
            used[uri] = names[uri]
        return f"{names[uri]}:{local}"

    def element(el) -> str:
        tag = qname(el.tag)
        attrs = "".join(f" {qname(k)}={quoteattr(v)}" for k, v in el.attrib.items())
        inner = escape(el.text or "") + "".join(element(c) for c in el)
        out = f"<{tag}{attrs}>{inner}</{tag}>" if inner else f"<{tag}{attrs}/>"
        return out + escape(el.tail or "")

    body = element(root)
    head = body.index(">") - (1 if body[body.index(">") - 1] == "/" else 0)
    declarations = "".join(f" xmlns:{p}={quoteattr(u)}" for u, p in sorted(
        used.items(), key=lambda item: item[1]))
    return body[:head] + declarations + body[head:]


def _rdf_of(root):
    rdf = root if root.tag == _RDF else root.find(_RDF)
    if rdf is None:
        raise SidecarError("no rdf:RDF in it: not an XMP packet; left alone")
    return rdf


def _find(descriptions, name: str):
    """(description, element or None, attribute value or None) of a property, wherever
    it is written; (None, None, None) where nowhere."""
    tag = _q(name)
    for d in descriptions:
        el = d.find(tag)
        if el is not None:
            return d, el, None
        if tag in d.attrib:
            return d, None, d.attrib[tag]
    return None, None, None


def _bag(descriptions, name: str, create: bool):
    """The rdf:Bag (or Seq) of a list property, made where asked and absent (an attribute
    form, a single value, becomes an item); None where absent and not made."""
    d, el, attr = _find(descriptions, name)
    if el is None:
        if attr is None and not create:
            return None
        if attr is not None:
            del d.attrib[_q(name)]
        el = ET.SubElement(d if d is not None else descriptions[0], _q(name))
        bag = ET.SubElement(el, _BAG)
        if attr is not None and attr.strip():
            ET.SubElement(bag, _LI).text = attr
        return bag
    container = next((c for c in el if c.tag in (_BAG, _q("rdf:Seq"))), None)
    if container is None:  # a single value written as the element's text
        text = (el.text or "").strip()
        el.text = None
        container = ET.SubElement(el, _BAG)
        if text:
            ET.SubElement(container, _LI).text = text
    return container


def _items(bag) -> list:
    return [li for li in bag if li.tag == _LI]


def _drop_if_empty(descriptions, name: str) -> None:
    d, el, _ = _find(descriptions, name)
    if el is not None and not any(len(c) for c in el if c.tag in (_BAG, _q("rdf:Seq"))) \
            and not (el.text or "").strip():
        d.remove(el)


def _merge_words(descriptions, words: list[str]) -> None:
    """dc:subject and the hierarchies: pamir's earlier words out, these in under `pamir`,
    where the person does not have them already."""
    create = bool(words)
    subject = _bag(descriptions, "dc:subject", create)
    hierarchies = [(b, sep) for b, sep in (
        (_bag(descriptions, "lr:hierarchicalSubject", create), "|"),
        (_bag(descriptions, "digiKam:TagsList", False), "/")) if b is not None]
    earlier = guessed_words([li.text or "" for b, _ in hierarchies for li in _items(b)])
    for bag, _ in hierarchies:
        for li in _items(bag):
            levels = (li.text or "").replace("/", "|").split("|")
            if levels[0].strip().casefold() == GUESS_PARENT:
                bag.remove(li)
    own = set()
    if subject is not None:
        for li in _items(subject):
            if (li.text or "").strip().casefold() in earlier:
                subject.remove(li)
            else:
                own.add((li.text or "").strip().casefold())
    for word in dict.fromkeys(w.strip() for w in words if w.strip()):
        if word.casefold() in own:
            continue
        ET.SubElement(subject, _LI).text = word
        for bag, sep in hierarchies:
            ET.SubElement(bag, _LI).text = f"{GUESS_PARENT}{sep}{word}"
    for name in ("dc:subject", "lr:hierarchicalSubject", "digiKam:TagsList"):
        _drop_if_empty(descriptions, name)


def _merge_place(descriptions, place: dict[str, str]) -> None:
    """Each place field that is not there yet, or empty; one there is kept."""
    for name in _PLACE_FIELDS:
        value = (place.get(name) or "").strip()
        if not value:
            continue
        d, el, attr = _find(descriptions, name)
        if (el is not None and ((el.text or "").strip() or len(el))) or (attr or "").strip():
            continue
        if el is None:
            if attr is not None:
                del d.attrib[_q(name)]
            el = ET.SubElement(descriptions[0], _q(name))
        el.text = value


def _merge_faces(descriptions, faces: list[Face], geometry) -> None:
    """mwg-rs:Regions: pamir's earlier regions out, these in, but where another's region of
    a face already covers it."""
    orientation, stored, shown = geometry
    d, regions, _ = _find(descriptions, "mwg-rs:Regions")
    if regions is None and not faces:
        return
    if regions is None:
        regions = ET.SubElement(descriptions[0], _q("mwg-rs:Regions"), {_PARSE_TYPE: "Resource"})
    info = regions.find(_DESC)
    info = info if info is not None else regions
    dims = _dimensions(info)
    turned = orientation >= 5 and dims == shown and stored[0] != stored[1]
    if dims is None and stored != (0, 0):
        _set_dimensions(info, stored)
    listing = info.find(_q("mwg-rs:RegionList"))
    if listing is None:
        listing = ET.SubElement(info, _q("mwg-rs:RegionList"))
    bag = next((c for c in listing if c.tag in (_BAG, _q("rdf:Seq"))), None)
    if bag is None:
        bag = ET.SubElement(listing, _BAG)
    theirs = []
    for li in _items(bag):
        description, box = _region_of(li)
        if description.startswith(PAMIR_REGION):
            bag.remove(li)
        elif box is not None:
            theirs.append(box)
    for face in faces:
        box = face.box if turned else as_stored(face.box, orientation)
        # a region of another's that names this face (as the faces pass matches them)
        if any(iou(box, other) >= REGION_IOU for other in theirs):
            continue
        bag.append(_region(face, box))
    if not _items(bag) and d is not None and regions in list(d):
        d.remove(regions)  # nothing left: no empty structure written
    elif not _items(bag) and regions in list(descriptions[0]):
        descriptions[0].remove(regions)


def _dimensions(info) -> tuple[int, int] | None:
    el = info.find(_q("mwg-rs:AppliedToDimensions"))
    if el is None:
        return None
    props = dict(el.attrib)
    for node in [el, *el.findall(_DESC)]:
        props.update(node.attrib)
        props.update({c.tag: (c.text or "").strip() for c in node})
    try:
        return int(float(props[_q("stDim:w")])), int(float(props[_q("stDim:h")]))
    except (KeyError, ValueError, OverflowError):
        return (0, 0)


def _set_dimensions(info, size: tuple[int, int]) -> None:
    el = ET.SubElement(info, _q("mwg-rs:AppliedToDimensions"), {_PARSE_TYPE: "Resource"})
    for name, value in (("stDim:w", size[0]), ("stDim:h", size[1]), ("stDim:unit", "pixel")):
        ET.SubElement(el, _q(name)).text = str(value)


def _region_of(li) -> tuple[str, tuple | None]:
    """(mwg-rs:Description, normalised (x0, y0, x1, y1) or None) of a region item."""
    props = {}
    for node in [li, *li.findall(_DESC)]:
        props.update(node.attrib)
        props.update({c.tag: c for c in node})
    description = props.get(_q("mwg-rs:Description"))
    description = description if isinstance(description, str) else (
        (description.text or "") if description is not None else "")
    area = props.get(_q("mwg-rs:Area"))
    if area is None or isinstance(area, str):
        return description.strip(), None
    a = dict(area.attrib)
    for node in [area, *area.findall(_DESC)]:
        a.update(node.attrib)
        a.update({c.tag: (c.text or "").strip() for c in node})
    try:
        x, y, w, h = (float(a[_q(f"stArea:{k}")]) for k in "xywh")
    except (KeyError, ValueError):
        return description.strip(), None
    if str(a.get(_q("stArea:unit"), "normalized")).lower() != "normalized":
        return description.strip(), None
    return description.strip(), (x - w / 2, y - h / 2, x + w / 2, y + h / 2)


def _region(face: Face, box) -> ET.Element:
    li = ET.Element(_LI, {_PARSE_TYPE: "Resource"})
    area = ET.SubElement(li, _q("mwg-rs:Area"), {_PARSE_TYPE: "Resource"})
    x0, y0, x1, y1 = box
    for k, v in (("x", (x0 + x1) / 2), ("y", (y0 + y1) / 2), ("w", x1 - x0), ("h", y1 - y0)):
        ET.SubElement(area, _q(f"stArea:{k}")).text = f"{v:.6f}"
    ET.SubElement(area, _q("stArea:unit")).text = "normalized"
    ET.SubElement(li, _q("mwg-rs:Name")).text = face.name
    ET.SubElement(li, _q("mwg-rs:Type")).text = "Face"
    ET.SubElement(li, _q("mwg-rs:Description")).text = (
        CONFIRMED_REGION if face.confirmed else f"{GUESSED_REGION} {face.confidence:.2f}")
    return li


__all__ = ["DEFAULT_SIDECAR_NAME", "Face", "Known", "NAME_CONFIDENCE", "SIDECAR_ENV",
           "SIDECAR_NAMES", "SidecarError", "SidecarReport", "WORD_PROBABILITY",
           "confident_words", "index_faces", "known_of_pictures", "merge_xmp", "people_names", "place_fields",
           "position_place_fields", "sidecar_name", "sidecar_targets", "write_index_sidecars",
           "write_xmp"]
