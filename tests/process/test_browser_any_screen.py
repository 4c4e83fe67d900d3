"""The pages on any screen (docs/web.md, "Any screen"): at 390 × 844 (a phone) and 1400 × 900 (a
desk; at 1280 px too) the dashboard, the pending proposals, a proposal, its confirmation, a run, a loop's page and
the runs, events and journal lists read without
sideways scrolling (no element wider than the window) and carry the navigation; on a phone a
person finds the pending proposal from the navigation, reads it and approves it. Debian's
headless Chromium against a live ``runserve``; screenshots under ``ARTIFACTS_DIR``."""

import json

import pytest

from tests.browsers import NARROW, WIDE, Shots, fits, signed_in
from tests.processes import wait_for

from .conftest import serving_example_factory

pytestmark = pytest.mark.process

OVERLAY = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
OPERATOR = ("operator", "operator-pass-123")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with serving_example_factory(tmp_path_factory.mktemp("browser-screens"), OVERLAY, run_workers=1) as (
        url, manage
    ):
        manage("schedule", "tick")
        yield url, manage


def columns_shown(page) -> bool:
    """No list's columns are cut off inside its own scrolling box (``#changelist .results``)."""
    return page.evaluate("[...document.querySelectorAll('#changelist .results')].every(e => e.scrollWidth <= e.clientWidth)")


def column_widths(page) -> list[str]:
    """The list's box and each column heading, ``class scrollWidth/clientWidth``: what a failure shows."""
    return page.evaluate("[...document.querySelectorAll('#changelist .results, #result_list th')]"
                         ".map(e => e.className + ' ' + e.scrollWidth + '/' + e.clientWidth)")


def pending(manage) -> list[dict]:
    return json.loads(manage("proposals", "--status", "pending", "--json"))


@pytest.mark.parametrize("width", [WIDE, 1280, NARROW])
def test_the_five_pages_fit_and_carry_the_navigation(browser, live, width):
    base, manage = live
    shot = Shots(f"screens-{width}")
    proposal = wait_for(lambda: pending(manage), timeout=20, what="a pending reaper proposal")[0]["id"]
    runs = json.loads(manage("runs", "--json"))
    page = signed_in(browser, base, OPERATOR, width)
    paths = {
        "dashboard": "/dashboard/", "pending": "/admin/runtime/proposal/?status__exact=pending",
        "proposal": f"/admin/runtime/proposal/{proposal}/change/",
        "confirmation": f"/admin/runtime/proposal/{proposal}/decide/approve/",
        "loop": "/loops/reaper/", "runs": "/admin/runtime/run/", "events": "/admin/runtime/event/",
        "journal": "/admin/runtime/journalentry/",
    }
    if runs:
        paths["run"] = f"/admin/runtime/run/{runs[0]['id']}/change/"
    for name, path in paths.items():
        page.goto(base + path)
        assert fits(page), name
        assert columns_shown(page), (name, column_widths(page))
        assert page.locator("#ops-nav a").all_inner_texts()[:2] == ["Loops", f"Pending {len(pending(manage))}"], name
        shot(page, name)
    page.context.close()


def test_on_a_phone_a_person_finds_reads_and_approves_the_pending_proposal(browser, live):
    base, manage = live
    shot = Shots("phone-approval")
    proposal = wait_for(lambda: pending(manage), timeout=20, what="a pending reaper proposal")[0]["id"]
    page = signed_in(browser, base, OPERATOR, NARROW)
    page.click("#ops-nav a:has-text('Pending')")
    page.click(f"#result_list a[href^='/admin/runtime/proposal/{proposal}/change/']")
    assert "What it does" in page.inner_text("#content")
    assert fits(page)
    shot(page, "proposal")
    page.click("a.decide-approve")
    page.wait_for_url(f"**/proposal/{proposal}/decide/approve/")
    box = page.locator("input[value='Yes, approve and run']").bounding_box()
    assert box["height"] >= 44 and box["x"] + box["width"] <= NARROW
    page.click("input[value='Yes, approve and run']")
    page.wait_for_url("**/admin/runtime/run/*/change/")
    assert fits(page)
    shot(page, "run")
    page.context.close()


def test_times_read_in_the_zone_a_person_chose_with_the_utc_instant_kept(browser, live):
    base, manage = live
    shot = Shots("reader-zone")
    page = signed_in(browser, base, OPERATOR)
    page.click("#user-tools a.ops-person")
    page.wait_for_url(base + "/me/")
    page.select_option("#id_zone", "Australia/Lord_Howe")
    page.click("#zone-form input[type=submit]")
    page.wait_for_url(base + "/me/")
    assert "Times now read in Australia/Lord_Howe." in page.inner_text(".messagelist")
    page.goto(base + "/admin/runtime/event/")
    first = page.locator("#result_list time").first
    utc = first.get_attribute("datetime")
    assert utc.endswith("Z") and len(utc) == 20
    assert first.inner_text().endswith(("GMT+11", "GMT+10:30"))
    assert first.get_attribute("title").startswith(f"{utc[:10]} {utc[11:19]} UTC · ")
    assert page.locator("#result_list .time-relative").first.inner_text().endswith("ago)")
    shot(page, "events")
    page.goto(base + "/me/")
    page.select_option("#id_zone", "")
    page.click("#zone-form input[type=submit]")
    page.context.close()


def test_a_viewer_reads_why_there_is_no_button_and_a_forged_decision_is_a_styled_403(browser, live):
    base, manage = live
    shot = Shots("viewer")
    manage("team", "add", "victor", "--role", "viewer")
    manage("shell", "-c", "from django.contrib.auth.models import User; u = User.objects.get(username='victor'); "
                          "u.set_password('victor-pass-123'); u.save()")
    proposal = json.loads(manage("schedule", "trigger", "reaper", "--as", OPERATOR[0], "--json"))["proposal"]
    page = signed_in(browser, base, ("victor", "victor-pass-123"), NARROW)
    page.goto(f"{base}/admin/runtime/proposal/{proposal}/change/")
    assert page.locator("a.decide-approve").count() == 0
    assert "You may read this proposal but not decide it" in page.inner_text("#decide-help")
    assert fits(page)
    shot(page, "proposal-390")
    answer = page.goto(f"{base}/admin/runtime/proposal/{proposal}/decide/approve/")
    assert answer.status == 403
    assert page.inner_text("h1") == "Not allowed (403)"
    assert page.locator("#ops-nav").count() == 1 and fits(page)
    shot(page, "refused-390")
    page.context.close()


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_a_note_without_spaces_wraps_instead_of_widening_the_pages(browser, live, width):
    base, manage = live
    shot = Shots(f"long-note-{width}")
    note = "x" * 2000
    manage("schedule", "pause", "reaper", "--note", note, "--as", OPERATOR[0])
    try:
        page = signed_in(browser, base, OPERATOR, width)
        for name, path in {"loop": "/loops/reaper/", "dashboard": "/dashboard/", "journal": "/admin/runtime/journalentry/"}.items():
            page.goto(base + path)
            assert fits(page), (name, page.evaluate("document.documentElement.scrollWidth"))
            assert columns_shown(page), (name, column_widths(page))
            shot(page, name)
        page.context.close()
    finally:
        manage("schedule", "resume", "reaper", "--as", OPERATOR[0])
