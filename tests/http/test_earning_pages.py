"""The earning report on the operator's pages (docs/web.md): a loop's page shows the verdict and
each criterion's evidence, and refreshes its status, report and timeline through its live part;
the dashboard marks the loops that earned auto."""

import pytest
import time_machine

from tests.earning_history import NOW, kernel_loops, rejected, runs, watched

pytestmark = pytest.mark.django_db


@pytest.fixture
def earned_scan(registry_files, approver, host_clock_as_database_clock):
    """``scan`` earned auto (10 runs a person approved), ``reaper`` not (one rejection); the views' clock at ``NOW``."""
    kernel_loops(registry_files)
    for loop in ("scan", "reaper"):
        watched(loop)
        runs(loop, 10, approver)
    rejected("reaper", approver)
    with time_machine.travel(NOW, tick=False):
        yield registry_files


def test_a_loop_page_shows_the_verdict_its_evidence_and_the_diff_only_when_earned(client, viewer, earned_scan):
    client.force_login(viewer)
    scan, reaper = client.get("/loops/scan/"), client.get("/loops/reaper/")
    assert (scan.context["report"]["verdict"], reaper.context["report"]["verdict"]) == ("earned", "not-earned")
    body = scan.content.decode()
    assert '<span class="badge verdict-earned">earned</span> auto earned: every criterion is met' in body
    assert '<tr class="" data-criterion="succeededRuns">' in body and '<pre class="ops-diff" id="flip-diff">' in body
    other = reaper.content.decode()
    assert 'id="flip-diff"' not in other
    assert '<tr class="problem" data-criterion="rejectedProposals">' in other
    assert "1 proposal(s) rejected by a person" in other and "succeededRuns" in other


def test_a_loop_page_polls_its_live_part_with_the_same_window_and_page(client, viewer, earned_scan):
    client.force_login(viewer)
    page = client.get("/loops/scan/?since=30d&before=99").content.decode()
    assert 'hx-get="/loops/scan/live/?since=30d&amp;before=99" hx-trigger="every 5s"' in page
    assert "htmx-2.0.11.min.js" in page
    live = client.get("/loops/scan/live/?since=1d")
    assert live.status_code == 200 and live["Cache-Control"].startswith("max-age=0")
    body = live.content.decode()
    assert '<div id="loop-live" hx-get="/loops/scan/live/?since=1d" hx-trigger="every 5s" hx-swap="outerHTML">' in body
    assert "<html" not in body and 'id="window-form" hx-preserve="true"' in body
    assert (live.context["report"]["verdict"], live.context["since"]) == ("not-earned", "1d")
    assert client.get("/loops/nope/live/").status_code == 404


def test_the_live_part_refuses_an_ended_session_rather_than_redirecting(client, outsider, viewer, earned_scan):
    response = client.get("/loops/scan/live/")
    assert (response.status_code, response.content) == (403, b"sign in again at /admin/login/: the session has ended")
    client.force_login(outsider)
    assert client.get("/loops/scan/live/").status_code == 403
    client.force_login(viewer)
    assert client.post("/loops/scan/live/").status_code == 405


def test_the_dashboard_marks_the_loops_that_earned_auto(client, viewer, earned_scan):
    client.force_login(viewer)
    for path in ("/dashboard/", "/dashboard/table/"):
        response = client.get(path)
        earned = {row["name"]: row["earned"] for row in response.context["rows"]}
        assert earned == {"heartbeat": False, "reaper": False, "scan": True, "customer-digest": False}
        body = response.content.decode()
        assert body.count(">earned auto</a>") == 1
        assert '<a class="badge badge-earned-auto" href="/loops/scan/#earning"' in body
