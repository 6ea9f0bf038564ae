"""`near:`: pictures by their distance from a place or a position, from their GPS.

    near:kyoto                  within twice the city's reach (pamir.facts.places.CityRule) of its point
    near:"35.01,135.77" 5km     within 5 km of a position (lat,lon in degrees); 500m, 2.5km
    near:reykjavik 10km         a place with a radius of its own

A place is the most populous GeoNames place of that name (folded, pamir.facts.fact.fold; its
generic parts may be left off: "nara" finds Nara-shi). Distances are great-circle
(pamir.facts.places.EARTH_KM). The index keeps each picture's position (its catalogue's
`position`); pamir.index.fact_reading turns the filter into the pictures within, the nearest
first.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ..text.query import radius_km

#: The radius of `near:` a position with no radius given: a walk around where it was taken.
POSITION_KM = 2.0
_POSITION = re.compile(r"^\s*([-+]?\d+(?:\.\d*)?)\s*,\s*([-+]?\d+(?:\.\d*)?)\s*$")


def near_area(value: str) -> tuple[float, float, float, str]:
    """(lat, lon, radius km, what it is) of a `near:` value: "kyoto", "35.01,135.77", either
    followed by a radius ("5km"). ValueError naming the value and what to write where it is
    neither a position nor a place GeoNames knows."""
    # start-up: GeoNames and scipy.spatial (0.4 s), on first use
    from .places import CityRule, bare_name, gazetteer, valid_position  # noqa: PLC0415

    text, km = value.strip(), None
    head, _, tail = text.rpartition(" ")
    if head and radius_km(tail) is not None:
        text, km = head.strip(), radius_km(tail)
    m = _POSITION.match(text)
    if m:
        lat, lon = float(m.group(1)), float(m.group(2))
        if not valid_position(lat, lon):
            raise ValueError(f"near:{value}: {text} is not a position: write latitude, "
                             "longitude in degrees (near:\"35.01,135.77\" 5km)")
        return lat, lon, km or POSITION_KM, f"{lat:.4f},{lon:.4f}"
    g = gazetteer()
    row = g.by_name(text)
    if row is None:
        raise ValueError(f"near:{value}: no place of that name in GeoNames' cities of 1,000 "
                         "people; give a position and a radius: near:\"35.01,135.77\" 5km")
    lat, lon = g.position(row)
    # The reach the city rule gives an area named after the city (CityRule.named): a place's
    # one point is its centre, and with its bare reach a picture the rule puts in Reykjavík,
    # 2.6 km from its point, was not near:reykjavik (its reach is 2.56 km).
    rule = CityRule()
    reach = rule.named * rule.reach(g.population[row])
    return lat, lon, km or max(POSITION_KM, reach), g.name[row] or bare_name(g.name[row])


def distances_km(positions: np.ndarray, lat: float, lon: float) -> np.ndarray:
    """Great-circle km from (lat, lon) to each row of an (n, 2) array of degrees."""
    # start-up: GeoNames and scipy.spatial (0.4 s), on first use
    from .places import EARTH_KM  # noqa: PLC0415

    p = np.radians(np.asarray(positions, np.float64).reshape(-1, 2))
    la, lo = math.radians(lat), math.radians(lon)
    h = (np.sin((p[:, 0] - la) / 2) ** 2
         + np.cos(la) * np.cos(p[:, 0]) * np.sin((p[:, 1] - lo) / 2) ** 2)
    return 2 * EARTH_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def closeness(km: np.ndarray, radius: float) -> np.ndarray:
    """A picture's weight as `near:` ranks and filters: 1 at the point, falling to 0.5 at
    the radius (a picture at the edge is less surely "near" the place), 0 beyond."""
    return np.where(km <= radius, 1.0 - 0.5 * km / radius, 0.0)


def parse_position(text: str | None) -> tuple[float, float] | None:
    """The catalogue's "lat,lon" as floats (None where it is none)."""
    m = _POSITION.match(text or "")
    return (float(m.group(1)), float(m.group(2))) if m else None


__all__ = ["POSITION_KM", "closeness", "distances_km", "near_area", "parse_position"]
