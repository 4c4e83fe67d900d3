"""The outbox between a run's end and its chained events: crashes, refusals, broken pointers (docs/design.md §8, §12)."""

from unittest import mock

import pytest

from runtime.models import Door, Event, JournalEntry, OutboxEntry, Proposal, Run
from runtime.registry import get_registry
from runtime.services import outbox
from runtime.services.admission import admit_event
from runtime.services.approval import approve_proposal
from runtime.services.backlog import Backlog
from runtime.services.outbox import mark_published, mark_refused
from tests.conftest import at
from tests.helpers import inject, step

pytestmark = pytest.mark.django_db

PR_OPEN_ONLY = """
outcomes:
  dispatch@1:
    - results: [{outcome: PR_OPEN, data: {prNumber: 7, headSha: 3f786850e387550fdab836ed7e6dc881de23001b}}]
"""


def finished_dispatch(registry_files, approver) -> Run:
    """A dispatch run that ended PR_OPEN, its two chained events written and not yet published."""
    registry_files.write_config("fake-outcomes.yaml", PR_OPEN_ONLY)
    inject("op-1", "factory.dispatch.requested", {"repo": "alpha", "ticket": "DEMO-1", "evidence": {}})
    step("2026-11-30T10:00:00Z")
    approve_proposal(Proposal.objects.get(status="pending").pk, user=approver, now=at("2026-11-30T10:00:30Z"))
    with mock.patch("ops.slot_loop.publish_outbox", return_value=0):
        step("2026-11-30T10:01:00Z")                # the run ends; the process "dies" before publishing
    run = Run.objects.get(definition="dispatch@1")
    assert (run.status, run.outcome) == ("succeeded", "PR_OPEN")
    return run


def admissions(event_id: str) -> int:
    return JournalEntry.objects.filter(action="event_admitted", event__uid=event_id).count()


def test_a_crash_between_the_runs_end_and_publication_admits_each_chained_event_once(fake_agents, approver):
    run = finished_dispatch(fake_agents, approver)
    ids = [f"chain:{run.pk}:0", f"chain:{run.pk}:1"]
    assert list(OutboxEntry.objects.values_list("event_uid", "status")) == [(ids[0], "pending"), (ids[1], "pending")]
    assert not Event.objects.filter(uid__in=ids).exists()

    step("2026-11-30T10:02:00Z")                    # the restarted slot loop
    step("2026-11-30T10:03:00Z")                    # and another iteration: nothing more
    assert [admissions(event_id) for event_id in ids] == [1, 1]
    assert list(OutboxEntry.objects.values_list("status", "duplicate")) == [("published", False), ("published", False)]


def test_an_iteration_with_no_tick_due_publishes_the_pending_rows_its_one_check_found(fake_agents, approver):
    run = finished_dispatch(fake_agents, approver)
    from schedules.due_check import check_idle
    from schedules.models import ScheduleSync
    from schedules.repair import future_limit

    now = at("2026-11-30T10:01:01Z")
    sync = ScheduleSync.objects.get()
    assert check_idle(sync_name=sync.name, fingerprint=sync.fingerprint, due_by=now, future_after=future_limit(now))[1] == (
        Backlog(outbox=True, events=False)
    )
    report = step("2026-11-30T10:01:01Z")
    assert (report.ticks, report.published, report.planned) == ([], 2, 2)
    assert list(OutboxEntry.objects.filter(run=run).values_list("status", flat=True)) == ["published", "published"]


def test_a_publisher_dying_inside_its_transaction_leaves_the_row_pending_and_admits_nothing(fake_agents, approver):
    run = finished_dispatch(fake_agents, approver)
    with mock.patch("runtime.services.outbox.mark_published", side_effect=RuntimeError("killed")):
        with pytest.raises(RuntimeError):
            step("2026-11-30T10:02:00Z")
    assert not Event.objects.filter(uid__startswith=f"chain:{run.pk}:").exists()
    assert set(OutboxEntry.objects.values_list("status", flat=True)) == {"pending"}
    step("2026-11-30T10:03:00Z")
    assert [admissions(f"chain:{run.pk}:{n}") for n in (0, 1)] == [1, 1]


