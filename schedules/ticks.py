"""Tick emission: admit the due slots of every enabled loop (docs/design.md §5, §6).

A tick is an ordinary event admitted through the ``schedule`` door with the eventId
``clock:<loop>:<slot>`` (``clock:<loop>:<key>:<slot>`` for a keyed loop); the unique
eventId is what makes restarts and two serve processes converge on one tick per slot.
Interval and time-of-day loops fire here; keyed loops through ``schedules.keyed``.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from lib.calendar import loop_rule
from lib.instants import format_instant
from lib.slots import DueSlot, due_slots
from runtime.registry import Loop, Registry

from .due_check import nothing_due
from .keyed import apply_keyed_events, emit_keyed_ticks
from .models import ScheduleState
from .pausing import paused_loops, resume_expired
from .repair import future_limit, repair_future_slots
from .state import (
    SYNC_NAME,
    DueState,
    due_states,
    ensure_synced,
    keyed_states,
    loops_fingerprint,
    mark_fresh,
    next_due_of,
    set_next_due,
)
from .tick_rows import write_ticks

logger = logging.getLogger(__name__)

#: Ticks an iteration logs a line each (``log_ticks``); one more line says how many others it
#: admitted. A line each for a burst of 10,000 ticks was 0.2 s of the slot loop's CPU at
#: the default level, INFO, and 10,000 lines an operator reads in the journal instead.
TICK_LINES = 20
#: Loops with skipped slots the summary line names.
SKIPPING_NAMED = 5


@dataclass(frozen=True)
class TickReport:
    """One tick an iteration fired (or found already admitted)."""

    loop: str
    event_id: str
    slot: datetime
    skipped_slots: int
    admitted: bool


def is_fresh(state: ScheduleState | DueState | None) -> bool:
    """A loop that never fired, or was disabled since it last fired: it fires the current
    slot with no skips, because slots while disabled are not missed (docs/design.md §5)."""
    return state is None or not state.enabled or state.last_slot is None


def due_ticks(
    *, now: datetime, registry: Registry, states: dict[str, ScheduleState] | dict[str, DueState], names: list[str] | None = None,
) -> list[tuple[Loop, DueSlot, bool]]:
    """What an iteration at ``now`` would fire: ``(loop, due slot, fresh)`` for enabled
    interval and time-of-day loops (keyed loops fire per key, ``schedules.keyed``), of
    every registry loop or of the loops ``names``."""
    result = []
    loops = registry.loops.values() if names is None else [registry.loops[n] for n in names if n in registry.loops]
    # A burst's loops share a few rules and last slots: each distinct case is worked out once.
    found: dict[tuple, list[DueSlot]] = {}
    limit = settings.FACTORY_CATCHUP_LIMIT
    for loop in loops:
        if not loop.enabled or loop.keyed is not None:
            continue
        state = states.get(loop.name)
        fresh = is_fresh(state)
        case = (loop_rule(loop), loop.catch_up, state.last_slot if state else None, fresh)
        slots = found.get(case)
        if slots is None:
            slots = found[case] = due_slots(
                rule=case[0], catch_up=case[1], last_fired=case[2], fresh=fresh, now=now, catchup_limit=limit,
            )
        result.extend((loop, due, fresh) for due in slots)
    return result


def left_to_the_slot_loop(registry: Registry, states: dict[str, ScheduleState] | dict[str, DueState]) -> list[str]:
    """The enabled loops an iteration at a past instant (``schedule tick --at``) leaves alone, by name:
    a loop that never fired (or was re-enabled) fires its *current* slot, which only the slot
    loop knows, and keyed loops fire per key at the slot loop's instant (docs/schedules.md)."""
    return sorted(
        loop.name for loop in registry.loops.values()
        if loop.enabled and (loop.keyed is not None or is_fresh(states.get(loop.name)))
    )


#: Ticks admitted per transaction: a burst of 10,000 is ten commits, and a crash between
#: two loses nothing (the rest are still due) and doubles nothing (the unique eventIds).
CHUNK = 1000


