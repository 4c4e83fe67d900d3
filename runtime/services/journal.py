"""Writing the append-only journal (docs/design.md §9)."""

import functools
import sqlite3
from collections.abc import Iterable
from datetime import datetime

from django.db import connection

from runtime.models import Actor, Event, JournalEntry, Proposal, Run

#: Most entries one ``INSERT … VALUES`` of ``record_many`` carries: 8 parameters a row
#: keeps a statement at 8,000, under SQLite's 32,766 and PostgreSQL's 65,535.
INSERT_ROWS = 1000


def entry(
    action: str,
    actor: Actor | str,
    *,
    at: datetime,
    actor_name: str = "",
    event: Event | None = None,
    proposal: Proposal | None = None,
    run: Run | None = None,
    data: dict | None = None,
) -> JournalEntry:
    """One unsaved entry, for ``record_many``; the arguments are ``record``'s.

    The entry links the event of the run or proposal when ``event`` is not given, so a
    correlation's whole story can be read from the journal alone.
    """
    if event is not None:
        event_id = event.pk
    elif run is not None:
        event_id = run.event_id
    elif proposal is not None:
        event_id = proposal.event_id
    else:
        event_id = None
    return JournalEntry(
        at=at,
        action=action,
        actor=actor,
        actor_name=actor_name,
        event_id=event_id,
        proposal=proposal,
        run=run,
        data=data or {},
    )


def record(action: str, actor: Actor | str, *, at: datetime, **links) -> JournalEntry:
    """Append one entry (``entry``'s arguments); call inside the transaction that makes the
    change it records."""
    made = entry(action, actor, at=at, **links)
    made.save(force_insert=True)
    return made


def record_many(entries: Iterable[JournalEntry]) -> int:
    """Append many entries built by ``entry`` with one multi-row insert per ``INSERT_ROWS``
    entries (the batched paths of admission and planning): ``INSERT … VALUES (…), (…)`` on
    SQLite, ``INSERT … SELECT * FROM unnest(…)`` of one array a column on PostgreSQL.
    Returns how many were written. Call inside the transaction that makes the changes they
    record; a refused row (a constraint) raises ``IntegrityError`` for the whole statement.

    Each value is prepared by its field for this connection, as ``bulk_create`` prepares it,
    so the stored rows are the same; the entries' primary keys are not read back (no caller
    needs them). Skipping the ORM's per-row insert machinery is the point: on a 10,000-tick
    burst the journal was a third of the time (docs/performance.md).
    """
    rows = [[_prepared(field, field.pre_save(made, add=True)) for field in _FIELDS] for made in entries]
    if not rows:
        return 0
    quote = connection.ops.quote_name
    head = f"INSERT INTO {quote(JournalEntry._meta.db_table)} ({', '.join(quote(f.column) for f in _FIELDS)}) "
    size = _chunk_rows()
    with connection.cursor() as cursor:
        for first in range(0, len(rows), size):
            chunk = rows[first:first + size]
            if connection.vendor == "postgresql":
                # One array a column: 8 parameters a statement, not 8 a row, which the
                # driver would otherwise splice into the statement's text one by one.
                arrays = ", ".join(f"%s::{field.db_type(connection)}[]" for field in _FIELDS)
                cursor.execute(f"{head}SELECT * FROM unnest({arrays})", [list(column) for column in zip(*chunk, strict=True)])
            else:
                placeholder = "(" + ", ".join(["%s"] * len(_FIELDS)) + ")"
                cursor.execute(f"{head}VALUES {', '.join([placeholder] * len(chunk))}", [value for row in chunk for value in row])
    return len(rows)


#: The columns ``record_many`` writes: every concrete field but the generated id.
_FIELDS = [field for field in JournalEntry._meta.concrete_fields if not field.primary_key]


def _prepared(field, value):
    """``value`` in ``field``'s database form: ``get_db_prep_save``, which ``bulk_create``
    uses, except that text and null pass as they are (what it would return for them) and an
    instant is adapted once per batch-shared value."""
    if value is None or type(value) is str:
        return value
    if isinstance(value, datetime):
        return _adapted_instant(field, value, connection.vendor)
    return field.get_db_prep_save(value, connection)


@functools.lru_cache(maxsize=1024)
def _adapted_instant(field, value: datetime, vendor: str):
    """A field's database form of an instant, remembered per backend: a batch's entries
    share a few instants (its ``now``)."""
    return field.get_db_prep_save(value, connection)


def _chunk_rows() -> int:
    """Rows one statement carries: ``INSERT_ROWS``, fewer where SQLite's bound-variable
    limit (999 before SQLite 3.32, 32,766 since) would be passed."""
    if connection.vendor != "sqlite":
        return INSERT_ROWS
    connection.ensure_connection()
    limit = connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return max(1, min(INSERT_ROWS, limit // len(_FIELDS)))
