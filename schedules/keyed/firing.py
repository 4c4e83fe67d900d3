"""The keyed loops' slot-loop steps: apply setting and clearing events, fire due rows (docs/design.md §6).

``apply_keyed_events`` applies the admitted setting and clearing events in admission
order, each marked applied (``KeyedEventApplied``) in the transaction that applies it;
``emit_keyed_ticks`` fetches only the due rows (``keyed_due_idx``), in pages, and admits
``clock:<loop>:<key>:<slot>`` through the ``schedule`` door, advancing or deleting each
row in the same transaction.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, Q

from lib.instants import format_instant
from lib.slots import DueSlot
from runtime.models import Actor, Door, Event
from runtime.registry import Loop, Registry
from runtime.services.admission import AdmissionRefused, admit_batch, admit_event
from runtime.services.journal import record
from schedules.envelope import tick_envelope
from schedules.models import KeyedEventApplied, KeyedSchedule, ScheduleState
from schedules.state import advance_keyed_loop, move_keyed_cursor

from .advance import advance_rows, delete_rows
from .fold import ROW_FIELDS, KeyedValueError, Row, apply_setting, apply_tick, is_fresh_row, key_of, row_due_slots

logger = logging.getLogger(__name__)

#: Setting and clearing events one iteration applies per loop; the rest wait a second.
EVENT_BATCH = 1000
#: Due rows fetched per query: a thousand customers at 09:00 are two round trips.
DUE_BATCH = 500
#: Most keyed ticks one iteration admits per loop, so a backlog after a long downtime
#: does not hold up planning; the rest fire in the next iterations.
TICKS_PER_ITERATION = 20000
#: An admission commits within this many seconds of its ``admitted_at`` (a request's
#: transaction is milliseconds long); the cursor only passes events older than that, so
#: an admission still in flight with a lower id is never skipped.
SETTLE_SECONDS = 60

def apply_keyed_events(loop: Loop, state: ScheduleState, *, now: datetime, limit: int = EVENT_BATCH) -> int:
    """Apply the loop's unapplied setting and clearing events in admission order; returns how many.

    Each event is marked and applied in one transaction; a marker that already exists
    (another slot loop applied it) skips the event. When the batch is not full, the
    cursor moves to the newest event older than ``SETTLE_SECONDS`` and the markers it
    covers are deleted.
    """
    types = loop.keyed.event_types
    applied = KeyedEventApplied.objects.filter(loop=loop.name, event_id__gt=state.keyed_cursor).values("event_id")
    events = list(
        Event.objects.filter(type__in=types, id__gt=state.keyed_cursor).exclude(id__in=applied).order_by("id")[:limit]
    )
    for event in events:
        try:
            with transaction.atomic():
                KeyedEventApplied.objects.create(loop=loop.name, event=event)
                _apply_event(loop, event, now)
        except IntegrityError:
            continue
    if len(events) < limit:
        settled = (
            Event.objects.filter(type__in=types, id__gt=state.keyed_cursor, admitted_at__lte=now - timedelta(seconds=SETTLE_SECONDS))
            .aggregate(newest=Max("id"))["newest"]
        )
        if settled is not None:
            with transaction.atomic():
                move_keyed_cursor(state, settled)
                KeyedEventApplied.objects.filter(loop=loop.name, event_id__lte=settled).delete()
    return len(events)


def _apply_event(loop: Loop, event: Event, now: datetime) -> None:
    """Replace, delete or keep the row one event names, and journal what happened."""
    keyed, envelope, log = loop.keyed, event.envelope(), {"loop": loop.name, "eventId": event.uid}
    try:
        if event.type in keyed.set_by:
            row = apply_setting(keyed.set_by[event.type], envelope, event.uid, event.admitted_at)
            model = row.as_model(loop.name)
            KeyedSchedule.objects.update_or_create(
                loop=loop.name, key=row.key, defaults={name: getattr(model, name) for name in ROW_FIELDS if name != "key"}
            )
            record("keyed_schedule_set", Actor.SCHEDULE, at=now, event=event, data={
                "loop": loop.name, "key": row.key, "rule": row.describe(), "nextDue": format_instant(row.next_due),
            })
        else:
            key = key_of(envelope, keyed.cleared_by[event.type])
            deleted, _ = KeyedSchedule.objects.filter(loop=loop.name, key=key).delete()
            record("keyed_schedule_cleared", Actor.SCHEDULE, at=now, event=event, data={
                "loop": loop.name, "key": key, "deleted": bool(deleted),
            })
    except KeyedValueError as exc:
        action = "keyed_set_refused" if event.type in keyed.set_by else "keyed_clear_refused"
        record(action, Actor.SYSTEM, at=now, event=event, data={"loop": loop.name, "problems": exc.problems})
        logger.warning(
            "%s: %s refused for loop %s: %s", event.uid, event.type, loop.name, exc,
            extra={"action": action, **log},
        )


def due_pages(loop: str, now: datetime, *, batch: int = DUE_BATCH):
    """The loop's rows due at ``now``, earliest first, a list of ``batch`` at a time, by keyset
    on ``(next_due, id)`` (index ``keyed_due_idx``): a row advanced to a slot still due is
    not fetched twice in one iteration."""
    position = None
    while True:
        page = KeyedSchedule.objects.filter(loop=loop, next_due__lte=now)
        if position is not None:
            page = page.filter(Q(next_due__gt=position[0]) | Q(next_due=position[0], id__gt=position[1]))
        models = list(page.order_by("next_due", "id")[:batch])
        if models:
            yield models
        if len(models) < batch:
            return
        position = (models[-1].next_due, models[-1].id)


def emit_keyed_ticks(loop: Loop, state: ScheduleState, *, now: datetime, registry: Registry) -> list[tuple[str, DueSlot, bool]]:
    """Admit the due ticks of one keyed loop at ``now``; returns ``(eventId, due slot, admitted)``.

    The ticks of one page of due rows, the rows' advances (or deletions) and the loop's
    ``ScheduleState`` commit in one transaction: a crash leaves the page due, and its
    replay converges through the unique eventIds. A row is changed only if it is still the
    one fetched (compare and swap on ``next_due`` and ``set_by``); otherwise a setting event
    or another slot loop got there first and the row's remaining slots are left to the
    next iteration.
    """
    fired = []
    for page in due_pages(loop.name, now):
        with transaction.atomic():
            fired += _fire_page(loop, state, page, now, registry)
            if fired:
                last_id, last_due, _ = max(fired, key=lambda f: f[1].slot)
                advance_keyed_loop(state, last_due.slot, last_id, now)
        if len(fired) >= TICKS_PER_ITERATION:
            break
    return fired


def _fire_page(loop: Loop, state: ScheduleState, page: list[KeyedSchedule], now: datetime, registry: Registry) -> list:
    """Admit the due ticks of one page of rows, in the page's order, and advance (or delete)
    the rows; call inside a transaction. A run of rows with one due slot each (nearly every
    row) is admitted with one ``admit_batch`` and advanced with one compare-and-swap update
    (``schedules.keyed.advance``); a row with several (catch-up) goes slot by slot."""
    fired, single = [], []
    for model in page:
        row = Row.of(model)
        slots = row_due_slots(
            row, catch_up=loop.catch_up, fresh=is_fresh_row(row, state), now=now,
            catchup_limit=settings.FACTORY_CATCHUP_LIMIT,
        )
        if len(slots) == 1:
            single.append((model.pk, row, slots[0]))
            continue
        fired += _fire_singles(loop, single, now, registry)
        single = []
        fired += _fire_row(loop, state, row, model.pk, now, registry)
    return fired + _fire_singles(loop, single, now, registry)


def _fire_singles(loop: Loop, single: list[tuple[int, Row, DueSlot]], now: datetime, registry: Registry) -> list:
    """Admit one tick per ``(pk, row, due slot)`` together and advance or delete the rows.
    Each tick is validated as ``admit_event`` validates it (a keyed tick's key varies);
    a refused one raises ``AdmissionRefused`` as ``admit_event`` would."""
    if not single:
        return []
    envelopes = [tick_envelope(loop, due, key=row.key, cadence_seconds=row.every_seconds) for _, row, due in single]
    batch = admit_batch(envelopes, door=Door.SCHEDULE, now=now, registry=registry)
    if batch.refused:
        raise AdmissionRefused(next(iter(batch.refused.values())))
    fired, advanced, once = [], [], []
    for (pk, row, due), envelope in zip(single, envelopes, strict=True):
        after = apply_tick(row, due.slot, envelope["eventId"], now)
        if after is None:
            once.append((pk, row))
        elif after != row:
            advanced.append((pk, row, after))
        admitted = envelope["eventId"] in batch.admitted
        fired.append((envelope["eventId"], due, admitted))
        if admitted and due.skipped_slots:
            logger.warning(
                "loop %s key %s fired slot %s (%s skipped)", loop.name, row.key, envelope["payload"]["slot"],
                due.skipped_slots, extra={"action": "tick_admitted", "loop": loop.name, "skippedSlots": due.skipped_slots},
            )
    advance_rows(advanced)
    delete_rows(once)
    return fired


def _fire_row(loop: Loop, state: ScheduleState, row: Row, pk: int, now: datetime, registry: Registry) -> list:
    """Admit the due slots of one row and advance (or delete) it; call inside a transaction."""
    fired = []
    slots = row_due_slots(
        row, catch_up=loop.catch_up, fresh=is_fresh_row(row, state), now=now, catchup_limit=settings.FACTORY_CATCHUP_LIMIT,
    )
    for due in slots:
        envelope = tick_envelope(loop, due, key=row.key, cadence_seconds=row.every_seconds)
        admission = admit_event(envelope, door=Door.SCHEDULE, now=now, registry=registry)
        current = KeyedSchedule.objects.filter(pk=pk, next_due=row.next_due, set_by=row.set_by)
        after = apply_tick(row, due.slot, envelope["eventId"], now)
        changed = current.delete()[0] if after is None else current.update(
            next_due=after.next_due, last_slot=after.last_slot, last_event_id=after.last_event_id,
            last_tick_at=after.last_tick_at,
        )
        fired.append((envelope["eventId"], due, admission.admitted))
        if admission.admitted and due.skipped_slots:
            logger.warning(
                "loop %s key %s fired slot %s (%s skipped)", loop.name, row.key, envelope["payload"]["slot"],
                due.skipped_slots, extra={"action": "tick_admitted", "loop": loop.name, "skippedSlots": due.skipped_slots},
            )
        if not changed or after is None:
            break
        row = after
    return fired
