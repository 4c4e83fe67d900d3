"""``admit_event`` and ``inject`` (docs/design.md §3, §10): one way in, dedup by eventId, the door decides."""

import io
import json
import logging

import pytest
from django.core.management import call_command
from django.db import transaction

from runtime.models import Door, Event, JournalEntry
from runtime.registry import get_registry
from runtime.services.admission import AdmissionRefused, admit_batch, admit_event
from tests.conftest import at
from tests.helpers import operator_envelope as envelope

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T10:00:00Z")




def refused(env, door=Door.INJECT):
    with pytest.raises(AdmissionRefused) as raised:
        admit_event(env, door=door, now=NOW)
    assert Event.objects.count() == 0
    return [e["code"] for e in raised.value.errors]


def test_admission_stores_the_event_and_journals_the_door():
    admission = admit_event(envelope(), door=Door.INJECT, now=NOW)
    assert (admission.admitted, admission.duplicate, admission.event_id) == (True, False, "op-1")
    event = Event.objects.get()
    assert (event.door, event.occurred_at, event.admitted_at, event.loop) == ("inject", at("2026-11-30T10:00:00Z"), NOW, None)
    entry = JournalEntry.objects.get()
    assert (entry.action, entry.actor, entry.event_id) == ("event_admitted", "inject", event.pk)


def test_a_second_admission_of_an_event_id_is_a_duplicate_and_admits_nothing(caplog):
    admit_event(envelope(), door=Door.INJECT, now=NOW)
    again = admit_event(envelope(), door=Door.INJECT, now=NOW)
    assert (again.admitted, again.duplicate) == (False, True)
    with caplog.at_level(logging.WARNING):
        differs = admit_event(envelope(payload={"repo": "other"}), door=Door.INJECT, now=NOW)
    assert differs.duplicate and differs.event.payload == {"repo": "hello"}
    assert "different content" in caplog.text
    assert Event.objects.count() == 1


@pytest.mark.parametrize("event_id,door", [
    ("clock:reaper:2026-11-30T10:00:00Z", Door.INJECT), ("chain:4:0", Door.INJECT),
    ("clock:reaper:2026-11-30T10:00:00Z", Door.CHAIN), ("chain:4:0", Door.SCHEDULE),
    ("chain:4:0", Door.GITHUB), ("clock:x", Door.EVENTS), ("CLOCK:x", Door.EVENTS), ("Chain:4:0", Door.INJECT),
])
def test_reserved_prefixes_belong_to_their_door(event_id, door):
    assert refused(envelope(eventId=event_id), door) == ["reserved_event_id"]


@pytest.mark.parametrize("changes,code", [
    ({"schemaVersion": "factory.event/v2"}, "invalid_envelope"),
    ({"eventId": "x" * 201}, "invalid_envelope"),
    ({"eventId": "has space"}, "invalid_envelope"),
    ({"eventId": ""}, "invalid_envelope"),
    ({"occurredAt": "2026-11-30T10:00:00"}, "invalid_envelope"),
    ({"occurredAt": "yesterday"}, "invalid_envelope"),
    ({"extra": 1}, "invalid_envelope"),
    ({"payload": []}, "invalid_envelope"),
    ({"type": "nobody.registered"}, "unregistered_type"),
    ({"payload": {"repo": "Not A Name"}}, "invalid_payload"),
    ({"payload": {}}, "invalid_payload"),
])
def test_bad_envelopes_are_refused_and_nothing_is_written(changes, code):
    assert refused(envelope(**changes))[0] == code


def test_missing_fields_are_each_reported():
    env = envelope()
    del env["subject"], env["correlationId"]
    assert refused(env) == ["invalid_envelope", "invalid_envelope"]


def test_a_refusal_quotes_at_most_300_characters_of_a_huge_value():
    with pytest.raises(AdmissionRefused) as raised:
        admit_event(envelope(correlationId="x" * 100_000), door=Door.INJECT, now=NOW)
    (error,) = raised.value.errors
    assert error["code"] == "invalid_envelope"
    assert error["detail"].startswith("envelope at correlationId: 'xxx")
    assert error["detail"].endswith(f"xxx' is too long ({len(repr('x' * 100_000)) + len(' is too long')} characters in all)")
    assert error["detail"].count("…") == 1
    assert len(error["detail"]) < 400
    assert Event.objects.count() == 0


