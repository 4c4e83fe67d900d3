"""Chains: a finished run's outcome becomes the next events, through the outbox (DESIGN §8; spec §12, §14).

``chain_envelopes`` turns the edges matching ``(definition, outcome)`` into envelopes,
pure computation over ``{"input": run input, "output": {outcome, summary?, data?}}``;
``finish_run`` writes them as ``OutboxEntry`` rows in the transaction that records the
run's end, so a crash after that commit loses nothing. The slot loop's publication step
(``schedules.slot_loop.publish_outbox``) admits each pending row through ``admit_event``
with the ``chain`` door and settles it here: published, or refused with the reasons.

Every chained event gets the eventId ``chain:<run id>:<n>`` (``n`` from 0 in edge
order), the causing event's correlationId, and that event's eventId as causationId.
"""

import logging
import re
from datetime import datetime

from django.db import transaction

from .journal import record
from .models import Actor, Event, OutboxEntry, OutboxStatus, Run
from .registry import Registry
from .timefmt import format_instant

logger = logging.getLogger(__name__)

#: An array index token of RFC 6901 §4: ``0`` or digits without a leading zero.
ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
#: A ``~`` not followed by ``0`` or ``1`` is not a valid escape (RFC 6901 §3).
BAD_ESCAPE = re.compile(r"~(?![01])")


class PointerNotFound(LookupError):
    """An RFC 6901 pointer that finds nothing in the document; ``detail`` says where it stopped."""

    def __init__(self, pointer: str, detail: str):
        self.pointer = pointer
        self.detail = detail
        super().__init__(f"{pointer}: {detail}")


class ChainBroken(Exception):
    """An edge could not be filled; ``problems`` is ``[{edge, emit, type, field, pointer, detail}]``."""

    def __init__(self, problems: list[dict]):
        self.problems = problems
        super().__init__("; ".join(f"{p['edge']} → {p['type']} {p['field']}: {p['detail']}" for p in problems))


def resolve_pointer(document, pointer: str):
    """Evaluate an RFC 6901 JSON Pointer against ``document`` (parsed JSON) and return the value.

    ``""`` is the whole document; each ``/``-separated token is unescaped (``~1`` → ``/``,
    then ``~0`` → ``~``) and looks up an object member, or an array index written without
    leading zeros. Raises PointerNotFound for a missing member, an index out of range or
    not an index (``-`` included: it names the element after the last), a step into a
    scalar, or a malformed pointer. ``referencing``'s resolver is not used: it reads URI
    fragments (percent-decoding them) and would index into strings.
    """
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        raise PointerNotFound(pointer, "a JSON Pointer is empty or starts with '/'")
    value = document
    walked = ""
    for raw in pointer[1:].split("/"):
        if BAD_ESCAPE.search(raw):
            raise PointerNotFound(pointer, f"{raw!r} has a '~' that is not '~0' or '~1'")
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            if token not in value:
                raise PointerNotFound(pointer, f"{walked or '/'} has no member {token!r}")
            value = value[token]
        elif isinstance(value, list):
            if not ARRAY_INDEX.fullmatch(token) or int(token) >= len(value):
                raise PointerNotFound(pointer, f"{walked or '/'} has no element {token!r} (length {len(value)})")
            value = value[int(token)]
        else:
            raise PointerNotFound(pointer, f"{walked or '/'} is a {type(value).__name__}, not an object or array")
        walked += "/" + raw
    return value


def resolve_value(spec: dict, document):
    """One edge value (``registry/schemas/meta/edges.schema.json``): a pointer, a literal or a list."""
    if "pointer" in spec:
        return resolve_pointer(document, spec["pointer"])
    if "value" in spec:
        return spec["value"]
    return [resolve_value(item, document) for item in spec["items"]]


def chain_document(run_input: dict, outcome: str, summary: str, data: dict | None) -> dict:
    """What edge pointers read: ``/input/…`` the run's input, ``/output/…`` its result.

    ``summary`` and ``data`` appear only when the result gave them, so a pointer into a
    result without data finds nothing instead of a null.
    """
    output: dict = {"outcome": outcome}
    if summary:
        output["summary"] = summary
    if data is not None:
        output["data"] = data
    return {"input": run_input, "output": output}


