"""``admit_event``: the one way an event gets into the runtime (docs/design.md §3).

Every door — the slot loop, the outbox, ``/github``, ``/events``, ``inject`` — calls it,
or its batched form ``admit_batch`` (the slot loop's ticks and the outbox). It validates
the envelope, the type and the payload, refuses reserved eventIds from the wrong door,
and inserts under the unique eventId, so a second admission of the same eventId admits
nothing and reports a duplicate.
"""

import functools
import json
import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction

from lib.instants import InstantError, format_instant, parse_instant
from lib.json_schema import validator_for
from lib.json_text import canonical_json
from lib.refusals import Refused
from runtime.models import DOOR_ACTOR, Door, Event, JournalEntry
from runtime.prepared import prepared_cursor
from runtime.registry import Registry, get_registry

from .bulk_rows import recordset, stored_instant
from .journal import COLUMNS as JOURNAL_COLUMNS
from .journal import entry_values, record_values

logger = logging.getLogger(__name__)

#: eventId prefixes only one door may use, in any letter case: ticks and chain events have
#: derived identities.
RESERVED_PREFIXES = {"clock:": Door.SCHEDULE, "chain:": Door.CHAIN, "manual:": Door.OPERATOR}
#: Most rows one ``INSERT … VALUES`` of ``admit_batch`` carries: about 15 parameters a row
#: stays far below SQLite's 32,766 and PostgreSQL's 65,535 parameters a statement.
INSERT_ROWS = 1000

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


#: Most characters of a schema error's message an answer carries: the message quotes the
#: refused value, and a 100 KB correlationId made a 100 KB answer. A longer one keeps its
#: first ``MESSAGE_HEAD`` characters and its last ``MESSAGE_TAIL``: jsonschema's messages end
#: with the rule broken ("… is too long", "… does not match '^…$'").
MESSAGE_CHARACTERS = 300
MESSAGE_HEAD, MESSAGE_TAIL = 200, 100


def _schema_errors(schema: dict, document, code: str, what: str) -> list[dict]:
    errors = []
    for err in sorted(validator_for(schema).iter_errors(document), key=lambda e: list(map(str, e.absolute_path))):
        where = "/".join(str(p) for p in err.absolute_path) or "<top>"
        message = err.message
        if len(message) > MESSAGE_CHARACTERS:
            message = f"{message[:MESSAGE_HEAD]}…{message[-MESSAGE_TAIL:]} ({len(message)} characters in all)"
        errors.append({"code": code, "detail": f"{what} at {where}: {message}"})
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
            if node.isascii():  # no surrogate, and no copy made to find out
                continue
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
            # In any case: ``CLOCK:…`` from outside would read as a tick to a person.
            if event_id[:len(prefix)].lower() == prefix and door != owner:
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


@functools.lru_cache(maxsize=4096)
def _instant(text: str) -> datetime:
    """``parse_instant``, remembered: the ticks of a burst share their slot."""
    return parse_instant(text)


def _event_row(envelope: dict, door: Door, now: datetime) -> Event:
    """The unsaved ``Event`` of a valid ``envelope``; ticks record their loop, key and slot."""
    payload = envelope["payload"]
    tick = door == Door.SCHEDULE and "loop" in payload and "slot" in payload
    return Event(
        uid=envelope["eventId"],
        type=envelope["type"],
        source=envelope["source"],
        subject=envelope["subject"],
        occurred_at=_instant(envelope["occurredAt"]),
        correlation_id=envelope["correlationId"],
        causation_id=envelope.get("causationId"),
        payload=payload,
        door=door,
        admitted_at=now,
        loop=payload["loop"] if tick else None,
        loop_key=payload.get("key") if tick else None,
        slot=_instant(payload["slot"]) if tick else None,
    )


@dataclass
class BatchAdmission:
    """What ``admit_batch`` did: ``admitted`` maps each inserted eventId to its new
    ``Event`` id; ``duplicates`` are the eventIds already present (another process, an
    earlier iteration, or twice in the batch); ``refused`` maps the position in the batch
    of each refused envelope to its ``[{code, detail}]``."""

    admitted: dict[str, int] = field(default_factory=dict)
    duplicates: set[str] = field(default_factory=set)
    refused: dict[int, list[dict]] = field(default_factory=dict)


