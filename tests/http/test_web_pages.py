"""The operator's pages (docs/web.md): ``/`` sends people to the dashboard or the login, the
dashboard lists every loop problems first with the doctor's banner, a loop's page has its
timeline and its earning report, the admin index leads to both."""

import json
import re

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runtime.models import Door, Event, PlanningOutcome, Proposal
from runtime.registry import store
from runtime.services.approval import approve_proposal, reject_proposal
from runtime.services.runs import claim_next_run, fail_attempt, start_run
from schedules.models import LoopChange, LoopChangeKind, ScheduleState, SlotLoopStatus
from tests.conftest import KERNEL_DIR, at
from tests.helpers import DIGEST_ON, choose, finish_active_runs, many_loops, tick

pytestmark = pytest.mark.django_db

WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
NOW = "2026-11-30T23:30:00Z"


@pytest.fixture
def pinned(host_clock_as_database_clock):
    """The views' one clock at ``NOW``, the slot loop seen turning a second before."""
    SlotLoopStatus.objects.create(name="slot-loop", last_iteration_at=at(NOW), pid=1, host="test")
    with time_machine.travel(at(NOW), tick=False):
        yield


@pytest.fixture
def reaper_history(registry_files, approver):
    """The reaper watched: ticks at 21:00 (rejected), 22:00 (approved, ran 65 s) and 23:00:09 (9 s late, pending)."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:01Z")
    tick("2026-11-30T22:00:02Z")
    first, second = Proposal.objects.order_by("id")
    reject_proposal(first.pk, user=approver, now=at("2026-11-30T21:30:00Z"), note="not today")
    run = approve_proposal(second.pk, user=approver, now=at("2026-11-30T22:10:00Z"))
    finish_active_runs("REAPED")
    run.__class__.objects.filter(pk=run.pk).update(
        started_at=at("2026-11-30T22:10:05Z"), finished_at=at("2026-11-30T22:11:10Z")
    )
    tick("2026-11-30T23:00:09Z")
    return registry_files


def test_home_sends_staff_to_the_dashboard_and_anyone_else_to_the_login(client, viewer, outsider):
    login = reverse("admin:login") + "?next=/dashboard/"
    assert (client.get("/").status_code, client.get("/")["Location"]) == (302, login)
    client.force_login(outsider)
    assert client.get("/")["Location"] == login
    client.force_login(viewer)
    assert client.get("/")["Location"] == "/dashboard/"


@pytest.mark.parametrize("path", ["/dashboard/", "/loops/reaper/"])
def test_the_pages_need_a_staff_login(client, outsider, viewer, path):
    assert client.get(path)["Location"] == reverse("admin:login") + "?next=" + path
    client.force_login(outsider)
    assert client.get(path).status_code == 302
    client.force_login(viewer)
    assert client.post(path).status_code == 405


def test_the_polled_table_refuses_an_ended_session_rather_than_redirecting(client, outsider):
    response = client.get("/dashboard/table/")
    assert (response.status_code, response.content) == (403, b"sign in again at /admin/login/: the session has ended")
    client.force_login(outsider)
    assert client.get("/dashboard/table/").status_code == 403


def test_a_viewer_reads_the_dashboard_stopped_and_disabled_loops_flagged_problems_first(
    client, viewer, reaper_history, pinned
):
    client.force_login(viewer)
    response = client.get("/dashboard/")
    assert response.status_code == 200
    rows = [(row["name"], row["badges"]) for row in response.context["rows"]]
    # The reaper ticked at 23:00:09, nine seconds after its slot: late; every other loop is disabled.
    assert rows[0] == ("reaper", ["late"])
    assert {badges[0] for _, badges in rows[1:]} == {"disabled"}
    body = response.content.decode()
    assert "1 pending proposal" in body
    assert reverse("admin:runtime_proposal_changelist") + "?status__exact=pending" in body
    assert 'hx-get="/dashboard/table/"' in body and "htmx-2.0.11.min.js" in body
    # The newest tick waits in the inbox; the run an older tick's approval queued REAPED: both, the run first.
    run = Proposal.objects.get(status="approved").run
    assert response.context["rows"][0]["outcome"] == f"run {run.pk} REAPED · newest tick: planning PROPOSED"
    loop_page = client.get("/loops/reaper/").content.decode()
    assert f"<tr><th>last outcome</th><td>run {run.pk} REAPED · newest tick: planning PROPOSED</td></tr>" in loop_page


def test_a_stopped_loop_is_bannered_and_listed_first(client, viewer, reaper_history, host_clock_as_database_clock):
    SlotLoopStatus.objects.create(name="slot-loop", last_iteration_at=at("2026-12-01T02:00:00Z"), pid=1, host="t")
    client.force_login(viewer)
    with time_machine.travel(at("2026-12-01T02:00:01Z"), tick=False):
        response = client.get("/dashboard/table/")
    assert response.context["rows"][0]["name"] == "reaper"
    assert response.context["rows"][0]["badges"] == ["stopped"]
    assert [line["name"] for line in response.context["banner"]] == ["stoppedSchedules"]
    body = response.content.decode()
    assert "<html" not in body and 'id="anomalies"' in body
    # Its instants are the pages' <time> (the reader's zone), as everywhere else on them.
    assert ('reaper (no tick since <time datetime="2026-11-30T23:00:09Z" title="2026-11-30 23:00:09 UTC" '
            'data-relative="off">2026-11-30 23:00:09 UTC</time>, expected by <time datetime="2026-12-01T01:00:09Z" '
            'title="2026-12-01 01:00:09 UTC" data-relative="off">2026-12-01 01:00:09 UTC</time>)') in body


def test_the_dashboard_pages_its_loops(client, viewer, registry_files, pinned):
    many_loops(registry_files, 120)
    client.force_login(viewer)
    first = client.get("/dashboard/").context
    third = client.get("/dashboard/?page=3").context
    assert (len(first["rows"]), len(third["rows"]), first["loop_count"]) == (50, 20, 120)
    assert third["rows"][-1]["name"] == "loop-0119"
    stopped = next(line for line in first["banner"] if line["name"] == "stoppedSchedules")
    assert (len(stopped["items"]), stopped["more"]) == (10, 110)
    assert "; and 110 more" in client.get("/dashboard/").content.decode()
    assert client.get("/dashboard/?page=oops").context["page"].number == 1


def _seed_loops(registry_files, count: int) -> None:
    """``count`` reaper copies (``loop-00000``…), each with one tick at 21:00 (stopped by 23:30), planned PROPOSED with a
    pending proposal, and its schedule state: rows written in bulk, as the slot loop would leave them."""
    reaper = {**json.loads((KERNEL_DIR / "schedules.json").read_text())["reaper"], "enabled": True}
    names = [f"loop-{i:05d}" for i in range(count)]
    registry_files.write("schedules.json", {name: reaper for name in names})
    slot = at("2026-11-30T21:00:00Z")
    digest = store.current().digest
    new = names[ScheduleState.objects.count():]  # a second call extends the first one's loops
    events = Event.objects.bulk_create([
        Event(uid=f"clock:{name}:2026-11-30T21:00:00Z", type="clock.tick.reaper", source="schedule", subject=name,
              occurred_at=slot, correlation_id=f"clock:{name}:2026-11-30T21:00:00Z", door=Door.SCHEDULE,
              admitted_at=slot, payload={"loop": name, "skippedSlots": 0}, loop=name, slot=slot, planned_at=slot,
              planning_outcome=PlanningOutcome.PROPOSED)
        for name in new
    ])
    Proposal.objects.bulk_create([
        Proposal(event=event, idempotency_key=event.uid, loop=event.loop, singleton_key=event.loop,
                 definition="reaper@1", plan={}, registry_digest=digest, created_at=slot)
        for event in Event.objects.filter(uid__in=[e.uid for e in events])
    ])
    ScheduleState.objects.bulk_create([
        ScheduleState(loop=name, last_slot=slot, last_event_id=f"clock:{name}:2026-11-30T21:00:00Z",
                      last_tick_at=slot, enabled=True, enabled_since=slot)
        for name in new
    ])


def _dashboard_queries(client, registry_files, count: int) -> int:
    _seed_loops(registry_files, count)
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/dashboard/")
    assert response.status_code == 200
    assert (len(response.context["rows"]), response.context["rows"][0]["badges"]) == (50, ["stopped"])
    return len(queries)


def test_the_dashboard_costs_the_same_queries_for_100_and_10000_loops(client, viewer, registry_files, pinned):
    client.force_login(viewer)
    client.get("/me/")  # the session's first page reads the person's zone once (ops.web.zones)
    small = _dashboard_queries(client, registry_files, 100)
    large = _dashboard_queries(client, registry_files, 10_000)  # the same 100 loops and 9,900 more
    assert (small, Proposal.objects.count()) == (large, 10_000)


def test_the_admin_index_leads_to_the_dashboard_and_lists_the_runtime_first(admin_client, reaper_history):
    body = admin_client.get(reverse("admin:index")).content.decode()
    assert 'href="/dashboard/"' in body and "1 pending proposal" in body
    apps = re.findall(r'<caption>\s*<a href="/admin/(\w+)/"', body)
    assert apps[0] == "runtime" and apps.index("runtime") < apps.index("auth")


def test_a_loop_page_has_its_timeline_and_earning_report(client, viewer, reaper_history, pinned):
    client.force_login(viewer)
    response = client.get("/loops/reaper/")
    assert response.status_code == 200
    ticks = response.context["ticks"]
    assert [t["event"]["uid"] for t in ticks] == [
        "clock:reaper:2026-11-30T23:00:00Z", "clock:reaper:2026-11-30T22:00:00Z", "clock:reaper:2026-11-30T21:00:00Z",
    ]
    assert [t["event"]["lateSeconds"] for t in ticks] == [9, None, None]
    assert [(t["proposal"].status, t["proposal"].decided_by and t["proposal"].decided_by.username) for t in ticks] == [
        ("pending", None), ("approved", "alice"), ("rejected", "alice"),
    ]
    assert (ticks[1]["run"].outcome, ticks[2]["run"]) == ("REAPED", None)
    report = response.context["report"]
    assert (report["slots"], report["proposals"], report["autoAllowed"], report["verdict"], report["diff"]) == (
        3, {"approved": 1, "pending": 1, "rejected": 1}, True, "not-earned", None,
    )
    body = response.content.decode()
    assert "took 1 m 05 s" in body and "note: not today" in body
    assert 'by operator (alice) at <time datetime="2026-11-30T21:30:00Z" title="2026-11-30 21:30:00 UTC">2026-11-30 21:30:00 UTC</time>' in body
    # Permitted by the registry's rules, not earned: three ticks and a rejection are no week of evidence.
    assert '<span class="badge verdict-not-earned">not-earned</span>' in body
    assert "auto permitted: a kernel loop: registry/schedules.json may declare it auto" in body
    assert '<tr class="problem" data-criterion="rejectedProposals">' in body and 'id="flip-diff"' not in body


def test_a_loop_page_says_which_attempt_a_runs_reason_belongs_to(client, viewer, registry_files, approver, pinned):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T23:00:01Z")
    run = approve_proposal(Proposal.objects.get().pk, user=approver, now=at(NOW))
    start_run(claim_next_run(worker="w1", now=at(NOW), lease_seconds=60), worker="w1", now=at(NOW))
    fail_attempt(run.pk, reason="timeout", now=at(NOW))
    start_run(claim_next_run(worker="w2", now=at(NOW), lease_seconds=60), worker="w2", now=at(NOW))
    client.force_login(viewer)
    response = client.get("/loops/reaper/")
    (newest,) = response.context["ticks"]
    assert (newest["run"].status, newest["run"].attempt, newest["runReason"]) == ("running", 2, "attempt 1: timeout")
    assert f"run {run.pk}</a> running (attempt 1: timeout)" in response.content.decode()


def test_a_bad_window_is_said_on_the_page(client, viewer, reaper_history, pinned):
    client.force_login(viewer)
    response = client.get("/loops/reaper/?since=soon")
    assert response.status_code == 200
    assert response.context["report"] is None
    assert "The window cannot be read: the window&#x27;s start &#x27;soon&#x27; is neither a span" in response.content.decode()
    assert client.get("/loops/reaper/?since=" + "9" * 100).context["window_error"].startswith("a window is at most 64")
    future = client.get("/loops/reaper/?since=2027-01-01T00:00:00Z").context["window_error"]
    assert future == "the window's start '2027-01-01T00:00:00Z' is in the future"


def test_a_loop_timeline_pages_by_event_id(client, viewer, reaper_history, pinned, monkeypatch):
    monkeypatch.setattr("ops.web.timeline.TICKS_PER_PAGE", 2)
    client.force_login(viewer)
    first = client.get("/loops/reaper/").context
    assert [t["event"]["slot"].hour for t in first["ticks"]] == [23, 22]
    older = client.get(f"/loops/reaper/?before={first['older']}").context
    assert ([t["event"]["slot"].hour for t in older["ticks"]], older["older"]) == ([21], None)


def test_an_unknown_loop_is_a_404_page(client, viewer):
    client.force_login(viewer)
    response = client.get("/loops/nope/")
    assert response.status_code == 404
    assert "No loop <code>nope</code>" in response.content.decode()


def test_with_no_registry_in_force_the_dashboard_shows_why(client, viewer, registry_files, pinned):
    registry_files.update("schedules.json", lambda data: data["reaper"].update(every="soon"))
    client.force_login(viewer)
    response = client.get("/dashboard/")
    assert (response.status_code, response.context["rows"], response.context["loop_count"]) == (200, [], 0)
    assert [line["name"] for line in response.context["banner"]] == ["registryInvalid"]
    assert "schedules.json: reaper: unparseable_every" in response.content.decode()
    missing = client.get("/loops/reaper/")
    assert missing.status_code == 503 and "no registry is in force" in missing.content.decode()


def test_a_keyed_loop_page_lists_its_keys_due_soonest(client, viewer, registry_files, pinned):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    choose("acme", "09:00", "Europe/Budapest", "2026-11-30T20:00:00Z")
    tick("2026-11-30T20:00:01Z")
    client.force_login(viewer)
    response = client.get("/loops/customer-digest/")
    assert [row["key"] for row in response.context["due_keys"]] == ["acme"]
    assert "2026-12-01 08:00:00 UTC" in response.content.decode()


def test_the_first_tick_after_a_loop_is_enabled_or_resumed_is_on_time_in_the_badge_and_the_timeline(
    client, viewer, registry_files, host_clock_as_database_clock
):
    # Seen enabled at 21:07 (first seen), the heartbeat fires its 21:05 slot then: on time.
    # 21:10 comes 9 s late. Paused at 21:12 and resumed at 21:23, it fires 21:20 at 21:23:01: on time.
    tick("2026-11-30T21:07:00Z")
    finish_active_runs("HEALTHY")
    tick("2026-11-30T21:10:09Z")
    finish_active_runs("HEALTHY")
    LoopChange.objects.create(loop="heartbeat", at=at("2026-11-30T21:12:00Z"), kind=LoopChangeKind.PAUSED)
    LoopChange.objects.create(loop="heartbeat", at=at("2026-11-30T21:23:00Z"), kind=LoopChangeKind.RESUMED)
    ScheduleState.objects.filter(loop="heartbeat").update(enabled=False)
    tick("2026-11-30T21:23:01Z")
    finish_active_runs("HEALTHY")
    SlotLoopStatus.objects.create(name="slot-loop", last_iteration_at=at("2026-11-30T21:23:02Z"), pid=1, host="test")
    client.force_login(viewer)
    with time_machine.travel(at("2026-11-30T21:23:02Z"), tick=False):
        response = client.get("/loops/heartbeat/")
    assert [(t["event"]["slot"], t["event"]["lateSeconds"]) for t in response.context["ticks"]] == [
        (at("2026-11-30T21:20:00Z"), None), (at("2026-11-30T21:10:00Z"), 9), (at("2026-11-30T21:05:00Z"), None),
    ]
    assert response.context["badges"] == ["ok"]
