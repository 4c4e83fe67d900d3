"""POST /events: signed factory envelopes, every row of docs/design.md §10 and docs/intake.md.

The clock is frozen (``time_machine``) so the ±300 s window is tested to the second.
"""

import json

import pytest
import time_machine
from django.db import connection
from django.test import Client

from intake.bodies import EVENTS_MAX_BODY_BYTES
from lib.signing import sign
from runtime.models import Event, JournalEntry
from tests.events_door import NOW, NOW_TS, SECRET, body_of, codes_of, envelope, error_of, post

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("host_clock_as_database_clock")]


@pytest.fixture(autouse=True)
def events_door(settings):
    settings.FACTORY_EVENTS_SECRET = SECRET
    with time_machine.travel(NOW, tick=False):
        yield


# --- admitted and duplicate ------------------------------------------------------------------


def test_signed_envelope_is_admitted_through_the_events_door():
    response = post(body_of(envelope()))
    assert (response.status_code, response.json()) == (
        202, {"admitted": True, "duplicate": False, "eventId": "bridge:factory-triage:2026-11-30"},
    )
    event = Event.objects.get()
    assert (event.type, event.door, event.source, event.admitted_at) == (
        "factory.triage.requested", "events", "bridge", NOW,
    )
    assert JournalEntry.objects.get(event=event, action="event_admitted").actor == "events"


def test_same_event_again_is_a_duplicate_and_admits_nothing():
    body = body_of(envelope())
    assert post(body).status_code == 202
    response = post(body)
    assert (response.status_code, response.json()) == (
        200, {"admitted": False, "duplicate": True, "eventId": "bridge:factory-triage:2026-11-30"},
    )
    assert Event.objects.count() == 1


@pytest.mark.parametrize("event_type, payload", [
    ("factory.work.requested", {"repo": "hello"}),
    ("factory.merge.requested", {"repo": "hello"}),
    ("factory.merge.requested", {"repo": "hello", "prNumbers": [2], "headSha": "ec26c3e57ca3a959ca5aad62de7213c562f8c821"}),
    ("factory.ship.requested", {"repo": "hello"}),
    ("github.workflow-run.failed", {"repo": "Codertocat/Hello-World", "runId": 12345}),
    ("factory.triage.requested", {"repo": "factory"}),
    ("factory.unblock.requested", {"repo": "factory"}),
])
def test_every_request_type_of_the_specification_is_registered(event_type, payload):
    event_id = f"e-{event_type}-{len(payload)}"
    response = post(body_of(envelope(eventId=event_id, type=event_type, payload=payload)))
    assert (response.status_code, response.json()) == (202, {"admitted": True, "duplicate": False, "eventId": event_id})
    stored = Event.objects.get().envelope()
    assert (stored["type"], stored["eventId"], stored["payload"]) == (event_type, event_id, payload)


# --- 401: nothing parsed, nothing written ----------------------------------------------------------


def test_unset_secret_disables_the_route(settings):
    settings.FACTORY_EVENTS_SECRET = ""
    assert error_of(post(body_of(envelope()), secret="")) == (401, "route_disabled")
    assert Event.objects.count() == 0


@pytest.mark.parametrize("missing", ["timestamp", "signature"])
def test_missing_signature_header_is_refused(missing):
    body = body_of(envelope())
    response = post(body, signature=None) if missing == "signature" else post(
        body, timestamp=None, signature=sign(SECRET, b"." + body),
    )
    assert error_of(response) == (401, "missing_signature")
    assert Event.objects.count() == 0


def test_signature_under_another_secret_is_refused():
    assert error_of(post(body_of(envelope()), secret="not-the-secret")) == (401, "bad_signature")
    assert Event.objects.count() == 0


def test_github_secret_does_not_sign_factory_events(settings):
    settings.FACTORY_GITHUB_WEBHOOK_SECRET = "github-secret"
    assert error_of(post(body_of(envelope()), secret="github-secret")) == (401, "bad_signature")


