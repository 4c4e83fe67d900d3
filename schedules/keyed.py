"""Keyed schedules: one row per key, set and cleared by events, fired per key (DESIGN §6; seed 000).

A keyed loop declares ``keyed: {setBy: {type: {key, at+timezone | every | once}},
clearedBy: {type: {key}}}`` — JSON Pointers into the admitted event. Each slot-loop
iteration, for every enabled keyed loop:

1. ``apply_keyed_events`` applies the admitted setting and clearing events in admission
   order: a setting event replaces the key's row, a clearing event deletes it. A setting
   event whose values do not validate changes nothing: the old row stays and the journal
   records ``keyed_set_refused`` with the reasons (the event's own planning, against its
   type's target, is separate). Each event is marked applied in the transaction that
   applies it (``KeyedEventApplied``); ``ScheduleState.keyed_cursor`` covers the settled
   past so that the markers stay few.
2. ``emit_keyed_ticks`` fetches only the due rows (``keyed_due_idx``), in batches, and
   admits ``clock:<loop>:<key>:<slot>`` through the ``schedule`` door; in the same
   transaction (one per batch) the row advances to its next slot, or, for a ``once``
   row, is deleted.

The row fold (``apply_setting``, ``apply_clearing``, ``apply_tick``) is pure and shared
with ``rebuild``, which empties the rows and replays the setting and clearing events and
the loop's admitted ticks in admission order; a tick changes a row only when its slot is
one the row would fire (a slot of its rule, not before its next due), so the replay
gives the rows the live path gave, whatever order concurrent admissions committed in.
"""

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, Q

from runtime.services.admission import admit_event
from lib.json_pointer import PointerNotFound, resolve_pointer
from lib.refusals import Refused
from runtime.services.journal import record
from runtime.models import Actor, Door, Event
from runtime.registry import CadenceError, Keyed, KeyedSetter, Loop, Registry, parse_every
from lib.cadence import parse_wall_time
from lib.instants import InstantError, format_instant, parse_instant

from lib.calendar import time_of_day
from .models import KeyedEventApplied, KeyedRule, KeyedSchedule, ScheduleState
from .envelope import tick_envelope
from lib.slots import DueSlot, Interval, SlotRule, due_slots

logger = logging.getLogger(__name__)

#: Keys are 1–100 printable characters without spaces (DESIGN §4).
KEY_MAX_LENGTH = 100
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

ROW_FIELDS = (
    "key", "rule", "at", "timezone", "every_seconds", "next_due", "last_slot", "last_event_id",
    "last_tick_at", "set_by", "recorded_at",
)


class KeyedValueError(Refused):
    """A setting or clearing event's values do not make a row (code ``invalid_keyed_values``);
    ``problems`` is ``[{field, detail}]``."""

    code_in_message = False

    def __init__(self, problems: list[dict]):
        self.problems = problems
        super().__init__("invalid_keyed_values", "; ".join(f"{p['field']}: {p['detail']}" for p in problems))


@dataclass(frozen=True)
class Row:
    """A keyed row as a value (the fields of ``KeyedSchedule`` but ``loop``)."""

    key: str
    rule: str
    at: str
    timezone: str
    every_seconds: int | None
    next_due: datetime
    last_slot: datetime | None
    last_event_id: str
    last_tick_at: datetime | None
    set_by: str
    recorded_at: datetime

    @classmethod
    def of(cls, model: KeyedSchedule) -> "Row":
        return cls(**{name: getattr(model, name) for name in ROW_FIELDS})

    def as_model(self, loop: str) -> KeyedSchedule:
        return KeyedSchedule(loop=loop, **{name: getattr(self, name) for name in ROW_FIELDS})

    def slot_rule(self) -> SlotRule | None:
        """The row's repeating rule; None for a ``once`` row."""
        if self.rule == KeyedRule.AT:
            return time_of_day(self.at, self.timezone)
        if self.rule == KeyedRule.EVERY:
            return Interval(self.every_seconds)
        return None

    def describe(self) -> str:
        """``09:00 Europe/Budapest``, ``every 3600 s`` or ``once``, for listings."""
        if self.rule == KeyedRule.AT:
            return f"{self.at} {self.timezone}"
        if self.rule == KeyedRule.EVERY:
            return f"every {self.every_seconds} s"
        return "once"


