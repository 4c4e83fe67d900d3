"""Time-of-day slots: a wall-clock time in an IANA zone, as UTC instants (docs/design.md §6).

The one implementation of calendar arithmetic: time-of-day loops, keyed rows with an
``at`` rule, and the host clock bridge's calendar jobs (docs/host-clock.md) all use it. Pure
functions; ``zoneinfo`` for the zones, never the server's.

Daylight-saving time (docs/design.md §6): a wall time that does not exist on a day (spring
forward) fires once at the first instant after the gap; an ambiguous one (fall back)
fires once, at its first occurrence. Every allowed day has exactly one slot.
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from .cadence import WEEKDAYS, parse_wall_time
from .slots import Interval, SlotRule

#: The longest run of days without a slot: a rule with one weekday fires once a week.
_WEEK = 7


def wall_instant(day: date, at: time, zone: ZoneInfo) -> datetime:
    """The UTC instant of wall time ``at`` on ``day`` in ``zone`` (docs/design.md §6 rules).

    An ambiguous wall time (fall back) is its first occurrence; one that does not exist
    (spring forward) is the first instant after the gap, i.e. the transition itself —
    Europe/Budapest 02:30 on 2026-03-29 is 01:00:00Z, not the 01:30Z ``zoneinfo`` gives
    naively.
    """
    local = datetime.combine(day, at, tzinfo=zone)  # fold=0: the first occurrence
    instant = local.astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) == local.replace(tzinfo=None):
        return instant
    # In a gap, fold=1 maps with the offset after the transition (an earlier UTC instant,
    # still before the gap) and fold=0 with the one before (later, already after it):
    # the transition lies between; find its second by bisection.
    low, high = local.replace(fold=1).astimezone(UTC), instant
    after = high.astimezone(zone).utcoffset()
    while (high - low) > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).utcoffset() == after:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)


@dataclass(frozen=True)
class TimeOfDay:
    """The slots of ``{at, timezone, days?}``: ``at`` on each allowed day in ``zone``.

    ``days`` holds weekday names (``WEEKDAYS``) of the local date; empty means every day.
    Build it with ``time_of_day`` (cached, validating).
    """

    at: time
    zone: ZoneInfo
    days: frozenset[str]

    def _allowed(self, day: date) -> bool:
        return not self.days or WEEKDAYS[day.weekday()] in self.days

    def slot_on(self, day: date) -> datetime | None:
        """The slot of the local date ``day``, or None when ``day`` is not an allowed weekday."""
        return wall_instant(day, self.at, self.zone) if self._allowed(day) else None

    def floor(self, instant: datetime) -> datetime:
        """The latest slot at or before ``instant``."""
        start = instant.astimezone(self.zone).date() + timedelta(days=1)
        for back in range(_WEEK + 2):
            slot = self.slot_on(start - timedelta(days=back))
            if slot is not None and slot <= instant:
                return slot
        raise ValueError(f"no slot of {self} in the week before {instant}")

    def after(self, slot: datetime) -> datetime:
        """The first slot strictly after ``slot``."""
        start = slot.astimezone(self.zone).date() - timedelta(days=1)
        for forward in range(_WEEK + 3):
            candidate = self.slot_on(start + timedelta(days=forward))
            if candidate is not None and candidate > slot:
                return candidate
        raise ValueError(f"no slot of {self} in the week after {slot}")

    def before(self, slot: datetime) -> datetime:
        """The last slot strictly before ``slot`` (slots are whole seconds)."""
        return self.floor(slot - timedelta(seconds=1))

    def between(self, first: datetime, last: datetime) -> int:
        """Slots strictly between ``first`` and ``last``, counted one day at a time."""
        count, slot = 0, self.after(first)
        while slot < last:
            count, slot = count + 1, self.after(slot)
        return count

    def ceil(self, instant: datetime) -> datetime:
        """The first slot at or after ``instant``."""
        floor = self.floor(instant)
        return floor if floor == instant else self.after(floor)


@lru_cache(maxsize=4096)
def time_of_day(at: str, timezone: str, days: tuple[str, ...] = ()) -> TimeOfDay:
    """The rule of ``at`` ("HH:MM") in the IANA zone ``timezone`` on ``days`` (all when empty).

    Raises ValueError for a bad time or weekday and ``zoneinfo.ZoneInfoNotFoundError``
    (a KeyError) for an unknown zone; the registry loader refuses both at load (docs/design.md §6).
    """
    wall = parse_wall_time(at)
    unknown = [d for d in days if d not in WEEKDAYS]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not one of {', '.join(WEEKDAYS)}")
    return TimeOfDay(wall, ZoneInfo(timezone), frozenset(days))


def loop_rule(loop) -> SlotRule:
    """The slot rule of an effective ``runtime.registry.Loop``: its interval or its time of day."""
    if loop.at is not None:
        return time_of_day(loop.at, loop.timezone, loop.days)
    return Interval(loop.cadence_seconds)


def calendar_slot(at: str, timezone: str, days: tuple[str, ...], now: datetime) -> datetime:
    """The latest firing of ``at`` ("HH:MM") in ``timezone`` on ``days`` (all when empty) at or before ``now``."""
    return time_of_day(at, timezone, tuple(days)).floor(now)
