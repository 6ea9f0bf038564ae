"""An XMP packet with what pamir knows of a picture merged in (pamir.jobs.sidecars writes it):
pamir's words in dc:subject and under `pamir` in the keyword hierarchies, named faces as MWG
regions, the place in photoshop:City/State/Country and Iptc4xmpCore:Location.

`merge_xmp(existing, known)` keeps every field of `existing` (every namespace under the
prefix it had: exiftool names a field's group by it); pamir's own earlier words (those only
under `pamir|`, pamir.facts.metadata.guessed_words) and regions (mwg-rs:Description "pamir: ...")
are replaced, nobody else's; a place field already there is kept; a face another's region
already names is not written again. The same input gives the same bytes, so that a sidecar
already up to date is not written.

XML with defusedxml (no DTDs, no entities, a size cap), as pamir.facts.metadata reads XMP; the
tree is ElementTree's, written by `_serialise`.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from xml.etree import ElementTree as ET
from xml.sax.saxutils import escape, quoteattr

from defusedxml import ElementTree as SafeET

from .metadata import GUESS_PARENT, MAX_XMP_BYTES, guessed_words
from .people.naming import REGION_IOU
from .people.regions import CONFIRMED_REGION, GUESSED_REGION, PAMIR_REGION, as_stored, iou

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
PLACE_FIELDS = ("photoshop:City", "photoshop:State", "photoshop:Country",
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


def merge_xmp(existing: bytes | None, known: Known,
              geometry: tuple[int, tuple[int, int], tuple[int, int]] = (1, (0, 0), (0, 0)),
              theirs: Sequence[str] = ()) -> bytes:
    """An XMP sidecar: `existing` (a packet, or None for a new one) with pamir's earlier
    words and regions replaced by `known`'s, its other fields kept (the module's doc).
    geometry: the picture's (EXIF orientation, size as stored, size as shown); theirs: the
    person's keywords written elsewhere in the picture (its IPTC Keywords), added as theirs
    where the packet lacks them, as MWG's guidelines reconcile the two (a new sidecar: tools
    that find one read its keywords, not the picture's IPTC). Raises SidecarError where
    `existing` is not XMP pamir can read."""
    root, prefixes = _parse(existing if existing is not None else _EMPTY)
    rdf = _rdf_of(root)
    descriptions = [d for d in rdf if d.tag == _DESC]
    if not descriptions:
        descriptions = [ET.SubElement(rdf, _DESC, {_q("rdf:about"): ""})]
    _merge_words(descriptions, known.words, theirs)
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


def is_packet(data: bytes) -> bool:
    """Whether `data` is an XMP packet pamir can merge into."""
    try:
        _rdf_of(_parse(data)[0])
    except SidecarError:
        return False
    return True


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


def _merge_words(descriptions, words: list[str], theirs: Sequence[str] = ()) -> None:
    """dc:subject and the hierarchies: pamir's earlier words out, the person's `theirs` in
    where missing, pamir's `words` in under `pamir` where the person does not have them."""
    create = bool(words or theirs)
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
    for word in dict.fromkeys(w.strip() for w in theirs if w.strip()):
        if word.casefold() not in own and word.casefold() != GUESS_PARENT:
            own.add(word.casefold())
            ET.SubElement(subject, _LI).text = word
            for bag, _ in hierarchies:
                ET.SubElement(bag, _LI).text = word
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
    for name in PLACE_FIELDS:
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
    a face already covers it. Regions with nothing of pamir's to change are left as they
    are, to the byte."""
    orientation, stored, shown = geometry
    d, regions, _ = _find(descriptions, "mwg-rs:Regions")
    info = None if regions is None else (regions.find(_DESC) if regions.find(_DESC)
                                         is not None else regions)
    listing = None if info is None else info.find(_q("mwg-rs:RegionList"))
    bag = None if listing is None else next(
        (c for c in listing if c.tag in (_BAG, _q("rdf:Seq"))), None)
    ours = [li for li in _items(bag)
            if _region_of(li)[0].startswith(PAMIR_REGION)] if bag is not None else []
    if not faces and not ours:
        return
    if regions is None:
        d = descriptions[0]
        regions = info = ET.SubElement(d, _q("mwg-rs:Regions"), {_PARSE_TYPE: "Resource"})
    dims = _dimensions(info)
    turned = orientation >= 5 and dims == shown and stored[0] != stored[1]
    if dims is None and stored != (0, 0) and faces:
        _set_dimensions(info, stored)
    if listing is None:
        listing = ET.SubElement(info, _q("mwg-rs:RegionList"))
    if bag is None:
        bag = ET.SubElement(listing, _BAG)
    for li in ours:
        bag.remove(li)
    theirs = [box for li in _items(bag) if (box := _region_of(li)[1]) is not None]
    for face in faces:
        box = face.box if turned else as_stored(face.box, orientation)
        # a region of another's that names this face (as the faces pass matches them)
        if not any(iou(box, other) >= REGION_IOU for other in theirs):
            bag.append(_region(face, box))
    if not _items(bag):  # nothing left but pamir's structure: none written
        d.remove(regions)


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


__all__ = ["NS", "PLACE_FIELDS", "Face", "Known", "SidecarError", "is_packet", "merge_xmp"]
