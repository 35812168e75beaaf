"""The HTML report in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium).

Skipped where Chromium is missing, except under CI=true, where scripts/test installs it and its absence
is a failure. The screenshot it takes is kept for a person to look at: its path is printed.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from tests.report.test_html import NASTY, load, small_sweep

CHROMIUM = ("chromium", "chromium-browser")
DRIVER = "chromedriver"


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package (pip install -e '.[test]')"
    if not any(shutil.which(name) for name in CHROMIUM) or not shutil.which(DRIVER):
        return "Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium that records the page's console."""
    missing = _missing()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but no {missing}: scripts/test installs them with apt-get when run as root")
        pytest.skip(f"no {missing}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = next(p for p in map(shutil.which, CHROMIUM) if p)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1600,1200",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path keeps Selenium Manager from trying to download one.
    driver = webdriver.Chrome(service=Service(shutil.which(DRIVER)), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The report of a fresh six-cell sweep, written by the CLI; returns (html file, db)."""
    root = tmp_path_factory.mktemp("browser")
    db = small_sweep(root)
    out = root / "report.html"
    result = CliRunner().invoke(app, ["report", "--html", str(out), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return out, db


def test_the_page_works_in_chromium(browser: Any, page: tuple[Path, Path], tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    html, db = page
    browser.get(html.as_uri())
    cells = browser.find_elements(By.CSS_SELECTOR, "table.grid button.cell")
    assert len(cells) == 6
    errors = [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]
    assert not errors, errors

    _, results = load(db)
    index = next(i for i, r in enumerate(results) if r.root_cause_line == NASTY)
    target = browser.find_element(By.CSS_SELECTOR, f'button.cell[data-cell="{index}"]')
    target.click()
    detail = browser.find_element(By.ID, "detail")
    assert NASTY in detail.find_element(By.CSS_SELECTOR, "pre.root").text
    # The click shows where to read more: the traceback (with its line in the log) and the log's location.
    assert "Traceback (most recent call last)" in detail.find_element(By.CSS_SELECTOR, "pre.traceback").text
    assert "server.log line" in detail.text.lower()  # headings are upper-cased by the style
    assert detail.find_element(By.CSS_SELECTOR, "pre.log").text.endswith("/server.log")
    assert "pinned" in (target.get_attribute("class") or "")
    # The log line's `<b>bold</b>` must have stayed text: no element anywhere holds just "bold".
    assert not browser.execute_script("return [...document.querySelectorAll('b')].some(b => b.textContent === 'bold')")
    assert not [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]

    # The pointer moves off the map (a legend entry under it would dim the other cells), then the window
    # grows to hold the whole page and the pinned cell's details.
    ActionChains(browser).move_to_element(browser.find_element(By.TAG_NAME, "h1")).perform()
    height = browser.execute_script(
        "const d = document.getElementById('detail');"
        "return Math.max(document.documentElement.scrollHeight, d.getBoundingClientRect().top + d.scrollHeight + 40)"
    )
    browser.set_window_size(1600, min(max(int(height) + 140, 800), 4000))
    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    kept = Path(tempfile.gettempdir()) / "orchestrator-report-screenshot.png"
    shutil.copyfile(shot, kept)
    print(f"screenshot: {shot} (copy: {kept})")


_OVERLAPS = """
const boxes = el => el.getBoundingClientRect();
const meets = (a, b) => a.width && b.width
  && a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
return [...document.querySelectorAll('button.cell')].filter(c => c.querySelector('.badge')).map(c => {
  const cell = boxes(c), badge = boxes(c.querySelector('.badge'));
  const texts = [...c.querySelectorAll('.main, .sub')].map(boxes);
  return {
    badge: c.querySelector('.badge').textContent,
    inside: badge.left >= cell.left && badge.right <= cell.right
      && badge.top >= cell.top && badge.bottom <= cell.bottom,
    covers: texts.some(t => meets(t, badge)),
  };
});
"""


def test_the_regressed_badge_covers_none_of_the_cells_text(
    browser: Any, page: tuple[Path, Path], tmp_path: Path
) -> None:
    from orchestrator.report.html import render_html
    from tests.report.test_html import _flipped

    _, db = page
    record, results = load(db)
    base = dataclasses.replace(record, sweep_id="s-20260101-000000-base")
    html = tmp_path / "compared.html"
    html.write_text(render_html(record, results, baseline=(base, _flipped(results))), encoding="utf-8")
    browser.set_window_size(1600, 1200)
    browser.get(html.as_uri())
    found = browser.execute_script(_OVERLAPS)
    assert sorted(b["badge"] for b in found) == ["▲ fixed", "▼ regressed"], found
    for badge in found:
        assert badge["inside"] and not badge["covers"], badge
    shot = tmp_path / "compared.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    kept = Path(tempfile.gettempdir()) / "orchestrator-report-compared-screenshot.png"
    shutil.copyfile(shot, kept)
    print(f"screenshot: {shot} (copy: {kept})")
