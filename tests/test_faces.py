"""People (pamir.facts.people): faces found and embedded in real photographs (tests/data/faces,
face_recognition's MIT-licensed pictures), named regions written by exiftool read back,
names carried to unnamed faces, strangers left unnamed, unnamed people grouped."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pictures import exiftool, picture

dlib = pytest.importorskip("dlib")
from pamir.facts.people import faces as faces_module  # noqa: E402
from pamir.facts.people import (NAME_DISTANCE, Face, FaceFinder, Region, assign, find_faces,  # noqa: E402
                                group, iou, keyword_names, name_faces, person_tags, read_people,
                                read_regions)

DATA = Path(__file__).parent / "data" / "faces"
needs_exiftool = pytest.mark.skipif(shutil.which("exiftool") is None,
                                    reason="exiftool not installed (.ci/run installs it)")


@pytest.fixture(scope="module")
def finder():
    return FaceFinder()


@pytest.fixture(scope="module")
def faces(finder):
    """Each test picture's faces, found once."""
    names = sorted(p.name for p in DATA.glob("*.jpg"))
    found = find_faces([DATA / n for n in names])
    assert all(note == "" for _, note in found)
    return {n.removesuffix(".jpg"): f for n, (f, _) in zip(names, found)}


def one(faces, name) -> np.ndarray:
    (face,) = faces[name]
    return face.embedding


# ----------------------------------------------------------------------------- faces
def test_one_face_in_each_portrait_and_two_in_the_group(faces):
    # the group's third face, 43 pixels, is found only with the picture enlarged 2x (it is
    # enlarged less: pamir.facts.people.faces.MAX_ENLARGE)
    for name, found in faces.items():
        assert len(found) == (2 if name == "obama_and_biden" else 1), name
        for f in found:
            x0, y0, x1, y1 = f.box
            assert 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1
            assert f.embedding.shape == (128,) and f.embedding.dtype == np.float32
            assert f.score > 0 and f.size >= 30


def test_the_same_person_is_closer_than_another(faces):
    d = lambda a, b: float(np.linalg.norm(one(faces, a) - one(faces, b)))  # noqa: E731
    same = [d("obama", "obama2"), d("obama", "obama3"), d("obama2", "obama3"),
            d("biden", "biden2")]
    other = [d("obama", "biden"), d("obama2", "biden2"), d("obama", "kit_harington"),
             d("biden", "rose_leslie"), d("kit_harington", "rose_leslie")]
    assert max(same) < NAME_DISTANCE < min(other)


def test_a_big_picture_is_detected_at_the_bounded_size(finder, faces, tmp_path):
    """A picture enlarged 8x (about 10 megapixels) gives the same face: detection runs on the
    picture scaled to DETECT_SIDE, and the face's size is counted in the file's pixels."""
    small = Image.open(DATA / "obama.jpg")
    big = tmp_path / "big.jpg"
    small.resize((small.width * 8, small.height * 8), Image.Resampling.BICUBIC).save(big)
    ((face,), note), = find_faces([big])
    (ref,) = faces["obama"]
    assert note == "" and iou(face.box, ref.box) > 0.8
    assert np.linalg.norm(face.embedding - ref.embedding) < 0.2
    assert 6 * ref.size < face.size < 10 * ref.size


def test_a_bad_file_is_a_note_never_an_exception(tmp_path):
    (tmp_path / "text.jpg").write_text("not a picture")
    (tmp_path / "empty.jpg").write_bytes(b"")
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes((DATA / "obama.jpg").read_bytes()[:400])
    blank = picture(tmp_path / "blank.png", size=(64, 48))
    out = find_faces([tmp_path / "missing.jpg", tmp_path / "text.jpg", tmp_path / "empty.jpg",
                      truncated, blank])
    assert [f for f, _ in out] == [None, None, None, None, []]
    assert "file not found" in out[0][1] and "empty file" in out[2][1]
    assert all(str(p) in note for p, (_, note) in
               zip([tmp_path / "missing.jpg", tmp_path / "text.jpg"], out))


