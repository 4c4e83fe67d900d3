"""The browser tests' Chromium (docs/web.md, "Browser tests"): Debian's, never a downloaded one,
and what happens when it is missing — a skip with the reason, or under ``CI=true`` a failure."""

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
