"""The envelope of a tick: its identity is its slot (docs/design.md §5, §6)."""

from lib.envelope import make_envelope
from lib.instants import format_instant
from lib.slots import DueSlot
from runtime.registry import Loop


def tick_envelope(loop: Loop, due: DueSlot, *, key: str | None = None, cadence_seconds: int | None = None) -> dict:
    """The ``factory.event/v1`` envelope of one tick.

    ``clock:<loop>:<slot>`` for a loop, ``clock:<loop>:<key>:<slot>`` for a key of a
    keyed loop (whose subject is the key and whose payload carries ``key``). The slot is
    written ``YYYY-MM-DDTHH:MM:SSZ`` and is also ``occurredAt``, so every process emits
    the same bytes for a slot. ``cadence_seconds`` defaults to the loop's (null for
    time-of-day loops); a keyed row passes its own interval.
    """
    slot = format_instant(due.slot)
    event_id = f"clock:{loop.name}:{key}:{slot}" if key is not None else f"clock:{loop.name}:{slot}"
    payload = {**loop.payload, "loop": loop.name}
    if key is not None:
        payload["key"] = key
    payload.update(
        slot=slot,
        cadenceSeconds=cadence_seconds if key is not None else loop.cadence_seconds,
        skippedSlots=due.skipped_slots,
    )
    return make_envelope(
        event_id=event_id,
        type=loop.event_type,
        source="schedule",
        subject=key if key is not None else loop.subject,
        occurred_at=due.slot,
        payload=payload,
    )
