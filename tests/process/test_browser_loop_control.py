"""Taking a loop in hand from the browser alone (docs/web.md, "Pausing, resuming and running a
loop"): pause the reaper from its page with a note, see it paused on the dashboard, run it once
now and approve that run from the confirmation, resume it — every step in the journal with the
person's name. Debian's headless Chromium against a live ``runserve`` with one run worker;
screenshots at 1400 and 390 px under ``ARTIFACTS_DIR``."""

import json

import pytest

from tests.browsers import NARROW, Shots, fits, signed_in

from .conftest import serving_example_factory

pytestmark = pytest.mark.process

OVERLAY = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
OPERATOR = ("operator", "operator-pass-123")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with serving_example_factory(tmp_path_factory.mktemp("browser-control"), OVERLAY, run_workers=1) as (
        url, manage
    ):
        yield url, manage


def journal(manage, action: str) -> list[dict]:
    return [e for e in json.loads(manage("journal", "--json")) if e["action"] == action]


def test_pause_see_it_paused_run_once_approve_and_resume_from_the_browser(browser, live):
    base, manage = live
    shot = Shots("loop-control")
    page = signed_in(browser, base, OPERATOR)
    page.goto(base + "/loops/reaper/")
    assert fits(page)
    shot(page, "loop-1400")

    page.fill("#id_pause_note", "claims dir is being moved")
    page.select_option("#id_until", "3600")
    page.click("#pause-form input[type=submit]")
    page.wait_for_url(base + "/dashboard/pause/")
    assert "are still admitted and planned as any other door's event: watched" in page.inner_text("#pause-other-doors")
    assert page.inner_text("#pause-loops") == "reaper"
    assert fits(page)
    shot(page, "confirm-1400")
    page.click("text=Yes, pause 1 loop")
    page.wait_for_url(base + "/loops/reaper/")
    assert "Paused reaper for 1 hour" in page.inner_text(".messagelist")
    assert "paused by operator" in page.inner_text("#loop-paused")
    assert page.is_disabled("#trigger-form input[type=submit]")

    page.goto(base + "/dashboard/")
    row = page.locator("tr[data-loop='reaper']")
    assert row.locator(".badge-paused").inner_text() == "paused"
    assert "claims dir is being moved" in row.inner_text()
    narrow = signed_in(browser, base, OPERATOR, NARROW)
    assert narrow.locator("tr[data-loop='reaper'] .badge-paused").count() == 1
    shot(narrow, "dashboard-390")
    narrow.context.close()
    shot(page, "dashboard-1400")

    # Resume from the dashboard's selection, then run once now from the loop's page.
    row.locator("input[type=checkbox]").check()
    page.fill("#id_note", "moved")
    page.click("input[value='Resume selected']")
    page.wait_for_url(base + "/dashboard/")
    assert "Resumed reaper: the pause covered" in page.inner_text(".messagelist")
    assert page.locator("tr[data-loop='reaper'] .badge-paused").count() == 0

    page.goto(base + "/loops/reaper/")
    page.fill("#id_trigger_note", "after the move")
    page.click("#trigger-form input[type=submit]")
    page.wait_for_url("**/decide/approve/")
    assert "Yes, approve and run" in page.content()
    assert fits(page)
    shot(page, "trigger-confirm-1400")
    page.click("input[value='Yes, approve and run']")
    page.wait_for_url("**/admin/runtime/run/*/change/")
    page.locator("#run-state", has_text="succeeded").wait_for(timeout=60_000)
    shot(page, "run-1400")
    narrow = signed_in(browser, base, OPERATOR, NARROW)
    narrow.goto(page.url)
    assert fits(narrow)
    # The attempts' cells keep their words whole (one line each), the table scrolling in its own box.
    lines = narrow.evaluate("""() => [...document.querySelectorAll('table.run-attempts th, table.run-attempts td')]
        .map(cell => { const text = document.createRange(); text.selectNodeContents(cell);
                       return new Set([...text.getClientRects()].map(box => Math.round(box.bottom))).size; })""")
    assert lines == [1] * 14, lines
    shot(narrow, "run-390")
    narrow.context.close()

    [paused] = journal(manage, "loop_paused")
    [resumed] = journal(manage, "loop_resumed")
    [triggered] = journal(manage, "loop_triggered")
    assert (paused["actorName"], paused["data"]["note"], paused["data"]["via"]) == (
        "operator", "claims dir is being moved", "web")
    assert (resumed["actorName"], resumed["data"]["note"]) == ("operator", "moved")
    assert (triggered["actorName"], triggered["data"]["note"], triggered["data"]["via"]) == (
        "operator", "after the move", "web")
    approved = [e for e in journal(manage, "proposal_approved") if e["actorName"] == "operator"]
    assert len(approved) == 1
    page.context.close()
