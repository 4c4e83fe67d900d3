"""Planning one event alone (``planning.plan_event``, the path a refused chunk falls back to;
docs/design.md §7): what it returns, writes and journals for each outcome, and the race it
loses to another planner or an approval."""

import logging

import pytest

from runtime.models import Door, Event, JournalEntry, Proposal, Run
from runtime.preview_model import Preview
from runtime.registry import get_registry
from runtime.services import planning
from runtime.services.admission import admit_event
from runtime.services.planning import plan_event
from schedules.ticks import emit_due_ticks
from tests.conftest import SHA, at
from tests.helpers import inject

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T22:00:20Z")
MERGE = {"repo": "alpha", "prNumbers": [7], "headSha": SHA}
KEY = f"merge-scan:alpha:7:{SHA}"
WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"


def journal(uid: str) -> list[tuple]:
    return list(JournalEntry.objects.filter(event__uid=uid).exclude(action="event_admitted").order_by("id").values_list(
        "action", "actor", "at", "data", "proposal_id", "run_id"))


def planned(uid: str) -> tuple:
    return Event.objects.filter(uid=uid).values_list("planned_at", "planning_outcome", "planning_reason").get()


def test_an_auto_event_is_approved_and_its_run_queued_by_its_door(registry_files, caplog):
    """An injected merge request: APPROVED, its proposal approved by the ``inject`` door, its run
    queued in that door's lane, both journaled at ``now``, one line logged."""
    event = inject("merge-1", "factory.merge.requested", MERGE).event
    with caplog.at_level(logging.INFO, logger="runtime.services.planning"):
        result = plan_event(event.pk, now=NOW)
    proposal, run = Proposal.objects.get(), Run.objects.get()
    assert (result.event.pk, result.outcome, result.reason, result.proposal, result.run) == (
        event.pk, "APPROVED", "", proposal, run)
    assert (proposal.status, proposal.actor, proposal.idempotency_key, proposal.created_at, proposal.decided_at) == (
        "approved", "inject", KEY, NOW, NOW)
    assert (run.proposal_id, run.actor, run.lane, run.status, run.queued_at) == (
        proposal.pk, "inject", "door:inject", "queued", NOW)
    assert planned("merge-1") == (NOW, "APPROVED", "")
    assert journal("merge-1") == [
        ("proposal_auto_approved", "inject", NOW, {"definition": "merge-scan@1", "idempotencyKey": KEY, "approval": "auto"},
         proposal.pk, None),
        ("run_queued", "inject", NOW, {"definition": "merge-scan@1"}, proposal.pk, run.pk),
    ]
    assert [(r.levelname, r.getMessage(), r.action, r.eventId, r.outcome) for r in caplog.records] == [
        ("INFO", "planned merge-1: APPROVED ", "event_planned", "merge-1", "APPROVED")]


