"""Every reason ``validate_envelope`` gives, word for word (docs/design.md §3, §10): where a schema
error is (a nested path, the top), the 300-character cut of a message, the occurredAt refusal,
the reserved prefixes, text the database cannot store in the envelope and in the payload, a type
with no payload schema; and ``AdmissionRefused`` carrying them all (no database: nothing is written
before these checks)."""

import pytest

from runtime.models import Door
from runtime.registry import get_registry
from runtime.services.admission import AdmissionRefused, admit_event, validate_envelope
from tests.conftest import at
from tests.helpers import operator_envelope as envelope


def reasons(env, door=Door.INJECT) -> list[tuple[str, str]]:
    return [(error["code"], error["detail"]) for error in validate_envelope(env, door=door, registry=get_registry())]


def with_test_types(registry_files) -> None:
    """Two event types of the test's own: one whose payload nests an object, one with no payload schema."""
    registry_files.write("schemas/nested-request.json", {
        "type": "object", "required": ["repo"],
        "properties": {"repo": {"type": "object", "properties": {"name": {"type": "string"}}}},
    })

    def add(types):
        types["test.nested.requested"] = {"target": "reaper@1", "payloadSchema": "nested-request.json"}
        types["test.free.requested"] = {"target": "reaper@1"}

    registry_files.update("event-types.json", add)


def test_a_valid_envelope_has_no_reason():
    assert reasons(envelope()) == []


def test_an_envelope_that_is_not_an_object_is_refused_whole():
    assert reasons(["op-1"]) == [("invalid_envelope", "the envelope must be a JSON object")]


def test_a_missing_field_is_at_the_top_and_the_errors_come_in_path_order():
    # jsonschema finds eventId's error before correlationId's (the schema's order); the paths sort them.
    env = envelope(eventId="has space", correlationId="")
    del env["subject"]
    assert reasons(env) == [
        ("invalid_envelope", "envelope at <top>: 'subject' is a required property"),
        ("invalid_envelope", "envelope at correlationId: '' should be non-empty"),
        ("invalid_envelope", "envelope at eventId: 'has space' does not match '^[\\\\x21-\\\\x7e]+$'"),
    ]


def test_a_nested_payload_error_names_its_whole_path(registry_files):
    with_test_types(registry_files)
    env = envelope(type="test.nested.requested", payload={"repo": {"name": 7}})
    assert reasons(env) == [("invalid_payload", "payload at repo/name: 7 is not of type 'string'")]


def test_a_type_with_no_payload_schema_takes_any_payload_but_not_unstorable_text(registry_files):
    with_test_types(registry_files)
    assert reasons(envelope(type="test.free.requested", payload={"anything": [1, {"x": None}]})) == []
    assert reasons(envelope(type="test.free.requested", payload={"deep": [{"x": "a\x00b"}]})) == [
        ("invalid_payload", "payload: a string contains U+0000 (NUL), which cannot be stored")]
    assert reasons(envelope(type="test.free.requested", payload={"\ud800": 1})) == [
        ("invalid_payload", "payload: a string contains a lone surrogate, which is not Unicode text")]


def test_a_message_of_exactly_300_characters_is_kept_whole_and_one_more_keeps_its_head_and_its_rule():
    value = "x" * 286  # the message: repr (288) + " is too long" (12) = 300 characters
    assert reasons(envelope(correlationId=value)) == [
        ("invalid_envelope", f"envelope at correlationId: '{value}' is too long")]
    longer = value + "x"
    message = f"'{longer}' is too long"
    assert reasons(envelope(correlationId=longer)) == [
        ("invalid_envelope", f"envelope at correlationId: {message[:200]}…{message[-100:]} (301 characters in all)")]
    assert message[-100:].endswith("x' is too long")


def test_an_occurred_at_without_an_offset_is_refused_with_the_parsers_reason():
    assert reasons(envelope(occurredAt="2026-11-30T10:00:00")) == [
        ("invalid_envelope", "envelope at occurredAt: '2026-11-30T10:00:00' has no UTC offset; write Z or ±HH:MM")]


@pytest.mark.parametrize(("event_id", "door", "detail"), [
    ("clock:x", Door.EVENTS, "eventIds starting with 'clock:' belong to the schedule door"),
    ("Chain:4:0", Door.INJECT, "eventIds starting with 'chain:' belong to the chain door"),
    ("MANUAL:reaper", Door.EVENTS, "eventIds starting with 'manual:' belong to the operator door"),
])
def test_a_reserved_prefix_from_another_door_is_refused_naming_its_door(event_id, door, detail):
    assert reasons(envelope(eventId=event_id), door) == [("reserved_event_id", detail)]


@pytest.mark.parametrize(("event_id", "door"), [
    ("clock:x", Door.SCHEDULE), ("chain:4:0", Door.CHAIN), ("manual:reaper", Door.OPERATOR), ("clocks-1", Door.INJECT),
])
def test_a_reserved_prefix_through_its_own_door_and_a_mere_likeness_are_admissible(event_id, door):
    assert reasons(envelope(eventId=event_id), door) == []


@pytest.mark.parametrize(("changes", "detail"), [
    ({"subject": "a\x00b"}, "envelope: a string contains U+0000 (NUL), which cannot be stored"),
    ({"causationId": "\udc80"}, "envelope: a string contains a lone surrogate, which is not Unicode text"),
    ({"source": "op\x00"}, "envelope: a string contains U+0000 (NUL), which cannot be stored"),
])
def test_text_the_database_cannot_store_in_the_envelope_is_refused(changes, detail):
    assert reasons(envelope(**changes)) == [("invalid_envelope", detail)]


@pytest.mark.parametrize(("payload", "detail"), [
    ({"repo": "hello", "key": "a\x00"}, "payload: a string contains U+0000 (NUL), which cannot be stored"),
    ({"repo": "hello", "loop": "\ud800"}, "payload: a string contains a lone surrogate, which is not Unicode text"),
])
def test_text_the_database_cannot_store_in_the_payload_is_refused(payload, detail):
    assert reasons(envelope(payload=payload)) == [("invalid_payload", detail)]


def test_a_schema_error_and_a_nul_elsewhere_give_the_schema_error_alone():
    assert reasons(envelope(subject="a\x00", extra=1)) == [
        ("invalid_envelope", "envelope at <top>: Additional properties are not allowed ('extra' was unexpected)")]


def test_an_unregistered_type_is_refused_alone():
    assert reasons(envelope(type="nobody.registered")) == [
        ("unregistered_type", "event type 'nobody.registered' is not registered")]


def test_the_refusal_carries_every_reason_and_the_first_as_its_code_and_detail():
    env = envelope(eventId="clock:x")
    del env["subject"]
    with pytest.raises(AdmissionRefused) as raised:
        admit_event(env, door=Door.INJECT, now=at("2026-11-30T10:00:00Z"))
    refusal = raised.value
    first = ("invalid_envelope", "envelope at <top>: 'subject' is a required property")
    second = ("reserved_event_id", "eventIds starting with 'clock:' belong to the schedule door")
    assert (refusal.code, refusal.detail, refusal.status) == (*first, 422)
    assert refusal.as_errors() == [{"code": code, "detail": detail} for code, detail in (first, second)]
    assert refusal.as_errors() is not refusal.errors
    assert str(refusal) == f"{first[0]}: {first[1]}; {second[0]}: {second[1]}"
