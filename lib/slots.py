"""Slot arithmetic: pure functions of ``now`` (docs/design.md §5, §6).

A loop's slots come from its **slot rule**: ``Interval`` (the epoch floor of an instant
by the cadence, in UTC, with no offsets — docs/design.md §5) or ``lib.calendar.TimeOfDay``
(a wall-clock time in an IANA zone — docs/design.md §6). ``due_slots`` applies the catch-up
policies to any rule, so intervals and time-of-day slots are caught up and counted the
same way.
"""

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol


@dataclass(frozen=True)
class DueSlot:
    """A slot to fire and the number of missed slots its tick reports."""

    slot: datetime
    skipped_slots: int


class SlotRule(Protocol):
    """The slots of a loop, as aware UTC instants in increasing order."""

    def floor(self, instant: datetime) -> datetime:
        """The latest slot at or before ``instant``."""

    def after(self, slot: datetime) -> datetime:
        """The first slot strictly after ``slot``."""

    def before(self, slot: datetime) -> datetime:
        """The last slot strictly before ``slot``."""

    def between(self, first: datetime, last: datetime) -> int:
        """How many slots lie strictly between the slots ``first`` and ``last`` (0 if none)."""


@functools.lru_cache(maxsize=4096)
def slot_floor(instant: datetime, cadence_seconds: int) -> datetime:
    """``floor(epoch_seconds(instant) / c) * c`` as an aware UTC datetime. Remembered: the
    loops of one iteration share its instant, their slots and a few cadences."""
    if instant.tzinfo is None:
        raise ValueError("naive datetime: slots are computed on aware UTC instants")
    epoch = int(instant.timestamp() // 1)
    return datetime.fromtimestamp(epoch - epoch % cadence_seconds, tz=UTC)


@dataclass(frozen=True)
class Interval:
    """The slots of ``every``: multiples of ``seconds`` since the epoch, in UTC (docs/design.md §5)."""

    seconds: int

    def floor(self, instant: datetime) -> datetime:
        return slot_floor(instant, self.seconds)

    def after(self, slot: datetime) -> datetime:
        return slot_floor(slot, self.seconds) + timedelta(seconds=self.seconds)

    def before(self, slot: datetime) -> datetime:
        floor = slot_floor(slot, self.seconds)
        return floor if floor < slot else floor - timedelta(seconds=self.seconds)

    def between(self, first: datetime, last: datetime) -> int:
        return max(0, (last - first) // timedelta(seconds=self.seconds) - 1)

    def ceil(self, instant: datetime) -> datetime:
        """The first slot at or after ``instant``."""
        floor = self.floor(instant)
        return floor if floor == instant else self.after(floor)


def due_slots(
    *,
    rule: SlotRule,
    catch_up: str,
    last_fired: datetime | None,
    fresh: bool,
    now: datetime,
    catchup_limit: int,
) -> list[DueSlot]:
    """The slots one iteration at ``now`` fires, in order (docs/design.md §5; §6 for time of day).

    ``fresh``: the loop never fired or was just re-enabled; it fires the current slot
    with no skips (slots while disabled are not missed). Otherwise, with ``between``
    the number of slots strictly between the last fired slot L and the current slot C:
    ``none`` fires C with ``between`` skipped; ``last`` fires the slot before C with
    ``between − 1`` skipped when ``between > 0`` (C fires next iteration), else C with
    0; ``all`` fires every slot after L up to C, at most ``catchup_limit``, the older
    ones beyond the limit counted as skipped on the first fired tick. Raises ValueError
    for an unknown policy.
    """
    current = rule.floor(now)
    if fresh or last_fired is None:
        return [DueSlot(current, 0)]
    last = rule.floor(last_fired)
    if last >= current:
        return []
    between = rule.between(last, current)
    if catch_up == "none":
        return [DueSlot(current, between)]
    if catch_up == "last":
        return [DueSlot(rule.before(current), between - 1)] if between > 0 else [DueSlot(current, 0)]
    if catch_up == "all":
        missing = between + 1
        fired = min(missing, catchup_limit)
        slots = [current]
        while len(slots) < fired:
            slots.append(rule.before(slots[-1]))
        slots.reverse()
        return [DueSlot(slot, (missing - fired) if i == 0 else 0) for i, slot in enumerate(slots)]
    raise ValueError(f"unknown catch-up policy {catch_up!r}")
