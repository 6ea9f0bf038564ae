"""Screenshots of the web page for the docs, taken in headless Chromium.

    python docs/screenshot.py --index INDEX [--model MODEL] --query "tiger grass" \
        --out docs/search.png [--detail docs/detail.png]

Serves INDEX on a free 127.0.0.1 port in a thread, searches for the query, saves the results
page, then (with --detail) opens the first picture and saves its keywords and the overlay of
what drives its score.
Needs Debian's chromium + chromium-driver and selenium (the dev extra).
"""

from __future__ import annotations

import argparse
import socket
import threading
import time
import urllib.parse
from pathlib import Path

import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from pamir.server import create_app


def serve(index: Path, model: Path | None) -> tuple[str, uvicorn.Server]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(index, model), host="127.0.0.1",
                                           port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--model", type=Path)
    ap.add_argument("--query", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--detail", type=Path, help="also open the n-th result (--pick) and save")
    ap.add_argument("--pick", type=int, default=0)
    ap.add_argument("--size", default="1280,860")
    args = ap.parse_args()

    url, server = serve(args.index, args.model)
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={args.size}", "--hide-scrollbars"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    wait = WebDriverWait(driver, 60)
    try:
        driver.get(f"{url}/?q={urllib.parse.quote_plus(args.query)}")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#results .hit"))
        wait.until(lambda d: d.execute_script(
            "return [...document.querySelectorAll('#results img')]"
            ".filter(i => i.getBoundingClientRect().top < innerHeight)"
            ".every(i => i.complete && i.naturalWidth > 0)"))
        driver.save_screenshot(str(args.out))
        print(f"wrote {args.out}")
        if args.detail:
            driver.find_elements(By.CSS_SELECTOR, "#results .hit")[args.pick].click()
            wait.until(lambda d: "contributions" in d.find_element(
                By.ID, "explain-note").text or "No explanation" in d.find_element(
                By.ID, "explain-note").text)
            time.sleep(0.3)  # the overlay is drawn once the large thumbnail has loaded
            driver.save_screenshot(str(args.detail))
            print(f"wrote {args.detail}")
    finally:
        driver.quit()
        server.should_exit = True


if __name__ == "__main__":
    main()
