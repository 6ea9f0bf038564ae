"""Places and text on the API and the page (issue 33): the collection's places with their
counts (GET /api/places, a country's other forms one entry, its query finds its pictures),
a hit's and a picture's place beside the date, a picture's lines of text with their boxes
(GET /api/pictures/{id}), on real files: GPS written by exiftool, words painted and read by
the OCR pass; in a real headless Chromium, the places as a way in and the text outlined;
`pamir annotate`'s place and text."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from pamir.facts.fact import Fact
from pamir.facts.ocr import TextLine, lines_of, text_facts
from pamir.facts.places import listed_places
from pamir.text.query import filter_term, parse

KYOTO = (35.0394, 135.7292)     # Kinkaku-ji: Kamigyō-ku, Kyoto, Japan
LONDON = (51.5079, -0.1281)     # Trafalgar Square


@pytest.fixture(autouse=True)
def no_embedding_model(monkeypatch):
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")


# ------------------------------------------------------------------------------ library

def test_a_place_and_its_other_forms_are_one_entry_with_the_query_that_finds_it():
    def d(shown, level):
        return json.dumps({"shown": shown, "level": level})

    rows = [("japan", d("Japan", "country"), 3), ("kyoto", d("Kyoto", "city"), 2),
            ("uk", d("United Kingdom", "country"), 2),
            ("united kingdom", d("United Kingdom", "country"), 2),
            ("britain", d("United Kingdom", "country"), 2),
            ("kamigyo-ku", d("Kamigyō-ku", "place"), 1), ("odd", "not json", 1)]
    places = listed_places(rows)
    assert [(p["shown"], p["pictures"]) for p in places] == [
        ("Japan", 3), ("Kyoto", 2), ("United Kingdom", 2), ("Kamigyō-ku", 1), ("odd", 1)]
    uk = places[2]
    assert uk["word"] == "united kingdom" and sorted(uk["words"]) == [
        "britain", "uk", "united kingdom"]
    assert uk["query"] == 'place:"united kingdom"' and places[1]["query"] == "place:kyoto"
    assert places[3]["level"] == "place" and places[4]["level"] == ""


@pytest.mark.parametrize("word", ["kyoto", "united kingdom", "kamigyo-ku", "cote d'ivoire"])
def test_a_filter_term_reads_back_as_its_filter(word):
    assert parse(filter_term("place", word)).facts == [("place", word)]
    assert filter_term("text", 'say "cheese"') == 'text:"say cheese"'


def test_the_lines_of_a_pictures_text_facts_each_once_in_reading_order():
    lines = [TextLine("Fresh Bread", 0.9, (0.1, 0.5, 0.6, 0.6)),
             TextLine("BAKERY", 0.97, (0.2, 0.1, 0.7, 0.25))]
    facts = text_facts(lines) + [Fact("place", "kyoto"), Fact("text", "odd", 0.5, "{}")]
    assert lines_of(facts) == [lines[1], lines[0]]  # top to bottom; words of a line, once
    assert lines_of([]) == []


# ------------------------------------------------------------------------------ the API

def paint_sign(path: Path) -> Path:
    from pictures import paint

    Image.fromarray(paint("FRESH BREAD", "DejaVuSans-Bold.ttf", 48, (20, 20, 20),
                          (240, 232, 205), 0, where=(60, 150))).save(path, quality=92)
    return path


@pytest.fixture
def indexed(tmp_path):
    return build_places_and_text(tmp_path)


def build_places_and_text(tmp_path: Path):
    """(index folder, system): the server tests' pictures, two taken in Kyoto, and a sign
    painted with FRESH BREAD taken in London (its text read by the OCR pass)."""
    if shutil.which("exiftool") is None:
        pytest.skip("exiftool not installed (.ci/run installs it)")
    pytest.importorskip("rapidocr")
    from pamir.index import Index
    from pamir.index.passes import run_pass
    from pamir.facts.ocr import read_texts
    from fakes import FakeSystem
    from pictures import exiftool, gps_tags, make_pictures, picture

    folder = tmp_path / "pictures"
    make_pictures(folder)
    exiftool(picture(folder / "temple.jpg"), *gps_tags(*KYOTO),
             "-EXIF:DateTimeOriginal=2019:07:01 10:00:00")
    exiftool(picture(folder / "garden.jpg", (40, 160, 60)), *gps_tags(*KYOTO))
    exiftool(paint_sign(folder / "sign.jpg"), *gps_tags(*LONDON))
    system = FakeSystem()
    with Index.create(tmp_path / "index", system.vocabulary, system.idf) as ix:
        ix.update([folder], system.transform_paths)
        report = run_pass(ix, "text", ("text",), read_texts)
        assert report.with_facts == 1
    return tmp_path / "index", system


def test_the_api_lists_places_and_shows_place_and_text(indexed):
    from pamir.server import create_app

    index_dir, system = indexed
    with TestClient(create_app(index_dir, system=system, warm_mapping=False)) as c:
        places = c.get("/api/places").json()["places"]
        counts = {p["shown"]: p["pictures"] for p in places}
        assert counts["Kyoto"] == 2 and counts["Japan"] == 2 and counts["Kamigyō-ku"] == 2
        assert counts["United Kingdom"] == 1 and counts["London"] == 1
        assert sum(p["shown"] == "United Kingdom" for p in places) == 1  # uk, britain: one
        assert [p["shown"] for p in c.get("/api/places?limit=1").json()["places"]] == [
            places[0]["shown"]]
        assert places[0]["pictures"] == 2

        # a place's query finds its pictures, and each hit says where, beside its date
        kyoto = next(p for p in places if p["shown"] == "Kyoto")
        found = c.get("/api/search", params={"q": kyoto["query"]}).json()
        hits = found["hits"]
        assert sorted(h["name"] for h in hits) == ["garden.jpg", "temple.jpg"]
        # facts alone carry their own probability: no note says there is none
        assert found["probability_note"] is None and all(h["probability"] > 0.5 for h in hits)
        assert c.get("/api/search", params={"q": "red"}).json()["probability_note"]
        temple = next(h for h in hits if h["name"] == "temple.jpg")
        assert temple["facts"]["place"][:2] == ["Kamigyō-ku", "Kyoto"]
        assert temple["facts"]["place"][-1] == "Japan"
        assert temple["taken"].startswith("2019-07-01")
        uk = next(p for p in places if p["shown"] == "United Kingdom")
        assert [h["name"] for h in c.get("/api/search", params={"q": uk["query"]}).json()[
            "hits"]] == ["sign.jpg"]

        # the picture: its place and the line of text read on it, with its box
        sign = c.get("/api/search", params={"q": "text:bread"}).json()["hits"][0]
        p = c.get(f"/api/pictures/{sign['id']}").json()
        assert p["facts"]["place"][0] == "London" and "United Kingdom" in p["facts"]["place"]
        [line] = p["text"]
        assert line["text"] == "FRESH BREAD" and 0.5 <= line["confidence"] <= 1
        x0, y0, x1, y1 = line["box"]
        # painted at (60, 150) on a 640 x 427 picture, about 420 x 60 pixels with its plate
        assert 0.05 < x0 < 0.15 and 0.3 < y0 < 0.42 and 0.6 < x1 < 0.85 and y0 < y1 < 0.6
        # a picture with no place and no text
        plain = c.get("/api/search", params={"q": "red"}).json()["hits"][0]
        p = c.get(f"/api/pictures/{plain['id']}").json()
        assert p["facts"] == {} and p["text"] == []


def test_no_places_is_an_empty_list(tmp_path):
    from pamir.server import create_app
    from fakes import FakeSystem, build_index

    system = FakeSystem()
    with TestClient(create_app(build_index(tmp_path, system), system=system,
                               warm_mapping=False)) as c:
        assert c.get("/api/places").json() == {"places": []}
        assert c.get("/api/places?limit=0").status_code == 422


# ------------------------------------------------------------------------------ annotate

def test_annotate_adds_the_place_and_the_text_alike_in_the_library_cli_and_api(
        indexed, tmp_path, monkeypatch):
    """`pamir annotate` of a picture the index holds prints its place and the words read on
    it, marked; the library (annotate_pictures with the index) and the API's picture give
    the same keywords."""
    from typer.testing import CliRunner

    from pamir.jobs.annotation import annotate_pictures, fact_keywords
    from pamir.cli import app
    from pamir.index import Index
    from pamir.server import create_app

    index_dir, system = indexed
    sign = index_dir.parent / "pictures" / "sign.jpg"
    import pamir.commands.index as product

    model = system.save(tmp_path / "model")
    monkeypatch.setattr(product, "load_system", lambda path: system)

    def annotate(*options):
        r = CliRunner().invoke(app, ["annotate", str(model), str(sign), *options])
        assert r.exit_code == 0, r.output
        return r.stdout, r.output

    line, _ = annotate("--index", str(index_dir))
    assert "London (place)" in line and "United Kingdom (place)" in line
    assert "fresh (text)" in line and "bread (text)" in line and "uk (place)" not in line
    assert line.index("London (place)") < line.index("United Kingdom (place)")  # nearest first
    cli = json.loads(annotate("--index", str(index_dir), "--json")[0])["keywords"]
    facts = [w for w in cli if w.get("source") in ("place", "text")]
    assert {"word": "london", "shown": "London", "source": "place", "confidence": 1.0} in facts
    assert {w["word"] for w in facts if w["source"] == "text"} == {"fresh", "bread"}

    with Index.open(index_dir) as ix:
        [library], ok, _ = annotate_pictures(system, [sign], index=ix)
        assert annotate_pictures(system, [sign])[0][0] == [
            w for w in library if w.get("source") not in ("place", "text")]  # no index
    with TestClient(create_app(index_dir, model, system=system, warm_mapping=False)) as c:
        hit = c.get("/api/search", params={"q": "text:bread"}).json()["hits"][0]
        api = c.get(f"/api/pictures/{hit['id']}").json()["keywords"]
    assert ok.tolist() == [True]
    assert [(w["word"], w.get("source")) for w in cli] == [
        (w["word"], w.get("source")) for w in library] == [
        (w["word"], w.get("source")) for w in api]

    # without an index, or a picture it does not hold: no facts, nothing else changes
    other, said = annotate("--index", str(tmp_path / "nowhere"))
    assert "(place)" not in other and "(text)" not in other and "no index" in said
    assert fact_keywords([]) == []


def test_fact_keywords_put_places_nearest_first_and_the_surest_words_first():
    from pamir.jobs.annotation import fact_keywords
    from pamir.facts.places import place_facts

    lines = [TextLine("Fresh Bread", 0.6, (0, 0, 1, 0.2)), TextLine("BAKERY", 0.97,
                                                                    (0, 0.5, 1, 0.7))]
    records = fact_keywords(place_facts(KYOTO)[::-1] + text_facts(lines), k=2)
    # the city and its region are both "Kyoto": shown once; phrases ("fresh bread") left out
    assert [(r["shown"], r["source"]) for r in records] == [
        ("Kamigyō-ku", "place"), ("Kyoto", "place"), ("Japan", "place"),
        ("bakery", "text"), ("bread", "text")]
    assert records[3]["confidence"] == 0.97


# ------------------------------------------------------------------------------ the page

@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The server of `build_places_and_text`'s index, as `pamir serve` runs it."""
    from conftest import serve_in_thread

    from pamir.commands.index import LOOPBACK_NAMES
    from pamir.server import create_app

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAMIR_EMBEDDINGS", "0")
        index_dir, system = build_places_and_text(tmp_path_factory.mktemp("browser-places"))
        app = create_app(index_dir, system=system, allowed_hosts=LOOPBACK_NAMES,
                         warm_mapping=False)
        yield from serve_in_thread(app)


