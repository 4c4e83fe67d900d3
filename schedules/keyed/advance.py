"""Advancing a page of fired keyed rows in two statements (docs/design.md §6, docs/performance.md).

A row is changed only if it is still the one the page fetched — a compare and swap on
its ``next_due`` and ``set_by`` — so a setting event, or another slot loop, that got
there first keeps its row. ``advance_rows`` moves the repeating rows past their fired
slot with one ``UPDATE … FROM (VALUES …)`` (on PostgreSQL from the rows of
one JSON parameter: ``runtime.services.bulk_rows.typed_rows``); ``delete_rows`` deletes the fired
``once`` rows.
"""

from django.db import connection
from django.db.models import DateTimeField

from runtime.services.bulk_rows import json_rows, typed_rows

from ..models import KeyedSchedule
from .fold import Row

#: Rows one statement carries (SQLite: 7 parameters a row).
ROWS = 500
_INSTANT = DateTimeField()
#: PostgreSQL types of ``_advance``'s row values, in order.
_TYPES = ("bigint", "timestamptz", "text", "timestamptz", "timestamptz", "text", "timestamptz")


def advance_rows(advances: list[tuple[int, Row, Row]]) -> int:
    """``(pk, row as fetched, row after its tick)`` of repeating rows: store each one's new
    next due, last slot, last eventId and last tick where the stored row still has the
    fetched ``next_due`` and ``set_by``; returns how many rows changed. Call inside the
    transaction that admitted the ticks."""
    changed = 0
    for first in range(0, len(advances), ROWS):
        changed += _advance(advances[first:first + ROWS])
    return changed


def _advance(advances: list[tuple[int, Row, Row]]) -> int:
    if not advances:
        return 0
    quote = connection.ops.quote_name
    table = quote(KeyedSchedule._meta.db_table)
    rows = [
        (pk, fetched.next_due, fetched.set_by, after.next_due, after.last_slot, after.last_event_id, after.last_tick_at)
        for pk, fetched, after in advances
    ]
    names = ["id", "fetched_due", "fetched_by", "next_due", "last_slot", "last_event_id", "last_tick_at"]
    if connection.vendor == "postgresql":
        source = typed_rows(list(zip(names, _TYPES, strict=True)), "v")
        params = [json_rows(rows)]
    else:
        instants = {1, 3, 4, 6}
        params = [
            _INSTANT.get_db_prep_value(value, connection) if n in instants else value
            for row in rows for n, value in enumerate(row)
        ]
        columns = ", ".join(f"column{n + 1} AS {name}" for n, name in enumerate(names))
        source = f"(SELECT {columns} FROM (VALUES {', '.join(['(' + ', '.join(['%s'] * 7) + ')'] * len(rows))})) AS v"
    sets = ", ".join(f"{quote(c)} = v.{c}" for c in ("next_due", "last_slot", "last_event_id", "last_tick_at"))
    sql = (
        f"UPDATE {table} SET {sets} FROM {source} WHERE {table}.{quote('id')} = v.id "
        f"AND {table}.{quote('next_due')} = v.fetched_due AND {table}.{quote('set_by')} = v.fetched_by"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def delete_rows(fired: list[tuple[int, Row]]) -> int:
    """``(pk, row as fetched)`` of fired ``once`` rows: delete those still as fetched (one
    statement a row: one-off reminders are few); returns how many were deleted."""
    return sum(
        KeyedSchedule.objects.filter(pk=pk, next_due=row.next_due, set_by=row.set_by).delete()[0] for pk, row in fired
    )
