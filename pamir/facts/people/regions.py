"""Names that people's tools have already written into a picture's files.

- MWG regions (`mwg-rs:Regions`), written by digiKam, Lightroom, Picasa and exiftool: a box
  normalised to [0, 1] whose x, y is its CENTRE, with `Name` and `Type` (only "Face" regions,
  or regions with no type, are read: "Pet", "Focus", "BarCode" are not people).
- Microsoft Photo regions (`MP:RegionInfo`), written by Windows Photo Gallery: a rectangle
  "x, y, w, h" whose x, y is its TOP-LEFT corner, with `PersonDisplayName`.
- `People/Alice` (digiKam's TagsList) and `People|Alice` (Lightroom's hierarchicalSubject):
  the level under "People" is a person's name (`person_tags`).
- IPTC's "Person Shown" (`Iptc4xmpExt:PersonInImage`), written by Lightroom, Photo Mechanic
  and newsrooms' tools: each entry is a name (`person_tags`).

They are read from the XMP embedded in the picture and from its sidecars (NAME.EXT.xmp,
NAME.xmp), found, size-capped and parsed by pamir.facts.metadata's XMP helpers (`xmp_sidecars`,
`embedded_xmp`, `parse_xmp`: defusedxml, no DTDs, no entities), as it reads keywords. The
first place that holds regions wins, in pamir.facts.metadata's order: sidecars first (the tool that
wrote one keeps it up to date), then the picture.

Boxes are returned in the picture as shown (EXIF orientation applied, as pamir decodes it).
The MWG guidelines put regions in the picture as stored, before its orientation, and
Lightroom and digiKam (since its bugs 372340 and 395243) write them so; viewers that skip
the rotation misplace the faces of portrait phone photos (pigallery2 #515, #979, Damselfly
#352). So a region is turned by the picture's EXIF orientation, unless its
AppliedToDimensions are the picture's size as shown (a writer that used the shown picture).

Regions pamir wrote itself (pamir.jobs.sidecars) say so in their mwg-rs:Description: a name an
editor gave in pamir (CONFIRMED_REGION) is read as any other, a name pamir carried
(GUESSED_REGION) is not: pamir never learns from its own guesses. A tool that rewrites the
regions (digiKam, Lightroom, after the person confirmed a face there) drops the mark, and the
name becomes the person's.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..metadata import embedded_xmp, open_picture, parse_xmp, xmp_sidecars

_RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"
_MWG_RS = "{http://www.metadataworkinggroup.com/schemas/regions/}"
_ST_AREA = "{http://ns.adobe.com/xmp/sType/Area#}"
_ST_DIM = "{http://ns.adobe.com/xap/1.0/sType/Dimensions#}"
_MP = "{http://ns.microsoft.com/photo/1.2/}"
_MP_RI = "{http://ns.microsoft.com/photo/1.2/t/RegionInfo#}"
_MP_REG = "{http://ns.microsoft.com/photo/1.2/t/Region#}"
_LR = "{http://ns.adobe.com/lightroom/1.0/}"
_DIGIKAM = "{http://www.digikam.org/ns/1.0/}"
_IPTC_EXT = "{http://iptc.org/std/Iptc4xmpExt/2008-02-29/}"

#: The top levels of a keyword hierarchy whose children are people's names (digiKam's
#: "People", Lightroom users' "People" or "Persons").
PEOPLE_ROOTS = frozenset({"people", "persons", "person"})

_ORIENTATION = 0x0112
#: EXIF orientation -> where a normalised point (x, y) of the stored picture is shown.
_TURNS = {1: lambda x, y: (x, y), 2: lambda x, y: (1 - x, y), 3: lambda x, y: (1 - x, 1 - y),
          4: lambda x, y: (x, 1 - y), 5: lambda x, y: (y, x), 6: lambda x, y: (1 - y, x),
          7: lambda x, y: (1 - y, 1 - x), 8: lambda x, y: (y, 1 - x)}

#: The start of the mwg-rs:Description of regions pamir writes (pamir.jobs.sidecars): an editor's
#: name ("pamir: confirmed") and a name pamir carried to a face ("pamir: guessed 0.93").
PAMIR_REGION = "pamir:"
CONFIRMED_REGION = "pamir: confirmed"
GUESSED_REGION = "pamir: guessed"

#: The most regions read from one picture (a group photo has tens; a packet with thousands
#: is hostile).
MAX_REGIONS = 1000


@dataclass(frozen=True)
class Region:
    """A named face region. box: (x0, y0, x1, y1) in [0, 1] of the picture as shown;
    source: where it was read ("sidecar NAME.xmp, MWG", "embedded XMP, MP")."""

    name: str
    box: tuple[float, float, float, float]
    source: str


@dataclass
class PeopleInFiles:
    """What a picture's files say about who is in it: named regions, the names of its
    People/... keywords, and notes on what could not be read."""

    regions: list[Region]
    tags: list[str]
    notes: list[str]


def read_people(path: str | Path) -> PeopleInFiles:
    """Regions and People tags of one picture, from its sidecars and its embedded XMP
    (the module's doc). Never raises for what a file holds: problems become notes."""
    path = Path(path)
    notes: list[str] = []
    places = xmp_sidecars(path, notes)  # (where, xmp bytes)
    embedded, orientation, stored = _header(path, notes)
    if embedded:
        places.append(("embedded XMP", embedded))
    regions, tags = [], []
    for where, data in places:
        root = parse_xmp(data, f"{path} ({where})", notes)
        if root is None:
            continue
        if not regions:
            regions = _mwg_regions(root, where, orientation, stored) + \
                _mp_regions(root, where, orientation)
            regions = _unique(regions)[:MAX_REGIONS]
        tags += _people_tags(root)
    return PeopleInFiles(regions, list(dict.fromkeys(tags)), notes)


def read_regions(path: str | Path) -> list[Region]:
    """The named face regions of a picture (MWG and MP, sidecars then embedded XMP)."""
    return read_people(path).regions


def person_tags(path: str | Path) -> list[str]:
    """The names under a People/ (or People|) keyword hierarchy of a picture's XMP."""
    return read_people(path).tags


# ------------------------------------------------------------------------------ reading
def _header(path: Path, notes: list[str]) -> tuple[bytes | None, int, tuple[int, int]]:
    """The picture's embedded XMP packet, EXIF orientation (1: none) and stored size, from its
    header (no pixels decoded)."""
    found: list[str] = []  # a packet over the cap: noted once the header is read
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with open_picture(path) as im:
                xmp = embedded_xmp(im, str(path), found)
                orientation = im.getexif().get(_ORIENTATION, 1)
                size = im.size
    except Exception:  # noqa: BLE001 - an unreadable picture: its decoder reports it, once
        return None, 1, (0, 0)
    notes += found
    return xmp, orientation if orientation in _TURNS else 1, size


def as_shown(box, orientation: int) -> tuple[float, float, float, float]:
    """A normalised box of the picture as stored, in the picture as shown (EXIF orientation
    applied, as Pillow's exif_transpose turns the pixels)."""
    turn = _TURNS.get(orientation, _TURNS[1])
    (ax, ay), (bx, by) = turn(box[0], box[1]), turn(box[2], box[3])
    return min(ax, bx), min(ay, by), max(ax, bx), max(ay, by)


def as_stored(box, orientation: int) -> tuple[float, float, float, float]:
    """A normalised box of the picture as shown, in the picture as stored (as_shown undone:
    orientations 6 and 8 undo each other, the others undo themselves)."""
    return as_shown(box, {6: 8, 8: 6}.get(orientation, orientation))


def _props(node) -> dict:
    """An RDF resource's properties, however it is written: as attributes, as child
    elements, inside an rdf:Description (rdf:li > rdf:Description), or with
    rdf:parseType="Resource"."""
    out = {k: v for k, v in node.attrib.items() if not k.startswith(_RDF)}
    for child in node:
        if child.tag == _RDF + "Description":
            out.update(_props(child))
        else:
            out[child.tag] = child
    return out


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if value.text and value.text.strip():
        return value.text.strip()
    # rdf:Alt / rdf:Seq of one value (a language alternative)
    li = next(value.iter(_RDF + "li"), None)
    return (li.text or "").strip() if li is not None else ""


def _number(value) -> float | None:
    try:
        x = float(_text(value))
    except ValueError:
        return None
    return x if x == x and abs(x) != float("inf") else None


def _items(node) -> list:
    """The rdf:li items of a Bag/Seq under `node`."""
    return [li for li in node.iter(_RDF + "li")]


def _mwg_regions(root, where: str, orientation: int = 1,
                 stored: tuple[int, int] = (0, 0)) -> list[Region]:
    out = []
    for regions in root.iter(_MWG_RS + "Regions"):
        info = _props(regions)
        dims = _props(info[_MWG_RS + "AppliedToDimensions"]) \
            if not isinstance(info.get(_MWG_RS + "AppliedToDimensions", ""), str) else {}
        dim_w, dim_h = _number(dims.get(_ST_DIM + "w")), _number(dims.get(_ST_DIM + "h"))
        # a writer that drew on the picture as shown says so by its dimensions
        turn = 1 if orientation in (5, 6, 7, 8) and (dim_w, dim_h) == stored[::-1] \
            and stored[0] != stored[1] else orientation
        listing = info.get(_MWG_RS + "RegionList")
        if listing is None or isinstance(listing, str):
            continue
        for li in _items(listing)[:MAX_REGIONS]:
            p = _props(li)
            name = _text(p.get(_MWG_RS + "Name"))
            kind = _text(p.get(_MWG_RS + "Type"))
            area = p.get(_MWG_RS + "Area")
            if not name or kind.lower() not in ("", "face") or area is None \
                    or isinstance(area, str) \
                    or _text(p.get(_MWG_RS + "Description")).startswith(GUESSED_REGION):
                continue
            a = _props(area)
            x, y, w, h = (_number(a.get(_ST_AREA + k)) for k in "xywh")
            if None in (x, y, w, h):
                continue
            if _text(a.get(_ST_AREA + "unit")).lower() == "pixel":
                if not dim_w or not dim_h:
                    continue
                x, y, w, h = x / dim_w, y / dim_h, w / dim_w, h / dim_h
            box = _clip((x - w / 2, y - h / 2, x + w / 2, y + h / 2))
            if box:
                out.append(Region(name, as_shown(box, turn), f"{where}, MWG"))
    return out


def _mp_regions(root, where: str, orientation: int = 1) -> list[Region]:
    out = []
    for info in root.iter(_MP + "RegionInfo"):
        for li in _items(info)[:MAX_REGIONS]:
            p = _props(li)
            name = _text(p.get(_MP_REG + "PersonDisplayName"))
            rect = [_number(v) for v in re.split(r"[,\s]+", _text(p.get(_MP_REG + "Rectangle")))
                    if v]
            if not name or len(rect) != 4 or None in rect:
                continue
            x, y, w, h = rect
            box = _clip((x, y, x + w, y + h))
            if box:
                out.append(Region(name, as_shown(box, orientation), f"{where}, MP"))
    return out


def _clip(box) -> tuple[float, float, float, float] | None:
    """A box clipped to the picture; None when nothing of it is left (or it is empty)."""
    x0, y0, x1, y1 = (min(max(v, 0.0), 1.0) for v in box)
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


def iou(a, b) -> float:
    """Intersection over union of two (x0, y0, x1, y1) boxes."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _unique(regions: list[Region]) -> list[Region]:
    """One region per person and place: tools that write both MWG and MP regions (digiKam,
    exiftool's MWG module) write each face twice."""
    kept: list[Region] = []
    for r in regions:
        if not any(k.name.casefold() == r.name.casefold() and iou(k.box, r.box) > 0.5
                   for k in kept):
            kept.append(r)
    return kept


def _people_tags(root) -> list[str]:
    out = []
    for tag in (_DIGIKAM + "TagsList", _LR + "hierarchicalSubject"):
        values = [_text(li) for el in root.iter(tag) for li in _items(el)]
        values += [d.get(tag, "") for d in root.iter(_RDF + "Description")]
        for v in values:
            levels = [lv.strip() for lv in re.split(r"[|/]", v or "") if lv.strip()]
            if len(levels) >= 2 and levels[0].casefold() in PEOPLE_ROOTS:
                out.append(levels[-1])
    out += [name for el in root.iter(_IPTC_EXT + "PersonInImage")
            for name in (_text(li).strip() for li in _items(el)) if name]
    return out


__all__ = ["CONFIRMED_REGION", "GUESSED_REGION", "MAX_REGIONS", "PAMIR_REGION", "PEOPLE_ROOTS",
           "PeopleInFiles", "Region", "as_shown", "as_stored", "iou",
           "person_tags", "read_people", "read_regions"]
