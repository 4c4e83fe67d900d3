"""Slot arithmetic for interval loops: pure functions of ``now`` (DESIGN §5).

A slot is the epoch floor of an instant by the loop's cadence, in UTC, with no offsets.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True)
class DueSlot:
    """A slot to fire and the number of missed slots its tick reports."""

    slot: datetime
    skipped_slots: int


def slot_floor(instant: datetime, cadence_seconds: int) -> datetime:
    """``floor(epoch_seconds(instant) / c) * c`` as an aware UTC datetime."""
    if instant.tzinfo is None:
        raise ValueError("naive datetime: slots are computed on aware UTC instants")
    epoch = int(instant.timestamp() // 1)
    return datetime.fromtimestamp(epoch - epoch % cadence_seconds, tz=UTC)


def due_slots(
    *,
    cadence_seconds: int,
    catch_up: str,
    last_fired: datetime | None,
    fresh: bool,
    now: datetime,
    catchup_limit: int,
) -> list[DueSlot]:
    """The slots one iteration at ``now`` fires, in order (DESIGN §5).

    ``fresh``: the loop never fired or was just re-enabled; it fires the current slot
    with no skips (slots while disabled are not missed). Otherwise, with ``between``
    the number of slots strictly between the last fired slot L and the current slot C:
    ``none`` fires C with ``between`` skipped; ``last`` fires C − c with ``between − 1``
    skipped when ``between > 0`` (C fires next iteration), else C with 0; ``all`` fires
    every slot after L up to C, at most ``catchup_limit``, the older ones beyond the
    limit counted as skipped on the first fired tick.
    """
    c = timedelta(seconds=cadence_seconds)
    current = slot_floor(now, cadence_seconds)
    if fresh or last_fired is None:
        return [DueSlot(current, 0)]
    last = slot_floor(last_fired, cadence_seconds)
    if last >= current:
        return []
    between = (current - last) // c - 1
    if catch_up == "none":
        return [DueSlot(current, between)]
    if catch_up == "last":
        return [DueSlot(current - c, between - 1)] if between > 0 else [DueSlot(current, 0)]
    if catch_up == "all":
        missing = between + 1
        fired = min(missing, catchup_limit)
        first = current - (fired - 1) * c
        return [DueSlot(first + i * c, (missing - fired) if i == 0 else 0) for i in range(fired)]
    raise ValueError(f"unknown catch-up policy {catch_up!r}")
