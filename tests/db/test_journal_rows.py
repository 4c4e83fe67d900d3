"""The journal's row builders and its statements' size (docs/design.md §9): which event an entry
links, the row ``entry_values`` gives, and how many rows one ``INSERT`` carries under SQLite's
bound-variable limit."""

import json
import sqlite3

import pytest
from django.db import connection

from runtime.models import Actor, Event, JournalEntry, Proposal, Run
from runtime.services import journal
from runtime.services.bulk_rows import stored_instant
from runtime.services.journal import COLUMNS, _chunk_rows, _event_id, entry, entry_values, record_values
from tests.conftest import at

NOW = at("2026-11-30T10:00:00Z")


def test_an_entry_links_its_event_else_its_runs_else_its_proposals():
    """``event`` first, then the run's event, then the proposal's; none without any."""
    event, run, proposal = Event(pk=1), Run(pk=2, event_id=20), Proposal(pk=3, event_id=30)
    assert _event_id(event, proposal, run) == 1
    assert _event_id(None, proposal, run) == 20
    assert _event_id(None, proposal, None) == 30
    assert _event_id(None, None, None) is None


def test_an_unsaved_entry_carries_its_links_as_ids_and_an_empty_document_for_no_data():
    """``entry`` sets every field from its arguments; no ``data`` is ``{}``."""
    made = entry("note", Actor.OPERATOR, at=NOW, actor_name="Zoë", proposal=Proposal(pk=3, event_id=30),
                 run=Run(pk=2, event_id=20))
    assert (made.at, made.action, made.actor, made.actor_name, made.event_id, made.proposal_id, made.run_id,
            made.data, made.pk) == (NOW, "note", "operator", "Zoë", 20, 3, 2, {}, None)
    assert entry("note", Actor.SYSTEM, at=NOW, data={"k": 1}).data == {"k": 1}


@pytest.mark.django_db
def test_entry_values_is_the_row_in_its_database_form():
    """The instant as the database stores it, the actor's value, and ``data`` as JSON text
    (SQLite) or the document (PostgreSQL), ``{}`` when none; in ``COLUMNS``' order."""
    assert COLUMNS == ("at", "action", "actor", "actor_name", "event_id", "proposal_id", "run_id", "data")
    document = {"ü": [1]}
    expected = document if connection.vendor == "postgresql" else json.dumps(document)
    empty = {} if connection.vendor == "postgresql" else "{}"
    assert entry_values("note", Actor.OPERATOR, at=NOW, actor_name="a", event_id=1, proposal_id=2, run_id=3,
                        data=document) == (stored_instant(NOW), "note", "operator", "a", 1, 2, 3, expected)
    assert entry_values("note", "system", at=NOW) == (stored_instant(NOW), "note", "system", "", None, None, None, empty)


@pytest.mark.django_db
def test_one_statement_carries_as_many_rows_as_sqlites_variable_limit_allows(monkeypatch):
    """Rows a statement: ``INSERT_ROWS`` unless SQLite's bound-variable limit divided by the 8
    columns is fewer, and at least one; each chunk is written, in order."""
    if connection.vendor != "sqlite":
        assert _chunk_rows() == journal.INSERT_ROWS == 1000
        return
    connection.ensure_connection()
    raw = connection.connection
    before = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    statements = []
    try:
        raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 8 * 1000 + 7)
        assert _chunk_rows() == 1000
        raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 8 * 3 + 7)
        assert _chunk_rows() == 3
        raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 8)
        assert _chunk_rows() == 1
        raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 7)
        assert _chunk_rows() == 1
        monkeypatch.setattr(journal, "INSERT_ROWS", 2)
        raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 8 * 3)
        assert _chunk_rows() == 2
        raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 8 * 5)
        rows = [entry_values("note", Actor.SYSTEM, at=NOW, data={"n": n}) for n in range(5)]
        with connection.execute_wrapper(lambda execute, sql, *args: statements.append(sql) or execute(sql, *args)):
            assert record_values(rows) == 5
    finally:
        raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, before)
    inserts = [sql for sql in statements if sql.startswith("INSERT")]
    assert [sql.count("(%s, %s, %s, %s, %s, %s, %s, %s)") for sql in inserts] == [2, 2, 1]
    assert inserts[0].startswith(
        'INSERT INTO "runtime_journalentry" ("at", "action", "actor", "actor_name", "event_id", "proposal_id", '
        '"run_id", "data") VALUES ')
    assert [row.data["n"] for row in JournalEntry.objects.order_by("id")] == [0, 1, 2, 3, 4]