# ----------------------------------------------------------------------------- regions
MWG = ("-XMP-mwg-rs:RegionInfo={AppliedToDimensions={W=480,H=343,Unit=pixel},"
       "RegionList=[{Area={X=0.42,Y=0.38,W=0.12,H=0.16,Unit=normalized},Name=Joe Biden,"
       "Type=Face},{Area={X=0.62,Y=0.35,W=0.12,H=0.16,Unit=normalized},Name=Barack Obama,"
       "Type=Face},{Area={X=0.1,Y=0.1,W=0.1,H=0.1,Unit=normalized},Name=Focus point,"
       "Type=Focus}]}")
MP = ("-XMP-MP:RegionInfoMP={Regions=[{PersonDisplayName=Joe Biden,"
      "Rectangle=0.36|, 0.30|, 0.12|, 0.16}]}")


@needs_exiftool
@pytest.mark.parametrize("where", ["embedded", "NAME.EXT.xmp", "NAME.xmp"])
def test_mwg_regions_read_back_with_their_boxes(tmp_path, where):
    p = picture(tmp_path / "group.jpg", size=(343, 480))
    if where == "embedded":
        exiftool(p, MWG)
    else:
        sidecar = tmp_path / ("group.jpg.xmp" if where == "NAME.EXT.xmp" else "group.xmp")
        subprocess.run(["exiftool", "-q", "-q", MWG, "-o", str(sidecar), str(p)], check=True)
    regions = read_regions(p)
    # the Focus region is no person; x, y is the centre
    assert [r.name for r in regions] == ["Joe Biden", "Barack Obama"]
    assert regions[0].box == pytest.approx((0.36, 0.30, 0.48, 0.46))
    assert regions[1].box == pytest.approx((0.56, 0.27, 0.68, 0.43))
    assert regions[0].source == ("embedded XMP, MWG" if where == "embedded"
                                 else f"sidecar {where}, MWG")


@needs_exiftool
@pytest.mark.parametrize("where", ["embedded", "NAME.EXT.xmp"])
def test_mp_regions_read_back_with_their_boxes(tmp_path, where):
    p = picture(tmp_path / "group.jpg")
    if where == "embedded":
        exiftool(p, MP)
    else:
        subprocess.run(["exiftool", "-q", "-q", MP, "-o", str(tmp_path / "group.jpg.xmp"),
                        str(p)], check=True)
    (r,) = read_regions(p)
    # x, y is the top-left corner
    assert r.name == "Joe Biden" and r.box == pytest.approx((0.36, 0.30, 0.48, 0.46))
    assert r.source.endswith(", MP")


@needs_exiftool
def test_a_face_written_both_ways_is_one_region_and_the_sidecar_wins(tmp_path):
    p = exiftool(picture(tmp_path / "a.jpg"), MWG, MP)
    assert [r.name for r in read_regions(p)] == ["Joe Biden", "Barack Obama"]
    plain = picture(tmp_path / "plain" / "a.jpg")
    subprocess.run(["exiftool", "-q", "-q", "-XMP-mwg-rs:RegionInfo={RegionList=[{Area={X=0.5,"
                    "Y=0.5,W=0.2,H=0.2,Unit=normalized},Name=Alice,Type=Face}]}", "-o",
                    str(tmp_path / "a.xmp"), str(plain)], check=True)
    assert [r.name for r in read_regions(p)] == ["Alice"]


