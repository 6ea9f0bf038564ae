"""Writing back into XMP sidecars (pamir.jobs.sidecars, `pamir annotate --xmp`, `pamir index
--write-xmp`): written in digiKam's and Lightroom's conventions and read back by exiftool;
merged into a sidecar with other tools' fields, every one of them kept; pamir's own words
and guessed names never read back as the person's, a word the person kept is; the old
sidecar left whole when a write fails."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pamir.facts.metadata import read_metadata
from pamir.facts.people.regions import read_people
from pamir.jobs.sidecars import (WORD_PROBABILITY, Face, Known, confident_words, merge_xmp,
                                 write_bars,
                                 sidecar_targets, write_xmp)
from pictures import exiftool, gps_tags, picture

needs_exiftool = pytest.mark.skipif(shutil.which("exiftool") is None,
                                    reason="exiftool not installed (.ci/run installs it)")

PLACE = {"photoshop:City": "Kyoto", "photoshop:State": "Kyoto",
         "photoshop:Country": "Japan", "Iptc4xmpCore:Location": "Kamigyō-ku"}
ALICE = Face("Alice", (0.1, 0.2, 0.4, 0.6), confirmed=True)
BOB = Face("Bob", (0.55, 0.2, 0.85, 0.6), confirmed=False, confidence=0.95)


def read_back(path: Path) -> dict:
    """exiftool's reading of a file: {group:tag: value}, structures as JSON."""
    out = subprocess.run(["exiftool", "-j", "-G1", "-a", "-struct", "-n", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return {k: v for k, v in json.loads(out)[0].items()
            if not k.startswith(("System:", "File:", "ExifTool:", "SourceFile"))}


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


@needs_exiftool
def test_written_in_digikam_and_lightroom_conventions_and_read_back_by_exiftool(tmp_path):
    p = picture(tmp_path / "a.jpg")
    results = write_xmp(p, Known(["tiger", "grass"], [ALICE, BOB], PLACE), setting="both")
    assert [what for _, what in results] == ["written", "written"]
    for sidecar in (tmp_path / "a.jpg.xmp", tmp_path / "a.xmp"):  # digiKam's, Lightroom's
        got = read_back(sidecar)
        assert as_list(got["XMP-dc:Subject"]) == ["tiger", "grass"]
        assert as_list(got["XMP-lr:HierarchicalSubject"]) == ["pamir|tiger", "pamir|grass"]
        assert got["XMP-photoshop:City"] == "Kyoto" and got["XMP-photoshop:Country"] == "Japan"
        assert got["XMP-photoshop:State"] == "Kyoto"
        assert got["XMP-iptcCore:Location"] == "Kamigyō-ku"
        regions = got["XMP-mwg-rs:RegionInfo"]
        assert regions["AppliedToDimensions"] == {"W": 32, "H": 24, "Unit": "pixel"}
        alice, bob = regions["RegionList"]
        assert (alice["Name"], alice["Type"], bob["Name"]) == ("Alice", "Face", "Bob")
        area = alice["Area"]  # MWG: the centre and the size, normalised
        assert area["Unit"] == "normalized"
        assert [area[k] for k in "XYWH"] == pytest.approx([0.25, 0.4, 0.3, 0.4], abs=1e-6)
    # the same again: nothing to change, the file not touched
    before = (tmp_path / "a.jpg.xmp").stat().st_mtime_ns
    assert [w for _, w in write_xmp(p, Known(["tiger", "grass"], [ALICE, BOB], PLACE),
                                    setting="both")] == ["unchanged", "unchanged"]
    assert (tmp_path / "a.jpg.xmp").stat().st_mtime_ns == before


def test_the_setting_picks_the_sidecar(tmp_path, monkeypatch):
    p = tmp_path / "IMG_1.JPG"
    assert sidecar_targets(p) == [tmp_path / "IMG_1.JPG.xmp"]  # the default: digiKam's
    assert sidecar_targets(p, "NAME.xmp") == [tmp_path / "IMG_1.xmp"]
    monkeypatch.setenv("PAMIR_XMP_SIDECAR", "NAME.xmp")
    assert sidecar_targets(p) == [tmp_path / "IMG_1.xmp"]
    (tmp_path / "IMG_1.XMP").write_bytes(b"")  # an existing one, spelt in capitals
    assert sidecar_targets(p) == [tmp_path / "IMG_1.XMP"]
    with pytest.raises(ValueError, match="NAME.EXT.xmp"):
        sidecar_targets(p, "IMG.xmp")


OTHERS = [  # other tools' fields: digiKam's, Lightroom's, darktable's, a person's
    "-XMP-dc:Subject=holiday", "-XMP-dc:Subject=Carol",
    "-XMP-lr:HierarchicalSubject=Places|holiday", "-XMP-lr:HierarchicalSubject=People|Carol",
    "-XMP-digiKam:TagsList=Places/holiday", "-XMP-digiKam:TagsList=People/Carol",
    "-XMP-dc:Title=At the shrine", "-XMP-dc:Description=The first day",
    "-XMP-xmp:Rating=4", "-XMP-xmp:Label=Red", "-XMP-photoshop:City=Paris",
    "-XMP-crs:Exposure2012=+0.50", "-XMP-exif:GPSLatitude=35.0", "-XMP-exif:GPSLatitudeRef=N",
    "-XMP-mwg-rs:RegionInfo={AppliedToDimensions={W=32,H=24,Unit=pixel},RegionList=["
    "{Area={X=0.7,Y=0.4,W=0.3,H=0.4,Unit=normalized},Name=Carol,Type=Face},"
    "{Area={X=0.2,Y=0.8,W=0.2,H=0.2,Unit=normalized},Name=Rex,Type=Pet}]}",
]


@needs_exiftool
def test_merged_into_a_sidecar_with_other_tools_fields_keeps_every_one(tmp_path):
    p = picture(tmp_path / "a.jpg")
    sidecar = tmp_path / "a.jpg.xmp"
    subprocess.run(["exiftool", "-q", "-q", *OTHERS, "-o", str(sidecar), str(p)], check=True)
    # a field of a tool exiftool does not know, written by hand
    text = sidecar.read_text(encoding="utf-8").replace(
        "<rdf:Description rdf:about=''", "<rdf:Description rdf:about=''\n"
        "  xmlns:darktable='http://darktable.sf.net/' darktable:xmp_version='5'\n"
        "  xmlns:own='http://example.org/own/' own:mark='kept'", 1)
    sidecar.write_text(text, encoding="utf-8")
    before = read_back(sidecar)
    # Bob overlaps Carol's region: hers is kept and his is not written over it
    assert write_xmp(p, Known(["tiger"], [ALICE, Face("Bob", (0.55, 0.2, 0.85, 0.6), False,
                                                      0.95)], PLACE))[0][1] == "written"
    after = read_back(sidecar)
    changed = {"XMP-dc:Subject", "XMP-lr:HierarchicalSubject", "XMP-digiKam:TagsList",
               "XMP-mwg-rs:RegionInfo", "XMP-photoshop:State", "XMP-photoshop:Country",
               "XMP-iptcCore:Location"}
    for key, value in before.items():
        if key not in changed:
            assert after.get(key) == value, key
    assert after["XMP-photoshop:City"] == "Paris"  # a place field there is kept
    assert after["XMP-photoshop:Country"] == "Japan"  # one missing is added
    assert as_list(after["XMP-dc:Subject"]) == ["holiday", "Carol", "tiger"]
    assert as_list(after["XMP-lr:HierarchicalSubject"]) == ["Places|holiday", "People|Carol",
                                                            "pamir|tiger"]
    assert as_list(after["XMP-digiKam:TagsList"]) == ["Places/holiday", "People/Carol",
                                                      "pamir/tiger"]
    regions = after["XMP-mwg-rs:RegionInfo"]["RegionList"]
    assert [r["Name"] for r in regions] == ["Carol", "Rex", "Alice"]
    assert regions[:2] == before["XMP-mwg-rs:RegionInfo"]["RegionList"]
    assert before["XMP-own:Mark"] == "kept" and any(k.startswith("XMP-darktable:") for k in before)
    # and pamir's reader: the person's words and names, none of pamir's guesses
    meta = read_metadata(p)
    assert "tiger" not in meta.caption and {"holiday", "carol"} <= set(meta.caption)
    assert {r.name for r in read_people(p).regions} == {"Carol", "Alice"}


@needs_exiftool
def test_pamir_words_are_never_learned_back_and_a_kept_word_is(tmp_path):
    p = picture(tmp_path / "a.jpg")
    write_xmp(p, Known(["tiger", "sky"], [BOB]))
    meta = read_metadata(p)
    assert meta.caption is None  # pamir's guesses only: uncaptioned, nothing learned
    assert read_people(p).regions == []  # a guessed name is not a name people gave
    # the person keeps "tiger" (moves it out of pamir| in Lightroom) and adds a word
    exiftool(p.with_name("a.jpg.xmp"), "-XMP-lr:HierarchicalSubject-=pamir|tiger",
             "-XMP-lr:HierarchicalSubject+=Animals|tiger", "-XMP-dc:Subject+=zoo")
    assert set(read_metadata(p).caption) == {"tiger", "animals", "zoo"}
    # pamir writes again: its earlier guess goes, the kept word stays the person's
    write_xmp(p, Known(["water", "tiger"], []))
    got = read_back(p.with_name("a.jpg.xmp"))
    assert as_list(got["XMP-dc:Subject"]) == ["tiger", "zoo", "water"]
    assert as_list(got["XMP-lr:HierarchicalSubject"]) == ["Animals|tiger", "pamir|water"]
    assert set(read_metadata(p).caption) == {"tiger", "animals", "zoo"}
    # what `pamir fit FOLDER` learns from: the kept words, and nothing of a picture with
    # pamir's words alone
    write_xmp(picture(tmp_path / "b.jpg"), Known(["tiger", "sky"], []))
    from pamir.facts.collection import load_collection
    collection = load_collection(tmp_path)
    assert dict(zip([q.name for q in collection.paths], collection.captions)) == {
        "a.jpg": tuple(read_metadata(p).caption), "b.jpg": None}


def test_a_guess_copied_into_iptc_is_not_learned_either(tmp_path):
    """A tool that copies the sidecar's keywords into the picture's IPTC copies pamir's
    guesses with no hierarchy: they are left out there too."""
    if shutil.which("exiftool") is None:
        pytest.skip("exiftool not installed (.ci/run installs it)")
    p = picture(tmp_path / "a.jpg")
    write_xmp(p, Known(["tiger"], []))
    exiftool(p, "-IPTC:Keywords=tiger", "-IPTC:Keywords=beach")  # after pamir wrote
    assert read_metadata(p).caption == ("beach",)


def test_regions_are_written_as_stored_and_read_back_as_shown(tmp_path):
    """A portrait phone photo (EXIF orientation 6): MWG boxes are in the picture as stored;
    pamir's reader turns them back to the picture as shown."""
    from PIL import Image

    p = tmp_path / "portrait.jpg"
    im = Image.new("RGB", (40, 30), (90, 90, 90))
    exif = im.getexif()
    exif[0x0112] = 6
    im.save(p, exif=exif)
    box = (0.1, 0.5, 0.5, 0.7)  # shown: 30 wide, 40 high
    write_xmp(p, Known([], [Face("Alice", box, True)]))
    [region] = read_people(p).regions
    assert region.name == "Alice"
    assert np.allclose(region.box, box, atol=1e-5)
    text = (tmp_path / "portrait.jpg.xmp").read_text(encoding="utf-8")
    assert "<stDim:w>40</stDim:w>" in text  # the stored size


def test_a_failed_write_leaves_the_old_sidecar(tmp_path, monkeypatch):
    import pamir.storage

    p = picture(tmp_path / "a.jpg")
    write_xmp(p, Known(["tiger"], []))
    sidecar = tmp_path / "a.jpg.xmp"
    old = sidecar.read_bytes()

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pamir.storage.os, "replace", full_disk)
    [(target, what)] = write_xmp(p, Known(["sky"], []))
    assert target == str(sidecar) and "No space left" in what
    assert sidecar.read_bytes() == old
    assert sorted(f.name for f in tmp_path.iterdir()) == ["a.jpg", "a.jpg.xmp"]  # no temp


@pytest.mark.parametrize("content", [
    b"not xml at all <<<",
    b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
    b"<x>&b;</x>",
    b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><nothing/></x:xmpmeta>',
])
def test_a_sidecar_pamir_cannot_read_is_left_alone(tmp_path, content):
    p = picture(tmp_path / "a.jpg")
    sidecar = tmp_path / "a.jpg.xmp"
    sidecar.write_bytes(content)
    [(_, what)] = write_xmp(p, Known(["tiger"], [], PLACE))
    assert "left alone" in what
    assert sidecar.read_bytes() == content


def test_a_new_sidecar_starts_from_the_pictures_own_xmp(tmp_path):
    if shutil.which("exiftool") is None:
        pytest.skip("exiftool not installed (.ci/run installs it)")
    p = exiftool(picture(tmp_path / "a.jpg"), "-XMP-dc:Subject=beach", "-XMP-xmp:Rating=5")
    write_xmp(p, Known(["sea"], []))
    got = read_back(tmp_path / "a.jpg.xmp")
    assert as_list(got["XMP-dc:Subject"]) == ["beach", "sea"] and got["XMP-xmp:Rating"] == 5
    assert read_metadata(p).caption == ("beach",)


@needs_exiftool
def test_a_new_sidecar_carries_the_pictures_iptc_keywords(tmp_path):
    """Tools that find a sidecar read its keywords, not the picture's IPTC: a new one takes
    them (MWG's reconciliation), as the person's."""
    p = exiftool(picture(tmp_path / "a.jpg"), "-IPTC:Keywords=beach", "-IPTC:Keywords=sea")
    write_xmp(p, Known(["sea", "sand"], []))
    got = read_back(tmp_path / "a.jpg.xmp")
    assert as_list(got["XMP-dc:Subject"]) == ["beach", "sea", "sand"]
    assert as_list(got["XMP-lr:HierarchicalSubject"]) == ["beach", "sea", "pamir|sand"]
    assert read_metadata(p).caption == ("beach", "sea")


def test_nothing_to_write_makes_no_sidecar(tmp_path):
    p = picture(tmp_path / "a.jpg")
    assert write_xmp(p, Known()) == [(str(tmp_path / "a.jpg.xmp"), "nothing")]
    assert not (tmp_path / "a.jpg.xmp").exists()
    # and merging is idempotent, byte for byte
    once = merge_xmp(None, Known(["a", "b"], [ALICE], PLACE))
    assert merge_xmp(once, Known(["a", "b"], [ALICE], PLACE)) == once


def test_only_calibrated_words_likely_enough_are_written(monkeypatch):
    records = [{"word": "tiger", "score": 2.0, "probability": 0.95},
               {"word": "grass", "score": 1.0, "probability": 0.55},
               {"word": "cat", "probability": 0.99, "source": "imagenet"},
               {"word": "kyoto", "shown": "Kyoto", "source": "place", "confidence": 1.0},
               {"word": "sky", "score": 0.5}]
    assert confident_words(records, 0.5) == ["tiger", "grass"]
    assert confident_words(records) == ["tiger"]  # WORD_PROBABILITY, 0.6
    monkeypatch.setenv("PAMIR_XMP_PROBABILITY", "0.5")
    assert confident_words(records) == ["tiger", "grass"]
    monkeypatch.setenv("PAMIR_XMP_PROBABILITY", "high")
    with pytest.raises(ValueError, match="from 0 to 1"):
        confident_words(records)


def test_with_no_model_each_source_has_its_own_bar(monkeypatch):
    """ImageNet's words at the bar Corel's validation chose, the folder's at its own (none
    where no bar was right half the time; the bar before, 0.6, for words learnt before bars
    were chosen); $PAMIR_XMP_PROBABILITY sets them all."""
    from types import SimpleNamespace

    records = [{"word": "tiger", "score": 2.0, "probability": 0.35, "source": "folder"},
               {"word": "cat", "probability": 0.45, "source": "imagenet"},
               {"word": "tabby", "probability": 0.35, "source": "imagenet"}]
    chose = SimpleNamespace(held_out={"write": {"bar": 0.3, "precision": 0.55}})
    bars = write_bars(zero_caption=True, folder=chose)
    assert bars == {"imagenet": 0.4, "folder": 0.3}
    assert confident_words(records, bars=bars) == ["tiger", "cat"]
    none = write_bars(zero_caption=True, folder=SimpleNamespace(held_out={"write": {"bar": None}}))
    assert confident_words(records, bars=none) == ["cat"]
    older = write_bars(zero_caption=True, folder=SimpleNamespace(held_out={}))
    assert older["folder"] == WORD_PROBABILITY
    monkeypatch.setenv("PAMIR_XMP_PROBABILITY", "0.3")
    assert confident_words(records, bars=write_bars(zero_caption=True, folder=chose)) == \
        ["tiger", "cat", "tabby"]
    assert write_bars() == {None: 0.3}  # a model's words
    monkeypatch.delenv("PAMIR_XMP_PROBABILITY")
    # where the folder's tags judged ImageNet's words: their bar, or none of them
    judged = SimpleNamespace(held_out={"write": {"bar": 0.3, "imagenet": {"bar": 0.5}}})
    assert write_bars(zero_caption=True, folder=judged) == {"imagenet": 0.5, "folder": 0.3}
    judged.held_out["write"]["imagenet"]["bar"] = None
    assert confident_words(records, bars=write_bars(zero_caption=True, folder=judged)) == \
        ["tiger"]


# ------------------------------------------------------------------------- the commands
class Calibrated:
    """Stands in for a calibration: a word's probability rises with its score."""

    T = 5
    thresholds = None

    def word_probabilities(self, Z):
        return 1 / (1 + np.exp(-6 * (np.asarray(Z, np.float64) - 0.5)))


def test_annotate_xmp_writes_the_sidecars(fake, tmp_path):
    from fakes import run

    model, pictures = fake
    import pamir.commands.index as product
    product.load_system(model).calibration = Calibrated()
    red = pictures / "red-0.png"
    r = run("annotate", model, red, "--xmp", "--json", "--index", tmp_path / "none")
    [line] = [json.loads(x) for x in r.output.splitlines() if x.startswith("{")]
    assert line["xmp"] == {str(red) + ".xmp": "written"}
    likely = [w["word"] for w in line["keywords"]
              if w.get("probability", 0) >= WORD_PROBABILITY]
    text = (pictures / "red-0.png.xmp").read_text(encoding="utf-8")
    assert likely and all(f"<rdf:li>pamir|{w}</rdf:li>" in text for w in likely)
    assert read_metadata(red).caption is None
    r = run("annotate", model, red, "--xmp", "--xmp-name", "IMG.xmp", ok=False)
    assert r.exit_code != 0 and "NAME.EXT.xmp" in r.output


def test_index_write_xmp(fake, tmp_path, monkeypatch):
    from fakes import run

    import pamir.index.reading
    model, pictures = fake
    monkeypatch.setattr(pamir.index.reading, "load_calibration", lambda d: Calibrated())
    index = tmp_path / "index"
    if shutil.which("exiftool"):  # a picture taken in Kyoto: its place is written too
        exiftool(picture(pictures / "kyoto.jpg", colour=(20, 20, 200)),
                 *gps_tags(35.0116, 135.7681))
    r = run("index", model, pictures, "--index", index, "--no-text", "--no-faces",
            "--write-xmp", "--json")
    report = json.loads(r.output.strip().splitlines()[-1])
    written = sorted(Path(p).name for p in pictures.glob("*.xmp"))
    assert report["xmp"]["written"] == len(written) > 0
    assert "red-0.png.xmp" in written
    assert "pamir|red" in (pictures / "red-0.png.xmp").read_text(encoding="utf-8")
    if shutil.which("exiftool"):
        got = read_back(pictures / "kyoto.jpg.xmp")
        assert (got["XMP-photoshop:City"], got["XMP-photoshop:Country"]) == ("Kyoto", "Japan")
    # again: the sidecars are read again (changed), nothing learned, nothing rewritten
    r = run("index", model, pictures, "--index", index, "--no-text", "--no-faces",
            "--write-xmp", "--json")
    report = json.loads(r.output.strip().splitlines()[-1])
    assert report["xmp"]["written"] == 0 and report["xmp"]["unchanged"] == len(written)
    # a setting that is none of the names fails before any indexing
    monkeypatch.setenv("PAMIR_XMP_SIDECAR", "IMG.xmp")
    r = run("index", model, pictures, "--index", tmp_path / "other", "--write-xmp", ok=False)
    assert r.exit_code != 0 and "NAME.EXT.xmp" in r.output
    assert not (tmp_path / "other").exists()


def test_the_names_written_are_confirmed_or_carried_with_confidence():
    from pamir.index.people import FaceRow
    from pamir.jobs.sidecars import index_faces

    box = (0.1, 0.1, 0.3, 0.3)

    class Faces:  # an index's faces and people (pamir.index.people)
        def faces(self, picture):
            return [FaceRow(1, picture, box, 0.9, 40, None, "", 1, "editor", 1.0),
                    FaceRow(2, picture, box, 0.9, 40, "Carol", "region (MWG)", 4, "region", 1.0),
                    FaceRow(3, picture, box, 0.9, 40, None, "", 3, "carried", 0.95),
                    FaceRow(4, picture, box, 0.9, 40, None, "", 1, "carried", 0.8),
                    FaceRow(5, picture, box, 0.9, 40, None, "", 5, "group", 1.0)]

        def all_people(self):  # Robert (3) was merged into Bob (2); 5 has no name
            return {1: ("alice", "Alice", None), 2: ("bob", "Bob", None),
                    3: ("robert", "Robert", 2), 4: ("carol", "Carol", None), 5: (None, None, None)}

    assert index_faces(Faces(), 7) == [Face("Alice", box, True, 1.0), Face("Carol", box, True, 1.0),
                                      Face("Bob", box, False, 0.95)]
