"""Cities as people name them, `near:` and the places tree (issue 45): the city rule on real
GeoNames positions, the grammar, and an index of pictures with GPS through the library and
the API."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from pamir.facts.nearby import near_area
from pamir.facts.place_tree import places_tree
from pamir.facts.places import place_facts, place_of
from pamir.text.query import parse, radius_km


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def words(position) -> set[str]:
    return {f.word for f in place_facts(position)}


# ------------------------------------------------------------------------------ cities

def test_a_district_filed_in_another_first_level_area_is_found_by_its_city():
    # GeoNames: Breña in "Lima region", Lima itself in "Lima Province"
    place = place_of(-12.0595, -77.0520)
    assert place.name == "Breña" and place.region == "Lima region"
    assert place.city == "Lima" and {"lima", "brena", "peru"} <= words((-12.0595, -77.0520))


def test_a_town_beside_a_city_of_200000_is_found_by_it_and_a_separate_city_is_not():
    # Bellerive (Clarence) across the Derwent from Hobart (247,000 people in GeoNames)
    assert place_of(-42.8740, 147.3700).city == "Hobart"
    assert "hobart" in words((-42.8740, 147.3700))
    # Oakland (its own county) is not San Francisco, Kawasaki (Kawasaki-shi) not Yokohama
    assert "san francisco" not in words((37.8020, -122.2590))
    assert place_of(37.8020, -122.2590).city == "Oakland"
    assert place_of(35.5346, 139.7296).city == "Kawasaki"
    # a district that is a city by its size belongs to the city around it
    assert place_of(52.4986, 13.4030).city == "Berlin"          # Kreuzberg
    assert place_of(40.6710, -73.9814).city == "New York City"  # Park Slope, Brooklyn


def test_a_japanese_city_is_found_without_its_generic_part():
    assert "nara" in words((34.6890, 135.8398))  # GeoNames: Nara-shi


# ------------------------------------------------------------------------------ near:

def test_near_reads_a_place_or_a_position_with_a_radius():
    assert parse("near:kyoto temple").facts == [("near", "kyoto")]
    assert [t.text for t in parse("near:kyoto temple").terms] == ["temple"]
    assert parse('near:"35.01,135.77" 5km').facts == [("near", "35.01,135.77 5km")]
    assert parse("near:kyoto 500m").facts == [("near", "kyoto 500m")]
    assert [t.text for t in parse("beach 5km").terms] == ["beach", "5km"]  # no near: before
    assert radius_km("500m") == 0.5 and radius_km("2.5km") == 2.5 and radius_km("km") is None
    lat, lon, km, _ = near_area("35.01,135.77 5km")
    assert (lat, lon, km) == (35.01, 135.77, 5.0)
    lat, lon, km, name = near_area("kyoto")
    assert name == "Kyoto" and abs(lat - 35.02) < 0.05 and 5 < km < 20
    for bad in ("qwxzplace", "95,10 1km"):
        with pytest.raises(ValueError, match="near:"):
            near_area(bad)


KINKAKUJI, FUSHIMI, LONDON = (35.0394, 135.7292), (34.9671, 135.7727), (51.5081, -0.0759)


@pytest.fixture(scope="module")
def gps_index(tmp_path_factory):
    """An index of four pictures: two in Kyoto, one in London, one with no position."""
    if shutil.which("exiftool") is None:
        pytest.skip("exiftool not installed (.ci/run installs it)")
    from fakes import FakeSystem
    from pictures import exiftool, gps_tags, picture

    from pamir.index import Index

    tmp = tmp_path_factory.mktemp("near")
    pics = tmp / "pics"
    for name, where in (("kinkakuji", KINKAKUJI), ("fushimi", FUSHIMI), ("tower", LONDON)):
        exiftool(picture(pics / f"{name}.jpg"), *gps_tags(*where))
    picture(pics / "nowhere.jpg")
    system = FakeSystem()
    with Index.create(tmp / "ix", system.vocabulary, system.idf) as ix:
        ix.update([pics], system.transform_paths)
    return tmp / "ix", system


def names(ix, query: str) -> list[str]:
    return [Path(h.path).stem for h in ix.search(query, 10)]


def test_near_finds_pictures_by_distance_the_nearest_first(gps_index):
    from pamir.index import Index, QueryError

    with Index.open(gps_index[0]) as ix:
        assert sorted(names(ix, "near:kyoto")) == ["fushimi", "kinkakuji"]
        assert names(ix, 'near:"35.0394,135.7292" 1km') == ["kinkakuji"]
        assert names(ix, 'near:"35.0394,135.7292" 20km') == ["kinkakuji", "fushimi"]
        assert names(ix, 'near:"34.9671,135.7727" 20km') == ["fushimi", "kinkakuji"]
        assert names(ix, "near:london 5km") == ["tower"]
        held = ix.search('near:"35.0394,135.7292" 20km', 10)[1].held
        assert held == [("near", "9.0 km from 35.0394,135.7292", pytest.approx(0.776, abs=0.002))]
        with pytest.raises(QueryError, match="near:qwxzplace"):
            ix.search("near:qwxzplace", 10)


def test_the_places_tree_and_the_map_through_the_api(gps_index):
    from fastapi.testclient import TestClient

    from pamir.server import create_app

    client = TestClient(create_app(gps_index[0], system=gps_index[1], warm_mapping=False))
    tree = client.get("/api/places/tree").json()["places"]
    by_name = {c["name"]: c for c in tree}
    assert by_name["Japan"]["pictures"] == 2 and by_name["United Kingdom"]["pictures"] == 1
    kyoto = [c for c in by_name["Japan"]["children"] if c["name"] == "Kyoto"]
    assert len(kyoto) == 1 and kyoto[0]["pictures"] == 2 and kyoto[0]["level"] == "city"
    assert kyoto[0]["query"] == "place:kyoto"  # the prefecture "Kyoto" is not a level of its own
    # Fushimi Inari's nearest GeoNames place is Kyoto itself: no place under the city
    assert [(c["name"], c["pictures"]) for c in kyoto[0]["children"]] == [("Kamigyō-ku", 1)]
    points = client.get("/api/places/map").json()["points"]
    assert len(points) == 3 and {p["query"] for p in points} == {"place:kyoto", "place:london"}
    assert client.get("/api/search", params={"q": "near:qwxzplace"}).status_code == 400


def test_one_lima_under_peru_whatever_geonames_calls_its_areas():
    rows = []
    for pid, position in enumerate([(-12.0464, -77.0300), (-12.0595, -77.0520),
                                    (-12.1211, -77.0297)]):
        rows += [(pid, f.word, f.detail) for f in place_facts(position)]
    tree = places_tree(rows)
    assert [c["name"] for c in tree] == ["Peru"]
    assert [(c["name"], c["pictures"]) for c in tree[0]["children"]] == [("Lima", 3)]
    assert {c["name"] for c in tree[0]["children"][0]["children"]} == {
        "Breña", "Santiago de Surco"}


# ------------------------------------------------------------------------------ the page's facts

def test_a_fact_hit_says_what_it_holds_and_a_model_takes_feedback(gps_index):
    from fastapi.testclient import TestClient

    from pamir.server import create_app

    client = TestClient(create_app(gps_index[0], system=gps_index[1], warm_mapping=False))
    for q in ("kyoto", "place:kyoto"):
        hits = client.get("/api/search", params={"q": q}).json()["hits"]
        assert len(hits) == 2
        assert all({"kind": "place", "shown": "Kyoto", "confidence": 1.0} in h["held"]
                   for h in hits)
    hits = client.get("/api/search", params={"q": "red"}).json()["hits"]
    assert hits and all(h["held"] == [] for h in hits)  # a look: its score, not a fact
    assert client.get("/api/status").json()["feedback"] is True  # a fitted (fake) model


class _Classes:
    """ImageNet's classes as pamir.zeroshot.classes.ClassWords answers them: "buffalo" is a word of
    its table, any other word an echidna by the embedding's guess."""

    use_model = False

    def match(self, text, words=None):
        import numpy as np

        from pamir.zeroshot.classes import ClassMatch

        if text == "buffalo":
            return ClassMatch("table", [("buffalo", 1.0)], np.ones(3, np.float32))
        return ClassMatch("embedding", [("echidna", 0.36)], np.ones(3, np.float32))

    def lookup(self, words):
        return None


