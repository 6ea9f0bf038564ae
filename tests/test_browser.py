"""The web page in a real headless Chromium: type a query, see thumbnails, open a picture.

Needs Debian's `chromium` and `chromium-driver` and the `selenium` package; skipped, with the
reason, only when they are absent (CI installs them).
"""

from __future__ import annotations

import pytest

from conftest import chromium_or_skip, free_port, serve_in_thread, wait

webdriver = chromium_or_skip()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402

from pamir.commands.index import LOOPBACK_NAMES  # noqa: E402
from pamir.server import create_app  # noqa: E402
from fakes import FakeSystem, build_index, use_fake_embedder


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        use_fake_embedder(mp)  # words outside the vocabulary, without the real model's load
        yield from _serve(tmp_path_factory)


def _serve(tmp_path_factory):
    from pamir.index import Index

    system = FakeSystem()
    root = tmp_path_factory.mktemp("browser")
    index_dir = build_index(root, system)
    model_dir = system.save(root / "model")  # the feedback loop's "keep" saves it here
    with Index.open(index_dir, writable=True) as ix:
        ix.set_model(model_dir, "fake")
    port = free_port()
    # as `pamir serve` runs it: bound to 127.0.0.1, answering only to the loopback names
    app = create_app(index_dir, model_dir, system=system, allowed_hosts=LOOPBACK_NAMES)
    yield from serve_in_thread(app, port=port)


def test_type_a_query_and_see_thumbnails(server, browser):
    browser.get(server + "/")
    box = wait(browser).until(EC.presence_of_element_located((By.ID, "q")))
    box.send_keys("blue stripes")
    box.submit()
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) > 0)
    hits = browser.find_elements(By.CSS_SELECTOR, "#results .hit")
    assert len(hits) == 9
    assert "blue-2.png" in hits[0].text  # the striped blue picture first
    # Thumbnails really loaded (decoded by the browser).
    wait(browser).until(lambda d: d.execute_script(
        "return [...document.querySelectorAll('#results img')].slice(0, 3)"
        ".every(i => i.complete && i.naturalWidth > 0)"))
    assert "q=blue+stripes" in browser.current_url or "q=blue%20stripes" in browser.current_url

    # Clicking a picture shows its keywords and the block overlay.
    hits[0].click()
    wait(browser).until(EC.visibility_of_element_located((By.ID, "detail")))
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#keywords li"))
    words = [li.find_element(By.CLASS_NAME, "kw").text
             for li in browser.find_elements(By.CSS_SELECTOR, "#keywords li")]
    assert set(words[:2]) == {"blue", "stripes"}
    wait(browser).until(lambda d: "block contributions" in d.find_element(
        By.ID, "explain-note").text)
    painted = browser.execute_script(
        "const c = document.getElementById('detail-canvas');"
        "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "let n = 0; for (let i = 3; i < d.length; i += 4) n += d[i] > 0; return n;")
    assert painted > 0


def painted_colours(browser) -> tuple[int, int]:
    """(reddish, bluish) painted pixels of the overlay canvas."""
    return tuple(browser.execute_script(
        "const c = document.getElementById('detail-canvas');"
        "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "let r = 0, b = 0; for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0) "
        "{ if (d[i] > d[i + 2]) r++; else b++; } return [r, b];"))


@pytest.fixture(scope="module")
def cnn_server(tmp_path_factory):
    """A model of the default shape (cnn+cnn-lite1+cnn-lite2+visterms, test_explain)."""
    from fakes import default_system

    with pytest.MonkeyPatch.context() as mp:
        use_fake_embedder(mp)  # as `server`: both may be up at once
        root = tmp_path_factory.mktemp("browser-cnn")
        system = default_system(root)
        app = create_app(build_index(root, system), system=system,
                         allowed_hosts=LOOPBACK_NAMES)
        yield from serve_in_thread(app)


def test_overlay_on_the_default_model(cnn_server, browser):
    """The page explains a CNN model too: each view's part of the score and one heat map of
    its cells and blocks over the picture."""
    browser.get(cnn_server + "/?q=red+stripes")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) > 0)
    browser.find_elements(By.CSS_SELECTOR, "#results .hit")[0].click()
    wait(browser).until(EC.visibility_of_element_located((By.ID, "detail")))
    wait(browser, 60).until(lambda d: "contributions" in d.find_element(
        By.ID, "explain-note").text)
    note = browser.find_element(By.ID, "explain-note")
    assert "cnn-lite2" in note.text and "cell and" in note.text and "block" in note.text
    assert "first-order" in note.get_attribute("title")
    wait(browser).until(lambda d: sum(painted_colours(d)) > 0)
    reddish, bluish = painted_colours(browser)
    assert reddish > 0 and bluish > 0  # a random W: some places raise it, some lower it
    browser.find_element(By.ID, "show-blocks").click()  # the toggle hides the overlay
    assert painted_colours(browser) == (0, 0)