def admit_batch(
    envelopes: list[dict], *, door: Door, now: datetime, registry: Registry, validate: bool = True, actor_name: str = "",
) -> BatchAdmission:
    """Admit many envelopes through ``door`` at ``now``: ``admit_event`` for a batch; call
    inside the caller's transaction (docs/design.md §3).

    One ``INSERT … ON CONFLICT (uid) DO NOTHING RETURNING id, uid`` per ``INSERT_ROWS``
    envelopes, so the rows this call inserted are known from the insert itself — never
    from a read-back, which another inserter's rows would fool — and their
    ``event_admitted`` entries for exactly those: on PostgreSQL in the same statement
    (``_insert_journaled``), on SQLite one multi-row insert after them. Rows are built as column values, not
    model instances (a burst of 10,000 ticks is one batch: docs/performance.md).
    ``validate=False`` skips ``validate_envelope``: only for ticks built from a registry
    that validated the loop's sample tick at load (docs/design.md §3). A refused envelope
    is left out and reported; the caller journals it. Duplicates are not compared with the
    stored content. ``actor_name`` names the person of the ``operator`` door (a trigger) in
    the ``event_admitted`` entries.
    """
    by_id, refused = {}, {}
    for position, envelope in enumerate(envelopes):
        errors = validate_envelope(envelope, door=door, registry=registry) if validate else []
        if errors:
            refused[position] = errors
        else:
            by_id.setdefault(envelope["eventId"], envelope)
    postgres = connection.vendor == "postgresql"
    rows = [_event_values(envelope, door, now, postgres) for envelope in by_id.values()]
    admitted = {}
    for first in range(0, len(rows), INSERT_ROWS):
        chunk = rows[first:first + INSERT_ROWS]
        admitted.update(_insert_journaled(chunk, door, now, actor_name) if postgres else _insert_new(chunk))
    if not postgres:
        actor = DOOR_ACTOR[door]
        record_values([
            entry_values("event_admitted", actor, at=now, actor_name=actor_name, event_id=admitted[event_id], data={
                "eventId": event_id, "type": envelope["type"], "source": envelope["source"], "door": door.value,
                **_bridge_job(envelope, door),
            })
            for event_id, envelope in by_id.items() if event_id in admitted
        ])
    duplicates = set(by_id) - set(admitted)
    return BatchAdmission(admitted=admitted, duplicates=duplicates, refused=refused)


#: The columns ``admit_batch`` writes, in the order of ``_event_values``: every ``Event``
#: column but the generated id (a test holds the two lists together).
EVENT_COLUMNS = (
    "uid", "type", "source", "subject", "occurred_at", "correlation_id", "causation_id", "payload", "door",
    "admitted_at", "loop", "loop_key", "slot", "planned_at", "planning_outcome", "planning_reason",
)


def _event_values(envelope: dict, door: Door, now: datetime, postgres: bool) -> tuple:
    """The new ``Event`` row of a valid ``envelope`` as ``EVENT_COLUMNS`` values in their
    database form (what ``_event_row`` would store; on PostgreSQL the values of
    ``bulk_rows.json_rows``): ticks record their loop, key and slot; not planned yet."""
    payload = envelope["payload"]
    tick = door == Door.SCHEDULE and "loop" in payload and "slot" in payload
    return (
        envelope["eventId"], envelope["type"], envelope["source"], envelope["subject"],
        stored_instant(_instant(envelope["occurredAt"])), envelope["correlationId"], envelope.get("causationId"),
        payload if postgres else json.dumps(payload), door.value, stored_instant(now),
        payload["loop"] if tick else None, payload.get("key") if tick else None,
        stored_instant(_instant(payload["slot"])) if tick else None, None, None, "",
    )


