"""The rows admission writes and the ``Admission`` it answers (docs/design.md §3): every column of an
admitted event — a tick's loop, key and slot, a plain event's none — read back from the database
and as ``admit_event`` returns it, the same for ``admit_batch``'s ticks; a duplicate answers the
stored event, and warns only when its content differs (``occurredAt`` compared in UTC)."""

import logging

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from runtime.models import Door, Event, JournalEntry
from runtime.registry import get_registry
from runtime.services import admission
from runtime.services.admission import admit_batch, admit_event
from tests.conftest import at

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T10:00:05Z")
COLUMNS = ("uid", "type", "source", "subject", "occurred_at", "correlation_id", "causation_id", "payload", "door",
           "admitted_at", "loop", "loop_key", "slot", "planned_at", "planning_outcome", "planning_reason")


def request(**changes) -> dict:
    base = {
        "schemaVersion": "factory.event/v1", "eventId": "op-1", "type": "factory.work.requested",
        "source": "operator", "subject": "hello", "occurredAt": "2026-11-30T11:00:00+01:00",
        "correlationId": "corr-1", "causationId": "cause-1", "payload": {"repo": "hello"},
    }
    base.update(changes)
    return base


def tick(loop="heartbeat", slot="2026-11-30T10:00:00Z", event_type="clock.tick.heartbeat", **extra) -> dict:
    payload = {"loop": loop, "slot": slot, "cadenceSeconds": 300, "skippedSlots": 0, **extra}
    name = f"clock:{loop}:{extra['key']}:{slot}" if "key" in extra else f"clock:{loop}:{slot}"
    return {
        "schemaVersion": "factory.event/v1", "eventId": name, "type": event_type, "source": "clock",
        "subject": loop, "occurredAt": "2026-11-30T10:00:01Z", "correlationId": name, "payload": payload,
    }


def row(event) -> tuple:
    return tuple(getattr(event, column) for column in COLUMNS)


def test_an_admitted_event_is_stored_and_answered_column_by_column():
    admission = admit_event(request(), door=Door.INJECT, now=NOW)
    stored = Event.objects.get()
    expected = ("op-1", "factory.work.requested", "operator", "hello", at("2026-11-30T10:00:00Z"), "corr-1", "cause-1",
                {"repo": "hello"}, "inject", NOW, None, None, None, None, None, "")
    assert row(stored) == expected
    assert row(admission.event) == expected
    assert (admission.event.pk, admission.event._state.adding) == (stored.pk, False)
    assert (admission.admitted, admission.duplicate, admission.event_id) == (True, False, "op-1")


def test_an_event_without_a_causation_id_stores_none():
    env = request()
    del env["causationId"]
    admission = admit_event(env, door=Door.GITHUB, now=NOW)
    assert (Event.objects.get().causation_id, admission.event.causation_id) == (None, None)
    assert (Event.objects.get().door, admission.event.door) == ("github", Door.GITHUB)


def test_a_tick_records_its_loop_and_slot_stored_and_answered():
    admission = admit_event(tick(), door=Door.SCHEDULE, now=NOW)
    stored = Event.objects.get()
    expected = ("heartbeat", None, at("2026-11-30T10:00:00Z"), "schedule", at("2026-11-30T10:00:01Z"))
    assert (stored.loop, stored.loop_key, stored.slot, stored.door, stored.occurred_at) == expected
    answered = admission.event
    assert (answered.loop, answered.loop_key, answered.slot, answered.door, answered.occurred_at) == expected
    assert answered.is_tick and stored.is_tick


def test_a_keyed_tick_records_its_key_too():
    env = tick("customer-digest", "2026-11-30T09:00:00Z", "customer.digest.due", key="c-7")
    admission = admit_event(env, door=Door.SCHEDULE, now=NOW)
    stored = Event.objects.get()
    expected = ("customer-digest", "c-7", at("2026-11-30T09:00:00Z"))
    assert (stored.loop, stored.loop_key, stored.slot) == expected
    assert (admission.event.loop, admission.event.loop_key, admission.event.slot) == expected


@pytest.mark.parametrize("door", [Door.INJECT, Door.EVENTS])
def test_a_tick_shaped_payload_from_another_door_is_no_tick(door):
    env = {**tick(key="c-7"), "eventId": "looks-like-a-tick", "source": "operator"}
    admission = admit_event(env, door=door, now=NOW)
    stored = Event.objects.get()
    assert (stored.loop, stored.loop_key, stored.slot) == (None, None, None)
    assert (admission.event.loop, admission.event.loop_key, admission.event.slot) == (None, None, None)


def test_a_schedule_event_without_a_slot_is_no_tick():
    env = tick()
    del env["payload"]["slot"]
    env["type"], env["payload"] = "factory.work.requested", {"repo": "hello", "loop": "heartbeat"}
    admission = admit_event(env, door=Door.SCHEDULE, now=NOW)
    assert (Event.objects.get().loop, admission.event.loop, admission.event.slot) == (None, None, None)