def test_inject_exit_codes(tmp_path, monkeypatch, capsys):
    path = tmp_path / "event.json"
    path.write_text(json.dumps(envelope()))
    call_command("inject", str(path))
    assert capsys.readouterr().out.strip() == "admitted: op-1"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(envelope()).encode())))
    call_command("inject", "-")
    assert capsys.readouterr().out.strip() == "duplicate: op-1 was already admitted; nothing new was admitted"
    path.write_text(json.dumps(envelope(eventId="clock:heartbeat:2026-11-30T10:00:00Z")))
    with pytest.raises(SystemExit) as exited:
        call_command("inject", str(path))
    assert exited.value.code == 2
    assert "reserved_event_id" in capsys.readouterr().err
    path.write_text("{not json")
    with pytest.raises(SystemExit) as exited:
        call_command("inject", str(path))
    assert exited.value.code == 2
    assert "invalid_json" in capsys.readouterr().err
    assert Event.objects.count() == 1


def test_with_a_bad_overlay_inject_refuses_clearly_and_the_tables_stay_readable(registry_files, tmp_path, capsys):
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    enabeld: true\n")
    path = tmp_path / "event.json"
    path.write_text(json.dumps(envelope()))
    with pytest.raises(SystemExit) as exited:
        call_command("inject", str(path))
    assert exited.value.code == 2
    assert "refused: registry_invalid: " in capsys.readouterr().err
    call_command("events", "--json")
    assert json.loads(capsys.readouterr().out) == []


def test_a_batch_journals_exactly_the_events_it_inserted_in_order_with_the_bridges_job():
    admit_event(envelope(eventId="op-0"), door=Door.INJECT, now=NOW)
    later = at("2026-11-30T10:00:01Z")
    envelopes = [
        envelope(eventId="op-1"),
        envelope(eventId="op-0"),  # admitted before: a duplicate, journaled once
        envelope(eventId="br-1", source="bridge", payload={"repo": "hello", "loop": "nightly"}),
        envelope(eventId="br-2", source="bridge", payload={"repo": "hello", "loop": 7}),  # no job: not a name
        envelope(eventId="op-1"),  # twice in the batch
    ]
    with transaction.atomic():
        batch = admit_batch(envelopes, door=Door.EVENTS, now=later, registry=get_registry(), validate=False)
    assert (sorted(batch.admitted), batch.duplicates, batch.refused) == (["br-1", "br-2", "op-1"], {"op-0"}, {})
    base = {"type": "factory.work.requested", "source": "operator"}
    assert list(JournalEntry.objects.order_by("id").values_list("event__uid", "action", "actor", "at", "data")) == [
        ("op-0", "event_admitted", "inject", NOW, {**base, "eventId": "op-0", "door": "inject"}),
        ("op-1", "event_admitted", "events", later, {**base, "eventId": "op-1", "door": "events"}),
        ("br-1", "event_admitted", "events", later,
         {**base, "eventId": "br-1", "source": "bridge", "door": "events", "job": "nightly"}),
        ("br-2", "event_admitted", "events", later, {**base, "eventId": "br-2", "source": "bridge", "door": "events"}),
    ]
    assert [batch.admitted[uid] for uid in ("op-1", "br-1", "br-2")] == sorted(batch.admitted.values())


def test_a_batchs_ids_are_the_ones_stored_when_duplicates_are_among_its_rows():
    """The ids a batch answers are those its rows were stored with, for exactly the rows it
    inserted, duplicates of stored events interleaved with them (on SQLite a skipped row
    takes an id of its own first: the inserted rows' ids are not consecutive)."""
    for n in range(2):
        admit_event(envelope(eventId=f"old-{n}"), door=Door.INJECT, now=NOW)
    uids = ["old-1", "new-1", "old-0", "new-2", "new-3"]
    with transaction.atomic():
        batch = admit_batch([envelope(eventId=uid) for uid in uids], door=Door.INJECT, now=NOW,
                            registry=get_registry(), validate=False)
    stored = dict(Event.objects.filter(uid__startswith="new-").values_list("uid", "id"))
    assert (batch.admitted, batch.duplicates) == (stored, {"old-0", "old-1"})
    assert sorted(stored) == ["new-1", "new-2", "new-3"]
    assert list(JournalEntry.objects.filter(event__uid__startswith="new-").order_by("id").values_list(
        "event_id", "data__eventId")) == [(stored[uid], uid) for uid in ("new-1", "new-2", "new-3")]