def test_a_place_is_a_way_in_and_hits_say_where(page, browser):
    from conftest import wait
    from selenium.webdriver.common.by import By

    browser.get(page + "/")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#places .place"))
    assert browser.find_element(By.ID, "places").get_attribute("open") is not None
    places = {b.find_element(By.CLASS_NAME, "place-name").text:
              b.find_element(By.CLASS_NAME, "count").text
              for b in browser.find_elements(By.CSS_SELECTOR, "#places .place")}
    assert places["Kyoto"] == "2" and places["United Kingdom"] == "1"
    next(b for b in browser.find_elements(By.CSS_SELECTOR, "#places .place")
         if b.find_element(By.CLASS_NAME, "place-name").text == "Kyoto").click()
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) == 2)
    assert browser.find_element(By.ID, "q").get_attribute("value") == "place:kyoto"
    assert "q=place%3Akyoto" in browser.current_url
    assert "2 of 12 pictures for “place:kyoto”" in browser.find_element(By.ID, "message").text
    cards = browser.find_elements(By.CSS_SELECTOR, "#results .hit")
    wheres = [c.find_element(By.CLASS_NAME, "where") for c in cards]
    assert {w.text for w in wheres} == {"Kamigyō-ku"}
    assert all("Japan" in w.get_attribute("title") for w in wheres)
    assert any(c.find_elements(By.CLASS_NAME, "taken") for c in cards)  # temple.jpg's date