def test_a_watched_event_is_proposed_and_previewed_with_no_run(registry_files):
    """A reaper tick, the reaper watched: PROPOSED by ``system``, its preview asked for at ``now``,
    no run."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    emit_due_ticks(now=at("2026-11-30T22:00:10Z"), registry=get_registry())
    event = Event.objects.get()
    result = plan_event(event.pk, now=NOW, registry=get_registry())
    proposal = Proposal.objects.get()
    assert (result.outcome, result.reason, result.proposal, result.run) == ("PROPOSED", "", proposal, None)
    assert (proposal.status, proposal.actor, proposal.loop, proposal.singleton_key, proposal.decided_at) == (
        "pending", "", "reaper", "reaper", None)
    assert Run.objects.count() == 0
    assert list(Preview.objects.values_list("proposal_id", "requested_at")) == [(proposal.pk, NOW)]
    assert planned(event.uid) == (NOW, "PROPOSED", "")
    assert journal(event.uid) == [
        ("proposal_created", "system", NOW,
         {"definition": "reaper@1", "idempotencyKey": "reaper:2026-11-30T22:00:00Z", "approval": "watched"},
         proposal.pk, None),
    ]


def test_an_event_planned_already_is_left_as_it_is(registry_files):
    """Another planner claimed it first: None, nothing written."""
    event = inject("merge-1", "factory.merge.requested", MERGE).event
    assert plan_event(event.pk, now=NOW) is not None
    entries = JournalEntry.objects.count()
    assert plan_event(event.pk, now=at("2026-11-30T22:05:00Z")) is None
    assert planned("merge-1") == (NOW, "APPROVED", "")
    assert (JournalEntry.objects.count(), Proposal.objects.count(), Run.objects.count()) == (entries, 1, 1)


def assert_a_held_key_noop(result, event) -> None:
    """``result`` and the stored rows say ``event`` is a NOOP ``duplicate_idempotency_key``,
    journaled by ``system`` with the key, at ``NOW``."""
    assert (result.event.pk, result.outcome, result.reason, result.proposal, result.run) == (
        event.pk, "NOOP", "duplicate_idempotency_key", None, None)
    assert planned(event.uid) == (NOW, "NOOP", "duplicate_idempotency_key")
    assert journal(event.uid) == [
        ("event_noop", "system", NOW, {"reason": "duplicate_idempotency_key", "idempotencyKey": KEY}, None, None)]


def test_a_held_key_is_a_noop_journaled_with_the_key_and_logged(registry_files, caplog):
    """The second merge request of one key: NOOP ``duplicate_idempotency_key``, journaled by
    ``system`` with the key, no proposal."""
    plan_event(inject("merge-1", "factory.merge.requested", MERGE).event.pk, now=NOW)
    second = inject("merge-2", "factory.merge.requested", MERGE).event
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="runtime.services.planning"):
        result = plan_event(second.pk, now=NOW)
    assert_a_held_key_noop(result, second)
    assert Proposal.objects.count() == 1
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "planned merge-2: NOOP duplicate_idempotency_key")]


def test_a_key_taken_between_the_check_and_the_insert_is_a_noop(registry_files, monkeypatch):
    """Another planner's proposal of the key lands after the check: the insert is refused and the
    event is a NOOP ``duplicate_idempotency_key``, nothing of its proposal left."""
    plan_event(inject("merge-1", "factory.merge.requested", MERGE).event.pk, now=NOW)
    second = inject("merge-2", "factory.merge.requested", MERGE).event
    monkeypatch.setattr(planning, "key_held", lambda key: False)
    result = plan_event(second.pk, now=NOW)
    assert_a_held_key_noop(result, second)
    assert (Proposal.objects.count(), Run.objects.count()) == (1, 1)


def test_a_singleton_run_queued_between_the_check_and_the_insert_is_a_noop(registry_files, monkeypatch):
    """A heartbeat run queued after the check: the run's insert is refused, the proposal rolled
    back, and the tick is a NOOP ``previous_run_in_flight`` naming the loop."""
    registry = get_registry()
    emit_due_ticks(now=at("2026-11-30T21:05:10Z"), registry=registry)
    emit_due_ticks(now=at("2026-11-30T21:10:10Z"), registry=registry)
    first, second = Event.objects.order_by("id")
    plan_event(first.pk, now=NOW, registry=registry)
    checks = []
    in_flight = planning.singletons_in_flight

    def not_yet(keys):
        # The decision's check misses the run; the check after the refused insert sees it.
        checks.append(list(keys))
        return set() if len(checks) == 1 else in_flight(keys)

    monkeypatch.setattr(planning, "singletons_in_flight", not_yet)
    result = plan_event(second.pk, now=NOW, registry=registry)
    assert checks == [["heartbeat"], ["heartbeat"]]
    assert (result.event.pk, result.outcome, result.reason, result.proposal, result.run) == (
        second.pk, "NOOP", "previous_run_in_flight", None, None)
    assert planned(second.uid) == (NOW, "NOOP", "previous_run_in_flight")
    assert journal(second.uid) == [
        ("event_noop", "system", NOW, {"reason": "previous_run_in_flight", "loop": "heartbeat"}, None, None)]
    assert (Proposal.objects.count(), Run.objects.count()) == (1, 1)


def test_a_singleton_ticks_key_taken_meanwhile_is_a_duplicate_not_a_run_in_flight(registry_files, monkeypatch):
    """A watched reaper tick replayed under another event id, its key taken after the check: no
    run holds the reaper, so the refused insert is a NOOP ``duplicate_idempotency_key``."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    registry = get_registry()
    emit_due_ticks(now=at("2026-11-30T22:00:10Z"), registry=registry)
    tick = Event.objects.get()
    plan_event(tick.pk, now=NOW, registry=registry)
    replay = admit_event({
        "schemaVersion": "factory.event/v1", "eventId": f"{tick.uid}:replay", "type": tick.type, "source": "operator",
        "subject": "factory", "occurredAt": "2026-11-30T22:00:00Z", "correlationId": "replay", "payload": tick.payload,
    }, door=Door.SCHEDULE, now=NOW).event
    monkeypatch.setattr(planning, "key_held", lambda key: False)
    result = plan_event(replay.pk, now=NOW, registry=registry)
    assert (result.event.pk, result.outcome, result.reason) == (replay.pk, "NOOP", "duplicate_idempotency_key")
    assert journal(replay.uid) == [("event_noop", "system", NOW, {
        "reason": "duplicate_idempotency_key", "idempotencyKey": "reaper:2026-11-30T22:00:00Z"}, None, None)]
    assert (Proposal.objects.count(), Run.objects.count()) == (1, 0)
