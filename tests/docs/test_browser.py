"""Build the site, serve it on loopback and check every page in headless Chromium.

Two sites are built: one from the real ``results/`` (what gets published; may have no
results yet) and one from a synthetic result file written to a temporary directory, so every
chart type is drawn even before a benchmark run exists. For each page: every chart drew an
SVG with data, no console error, no failed request; charts still draw after in-site
(instant) navigation and after a palette switch; the connection calculator computes offline.
Screenshots of failures go to tests/docs/screenshots/.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from docs_synthetic import make_dragonfly_run, make_run

from bench.results import write_results

pytestmark = pytest.mark.browser

sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("mkdocs")

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
PAGES = ["", "performance/", "peers/", "servers/", "tuning/", "connections/", "runtimes/",
         "history/", "production/", "high-availability/", "methodology/", "api/"]
DRAW_TIMEOUT_MS = 15_000


def build_site(results_dir: Path, out: Path, site_url: str) -> Path:
    """``mkdocs build --strict`` with ``results_dir`` as the results directory.

    ``site_url`` must be where the site is served: Material's instant navigation only
    intercepts links found in sitemap.xml, compared by host and port.
    """
    env = {**os.environ, "CONVEYOR_RESULTS_DIR": str(results_dir), "NO_MKDOCS_2_WARNING": "1",
           "CONVEYOR_SITE_URL": site_url}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, f"mkdocs build failed:\n{proc.stdout}\n{proc.stderr}"
    return out


class QuietHandler(SimpleHTTPRequestHandler):
    """Static file handler that does not log every request."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve ``directory`` (built later, by the caller) on a free loopback port; yield the URL."""
    directory.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Problems:
    """Console errors, page errors and failed requests seen by a page."""

    items: list[str] = field(default_factory=list)

    def watch(self, page: Any) -> None:
        """Record problems of ``page`` from now on."""
        page.on("console", lambda m: m.type == "error" and self.items.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.items.append(f"pageerror: {e}"))
        page.on("requestfailed",
                lambda r: self.items.append(f"request failed: {r.url} {r.failure}"))
        page.on("response",
                lambda r: r.status >= 400 and self.items.append(f"HTTP {r.status}: {r.url}"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium driven by Playwright (never a downloaded browser)."""
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("chromium not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


def synthetic_results(directory: Path) -> Path:
    """Write synthetic result files below ``directory`` (validated by the writer)."""
    write_results(make_run(), directory)
    write_results(make_dragonfly_run(), directory)
    return directory


@pytest.fixture(scope="module", params=["results", "synthetic"])
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[str, str]]:
    """(flavour, base URL) of a built and served site."""
    tmp = tmp_path_factory.mktemp(f"site-{request.param}")
    results = (REPO / "results" if request.param == "results"
               else synthetic_results(tmp / "results"))
    with serve(tmp / "site") as url:
        build_site(results, tmp / "site", url)
        yield request.param, url


def screenshot(page: Any, name: str) -> Path:
    """Save a full-page screenshot of a failure."""
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


CHARTS_STATE = """() => Array.from(document.querySelectorAll('.cv-chart')).map(d => ({
  id: d.id,
  drawn: d.getAttribute('data-cv-drawn') === '1',
  svg: d.querySelectorAll('svg.main-svg').length,
  traces: d.querySelectorAll('g.trace').length,
  points: (d._fullData || []).reduce((n, t) => n + ((t.y || []).length || 0), 0),
  font: d._fullLayout ? d._fullLayout.font.color : null,
}))"""

ALL_DRAWN = """() => Array.from(document.querySelectorAll('.cv-chart'))
  .every(d => d.getAttribute('data-cv-drawn') === '1')"""


def check_charts(page: Any, name: str) -> list[dict[str, Any]]:
    """Wait for every chart to draw; assert each has an SVG with traces and data points."""
    try:
        page.wait_for_function(ALL_DRAWN, timeout=DRAW_TIMEOUT_MS)
        charts = page.evaluate(CHARTS_STATE)
        for chart in charts:
            assert chart["svg"] > 0 and chart["traces"] > 0 and chart["points"] > 0, chart
    except Exception:
        screenshot(page, name)
        raise
    return charts


def open_page(browser: Any, url: str) -> tuple[Any, Problems]:
    """A new page that records problems, loaded at ``url``."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems = Problems()
    problems.watch(page)
    page.goto(url, wait_until="networkidle")
    return page, problems


def assert_clean(page: Any, problems: Problems, name: str) -> None:
    """No console error, page error or failed request."""
    if problems.items:
        screenshot(page, name)
    assert not problems.items, problems.items


def test_pages_list_covers_the_whole_site(site: tuple[str, str]) -> None:
    _, base = site
    with urllib.request.urlopen(base + "sitemap.xml", timeout=10) as reply:
        locs = re.findall(r"<loc>([^<]+)</loc>", reply.read().decode())
    assert sorted(loc.removeprefix(base) for loc in locs) == sorted(PAGES)


TRACES = """() => Array.from(document.querySelectorAll('.cv-chart')).map(d => ({
  id: d.id,
  names: (d.data || []).map(t => t.name),
  barmode: d._fullLayout ? d._fullLayout.barmode : null,
  bars: (d.data || []).filter(t => t.type === 'bar').length,
  repeated: (d.data || []).filter(t => new Set((t.x || []).map(String)).size !== (t.x || []).length)
    .map(t => t.name),
}))"""

OVERFLOW = """() => Array.from(document.querySelectorAll(
    '.md-content table, .md-content pre > code, .md-typeset__scrollwrap'))
  .filter(el => el.offsetParent !== null)
  .filter(el => el.scrollWidth > el.clientWidth + 1
             || el.getBoundingClientRect().right > document.querySelector('.md-content')
                  .getBoundingClientRect().right + 1)
  .map(el => el.tagName + ': ' + el.textContent.trim().slice(0, 80))"""


def assert_traces_labelled_and_never_stacked(page: Any) -> None:
    """Every trace of every chart has a name of its own, one point per x, and bars side by side."""
    for chart in page.evaluate(TRACES):
        names = chart["names"]
        assert len(set(names)) == len(names) and all(names), chart
        assert not chart["repeated"], chart  # two measurements drawn at one x of one trace
        if chart["bars"] > 1:
            # grouped bars side by side: stacking would add unrelated measurements
            assert chart["barmode"] == "group", chart


def assert_nothing_overflows(page: Any, name: str) -> None:
    """No table or code block wider than the content column at 1280 px, every <details> open."""
    page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
    overflowing = page.evaluate(OVERFLOW)
    if overflowing:
        screenshot(page, f"{name}-overflow")
    assert not overflowing, overflowing


# One load per page for the three checks: loading a page (plotly's script above all) is most of
# this session's time, and CI must stay under 30 minutes. The overflow check opens every
# <details>, so it comes last.
@pytest.mark.parametrize("path", PAGES)
def test_page_draws_labelled_charts_cleanly_and_fits_1280px(browser: Any, site: tuple[str, str],
                                                            path: str) -> None:
    flavour, base = site
    name = f"{flavour}-{path.strip('/') or 'home'}"
    page, problems = open_page(browser, base + path)
    charts = check_charts(page, name)
    if flavour == "synthetic" and path in ("performance/", "peers/", "servers/", "tuning/"):
        assert charts, f"{name}: expected charts from the synthetic results"
    assert_clean(page, problems, name)
    assert_traces_labelled_and_never_stacked(page)
    assert_nothing_overflows(page, name)
    page.close()


def click_nav(page: Any, title: str, url: str) -> None:
    """Follow the navigation link called ``title`` (Material's instant navigation)."""
    page.locator(".md-nav--primary a.md-nav__link", has_text=title).first.click()
    page.wait_for_url(url)
    page.wait_for_load_state("networkidle")


def test_charts_draw_after_instant_navigation(browser: Any, site: tuple[str, str]) -> None:
    flavour, base = site
    page, problems = open_page(browser, base)  # Home: no chart, so plotly.js is not fetched yet
    assert not page.query_selector(".cv-chart"), "Home draws a chart: start this test elsewhere"
    assert page.evaluate("() => typeof Plotly") == "undefined", "plotly.js loaded by a page without charts"
    page.evaluate("() => { window.__cvNoReload = true; }")
    for title, path in (("Performance", "performance/"), ("Servers", "servers/"),
                        ("Tuning", "tuning/"), ("Home", ""), ("Performance", "performance/")):
        click_nav(page, title, base + path)
        check_charts(page, f"{flavour}-instant-{title.lower()}")
    still_same_document = page.evaluate("() => window.__cvNoReload === true")
    assert still_same_document, "navigation reloaded the page: instant navigation is off"
    assert_clean(page, problems, f"{flavour}-instant")
    page.close()


def test_palette_switch_rethemes_charts(browser: Any, site: tuple[str, str]) -> None:
    flavour, base = site
    page, problems = open_page(browser, base + "performance/")
    before = check_charts(page, f"{flavour}-palette-before")
    scheme = page.evaluate("() => document.body.getAttribute('data-md-color-scheme')")
    page.locator("form[data-md-component=palette] label:visible").first.click()
    page.wait_for_function(
        f"() => document.body.getAttribute('data-md-color-scheme') !== {scheme!r}")
    if before:
        page.wait_for_function(
            "(old) => document.querySelector('.cv-chart')._fullLayout.font.color !== old",
            arg=before[0]["font"], timeout=DRAW_TIMEOUT_MS)
    assert_clean(page, problems, f"{flavour}-palette")
    page.close()


def test_calculator_works_offline(browser: Any, site: tuple[str, str]) -> None:
    flavour, base = site
    page, problems = open_page(browser, base + "connections/")
    calc = page.locator(".cv-calc")
    page.wait_for_function("() => document.querySelector('.cv-calc[data-cv-drawn=\"1\"]')")
    if calc.locator("input[name=per_worker_input]").count():
        calc.locator("input[name=per_worker_input]").fill("3")
    calc.locator("input[name=bytes_per_connection]").fill("20000")
    calc.locator("input[name=workers]").fill("10")
    total = int(calc.locator("[data-out=total]").inner_text())
    per_worker = int(calc.locator("[data-out=per_worker]").inner_text())
    assert per_worker > 0 and total >= 10 * per_worker
    if calc.locator("input[name=queues]").count():  # measured over several queues
        calc.locator("input[name=queues]").fill("3")
        assert int(calc.locator("[data-out=per_worker]").inner_text()) > per_worker
    assert int(calc.locator("[data-out=maxclients]").inner_text()) > total
    assert calc.locator("[data-out=memory]").inner_text().endswith("B")
    assert_clean(page, problems, f"{flavour}-calculator")
    page.close()