@needs_exiftool
@pytest.mark.parametrize("drawn_on", ["stored", "shown"])
def test_a_region_of_a_turned_photo_covers_the_face_as_shown(tmp_path, faces, drawn_on):
    """A portrait phone photo is stored sideways with EXIF orientation 6: MWG regions are
    drawn on the stored picture (Lightroom, digiKam), or by some writers on the picture as
    shown, which their AppliedToDimensions then give."""
    (face,) = faces["obama"]
    x0, y0, x1, y1 = face.box
    shown = Image.open(DATA / "obama.jpg")
    p = tmp_path / "turned.jpg"
    shown.rotate(90, expand=True).save(p)  # stored: the picture turned a quarter left
    if drawn_on == "stored":  # (x, y) shown is (1 - y, x) stored
        area, dims = ((y0 + y1) / 2, 1 - (x0 + x1) / 2, y1 - y0, x1 - x0), shown.size[::-1]
    else:
        area, dims = ((x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0), shown.size
    exiftool(p, "-n", "-Orientation=6", "-XMP-mwg-rs:RegionInfo={AppliedToDimensions={"
             f"W={dims[0]},H={dims[1]},Unit=pixel}},RegionList=[{{Area={{X={area[0]},"
             f"Y={area[1]},W={area[2]},H={area[3]},Unit=normalized}},Name=Barack Obama,"
             "Type=Face}]}")
    (region,) = read_regions(p)
    assert region.box == pytest.approx(face.box, abs=1e-3)
    ((found,), _), = find_faces([p])
    assert iou(found.box, region.box) > 0.8


@needs_exiftool
def test_people_tags_are_names(tmp_path):
    p = exiftool(picture(tmp_path / "a.jpg"), "-XMP-digiKam:TagsList=People/Alice Smith",
                 "-XMP-digiKam:TagsList=Places/Paris",
                 "-XMP-lr:HierarchicalSubject=People|Family|Bob")
    assert person_tags(p) == ["Alice Smith", "Bob"]


@needs_exiftool
def test_iptc_person_shown_is_a_name(tmp_path):
    # Lightroom's "Person Shown", Photo Mechanic's and a newsroom's field for who is in it
    p = exiftool(picture(tmp_path / "a.jpg"), "-XMP-iptcExt:PersonInImage=Barack Obama",
                 "-XMP-iptcExt:PersonInImage=Joe Biden")
    assert person_tags(p) == ["Barack Obama", "Joe Biden"]


def test_hostile_or_broken_xmp_is_a_note(tmp_path):
    p = picture(tmp_path / "a.jpg")
    (tmp_path / "a.jpg.xmp").write_text(
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><x:xmpmeta xmlns:x="adobe:ns:'
        'meta/">&a;</x:xmpmeta>')
    (tmp_path / "a.xmp").write_bytes(b"<not xml")
    got = read_people(p)
    assert got.regions == [] and len(got.notes) == 2


# ----------------------------------------------------------------------------- naming
def test_regions_name_the_faces_they_overlap(faces, finder):
    group_faces = faces["obama_and_biden"]
    regions = [Region("Joe Biden", (0.36, 0.30, 0.48, 0.46), "test"),
               Region("Barack Obama", (0.56, 0.27, 0.68, 0.43), "test"),
               Region("Nobody Detected", (0.05, 0.05, 0.2, 0.25), "test")]
    image = np.asarray(Image.open(DATA / "obama_and_biden.jpg").convert("RGB"))
    named = name_faces(group_faces, regions, embed=lambda box: finder.embed(image, box))
    assert [n.name for n in named] == ["Joe Biden", "Barack Obama", "Nobody Detected"]
    assert named[2].how.endswith("embedded") and np.isnan(named[2].face.score)
    # the region's names are the right people's: their faces match the portraits
    assert np.linalg.norm(named[0].face.embedding - one(faces, "biden")) < NAME_DISTANCE
    assert np.linalg.norm(named[1].face.embedding - one(faces, "obama")) < NAME_DISTANCE
    # without a way to embed, a region that matches no face is left out
    assert len(name_faces(group_faces, regions)) == 2


def test_a_known_name_in_the_keywords_names_a_lone_face(faces):
    known = ["Barack Obama", "Joe Biden"]
    (n,) = name_faces(faces["obama"], [], ["president", "barack", "obama"], known)
    assert (n.name, n.how) == ("barack obama", "keyword")
    (n,) = name_faces(faces["obama"], [], ["president"], known)
    assert n.name is None
    # two faces, or two names: nobody can say which face is whose
    assert {n.name for n in name_faces(faces["obama_and_biden"], [], ["barack obama"],
                                       known)} == {None}
    (n,) = name_faces(faces["obama"], [], ["barack obama", "joe biden"], known)
    assert n.name is None
    assert keyword_names(["Alice", "smith", "bob"], ["alice smith", "alice", "Bob"]) == [
        "alice smith", "bob"]


def test_names_carry_to_unnamed_faces_and_strangers_stay_unnamed(faces):
    named = np.stack([one(faces, "obama"), one(faces, "biden")])
    names = ["Barack Obama", "Joe Biden"]
    unnamed = np.stack([one(faces, "obama2"), one(faces, "obama3"), one(faces, "biden2"),
                        one(faces, "kit_harington"), one(faces, "rose_leslie")])
    got = assign(unnamed, named, names)
    assert [n for n, _ in got] == ["barack obama", "barack obama", "joe biden", None, None]
    assert all(d <= NAME_DISTANCE for _, d in got[:3])
    assert all(d > NAME_DISTANCE for _, d in got[3:])
    assert assign(unnamed[:1], np.zeros((0, 128)), []) == [(None, float("inf"))]


def test_unnamed_people_are_grouped_incrementally(faces):
    X = np.stack([one(faces, "obama"), one(faces, "obama2"), one(faces, "biden"),
                  one(faces, "biden2"), one(faces, "kit_harington")])
    labels = group(X)
    assert labels[0] == labels[1] and labels[2] == labels[3]
    assert len({labels[0], labels[2], labels[4]}) == 3
    # new faces: obama3 joins Obama's group, Rose Leslie starts her own; old groups stay
    more = np.vstack([X, one(faces, "obama3")[None], one(faces, "rose_leslie")[None]])
    again = group(more, list(labels) + [-1, -1])
    assert list(again[:5]) == list(labels)
    assert again[5] == labels[0] and again[6] not in set(labels.tolist())


def test_iou():
    assert iou((0, 0, 1, 1), (0, 0, 1, 1)) == 1.0
    assert iou((0, 0, 0.5, 0.5), (0.5, 0.5, 1, 1)) == 0.0
    assert iou((0, 0, 0.5, 1), (0.25, 0, 0.75, 1)) == pytest.approx(1 / 3)


def test_face_record():
    f = Face((0.1, 0.2, 0.3, 0.4), np.zeros(128, np.float32), 1.5, 40)
    assert f.quality == (1.5, 40)


def test_without_the_faces_extra_the_message_names_it(monkeypatch):
    import importlib.util
    import sys

    from pamir.extras import MissingExtra

    monkeypatch.setitem(sys.modules, "dlib", None)
    with pytest.raises(MissingExtra, match=r"pamir\[faces\]"):
        FaceFinder()
    monkeypatch.undo()
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "face_recognition_models"
                        else real(name, *a))
    with pytest.raises(MissingExtra, match=r"face_recognition_models .*pamir\[faces\]"):
        FaceFinder()