def emit_due_ticks(
    *, now: datetime, registry: Registry, at: datetime | None = None, renew: Callable[[], bool] | None = None,
) -> list[TickReport]:
    """Admit every due tick at ``now``; returns the ticks fired (docs/design.md §5).

    An idle iteration is one statement (``due_check.nothing_due``). Otherwise, when the
    states were synced with other loops than ``registry``'s, ``sync_registry``
    first (disabled loops, first-seen loops, every ``next_due``: ``ensure_synced``); then one query reads the
    states due (``next_due``) and those to repair (a last slot in the future, a clock
    stepped back: ``schedules.repair``). Keyed loops apply their setting and clearing
    events, then fire their due rows. The due ticks are admitted ``CHUNK`` at a time,
    each chunk one transaction: one insert of the events, one of their journal entries,
    one update of their states, built by the database (``schedules.tick_rows``). ``renew`` (the
    emitter's lease) is called between chunks; when it answers False the lease is lost
    and the remaining ticks are left to the new holder.

    ``at`` (``schedule tick --at``, never after ``now``) computes the due slots as if at
    that instant; the loops of ``left_to_the_slot_loop`` are not fired, and everything
    written — admissions, the states, the journal — is stamped ``now``, the real instant.
    """
    future_after = future_limit(now)
    if at is None and nothing_due(
        sync_name=SYNC_NAME, fingerprint=loops_fingerprint(registry), due_by=now, future_after=future_after,
        keyed=tuple(keyed_loops(registry)),
    ):
        return []
    if at is None:
        resume_expired(registry, now)  # a pause's ``until`` is its loop's ``next_due``: it ends here
    ensure_synced(registry, now)
    states = due_states(due_by=at or now, future_after=future_after)
    repair_future_slots(registry, states, now=now)
    if at is not None:
        left = set(left_to_the_slot_loop(registry, states))
        due = [(loop, slot, fresh) for loop, slot, fresh in _due_from(states, at, registry) if loop.name not in left]
        return _admit_ticks(due, registry, now, renew)
    reports = _emit_keyed(registry, now)
    return reports + _admit_ticks(_due_from(states, now, registry), registry, now, renew)


def _due_from(states: dict[str, DueState], instant: datetime, registry: Registry) -> list[tuple[Loop, DueSlot, bool]]:
    """The due ticks of the fetched ``states`` at ``instant``; a state fetched but found not
    due (its loop changed, or another process fired it) gets its ``next_due`` corrected."""
    # In loop-name order: the query's rows come in no order (it is shaped for its indexes),
    # and admission order decides planning order (docs/design.md §7), so it is kept stable.
    fetched = sorted((s for s in states.values() if s.next_due is not None and s.next_due <= instant), key=lambda s: s.loop)
    # A pause committed after this iteration's sync: its loop's due state is not fired (one
    # query, only when something is due; docs/schedules.md, "Pausing a loop").
    # Every pause, not those of the fetched loops: pauses are few, and a 100,000-name IN
    # list was the burst's slowest read.
    pauses = paused_loops() if fetched else {}
    by_name = {s.loop: s for s in fetched if s.loop not in pauses}
    due = due_ticks(now=instant, registry=registry, states=by_name, names=list(by_name))
    firing = {loop.name for loop, _, _ in due}
    stale = []
    for state in fetched:
        if state.loop not in firing:
            state.next_due = next_due_of(registry.loops.get(state.loop), state, instant, pauses)
            if state.next_due is not None and state.next_due <= instant:
                continue  # a loop left to the slot loop by ``--at``; it fires there
            stale.append(state)
    set_next_due(stale)
    return due


