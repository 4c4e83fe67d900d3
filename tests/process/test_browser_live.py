"""Pages that follow the work, in a real browser (docs/web.md, "Pages that refresh themselves"):
Debian's headless Chromium, driven by Playwright, against a live ``runserve`` with no run worker
of its own, so that a run stays queued until the test starts ``worker --once``.

A run's page opened while the run is queued turns to ``succeeded`` without a reload; the inbox
list shows a new proposal without a reload, and once a row is ticked it keeps the tick and says
what arrived instead, as it does while a search is being typed; the tab's title carries the pending count as it changes. Screenshots at
1400 and 390 px are written under ``ARTIFACTS_DIR``.
"""

import json

import pytest

from tests.browsers import NARROW, Shots, fits, signed_in
from tests.processes import wait_for

from .conftest import serving_example_factory

pytestmark = pytest.mark.process

#: The reaper every two seconds and nothing else; each ``schedule tick`` proposes once more.
OVERLAY = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n    every: 2s\n"
OPERATOR = ("operator", "operator-pass-123")
INBOX = "/admin/runtime/proposal/?status__exact=pending"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The runtime: the reaper overlay, a copy of the example factory root, no run worker."""
    with serving_example_factory(tmp_path_factory.mktemp("browser-live"), OVERLAY, run_workers=0) as (
        url, manage
    ):
        yield url, manage


def pending(manage) -> list[dict]:
    return json.loads(manage("proposals", "--status", "pending", "--json"))


def proposed(manage, before: int) -> list[dict]:
    """``schedule tick`` every second until more than ``before`` proposals are pending."""
    def more():
        manage("schedule", "tick")
        found = pending(manage)
        return found if len(found) > before else None
    return wait_for(more, timeout=20, what="a new pending reaper proposal", interval=1)


def test_a_run_page_opened_while_queued_follows_the_run_to_succeeded(browser, live):
    base, manage = live
    shot = Shots("live-run")
    newest = max(p["id"] for p in proposed(manage, 0))
    manage("approve", str(newest), "--as", OPERATOR[0], "--note", "follow it")
    run = next(r for r in json.loads(manage("runs", "--json")) if r["status"] == "queued")
    url = f"{base}/admin/runtime/run/{run['id']}/change/"

    page = signed_in(browser, base, OPERATOR)
    page.goto(url)
    assert page.inner_text("#run-state") == "queued"
    assert page.get_attribute("#run-live", "hx-trigger") == "every 3s"
    assert "Nothing captured yet." in page.inner_text("#run-live")
    assert fits(page)
    shot(page, "queued-1400")
    narrow = signed_in(browser, base, OPERATOR, NARROW)
    narrow.goto(url)
    assert fits(narrow)
    shot(narrow, "queued-390")

    page.evaluate("window.notReloaded = true")
    manage("worker", "--once", timeout=90)
    page.locator("#run-state", has_text="succeeded").wait_for()
    assert page.evaluate("window.notReloaded") is True
    assert page.get_attribute("#run-live", "hx-trigger") is None
    assert page.inner_text("#run-outcome") == "NOTHING_TO_REAP"
    assert "The run ended while this page was open." in page.inner_text("#run-live")
    assert "—" not in page.inner_text("#run-times tr:has-text('finished')")
    assert page.inner_text("#run-subtitle") == page.inner_text("#run-crumb") == f"run {run['id']} (reaper@1, succeeded)"
    assert page.locator("#run-attempts td", has_text="succeeded").count() == 1
    assert fits(page)
    shot(page, "succeeded-1400")
    narrow.locator("#run-state", has_text="succeeded").wait_for()
    assert fits(narrow)
    shot(narrow, "succeeded-390")
    page.click("#run-reload")
    assert "The run has ended: this page no longer changes." in page.inner_text("#run-live")
    assert "run_succeeded" in page.inner_text("table.journal")
    page.context.close()
    narrow.context.close()


def test_the_inbox_shows_a_new_proposal_without_a_reload_and_keeps_a_ticked_row(browser, live):
    base, manage = live
    shot = Shots("live-inbox")
    waiting = len(proposed(manage, 0))
    page = signed_in(browser, base, OPERATOR)
    page.goto(base + INBOX)
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == waiting and page.title().startswith(f"({waiting}) ")
    page.evaluate("window.notReloaded = true")

    newest = max(p["id"] for p in proposed(manage, waiting))
    page.locator(f"#result_list a[href^='/admin/runtime/proposal/{newest}/change/']").wait_for()
    assert rows.count() == waiting + 1 and page.evaluate("window.notReloaded") is True
    wait_for(lambda: page.title().startswith(f"({waiting + 1}) "), timeout=15, what="the title's new count")
    assert fits(page)
    shot(page, "refreshed-1400")

    page.locator("#result_list tbody tr input.action-select").first.check()
    assert page.inner_text(".action-counter") == f"1 of {waiting + 1} selected"
    proposed(manage, waiting + 1)
    news = page.locator("#inbox-news")
    news.wait_for()
    assert "1 new proposal since this list was shown" in news.inner_text()
    assert "rows you ticked are unticked and a search you have not sent is dropped" in news.inner_text()
    assert rows.count() == waiting + 1 and page.locator("input.action-select:checked").count() == 1
    wait_for(lambda: page.title().startswith(f"({waiting + 2}) "), timeout=15, what="the title's count while ticked")
    assert page.evaluate("window.notReloaded") is True
    shot(page, "ticked-news-1400")
    page.click("#inbox-show")
    page.locator("#result_list tbody tr").nth(waiting + 1).wait_for()
    assert page.locator("input.action-select:checked").count() == 0

    # A search being typed (not sent) is left alone too, at a phone's width.
    narrow = signed_in(browser, base, OPERATOR, NARROW)
    narrow.goto(base + INBOX)
    narrow.fill("#searchbar", "reap")
    proposed(manage, waiting + 2)
    narrow.locator("#inbox-news").wait_for()
    assert narrow.input_value("#searchbar") == "reap" and narrow.url == base + INBOX
    shot(narrow, "typing-news-390")
    page.context.close()
    narrow.context.close()
