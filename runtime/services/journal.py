"""Writing the append-only journal (docs/design.md §9)."""

import json
import sqlite3
from datetime import datetime

from django.db import connection

from runtime.models import Actor, Event, JournalEntry, Proposal, Run
from runtime.prepared import prepared_cursor

from .bulk_rows import backend_vendor, recordset, stored_instant

#: Most entries one ``INSERT … VALUES`` of ``record_values`` carries: 8 parameters a row
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
    """One unsaved entry; the arguments are ``record``'s (``entry_row`` gives its row instead).

    The entry links the event of the run or proposal when ``event`` is not given, so a
    correlation's whole story can be read from the journal alone.
    """
    event_id = _event_id(event, proposal, run)
    return JournalEntry(
        at=at,
        action=action,
        actor=actor,
        actor_name=actor_name,
        event_id=event_id,
        # Ids, not the objects: assigning a related object costs more than the rest of
        # the entry (the batched planner builds thousands); every caller passes saved rows.
        proposal_id=proposal.pk if proposal is not None else None,
        run_id=run.pk if run is not None else None,
        data=data or {},
    )


def entry_row(
    action: str,
    actor: Actor | str,
    *,
    at: datetime,
    actor_name: str = "",
    event: Event | None = None,
    proposal: Proposal | None = None,
    run: Run | None = None,
    data: dict | None = None,
) -> tuple:
    """``entry``'s entry as the row ``record_values`` writes, without building a model
    instance: what the batched planner journals thousands of (same arguments, same row)."""
    return entry_values(
        action, actor, at=at, actor_name=actor_name, event_id=_event_id(event, proposal, run),
        proposal_id=proposal.pk if proposal is not None else None, run_id=run.pk if run is not None else None,
        data=data,
    )


def _event_id(event: Event | None, proposal: Proposal | None, run: Run | None) -> int | None:
    """The event an entry links: ``event``, else the run's or the proposal's."""
    if event is not None:
        return event.pk
    if run is not None:
        return run.event_id
    if proposal is not None:
        return proposal.event_id
    return None


def record(action: str, actor: Actor | str, *, at: datetime, **links) -> JournalEntry:
    """Append one entry (``entry``'s arguments); call inside the transaction that makes the
    change it records."""
    made = entry(action, actor, at=at, **links)
    made.save(force_insert=True)
    return made


def entry_values(
    action: str,
    actor: Actor | str,
    *,
    at: datetime,
    actor_name: str = "",
    event_id: int | None = None,
    proposal_id: int | None = None,
    run_id: int | None = None,
    data: dict | None = None,
) -> tuple:
    """One entry as the row ``record_values`` writes, without a model instance: the values
    of ``COLUMNS`` in their database form — the instant adapted once per distinct value,
    ``data`` as JSON text (on PostgreSQL the document itself: ``bulk_rows.json_rows``).
    A row stored from it equals the one ``entry(…).save()`` stores."""
    postgres = backend_vendor() == "postgresql"
    return (
        stored_instant(at), action, str(actor), actor_name, event_id, proposal_id, run_id,
        (data or {}) if postgres else json.dumps(data or {}),
    )


def record_values(rows: list[tuple]) -> int:
    """Append journal rows built by ``entry_values``, one multi-row insert per
    ``INSERT_ROWS``: ``INSERT … VALUES (…), (…)`` on SQLite, ``INSERT … SELECT … FROM``
    the rows of one JSON parameter on PostgreSQL (``bulk_rows.recordset``).
    Returns how many were written. Call inside the transaction that makes the changes
    they record; a refused row (a constraint) raises ``IntegrityError`` for the whole
    statement. The rows' ids are not read back (no caller needs them). Skipping the ORM's
    per-row insert machinery is the point: on a 10,000-tick burst the journal was a third
    of the time (docs/performance.md).
    """
    if not rows:
        return 0
    quote = connection.ops.quote_name
    table = JournalEntry._meta.db_table
    head = f"INSERT INTO {quote(table)} ({', '.join(quote(column) for column in COLUMNS)}) "
    size = _chunk_rows()
    with prepared_cursor() as cursor:
        for first in range(0, len(rows), size):
            chunk = rows[first:first + size]
            if connection.vendor == "postgresql":
                source, params = recordset(table, COLUMNS, chunk, "j")
                cursor.execute(f"{head}SELECT {', '.join(f'j.{quote(c)}' for c in COLUMNS)} FROM {source}", params)
            else:
                placeholder = "(" + ", ".join(["%s"] * len(COLUMNS)) + ")"
                cursor.execute(f"{head}VALUES {', '.join([placeholder] * len(chunk))}", [value for row in chunk for value in row])
    return len(rows)


#: The columns ``record_values`` writes, the order of ``entry_values``' tuples: every
#: concrete field but the generated id.
COLUMNS = tuple(field.column for field in JournalEntry._meta.concrete_fields if not field.primary_key)


def _chunk_rows() -> int:
    """Rows one statement carries: ``INSERT_ROWS``, fewer where SQLite's bound-variable
    limit (999 before SQLite 3.32, 32,766 since) would be passed."""
    if connection.vendor != "sqlite":
        return INSERT_ROWS
    connection.ensure_connection()
    limit = connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return max(1, min(INSERT_ROWS, limit // len(COLUMNS)))
