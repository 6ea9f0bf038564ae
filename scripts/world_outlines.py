"""Natural Earth's country outlines for the page's offline map: npm's world-atlas TopoJSON,
converted once into SVG paths (pamir/server/static/world.json). Run again only to change the
scale or the precision:

    npm pack world-atlas@2.0.2 && tar xzf world-atlas-2.0.2.tgz
    python scripts/world_outlines.py package/countries-110m.json pamir/server/static/world.json

The projection is equirectangular, x = longitude + 180 and y = 90 - latitude (degrees), so
that the page places a picture at (lon + 180, 90 - lat) with no projection code. Points are
rounded to PRECISION degrees and a point equal to the one before is dropped.

Data: Natural Earth (public domain, naturalearthdata.com), version 4.1.0, as redistributed
by world-atlas (ISC licence, Copyright 2013-2019 Michael Bostock).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

#: Degrees a point is rounded to: 0.05 is about 5 km, finer than the 1:110m outlines.
PRECISION = 0.05


def arcs_of(topology: dict) -> list[list[tuple[float, float]]]:
    """The topology's arcs in degrees (delta-decoded, then untransformed)."""
    (sx, sy), (tx, ty) = topology["transform"]["scale"], topology["transform"]["translate"]
    out = []
    for arc in topology["arcs"]:
        x = y = 0
        points = []
        for dx, dy in arc:
            x, y = x + dx, y + dy
            points.append((x * sx + tx, y * sy + ty))
        out.append(points)
    return out


def ring(arcs, indices) -> list[tuple[float, float]]:
    """A ring's points from its arc indices (~i: arc i reversed), shared ends once."""
    points: list[tuple[float, float]] = []
    for i in indices:
        arc = arcs[i] if i >= 0 else arcs[~i][::-1]
        points += arc[1:] if points else arc
    return points


def path_d(polygons, arcs) -> str:
    """An SVG path of polygons (lists of rings of arc indices), equirectangular."""
    parts = []
    for polygon in polygons:
        for indices in polygon:
            seen, cmds, shift, before = None, [], 0.0, None
            for lon, lat in ring(arcs, indices):
                # a ring across the antimeridian (Chukotka, Fiji) goes on past 360 rather
                # than back across the whole map
                if before is not None and abs(lon + shift - before) > 180:
                    shift -= 360 * round((lon + shift - before) / 360)
                lon, before = lon + shift, lon + shift
                p = (round((lon + 180) / PRECISION) * PRECISION,
                     round((90 - lat) / PRECISION) * PRECISION)
                if p != seen:
                    cmds.append(f"{p[0]:.2f} {p[1]:.2f}".replace(".00", ""))
                    seen = p
            if len(cmds) >= 3:
                parts.append("M" + "L".join(cmds) + "Z")
    return "".join(parts)


def convert(topology: dict) -> dict:
    arcs = arcs_of(topology)
    countries = []
    for g in topology["objects"]["countries"]["geometries"]:
        if g.get("type") == "Polygon":
            polygons = [g["arcs"]]
        elif g.get("type") == "MultiPolygon":
            polygons = g["arcs"]
        else:
            continue
        d = path_d(polygons, arcs)
        if d:
            countries.append({"name": g.get("properties", {}).get("name", ""), "d": d})
    return {"source": "Natural Earth 1:110m admin 0 countries, version 4.1.0, via npm "
                      "world-atlas 2.0.2 (scripts/world_outlines.py)",
            "license": "Natural Earth: public domain; world-atlas: ISC",
            "projection": "equirectangular: x = longitude + 180, y = 90 - latitude",
            "viewBox": [0, 0, 360, 180], "countries": countries}


def main(argv=None):
    src, dest = (argv or sys.argv[1:])[:2]
    world = convert(json.loads(Path(src).read_text()))
    Path(dest).write_text(json.dumps(world, separators=(",", ":"), ensure_ascii=False))
    print(f"{dest}: {len(world['countries'])} countries, {Path(dest).stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
