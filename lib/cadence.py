"""The cadence grammars: ``every`` (docs/design.md §4), a positive integer and one of s, m, h, d,
at most ``MAX_CADENCE_SECONDS`` (366 days); ``at`` (docs/design.md §6), a wall time "HH:MM"."""

import re
from datetime import time

WALL_TIME_PATTERN = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")
CADENCE_PATTERN = re.compile(r"^([1-9][0-9]{0,29})([smhd])$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: The longest cadence, 366 days (docs/design.md §4): a leap year's yearly loop fits, and every
#: slot, catch-up count and doctor deadline stays far inside the range of a datetime.
MAX_CADENCE_SECONDS = 366 * 86400
#: The ``days`` of a time-of-day loop, in ``date.weekday()`` order (docs/design.md §6).
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


class CadenceError(ValueError):
    """A cadence or wall time is not valid; ``code`` is the registry's rule for it:
    ``unparseable_every`` (the grammar) or ``cadence_too_long`` (over 366 days)."""

    code = "unparseable_every"


class CadenceTooLong(CadenceError):
    """``every`` is well-formed but longer than ``MAX_CADENCE_SECONDS``."""

    code = "cadence_too_long"


def parse_every(every: str) -> int:
    """Return the cadence of ``every`` in seconds.

    ``"90s"`` → 90, ``"60m"`` → 3600, ``"4h"`` → 14400, ``"7d"`` → 604800.
    Raises CadenceTooLong beyond 366 days (``"367d"``, ``"99999999999d"``) and CadenceError
    for anything else (``"0m"``, ``"1.5h"``, ``"60"``, ``" 5m"``, ``"5m\\n"``).
    """
    match = CADENCE_PATTERN.fullmatch(every) if isinstance(every, str) else None
    if match is None:
        raise CadenceError(
            f"{every!r} is not a cadence: write a positive integer and one of s, m, h, d (e.g. 90s, 60m, 4h, 7d)"
        )
    seconds = int(match.group(1)) * UNIT_SECONDS[match.group(2)]
    if seconds > MAX_CADENCE_SECONDS:
        raise CadenceTooLong(f"{every!r} is longer than the longest cadence, 366d ({MAX_CADENCE_SECONDS}s)")
    return seconds


def parse_wall_time(at: str) -> time:
    """``"HH:MM"`` (00:00 to 23:59, two digits each) as a ``time``.

    Raises CadenceError for anything else (``"9:00"``, ``"24:00"``, ``"09:00:00"``).
    """
    match = WALL_TIME_PATTERN.fullmatch(at) if isinstance(at, str) else None
    if match is None:
        raise CadenceError(f"{at!r} is not a wall time: write HH:MM, 00:00 to 23:59 (e.g. 09:00)")
    return time(int(match.group(1)), int(match.group(2)))