# --- the fold: pure ------------------------------------------------------------------------
def valid_key(value) -> str:
    """The key as a string of 1–100 printable characters without spaces; KeyedValueError otherwise."""
    if not isinstance(value, str) or not 1 <= len(value) <= KEY_MAX_LENGTH or not value.isprintable() or any(
        c.isspace() for c in value
    ):
        raise KeyedValueError([{
            "field": "key", "detail": f"{value!r} is not a key: 1 to {KEY_MAX_LENGTH} printable characters without spaces",
        }])
    return value


def _find(envelope: dict, pointer: str, field: str, problems: list[dict]):
    try:
        return resolve_pointer(envelope, pointer)
    except PointerNotFound as exc:
        problems.append({"field": field, "detail": f"{pointer} finds nothing: {exc.detail}"})
        return None


def key_of(envelope: dict, pointer: str) -> str:
    """The key a clearing (or setting) event names; KeyedValueError when it has none."""
    problems: list[dict] = []
    value = _find(envelope, pointer, "key", problems)
    if problems:
        raise KeyedValueError(problems)
    return valid_key(value)


def apply_setting(setter: KeyedSetter, envelope: dict, event_id: str, admitted_at: datetime) -> Row:
    """The row a setting event makes (it replaces the key's row). Pure.

    The first slot is the rule's first slot at or after the event's admission (an ``at``
    or ``every`` rule), or the ``once`` instant itself, to the second — one already past
    fires at the next iteration. Raises KeyedValueError naming every value that does not
    validate: the key, ``at`` ("HH:MM"), ``timezone`` (IANA), ``every`` (the cadence
    grammar), ``once`` (RFC 3339 with an offset).
    """
    problems: list[dict] = []
    key = None
    try:
        key = key_of(envelope, setter.key)
    except KeyedValueError as exc:
        problems.extend(exc.problems)
    fields = {"at": "", "timezone": "", "every_seconds": None}
    next_due = None
    if setter.at is not None:
        at, zone = _find(envelope, setter.at, "at", problems), _find(envelope, setter.timezone, "timezone", problems)
        try:
            parse_wall_time(at)
        except CadenceError as exc:
            problems.append({"field": "at", "detail": str(exc)})
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            problems.append({"field": "timezone", "detail": f"{zone!r} is not an IANA time zone"})
        if not problems:
            rule, fields["at"], fields["timezone"] = KeyedRule.AT, at, zone
            next_due = time_of_day(at, zone).ceil(admitted_at)
    elif setter.every is not None:
        every = _find(envelope, setter.every, "every", problems)
        try:
            seconds = parse_every(every)
        except CadenceError as exc:
            problems.append({"field": "every", "detail": str(exc)})
        if not problems:
            rule, fields["every_seconds"] = KeyedRule.EVERY, seconds
            next_due = Interval(seconds).ceil(admitted_at)
    else:
        once = _find(envelope, setter.once, "once", problems)
        try:
            instant = parse_instant(once)
        except InstantError as exc:
            problems.append({"field": "once", "detail": str(exc)})
        if not problems:
            rule, next_due = KeyedRule.ONCE, instant.replace(microsecond=0)
    if problems:
        raise KeyedValueError(problems)
    return Row(
        key=key, rule=rule, **fields, next_due=next_due, last_slot=None, last_event_id="", last_tick_at=None,
        set_by=event_id, recorded_at=admitted_at,
    )


def fires(row: Row, slot: datetime) -> bool:
    """Whether ``slot`` is one the row would fire: a slot of its rule, not before its next due."""
    rule = row.slot_rule()
    if rule is None:
        return slot == row.next_due
    return slot >= row.next_due and rule.floor(slot) == slot


