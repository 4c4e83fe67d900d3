"""Every write of ``ScheduleState``: the per-loop bookkeeping of the slot loop (docs/design.md §5, §6).

``ScheduleState`` is derived data — the events table is the truth for "did it fire?" —
written in the transactions that admit ticks. Keeping every write here keeps its rules
in one place: a last slot only moves forward, a loop seen disabled is marked so that
re-enabling it does not replay the slots it missed, and ``enabledSince`` is when the
slot loop last saw the loop turned on. Each such turn is also kept as a ``LoopChange`` row,
written by the sync in the same transaction (the earning report reads that history).
"""

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Max, Q

from lib.calendar import loop_rule
from lib.json_text import canonical_json
from runtime.prepared import instant_param
from runtime.registry import Loop, Registry
from runtime.services.bulk_rows import instant_reader, recordset, stored_instant

from .models import LoopChange, LoopChangeKind, ScheduleState, ScheduleSync
from .pausing import drop_removed, paused_loops

logger = logging.getLogger(__name__)


#: States one ``UPDATE … FROM (VALUES …)`` advances: 4 parameters a row.
UPDATE_ROWS = 1000
#: The ``ScheduleSync`` row of the interval and time-of-day loops.
SYNC_NAME = "loops"


def read_states() -> dict[str, ScheduleState]:
    """Every loop's state, by loop name."""
    return {state.loop: state for state in ScheduleState.objects.all()}


def next_due_of(
    loop: Loop | None, state: "ScheduleState | DueState", now: datetime, pauses: dict[str, datetime | None] | None = None,
) -> datetime | None:
    """When ``state``'s loop next has a slot to fire: the slot after its last fired one;
    ``now`` for a loop that never fired or is re-enabled (it fires fresh); None for a
    disabled, removed or keyed loop; for a loop in ``pauses`` (``paused_loops()``), keyed or
    not, its pause's ``until`` (when the slot loop resumes it), else None. Pure."""
    if loop is None or not loop.enabled:
        return None
    if pauses and loop.name in pauses:
        return pauses[loop.name]  # a keyed loop's too: its state is what wakes the iteration at ``until``
    if loop.keyed is not None:
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
    change, not every iteration. Every loop it sees turned off or on gets a ``LoopChange`` at
    ``now`` (call it in a transaction: ``ensure_synced`` does). A paused loop
    (``schedules.pausing``) counts as disabled; the pauses of loops gone from the registry
    are dropped."""
    # The states before the pauses: a resume committing between the two reads is then seen
    # resumed (its state due now), never paused with the resume's ``next_due`` overwritten.
    states = read_states()
    pauses = paused_loops()
    drop_removed(registry, pauses, now)
    record_reenabled(registry, states, now, pauses)
    record_disabled(registry, states, now, pauses)
    record_first_seen(registry, states, now, pauses)
    if any(name not in states for name, loop in registry.loops.items() if loop.enabled and name not in pauses):
        states = read_states()
    changed = []
    for name, state in states.items():
        due = next_due_of(registry.loops.get(name), state, now, pauses)
        if due != state.next_due:
            state.next_due = due
            changed.append(state)
    set_next_due(changed)


@dataclass(slots=True)
class DueState:
    """What tick emission reads of a loop's ``ScheduleState`` row (``due_states``): a plain
    record, not a model instance — a burst reads thousands."""

    pk: int
    loop: str
    enabled: bool
    last_slot: datetime | None
    next_due: datetime | None


def due_states(*, due_by: datetime, future_after: datetime) -> dict[str, DueState]:
    """The states due at ``due_by`` and those whose last slot lies after ``future_after``
    (to repair, ``schedules.repair``), by loop name: one query on the two indexes. Plain
    SQL, each distinct stored instant read once: a burst reads every due loop's row, and
    the ORM's converter per value was most of the read (docs/performance.md)."""
    quote = connection.ops.quote_name
    # On SQLite the instants are read as expressions: a column read as itself goes through
    # the driver's converter for its declared type, once per value.
    instants = [f"{quote(c)} || ''" if connection.vendor == "sqlite" else quote(c) for c in ("last_slot", "next_due")]
    columns = ", ".join([*(quote(c) for c in ("id", "loop", "enabled")), *instants])
    sql = (
        f"SELECT {columns} FROM {quote(ScheduleState._meta.db_table)}"
        f" WHERE {quote('next_due')} <= %s OR {quote('last_slot')} > %s"
    )
    read = instant_reader()
    with connection.cursor() as cursor:
        cursor.execute(sql, [instant_param(due_by), instant_param(future_after)])
        return {
            loop: DueState(pk, loop, bool(enabled), read(last_slot), read(next_due))
            for pk, loop, enabled, last_slot, next_due in cursor.fetchall()
        }


def set_next_due(states: list[ScheduleState] | list[DueState]) -> None:
    """Store the ``next_due`` already set on ``states``: one ``UPDATE … FROM (VALUES …)``
    per ``UPDATE_ROWS`` rows (PostgreSQL; SQLite 3.33+)."""
    for first in range(0, len(states), UPDATE_ROWS):
        chunk = states[first:first + UPDATE_ROWS]
        _next_due_update([(s.loop, s.next_due) for s in chunk])


