"""The token's way into the page, in a real headless Chromium (issue 28): a server bound off
loopback (127.0.0.2) with tokens; without one the page says how to get in; the printed URL
sets an HttpOnly, SameSite=Strict cookie, leaves the address bar, and the page then works;
a viewer's marks are refused by the server, saying an editor's token is needed.
"""

from __future__ import annotations


import pytest

from conftest import chromium_or_skip, serve_in_thread, wait

webdriver = chromium_or_skip()

from selenium.webdriver.common.by import By  # noqa: E402

from pamir.server import create_app  # noqa: E402
from pamir.server.sharing import Sharing  # noqa: E402
from fakes import TOKENS, indexed_with_model  # noqa: E402


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    index_dir, model_dir, system = indexed_with_model(tmp_path_factory.mktemp("browser-sharing"))
    app = create_app(index_dir, model_dir, system=system, sharing=Sharing(dict(TOKENS)),
                     warm_mapping=False)
    yield from serve_in_thread(app, "127.0.0.2")


def test_the_token_url_sets_an_httponly_cookie_and_the_page_works(shared, browser):
    browser.delete_all_cookies()
    browser.get(shared + "/?q=red")
    assert "needs a token" in browser.find_element(By.TAG_NAME, "h1").text
    assert not browser.find_elements(By.ID, "q")

    browser.get(shared + f"/?token={TOKENS['viewer']}&q=blue+stripes")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) > 0)
    assert "token" not in browser.current_url and "q=blue" in browser.current_url
    assert "blue-2.png" in browser.find_elements(By.CSS_SELECTOR, "#results .hit")[0].text
    # the thumbnails, fetched by the browser itself, carry the cookie too
    wait(browser).until(lambda d: d.execute_script(
        "return [...document.querySelectorAll('#results img')].slice(0, 3)"
        ".every(i => i.complete && i.naturalWidth > 0)"))
    [cookie] = [c for c in browser.get_cookies() if c["name"] == "pamir_token"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert cookie["value"] == TOKENS["viewer"]
    assert "pamir_token" not in browser.execute_script("return document.cookie")  # no script

    # later visits need no token in the URL
    browser.get(shared + "/?q=green")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) > 0)

    # a viewer marks a picture: the server refuses, and the page says why
    browser.find_elements(By.CSS_SELECTOR, "#results .hit")[1].find_element(
        By.CLASS_NAME, "mark-right").click()
    wait(browser).until(lambda d: "editor" in d.find_element(By.ID, "feedback-note").text)


def test_an_editor_token_replaces_the_viewer_cookie(shared, browser):
    browser.get(shared + f"/?token={TOKENS['editor']}&q=stripes")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) > 0)
    [cookie] = [c for c in browser.get_cookies() if c["name"] == "pamir_token"]
    assert cookie["value"] == TOKENS["editor"]
    browser.find_elements(By.CSS_SELECTOR, "#results .hit")[1].find_element(
        By.CLASS_NAME, "mark-right").click()
    wait(browser, 120).until(
        lambda d: "to teach the model" in d.find_element(By.ID, "feedback-note").text)
