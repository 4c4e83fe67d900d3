"""The outbox: chained events written with their run's end, admitted later (docs/design.md §8).

``write_outbox`` stores a finished run's chain as pending ``OutboxEntry`` rows inside
``finish_run``'s transaction, so a crash after that commit loses nothing;
``publish_outbox`` (called by each slot-loop iteration) admits the pending rows in
batches through ``admit_batch`` with the ``chain`` door and settles each: published, or
refused with the reasons.
"""

import logging
from datetime import datetime

from django.db import transaction

from runtime.models import Actor, Door, OutboxEntry, OutboxStatus, Run
from runtime.registry import Registry

from .admission import admit_batch
from .journal import record

logger = logging.getLogger(__name__)

#: Most outbox rows one iteration publishes; the rest wait a second, ticks stay on time.
OUTBOX_BATCH = 1000
#: Outbox rows admitted per transaction.
CHUNK = 500


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


def pending_entries(limit: int) -> list[OutboxEntry]:
    """The oldest ``limit`` outbox rows not yet published or refused (``outbox_pending_idx``)."""
    return list(OutboxEntry.objects.filter(status=OutboxStatus.PENDING).select_related("run").order_by("id")[:limit])


def mark_published(entries: list[OutboxEntry], admitted: dict[str, int], *, now: datetime) -> int:
    """``pending → published`` for ``entries``; those whose eventId is not in ``admitted``
    (the rows this publisher inserted) are recorded ``duplicate``: already admitted by
    another publisher, or by one that died between admission and this mark when the two
    were not one transaction. Rows another publisher settled first are left alone; returns
    how many rows this call settled. Two updates."""
    fresh = [e.pk for e in entries if e.event_uid in admitted]
    seen = [e.pk for e in entries if e.event_uid not in admitted]
    pending = OutboxEntry.objects.filter(status=OutboxStatus.PENDING)
    return (
        pending.filter(pk__in=fresh).update(status=OutboxStatus.PUBLISHED, settled_at=now, duplicate=False)
        + pending.filter(pk__in=seen).update(status=OutboxStatus.PUBLISHED, settled_at=now, duplicate=True)
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

    ``CHUNK`` rows at a time, each chunk one transaction: their admission
    (``admit_batch``: one insert of the events, one of their journal entries) and their
    ``published`` marks, so a crash leaves the chunk pending and the next iteration
    admits it then; an eventId already admitted (another publisher) is a duplicate and
    its row is marked all the same: exactly one admission either way. A row the registry
    refuses is marked ``refused`` with the reasons and journaled; the rest of its chunk is
    admitted. Returns how many rows were settled or found settled, at most ``limit``.
    """
    settled = 0
    while settled < limit and (entries := pending_entries(min(CHUNK, limit - settled))):
        with transaction.atomic():
            batch = admit_batch([e.envelope for e in entries], door=Door.CHAIN, now=now, registry=registry)
            mark_published([e for n, e in enumerate(entries) if n not in batch.refused], batch.admitted, now=now)
            for position, errors in batch.refused.items():
                mark_refused(entries[position], errors, now=now)
        settled += len(entries)
    return settled