def test_a_batch_of_ticks_stores_each_loop_key_and_slot_and_journals_the_schedule():
    # A tick names its loop in the payload as the bridge's events do, but its entry names no job.
    envelopes = [
        {**tick(slot="2026-11-30T10:00:00Z"), "source": "bridge"},
        tick("customer-digest", "2026-11-30T09:00:00Z", "customer.digest.due", key="c-7"),
    ]
    with transaction.atomic():
        # Validated: a tick's reserved eventId is the schedule door's own.
        batch = admit_batch(envelopes, door=Door.SCHEDULE, now=NOW, registry=get_registry())
    assert (sorted(batch.admitted), batch.duplicates, batch.refused) == (
        sorted(e["eventId"] for e in envelopes), set(), {})
    rows = list(Event.objects.order_by("id").values_list("uid", "loop", "loop_key", "slot", "door", "admitted_at",
                                                          "occurred_at", "payload", "planned_at", "planning_reason"))
    assert rows == [
        (envelopes[0]["eventId"], "heartbeat", None, at("2026-11-30T10:00:00Z"), "schedule", NOW,
         at("2026-11-30T10:00:01Z"), envelopes[0]["payload"], None, ""),
        (envelopes[1]["eventId"], "customer-digest", "c-7", at("2026-11-30T09:00:00Z"), "schedule", NOW,
         at("2026-11-30T10:00:01Z"), envelopes[1]["payload"], None, ""),
    ]
    entries = JournalEntry.objects.order_by("id").values_list("action", "actor", "actor_name", "event__uid", "data")
    assert list(entries) == [
        ("event_admitted", "schedule", "", envelopes[0]["eventId"],
         {"eventId": envelopes[0]["eventId"], "type": "clock.tick.heartbeat", "source": "bridge", "door": "schedule"}),
        ("event_admitted", "schedule", "", envelopes[1]["eventId"],
         {"eventId": envelopes[1]["eventId"], "type": "customer.digest.due", "source": "clock", "door": "schedule"}),
    ]


def test_a_batch_refuses_each_invalid_envelope_by_its_position_and_admits_the_rest():
    envelopes = [request(eventId="ok-1"), request(eventId="clock:x"), request(eventId="ok-2", payload={})]
    with transaction.atomic():
        batch = admit_batch(envelopes, door=Door.OPERATOR, now=NOW, registry=get_registry(), actor_name="alice")
    assert sorted(batch.admitted) == ["ok-1"]
    assert batch.refused == {
        1: [{"code": "reserved_event_id", "detail": "eventIds starting with 'clock:' belong to the schedule door"}],
        2: [{"code": "invalid_payload", "detail": "payload at <top>: 'repo' is a required property"}],
    }
    assert list(JournalEntry.objects.values_list("action", "actor", "actor_name", "event__uid", "data")) == [
        ("event_admitted", "operator", "alice", "ok-1",
         {"eventId": "ok-1", "type": "factory.work.requested", "source": "operator", "door": "operator"}),
    ]


def test_a_batch_is_cut_into_statements_of_insert_rows_events_on_postgresql_each_journaling_its_own(monkeypatch):
    # Five events at two a statement: three inserts; on PostgreSQL each journals its events in
    # the same statement, on SQLite one more insert journals them all.
    monkeypatch.setattr(admission, "INSERT_ROWS", 2)
    envelopes = [request(eventId=f"op-{n}") for n in range(5)]
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        batch = admit_batch(envelopes, door=Door.EVENTS, now=NOW, registry=get_registry(), validate=False)
    statements = [query["sql"].split()[0] for query in queries.captured_queries]
    assert statements == (["WITH"] * 3 if connection.vendor == "postgresql" else ["INSERT"] * 4)
    assert sorted(batch.admitted) == [f"op-{n}" for n in range(5)]
    assert list(Event.objects.order_by("id").values_list("uid", flat=True)) == [f"op-{n}" for n in range(5)]
    assert list(JournalEntry.objects.order_by("id").values_list("event__uid", "action", "actor")) == [
        (f"op-{n}", "event_admitted", "events") for n in range(5)]


def test_an_empty_batch_writes_nothing():
    with transaction.atomic():
        batch = admit_batch([], door=Door.EVENTS, now=NOW, registry=get_registry())
    assert (batch.admitted, batch.duplicates, batch.refused) == ({}, set(), {})
    assert (Event.objects.count(), JournalEntry.objects.count()) == (0, 0)


def test_a_duplicate_answers_the_stored_event_and_writes_nothing(caplog):
    first = admit_event(request(), door=Door.INJECT, now=NOW)
    with caplog.at_level(logging.WARNING, logger="runtime.services.admission"):
        again = admit_event(request(), door=Door.EVENTS, now=at("2026-11-30T10:30:00Z"))
    assert (again.admitted, again.duplicate, again.event_id) == (False, True, "op-1")
    assert (again.event.pk, again.event.door, again.event.admitted_at) == (first.event.pk, "inject", NOW)
    assert (Event.objects.count(), JournalEntry.objects.count()) == (1, 1)
    assert caplog.records == []


def test_a_duplicate_written_with_another_offset_for_the_same_instant_is_not_told(caplog):
    admit_event(request(), door=Door.INJECT, now=NOW)
    with caplog.at_level(logging.WARNING, logger="runtime.services.admission"):
        admit_event(request(occurredAt="2026-11-30T10:00:00Z"), door=Door.INJECT, now=NOW)
        admit_event(request(occurredAt="2026-11-30T05:00:00-05:00"), door=Door.INJECT, now=NOW)
    assert caplog.records == []


def test_a_duplicate_with_other_content_is_told_once_with_its_event_id_and_door(caplog):
    admit_event(request(), door=Door.INJECT, now=NOW)
    with caplog.at_level(logging.WARNING, logger="runtime.services.admission"):
        admit_event(request(occurredAt="2026-11-30T10:00:01Z"), door=Door.GITHUB, now=NOW)
    assert [(r.levelname, r.getMessage(), r.action, r.eventId, r.door) for r in caplog.records] == [(
        "WARNING", "duplicate eventId op-1 with different content; the first admission stands",
        "duplicate_differs", "op-1", "github",
    )]
