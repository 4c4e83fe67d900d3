"""Batched planning (docs/design.md §7): a chunk decides exactly what planning one event at a time
decides, and planners sharing a backlog never plan one event twice nor out of order."""

import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runtime.models import Door, Event, JournalEntry, Proposal, Run
from runtime.registry import get_registry
from runtime.services import planning, planning_batch
from runtime.services.admission import admit_event
from runtime.services.approval import approve_proposal
from runtime.services.planning import plan_event, plan_pending, singleton_in_flight_query
from runtime.services.runs import claim_next_run, fail_attempt, start_run
from schedules.ticks import emit_due_ticks
from tests.conftest import SHA, at
from tests.helpers import SHIP_PAYLOAD, inject, tick

WATCHED_REAPER = "schedules:\n  reaper:\n    enabled: true\n"
NOW = at("2026-11-30T22:00:20Z")
MERGE = {"repo": "alpha", "prNumbers": [7], "headSha": SHA}
PLANNING_ACTIONS = ("proposal_created", "proposal_auto_approved", "run_queued", "event_noop", "event_refused")

#: What each event of the backlog below is planned as, in admission order.
EXPECTED_OUTCOMES = [
    ("clock:heartbeat:2026-11-30T21:05:00Z", "APPROVED", ""),
    ("clock:heartbeat:2026-11-30T21:10:00Z", "NOOP", "previous_run_in_flight"),
    ("clock:heartbeat:2026-11-30T22:00:00Z", "NOOP", "previous_run_in_flight"),
    ("clock:reaper:2026-11-30T22:00:00Z", "NOOP", "previous_run_in_flight"),
    ("merge-1", "APPROVED", ""),
    ("merge-2", "NOOP", "duplicate_idempotency_key"),
    ("ship-1", "PROPOSED", ""),
    ("triage-1", "PROPOSED", ""),
]
#: The journal the planning of that backlog writes, in order: (event, action, actor, data).
EXPECTED_JOURNAL = [
    ("clock:heartbeat:2026-11-30T21:05:00Z", "proposal_auto_approved", "schedule",
     {"definition": "heartbeat@1", "idempotencyKey": "heartbeat:2026-11-30T21:05:00Z", "approval": "auto"}),
    ("clock:heartbeat:2026-11-30T21:05:00Z", "run_queued", "schedule", {"definition": "heartbeat@1"}),
    ("clock:heartbeat:2026-11-30T21:10:00Z", "event_noop", "system",
     {"reason": "previous_run_in_flight", "loop": "heartbeat"}),
    ("clock:heartbeat:2026-11-30T22:00:00Z", "event_noop", "system",
     {"reason": "previous_run_in_flight", "loop": "heartbeat"}),
    ("clock:reaper:2026-11-30T22:00:00Z", "event_noop", "system", {"reason": "previous_run_in_flight", "loop": "reaper"}),
    ("merge-1", "proposal_auto_approved", "inject",
     {"definition": "merge-scan@1", "idempotencyKey": f"merge-scan:alpha:7:{SHA}", "approval": "auto"}),
    ("merge-1", "run_queued", "inject", {"definition": "merge-scan@1"}),
    ("merge-2", "event_noop", "system", {"reason": "duplicate_idempotency_key", "idempotencyKey": f"merge-scan:alpha:7:{SHA}"}),
    ("ship-1", "proposal_created", "system",
     {"definition": "ship-apply@1", "idempotencyKey": f"ship-apply:alpha:{SHIP_PAYLOAD['headSha']}", "approval": "watched"}),
    ("triage-1", "proposal_created", "system",
     {"definition": "triage@1", "idempotencyKey": "eventId:triage-1", "approval": "watched"}),
]


