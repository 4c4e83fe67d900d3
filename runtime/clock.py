"""One clock for the whole team: the database's (docs/operations.md, "Clock faults").

Every operation — an iteration of the slot loop, a worker's claim, an admission, an
approval, the doctor — reads ``database_now()`` once and passes the instant down as
``now``. Leases, slots, ``admitted_at``, journal times and the doctor's ages then agree
across hosts whatever each host's clock says: a host whose clock is ahead cannot expire
another's lease or fire a slot early, and journal times never go backwards between hosts.

On PostgreSQL the instant is ``clock_timestamp()`` (the server's real time, not the
transaction's start); on SQLite, which lives on one host, it is SQLite's own reading of
that host's clock. Both are timezone-aware UTC.

``recent_database_now()`` is the same clock for a check that needs no round trip of its
own — the signed door's ±300 s timestamp window: the last reading this process took,
advanced by its monotonic clock (which no clock step moves), read again once it is a
second old.
"""

import time
from datetime import UTC, datetime, timedelta

from django.db import connection

#: Seconds a reading serves ``recent_database_now`` before the database is asked again.
READING_MAX_AGE_SECONDS = 1.0

#: (the database's instant, this process's ``time.monotonic()`` when it was read), or None.
_reading: tuple[datetime, float] | None = None


def database_now() -> datetime:
    """The database's current instant, timezone-aware UTC (one query, microseconds on PostgreSQL,
    milliseconds on SQLite). Raises ``django.db.DatabaseError`` when the database is unreachable."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {now_sql()}")
        return instant_of(cursor.fetchone()[0])


def now_sql() -> str:
    """The SQL expression ``database_now`` reads, for a statement that asks other questions
    with it (the slot loop's idle planning check); its value goes through ``instant_of``."""
    return "clock_timestamp()" if connection.vendor == "postgresql" else "strftime('%Y-%m-%dT%H:%M:%f', 'now')"


def sql_instant(value: datetime, vendor: str):
    """An aware instant as a plain-SQL parameter, in the stored form of a ``DateTimeField``
    on ``vendor`` (``connection.vendor``): on SQLite the text Django writes (UTC, naive,
    ``str()``: ``YYYY-MM-DD HH:MM:SS[.ffffff]``), on PostgreSQL the instant itself, without
    the field's conversions (``runtime.prepared.instant_param`` is this for the connection's
    vendor): the slot loop's tick thread passes five instants a second, and those
    conversions were a fifth of its idle second's Python (docs/performance.md, "An idle
    second")."""
    if vendor == "sqlite":
        return str(value.astimezone(UTC).replace(tzinfo=None))
    return value


def instant_of(value) -> datetime:
    """The instant of a value of ``now_sql()``: timezone-aware UTC."""
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def recent_database_now() -> datetime:
    """The database's instant from a reading at most ``READING_MAX_AGE_SECONDS`` old, advanced
    by the monotonic clock since (timezone-aware UTC; off by the reading's round trip, a
    millisecond or less). Reads ``database_now()`` when there is no such reading; raises what
    it raises. Safe from any thread: a reading is replaced whole, and two threads that both
    find it old each read the database once."""
    global _reading
    taken = _reading
    elapsed = time.monotonic() - taken[1] if taken else None
    if elapsed is None or not 0 <= elapsed <= READING_MAX_AGE_SECONDS:
        instant = database_now()
        _reading = (instant, time.monotonic())
        return instant
    return taken[0] + timedelta(seconds=elapsed)


def forget_reading() -> None:
    """Drop the reading ``recent_database_now`` advances, so its next call asks the database
    (after the clock it reads was replaced, as the tests do)."""
    global _reading
    _reading = None
