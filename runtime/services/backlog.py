"""Whether the slot loop's runtime phases have work: one precompiled statement (docs/performance.md).

An idle iteration asks it once a second instead of letting the outbox publisher and the
planner each build and run their queries: pending outbox rows (``outbox_pending_idx``)
and events not planned yet (``event_unplanned_idx``). Plain SQL built once per process,
with the partial indexes' conditions as literals so SQLite uses them.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from runtime import clock
from runtime.models import Event, OutboxEntry, OutboxStatus


@dataclass(frozen=True)
class Backlog:
    """``outbox``: some outbox row is pending; ``events``: some admitted event is not planned."""

    outbox: bool
    events: bool


_columns: dict[str, list[str]] = {}


def backlog_columns() -> list[str]:
    """The two answers as SQL expressions (``outbox``, ``events``), for ``backlog`` and for a
    statement that asks them with other questions (``schedules.due_check.check_idle``)."""
    if connection.vendor not in _columns:
        quote = connection.ops.quote_name
        _columns[connection.vendor] = [
            f"EXISTS (SELECT 1 FROM {quote(OutboxEntry._meta.db_table)} "
            f"WHERE {quote('status')} = '{OutboxStatus.PENDING.value}')",
            f"EXISTS (SELECT 1 FROM {quote(Event._meta.db_table)} WHERE {quote('planned_at')} IS NULL)",
        ]
    return _columns[connection.vendor]


def backlog_now() -> tuple[datetime, Backlog]:
    """The database's instant (``runtime.clock.database_now``) and what waits for the slot loop
    then: one statement, the slot loop's planning thread's whole idle question."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {clock.now_sql()}, {', '.join(backlog_columns())}")
        now, outbox, events = cursor.fetchone()
    return clock.instant_of(now), Backlog(outbox=bool(outbox), events=bool(events))


def backlog() -> Backlog:
    """What waits for the slot loop now: one statement."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(backlog_columns())}")
        outbox, events = cursor.fetchone()
    return Backlog(outbox=bool(outbox), events=bool(events))
