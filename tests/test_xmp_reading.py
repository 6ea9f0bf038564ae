"""pamir.facts.metadata's public XMP helpers, the one reading of XMP that the keywords, the face
regions (pamir.facts.people.regions) and the sidecars' starting packet (pamir.jobs.sidecars) share."""

from __future__ import annotations

from pictures import picture, write_packet

from pamir.facts.metadata import (MAX_XMP_BYTES, embedded_xmp, open_picture, parse_xmp,
                                  xmp_sidecars)

PACKET = (b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
          b'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
          b'<rdf:Description rdf:about=""/></rdf:RDF></x:xmpmeta>')


def test_sidecars_most_specific_first_named_by_kind_and_capped(tmp_path):
    photo = picture(tmp_path / "photo.jpg")
    (tmp_path / "photo.jpg.xmp").write_bytes(PACKET)
    (tmp_path / "photo.xmp").write_bytes(b" " * (MAX_XMP_BYTES + 1))
    (tmp_path / "photo.jpg.json").write_text("{}")  # Takeout's: not XMP
    notes: list[str] = []
    assert xmp_sidecars(photo, notes) == [("sidecar NAME.EXT.xmp", PACKET)]
    assert len(notes) == 1 and "photo.xmp" in notes[0] and "over the" in notes[0]


def test_parse_refuses_entities_and_garbage_with_a_note_naming_the_place():
    bomb = (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">'
            b'<!ENTITY b "&a;&a;&a;&a;&a;">]><x>&b;</x>')
    notes: list[str] = []
    assert parse_xmp(PACKET, "here", notes) is not None and notes == []
    assert parse_xmp(bomb, "bomb.xmp", notes) is None
    assert parse_xmp(b"<unclosed", "garbage.xmp", notes) is None
    assert parse_xmp(PACKET + b" " * MAX_XMP_BYTES, "big.xmp", notes) is None
    assert [n.split(":")[0] for n in notes] == ["bomb.xmp", "garbage.xmp", "big.xmp"]


def test_embedded_packet_as_bytes_and_none_over_the_cap(tmp_path):
    small = write_packet(tmp_path / "small.png", PACKET)
    big = write_packet(tmp_path / "big.png", PACKET + b" " * MAX_XMP_BYTES)
    notes: list[str] = []
    with open_picture(small) as im:
        assert embedded_xmp(im, "small", notes) == PACKET
    with open_picture(big) as im:
        assert embedded_xmp(im, "big (embedded XMP)", notes) is None
    with open_picture(picture(tmp_path / "plain.png")) as im:
        assert embedded_xmp(im, "plain", notes) is None
    assert len(notes) == 1 and notes[0].startswith("big (embedded XMP): XMP packet of")