def test_a_name_is_not_also_a_look_but_a_keyword_is():
    import numpy as np

    from pamir.text.query import resolve

    def resolved(word, names):
        return resolve(parse(word), [], np.zeros(0), classes=_Classes(),
                       facts=lambda w: 7, names=lambda w: names)

    isolde = resolved("isolde", True)  # a person's name: her pictures, no echidnas
    assert isolde.fact_terms == [(1.0, "isolde")] and not isolde.class_terms
    assert isolde.matches[0].how == "fact" and isolde.matches[0].describe() == (
        "isolde (7 pictures say so)")
    tiger = resolved("tiger", False)  # a keyword (or text read): also its look
    assert tiger.fact_terms and tiger.class_terms
    buffalo = resolved("buffalo", True)  # a place, and a word of ImageNet's table: both
    assert buffalo.fact_terms and buffalo.class_terms


def test_a_new_rule_names_an_index_places_again_from_their_positions(tmp_path, monkeypatch):
    if shutil.which("exiftool") is None:
        pytest.skip("exiftool not installed (.ci/run installs it)")
    from fakes import FakeSystem
    from pictures import exiftool, gps_tags, picture

    from pamir.facts import places
    from pamir.facts.fact import Fact
    from pamir.index import Index
    from pamir.jobs.opening import update_index

    pics = tmp_path / "pics"
    exiftool(picture(pics / "kinkakuji.jpg"), *gps_tags(*KINKAKUJI))
    picture(pics / "nowhere.jpg")
    system = FakeSystem()
    with Index.create(tmp_path / "ix", system.vocabulary, system.idf) as ix:
        update_index(ix, system, [pics], system.transform_paths)
        assert names(ix, "kyoto") == ["kinkakuji"]
        assert ix.pass_todo(f"places {places.fingerprint()}") == []  # named once
        # another rule: the same positions, other words, and no file read again
        monkeypatch.setattr(places, "fingerprint", lambda: "another rule")
        monkeypatch.setattr(places, "place_facts",
                            lambda position: [Fact("place", "elsewhere")] if position else [])
        report = update_index(ix, system, [pics], system.transform_paths)
        assert report.added == report.changed == 0
        assert names(ix, "place:elsewhere") == ["kinkakuji"] and names(ix, "place:kyoto") == []