@pytest.mark.parametrize("orientation", range(1, 9))
def test_as_shown_turns_a_box_as_pillow_turns_the_pixels(orientation):
    from PIL import ImageOps

    from pamir.facts.people.regions import as_shown

    a = np.zeros((40, 60), np.uint8)
    a[5:15, 10:30] = 255  # stored box (10/60, 5/40, 30/60, 15/40)
    im = Image.fromarray(a)
    exif = im.getexif()
    exif[0x0112] = orientation
    im.info["exif"] = exif.tobytes()
    shown = np.asarray(ImageOps.exif_transpose(im))
    ys, xs = np.nonzero(shown)
    h, w = shown.shape
    expected = (xs.min() / w, ys.min() / h, (xs.max() + 1) / w, (ys.max() + 1) / h)
    assert as_shown((10 / 60, 5 / 40, 30 / 60, 15 / 40), orientation) == pytest.approx(expected)


def test_regions_written_as_attributes_are_read(tmp_path):
    """digiKam and Lightroom write the same regions with attributes, not elements."""
    p = picture(tmp_path / "a.jpg")
    (tmp_path / "a.jpg.xmp").write_text("""<x:xmpmeta xmlns:x="adobe:ns:meta/">
 <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
  <rdf:Description rdf:about="" xmlns:mwg-rs="http://www.metadataworkinggroup.com/schemas/regions/"
    xmlns:stArea="http://ns.adobe.com/xmp/sType/Area#"
    xmlns:stDim="http://ns.adobe.com/xap/1.0/sType/Dimensions#"
    xmlns:digiKam="http://www.digikam.org/ns/1.0/">
   <mwg-rs:Regions rdf:parseType="Resource">
    <mwg-rs:AppliedToDimensions stDim:w="32" stDim:h="24" stDim:unit="pixel"/>
    <mwg-rs:RegionList><rdf:Bag>
     <rdf:li><rdf:Description mwg-rs:Name="Zoë Ångström" mwg-rs:Type="Face">
      <mwg-rs:Area stArea:x="0.5" stArea:y="0.5" stArea:w="0.2" stArea:h="0.4"
        stArea:unit="normalized"/>
     </rdf:Description></rdf:li>
     <rdf:li><rdf:Description mwg-rs:Name="Pixel Pete" mwg-rs:Type="Face">
      <mwg-rs:Area stArea:x="8" stArea:y="6" stArea:w="8" stArea:h="6" stArea:unit="pixel"/>
     </rdf:Description></rdf:li>
     <rdf:li><rdf:Description mwg-rs:Name="" mwg-rs:Type="Face">
      <mwg-rs:Area stArea:x="0.1" stArea:y="0.1" stArea:w="0.1" stArea:h="0.1"/>
     </rdf:Description></rdf:li>
    </rdf:Bag></mwg-rs:RegionList>
   </mwg-rs:Regions>
   <digiKam:TagsList><rdf:Seq><rdf:li>People/Zoë Ångström</rdf:li></rdf:Seq></digiKam:TagsList>
  </rdf:Description>
 </rdf:RDF>
</x:xmpmeta>""", encoding="utf-8")
    got = read_people(p)
    assert [(r.name, r.box) for r in got.regions] == [
        ("Zoë Ångström", pytest.approx((0.4, 0.3, 0.6, 0.7))),
        ("Pixel Pete", pytest.approx((0.125, 0.125, 0.375, 0.375)))]
    assert got.tags == ["Zoë Ångström"] and not got.notes


