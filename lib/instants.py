"""UTC instants as text: the slot format of eventIds and RFC 3339 parsing (docs/design.md §3, §5)."""

import functools
import re
from datetime import UTC, datetime, tzinfo

RFC3339_LOCAL = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?$")
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")


class InstantError(ValueError):
    """A text that is not an RFC 3339 instant with an offset."""


@functools.lru_cache(maxsize=4096)
def format_instant(instant: datetime) -> str:
    """``2026-03-29T01:00:00Z``: an aware instant in UTC, whole seconds (the slot format).
    Remembered: a burst's ticks share a few slots."""
    if instant.tzinfo is None:
        raise ValueError("naive datetime: every instant in the runtime is timezone-aware")
    return instant.astimezone(UTC).replace(microsecond=0, tzinfo=None).isoformat() + "Z"


def parse_instant(text: str) -> datetime:
    """Parse an RFC 3339 instant that carries an offset (``Z`` or ``±HH:MM``) into UTC.

    Raises InstantError for anything without an offset or not a date-time in the
    RFC 3339 §5.6 grammar (``20261130T090000Z`` and ``2026-11-30T09:00Z`` are ISO 8601
    but not RFC 3339).
    """
    if not isinstance(text, str) or not RFC3339.fullmatch(text):
        if isinstance(text, str) and RFC3339_LOCAL.fullmatch(text):
            raise InstantError(f"{text!r} has no UTC offset; write Z or ±HH:MM")
        raise InstantError(f"{text!r} is not an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.frac]Z or ±HH:MM)")
    try:
        value = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError as exc:
        raise InstantError(f"{text!r} is not an RFC 3339 date-time: {exc}") from None
    if value.tzinfo is None:
        raise InstantError(f"{text!r} has no UTC offset; write Z or ±HH:MM")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        # e.g. 9999-12-31T23:59:59-01:00: a valid text whose UTC instant is past year 9999.
        raise InstantError(f"{text!r} is out of range in UTC") from None


def rounded_seconds(seconds: float, digits: int = 1) -> float:
    """``seconds`` rounded to ``digits`` decimals for a JSON document, never ``-0.0``:
    ``round(-0.04, 1)`` is ``-0.0``, which ``json.dumps`` writes as ``-0.0`` (a reading a hair
    before the instant it is measured from reads ``0.0``)."""
    return round(seconds, digits) + 0.0


#: An RFC 3339 instant in UTC as the commands print it (``format_instant``), fractions allowed;
#: not one inside an identifier (``clock:heartbeat:2026-12-06T09:25:00Z`` stays as it is).
UTC_INSTANT_TEXT = re.compile(r"(?<![\w:./-])(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d+)?Z\b")


def localize_text(text: str, zone: tzinfo | None = None) -> str:
    """``text`` with every RFC 3339 UTC instant (``2026-12-06T09:25:00Z``) written in ``zone``
    with its offset (``2026-12-06T10:25:00+01:00``); ``zone`` None is the host's local zone
    (``TZ``), each instant with its own offset (daylight saving); an instant inside an
    identifier (an eventId, a key) is left as it is. For a person's ``--local``:
    scripts read the commands' UTC (docs/design.md §10)."""
    def local(match: re.Match) -> str:
        fraction = (match.group(3) or "")[:7]
        instant = datetime.fromisoformat(f"{match.group(1)}T{match.group(2)}{fraction}+00:00")
        shown = instant.astimezone(zone) if zone is not None else instant.astimezone()
        return shown.isoformat(timespec="microseconds" if fraction else "seconds")
    return UTC_INSTANT_TEXT.sub(local, text)
