"""People on the web page, in a real headless Chromium (issue 34): the people as faces with
their counts; a named one's face searches person:"name"; an unnamed one is named in their
panel. Skipped, as test_browser, where Chromium or selenium is absent."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("dlib")
from test_browser import _run, browser, free_port, wait  # noqa: E402, F401 - fixtures
from test_people import folder_of_faces  # noqa: E402

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402


@pytest.fixture(scope="module")
def people_server(tmp_path_factory):
    if shutil.which("exiftool") is None:
        pytest.skip("exiftool not installed")
    from pamir import workflow
    from pamir.commands.product import LOOPBACK_NAMES
    from pamir.index import Index
    from pamir.server import create_app
    from test_server import FakeSystem

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAMIR_EMBEDDINGS", "0")
        root = tmp_path_factory.mktemp("people-page")
        pictures = folder_of_faces(root)
        system = FakeSystem()
        with Index.create(root / "index", system.vocabulary, system.idf) as ix:
            ix.update([pictures], system.transform_paths)
            workflow.read_faces(ix)
        app = create_app(root / "index", system=system, allowed_hosts=LOOPBACK_NAMES,
                         warm_mapping=False)
        yield from _run(app, free_port())


def labels(browser) -> list[str]:
    """The people strip's cards, read in one go (the strip is redrawn after a change)."""
    return browser.execute_script(
        "return [...document.querySelectorAll('#people .person button.face')]"
        ".map((b) => b.textContent.trim())")


def click_card(browser, label: str) -> None:
    browser.execute_script(
        "[...document.querySelectorAll('#people .person button.face')]"
        ".find((b) => b.textContent.trim() === arguments[0]).click()", label)


def test_people_as_faces_search_and_name(people_server, browser):
    browser.get(people_server)
    wait(browser).until(lambda d: "Barack Obama (4)" in labels(d))
    faces = browser.find_elements(By.CSS_SELECTOR, "#people .person img")
    wait(browser).until(lambda d: all(d.execute_script(
        "return arguments[0].complete && arguments[0].naturalWidth > 0", img) for img in faces))
    click_card(browser, "Barack Obama (4)")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) == 4)
    assert browser.find_element(By.ID, "q").get_attribute("value") == 'person:"barack obama"'

    unnamed = next(label for label in labels(browser) if label.startswith("person "))
    click_card(browser, unnamed)  # no name yet: their panel
    panel = wait(browser).until(EC.visibility_of_element_located((By.ID, "person-panel")))
    field = panel.find_element(By.CSS_SELECTOR, "input[type=text]")
    field.send_keys("Someone Else")
    field.submit()
    wait(browser).until(lambda d: "Someone Else (1)" in labels(d))
    assert unnamed not in labels(browser)
