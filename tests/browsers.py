"""The browser tests' Chromium (docs/web.md, "Browser tests"): Debian's, never a downloaded one,
and what happens when it is missing — a skip with the reason, or under ``CI=true`` a failure; and
what the browser tests share: signing in, screenshots, whether a page fits its window."""

import importlib.util
from pathlib import Path

import pytest

from .conftest import PROJECT_DIR

#: Debian's Chromium (bin/setup --dev installs it where it is missing and it may).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-gpu", "--disable-component-update"]
#: Where the browser tests write a screenshot of each page they visit (ignored by git, under var/).
ARTIFACTS_DIR = PROJECT_DIR / "var" / "test-artifacts" / "browser"


def missing_browser(chromium: Path = CHROMIUM) -> str:
    """Why the browser tests cannot run here ("" when they can): no Chromium, or no Playwright."""
    if not chromium.exists():
        return f"{chromium} is missing (bin/setup --dev installs Debian's chromium as root or with sudo)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (bin/setup --dev installs requirements-dev.txt)"
    return ""


def require_browser(*, ci: bool, chromium: Path = CHROMIUM) -> None:
    """Skip the calling test when the browser is missing, or fail it under CI, which must run them."""
    missing = missing_browser(chromium)
    if missing and ci:
        pytest.fail(f"the browser tests need Chromium and Playwright under CI=true: {missing}")
    if missing:
        pytest.skip(f"browser tests skipped: {missing}")


#: Every wait of a page or a locator, in milliseconds.
WAIT_MS = 15_000
#: The widths the pages are looked at: a desk's window and a phone's.
WIDE, NARROW = 1400, 390


class Shots:
    """Numbered full-page screenshots of one test under ``ARTIFACTS_DIR``: ``<name>-NN-<what>.png``."""

    def __init__(self, name: str):
        self.name, self.count = name, 0
        ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)

    def __call__(self, page, what: str) -> None:
        self.count += 1
        page.screenshot(path=str(ARTIFACTS_DIR / f"{self.name}-{self.count:02d}-{what}.png"), full_page=True)


def signed_in(browser, base: str, who: tuple[str, str], width: int = WIDE):
    """A new page of a ``width`` px wide context, signed in from ``/`` as ``who``, on the dashboard."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    page.goto(base + "/")
    assert page.url == base + "/admin/login/?next=/dashboard/"
    page.fill("#id_username", who[0])
    page.fill("#id_password", who[1])
    page.click("input[type=submit]")
    page.wait_for_url(base + "/dashboard/")
    return page


def fits(page) -> bool:
    """Nothing on the page is wider than the window, read once the page has loaded: right after
    a click on a link the old document may be gone and the new one not there yet."""
    page.wait_for_load_state("load")
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
