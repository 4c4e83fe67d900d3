"""Tick emission: admit the due slots of every enabled loop (docs/design.md §5, §6).

A tick is an ordinary event admitted through the ``schedule`` door with the eventId
``clock:<loop>:<slot>`` (``clock:<loop>:<key>:<slot>`` for a keyed loop); the unique
eventId is what makes restarts and two serve processes converge on one tick per slot.
Interval and time-of-day loops fire here; keyed loops through ``schedules.keyed``.
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction

from lib.calendar import loop_rule
from lib.slots import DueSlot, due_slots
from runtime.models import Door
from runtime.registry import Loop, Registry
from runtime.services.admission import AdmissionRefused, admit_event

from .envelope import tick_envelope
from .keyed import apply_keyed_events, emit_keyed_ticks
from .models import ScheduleState
from .repair import repair_future_slots
from .state import advance_loop, keyed_states, read_states, record_disabled, record_first_seen

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TickReport:
    """One tick an iteration fired (or found already admitted)."""

    loop: str
    event_id: str
    slot: datetime
    skipped_slots: int
    admitted: bool


def is_fresh(state: ScheduleState | None) -> bool:
    """A loop that never fired, or was disabled since it last fired: it fires the current
    slot with no skips, because slots while disabled are not missed (docs/design.md §5)."""
    return state is None or not state.enabled or state.last_slot is None


def due_ticks(*, now: datetime, registry: Registry, states: dict[str, ScheduleState]) -> list[tuple[Loop, DueSlot, bool]]:
    """What an iteration at ``now`` would fire: ``(loop, due slot, fresh)`` for enabled
    interval and time-of-day loops (keyed loops fire per key, ``schedules.keyed``)."""
    result = []
    for loop in registry.loops.values():
        if not loop.enabled or loop.keyed is not None:
            continue
        state = states.get(loop.name)
        fresh = is_fresh(state)
        for due in due_slots(
            rule=loop_rule(loop),
            catch_up=loop.catch_up,
            last_fired=state.last_slot if state else None,
            fresh=fresh,
            now=now,
            catchup_limit=settings.FACTORY_CATCHUP_LIMIT,
        ):
            result.append((loop, due, fresh))
    return result


def left_to_the_slot_loop(registry: Registry, states: dict[str, ScheduleState]) -> list[str]:
    """The enabled loops an iteration at a past instant (``schedule tick --at``) leaves alone, by name:
    a loop that never fired (or was re-enabled) fires its *current* slot, which only the slot
    loop knows, and keyed loops fire per key at the slot loop's instant (docs/schedules.md)."""
    return sorted(
        loop.name for loop in registry.loops.values()
        if loop.enabled and (loop.keyed is not None or is_fresh(states.get(loop.name)))
    )


def emit_due_ticks(*, now: datetime, registry: Registry, at: datetime | None = None) -> list[TickReport]:
    """Admit every due tick at ``now`` and record disabled loops; returns the ticks fired.

    Each tick and its ``ScheduleState`` update commit in one transaction. Keyed loops
    first apply their setting and clearing events, then fire their due rows. A last slot
    in the future (a clock stepped back) is repaired first (``schedules.repair``).

    ``at`` (``schedule tick --at``, never after ``now``) computes the due slots as if at
    that instant; the loops of ``left_to_the_slot_loop`` are not fired, and everything
    written — admissions, the states, the journal — is stamped ``now``, the real instant.
    """
    states = read_states()
    record_disabled(registry, states)
    record_first_seen(registry, states, now)
    repair_future_slots(registry, states, now=now)
    if at is not None:
        left = set(left_to_the_slot_loop(registry, states))
        due = [(loop, slot, fresh) for loop, slot, fresh in due_ticks(now=at, registry=registry, states=states)
               if loop.name not in left]
        return _admit_ticks(due, registry, now)
    reports = _emit_keyed(registry, now)
    return reports + _admit_ticks(due_ticks(now=now, registry=registry, states=states), registry, now)


def _admit_ticks(due_list: list[tuple[Loop, DueSlot, bool]], registry: Registry, now: datetime) -> list[TickReport]:
    """Admit each due tick with its state update, one transaction each, at ``now``."""
    reports = []
    for loop, due, fresh in due_list:
        envelope = tick_envelope(loop, due)
        try:
            with transaction.atomic():
                admission = admit_event(envelope, door=Door.SCHEDULE, now=now, registry=registry)
                advance_loop(loop.name, due.slot, envelope["eventId"], now, fresh=fresh)
        except AdmissionRefused as exc:
            # The load-time sample tick makes this all but impossible; if it happens, the
            # other loops still tick, and the doctor reports this one as stopped.
            logger.error(
                "loop %s: tick %s refused: %s", loop.name, envelope["eventId"], exc,
                extra={"action": "tick_refused", "loop": loop.name},
            )
            continue
        reports.append(TickReport(loop.name, envelope["eventId"], due.slot, due.skipped_slots, admission.admitted))
        if admission.admitted:
            log = logger.warning if due.skipped_slots else logger.info
            log(
                "loop %s fired slot %s (%s skipped)", loop.name, envelope["payload"]["slot"], due.skipped_slots,
                extra={"action": "tick_admitted", "loop": loop.name, "skippedSlots": due.skipped_slots},
            )
    return reports


def _emit_keyed(registry: Registry, now: datetime) -> list[TickReport]:
    """Apply the keyed loops' events, then admit their due rows' ticks (``schedules.keyed``)."""
    keyed = [loop for loop in registry.loops.values() if loop.keyed is not None]
    if not keyed:
        return []
    states = keyed_states(keyed, now)
    reports = []
    for loop in keyed:
        apply_keyed_events(loop, states[loop.name], now=now)
        if loop.enabled:
            reports += [
                TickReport(loop.name, event_id, due.slot, due.skipped_slots, admitted)
                for event_id, due, admitted in emit_keyed_ticks(loop, states[loop.name], now=now, registry=registry)
            ]
    return reports
