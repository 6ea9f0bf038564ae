"""A video on the web page, in a real headless Chromium: the card shows its best frame's
time, and the detail plays it from that time through the server's range requests."""

from __future__ import annotations

import pytest

from conftest import chromium_or_skip, free_port, serve_in_thread, wait

webdriver = chromium_or_skip()

from selenium.webdriver.common.by import By  # noqa: E402

from fakes import FakeSystem  # noqa: E402
from pamir.index import Index  # noqa: E402
from pamir.server import create_app  # noqa: E402
from test_video import shot, write_video  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("video-page")
    folder = root / "videos"
    folder.mkdir()
    write_video(folder / "walk.mp4", [shot("red"), shot("blue"), shot("green", stripes=True)])
    system = FakeSystem()
    with Index.create(root / "index", system.vocabulary, system.idf) as ix:
        ix.update([folder], system.transform_paths)
    yield from serve_in_thread(create_app(root / "index", system=system, warm_mapping=False),
                               port=free_port())


def test_a_video_hit_shows_its_time_and_plays_from_it(server, browser):
    browser.get(server + "/?q=stripes")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#results .hit .video-time"))
    card = browser.find_element(By.CSS_SELECTOR, "#results .hit")
    assert card.find_element(By.CLASS_NAME, "video-time").text == "▶ 00:10"
    wait(browser).until(lambda d: d.execute_script(
        "const i = document.querySelector('#results img');"
        "return i.complete && i.naturalWidth > 0"))  # its frame at 10 s, decoded by the browser
    card.find_element(By.CSS_SELECTOR, "button.open").click()
    wait(browser).until(lambda d: d.find_elements(By.ID, "detail-video"))
    src = browser.find_element(By.ID, "detail-video").get_attribute("src")
    assert src.endswith("/video#t=10")
    status = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0].split('#')[0], {headers: {Range: 'bytes=0-99'}})"
        ".then(r => r.arrayBuffer().then(b => done([r.status, b.byteLength])));", src)
    assert status == [206, 100]
