"""Rebuilding a keyed loop's rows from the events (docs/design.md §6: ``manage.py schedule rebuild LOOP``)."""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Max, Q

from runtime.models import Actor, Door, Event
from runtime.registry import Loop
from runtime.services.journal import record
from schedules.models import KeyedEventApplied, KeyedSchedule
from schedules.state import reset_keyed_cursor

from .firing import SETTLE_SECONDS
from .fold import fold

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RebuildReport:
    loop: str
    keys: int
    events: int


def rebuild(loop: Loop, *, now: datetime) -> RebuildReport:
    """Empty the loop's rows and replay, in admission order, its setting and clearing events
    and its admitted keyed ticks (docs/design.md §6), in one transaction; journal ``keyed_schedule_rebuilt``.

    The events replayed count as applied: the cursor moves as ``apply_keyed_events`` would
    move it, and the newer ones are marked. Raises ValueError for a loop that is not keyed.
    """
    if loop.keyed is None:
        raise ValueError(f"loop {loop.name} is not keyed: it has no rows to rebuild")
    types = loop.keyed.event_types
    with transaction.atomic():
        events = (
            Event.objects.filter(Q(type__in=types) | Q(loop=loop.name, door=Door.SCHEDULE, loop_key__isnull=False))
            .order_by("id")
        )
        rows = fold(loop.keyed, loop.name, events.iterator(chunk_size=2000))
        KeyedSchedule.objects.filter(loop=loop.name).delete()
        KeyedSchedule.objects.bulk_create([row.as_model(loop.name) for row in rows.values()], batch_size=1000)
        setting = Event.objects.filter(type__in=types)
        settled = setting.filter(admitted_at__lte=now - timedelta(seconds=SETTLE_SECONDS)).aggregate(newest=Max("id"))["newest"] or 0
        reset_keyed_cursor(loop, settled, now)
        KeyedEventApplied.objects.filter(loop=loop.name).delete()
        KeyedEventApplied.objects.bulk_create(
            [KeyedEventApplied(loop=loop.name, event_id=pk) for pk in setting.filter(id__gt=settled).values_list("id", flat=True)],
            batch_size=1000,
        )
        replayed = events.count()
        record("keyed_schedule_rebuilt", Actor.SYSTEM, at=now, data={"loop": loop.name, "keys": len(rows), "events": replayed})
    logger.info(
        "rebuilt %s: %s keys from %s events", loop.name, len(rows), replayed,
        extra={"action": "keyed_schedule_rebuilt", "loop": loop.name},
    )
    return RebuildReport(loop.name, len(rows), replayed)