def test_the_detail_view_outlines_the_text_read_on_a_picture(page, browser):
    from conftest import wait
    from selenium.webdriver.common.by import By

    browser.get(page + "/?q=text%3Abread")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#results .hit"))
    browser.find_elements(By.CSS_SELECTOR, "#results .hit .open")[0].click()
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#text-lines li"))
    assert [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#text-lines li")] == [
        "FRESH BREAD"]
    assert "London" in browser.find_element(By.ID, "detail-taken").text
    wait(browser).until(lambda d: d.execute_script(
        "const i = document.getElementById('detail-img'); return i.complete && i.naturalWidth"))
    # the outline lies where the words are on the picture as drawn: its box's fractions of
    # the drawn picture (a 640 x 427 picture, painted at (60, 150))
    where = browser.execute_script("""
        const img = document.getElementById('detail-img');
        const r = document.querySelector('#detail-text rect').getBoundingClientRect();
        const i = img.getBoundingClientRect();
        const s = Math.min(i.width / img.naturalWidth, i.height / img.naturalHeight);
        const w = img.naturalWidth * s, h = img.naturalHeight * s;
        const left = i.left + (i.width - w) / 2, top = i.top + (i.height - h) / 2;
        return [(r.left - left) / w, (r.top - top) / h, (r.right - left) / w,
                (r.bottom - top) / h];""")
    x0, y0, x1, y1 = where
    assert 0.05 < x0 < 0.15 and 0.3 < y0 < 0.42 and 0.6 < x1 < 0.85 and y0 < y1 < 0.6, where
    # the toggle hides the outline
    browser.find_element(By.ID, "show-text").click()
    assert not browser.find_element(By.ID, "detail-text").is_displayed()
