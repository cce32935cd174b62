"""The pages in a real browser: Debian's chromium and chromium-driver, driven by selenium.

One browser session serves the whole module. Each page is checked at 1280 and
390 px wide: its headings and table headers (``<th scope>``) in place, no
console error (a blocked inline script or style would be one), nothing wider
than the window; screenshots go to the module's temp dir. Under ``CI=true`` a
missing browser fails these tests (``.ci/run`` installs it); elsewhere it
skips them.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from bot.http_server import bind_socket

from bot.server import create_app
from bot.web.links import ReviewLinks
from bot.web.metrics import Metrics
from bot.web.pages import review_links, web_routes

from ..runtime_support import FakeClock, bench, demo, wait_for
from .support import SECRET, TOKEN, Site

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
WIDTHS = (1280, 390)

if CHROMIUM is None or DRIVER is None:
    if os.environ.get("CI") == "true":
        pytest.fail("chromium and chromium-driver are not installed; .ci/run installs them "
                    "(apt-get install -y chromium chromium-driver)", pytrace=False)
    pytest.skip("chromium and chromium-driver are not installed (apt-get install -y chromium chromium-driver)",
                allow_module_level=True)

from selenium import webdriver  # noqa: E402 - only with a browser to drive
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402


class Served:
    """The site on a real socket (uvicorn in a thread), and the address it answers on."""

    def __init__(self, site: Site, run_id: str) -> None:
        self.site = site
        self.run_id = run_id
        self.sock = bind_socket("127.0.0.1", 0)
        self.base = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(site.app, log_config=None, access_log=False, lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        wait_for(lambda: self.server.started, timeout=10, what="uvicorn to start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()

    def review_url(self, review_id: str) -> str:
        assert self.site.links is not None
        return self.base + self.site.links.url(review_id).removeprefix(self.site.config.web.base_url)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("site")
    b = bench(root, [demo()], web={"secret": SECRET, "token": TOKEN, "base_url": "https://bot.example.com"})
    b.clock.now = datetime.now(UTC)
    run = b.runner.run_foreground("demo")
    assert run is not None
    metrics = Metrics(b.store, b.clock)
    app = create_app(b.store, b.config.state_dir, web_routes(b.config, b.store, clock=b.clock, metrics=metrics))
    site = Site(b.config, b.store, b.clock, app, metrics, review_links(b.config, b.clock))
    site.review(900, rows=5000)
    with Served(site, run.id) as up:
        yield up


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or ""
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,900"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    driver.execute_cdp_cmd("Network.enable", {})
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    return tmp_path


def as_operator(driver: Any, on: bool) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"} if on else {}
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": headers})


def console_errors(driver: Any) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def laid_out(driver: Any, width: int, shots: Path, name: str) -> None:
    """At ``width``: one h1, every table header a scoped <th>, nothing wider than the window, a screenshot."""
    driver.set_window_size(width, 900)
    assert len(driver.find_elements(By.TAG_NAME, "h1")) == 1
    heads = driver.find_elements(By.CSS_SELECTOR, "thead th")
    assert heads and all(th.get_attribute("scope") == "col" for th in heads)
    wider = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert wider <= 0, f"{name} is {wider}px wider than a {width}px window"
    driver.save_screenshot(str(shots / f"{name}-{width}.png"))


def test_the_dashboard_shows_what_waits_and_runs(served: Served, browser: Any, shots: Path) -> None:
    as_operator(browser, True)
    browser.get(served.base + "/")
    assert browser.find_element(By.TAG_NAME, "h1").text == "What waits, what runs"
    headings = [h.text for h in browser.find_elements(By.TAG_NAME, "h2")]
    assert headings[0] == "Open reviews (2)" and headings[1].startswith("Runs waiting and running")
    for width in WIDTHS:
        laid_out(browser, width, shots, "dashboard")
    assert console_errors(browser) == []


def test_a_5000_row_proposal_filters_as_typed_and_keeps_its_headers_in_view(served: Served, browser: Any,
                                                                           shots: Path) -> None:
    as_operator(browser, False)
    browser.set_window_size(1280, 900)
    browser.get(served.review_url("demo-900"))
    rows = "return [...document.querySelectorAll('table.proposal tbody tr')].filter(r => !r.hidden).length"
    assert browser.execute_script(rows) == 5000
    box = browser.find_element(By.ID, "q")
    box.send_keys("#4999")
    wait_for(lambda: browser.execute_script(rows) == 1, timeout=5, what="the rows to narrow")
    assert browser.find_element(By.CSS_SELECTOR, ".count").text == "1 of 5000 rows"
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)  # typed away (clear() would send no input event)
    wait_for(lambda: browser.execute_script(rows) == 5000, timeout=5, what="every row back")
    for width in WIDTHS:
        browser.set_window_size(width, 900)
        browser.execute_script("const box = document.querySelector('.scroll.tall');"
                               "box.scrollIntoView(); box.scrollTop = 60000;")
        covering = browser.execute_script(
            "const th = document.querySelector('table.proposal thead th');"
            "const box = th.getBoundingClientRect();"
            "const hit = document.elementFromPoint(box.left + 4, box.top + box.height / 2);"
            "return [document.querySelector('.scroll.tall').scrollTop > 0, hit === th || th.contains(hit),"
            " hit && hit.outerHTML.slice(0, 80)];")
        assert covering[:2] == [True, True], f"the column headers scrolled away with the rows: {covering[2]}"
        laid_out(browser, width, shots, "review")
    assert console_errors(browser) == []


def test_with_scripts_off_the_filter_is_a_form_the_server_answers(served: Served, browser: Any) -> None:
    as_operator(browser, False)
    browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        browser.get(served.review_url("demo-900"))
        box = browser.find_element(By.ID, "q")
        box.send_keys("#42")
        box.send_keys(Keys.ENTER)
        wait_for(lambda: "q=%2342" in browser.current_url, timeout=5, what="the filter form to be sent")
        shown = browser.find_elements(By.CSS_SELECTOR, "table.proposal tbody tr")
        assert len(shown) == 111  # #42, #420-#429, #4200-#4299
        assert "111 of 5000 rows" in browser.find_element(By.CSS_SELECTOR, ".count").text
    finally:
        browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})
    assert console_errors(browser) == []


def test_a_run_page_shows_its_plan_and_reviews(served: Served, browser: Any, shots: Path) -> None:
    as_operator(browser, True)
    browser.get(f"{served.base}/runs/{served.run_id}")
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith(f"Run {served.run_id}")
    headings = [h.text for h in browser.find_elements(By.TAG_NAME, "h2")]
    assert headings == ["How it ended", "Plan", "Failures and recoveries", "Checkpoints and their reviews"]
    for width in WIDTHS:
        laid_out(browser, width, shots, "run")
    assert console_errors(browser) == []


def test_an_expired_link_shows_nothing(served: Served, browser: Any, shots: Path) -> None:
    as_operator(browser, False)
    month_ago = FakeClock(datetime.now(UTC) - timedelta(days=31))
    old = ReviewLinks(SECRET, served.base, timedelta(days=30), month_ago).url("demo-900")
    browser.get(old)
    assert browser.find_element(By.TAG_NAME, "body").text == "not found"
    assert browser.find_elements(By.TAG_NAME, "table") == [] and "5000" not in browser.page_source
    browser.save_screenshot(str(shots / "expired.png"))
    errors = console_errors(browser)
    assert all("404" in message for message in errors)  # the refusal itself, and nothing else