def test_query_in_url_and_unknown_words(server, browser):
    browser.get(server + "/?q=red+unicorn")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) > 0)
    assert browser.find_element(By.ID, "q").get_attribute("value") == "red unicorn"
    assert "unicorn" in browser.find_element(By.ID, "message").text
    browser.get(server + "/?q=unicorn")
    wait(browser).until(lambda d: "vocabulary" in d.find_element(By.ID, "message").text)
    assert not browser.find_elements(By.CSS_SELECTOR, "#results .hit")


def test_annotate_an_uploaded_picture(server, browser, tmp_path):
    from PIL import Image

    picture = tmp_path / "mine.png"
    Image.new("RGB", (40, 30), (20, 200, 30)).save(picture)
    browser.get(server + "/")
    browser.find_element(By.ID, "upload").send_keys(str(picture))
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#annotation-words li"))
    first = browser.find_element(By.CSS_SELECTOR, "#annotation-words li .kw").text
    assert first == "green"


def test_mapping_shown_and_more_like_this(server, browser):
    browser.get(server + "/?q=crimson")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) > 0)
    assert browser.find_element(By.ID, "mapping").text == "crimson -> red 0.80"
    assert browser.find_elements(By.CSS_SELECTOR, "#results .hit")[0].text.startswith("red")
    browser.get(server + "/?q=red+floor:100")
    wait(browser).until(lambda d: "Nothing relevant" in d.find_element(By.ID, "message").text)
    assert not browser.find_elements(By.CSS_SELECTOR, "#results .hit")

    browser.get(server + "/?q=green+stripes")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) > 0)
    first = browser.find_elements(By.CSS_SELECTOR, "#results .hit")[0]
    assert "green-2.png" in first.text
    first.click()
    wait(browser).until(EC.element_to_be_clickable((By.ID, "more-like"))).click()
    wait(browser).until(lambda d: "pictures like green-2.png" in d.find_element(
        By.ID, "message").text)
    names = [h.text.split()[0] for h in browser.find_elements(By.CSS_SELECTOR, "#results .hit")]
    assert "green-2.png" not in names and set(names[:2]) == {"green-0.png", "green-1.png"}
    assert "like=" in browser.current_url and browser.find_element(By.ID, "detail").get_attribute(
        "hidden") is not None


def names_shown(browser):
    return [h.text.split()[0] for h in browser.find_elements(By.CSS_SELECTOR, "#results .hit")]


def test_feedback_mark_rerank_keep_reload(server, browser):
    """Mark a right and a wrong picture: the results re-rank at once; Keep saves the model;
    after a reload the search answers with what was learnt. (Last: it changes the model.)"""
    browser.get(server + "/?q=stripes")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) == 9)
    before = names_shown(browser)
    target, worst = "green-0.png", before[0]
    assert before.index(target) > 0

    def card(name):
        return next(h for h in browser.find_elements(By.CSS_SELECTOR, "#results .hit")
                    if h.text.split()[0] == name)

    card(target).find_element(By.CLASS_NAME, "mark-right").click()
    # a right mark alone re-ranks (by nearness to it); there is nothing to keep yet
    wait(browser, 120).until(
        lambda d: "to teach the model" in d.find_element(By.ID, "feedback-note").text)
    assert "right" in card(target).get_attribute("class")
    assert browser.find_element(By.ID, "keep").get_attribute("disabled")
    card(worst).find_element(By.CLASS_NAME, "mark-wrong").click()
    # the first feedback loads the model and compiles the PA step (numba; cold in a fresh
    # clone): seconds on a quiet machine, more on a loaded one
    wait(browser, 120).until(lambda d: "Re-ranked" in d.find_element(By.ID, "feedback-note").text)
    after = names_shown(browser)
    assert after.index(target) < after.index(worst)
    assert "wrong" in card(worst).get_attribute("class")  # marks survive the re-rank

    browser.find_element(By.ID, "keep").click()
    wait(browser, 120).until(lambda d: "Kept" in d.find_element(By.ID, "feedback-note").text)
    browser.refresh()
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .hit")) == 9)
    reloaded = names_shown(browser)
    assert reloaded.index(target) < reloaded.index(worst)
    assert not browser.find_elements(By.CSS_SELECTOR, "#results .hit.right")