def test_an_index_with_no_fitted_model_takes_no_feedback(tmp_path):
    import numpy as np
    from fakes import FakeSystem
    from fastapi.testclient import TestClient

    from pamir.zeroshot.imagenet import imagenet_class_names
    from pamir.index import Index
    from pamir.server import create_app

    with Index.create(tmp_path / "ix", [], np.zeros(0), fingerprint="zero-caption/test",
                      classes=imagenet_class_names()):
        pass
    for system in (None, FakeSystem()):  # a bare folder's index, whatever system serves it
        client = TestClient(create_app(tmp_path / "ix", system=system, warm_mapping=False))
        assert client.get("/api/status").json()["feedback"] is False


def test_near_a_city_covers_what_the_city_rule_calls_the_city():
    # central Reykjavík, 2.6 km from GeoNames' point for it: beyond its bare reach (2.56 km)
    from pamir.facts.nearby import distances_km
    from pamir.facts.places import place_of

    lat, lon = 64.1466, -21.9426
    assert place_of(lat, lon).city == "Reykjavík"
    c_lat, c_lon, km, _ = near_area("reykjavik")
    assert distances_km(np.array([[lat, lon]]), c_lat, c_lon)[0] < km


@pytest.mark.parametrize("kinds, name", [
    ({"person"}, True), ({"person", "keyword"}, True), ({"place", "keyword"}, True),
    ({"keyword"}, False), ({"person", "text"}, False), (set(), False)])
def test_a_name_written_also_as_a_keyword_is_still_a_name(kinds, name):
    # Lightroom writes "People|Isolde" and "Isolde": her name is no look (no echidnas)
    import threading
    from types import SimpleNamespace

    from pamir.index.fact_reading import FactReader

    facts = SimpleNamespace(kinds=lambda word: set(kinds))
    folder = SimpleNamespace(_lock=threading.Lock(), _catalog=SimpleNamespace(facts=facts))
    assert FactReader(folder).name_only("isolde") is name
