"""Schedule-state rows read as named tuples, each distinct instant converted once (docs/performance.md,
"Reading at 100,000 loops").

Django converts every datetime column of every row on SQLite (to an aware datetime: a time
zone attached to each); over 100,000 states that is a large part of a read, although the
loops share a handful of slots and tick instants. ``state_rows`` runs the queryset's own
SQL and converts each distinct value once. PostgreSQL's driver returns aware datetimes itself.
"""

from collections import namedtuple
from datetime import UTC, datetime
from functools import lru_cache

from django.db import connection
from django.db.models import QuerySet

#: The columns read as instants, wherever they appear.
INSTANT_FIELDS = frozenset({"last_slot", "last_tick_at", "enabled_since", "next_due", "keys_next_due"})


@lru_cache(maxsize=8192)
def _instant(value: datetime | str) -> datetime:
    # SQLite keeps Django's instants as naive UTC text; its driver parses a datetime column
    # itself (Django registers the converter) and leaves an aggregate's value as text.
    naive = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return naive.replace(tzinfo=UTC)


@lru_cache(maxsize=32)
def _row_type(fields: tuple[str, ...]):
    return namedtuple("Row", fields)


def state_rows(queryset: QuerySet, fields: tuple[str, ...]) -> list:
    """The ``fields`` of ``queryset``'s rows as named tuples; ``INSTANT_FIELDS`` as aware UTC
    datetimes (None stays None), the others as the driver returns them (SQLite's booleans are
    0 and 1). One query."""
    sql, params = queryset.values_list(*fields).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    row_type = _row_type(fields)
    if connection.vendor != "sqlite":
        return [row_type(*row) for row in rows]
    instants = [n for n, field in enumerate(fields) if field in INSTANT_FIELDS]
    result = []
    for row in rows:
        values = list(row)
        for n in instants:
            if values[n] is not None:
                values[n] = _instant(values[n])
        result.append(row_type(*values))
    return result
