"""One clock for the whole team: the database's (docs/operations.md, "Clock faults").

Every operation — an iteration of the slot loop, a worker's claim, an admission, an
approval, the doctor — reads ``database_now()`` once and passes the instant down as
``now``. Leases, slots, ``admitted_at``, journal times and the doctor's ages then agree
across hosts whatever each host's clock says: a host whose clock is ahead cannot expire
another's lease or fire a slot early, and journal times never go backwards between hosts.

On PostgreSQL the instant is ``clock_timestamp()`` (the server's real time, not the
transaction's start); on SQLite, which lives on one host, it is SQLite's own reading of
that host's clock. Both are timezone-aware UTC.
"""

from datetime import UTC, datetime

from django.db import connection


def database_now() -> datetime:
    """The database's current instant, timezone-aware UTC (one query, microseconds on PostgreSQL,
    milliseconds on SQLite). Raises ``django.db.DatabaseError`` when the database is unreachable."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT clock_timestamp()")
            return cursor.fetchone()[0].astimezone(UTC)
        cursor.execute("SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now')")
        return datetime.fromisoformat(cursor.fetchone()[0]).replace(tzinfo=UTC)
