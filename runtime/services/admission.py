"""``admit_event``: the one way an event gets into the runtime (docs/design.md §3).

Every door — the slot loop, the outbox, ``/github``, ``/events``, ``inject`` — calls it.
It validates the envelope, the type and the payload, refuses reserved eventIds from
the wrong door, and inserts under the unique eventId, so a second admission of the same
eventId admits nothing and reports a duplicate.
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction

from lib.instants import InstantError, format_instant, parse_instant
from lib.json_schema import validator_for
from lib.json_text import canonical_json
from lib.refusals import Refused
from runtime.models import DOOR_ACTOR, Door, Event
from runtime.registry import Registry, get_registry

from .journal import record

logger = logging.getLogger(__name__)

#: eventId prefixes only one door may use: ticks and chain events have derived identities.
RESERVED_PREFIXES = {"clock:": Door.SCHEDULE, "chain:": Door.CHAIN}

@dataclass(frozen=True)
class Admission:
    """What ``admit_event`` did: ``admitted`` xor ``duplicate``; ``event`` is the stored row."""

    admitted: bool
    duplicate: bool
    event_id: str
    event: Event


class AdmissionRefused(Refused):
    """The envelope was refused (422); ``errors`` is every reason, ``[{"code": ..., "detail": ...}]``
    (docs/design.md §10), and ``code``/``detail`` are the first one's."""

    status = 422

    def __init__(self, errors: list[dict]):
        self.errors = errors
        super().__init__(errors[0]["code"], errors[0]["detail"])

    def __str__(self) -> str:
        return "; ".join(f"{e['code']}: {e['detail']}" for e in self.errors)

    def as_errors(self) -> list[dict]:
        return list(self.errors)


def _schema_errors(schema: dict, document, code: str, what: str) -> list[dict]:
    errors = []
    for err in sorted(validator_for(schema).iter_errors(document), key=lambda e: list(map(str, e.absolute_path))):
        where = "/".join(str(p) for p in err.absolute_path) or "<top>"
        errors.append({"code": code, "detail": f"{what} at {where}: {err.message}"})
    return errors


def _unstorable_text(document) -> str | None:
    """Describe the first string (key or value) in ``document`` the database cannot store, or None.

    PostgreSQL refuses U+0000 in text and jsonb, and no database takes a lone surrogate
    (``"\\ud800"`` decodes to one in Python); refused here, they are a 422 rather than a 500.
    """
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str):
            if "\x00" in node:
                return "a string contains U+0000 (NUL), which cannot be stored"
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return "a string contains a lone surrogate, which is not Unicode text"
    return None


def validate_envelope(envelope, *, door: Door, registry: Registry) -> list[dict]:
    """Return every reason ``envelope`` may not be admitted through ``door`` (empty: admissible).

    Checks, in order: the ``factory.event/v1`` schema, ``occurredAt`` as RFC 3339 with an
    offset, the reserved prefixes, text the database can store, the type's registration,
    the payload schema, storable text in the payload.
    """
    if not isinstance(envelope, dict):
        return [{"code": "invalid_envelope", "detail": "the envelope must be a JSON object"}]
    errors = _schema_errors(registry.envelope_schema, envelope, "invalid_envelope", "envelope")
    if isinstance(envelope.get("occurredAt"), str):
        try:
            parse_instant(envelope["occurredAt"])
        except InstantError as exc:
            errors.append({"code": "invalid_envelope", "detail": f"envelope at occurredAt: {exc}"})
    event_id = envelope.get("eventId")
    if isinstance(event_id, str):
        for prefix, owner in RESERVED_PREFIXES.items():
            if event_id.startswith(prefix) and door != owner:
                errors.append({
                    "code": "reserved_event_id",
                    "detail": f"eventIds starting with {prefix!r} belong to the {owner.value} door",
                })
    if not errors and (problem := _unstorable_text({k: v for k, v in envelope.items() if k != "payload"})):
        errors.append({"code": "invalid_envelope", "detail": f"envelope: {problem}"})
    if errors:
        return errors
    event_type = registry.event_types.get(envelope["type"])
    if event_type is None:
        return [{"code": "unregistered_type", "detail": f"event type {envelope['type']!r} is not registered"}]
    if event_type.payload_schema is not None:
        errors = _schema_errors(event_type.payload_schema, envelope["payload"], "invalid_payload", "payload")
    if not errors and (problem := _unstorable_text(envelope["payload"])):
        errors.append({"code": "invalid_payload", "detail": f"payload: {problem}"})
    return errors


def _bridge_job(envelope: dict, door: Door) -> dict:
    """``{"job": name}`` for an event the host clock bridge sent, which names its job in
    ``payload.loop`` (docs/host-clock.md), so the journal says which job admitted it."""
    loop = envelope["payload"].get("loop")
    if envelope["source"] == "bridge" and door != Door.SCHEDULE and isinstance(loop, str):
        return {"job": loop}
    return {}


def admit_event(envelope, *, door: Door, now: datetime, registry: Registry | None = None) -> Admission:
    """Validate and store ``envelope`` as it came through ``door`` at ``now`` (UTC).

    Returns an ``Admission``; a known eventId is a duplicate (the first stays; differing
    content is logged as a warning). Raises ``AdmissionRefused`` with every error found.
    Ticks (door ``schedule``) record their loop, key and slot from the payload.
    """
    registry = registry or get_registry()
    errors = validate_envelope(envelope, door=door, registry=registry)
    if errors:
        raise AdmissionRefused(errors)
    event_id = envelope["eventId"]
    payload = envelope["payload"]
    tick = door == Door.SCHEDULE and "loop" in payload and "slot" in payload
    try:
        with transaction.atomic():
            event = Event.objects.create(
                uid=event_id,
                type=envelope["type"],
                source=envelope["source"],
                subject=envelope["subject"],
                occurred_at=parse_instant(envelope["occurredAt"]),
                correlation_id=envelope["correlationId"],
                causation_id=envelope.get("causationId"),
                payload=payload,
                door=door,
                admitted_at=now,
                loop=payload["loop"] if tick else None,
                loop_key=payload.get("key") if tick else None,
                slot=parse_instant(payload["slot"]) if tick else None,
            )
            record(
                "event_admitted",
                DOOR_ACTOR[door],
                at=now,
                event=event,
                data={"eventId": event_id, "type": event.type, "source": event.source, "door": door.value,
                      **_bridge_job(envelope, door)},
            )
    except IntegrityError:
        existing = Event.objects.filter(uid=event_id).first()
        if existing is None:
            raise
        if canonical_json(existing.envelope()) != canonical_json(_normalised(envelope)):
            logger.warning(
                "duplicate eventId %s with different content; the first admission stands",
                event_id,
                extra={"action": "duplicate_differs", "eventId": event_id, "door": door.value},
            )
        return Admission(admitted=False, duplicate=True, event_id=event_id, event=existing)
    return Admission(admitted=True, duplicate=False, event_id=event_id, event=event)


def _normalised(envelope: dict) -> dict:
    """The envelope as it would be stored (``occurredAt`` in UTC), to compare with a stored one."""
    data = dict(envelope)
    data["occurredAt"] = format_instant(parse_instant(envelope["occurredAt"]))
    return data