def test_signature_over_a_re_encoded_body_is_refused():
    sent = json.dumps(envelope(subject="caf\u00e9"), ensure_ascii=False).encode()
    signed = json.dumps(envelope(subject="caf\u00e9")).encode()  # "caf\u00e9" escaped: other bytes
    response = post(sent, signature=sign(SECRET, f"{NOW_TS}.".encode() + signed))
    assert error_of(response) == (401, "bad_signature")
    assert Event.objects.count() == 0


def test_signature_without_the_timestamp_is_refused():
    body = body_of(envelope())
    assert error_of(post(body, signature=sign(SECRET, body))) == (401, "bad_signature")


def test_signature_with_a_sha1_prefix_is_refused():
    body = body_of(envelope())
    response = post(body, signature=sign(SECRET, f"{NOW_TS}.".encode() + body).replace("sha256=", "sha1="))
    assert error_of(response) == (401, "bad_signature")


@pytest.mark.parametrize("skew", [-301, 301, -86400, 86400])
def test_timestamp_outside_five_minutes_is_stale(skew):
    assert error_of(post(body_of(envelope()), timestamp=NOW_TS + skew)) == (401, "stale_timestamp")
    assert Event.objects.count() == 0


@pytest.mark.parametrize("skew", [-300, 300, 0])
def test_timestamp_within_five_minutes_is_accepted(skew):
    assert post(body_of(envelope()), timestamp=NOW_TS + skew).status_code == 202


@pytest.mark.parametrize("timestamp", ["", "-5", "1.5", "now", "2026-11-30T21:00:00Z"])
def test_timestamp_that_is_not_unix_seconds_is_refused(timestamp):
    body = body_of(envelope())
    response = post(body, timestamp=timestamp)
    assert response.status_code == 401
    assert Event.objects.count() == 0


def test_a_session_does_not_stand_in_for_the_signature(approver):
    client = Client(enforce_csrf_checks=True)
    client.force_login(approver)
    assert error_of(post(body_of(envelope()), signature=None, client=client)) == (401, "missing_signature")
    assert post(body_of(envelope()), client=client).status_code == 202


# --- 413, 415, 422 and the check order -------------------------------------------------------------


def test_body_of_exactly_one_mebibyte_is_taken():
    body = body_of(envelope())
    body += b" " * (EVENTS_MAX_BODY_BYTES - len(body))
    assert len(body) == EVENTS_MAX_BODY_BYTES
    assert post(body).status_code == 202


def test_body_over_one_mebibyte_is_413_before_the_signature():
    body = body_of(envelope()) + b" " * EVENTS_MAX_BODY_BYTES
    assert error_of(post(body, signature=None)) == (413, "payload_too_large")
    assert error_of(post(body)) == (413, "payload_too_large")
    assert Event.objects.count() == 0


def test_signature_is_checked_before_the_content_type():
    assert error_of(post(b"hello", content_type="text/plain", signature=None)) == (401, "missing_signature")


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "", "application/jsonx"])
def test_signed_body_that_is_not_declared_json_is_415(content_type):
    assert error_of(post(body_of(envelope()), content_type=content_type)) == (415, "unsupported_media_type")
    assert Event.objects.count() == 0


def test_content_type_is_checked_before_the_json():
    assert error_of(post(b"{not json", content_type="text/plain")) == (415, "unsupported_media_type")


@pytest.mark.parametrize("body", [
    b"", b"{", b"not json", b"\xff\xfe\xfd", b'{"a": NaN}', b'{"a": Infinity}',
    b"[" * 2000 + b"]" * 2000, b"[" * 100 + b"]" * 100, b"1" * 5000,
    b'{"eventId": "a", "eventId": "b"}', b'{"payload": {"repo": "a", "repo": "b"}}',
])
def test_signed_body_that_is_not_json_is_invalid_json(body):
    assert codes_of(post(body)) == (422, ["invalid_json"])
    assert Event.objects.count() == 0


def test_a_signed_envelope_with_a_number_beyond_a_double_is_invalid_json_not_a_500():
    body = body_of(envelope(payload={"repo": "factory", "size": 0})).replace(b'"size": 0', b'"size": 1e400')
    response = post(body)
    assert codes_of(response) == (422, ["invalid_json"])
    assert response.json()["errors"][0]["detail"] == "the body is not JSON: the number 1e400 is too large for a 64-bit float"
    assert Event.objects.count() == 0


