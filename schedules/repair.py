"""Repairing a last slot that lies in the future: the trace of a clock step (docs/design.md §5; docs/operations.md).

A host clock stepped forward (a bad NTP answer, a hand edit), then corrected, leaves
behind slots fired in its future: ``ScheduleState.last_slot`` (or a keyed row's
``last_slot``) after the current instant. Left alone, the loop stays silent until the
real clock reaches that slot — a day, a year. Every slot-loop iteration repairs such
a slot to the current one (the loop's next slot fires at its boundary, within one
slot) and journals ``schedule_state_repaired`` (actor ``system``) with ``{loop, key,
futureSlot, repairedSlot}``; ``key`` is null for an interval or time-of-day loop.
While it stands, the doctor lists it as ``futureLastSlot``.

The tick of the future slot stays in the events table (it was admitted); when the
clock reaches that slot its eventId is a duplicate and nothing runs twice.
"""

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Max

from lib.calendar import loop_rule
from lib.instants import format_instant
from runtime.models import Actor
from runtime.registry import Registry
from runtime.services.journal import record

from .keyed.fold import Row
from .models import KeyedRule, KeyedSchedule, ScheduleState
from .state import DueState

logger = logging.getLogger(__name__)

ACTION = "schedule_state_repaired"
#: A last slot counts as in the future only this many seconds after ``now``: another slot
#: loop may commit a slot that came just after this iteration read its ``now`` (two loops
#: wake on the same second), and that slot is no clock step. A step back shorter than
#: this silences a loop for at most this long.
FUTURE_TOLERANCE_SECONDS = 10


def future_limit(now: datetime) -> datetime:
    """The latest last slot that is not in the future at ``now``. Pure."""
    return now + timedelta(seconds=FUTURE_TOLERANCE_SECONDS)


def future_last_slots(*, now: datetime) -> list[dict]:
    """Every last slot in the future at ``now``: ``{loop, key, lastSlot}``, loops first, then
    keyed rows (by loop, key). Two queries; the keyed one runs on ``keyed_last_slot_idx``."""
    limit = future_limit(now)
    states = ScheduleState.objects.filter(last_slot__gt=limit).order_by("loop").values_list("loop", "last_slot")
    rows = KeyedSchedule.objects.filter(last_slot__gt=limit).order_by("loop", "key").values_list("loop", "key", "last_slot")
    return [{"loop": loop, "key": None, "lastSlot": format_instant(slot)} for loop, slot in states] + [
        {"loop": loop, "key": key, "lastSlot": format_instant(slot)} for loop, key, slot in rows
    ]


def repair_future_slots(registry: Registry, states: dict[str, DueState], *, now: datetime) -> list[dict]:
    """Repair every last slot in the future at ``now`` (``future_limit``) to the current slot;
    returns the journal data of each repair.

    ``states`` (``schedules.state.due_states``: those due and those whose last slot is
    after ``future_limit(now)``) is updated in place so that the iteration that repairs
    goes on with the repaired slots; a repaired loop is next due at the slot after. A keyed
    row is repaired to its rule's slot at or before ``now`` and its next due to the slot after; a keyed loop's own state (which only
    shows its latest fired slot) to its rows' latest slot at or before ``now``. A loop that
    is no longer in the registry keeps its state: it does not tick, and re-enabling it fires
    fresh. Each repair is a compare-and-swap with its journal entry in one transaction, so
    two slot loops repair (and journal) a slot once.
    """
    limit = future_limit(now)
    future_rows = KeyedSchedule.objects.filter(last_slot__gt=limit).exclude(rule=KeyedRule.ONCE)
    repairs = [_repair_row(model, now) for model in future_rows]
    for state in states.values():
        if state.last_slot is None or state.last_slot <= limit or state.loop not in registry.loops:
            continue
        loop = registry.loops[state.loop]
        if loop.keyed is not None:
            repaired = KeyedSchedule.objects.filter(loop=loop.name, last_slot__lte=now).aggregate(m=Max("last_slot"))["m"]
            next_due = None
        else:
            rule = loop_rule(loop)
            repaired = rule.floor(now)
            next_due = rule.after(repaired) if loop.enabled else None
        with transaction.atomic():
            changed = ScheduleState.objects.filter(pk=state.pk, last_slot=state.last_slot).update(
                last_slot=repaired, next_due=next_due
            )
            repairs.append(_journal(changed, state.loop, None, state.last_slot, repaired, now))
        state.last_slot, state.next_due = repaired, next_due
    return [repair for repair in repairs if repair is not None]


def _repair_row(model: KeyedSchedule, now: datetime) -> dict | None:
    rule = Row.of(model).slot_rule()
    repaired = rule.floor(now)
    with transaction.atomic():
        changed = KeyedSchedule.objects.filter(pk=model.pk, last_slot=model.last_slot).update(
            last_slot=repaired, next_due=rule.after(repaired)
        )
        return _journal(changed, model.loop, model.key, model.last_slot, repaired, now)


def _journal(changed: int, loop: str, key: str | None, future: datetime, repaired: datetime | None, now: datetime) -> dict | None:
    """Journal and log one repair that this process made (``changed``); None when another did."""
    if not changed:
        return None
    data = {
        "loop": loop, "key": key, "futureSlot": format_instant(future),
        "repairedSlot": format_instant(repaired) if repaired is not None else None,
    }
    record(ACTION, Actor.SYSTEM, at=now, data=data)
    logger.warning(
        "loop %s%s: last slot %s is in the future (the clock was stepped back); repaired to %s",
        loop, f" key {key}" if key is not None else "", data["futureSlot"], data["repairedSlot"],
        extra={"action": ACTION, "loop": loop},
    )
    return data
