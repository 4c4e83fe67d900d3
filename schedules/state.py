"""Every write of ``ScheduleState``: the per-loop bookkeeping of the slot loop (docs/design.md §5, §6).

``ScheduleState`` is derived data — the events table is the truth for "did it fire?" —
written in the transactions that admit ticks. Keeping every write here keeps its rules
in one place: a last slot only moves forward, a loop seen disabled is marked so that
re-enabling it does not replay the slots it missed, and ``enabledSince`` is when the
slot loop last saw the loop turned on.
"""

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import DateTimeField, Q

from lib.calendar import loop_rule
from lib.json_text import canonical_json
from runtime.registry import Loop, Registry

from .models import ScheduleState, ScheduleSync

logger = logging.getLogger(__name__)


#: States one ``UPDATE … FROM (VALUES …)`` advances: 4 parameters a row.
UPDATE_ROWS = 1000
#: The ``ScheduleSync`` row of the interval and time-of-day loops.
SYNC_NAME = "loops"


def read_states() -> dict[str, ScheduleState]:
    """Every loop's state, by loop name."""
    return {state.loop: state for state in ScheduleState.objects.all()}


def next_due_of(loop: Loop | None, state: ScheduleState, now: datetime) -> datetime | None:
    """When ``state``'s loop next has a slot to fire: the slot after its last fired one;
    ``now`` for a loop that never fired or is re-enabled (it fires fresh); None for a
    disabled, removed or keyed loop. Pure."""
    if loop is None or not loop.enabled or loop.keyed is not None:
        return None
    if not state.enabled or state.last_slot is None:
        return now
    rule = loop_rule(loop)
    return rule.after(rule.floor(state.last_slot))


def loops_fingerprint(registry: Registry) -> str:
    """SHA-256 of what ``next_due`` depends on, over every loop: name, enabled, slot rule,
    keyed or not (the registry digest leaves the overlay out, which enables loops). Cached
    for the registry in force."""
    cached = _fingerprints.get("registry")
    if cached is not None and cached[0] is registry:
        return cached[1]
    text = canonical_json([
        [name, loop.enabled, loop.cadence_seconds, loop.at, loop.timezone, list(loop.days), loop.keyed is not None]
        for name, loop in sorted(registry.loops.items())
    ])
    fingerprint = hashlib.sha256(text.encode()).hexdigest()
    _fingerprints["registry"] = (registry, fingerprint)
    return fingerprint


_fingerprints: dict[str, tuple[Registry, str]] = {}


def ensure_synced(registry: Registry, now: datetime) -> bool:
    """``sync_registry`` when the states were last synced with other loops (one query when
    not); returns True when it synced."""
    fingerprint = loops_fingerprint(registry)
    if ScheduleSync.objects.filter(name=SYNC_NAME, fingerprint=fingerprint).exists():
        return False
    with transaction.atomic():
        sync_registry(registry, now)
        ScheduleSync.objects.update_or_create(name=SYNC_NAME, defaults={"fingerprint": fingerprint, "synced_at": now})
    return True


def sync_registry(registry: Registry, now: datetime) -> None:
    """Bring every state in line with ``registry`` at ``now``: mark the disabled and removed
    loops, create the rows of loops seen for the first time, and recompute every
    ``next_due`` that differs. Reads every row: ``ensure_synced`` runs it when the loops
    change, not every iteration."""
    states = read_states()
    record_disabled(registry, states)
    record_first_seen(registry, states, now)
    if any(name not in states for name, loop in registry.loops.items() if loop.enabled):
        states = read_states()
    changed = []
    for name, state in states.items():
        due = next_due_of(registry.loops.get(name), state, now)
        if due != state.next_due:
            state.next_due = due
            changed.append(state)
    ScheduleState.objects.bulk_update(changed, ["next_due"], batch_size=UPDATE_ROWS)


def due_states(*, due_by: datetime, future_after: datetime) -> dict[str, ScheduleState]:
    """The states due at ``due_by`` and those whose last slot lies after ``future_after``
    (to repair, ``schedules.repair``), by loop name: one query on the two indexes."""
    rows = ScheduleState.objects.filter(Q(next_due__lte=due_by) | Q(last_slot__gt=future_after))
    return {state.loop: state for state in rows}


def set_next_due(states: list[ScheduleState]) -> None:
    """Store the ``next_due`` already set on ``states`` (a fetched row found not due after all)."""
    ScheduleState.objects.bulk_update(states, ["next_due"], batch_size=UPDATE_ROWS)


@dataclass(frozen=True)
class Advance:
    """A loop's newest tick of a batch: its slot, eventId, next due, and whether it fired fresh."""

    loop: str
    slot: datetime
    event_id: str
    next_due: datetime
    fresh: bool