def chain_envelopes(
    run: Run, event: Event, *, outcome: str, summary: str, data: dict | None, registry: Registry, now: datetime
) -> list[dict]:
    """The ``factory.event/v1`` envelopes the edges of ``(run.definition, outcome)`` emit.

    ``event`` is the run's event (its correlationId is inherited, its eventId becomes the
    causationId); ``now`` (aware UTC) is each envelope's ``occurredAt``. The subject is
    the edge's, else the causing event's. All or nothing: raises ChainBroken listing
    every pointer that found nothing and every subject that is not a string, so no
    half-filled event and no half of a fan-out is ever emitted.
    """
    document = chain_document(run.plan.get("input") or {}, outcome, summary, data)
    envelopes, problems = [], []
    for edge in registry.edges_for(run.definition, outcome):
        for index, emit in enumerate(edge.emit):
            where = {"edge": f"{edge.definition} {edge.outcome}", "emit": index, "type": emit.type}
            payload = {}
            for name, spec in emit.payload.items():
                try:
                    payload[name] = resolve_value(spec, document)
                except PointerNotFound as exc:
                    problems.append({**where, "field": f"payload.{name}", "pointer": exc.pointer, "detail": exc.detail})
            subject = event.subject
            if emit.subject is not None:
                try:
                    subject = resolve_value(emit.subject, document)
                except PointerNotFound as exc:
                    problems.append({**where, "field": "subject", "pointer": exc.pointer, "detail": exc.detail})
                else:
                    if not isinstance(subject, str) or not subject:
                        problems.append({
                            **where, "field": "subject", "pointer": emit.subject.get("pointer"),
                            "detail": f"a subject is a non-empty string, not {subject!r}",
                        })
            envelopes.append({
                "schemaVersion": "factory.event/v1",
                "eventId": f"chain:{run.pk}:{len(envelopes)}",
                "type": emit.type,
                "source": "chain",
                "subject": subject,
                "occurredAt": format_instant(now),
                "correlationId": event.correlation_id,
                "causationId": event.event_id,
                "payload": payload,
            })
    if problems:
        raise ChainBroken(problems)
    return envelopes


def write_outbox(run: Run, envelopes: list[dict], *, now: datetime) -> list[OutboxEntry]:
    """Store a finished run's chain as pending outbox rows; call inside ``finish_run``'s transaction."""
    if not envelopes:
        return []
    entries = OutboxEntry.objects.bulk_create([
        OutboxEntry(run=run, position=n, event_id=envelope["eventId"], envelope=envelope, created_at=now)
        for n, envelope in enumerate(envelopes)
    ])
    record(
        "chain_queued", Actor.CHAIN, at=now, run=run,
        data={"eventIds": [e["eventId"] for e in envelopes], "types": [e["type"] for e in envelopes]},
    )
    return entries


def next_pending_entry() -> OutboxEntry | None:
    """The oldest outbox row not yet published or refused (``outbox_pending_idx``)."""
    return OutboxEntry.objects.filter(status=OutboxStatus.PENDING).order_by("id").first()


def mark_published(entry: OutboxEntry, *, duplicate: bool, now: datetime) -> bool:
    """``pending → published``; False when another publisher settled the row first.

    ``duplicate`` records that the event was already admitted (a publisher that died
    between admission and this mark, when the two were not one transaction).
    """
    return bool(
        OutboxEntry.objects.filter(pk=entry.pk, status=OutboxStatus.PENDING).update(
            status=OutboxStatus.PUBLISHED, settled_at=now, duplicate=duplicate
        )
    )


def mark_refused(entry: OutboxEntry, errors: list[dict], *, now: datetime) -> bool:
    """``pending → refused`` with the admission's ``[{code, detail}]``, journaled; the outbox goes on.

    A refused chain event is a registry mistake (an edge whose payload no longer fits its
    type), never retried: retrying would refuse again and wedge the rows behind it.
    Returns False when another publisher settled the row first.
    """
    with transaction.atomic():
        if not OutboxEntry.objects.filter(pk=entry.pk, status=OutboxStatus.PENDING).update(
            status=OutboxStatus.REFUSED, settled_at=now, refusal=errors
        ):
            return False
        record(
            "chain_refused", Actor.CHAIN, at=now, run=entry.run,
            data={"eventId": entry.event_id, "type": entry.envelope.get("type"), "errors": errors},
        )
    logger.error(
        "chain event %s refused at admission: %s", entry.event_id, errors,
        extra={"action": "chain_refused", "eventId": entry.event_id, "run": entry.run_id},
    )
    return True