def _effective(registry: Registry, name: str, pauses: dict) -> bool:
    """Whether the slot loop fires ``name``: enabled in ``registry`` and not paused."""
    return name in registry.loops and registry.loops[name].enabled and name not in pauses


def record_disabled(registry: Registry, states: dict[str, ScheduleState], now: datetime, pauses: dict | None = None) -> None:
    """Mark loops disabled, paused (``pauses``) or gone so that re-enabling them does not
    replay missed slots, each with a ``disabled`` change at ``now`` (a pause wrote its own
    ``paused`` change); ``states`` is updated in place."""
    pauses = pauses or {}
    stale = [name for name, state in states.items() if state.enabled and not _effective(registry, name, pauses)]
    if stale:
        ScheduleState.objects.filter(loop__in=stale, enabled=True).update(enabled=False)
        LoopChange.objects.bulk_create([
            LoopChange(loop=name, at=now, kind=LoopChangeKind.DISABLED) for name in stale if name not in pauses
        ])
        for name in stale:
            states[name].enabled = False
            logger.info("loop %s is disabled; its ticks stop", name, extra={"action": "loop_disabled", "loop": name})


def record_first_seen(registry: Registry, states: dict[str, ScheduleState], now: datetime, pauses: dict | None = None) -> None:
    """Give an enabled loop the slot loop sees for the first time its ``enabledSince``.

    The doctor counts a loop that never managed to tick from then (docs/design.md §11); the row
    has no last slot, so the loop still fires fresh.
    """
    pauses = pauses or {}
    new = [
        ScheduleState(loop=name, enabled=True, enabled_since=now)
        for name, loop in registry.loops.items()
        if loop.enabled and name not in states and name not in pauses
    ]
    if new:
        ScheduleState.objects.bulk_create(new, ignore_conflicts=True)
        LoopChange.objects.bulk_create([LoopChange(loop=s.loop, at=now, kind=LoopChangeKind.ENABLED) for s in new])


def record_reenabled(registry: Registry, states: dict[str, ScheduleState], now: datetime, pauses: dict | None = None) -> None:
    """An ``enabled`` change at ``now`` for each loop enabled in ``registry`` and not paused
    whose state is still marked disabled, unless its last change already says so (``enabled``,
    or ``resumed``: a resumed loop is re-enabled by its pause's end). The state itself stays
    disabled until the loop fires fresh (``mark_fresh``, ``keyed_states``), so a second
    sync before that tick must not record the turn twice: one query over those loops' last
    changes."""
    pauses = pauses or {}
    back = [name for name, state in states.items() if not state.enabled and _effective(registry, name, pauses)]
    if not back:
        return
    last = LoopChange.objects.filter(loop__in=back).values("loop").annotate(last=Max("id")).values("last")
    already = set(
        LoopChange.objects.filter(id__in=last, kind__in=[LoopChangeKind.ENABLED, LoopChangeKind.RESUMED])
        .values_list("loop", flat=True)
    )
    LoopChange.objects.bulk_create([
        LoopChange(loop=name, at=now, kind=LoopChangeKind.ENABLED) for name in back if name not in already
    ])


def mark_fresh(loops: list[str], now: datetime) -> None:
    """Loops that fired fresh at ``now`` (never fired, or re-enabled): marked enabled since
    ``now`` (two updates; none when ``loops`` is empty)."""
    if loops:
        ScheduleState.objects.filter(loop__in=loops, enabled=False).update(enabled=True, enabled_since=now)
        ScheduleState.objects.filter(loop__in=loops, enabled_since__isnull=True).update(enabled_since=now)


def _next_due_update(rows: list[tuple[str, datetime | None]]) -> None:
    """``UPDATE schedulestate SET next_due = v.… FROM (VALUES (loop, next due), …) AS v`` on
    the rows' loops (on PostgreSQL from the rows of one JSON parameter:
    ``runtime.services.bulk_rows.recordset``); each distinct instant is adapted once."""
    if not rows:
        return
    quote = connection.ops.quote_name
    table = quote(ScheduleState._meta.db_table)
    rows = [(loop, stored_instant(next_due)) for loop, next_due in rows]
    if connection.vendor == "postgresql":
        source, params = recordset(ScheduleState._meta.db_table, ["loop", "next_due"], rows, "v")
        loop, next_due = f"v.{quote('loop')}", f"v.{quote('next_due')}"
    else:
        source = f"(VALUES {', '.join(['(%s, %s)'] * len(rows))}) AS v"
        params, loop, next_due = [value for row in rows for value in row], "v.column1", "v.column2"
    sql = f"UPDATE {table} SET {quote('next_due')} = {next_due} FROM {source} WHERE {table}.{quote('loop')} = {loop}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def keyed_states(keyed: list[Loop], now: datetime, paused: frozenset[str] = frozenset()) -> dict[str, ScheduleState]:
    """The states of the keyed loops, created where missing; a loop the slot loop sees
    re-enabled (and not ``paused``) gets a new ``enabledSince``, so its rows fire their
    current slot with no skips."""
    live = [loop.name for loop in keyed if loop.enabled and loop.name not in paused]
    ScheduleState.objects.filter(loop__in=live, enabled=False).update(
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