def _insert_new(rows: list[tuple]) -> dict[str, int]:
    """Insert ``rows`` (``_event_values``) in one ``INSERT … VALUES``, skipping eventIds
    already stored; returns ``{eventId: id}`` of the rows inserted (SQLite 3.35+)."""
    if not rows:
        return {}
    quote = connection.ops.quote_name
    columns = ", ".join(quote(column) for column in EVENT_COLUMNS)
    placeholders = "(" + ", ".join(["%s"] * len(EVENT_COLUMNS)) + ")"
    sql = (
        f"INSERT INTO {quote(Event._meta.db_table)} ({columns}) VALUES {', '.join([placeholders] * len(rows))} "
        f"ON CONFLICT ({quote('uid')}) DO NOTHING RETURNING {quote('id')}, {quote('uid')}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [value for row in rows for value in row])
        return {uid: pk for pk, uid in cursor.fetchall()}


def _insert_journaled(rows: list[tuple], door: Door, now: datetime, actor_name: str) -> dict[str, int]:
    """PostgreSQL: insert ``rows`` (``_event_values``, one JSON parameter: ``bulk_rows``),
    skipping eventIds already stored, and journal ``event_admitted`` for exactly the rows
    inserted, in one statement: the journal's insert reads the events' ``RETURNING`` (a
    data-modifying ``WITH``), in event id order. Its ``data`` is what ``admit_batch``
    journals on SQLite — ``{eventId, type, source, door}``, plus ``job`` for the bridge
    (``_bridge_job``) — built by the server, so no entry crosses the wire twice. Returns
    ``{eventId: id}`` of the rows inserted."""
    if not rows:
        return {}
    quote = connection.ops.quote_name
    columns = ", ".join(quote(column) for column in EVENT_COLUMNS)
    table, params = recordset(Event._meta.db_table, EVENT_COLUMNS, rows, "u")
    bridge_job = (
        "CASE WHEN n.source = 'bridge' AND n.door <> %s AND jsonb_typeof(n.payload -> 'loop') = 'string' "
        "THEN jsonb_build_object('job', n.payload -> 'loop') ELSE '{}'::jsonb END"
    )
    sql = (
        f"WITH n AS (INSERT INTO {quote(Event._meta.db_table)} ({columns}) "
        f"SELECT {', '.join(f'u.{quote(column)}' for column in EVENT_COLUMNS)} FROM {table} "
        f"ON CONFLICT ({quote('uid')}) DO NOTHING RETURNING id, uid, type, source, door, payload), "
        f"j AS (INSERT INTO {quote(JournalEntry._meta.db_table)} ({', '.join(quote(c) for c in JOURNAL_COLUMNS)}) "
        f"SELECT %s, 'event_admitted', %s, %s, n.id, NULL, NULL, "
        f"jsonb_build_object('eventId', n.uid, 'type', n.type, 'source', n.source, 'door', n.door) || {bridge_job} "
        f"FROM n ORDER BY n.id) "
        f"SELECT id, uid FROM n"
    )
    with prepared_cursor() as cursor:
        cursor.execute(sql, [*params, now, DOOR_ACTOR[door].value, actor_name, Door.SCHEDULE.value])
        return {uid: pk for pk, uid in cursor.fetchall()}


def admit_event(envelope, *, door: Door, now: datetime, registry: Registry | None = None) -> Admission:
    """Validate and store ``envelope`` as it came through ``door`` at ``now`` (UTC).

    Returns an ``Admission``; a known eventId is a duplicate (the first stays; differing
    content is logged as a warning). Raises ``AdmissionRefused`` with every error found.
    Ticks (door ``schedule``) record their loop, key and slot from the payload. The insert
    is ``admit_batch``'s of one envelope (one statement for the event, one for its journal
    entry): the signed doors make one per request.
    """
    registry = registry or get_registry()
    errors = validate_envelope(envelope, door=door, registry=registry)
    if errors:
        raise AdmissionRefused(errors)
    event_id = envelope["eventId"]
    with transaction.atomic():
        batch = admit_batch([envelope], door=door, now=now, registry=registry, validate=False)
    if event_id in batch.admitted:
        event = _event_row(envelope, door, now)
        event.pk, event._state.adding = batch.admitted[event_id], False
        return Admission(admitted=True, duplicate=False, event_id=event_id, event=event)
    existing = Event.objects.get(uid=event_id)
    warn_if_content_differs(existing, envelope, door)
    return Admission(admitted=False, duplicate=True, event_id=event_id, event=existing)


def warn_if_content_differs(existing: Event, envelope: dict, door: Door) -> None:
    """Log a warning when a duplicate ``envelope`` differs from the ``existing`` event it
    repeats (``occurredAt`` compared in UTC): the first admission stands (docs/design.md §3)."""
    normalised = {**envelope, "occurredAt": format_instant(parse_instant(envelope["occurredAt"]))}
    if canonical_json(existing.envelope()) != canonical_json(normalised):
        logger.warning(
            "duplicate eventId %s with different content; the first admission stands",
            envelope["eventId"],
            extra={"action": "duplicate_differs", "eventId": envelope["eventId"], "door": door.value},
        )