def test_person_facts_are_the_name_and_its_words():
    from pamir.facts.people import person_facts

    facts = person_facts([("Zoë Smith", (0, 0, 0.1, 0.1), 1.0), ("Bob", (0.5, 0.5, 0.6, 0.6),
                                                                  0.7)])
    assert [(f.kind, f.word, f.confidence) for f in facts] == [
        ("person", "zoe smith", 1.0), ("person", "zoe", 1.0), ("person", "smith", 1.0),
        ("person", "bob", 0.7)]
    assert '"shown": "Zoë Smith"' in facts[0].detail


@needs_exiftool
def test_find_people_gives_faces_region_names_and_tags(tmp_path):
    from pamir.facts.people import find_people

    p = tmp_path / "group.jpg"
    shutil.copy(DATA / "obama_and_biden.jpg", p)
    exiftool(p, MWG, "-XMP-digiKam:TagsList=People/Joe Biden")
    (tmp_path / "bad.jpg").write_text("no")
    got, bad = find_people([p, tmp_path / "bad.jpg"])
    assert [n.name for n in got.faces] == ["Joe Biden", "Barack Obama"]
    assert got.tags == ["Joe Biden"] and not got.notes
    assert bad.faces is None and "bad.jpg" in bad.notes[0]


def test_threads_sharing_a_finder_find_what_one_finds(finder, faces):
    """The stage's faces readers share one FaceFinder: each thread scans with its own
    detector (dlib's keeps the picture it scans in itself and lets go of the GIL)."""
    group = np.asarray(Image.open(DATA / "obama_and_biden.jpg").convert("RGB"))
    portrait = np.asarray(Image.open(DATA / "obama.jpg").convert("RGB"))
    alone = {k: [f.box for f in finder.find(p)] for k, p in (("g", group), ("p", portrait))}
    seen: dict[str, list] = {"g": [], "p": []}

    def scan(key, picture):
        for _ in range(3):
            seen[key].append([f.box for f in finder.find(picture)])

    threads = [threading.Thread(target=scan, args=a) for a in (("g", group), ("p", portrait))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(boxes == alone[k] for k, runs in seen.items() for boxes in runs)
    assert len(alone["g"]) == 2 and len(alone["p"]) == 1


def test_a_spoilt_detector_file_in_the_cache_is_made_again(tmp_path, monkeypatch):
    monkeypatch.setenv("PAMIR_CACHE", str(tmp_path))
    path = faces_module.detector_file(dlib)
    assert path is not None and path.is_file() and path.parent.parent == tmp_path
    path.write_bytes(b"not a detector")
    detector = faces_module.frontal_detector(dlib, path)
    picture = np.asarray(Image.open(DATA / "obama.jpg").convert("RGB"))
    assert len(detector(picture)) == 1  # a working detector, built
    assert not path.exists()  # and the spoilt file gone: the next finder saves it again
    assert faces_module.detector_file(dlib) == path and path.is_file()
