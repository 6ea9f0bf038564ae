"""The city rule's second grid (pamir.facts.places.CityRule: named_region, own_unfiled,
outer_own, nearer; benchmarks/bench_cities.py), each on real GeoNames positions of known
sights: the city of its own beside a large one is named, and the large city's own districts
beside it are not lost."""

from __future__ import annotations

import dataclasses

import pytest

from pamir.facts.places import CityRule, city_of, gazetteer, nearest_place, place_of


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


def city_under(lat: float, lon: float, **switches) -> str:
    rule = dataclasses.replace(CityRule(), **switches)
    return gazetteer().name[city_of(lat, lon, nearest_place(lat, lon)[0], rule)]


def test_a_province_only_named_like_a_city_does_not_widen_its_reach():
    # Tigre (31,106 people) is in the province "Buenos Aires", not the city's "Buenos Aires
    # F.D.": 3.1 of the city's reaches off, past the outer reach unless it is doubled
    puerto_de_frutos = (-34.4210, -58.5790)
    assert place_of(*puerto_de_frutos).city == "Tigre"
    assert city_under(*puerto_de_frutos, named_region="any") == "Buenos Aires"
    # Breña, filed in "Lima region" while Lima is in "Lima Province", is still Lima's: its
    # second-level area is "Lima"
    assert place_of(-12.0595, -77.0520).city == "Lima"


def test_a_city_filed_apart_from_a_citys_own_area_is_not_its_district():
    # Niterói (456,456 people, no second-level area in the package) across the bay from
    # Rio de Janeiro, whose own districts are filed in "Rio de Janeiro"
    museum = (-22.9079, -43.1260)
    assert place_of(*museum).city == "Niterói"
    assert city_under(*museum, own_unfiled=False) == "Rio de Janeiro"
    assert place_of(-22.9711, -43.1822).city == "Rio de Janeiro"  # Copacabana
    # Berlin files its districts in no second-level area: Mitte and Friedrichshain, cities
    # by their size, stay districts of it
    for position in ((52.5163, 13.3777), (52.5050, 13.4397)):
        assert place_of(*position).city == "Berlin"


def test_a_nearer_city_of_its_own_names_a_position_nearest_a_district():
    # Guarulhos' airport: nearest Ermelino Matarazzo, a district of São Paulo; Guarulhos'
    # point is 6.8 km off (1.07 of its reach), São Paulo's 20 km
    airport = (-23.4356, -46.4731)
    assert place_of(*airport).city == "Guarulhos"
    assert city_under(*airport, nearer=0.0) == "São Paulo"
    # Fenway Park is Boston's: Cambridge's point is nearer (3.2 km, 1.3 of its reach) than
    # Boston's (3.3 km), but Fenway is within Boston's plain reach (0.66)
    fenway = (42.3467, -71.0972)
    assert place_of(*fenway).city == "Boston"
    assert city_under(*fenway, nearer=2.0) == "Boston"


def test_the_outer_reach_leaves_a_town_seat_of_its_own_area_alone():
    # Fremantle (8,616 people; its neighbours are filed in "Fremantle"), 1.95 of Perth's
    # reaches from Perth's point
    round_house = (-32.0560, 115.7440)
    assert place_of(*round_house).city == "Fremantle"
    assert city_under(*round_house, outer_own=False) == "Perth"
    # Seltjarnarnes' neighbours are not filed in an area named after it: Reykjavík's
    assert place_of(64.1517, -21.9953).city == "Reykjavík"