def test_an_event_another_publisher_admitted_is_marked_published_as_a_duplicate(fake_agents, approver):
    run = finished_dispatch(fake_agents, approver)
    first = OutboxEntry.objects.get(position=0)
    admit_event(first.envelope, door=Door.CHAIN, now=at("2026-11-30T10:01:30Z"))
    step("2026-11-30T10:02:00Z")
    assert list(OutboxEntry.objects.filter(run=run).values_list("position", "status", "duplicate")) == [
        (0, "published", True), (1, "published", False),
    ]
    assert admissions(first.event_uid) == 1


def test_a_chained_event_the_registry_refuses_is_recorded_and_does_not_wedge_the_outbox(fake_agents):
    fake_agents.update("edges.json", lambda edges: edges.insert(0, {
        "from": "work-scan@1", "outcome": "NO_WORK", "emit": [
            {"type": "factory.triage.requested", "payload": {"repo": {"value": "Not A Repo!"}}},
            {"type": "factory.triage.requested", "payload": {"repo": {"pointer": "/input/repo"}}},
        ],
    }))
    fake_agents.write_config("fake-outcomes.yaml", "outcomes:\n  work-scan@1:\n    - results: [{outcome: NO_WORK}]\n")
    inject("op-1", "factory.work.requested", {"repo": "alpha"})
    step("2026-11-30T10:00:00Z")
    step("2026-11-30T10:01:00Z")
    run = Run.objects.get(event__uid="op-1")
    bad, good = OutboxEntry.objects.filter(run=run).order_by("position")
    assert (bad.status, [e["code"] for e in bad.refusal]) == ("refused", ["invalid_payload"])
    assert good.status == "published" and Event.objects.filter(uid=good.event_uid).exists()
    refusal = JournalEntry.objects.get(action="chain_refused")
    assert (refusal.actor, refusal.run, refusal.event.uid, refusal.data["eventId"]) == ("chain", run, "op-1", bad.event_uid)


def test_a_pointer_that_finds_nothing_emits_nothing_and_marks_the_run(fake_agents):
    fake_agents.update("edges.json", lambda edges: edges.insert(0, {
        "from": "work-scan@1", "outcome": "NO_WORK", "emit": [
            {"type": "factory.triage.requested", "payload": {"repo": {"pointer": "/input/repo"}}},
            {"type": "factory.triage.requested", "payload": {"repo": {"pointer": "/output/data/repo"}}},
        ],
    }))
    fake_agents.write_config("fake-outcomes.yaml", "outcomes:\n  work-scan@1:\n    - results: [{outcome: NO_WORK}]\n")
    inject("op-1", "factory.work.requested", {"repo": "alpha"})
    step("2026-11-30T10:00:00Z")
    step("2026-11-30T10:01:00Z")
    run = Run.objects.get(event__uid="op-1")
    assert (run.status, run.outcome, run.reason) == ("succeeded", "NO_WORK", "chain_broken")
    assert not OutboxEntry.objects.exists()               # not even the first, good emit
    broken = JournalEntry.objects.get(action="chain_broken")
    assert broken.data["problems"] == [{
        "edge": "work-scan@1 NO_WORK", "emit": 1, "type": "factory.triage.requested", "field": "payload.repo",
        "pointer": "/output/data/repo", "detail": "/output has no member 'data'",
    }]


@pytest.mark.parametrize("script", [
    "outcomes:\n  work-scan@1:\n    - results: [{outcome: DISPATCH, data: {ticket: DEMO-1}}]\n",   # no ownedPaths
    "outcomes:\n  work-scan@1:\n    - results: [{outcome: dispatch}]\n",                              # not UPPER_SNAKE
    "outcomes:\n  work-scan@1:\n    - results: [{outcome: MERGED}]\n",                                # not work-scan's
])
def test_a_contract_violation_fails_the_run_before_any_edge(fake_agents, script):
    fake_agents.write_config("fake-outcomes.yaml", script)
    inject("op-1", "factory.work.requested", {"repo": "alpha"})
    step("2026-11-30T10:00:00Z")
    step("2026-11-30T10:01:00Z")
    run = Run.objects.get(event__uid="op-1")
    assert (run.status, run.outcome, run.reason) == ("failed", "FAILED", "output_contract_violation")
    assert not OutboxEntry.objects.exists() and Event.objects.count() == 1
    assert JournalEntry.objects.get(action="run_failed").data["violations"]