def apply_tick(row: Row, slot: datetime, event_id: str, admitted_at: datetime) -> Row | None:
    """The row after its tick for ``slot`` was admitted: advanced past the slot, or None
    (deleted) for a ``once`` row. A tick for a slot the row would not fire (it belonged to
    a row the key had before) leaves the row as it is. Pure."""
    if not fires(row, slot):
        return row
    rule = row.slot_rule()
    if rule is None:
        return None
    return replace(row, next_due=rule.after(slot), last_slot=slot, last_event_id=event_id, last_tick_at=admitted_at)


def fold(keyed: Keyed, loop: str, events) -> dict[str, Row]:
    """The rows that ``events`` (``runtime.models.Event`` rows, in admission order) leave. Pure.

    Setting events replace a key's row (an invalid one changes nothing), clearing events
    delete it, and the loop's keyed ticks advance or delete the row they fired.
    """
    rows: dict[str, Row] = {}
    for event in events:
        if event.door == Door.SCHEDULE and event.loop == loop and event.loop_key:
            row = rows.get(event.loop_key)
            if row is not None:
                after = apply_tick(row, event.slot, event.uid, event.admitted_at)
                if after is None:
                    del rows[event.loop_key]
                else:
                    rows[event.loop_key] = after
            continue
        try:
            if event.type in keyed.set_by:
                row = apply_setting(keyed.set_by[event.type], event.envelope(), event.uid, event.admitted_at)
                rows[row.key] = row
            elif event.type in keyed.cleared_by:
                rows.pop(key_of(event.envelope(), keyed.cleared_by[event.type]), None)
        except KeyedValueError:
            continue
    return rows


def row_due_slots(row: Row, *, catch_up: str, fresh: bool, now: datetime, catchup_limit: int) -> list[DueSlot]:
    """The slots a due row fires at ``now``, with the loop's catch-up policy (DESIGN §5, §6). Pure.

    A ``once`` row fires its instant. A repeating row counts its missed slots from its
    last fired slot, or, before its first tick, from the slot before its first one.
    """
    rule = row.slot_rule()
    if rule is None:
        return [DueSlot(row.next_due, 0)]
    last = row.last_slot if row.last_slot is not None else rule.before(row.next_due)
    return due_slots(rule=rule, catch_up=catch_up, last_fired=last, fresh=fresh, now=now, catchup_limit=catchup_limit)


# --- the slot-loop steps ---------------------------------------------------------------------
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
                ScheduleState.objects.filter(pk=state.pk, keyed_cursor__lt=settled).update(keyed_cursor=settled)
                KeyedEventApplied.objects.filter(loop=loop.name, event_id__lte=settled).delete()
            state.keyed_cursor = max(state.keyed_cursor, settled)
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


def is_fresh_row(row: Row, state: ScheduleState) -> bool:
    """A row the loop was (re-)enabled after: it fires its current slot with no skips, as a
    re-enabled loop does (DESIGN §5: slots while disabled are not missed)."""
    since = row.last_tick_at or row.recorded_at
    return state.enabled_since is not None and state.enabled_since > since


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
            for model in page:
                fired += _fire_row(loop, state, Row.of(model), model.pk, now, registry)
            if fired:
                last_id, last_due, _ = max(fired, key=lambda f: f[1].slot)
                ScheduleState.objects.filter(pk=state.pk).filter(
                    Q(last_slot__lte=last_due.slot) | Q(last_slot__isnull=True)
                ).update(last_slot=last_due.slot, last_event_id=last_id, last_tick_at=now)
        if len(fired) >= TICKS_PER_ITERATION:
            break
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


# --- rebuild ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class RebuildReport:
    loop: str
    keys: int
    events: int


def rebuild(loop: Loop, *, now: datetime) -> RebuildReport:
    """Empty the loop's rows and replay, in admission order, its setting and clearing events
    and its admitted keyed ticks (DESIGN §6), in one transaction; journal ``keyed_schedule_rebuilt``.

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
        state, _ = ScheduleState.objects.get_or_create(loop=loop.name, defaults={"enabled": loop.enabled, "enabled_since": now})
        ScheduleState.objects.filter(pk=state.pk).update(keyed_cursor=settled)
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
