"""Without Chromium the browser tests skip with the reason, except under CI=true, where they fail
(tests/browsers.py; docs/web.md, "Browser tests")."""

from pathlib import Path

import pytest

from tests.browsers import missing_browser, require_browser

NOWHERE = Path("/nonexistent/chromium")


def test_a_missing_chromium_skips_outside_ci_with_the_reason():
    with pytest.raises(pytest.skip.Exception, match=r"browser tests skipped: /nonexistent/chromium is missing"):
        require_browser(ci=False, chromium=NOWHERE)


def test_a_missing_chromium_fails_under_ci():
    with pytest.raises(pytest.fail.Exception, match=r"need Chromium and Playwright under CI=true: /nonexistent"):
        require_browser(ci=True, chromium=NOWHERE)


def test_a_present_chromium_and_playwright_need_nothing(tmp_path):
    chromium = tmp_path / "chromium"
    chromium.write_text("")
    assert missing_browser(chromium) == ""
    require_browser(ci=True, chromium=chromium)
