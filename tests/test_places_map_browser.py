"""The places tree and the offline map on the page, in headless Chromium (issue 45): the tree
nests cities in their countries, the map draws Natural Earth's outlines with a marker per
place, and a click on a marker or a place searches it."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """A served index of the server tests' pictures, two taken in Kyoto, one in London."""
    if shutil.which("exiftool") is None:
        pytest.skip("exiftool not installed (.ci/run installs it)")
    from conftest import serve_in_thread
    from fakes import FakeSystem
    from pictures import exiftool, gps_tags, make_pictures, picture

    from pamir.commands.index import LOOPBACK_NAMES
    from pamir.index import Index
    from pamir.server import create_app

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAMIR_EMBEDDINGS", "0")
        tmp = tmp_path_factory.mktemp("places-map")
        folder = tmp / "pictures"
        make_pictures(folder)
        for name, where in (("kinkakuji", (35.0394, 135.7292)), ("ginkakuji", (35.0270, 135.7982)),
                            ("tower", (51.5081, -0.0759))):
            exiftool(picture(folder / f"{name}.jpg"), *gps_tags(*where))
        system = FakeSystem()
        with Index.create(tmp / "index", system.vocabulary, system.idf) as ix:
            ix.update([folder], system.transform_paths)
        app = create_app(tmp / "index", system=system, allowed_hosts=LOOPBACK_NAMES,
                         warm_mapping=False)
        yield from serve_in_thread(app)


def test_the_tree_nests_places_and_a_click_on_a_marker_searches_its_place(page, browser):
    from conftest import wait
    from selenium.webdriver.common.by import By

    browser.get(page + "/")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#places-map .marker"))
    countries = browser.find_elements(By.CSS_SELECTOR, "#places ul.place-tree > li")
    tree = {li.find_element(By.CLASS_NAME, "place-name").text:
            [b.text for b in li.find_elements(By.CSS_SELECTOR, "ul .place-name")]
            for li in countries}
    assert set(tree) == {"Japan", "United Kingdom"}
    assert "Kyoto" in tree["Japan"] and "London" in tree["United Kingdom"]
    # the outlines are drawn, and one marker per place at the whole collection's zoom
    assert len(browser.find_elements(By.CSS_SELECTOR, "#places-map .land path")) > 100
    markers = {m.get_attribute("data-query"): m.get_attribute("data-count")
               for m in browser.find_elements(By.CSS_SELECTOR, "#places-map .marker")}
    assert markers == {"place:kyoto": "2", "place:london": "1"}
    kyoto = browser.find_element(By.CSS_SELECTOR, '#places-map .marker[data-query="place:kyoto"] circle')
    kyoto.click()
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) == 2)
    assert browser.find_element(By.ID, "q").get_attribute("value") == "place:kyoto"
    # a fact hit says what it holds, not its look's score; a fitted model takes feedback
    cards = browser.find_elements(By.CSS_SELECTOR, "#results .hit")
    assert {c.find_element(By.CLASS_NAME, "score").text for c in cards} == {"place: Kyoto"}
    assert all(c.find_element(By.CLASS_NAME, "marks").is_displayed() for c in cards)
    # zooming in on Kyoto parts its two temples, 6 km apart, into two markers
    browser.get(page + "/")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#places-map .marker"))
    zoom_in = browser.find_element(By.CSS_SELECTOR, '.map-zoom button[aria-label="zoom in"]')
    browser.execute_script("setView({x: 135.76 + 180 - 0.2, y: 90 - 35.03 - 0.1, w: 0.4, h: 0.2})")
    assert zoom_in.is_displayed()
    counts = sorted(m.get_attribute("data-count")
                    for m in browser.find_elements(By.CSS_SELECTOR, "#places-map .marker"))
    assert counts == ["1", "1", "1"]  # the two temples apart, London (out of view) its own


def test_a_place_of_the_tree_searches_it(page, browser):
    from conftest import wait
    from selenium.webdriver.common.by import By

    browser.get(page + "/")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#places .place"))
    next(b for b in browser.find_elements(By.CSS_SELECTOR, "#places .place")
         if b.find_element(By.CLASS_NAME, "place-name").text == "United Kingdom").click()
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) == 1)
    assert browser.find_element(By.ID, "q").get_attribute("value") == 'place:"united kingdom"'
