"""The page's places and text (issue 33) in a real headless Chromium: the collection's
places as a way in (a click searches place:NAME), a hit's place beside its date, and the
detail view's outline of the text read on a picture, over the words as drawn."""

from __future__ import annotations

import pytest

from test_browser import CHROMEDRIVER, CHROMIUM  # noqa: F401 - skips where Chromium is absent

webdriver = pytest.importorskip("selenium.webdriver")

from selenium.webdriver.common.by import By  # noqa: E402

from pamir.commands.product import LOOPBACK_NAMES  # noqa: E402
from pamir.server import create_app  # noqa: E402
from test_browser import _run, browser, free_port, wait  # noqa: E402, F401 - its Chromium
from test_places_text_page import build_places_and_text  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAMIR_EMBEDDINGS", "0")
        index_dir, system = build_places_and_text(tmp_path_factory.mktemp("browser-places"))
        app = create_app(index_dir, system=system, allowed_hosts=LOOPBACK_NAMES,
                         warm_mapping=False)
        yield from _run(app, free_port())


def test_a_place_is_a_way_in_and_hits_say_where(server, browser):
    browser.get(server + "/")
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


def test_the_detail_view_outlines_the_text_read_on_a_picture(server, browser):
    browser.get(server + "/?q=text%3Abread")
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
