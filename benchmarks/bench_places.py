"""Places from GPS (issue 33): which rule finds a district's pictures by its city's name, and
P@k of city and country words through a real `pamir index` of Corel copies with GPS.

    python benchmarks/bench_places.py --districts            # seconds: no index
    flock /tmp/pamir-heavy.lock python benchmarks/bench_places.py   # both parts

1. Districts. The nearest GeoNames cities1000 place to a picture taken in a city is often
   a district or a suburb (Kamigyō-ku, Fitzroy, Kabukichō, Park Slope). On DISTRICTS, real
   positions of well-known sights with the city people would type, and NEAR_NOT, towns beside
   a large city that are not it (Jersey City is not New York City, Kawasaki is not Tokyo,
   Versailles is not Paris), each rule's words are checked: the share of DISTRICTS found by
   their city's word, and the share of NEAR_NOT given the large city's word. Every rule keeps
   the nearest place, its region and its country; the rules add:
   - "nearest place only": nothing (what the region alone gives: Tokyo's wards are in the
     region Tokyo, Brooklyn in the state New York);
   - (a) "admin area": the nearest place's second-level area (GeoNames admin2), its generic
     part taken off ("Kyōto Shi" -> "kyoto", "Greater London" -> "london", "Gemeente
     Amsterdam" -> "amsterdam");
   - (b) "large city P within D": the nearest place of P people or more within D km in the
     same country and region, for P and D on a grid;
   - (b') "large city P, radius c·sqrt(pop)": among the places of P people or more in the
     same country and region whose radius c·sqrt(population / 1e6) km reaches the picture,
     the one it is deepest in (smallest distance / radius): what pamir.facts.places.city_of does
     with its constants, for c on a grid.
2. P@k. A folder of Corel 5k copies (PICTURES_PER_CITY per city of CITIES, at positions
   jittered up to JITTER_KM around the city's sights, districts included, plus NO_GPS pictures
   without GPS and a few with hostile positions), GPS written by exiftool (EXIF, embedded
   XMP, an XMP sidecar and a Google Takeout JSON, in turn); `pamir index FOLDER` (no model),
   then `pamir search WORD -k K --json` for each city word and each country word, K the
   number of pictures taken there; P@K = the share of the K results taken there.

Writes benchmarks/results/places.json and places.md.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from common.harness import RESULTS, Run, parser, report_head, rerender, save_report

from pamir.facts import places
from pamir.facts.fact import fold

REPO = Path(__file__).resolve().parents[1]
STEM = "places"

# ------------------------------------------------------------------------------ part 1
#: (sight, latitude, longitude, the city word people would type). Positions of the sights,
#: from their Wikipedia articles (to about 100 m).
DISTRICTS = [
    ("Kyoto, Kiyomizu-dera", 34.9949, 135.7850, "kyoto"),
    ("Kyoto, Ginkaku-ji", 35.0270, 135.7982, "kyoto"),
    ("Kyoto, Kinkaku-ji", 35.0394, 135.7292, "kyoto"),
    ("Kyoto, Fushimi Inari", 34.9671, 135.7727, "kyoto"),
    ("Kyoto, Arashiyama", 35.0094, 135.6668, "kyoto"),
    ("Kyoto, station", 34.9858, 135.7588, "kyoto"),
    ("Melbourne, Fitzroy", -37.7984, 144.9783, "melbourne"),
    ("Melbourne, South Yarra", -37.8383, 144.9925, "melbourne"),
    ("Melbourne, St Kilda", -37.8676, 144.9809, "melbourne"),
    ("Melbourne, Carlton", -37.8000, 144.9670, "melbourne"),
    ("Melbourne, Richmond", -37.8230, 144.9980, "melbourne"),
    ("Melbourne, Southbank", -37.8230, 144.9640, "melbourne"),
    ("Melbourne, Brunswick", -37.7670, 144.9620, "melbourne"),
    ("Melbourne, Docklands", -37.8145, 144.9460, "melbourne"),
    ("Tokyo, Shinjuku", 35.6938, 139.7034, "tokyo"),
    ("Tokyo, Shibuya", 35.6595, 139.7005, "tokyo"),
    ("Tokyo, Asakusa", 35.7148, 139.7967, "tokyo"),
    ("Tokyo, Ginza", 35.6717, 139.7650, "tokyo"),
    ("Tokyo, Ueno", 35.7138, 139.7773, "tokyo"),
    ("Tokyo, Odaiba", 35.6267, 139.7760, "tokyo"),
    ("Tokyo, Kichijoji", 35.7033, 139.5797, "tokyo"),
    ("London, Camden Town", 51.5390, -0.1426, "london"),
    ("London, Greenwich", 51.4826, 0.0077, "london"),
    ("London, Shoreditch", 51.5265, -0.0780, "london"),
    ("London, Notting Hill", 51.5090, -0.1960, "london"),
    ("London, Brixton", 51.4613, -0.1156, "london"),
    ("London, Canary Wharf", 51.5054, -0.0235, "london"),
    ("London, Hampstead", 51.5560, -0.1780, "london"),
    ("London, Wimbledon", 51.4214, -0.2064, "london"),
    ("London, Croydon", 51.3762, -0.0982, "london"),
    ("Paris, Montmartre", 48.8867, 2.3431, "paris"),
    ("Paris, Le Marais", 48.8590, 2.3620, "paris"),
    ("Paris, Eiffel Tower", 48.8584, 2.2945, "paris"),
    ("Paris, Belleville", 48.8720, 2.3770, "paris"),
    ("Paris, Latin Quarter", 48.8493, 2.3470, "paris"),
    ("New York, Williamsburg", 40.7081, -73.9571, "new york"),
    ("New York, Park Slope", 40.6710, -73.9814, "new york"),
    ("New York, Astoria", 40.7644, -73.9235, "new york"),
    ("New York, Flushing", 40.7675, -73.8331, "new york"),
    ("New York, Yankee Stadium", 40.8296, -73.9262, "new york"),
    ("New York, St. George", 40.6437, -74.0736, "new york"),
    ("New York, Harlem", 40.8116, -73.9465, "new york"),
    ("New York, Times Square", 40.7580, -73.9855, "new york"),
    ("New York, Coney Island", 40.5755, -73.9707, "new york"),
    ("Berlin, Kreuzberg", 52.4986, 13.4030, "berlin"),
    ("Berlin, Prenzlauer Berg", 52.5388, 13.4244, "berlin"),
    ("Berlin, Charlottenburg", 52.5163, 13.3041, "berlin"),
    ("Sydney, Bondi Beach", -33.8915, 151.2767, "sydney"),
    ("Sydney, Manly", -33.7969, 151.2860, "sydney"),
    ("Sydney, Newtown", -33.8976, 151.1795, "sydney"),
    ("Los Angeles, Hollywood", 34.0928, -118.3287, "los angeles"),
    ("Los Angeles, Venice", 33.9850, -118.4695, "los angeles"),
    ("San Francisco, Mission", 37.7599, -122.4148, "san francisco"),
    ("San Francisco, Ferry Building", 37.7955, -122.3937, "san francisco"),
    ("Chicago, Wicker Park", 41.9088, -87.6796, "chicago"),
    ("Toronto, Kensington Market", 43.6547, -79.4005, "toronto"),
    ("Barcelona, Gràcia", 41.4036, 2.1570, "barcelona"),
    ("Rome, Trastevere", 41.8897, 12.4700, "rome"),
    ("Rome, Colosseum", 41.8902, 12.4922, "rome"),
    ("Osaka, Namba", 34.6659, 135.5013, "osaka"),
    ("Mumbai, Bandra", 19.0596, 72.8295, "mumbai"),
    ("Amsterdam, Jordaan", 52.3746, 4.8800, "amsterdam"),
    ("Cape Town, Sea Point", -33.9150, 18.3880, "cape town"),
    ("Buenos Aires, Palermo", -34.5880, -58.4300, "buenos aires"),
    ("Edinburgh, Leith", 55.9755, -3.1720, "edinburgh"),
    ("Reykjavik, Hallgrímskirkja", 64.1417, -21.9266, "reykjavik"),
    ("Reykjavik, Harpa", 64.1505, -21.9326, "reykjavik"),
    ("Reykjavik, Perlan", 64.1290, -21.9190, "reykjavik"),
    ("Reykjavik, Laugardalur", 64.1467, -21.8770, "reykjavik"),
]
#: (town, latitude, longitude, the large city's word it must not get): towns of their own
#: beside a large city (their town halls' positions).
NEAR_NOT = [
    ("Jersey City", 40.7282, -74.0776, "new york city"),
    ("Newark", 40.7357, -74.1724, "new york city"),
    ("Kawasaki, Kawasaki Daishi", 35.5346, 139.7296, "yokohama"),
    ("Kawasaki, Kawasaki Daishi", 35.5346, 139.7296, "tokyo"),
    ("Yokohama", 35.4437, 139.6380, "tokyo"),
    ("Kawaguchi", 35.8077, 139.7241, "tokyo"),
    ("Uji", 34.8844, 135.7997, "kyoto"),
    ("Nara", 34.6851, 135.8048, "osaka"),
    ("Sakai", 34.5733, 135.4831, "osaka"),
    ("Versailles", 48.8049, 2.1204, "paris"),
    ("Santa Monica", 34.0195, -118.4912, "los angeles"),
    ("Pasadena", 34.1478, -118.1445, "los angeles"),
    ("Oakland", 37.8044, -122.2712, "san francisco"),
    ("Evanston", 42.0451, -87.6877, "chicago"),
    ("Slough", 51.5105, -0.5950, "london"),
    ("Watford", 51.6565, -0.3903, "london"),
    ("Potsdam", 52.3906, 13.0645, "berlin"),
    ("Geelong", -38.1499, 144.3617, "melbourne"),
    ("Haarlem", 52.3874, 4.6462, "amsterdam"),
    ("Mississauga", 43.5890, -79.6441, "toronto"),
]

#: Generic parts of admin2 names, taken off for rule (a).
_ADMIN_GENERIC = re.compile(
    r"^(greater|city and county of|city of|gemeente|provincia de|província de|"
    r"città metropolitana di|state of)\s+|[\s-](shi|ku|county|municipality|district|"
    r"capitale|f\.d\.)$", re.IGNORECASE)


def admin_word(name: str | None) -> str | None:
    if not name:
        return None
    while (bare := _ADMIN_GENERIC.sub("", name).strip()) != name:
        name = bare
    return fold(name)


def base_words(g, i: int) -> set[str]:
    words = {fold(g.name[i]), *places.country_words(g.country_code[i])}
    if g.region[i]:
        words.add(fold(g.region[i]))
    return words


def rule_words(rule: tuple, lat: float, lon: float) -> set[str]:
    """The words a rule gives a position (part 1's rules, see the module's doc)."""
    g = places.gazetteer()
    got = g.nearest(lat, lon, places.PLACE_KM)
    if not got:
        return set()
    i = got[0][0]
    words = base_words(g, i)
    kind = rule[0]
    if kind == "admin":
        words |= {w for w in (admin_word(g.district[i]), admin_word(g.region[i])) if w}
    elif kind == "nearest large":
        _, population, km = rule
        for j, _ in g.near(lat, lon, km):
            if g.population[j] >= population and _same_area(g, i, j):
                words.add(fold(g.name[j]))
                break
    elif kind == "deepest large":
        _, population, c = rule
        # issue 33's family: the first-level area only, no separate-city guard
        j = places.city_of(lat, lon, i, places.CityRule(population, c, 0.5, 0.0, 10**12))
        words.add(fold(g.name[j]))
    elif kind == "pamir":
        words = {w for w, _, _ in places.place_words(places.place_of(lat, lon))}
    return words


def _same_area(g, i: int, j: int) -> bool:
    return (g.country_code[j], g.region[j]) == (g.country_code[i], g.region[i])


def rules() -> list[tuple]:
    out = [("nearest place only",), ("admin",)]
    out += [("nearest large", p, d) for p in (300_000, 500_000, 1_000_000)
            for d in (10, 15, 20, 25)]
    out += [("deepest large", p, c) for p in (300_000, 500_000, 1_000_000)
            for c in (5, 6, 7, 8, 10)]
    out.append(("pamir",))
    return out


def rule_name(rule: tuple) -> str:
    if rule[0] == "nearest large":
        return f"(b) nearest large city >= {rule[1]:,} within {rule[2]} km"
    if rule[0] == "deepest large":
        return f"(b') large city >= {rule[1]:,}, radius {rule[2]}·sqrt(pop/1e6) km"
    if rule[0] == "admin":
        return "(a) admin areas (admin2, admin1)"
    if rule[0] == "pamir":
        rule = places.CityRule()
        return (f"pamir.facts.places as shipped (>= {rule.population:,}, radius "
                f"{rule.radius_km}·(pop/1e6)^{rule.exponent} km, named areas {rule.named}x)")
    return rule[0]


def measure_districts() -> dict:
    rows = []
    for rule in rules():
        found = [w in rule_words(rule, la, lo) for _, la, lo, w in DISTRICTS]
        wrong = [w in rule_words(rule, la, lo) for _, la, lo, w in NEAR_NOT]
        rows.append({"rule": rule_name(rule), "found": round(float(np.mean(found)), 3),
                     "found_n": int(sum(found)), "wrongly": round(float(np.mean(wrong)), 3),
                     "wrongly_n": int(sum(wrong)),
                     "missed": [d[0] for d, ok in zip(DISTRICTS, found) if not ok],
                     "wrong": [f"{n} -> {w}" for (n, _, _, w), bad in zip(NEAR_NOT, wrong)
                               if bad]})
    return {"districts": len(DISTRICTS), "near_not": len(NEAR_NOT), "rules": rows}


# ------------------------------------------------------------------------------ part 2
#: The cities of the P@k folder: their sights are DISTRICTS' (districts and suburbs
#: included), their countries' words are checked too.
CITIES = ("kyoto", "tokyo", "melbourne", "sydney", "london", "paris", "new york", "berlin",
          "reykjavik", "buenos aires")
COUNTRIES = {"japan": ("kyoto", "tokyo"), "australia": ("melbourne", "sydney"),
             "uk": ("london",), "united kingdom": ("london",), "france": ("paris",),
             "usa": ("new york",), "united states": ("new york",), "germany": ("berlin",),
             "iceland": ("reykjavik",), "argentina": ("buenos aires",)}
PICTURES_PER_CITY = 25
NO_GPS = 40
HOSTILE = 10
#: Positions are drawn uniformly in a disc of this radius around one of the city's sights.
JITTER_KM = 3.0
#: How the position is written, in turn (exiftool arguments, or a Takeout JSON).
WAYS = ("EXIF GPS", "embedded XMP", "sidecar NAME.EXT.xmp", "Google Takeout JSON")
WORK = Path("/tmp/pamir-bench-places")
SEED = 33


def jitter(rng, lat: float, lon: float, km: float) -> tuple[float, float]:
    r, a = km * math.sqrt(rng.random()), 2 * math.pi * rng.random()
    dlat = r * math.cos(a) / 111.2
    dlon = r * math.sin(a) / (111.2 * math.cos(math.radians(lat)))
    return round(lat + dlat, 6), round(lon + dlon, 6)


def build_folder(rng) -> dict[str, str | None]:
    """WORK/pics: Corel copies with GPS; returns {file name: city or None}."""
    from pamir.data import find_corel5k

    shutil.rmtree(WORK, ignore_errors=True)
    pics = WORK / "pics"
    pics.mkdir(parents=True)
    sources = sorted((find_corel5k() / "images").rglob("*.jpeg"))
    n = PICTURES_PER_CITY * len(CITIES) + NO_GPS + HOSTILE
    chosen = [sources[i] for i in rng.choice(len(sources), n, replace=False)]
    truth, args, k = {}, [], 0
    for city in CITIES:
        sights = [(la, lo) for _, la, lo, w in DISTRICTS if w == city]
        for _ in range(PICTURES_PER_CITY):
            lat, lon = jitter(rng, *sights[rng.integers(len(sights))], JITTER_KM)
            name = f"{k:04d}.jpg"
            shutil.copyfile(chosen[k], pics / name)
            args += write_gps(pics / name, lat, lon, WAYS[k % len(WAYS)])
            truth[name] = city
            k += 1
    for i in range(NO_GPS + HOSTILE):
        name = f"{k:04d}.jpg"
        shutil.copyfile(chosen[k], pics / name)
        if i >= NO_GPS:  # positions that are none: 0,0, NaN, out of range
            geo = [{"latitude": 0.0, "longitude": 0.0}, {"latitude": "NaN", "longitude": 1},
                   {"latitude": 95.0, "longitude": 10.0}][i % 3]
            (pics / f"{name}.json").write_text(json.dumps({"geoData": geo}))
        truth[name] = None
        k += 1
    (WORK / "args").write_text("\n".join(args) + "\n")
    subprocess.run(["exiftool", "-q", "-q", "-@", str(WORK / "args")], check=True)
    return truth


def write_gps(path: Path, lat: float, lon: float, way: str) -> list[str]:
    """exiftool arguments (one -execute each) writing the position one way, or [] when the
    way is a Takeout JSON (written here)."""
    ns, ew = ("N" if lat >= 0 else "S"), ("E" if lon >= 0 else "W")
    if way == "Google Takeout JSON":
        Path(f"{path}.json").write_text(json.dumps({"title": path.name, "geoData": {
            "latitude": lat, "longitude": lon, "altitude": 0.0}}))
        return []
    if way == "EXIF GPS":
        tags = [f"-EXIF:GPSLatitude={abs(lat)}", f"-EXIF:GPSLatitudeRef={ns}",
                f"-EXIF:GPSLongitude={abs(lon)}", f"-EXIF:GPSLongitudeRef={ew}"]
    else:
        tags = [f"-XMP-exif:GPSLatitude={abs(lat)} {ns}",
                f"-XMP-exif:GPSLongitude={abs(lon)} {ew}"]
    if way == "sidecar NAME.EXT.xmp":
        return [*tags, "-q", "-q", "-o", f"{path}.xmp", str(path), "-execute"]
    return [*tags, "-q", "-q", "-overwrite_original", str(path), "-execute"]


def pamir_cli(*argv: str) -> subprocess.CompletedProcess:
    """This checkout's `pamir ARGV` (the console script may point at another checkout)."""
    return subprocess.run([sys.executable, "-c", "from pamir.cli import main; main()",
                           *argv], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def facts_p_at_k(truth: dict) -> dict:
    """P@K of each word if a search returned exactly the pictures holding it as a place fact
    (pamir.facts.metadata + pamir.facts.places alone, no index): what the index's search can reach, and
    the pictures each word misses, by the place they were given instead."""
    from pamir.facts.metadata import read_metadata

    held = {n: {f.word for f in places.place_facts(read_metadata(WORK / "pics" / n).position)}
            for n in truth}
    out = {}
    for word, cities in [*((w, (w,)) for w in CITIES), *COUNTRIES.items()]:
        relevant = {n for n, c in truth.items() if c in cities}
        found = {n for n, ws in held.items() if word in ws}
        right = len(found & relevant)
        out[word] = {"k": len(relevant), "held": len(found), "right": right,
                     "p_at_k": round(min(right, len(relevant)) / len(relevant), 3)
                     if len(found) <= len(relevant) else round(right / len(found), 3)}
    return out


def measure_search() -> dict:
    rng = np.random.default_rng(SEED)
    truth = build_folder(rng)
    facts = facts_p_at_k(truth)
    index = WORK / "index"
    t = time.perf_counter()
    done = pamir_cli("index", str(WORK / "pics"), "--index", str(index), "--json")
    if done.returncode:
        raise SystemExit(f"pamir index failed:\n{done.stderr[-3000:]}")
    index_s = time.perf_counter() - t

    def search(query: str, relevant: set[str]) -> dict:
        k = len(relevant)
        done = pamir_cli("search", query, "-k", str(k), "--json", "--index", str(index))
        if done.returncode:
            return {"k": k, "p_at_k": 0.0, "error": done.stderr.strip()[-300:]}
        hits = [Path(h["path"]).name for h in json.loads(done.stdout)["hits"]]
        right = sum(h in relevant for h in hits[:k])
        return {"k": k, "p_at_k": round(right / k, 3), "returned": len(hits)}

    def p_at_k(word: str, relevant: set[str]) -> dict:
        """A name of several words is typed as the grammar's phrase ("new york"); typed bare
        as well, for the record (each word a term of its own)."""
        if " " not in word:
            return {**search(word, relevant), "query": word}
        return {**search(f'"{word}"', relevant), "query": f'"{word}"',
                "bare": search(word, relevant)["p_at_k"]}

    def taken_in(cities) -> set[str]:
        return {n for n, c in truth.items() if c in cities}

    cities = {w: p_at_k(w, taken_in((w,))) for w in CITIES}
    countries = {w: p_at_k(w, taken_in(cs)) for w, cs in COUNTRIES.items()}
    return {"pictures": len(truth), "with_gps": sum(c is not None for c in truth.values()),
            "no_gps": NO_GPS, "hostile": HOSTILE, "jitter_km": JITTER_KM, "ways": WAYS,
            "index_s": round(index_s, 1), "index_report": done.stdout[-2000:],
            "cities": cities, "countries": countries, "facts_only": facts,
            "mean_city": round(float(np.mean([v["p_at_k"] for v in cities.values()])), 3),
            "mean_country": round(float(np.mean([v["p_at_k"] for v in
                                                 countries.values()])), 3)}


# ------------------------------------------------------------------------------ report
def report(r: dict) -> str:
    lines = report_head("Places from GPS (issue 33)", r["run"])
    d = r.get("districts")
    if d:
        lines += ["", "## Districts: which rule finds a district by its city", "",
                  f"{d['districts']} positions of sights in districts and suburbs of "
                  f"{len({x[3] for x in DISTRICTS})} cities (found: the city's word is among "
                  f"the picture's place words), {d['near_not']} towns beside a large city "
                  "(wrongly: given that city's word). Every rule also keeps the nearest "
                  "place, its region and its country: Uji and Sakai, in the prefectures of "
                  "Kyoto and Osaka, get `kyoto` and `osaka` from their region under every "
                  "rule.", "",
                  "| rule | found | wrongly | missed | wrongly given |", "|---|---|---|---|---|"]
        for row in d["rules"]:
            lines.append(f"| {row['rule']} | {row['found_n']}/{d['districts']} "
                         f"({row['found']:.2f}) | {row['wrongly_n']}/{d['near_not']} "
                         f"({row['wrongly']:.2f}) | {', '.join(row['missed'])} | "
                         f"{', '.join(row['wrong'])} |")
    q = r.get("search")
    if q:
        lines += ["", "## P@k through `pamir index` and `pamir search`", "",
                  f"{q['pictures']} Corel 5k copies: {q['with_gps']} with GPS "
                  f"({PICTURES_PER_CITY} around each of {len(CITIES)} cities' sights, jittered "
                  f"up to {q['jitter_km']} km; written in turn as {', '.join(q['ways'])}), "
                  f"{q['no_gps']} without, {q['hostile']} with a position that is none "
                  f"(0,0, NaN, out of range). `pamir index FOLDER` (no model) took "
                  f"{q['index_s']} s (features are cached by content: an earlier run of the "
                  "same folder had computed them); then `pamir search WORD -k K --json`, K the number of "
                  "pictures taken there.", "",
                  f"Mean P@K: cities {q['mean_city']:.3f}, countries {q['mean_country']:.3f} "
                  "(target 0.95 each). Beside it, from the files alone (pamir.facts.metadata and "
                  "pamir.facts.places, no index): how many pictures hold the word as a place fact, "
                  "and how many of them were taken there.", "",
                  "A name of several words is searched as the grammar's phrase (`\"new "
                  "york\"`); typed bare, each word is a term of its own (last column).", "",
                  "| query | K | P@K (`pamir search`) | holding the word | of them taken there "
                  "| P@K typed bare |", "|---|---|---|---|---|---|"]
        for part in ("cities", "countries"):
            for w, v in q[part].items():
                f = q.get("facts_only", {}).get(w, {})
                bare = f"{v['bare']:.3f}" if "bare" in v else ""
                lines.append(f"| `{v.get('query', w)}` | {v['k']} | {v['p_at_k']:.3f} | "
                             f"{f.get('held', '')} | {f.get('right', '')} | {bare} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = parser(__doc__)
    ap.add_argument("--districts", action="store_true", help="part 1 only (no index)")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    path = RESULTS / f"{STEM}.json"
    if args.report_only:
        rerender(STEM, report)
        return
    old = json.loads(path.read_text()) if path.is_file() else {}
    run = Run("bench_places.py", argv)
    r = {**old, "run": run.info(), "districts": measure_districts()}
    if not args.districts:
        r["search"] = measure_search()
    save_report(STEM, r, report)


if __name__ == "__main__":
    main()
