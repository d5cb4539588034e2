"""Headless Chromium for the tests that load a report as its reader
would: offline, every plot drawn, no console warning. One home for the
driver's set-up; the `browser` fixture (conftest.py) starts one per
module that asks for it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
MISSING = "chromium and chromium-driver are not installed (scripts/install-deps.sh test installs them)"
needs_browser = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason=MISSING)


def start():
    """A headless driver that keeps the page's console log; skips the
    calling test where there is no Chromium."""
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip(MISSING)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,2000", "--disable-dev-shm-usage"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def warnings(browser) -> list[dict]:
    """The console messages a reader would be shown as errors or warnings."""
    return [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def load(browser, path, timeout: float = 60) -> dict:
    """Opens the page offline and waits until every plot is embedded;
    returns the console messages and what the page shows."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(Path(path).resolve().as_uri())
    WebDriverWait(browser, timeout).until(
        lambda d: d.execute_script("return document.body.dataset.plotsReady || document.body.dataset.plotsError")
    )
    return {
        "error": browser.execute_script("return document.body.dataset.plotsError || null"),
        "console": warnings(browser),
        "plots": browser.execute_script("return document.querySelectorAll('div.plot').length"),
        "drawn": browser.execute_script("return document.querySelectorAll('div.plot svg.marks').length"),
        "titles": browser.execute_script(
            "return Array.from(document.querySelectorAll('div.plot')).map(e => e.dataset.title)"
        ),
        "injected": browser.execute_script("return document.querySelectorAll('img').length"),
    }
