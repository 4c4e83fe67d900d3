"""Every write of ``ScheduleState``: the per-loop bookkeeping of the slot loop (docs/design.md §5, §6).

``ScheduleState`` is derived data — the events table is the truth for "did it fire?" —
written in the transactions that admit ticks. Keeping every write here keeps its rules
in one place: a last slot only moves forward, a loop seen disabled is marked so that
re-enabling it does not replay the slots it missed, and ``enabledSince`` is when the
slot loop last saw the loop turned on.
"""

import logging
from datetime import datetime

from django.db.models import Q

from runtime.registry import Loop, Registry

from .models import ScheduleState

logger = logging.getLogger(__name__)


def read_states() -> dict[str, ScheduleState]:
    """Every loop's state, by loop name."""
    return {state.loop: state for state in ScheduleState.objects.all()}


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


def advance_loop(loop: str, slot: datetime, event_id: str, now: datetime, *, fresh: bool) -> None:
    """Record a tick of ``loop`` for ``slot`` admitted at ``now``; call in the admitting transaction.

    A ``fresh`` loop (never fired, or re-enabled) gets ``enabledSince = now``. The last
    slot only moves forward: a second process that fired an older slot changes nothing.
    """
    state, created = ScheduleState.objects.get_or_create(loop=loop, defaults={"enabled": True, "enabled_since": now})
    if fresh and not created:
        ScheduleState.objects.filter(pk=state.pk, enabled=False).update(enabled=True, enabled_since=now)
        ScheduleState.objects.filter(pk=state.pk, enabled_since__isnull=True).update(enabled_since=now)
    ScheduleState.objects.filter(pk=state.pk).filter(Q(last_slot__lt=slot) | Q(last_slot__isnull=True)).update(
        last_slot=slot, last_event_id=event_id, last_tick_at=now
    )


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
