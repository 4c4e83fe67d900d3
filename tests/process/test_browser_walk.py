"""The operator's walk in a real browser (docs/web.md): Debian's headless Chromium, driven by
Playwright, against a live ``runserve`` with one run worker on loopback.

Sign in from ``/``; the dashboard flags the stopped reaper and refreshes itself to show a new
proposal; the reaper's page has its earning report; a pending proposal is approved from its
page through the confirmation with a note; its run succeeds, with times to the second and the
journal naming the operator. A staff user without the permission sees no decision and a forged
POST is refused. Each page's screenshot is written under ``ARTIFACTS_DIR``.
"""

import json
import re
import subprocess

import pytest

from tests.browsers import Shots, fits, signed_in
from tests.processes import wait_for

from .conftest import serving_example_factory

pytestmark = pytest.mark.process

#: The reaper every two seconds and nothing else: with no slot loop turning (``--no-loop``) it is
#: stopped four seconds after a tick, and each ``schedule tick`` the test runs proposes once more.
OVERLAY = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n    every: 2s\n"
OPERATOR = ("operator", "operator-pass-123")
VIEWER = ("victor", "victor-pass-123")
SECONDS_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC")


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    """The runtime the module walks: the reaper overlay, a copy of the example factory root, one
    run worker, a staff user ``victor`` without the approve permission, one reaper tick proposed."""
    with serving_example_factory(tmp_path_factory.mktemp("browser"), OVERLAY, run_workers=1) as (
        url, manage
    ):
        manage("shell", "-c", "from django.contrib.auth.models import User; "
               f"User.objects.create_user({VIEWER[0]!r}, password={VIEWER[1]!r}, is_staff=True)")
        manage("schedule", "tick")
        yield url, manage


def doctor(manage) -> dict:
    """The doctor's document (it exits 1 while anomalies stand, which is what the walk awaits)."""
    try:
        return json.loads(manage("doctor"))
    except subprocess.CalledProcessError as exc:
        return json.loads(exc.stdout)


def pending(manage) -> list[dict]:
    return json.loads(manage("proposals", "--status", "pending", "--json"))


def tick_until_proposed(manage, before: int) -> list[dict]:
    """``schedule tick`` every second until there are more than ``before`` pending proposals (a
    singleton reaper NOOPs while its run is in flight; a 2 s slot may not have come yet)."""
    def proposed():
        manage("schedule", "tick")
        found = pending(manage)
        return found if len(found) > before else None
    return wait_for(proposed, timeout=20, what="a new pending reaper proposal", interval=1)


