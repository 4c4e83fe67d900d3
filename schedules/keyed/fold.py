"""The keyed fold: pure functions from events to keyed rows (docs/design.md §6).

A setting event replaces its key's row (``apply_setting``), a clearing event deletes it,
and one of the loop's ticks advances (or, for a ``once`` row, deletes) the row it fired
(``apply_tick``). ``fold`` replays events in admission order; the slot loop's firing
steps (``schedules.keyed.firing``) and ``rebuild`` both use these, so the live path and
the replay give the same rows.
"""

from dataclasses import dataclass, replace
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lib.cadence import CadenceError, parse_every, parse_wall_time
from lib.calendar import time_of_day
from lib.instants import InstantError, parse_instant
from lib.json_pointer import PointerNotFound, resolve_pointer
from lib.refusals import Refused
from lib.slots import DueSlot, Interval, SlotRule, due_slots
from runtime.models import Door
from runtime.registry import Keyed, KeyedSetter
from schedules.models import KeyedRule, KeyedSchedule, ScheduleState

#: Keys are 1–100 printable characters without spaces (docs/design.md §4).
KEY_MAX_LENGTH = 100

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
    """The slots a due row fires at ``now``, with the loop's catch-up policy (docs/design.md §5, §6). Pure.

    A ``once`` row fires its instant. A repeating row counts its missed slots from its
    last fired slot, or, before its first tick, from the slot before its first one.
    """
    rule = row.slot_rule()
    if rule is None:
        return [DueSlot(row.next_due, 0)]
    last = row.last_slot if row.last_slot is not None else rule.before(row.next_due)
    return due_slots(rule=rule, catch_up=catch_up, last_fired=last, fresh=fresh, now=now, catchup_limit=catchup_limit)


def is_fresh_row(row: Row, state: ScheduleState) -> bool:
    """A row the loop was (re-)enabled after: it fires its current slot with no skips, as a
    re-enabled loop does (docs/design.md §5: slots while disabled are not missed)."""
    since = row.last_tick_at or row.recorded_at
    return state.enabled_since is not None and state.enabled_since > since