@pytest.mark.parametrize("document, code", [
    ([], "invalid_envelope"),
    ("text", "invalid_envelope"),
    (envelope(schemaVersion="factory.event/v2"), "invalid_envelope"),
    (envelope(eventId="has spaces"), "invalid_envelope"),
    (envelope(eventId="x" * 201), "invalid_envelope"),
    (envelope(occurredAt="2026-11-30T21:00:00"), "invalid_envelope"),
    (envelope(occurredAt="9999-12-31T23:59:59-01:00"), "invalid_envelope"),
    (envelope(subject="nul\u0000here"), "invalid_envelope"),
    (envelope(eventId="clock:heartbeat:2026-11-30T21:00:00Z"), "reserved_event_id"),
    (envelope(eventId="chain:7:0"), "reserved_event_id"),
    (envelope(type="factory.nothing.requested"), "unregistered_type"),
    (envelope(payload={}), "invalid_payload"),
    (envelope(payload={"repo": "Not A Repo"}), "invalid_payload"),
    (envelope(payload={"repo": "factory", "extra": 1}), "invalid_payload"),
])
def test_envelope_that_cannot_be_admitted_is_422_with_its_code(document, code):
    status, codes = codes_of(post(body_of(document)))
    assert status == 422 and code in codes
    assert Event.objects.count() == 0


@pytest.mark.parametrize("where, text", [
    ("subject", b"a\\u0000b"), ("subject", b"\\ud800"), ("payload", b"a\\u0000b"), ("payload", b"\\udfff"),
])
def test_text_the_database_cannot_store_is_refused_not_a_crash(registry_files, where, text):
    # PostgreSQL refuses NUL in text and jsonb; no database stores a lone surrogate. A type
    # without a payload schema lets any payload string reach that check.
    registry_files.update("event-types.json", lambda types: types.update({"test.open": {"target": "heartbeat@1"}}))
    body = body_of(envelope(type="test.open", subject="PLACE", payload={"note": "PLACE"}))
    body = body.replace(b'"subject": "PLACE"', b'"subject": "' + text + b'"' if where == "subject" else b'"subject": "s"')
    body = body.replace(b'"note": "PLACE"', b'"note": "' + text + b'"' if where == "payload" else b'"note": "n"')
    status, codes = codes_of(post(body))
    assert (status, codes) == (422, ["invalid_envelope" if where == "subject" else "invalid_payload"])
    assert Event.objects.count() == 0


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_other_methods_are_refused_in_the_doors_shape(client, method):
    for route in ("/events", "/github"):
        response = getattr(client, method)(route)
        assert (response.status_code, response.json()["error"]) == (405, "method_not_allowed")
        assert "not allowed" in response.json()["detail"]


# --- round trips (docs/performance.md, "Statements per operation") ---------------------------


def test_an_admission_is_one_statement_on_postgresql_and_its_two_inserts_on_sqlite(django_assert_num_queries):
    # PostgreSQL: the events' insert with their journal entries, committing itself. SQLite: the
    # group's transaction (here a savepoint of the test's), the events' and the journal's inserts.
    with django_assert_num_queries(1 if connection.vendor == "postgresql" else 4) as captured:
        assert post(body_of(envelope())).status_code == 202
    assert [q["sql"].split()[0] for q in captured.captured_queries] == (
        ["WITH"] if connection.vendor == "postgresql" else ["SAVEPOINT", "INSERT", "INSERT", "RELEASE"]
    )


def test_a_duplicate_adds_only_the_read_of_the_stored_event_it_is_compared_with(django_assert_num_queries):
    assert post(body_of(envelope())).status_code == 202
    with django_assert_num_queries(2 if connection.vendor == "postgresql" else 4) as captured:
        assert post(body_of(envelope())).status_code == 200
    assert [q["sql"].split()[0] for q in captured.captured_queries] == (
        ["WITH", "SELECT"] if connection.vendor == "postgresql" else ["SAVEPOINT", "INSERT", "SELECT", "RELEASE"]
    )
