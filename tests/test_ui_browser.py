"""``fabric-memory ui`` in a real browser: Debian's Chromium, driven by Selenium through
chromium-driver, clicks through the pages as a person does.

No skip: README's test command installs Chromium (``chromium``, ``chromium-driver``). With
``--update-golden`` the run also writes the screenshots docs/ui.md shows.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

from .memory_builder import SessionBuilder
from .ui_host import RARE, RunningUI, Store, build_store, running_ui

CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
WAIT_SECONDS = 20.0
"""Longest a step waits: a live change shows within a few seconds (debounce, commit, one
poll of the page's event stream)."""
FIGURES = Path(__file__).parent.parent / "docs" / "figures"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return build_store(tmp_path_factory.mktemp("ui-browser"))


@pytest.fixture(scope="module")
def ui(store: Store) -> Iterator[RunningUI]:
    with running_ui(store) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    missing = [path for path in (CHROMIUM, DRIVER) if shutil.which(path) is None]
    assert not missing, (f"{', '.join(missing)} missing: install Debian's chromium and "
                         "chromium-driver (README's test command does)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,900", "--no-first-run", "--disable-extensions",
                 "--disable-background-networking", "--disable-component-update"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
    driver.set_page_load_timeout(WAIT_SECONDS)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
          ) -> Callable[[WebDriver, str], None]:
    """Save a screenshot (into docs/figures with --update-golden)."""
    folder = (FIGURES if request.config.getoption("--update-golden")
              else tmp_path_factory.mktemp("shots"))

    def shoot(driver: WebDriver, name: str) -> None:
        assert driver.save_screenshot(str(folder / f"ui-{name}.png"))

    return shoot


def wait_for(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"waited {WAIT_SECONDS:g}s for {what}")


def found(driver: WebDriver, element_id: str) -> WebElement | None:
    elements = driver.find_elements(By.ID, element_id)
    return elements[0] if elements else None


def in_view(driver: WebDriver, element: WebElement) -> bool:
    """The element is displayed and its top is inside the window (scrolled to)."""
    box = driver.execute_script("const r = arguments[0].getBoundingClientRect();"
                                "return [r.top, r.bottom, window.innerHeight];", element)
    return bool(element.is_displayed() and 0 <= box[0] < box[2])


def test_search_click_land_follow_and_live(ui: RunningUI, store: Store, browser: WebDriver,
                                          shots: Callable[[WebDriver, str], None]) -> None:
    """The list opens by the printed URL; a rare word is searched; its hit lands on the entry
    (on the timeline's second page, scrolled to); an address in the compaction summary
    leads to its operation on the first page; an appended line appears on the open page and
    a new session in the open list, with no reindex."""
    browser.get(ui.url)
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "table.sessions tbody tr"),
             "the sessions list")
    assert "Make the parser accept trailing commas" in browser.page_source
    assert "token" not in browser.current_url  # the cookie took over
    shots(browser, "sessions")

    box = browser.find_element(By.CSS_SELECTOR, "header.top input[name=q]")
    box.send_keys(RARE)
    box.submit()
    hit = wait_for(lambda: browser.find_elements(
        By.CSS_SELECTOR, f'a.hit[href$="#{store.rare_address}"]'), "the rare word's hit")[0]
    assert browser.find_elements(By.TAG_NAME, "mark")
    shots(browser, "search")
    hit.click()
    entry = wait_for(lambda: found(browser, store.rare_address), "the hit's entry")
    assert browser.current_url.endswith(f"#{store.rare_address}")
    wait_for(lambda: in_view(browser, entry), "the entry scrolled into view")
    assert "target" in (entry.get_attribute("class") or "")
    assert RARE in entry.text
    entry.find_element(By.CSS_SELECTOR, "details.raw > summary").click()
    raw = entry.find_element(By.CSS_SELECTOR, "details.raw pre")
    wait_for(lambda: RARE in raw.text and '"type":"message"' in raw.text,
             "the entry's verbatim line, on request")

    summary = found(browser, store.compaction)
    assert summary is not None
    browser.execute_script("arguments[0].scrollIntoView()", summary)
    shots(browser, "compaction")
    link = summary.find_element(By.LINK_TEXT, store.failed_op)
    link.click()
    operation = wait_for(lambda: found(browser, store.failed_op), "the summary's address")
    wait_for(lambda: in_view(browser, operation), "the operation scrolled into view")
    assert "pi.bash" in operation.text and "failed" in operation.text
    shots(browser, "session")

    browser.get(f"{ui.base}/summary/{store.long.session_id}")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "section.summary a.address"),
             "the summary's address links")
    shots(browser, "summary")
    browser.get(f"{ui.base}/stats")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "figure.chart svg"), "the charts")
    shots(browser, "stats")

    browser.get(f"{ui.base}/session/{store.long.session_id}?page=2")
    wait_for(lambda: found(browser, store.compaction), "the last page")
    time.sleep(1.5)  # the page's event stream is open
    store.long.append("LIVE_LINE_PELICAN written while the page is open")
    live = wait_for(lambda: found(browser, store.long.leaf or ""), "the appended entry")
    assert "LIVE_LINE_PELICAN" in live.text

    browser.get(ui.base + "/")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "table.sessions tbody tr"), "list")
    time.sleep(1.5)
    fresh = SessionBuilder(store.sessions / "--repo--" / "2026-02-01T10-00-00-000Z_new.jsonl")
    fresh.user("NEWLY_WRITTEN_SESSION_HERON appears without a reindex")
    fresh.write()
    wait_for(lambda: "NEWLY_WRITTEN_SESSION_HERON" in browser.page_source, "the new session")


def test_refused_without_the_token(ui: RunningUI, store: Store, browser: WebDriver) -> None:
    """A browser without the token's cookie gets 401 and no content; a wrong token 403."""
    browser.get(ui.base + "/")  # on the server's origin, to clear its cookie
    browser.delete_all_cookies()
    for path in ("/", f"/session/{store.long.session_id}", f"/search?q={RARE}", "/stats"):
        browser.get(ui.base + path)
        text = browser.find_element(By.TAG_NAME, "body").text
        assert "no token" in text, path
        assert store.long.session_id not in browser.page_source, path
        assert "trailing commas" not in browser.page_source, path
    browser.get(f"{ui.base}/?token=not-the-token")
    assert "wrong token" in browser.find_element(By.TAG_NAME, "body").text
    assert store.long.session_id not in browser.page_source
