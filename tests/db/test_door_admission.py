"""The signed doors' grouped admissions (``intake.door_admission``; docs/design.md §3, "The signed
doors"): one transaction for a group, each eventId admitted once, a failing group admitted again
envelope by envelope."""

import logging

import pytest
from django.db import DEFAULT_DB_ALIAS, OperationalError, connection, connections, transaction

from intake import door_admission
from intake.door_admission import DoorAdmission, admit_at_door, write_admissions
from runtime import clock
from runtime.models import Door, Event, JournalEntry
from runtime.registry import get_registry
from runtime.services.admission import AdmissionRefused
from tests.events_door import envelope

pytestmark = pytest.mark.django_db


def answers_of(answers: list[DoorAdmission]) -> list[tuple]:
    return [(a.event_id, a.admitted, a.duplicate) for a in answers]


def written(group: list[tuple]) -> list[DoorAdmission]:
    """``write_admissions`` in a transaction of its own, as ``DOORS`` calls it."""
    with transaction.atomic():
        return write_admissions(group)


def test_a_group_admits_each_new_event_id_once_and_answers_the_rest_duplicate(caplog):
    written([(envelope(eventId="stored"), Door.EVENTS)])
    group = [
        (envelope(eventId="a"), Door.EVENTS),
        (envelope(eventId="stored"), Door.EVENTS),
        (envelope(eventId="a", subject="another subject"), Door.EVENTS),
        (envelope(eventId="b"), Door.GITHUB),
        (envelope(eventId="a"), Door.GITHUB),
    ]
    with caplog.at_level(logging.WARNING, logger="runtime.services.admission"):
        answers = written(group)
    assert answers_of(answers) == [
        ("a", True, False), ("stored", False, True), ("a", False, True), ("b", True, False), ("a", False, True),
    ]
    events = {event.uid: event for event in Event.objects.all()}
    assert sorted(events) == ["a", "b", "stored"]
    assert (events["a"].door, events["a"].subject, events["b"].door) == ("events", "factory", "github")
    assert events["a"].admitted_at == events["b"].admitted_at
    entries = JournalEntry.objects.filter(action="event_admitted").order_by("event__uid")
    assert [(e.event.uid, e.actor) for e in entries] == [("a", "events"), ("b", "github"), ("stored", "events")]
    # Only the repeat with other content is told; the identical repeats are plain duplicates.
    differing = [r for r in caplog.records if getattr(r, "action", None) == "duplicate_differs"]
    assert [(r.eventId, r.door) for r in differing] == [("a", "events")]


def test_a_group_the_database_refuses_writes_nothing_and_each_envelope_alone_gets_its_own_answer(monkeypatch):
    real = door_admission.admit_batch

    def refuses_poison(envelopes, **kwargs):
        batch = real(envelopes, **kwargs)  # written, then refused: the transaction must undo it
        if any(e["eventId"] == "poison" for e in envelopes):
            raise OperationalError("the database refused the poison")
        return batch

    monkeypatch.setattr(door_admission, "admit_batch", refuses_poison)
    group = [(envelope(eventId=name), Door.EVENTS) for name in ("a", "poison", "b")]
    with pytest.raises(OperationalError):
        written(group)
    assert (Event.objects.count(), JournalEntry.objects.count()) == (0, 0)
    # What lib.group_commit then does: each envelope again, alone.
    outcomes = []
    for pair in group:
        try:
            outcomes.append(answers_of(written([pair])))
        except OperationalError as exc:
            outcomes.append(str(exc))
    assert outcomes == [[("a", True, False)], "the database refused the poison", [("b", True, False)]]
    assert sorted(Event.objects.values_list("uid", flat=True)) == ["a", "b"]
    assert JournalEntry.objects.filter(action="event_admitted").count() == 2


@pytest.mark.skipif(connection.vendor == "postgresql", reason="one statement there, which no later failure can undo")
def test_a_door_admission_whose_write_fails_is_rolled_back_by_the_group_s_own_transaction(monkeypatch):
    real = door_admission.admit_batch

    def written_then_refused(envelopes, **kwargs):
        real(envelopes, **kwargs)
        raise OperationalError("the database refused the group")

    monkeypatch.setattr(door_admission, "admit_batch", written_then_refused)
    with pytest.raises(OperationalError, match="the database refused the group"):
        admit_at_door(envelope(eventId="undone"), door=Door.EVENTS, registry=get_registry())
    assert (Event.objects.count(), JournalEntry.objects.count()) == (0, 0)


