"""The outbox: chained events written with their run's end, admitted later (docs/design.md §8).

``write_outbox`` stores a finished run's chain as pending ``OutboxEntry`` rows inside
``finish_run``'s transaction, so a crash after that commit loses nothing;
``publish_outbox`` (called by each slot-loop iteration) admits the pending rows through
``admit_event`` with the ``chain`` door and settles each: published, or refused with
the reasons.
"""

import logging
from datetime import datetime

from django.db import transaction

from runtime.models import Actor, Door, OutboxEntry, OutboxStatus, Run
from runtime.registry import Registry

from .admission import AdmissionRefused, admit_event
from .journal import record

logger = logging.getLogger(__name__)

#: Most outbox rows one iteration publishes; the rest wait a second, ticks stay on time.
OUTBOX_BATCH = 1000


def write_outbox(run: Run, envelopes: list[dict], *, now: datetime) -> list[OutboxEntry]:
    """Store a finished run's chain as pending outbox rows; call inside ``finish_run``'s transaction."""
    if not envelopes:
        return []
    entries = OutboxEntry.objects.bulk_create([
        OutboxEntry(run=run, position=n, event_uid=envelope["eventId"], envelope=envelope, created_at=now)
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
            data={"eventId": entry.event_uid, "type": entry.envelope.get("type"), "errors": errors},
        )
    logger.error(
        "chain event %s refused at admission: %s", entry.event_uid, errors,
        extra={"action": "chain_refused", "eventId": entry.event_uid, "run": entry.run_id},
    )
    return True


def publish_outbox(*, now: datetime, registry: Registry, limit: int = OUTBOX_BATCH) -> int:
    """Admit pending chained events through the ``chain`` door, oldest first (docs/design.md §8).

    Each row's admission and its ``published`` mark are one transaction, so a crash
    leaves the row pending and the next iteration admits it then; an eventId already
    admitted (another publisher) answers duplicate and the row is marked all the same:
    exactly one admission either way. A row the registry refuses is marked ``refused``
    with the reasons and journaled; the rows behind it go on. Returns how many rows
    were settled.
    """
    settled = 0
    while settled < limit and (entry := next_pending_entry()) is not None:
        try:
            with transaction.atomic():
                admission = admit_event(entry.envelope, door=Door.CHAIN, now=now, registry=registry)
                mark_published(entry, duplicate=admission.duplicate, now=now)
        except AdmissionRefused as exc:
            mark_refused(entry, exc.errors, now=now)
        settled += 1
    return settled
