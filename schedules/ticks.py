"""Tick emission: admit the due slots of every enabled loop (DESIGN §5, §6).

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
from django.db.models import Q

from runtime.services.admission import AdmissionRefused, admit_event
from runtime.models import Door
from runtime.registry import Loop, Registry

from lib.calendar import loop_rule
from .keyed import apply_keyed_events, emit_keyed_ticks
from .models import ScheduleState
from .envelope import tick_envelope
from lib.slots import DueSlot, due_slots

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
    slot with no skips, because slots while disabled are not missed (DESIGN §5)."""
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


def emit_due_ticks(*, now: datetime, registry: Registry) -> list[TickReport]:
    """Admit every due tick at ``now`` and record disabled loops; returns the ticks fired.

    Each tick and its ``ScheduleState`` update commit in one transaction. Keyed loops
    first apply their setting and clearing events, then fire their due rows.
    """
    states = {s.loop: s for s in ScheduleState.objects.all()}
    _record_disabled(registry, states)
    _record_first_seen(registry, states, now)
    reports = _emit_keyed(registry, now)
    for loop, due, fresh in due_ticks(now=now, registry=registry, states=states):
        envelope = tick_envelope(loop, due)
        try:
            with transaction.atomic():
                admission = admit_event(envelope, door=Door.SCHEDULE, now=now, registry=registry)
                _advance_state(loop.name, due.slot, envelope["eventId"], now, fresh)
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
    """Apply the keyed loops' events, then admit their due rows' ticks (``schedules.keyed``).

    A keyed loop the slot loop sees re-enabled gets a new ``enabledSince``: its rows set
    or fired before that fire their current slot with no skips.
    """
    keyed = [loop for loop in registry.loops.values() if loop.keyed is not None]
    if not keyed:
        return []
    ScheduleState.objects.filter(loop__in=[loop.name for loop in keyed if loop.enabled], enabled=False).update(
        enabled=True, enabled_since=now
    )
    for loop in keyed:
        ScheduleState.objects.get_or_create(loop=loop.name, defaults={"enabled": loop.enabled, "enabled_since": now})
    states = {s.loop: s for s in ScheduleState.objects.filter(loop__in=[loop.name for loop in keyed])}
    reports = []
    for loop in keyed:
        apply_keyed_events(loop, states[loop.name], now=now)
        if loop.enabled:
            reports += [
                TickReport(loop.name, event_id, due.slot, due.skipped_slots, admitted)
                for event_id, due, admitted in emit_keyed_ticks(loop, states[loop.name], now=now, registry=registry)
            ]
    return reports


def _record_disabled(registry: Registry, states: dict[str, ScheduleState]) -> None:
    """Mark loops disabled (or gone) so that re-enabling them does not replay missed slots."""
    stale = [
        name for name, state in states.items()
        if state.enabled and (name not in registry.loops or not registry.loops[name].enabled)
    ]
    if stale:
        ScheduleState.objects.filter(loop__in=stale, enabled=True).update(enabled=False)
        for name in stale:
            states[name].enabled = False
            logger.info("loop %s is disabled; its ticks stop", name, extra={"action": "loop_disabled", "loop": name})


def _record_first_seen(registry: Registry, states: dict[str, ScheduleState], now: datetime) -> None:
    """Give an enabled loop the slot loop sees for the first time its ``enabledSince``.

    The doctor counts a loop that never managed to tick from then (DESIGN §11); the row
    has no last slot, so the loop still fires fresh.
    """
    new = [
        ScheduleState(loop=name, enabled=True, enabled_since=now)
        for name, loop in registry.loops.items()
        if loop.enabled and name not in states
    ]
    if new:
        ScheduleState.objects.bulk_create(new, ignore_conflicts=True)


def _advance_state(loop: str, slot: datetime, event_id: str, now: datetime, fresh: bool) -> None:
    state, created = ScheduleState.objects.get_or_create(
        loop=loop, defaults={"enabled": True, "enabled_since": now}
    )
    if fresh and not created:
        ScheduleState.objects.filter(pk=state.pk, enabled=False).update(enabled=True, enabled_since=now)
        ScheduleState.objects.filter(pk=state.pk, enabled_since__isnull=True).update(enabled_since=now)
    ScheduleState.objects.filter(pk=state.pk).filter(Q(last_slot__lt=slot) | Q(last_slot__isnull=True)).update(
        last_slot=slot, last_event_id=event_id, last_tick_at=now
    )