def test_a_connection_that_committed_a_door_group_within_a_second_is_not_health_checked_again(monkeypatch):
    checks, now = [], [1000.0]
    # A door group an earlier test wrote, at a real monotonic reading near 1000 s, must not count.
    monkeypatch.setattr(connections[DEFAULT_DB_ALIAS], "door_group_written", None, raising=False)
    monkeypatch.setattr(type(connections[DEFAULT_DB_ALIAS]), "is_usable", lambda self: checks.append(now[0]) or True)
    monkeypatch.setattr(door_admission, "monotonic", lambda: now[0])

    def admit_in_a_new_request(event_id: str, later: float) -> None:
        now[0] += later
        connection.health_check_done = False  # as Django's request_started leaves it
        admit_at_door(envelope(eventId=event_id), door=Door.EVENTS, registry=get_registry())

    admit_in_a_new_request("h1", 0)
    admit_in_a_new_request("h2", 0.5)
    admit_in_a_new_request("h3", 0.9)
    admit_in_a_new_request("h4", 1.0)
    assert checks == [1000.0, 1002.4]
    assert Event.objects.count() == 4


def test_admit_at_door_refuses_an_invalid_envelope_before_anything_is_written():
    with pytest.raises(AdmissionRefused) as raised:
        admit_at_door(envelope(type="factory.nothing"), door=Door.EVENTS, registry=get_registry())
    assert [e["code"] for e in raised.value.errors] == ["unregistered_type"]
    assert (Event.objects.count(), JournalEntry.objects.count()) == (0, 0)


def test_admit_at_door_admits_then_answers_duplicate():
    registry = get_registry()
    first = admit_at_door(envelope(), door=Door.EVENTS, registry=registry)
    again = admit_at_door(envelope(), door=Door.EVENTS, registry=registry)
    assert answers_of([first, again]) == [
        ("bridge:factory-triage:2026-11-30", True, False), ("bridge:factory-triage:2026-11-30", False, True),
    ]
    assert Event.objects.get().admitted_at <= clock.database_now()


def test_the_request_answered_admitted_is_the_one_whose_envelope_was_stored_whatever_the_doors_order():
    group = [
        (envelope(eventId="y"), Door.EVENTS),
        (envelope(eventId="x", source="github"), Door.GITHUB),
        (envelope(eventId="x", source="events"), Door.EVENTS),
    ]
    assert answers_of(written(group)) == [("y", True, False), ("x", True, False), ("x", False, True)]
    stored = Event.objects.get(uid="x")
    assert (stored.door, stored.source) == ("github", "github")
    assert list(JournalEntry.objects.filter(action="event_admitted", event=stored).values_list("actor", flat=True)) == [
        "github"]


def test_a_failure_reading_the_duplicates_stored_events_is_logged_and_every_answer_stands(monkeypatch, caplog):
    written([(envelope(eventId="d1"), Door.EVENTS)])

    def locked(pairs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(door_admission, "_stored", locked)
    group = [(envelope(eventId=name), Door.EVENTS) for name in ("n1", "n2", "d1")]
    with caplog.at_level(logging.WARNING, logger="intake.door_admission"):
        assert answers_of(written(group)) == [("n1", True, False), ("n2", True, False), ("d1", False, True)]
    assert sorted(Event.objects.values_list("uid", flat=True)) == ["d1", "n1", "n2"]
    assert [r.getMessage() for r in caplog.records if getattr(r, "action", None) == "duplicates_not_compared"] == [
        "the stored events of 1 duplicates could not be read to compare: database is locked"]


@pytest.mark.django_db(transaction=True)
def test_a_door_group_is_written_in_a_transaction_but_a_one_door_group_on_postgresql_is_one_statement(monkeypatch):
    real, seen = door_admission.admit_batch, []

    def recording(envelopes, **kwargs):
        seen.append((kwargs["door"].value, connection.in_atomic_block))
        return real(envelopes, **kwargs)

    monkeypatch.setattr(door_admission, "admit_batch", recording)
    admit_at_door(envelope(eventId="one"), door=Door.EVENTS, registry=get_registry())
    with door_admission.group_opening():
        write_admissions([(envelope(eventId="two"), Door.EVENTS), (envelope(eventId="three"), Door.GITHUB)])
    alone = connection.vendor != "postgresql"
    assert seen == [("events", alone), ("events", True), ("github", True)]
    assert sorted(Event.objects.values_list("uid", flat=True)) == ["one", "three", "two"]
    assert JournalEntry.objects.filter(action="event_admitted").count() == 3