def test_a_row_another_publisher_settled_first_is_not_refused_again(fake_agents, approver, caplog):
    finished_dispatch(fake_agents, approver)
    first, second = OutboxEntry.objects.order_by("position")
    OutboxEntry.objects.filter(pk=first.pk).update(status="published", settled_at=at("2026-11-30T10:01:10Z"))  # another publisher, first
    errors = [{"code": "invalid_payload", "detail": "no"}]
    assert mark_refused(first, errors, now=at("2026-11-30T10:01:30Z")) is False
    assert mark_refused(second, errors, now=at("2026-11-30T10:01:30Z")) is True
    assert list(OutboxEntry.objects.order_by("position").values_list("status", "refusal")) == [
        ("published", None), ("refused", errors),
    ]
    assert list(JournalEntry.objects.filter(action="chain_refused").values_list("run_id", "data")) == [
        (second.run_id, {"eventId": second.event_uid, "type": second.envelope["type"], "errors": errors}),
    ]
    (logged,) = [r for r in caplog.records if r.name == "runtime.services.outbox"]
    assert (logged.levelname, logged.getMessage()) == (
        "ERROR", f"chain event {second.event_uid} refused at admission: {errors}",
    )
    assert (logged.action, logged.eventId, logged.run) == ("chain_refused", second.event_uid, second.run_id)


def test_marking_published_counts_the_rows_it_settled_and_tells_duplicates(fake_agents, approver):
    finished_dispatch(fake_agents, approver)
    first, second = OutboxEntry.objects.order_by("position")
    now = at("2026-11-30T10:01:30Z")
    assert mark_published([first, second], {first.event_uid: 1}, now=now) == 2
    assert list(OutboxEntry.objects.order_by("position").values_list("status", "duplicate", "settled_at")) == [
        ("published", False, now), ("published", True, now),
    ]
    assert mark_published([first, second], {first.event_uid: 1}, now=now) == 0


def test_an_iteration_settles_at_most_its_limit_across_chunks(fake_agents, approver, monkeypatch):
    run = finished_dispatch(fake_agents, approver)
    first = OutboxEntry.objects.get(position=0)
    for position in range(2, 5):  # three more pending rows of the same kind
        envelope = {**first.envelope, "eventId": f"chain:{run.pk}:{position}"}
        OutboxEntry.objects.create(run=run, position=position, event_uid=envelope["eventId"], envelope=envelope,
                                   created_at=first.created_at)
    monkeypatch.setattr(outbox, "CHUNK", 2)
    assert outbox.publish_outbox(now=at("2026-11-30T10:01:30Z"), registry=get_registry(), limit=3) == 3
    assert list(OutboxEntry.objects.order_by("position").values_list("position", "status")) == [
        (0, "published"), (1, "published"), (2, "published"), (3, "pending"), (4, "pending"),
    ]


def test_the_backlog_says_which_of_its_two_kinds_of_work_waits_and_when(fake_agents, approver):
    from runtime import clock
    from runtime.services.backlog import backlog, backlog_now

    assert backlog() == Backlog(outbox=False, events=False)
    finished_dispatch(fake_agents, approver)
    assert backlog() == Backlog(outbox=True, events=False)
    inject("op-2", "factory.dispatch.requested", {"repo": "alpha", "ticket": "DEMO-2", "evidence": {}})
    assert backlog() == backlog_now()[1] == Backlog(outbox=True, events=True)
    OutboxEntry.objects.update(status="published", settled_at=at("2026-11-30T10:01:30Z"))
    before = clock.database_now()
    now, waiting = backlog_now()
    assert waiting == Backlog(outbox=False, events=True)
    assert now.tzinfo is not None and now.utcoffset().total_seconds() == 0
    assert before <= now <= clock.database_now()