def test_an_operator_signs_in_reads_the_loops_and_approves_where_they_read(browser, walk):
    base, manage = walk
    shot = Shots("operator")
    wait_for(lambda: "reaper" in [s["loop"] for s in doctor(manage)["stoppedSchedules"]],
             timeout=20, what="the reaper to be stopped")
    page = signed_in(browser, base, OPERATOR)
    reaper = page.locator("tr[data-loop=reaper]")
    assert reaper.locator(".badge").all_inner_texts() == ["stopped"]
    assert page.locator("#loops tbody tr").first.get_attribute("data-loop") == "reaper"
    assert "stoppedSchedules" in page.inner_text("#anomalies") and "slotLoopStale" in page.inner_text("#anomalies")
    assert page.inner_text("#pending-count") == "1 pending proposal" and page.title() == "(1) Loops | Factory runtime"
    assert fits(page)
    shot(page, "dashboard-stopped")

    page.evaluate("window.notReloaded = true")
    tick_until_proposed(manage, 1)
    page.locator("#pending-count", has_text="2 pending proposals").wait_for()
    assert page.title() == "(2) Loops | Factory runtime"
    assert page.evaluate("window.notReloaded") is True
    shot(page, "dashboard-refreshed")

    page.click("tr[data-loop=reaper] a")
    page.wait_for_url(base + "/loops/reaper/")
    # Two ticks and no run are no week of evidence: permitted, not earned, and no diff to flip it.
    assert page.inner_text("#verdict").startswith("not-earned auto not earned")
    assert page.inner_text("#auto-allowed").startswith("auto permitted: a kernel loop")
    assert page.locator("#evidence tr.problem[data-criterion=succeededRuns]").count() == 1
    assert page.locator("#flip-diff").count() == 0
    assert page.locator("#ticks tbody tr").count() == 2
    page.evaluate("window.notReloaded = true")
    tick_until_proposed(manage, 2)
    page.locator("#ticks tbody tr").nth(2).wait_for()
    assert page.evaluate("window.notReloaded") is True
    assert fits(page)
    shot(page, "loop-reaper")
    page.fill("#id_since", "soon")
    page.click("#earning ~ form input[type=submit]")
    assert "neither a span" in page.inner_text("#window-error")
    shot(page, "loop-reaper-bad-window")

    page.goto(base + "/dashboard/")
    page.click("#pending-count")
    newest = max(p["id"] for p in pending(manage))
    page.click(f"a[href='/admin/runtime/proposal/{newest}/change/?_changelist_filters=status__exact%3Dpending']")
    assert fits(page)
    shot(page, "proposal-pending")
    page.click("a.decide-approve")
    block = page.locator(f"#preview-{newest}[data-preview-status=done]")
    block.wait_for()  # the run worker's preview thread ran the dry run; the block refreshed itself
    confirmation = page.inner_text("#content")
    assert "What it does: Moves claim files whose heartbeat is older than the stale limit" in confirmation
    assert "NOTHING_TO_REAP: 0 live claim(s), none stale" in block.inner_text()
    assert re.search(r"Previewed \d+ s ago \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)", block.inner_text())
    assert confirmation.index("What it does") < confirmation.index("NOTHING_TO_REAP") < confirmation.index("reaper.py")
    assert "reaper.py" in confirmation and "pending proposal(s)" in confirmation and "supersedes" in confirmation
    page.fill("#id_note", "claims checked by hand")
    assert fits(page)
    shot(page, "proposal-confirm")
    page.click("input[value='Yes, approve and run']")
    page.wait_for_url(re.compile(re.escape(base) + r"/admin/runtime/run/\d+/change/"))
    run_id = page.url.rstrip("/").split("/")[-2]
    assert page.inner_text(".messagelist") == f"1 proposal(s) approved: run {run_id} (proposal {newest}) queued."
    shot(page, "run-landed")

    # The run's page follows it to its end without a reload (docs/web.md, "Pages that refresh themselves").
    # Once it ended while the page was open, its result and journal are a reload away.
    page.locator("#run-state", has_text="succeeded").wait_for(timeout=30_000)
    if page.locator("#run-reload").count():
        page.click("#run-reload")
    body = page.inner_text("#content")
    assert "NOTHING_TO_REAP" in body and "approved by" in body.lower()
    assert len(SECONDS_INSTANT.findall(page.inner_text("fieldset:has-text('Times')"))) >= 4
    assert re.search(r"run_queued\s+operator \(operator\)", page.inner_text("table.journal"))
    assert fits(page)
    shot(page, "run-succeeded")
    page.context.close()


def test_a_viewer_sees_no_decision_and_a_forged_approval_is_refused(browser, walk):
    base, manage = walk
    shot = Shots("viewer")
    proposal = (pending(manage) or tick_until_proposed(manage, 0))[0]["id"]
    page = signed_in(browser, base, VIEWER)
    shot(page, "dashboard")
    page.goto(f"{base}/admin/runtime/proposal/{proposal}/change/")
    assert page.locator("a.decide-approve").count() == 0 and page.locator("a.decide-reject").count() == 0
    shot(page, "proposal-no-decision")
    decide = f"{base}/admin/runtime/proposal/{proposal}/decide/approve/"
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    forged = page.request.post(decide, form={"confirm": "yes", "csrfmiddlewaretoken": token},
                               headers={"Referer": page.url})
    assert forged.status == 403 and "CSRF" not in forged.text()
    assert page.request.get(decide).status == 403
    assert [p["status"] for p in json.loads(manage("proposals", "--json")) if p["id"] == proposal] == ["pending"]
    page.context.close()