def admit_backlog(registry_files, approver) -> None:
    """An interrupted reaper run holding its loop, then eight unplanned events: three heartbeat
    ticks (auto; the first queues a run the next two find in flight), a reaper tick, a
    merge request twice through two doors (one key), a human-only ship-apply, a watched triage."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    start = at("2026-11-30T21:01:00Z")
    approve_proposal(Proposal.objects.get(definition="reaper@1").pk, user=approver, now=start)
    Run.objects.filter(definition="heartbeat@1").update(status="succeeded")
    claimed = claim_next_run(worker="w1", now=start, lease_seconds=60)
    assert claimed.definition == "reaper@1" and start_run(claimed, worker="w1", now=start)
    assert fail_attempt(claimed.pk, reason="worker_stopped", now=start, worker="w1", interrupted=True) == "interrupted"
    registry = get_registry()
    for instant in ("2026-11-30T21:05:10Z", "2026-11-30T21:10:10Z", "2026-11-30T22:00:10Z"):
        emit_due_ticks(now=at(instant), registry=registry)
    inject("merge-1", "factory.merge.requested", MERGE)
    admit_event({
        "schemaVersion": "factory.event/v1", "eventId": "merge-2", "type": "factory.merge.requested",
        "source": "bridge", "subject": "alpha", "occurredAt": "2026-11-30T22:00:00Z", "correlationId": "merge-2",
        "payload": MERGE,
    }, door=Door.EVENTS, now=at("2026-11-30T22:00:11Z"))
    inject("ship-1", "factory.ship-apply.requested", SHIP_PAYLOAD)
    inject("triage-1", "factory.triage.requested", {"repo": "factory"})


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["chunk", "one at a time"])
def test_a_chunk_plans_each_event_as_planning_one_at_a_time_does(registry_files, approver, path):
    admit_backlog(registry_files, approver)
    backlog = list(Event.objects.filter(planned_at__isnull=True).order_by("id").values_list("id", flat=True))
    first_entry = JournalEntry.objects.order_by("-id").values_list("id", flat=True).first()
    if path == "chunk":
        assert plan_pending(now=NOW) == 8
    else:
        assert all(plan_event(event_id, now=NOW) is not None for event_id in backlog)
    assert list(Event.objects.filter(pk__in=backlog).order_by("id").values_list(
        "uid", "planning_outcome", "planning_reason")) == EXPECTED_OUTCOMES
    assert set(Event.objects.filter(pk__in=backlog).values_list("planned_at", flat=True)) == {NOW}
    journal = JournalEntry.objects.filter(id__gt=first_entry).order_by("id")
    assert [(e.event.uid, e.action, e.actor, e.data) for e in journal] == EXPECTED_JOURNAL
    assert {e.at for e in journal} == {NOW}
    assert list(Run.objects.filter(event__in=backlog).order_by("id").values_list(
        "event__uid", "status", "actor", "approved_by", "singleton_key")) == [
        ("clock:heartbeat:2026-11-30T21:05:00Z", "queued", "schedule", None, "heartbeat"),
        ("merge-1", "queued", "inject", None, None),
    ]
    run_entry = journal.get(action="run_queued", event__uid="merge-1")
    assert (run_entry.proposal.event.uid, run_entry.run.event.uid) == ("merge-1", "merge-1")


@pytest.mark.django_db
def test_the_singleton_check_uses_its_partial_index_on_sqlite():
    if connection.vendor != "sqlite":
        pytest.skip("the partial-index rule is SQLite's")
    sql, params = singleton_in_flight_query(["heartbeat", "reaper"])
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        plan = [row[-1] for row in cursor.fetchall()]
    assert plan == ["SEARCH runtime_run USING INDEX run_one_active_per_singleton (singleton_key=?)"]


@pytest.mark.django_db(transaction=True)
def test_planners_sharing_a_backlog_plan_each_event_once_and_each_correlation_in_order(registry_files, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("planners in parallel need PostgreSQL's row locks (SQLite plans one at a time)")
    monkeypatch.setattr(planning_batch, "CHUNK_SIZE", 25)
    registry_files.write_config("schedule.yaml", "schedules:\n  heartbeat:\n    enabled: false\n")
    for n in range(400):
        # Twenty correlations spread over the whole backlog, so every chunk meets older events
        # of its correlations in another planner's chunk.
        admit_event({
            "schemaVersion": "factory.event/v1", "eventId": f"triage-{n:03d}", "type": "factory.triage.requested",
            "source": "operator", "subject": "factory", "occurredAt": "2026-11-30T22:00:00Z",
            "correlationId": f"chain-{n % 20}", "payload": {"repo": "factory"},
        }, door=Door.INJECT, now=NOW)
    errors = []

    def planner():
        try:
            while plan_pending(now=NOW, limit=50) or Event.objects.filter(planned_at__isnull=True).exists():
                pass
        except Exception as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=planner) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == [] and not any(thread.is_alive() for thread in threads)
    assert Event.objects.filter(planned_at__isnull=True).count() == 0
    assert Proposal.objects.count() == 400
    created = list(JournalEntry.objects.filter(action="proposal_created").values_list("event__uid", "event__correlation_id", "id"))
    assert sorted(uid for uid, _, _ in created) == [f"triage-{n:03d}" for n in range(400)]
    for correlation in {c for _, c, _ in created}:
        chain = sorted((uid, entry) for uid, c, entry in created if c == correlation)
        assert [entry for _, entry in chain] == sorted(entry for _, entry in chain), correlation


@pytest.mark.django_db
def test_a_chunk_writes_each_event_row_once_its_claim_and_outcome_in_one_update(registry_files, approver):
    admit_backlog(registry_files, approver)
    with CaptureQueriesContext(connection) as queries:
        assert planning_batch.plan_batch(now=NOW, registry=get_registry()) == 8
    event_writes = [q["sql"] for q in queries if q["sql"].startswith('UPDATE "runtime_event"')]
    assert len(event_writes) == 1
    assert 'SET "planned_at" = ' in event_writes[0] and '"planning_outcome" = ' in event_writes[0]
    assert list(Event.objects.filter(planned_at=NOW).order_by("id").values_list(
        "uid", "planning_outcome", "planning_reason")) == EXPECTED_OUTCOMES


@pytest.mark.django_db
def test_a_chunk_whose_event_was_planned_meanwhile_is_rolled_back_whole(registry_files, approver, monkeypatch):
    admit_backlog(registry_files, approver)
    backlog = list(Event.objects.filter(planned_at__isnull=True).order_by("id").values_list("id", flat=True))
    proposals, entries = Proposal.objects.count(), JournalEntry.objects.count()
    decide_chunk = planning_batch._decide_chunk

    def planned_meanwhile(events, registry):
        # On PostgreSQL a planner that ignored the row locks marks the chunk's third event
        # first, inside the chunk's transaction; on SQLite another process's planner commits
        # it between the chunk's read and its write.
        Event.objects.filter(pk=backlog[2]).update(planned_at=at("2026-11-30T22:00:19Z"), planning_outcome="NOOP")
        return decide_chunk(events, registry)

    monkeypatch.setattr(planning_batch, "_decide_chunk", planned_meanwhile)
    assert planning_batch.plan_batch(now=NOW, registry=get_registry()) == 0
    assert (Proposal.objects.count(), JournalEntry.objects.count()) == (proposals, entries)
    meanwhile = [(None, None)] * 8
    if connection.vendor == "sqlite":
        meanwhile[2] = (at("2026-11-30T22:00:19Z"), "NOOP")
    assert list(Event.objects.filter(pk__in=backlog).order_by("id").values_list(
        "planned_at", "planning_outcome")) == meanwhile


@pytest.mark.django_db
def test_a_chunk_logs_a_line_for_its_first_events_and_one_line_counting_the_rest(monkeypatch, caplog):
    for n in range(5):
        inject(f"triage-{n}", "factory.triage.requested", {"repo": "alpha"})
    monkeypatch.setattr(planning, "PLANNED_LINES", 2)
    with caplog.at_level("INFO", logger="runtime.services.planning"):
        assert plan_pending(now=NOW) == 5
    assert [(r.levelname, r.getMessage(), getattr(r, "action", None)) for r in caplog.records] == [
        ("INFO", "planned triage-0: PROPOSED ", "event_planned"),
        ("INFO", "planned triage-1: PROPOSED ", "event_planned"),
        ("INFO", "3 more events planned in this chunk: 3 PROPOSED; the journal has each", "events_planned"),
    ]
    assert (caplog.records[-1].events, caplog.records[-1].outcomes) == (3, {"PROPOSED": 3})
    assert JournalEntry.objects.filter(action="proposal_created").count() == 5
