"""The places routes of the API: the collection's places as a tree (country →
region → city → place, with counts, pamir.facts.place_tree) and where the pictures were taken,
for the page's offline map (static/places-map.js over static/world.json, Natural Earth's
outlines). The flat list of places is app.py's GET /api/places.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request

router = APIRouter()

#: The most positions one map request returns (the page clusters them).
MAX_POINTS = 20_000


@router.get("/api/places/tree", summary="The places as a tree: country, region, city, place")
def places_tree(request: Request):
    """Each node: its name, level (country, region, city or place), pictures and the
    `query` that finds them (`place:kyoto`); its children, the most pictures first. A
    region named like its city (GeoNames' "Lima Province", "Lima region") is one node with
    it."""
    return {"places": request.app.state.pamir.index.places_tree()}


@router.get("/api/places/map", summary="Where the pictures were taken")
def places_map(request: Request,
               limit: int = Query(5000, ge=1, le=MAX_POINTS, description="most positions")):
    """{"points": [{"id", "lat", "lon", "name", "query"}]}: each picture with a GPS position,
    with its city's name and the query that finds the pictures taken there."""
    return {"points": request.app.state.pamir.index.place_points(limit)}
