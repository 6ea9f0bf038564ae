"""The city rule's classes of cases (pamir.facts.places.CityRule, benchmarks/bench_cities.py), each on
real GeoNames positions of known sights: an enclave country inside a city, a city whose own
area is a city named after it, twin cities, and the outer reach of a city over the towns
around it (and not over the towns of 50,000 people or more beside it)."""

from __future__ import annotations

import dataclasses

import pytest

from pamir.facts.places import (
    CityRule,
    city_of,
    gazetteer,
    nearest_place,
    place_facts,
    place_of,
)


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def words(position) -> set[str]:
    return {f.word for f in place_facts(position)}


def city_under(rule: CityRule, lat: float, lon: float) -> str:
    g = gazetteer()
    return g.name[city_of(lat, lon, nearest_place(lat, lon)[0], rule)]


def test_an_enclave_country_names_only_the_positions_deep_in_it():
    # the Trevi Fountain: 2.4 km from Vatican City's one point, 2.5 km from Rome's
    trevi = place_of(41.9009, 12.4833)
    assert (trevi.city, trevi.country) == ("Rome", "Italy")
    assert {"rome", "italy"} <= words((41.9009, 12.4833)) and "vatican" not in words(
        (41.9009, 12.4833))
    # St Peter's Basilica and the Vatican Museums are in Vatican City
    for position in ((41.9022, 12.4539), (41.9065, 12.4536)):
        assert place_of(*position).country == "Vatican City"


def test_a_city_whose_own_area_is_a_city_named_after_it_is_not_swallowed():
    # Salford ("City and Borough of Salford", 129,794 people) beside Manchester
    media_city = (53.4720, -2.2980)
    assert place_of(*media_city).city == "Salford"
    assert city_under(dataclasses.replace(CityRule(), own_area=False), *media_city) == (
        "Manchester")


def test_a_twin_city_is_not_a_district_of_its_larger_twin():
    # Ramat Gan (170,822 people) is 39 % of Tel Aviv (432,892): a city of its own
    diamond_exchange = (32.0835, 34.8020)
    assert place_of(*diamond_exchange).city == "Ramat Gan"
    assert "ramat gan" in words(diamond_exchange)  # ("tel aviv" too: its region's name)
    assert city_under(dataclasses.replace(CityRule(), twin=1.0), *diamond_exchange) == (
        "Tel Aviv")
    # Brooklyn (31 % of New York City) stays a district of it
    assert place_of(40.6710, -73.9814).city == "New York City"


@pytest.mark.parametrize("position, town, city", [
    ((64.1517, -21.9953), "Seltjarnarnes", "Reykjavík"),   # 5 km from Reykjavík's point
    ((53.2940, -6.1340), "Dún Laoghaire", "Dublin"),        # 1.45 of Dublin's reach
    ((48.2188, 11.6247), "Unterföhring", "Munich"),          # the Allianz Arena
])
def test_a_town_beyond_a_citys_reach_takes_the_city_it_is_deepest_in(position, town, city):
    place = place_of(*position)
    assert (place.name, place.city) == (town, city)
    assert city_under(dataclasses.replace(CityRule(), outer=0.0), *position) == town


@pytest.mark.parametrize("position, town", [
    ((34.0092, -118.4976), "Santa Monica"),  # 93,220 people, beside Los Angeles
    ((42.0565, -87.6753), "Evanston"),       # 75,527, beside Chicago
    ((48.8049, 2.1204), "Versailles"),       # 85,416, beside Paris
    ((40.7440, -74.0324), "Hoboken"),        # deepest in New York City, across a state line
])
def test_the_outer_reach_leaves_towns_of_their_own_alone(position, town):
    assert place_of(*position).city == town