def record_disabled(registry: Registry, states: dict[str, ScheduleState]) -> None:
    """Mark loops disabled (or gone) so that re-enabling them does not replay missed slots;
    ``states`` is updated in place."""
    stale = [
        name for name, state in states.items()
        if state.enabled and (name not in registry.loops or not registry.loops[name].enabled)
    ]
    if stale:
        ScheduleState.objects.filter(loop__in=stale, enabled=True).update(enabled=False)
        for name in stale:
            states[name].enabled = False
            logger.info("loop %s is disabled; its ticks stop", name, extra={"action": "loop_disabled", "loop": name})


def record_first_seen(registry: Registry, states: dict[str, ScheduleState], now: datetime) -> None:
    """Give an enabled loop the slot loop sees for the first time its ``enabledSince``.

    The doctor counts a loop that never managed to tick from then (docs/design.md §11); the row
    has no last slot, so the loop still fires fresh.
    """
    new = [
        ScheduleState(loop=name, enabled=True, enabled_since=now)
        for name, loop in registry.loops.items()
        if loop.enabled and name not in states
    ]
    if new:
        ScheduleState.objects.bulk_create(new, ignore_conflicts=True)


def advance_loops(advances: list[Advance], now: datetime) -> None:
    """Record a batch of ticks admitted at ``now`` (one ``Advance`` per loop, its newest
    tick); call in the admitting transaction, after ``sync_registry`` made the rows.

    A ``fresh`` loop (never fired, or re-enabled) gets ``enabledSince = now``. The last
    slot (with the last eventId and the next due) only moves forward: a second process
    that fired an older slot changes nothing. One ``UPDATE … FROM (VALUES …)`` per
    ``UPDATE_ROWS`` loops (PostgreSQL; SQLite 3.33+), and two updates for the fresh ones.
    """
    fresh = [a.loop for a in advances if a.fresh]
    if fresh:
        ScheduleState.objects.filter(loop__in=fresh, enabled=False).update(enabled=True, enabled_since=now)
        ScheduleState.objects.filter(loop__in=fresh, enabled_since__isnull=True).update(enabled_since=now)
    for first in range(0, len(advances), UPDATE_ROWS):
        _advance_rows(advances[first:first + UPDATE_ROWS], now)


def _advance_rows(advances: list[Advance], now: datetime) -> None:
    instant = DateTimeField()
    quote = connection.ops.quote_name
    table = quote(ScheduleState._meta.db_table)
    stamp = "CAST(%s AS timestamptz)" if connection.vendor == "postgresql" else "%s"
    row = f"(%s, {stamp}, %s, {stamp})"
    params = [instant.get_db_prep_value(now, connection)]
    for a in advances:
        params += [a.loop, instant.get_db_prep_value(a.slot, connection), a.event_id,
                   instant.get_db_prep_value(a.next_due, connection)]
    sql = (
        f"UPDATE {table} SET {quote('last_slot')} = v.column2, {quote('last_event_id')} = v.column3, "
        f"{quote('last_tick_at')} = {stamp}, {quote('next_due')} = v.column4 "
        f"FROM (VALUES {', '.join([row] * len(advances))}) AS v "
        f"WHERE {table}.{quote('loop')} = v.column1 "
        f"AND ({table}.{quote('last_slot')} IS NULL OR {table}.{quote('last_slot')} < v.column2)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def keyed_states(keyed: list[Loop], now: datetime) -> dict[str, ScheduleState]:
    """The states of the keyed loops, created where missing; a loop the slot loop sees
    re-enabled gets a new ``enabledSince``, so its rows fire their current slot with no skips."""
    ScheduleState.objects.filter(loop__in=[loop.name for loop in keyed if loop.enabled], enabled=False).update(
        enabled=True, enabled_since=now
    )
    for loop in keyed:
        ScheduleState.objects.get_or_create(loop=loop.name, defaults={"enabled": loop.enabled, "enabled_since": now})
    return {s.loop: s for s in ScheduleState.objects.filter(loop__in=[loop.name for loop in keyed])}


def advance_keyed_loop(state: ScheduleState, slot: datetime, event_id: str, now: datetime) -> None:
    """Record a keyed loop's latest fired slot (any key's); it only moves forward."""
    ScheduleState.objects.filter(pk=state.pk).filter(Q(last_slot__lte=slot) | Q(last_slot__isnull=True)).update(
        last_slot=slot, last_event_id=event_id, last_tick_at=now
    )


def move_keyed_cursor(state: ScheduleState, settled: int) -> None:
    """Move the keyed loop's cursor forward to event id ``settled`` (never back); ``state`` follows."""
    ScheduleState.objects.filter(pk=state.pk, keyed_cursor__lt=settled).update(keyed_cursor=settled)
    state.keyed_cursor = max(state.keyed_cursor, settled)


def reset_keyed_cursor(loop: Loop, settled: int, now: datetime) -> None:
    """Set a rebuilt keyed loop's cursor to ``settled``, creating its state if missing."""
    state, _ = ScheduleState.objects.get_or_create(loop=loop.name, defaults={"enabled": loop.enabled, "enabled_since": now})
    ScheduleState.objects.filter(pk=state.pk).update(keyed_cursor=settled)