def _admit_ticks(
    due_list: list[tuple[Loop, DueSlot, bool]], registry: Registry, now: datetime, renew: Callable[[], bool] | None,
) -> list[TickReport]:
    """Admit the due ticks ``CHUNK`` at a time, each chunk with its state updates in one
    transaction. The first chunk is stamped ``now``; each later one ``now`` plus the time
    the burst has taken so far, so a tick's ``admittedAt`` says when its chunk was admitted,
    not when the burst began (a 10,000-tick burst is seconds long on a busy host)."""
    reports = []
    started = time.monotonic()
    for first in range(0, len(due_list), CHUNK):
        if first and renew is not None and not renew():
            logger.warning(
                "tick emitter lease lost after %s of %s ticks; the new holder fires the rest", first, len(due_list),
                extra={"action": "tick_lease_lost"},
            )
            break
        stamp = now + timedelta(seconds=time.monotonic() - started) if first else now
        reports += _admit_chunk(due_list[first:first + CHUNK], registry, stamp)
    log_ticks(reports)
    return reports


def _admit_chunk(chunk: list[tuple[Loop, DueSlot, bool]], registry: Registry, now: datetime) -> list[TickReport]:
    """One transaction: the chunk's events, journal entries and state advances written by the
    database (``schedules.tick_rows``). Every registry loop passed its sample tick at load,
    and a tick differs from the sample only in its slot and counts: no per-tick validation
    (docs/design.md §3)."""
    with transaction.atomic():
        mark_fresh([loop.name for loop, _, fresh in chunk if fresh], now)
        admitted = write_ticks(chunk, registry, now)
    reports = []
    for loop, due, _ in chunk:
        event_id = f"clock:{loop.name}:{format_instant(due.slot)}"
        reports.append(TickReport(loop.name, event_id, due.slot, due.skipped_slots, event_id in admitted))
    return reports


def log_ticks(reports: list[TickReport]) -> None:
    """Log the admitted ticks of one iteration: a line each for the first ``TICK_LINES``
    (a warning when slots were skipped), then one line for the rest — how many, and which
    loops skipped slots. Every tick is in the journal (``event_admitted``) either way."""
    admitted = [report for report in reports if report.admitted]
    for report in admitted[:TICK_LINES]:
        log = logger.warning if report.skipped_slots else logger.info
        log(
            "loop %s fired slot %s (%s skipped)", report.loop, format_instant(report.slot), report.skipped_slots,
            extra={"action": "tick_admitted", "loop": report.loop, "skippedSlots": report.skipped_slots},
        )
    rest = admitted[TICK_LINES:]
    if not rest:
        return
    skipping = [report.loop for report in rest if report.skipped_slots]
    named = ", ".join(skipping[:SKIPPING_NAMED]) + (f" and {len(skipping) - SKIPPING_NAMED} more" if len(skipping) > SKIPPING_NAMED else "")
    (logger.warning if skipping else logger.info)(
        "%s more ticks admitted this iteration%s; the journal has each", len(rest),
        f", {len(skipping)} after skipped slots ({named})" if skipping else "",
        extra={"action": "ticks_admitted", "ticks": len(rest), "loopsSkipping": len(skipping),
               "skippedSlots": sum(report.skipped_slots for report in rest)},
    )


def keyed_loops(registry: Registry) -> list[Loop]:
    """The keyed loops of ``registry``, found once per registry in force (an idle iteration
    does not walk every loop)."""
    cached = _keyed.get("registry")
    if cached is None or cached[0] is not registry:
        cached = (registry, [loop for loop in registry.loops.values() if loop.keyed is not None])
        _keyed["registry"] = cached
    return cached[1]


_keyed: dict[str, tuple[Registry, list[Loop]]] = {}


def _emit_keyed(registry: Registry, now: datetime) -> list[TickReport]:
    """Apply the keyed loops' events, then admit their due rows' ticks (``schedules.keyed``)."""
    keyed = keyed_loops(registry)
    if not keyed:
        return []
    # A keyed loop pauses as a whole: its rows stay as they are and none fires (one query).
    paused = frozenset(paused_loops([loop.name for loop in keyed]))
    states = keyed_states(keyed, now, paused)
    reports = []
    for loop in keyed:
        apply_keyed_events(loop, states[loop.name], now=now)
        if loop.enabled and loop.name not in paused:
            reports += [
                TickReport(loop.name, event_id, due.slot, due.skipped_slots, admitted)
                for event_id, due, admitted in emit_keyed_ticks(loop, states[loop.name], now=now, registry=registry)
            ]
    return reports
