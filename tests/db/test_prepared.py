"""The idle iteration's, the doors' and planning's statements are prepared once per PostgreSQL
connection, and the idle check's generic plans read one end of an index, not every state
(runtime.prepared; docs/performance.md)."""

from collections import Counter

import pytest
from django.db import connection, transaction

from intake.door_admission import write_admissions
from runtime.models import Door, Proposal
from runtime.prepared import prepared_cursor
from runtime.registry import get_registry
from runtime.services import planning_batch
from schedules.due_check import check_idle, idle_columns
from schedules.repair import future_limit
from schedules.state import SYNC_NAME, loops_fingerprint
from schedules.ticks import keyed_loops
from tests.conftest import at
from tests.events_door import envelope
from tests.helpers import inject

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T21:07:00.500Z")

postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite's driver keeps compiled statements itself")


def ask_idle() -> tuple:
    registry = get_registry()
    return check_idle(sync_name=SYNC_NAME, fingerprint=loops_fingerprint(registry), due_by=NOW,
                      future_after=future_limit(NOW), keyed=tuple(keyed_loops(registry)))


def prepared_statements() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements")
        return dict(cursor.fetchall())


@postgres_only
def test_the_idle_check_is_prepared_once_and_then_executed():
    first = ask_idle()
    assert [ask_idle() for _ in range(3)] == [first] * 3
    sql = "SELECT " + idle_columns(tuple(keyed_loops(get_registry())))[0]
    executions = [count for statement, count in prepared_statements().items() if statement.startswith(sql[:60])]
    assert executions == [4]


def executions_by_start() -> Counter:
    """Executions of this connection's prepared statements, by their first 40 characters."""
    counts = Counter()
    for statement, count in prepared_statements().items():
        counts[statement[:40]] += count
    return counts


@postgres_only
def test_a_door_groups_insert_is_prepared_once_whatever_the_groups_size():
    before = executions_by_start()
    for n, size in enumerate((1, 3, 2)):
        with transaction.atomic():
            write_admissions([(envelope(eventId=f"prepared-{n}-{m}"), Door.EVENTS) for m in range(size)])
    executed = executions_by_start() - before
    assert executed['WITH n AS (INSERT INTO "runtime_event" ('] == 3


@postgres_only
def test_a_planning_chunks_statements_are_prepared_and_executed_again_by_the_next_chunk(registry_files):
    for n in range(4):
        inject(f"triage-{n}", "factory.triage.requested", {"repo": "alpha"})
    before = executions_by_start()
    registry = get_registry()
    assert [planning_batch.plan_batch(now=NOW, registry=registry, size=2) for _ in range(3)] == [2, 2, 0]
    assert Proposal.objects.count() == 4
    executed = executions_by_start() - before
    assert {statement: executed[statement] for statement in (
        'SELECT "id", "uid", "type", "door", "loo',          # the claim (the third finds none)
        'SELECT "idempotency_key" FROM "runtime_p',          # the held keys
        'INSERT INTO "runtime_proposal" ("event_i',          # the proposals
        'INSERT INTO "runtime_journalentry" ("at"',          # their journal entries
        'UPDATE "runtime_event" SET "planned_at" ',          # the events' outcomes
    )} == {
        'SELECT "id", "uid", "type", "door", "loo': 3,
        'SELECT "idempotency_key" FROM "runtime_p': 2,
        'INSERT INTO "runtime_proposal" ("event_i': 2,
        'INSERT INTO "runtime_journalentry" ("at"': 2,
        'UPDATE "runtime_event" SET "planned_at" ': 2,
    }


@postgres_only
def test_the_idle_checks_generic_plan_reads_no_state_one_by_one():
    columns, constants = idle_columns(tuple(keyed_loops(get_registry())))
    sql = f"SELECT {columns}"
    marks = iter(f"${n}" for n in range(1, 100))
    numbered = "".join(part + (next(marks) if i < sql.count("%s") else "") for i, part in enumerate(sql.split("%s")))
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE idle_check_plan AS {numbered}")
        try:
            values = ", ".join(["'registry'", *["now()"] * 3, *(f"'{c}'" for c in constants)])
            cursor.execute(f"EXPLAIN EXECUTE idle_check_plan({values})")
            plan = " ".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE idle_check_plan")
    assert "Seq Scan on schedules_schedulestate" not in plan
    assert "schedule_next_due_idx" in plan and "schedule_last_slot_idx" in plan


@postgres_only
def test_django_s_own_cursors_still_never_prepare():
    with prepared_cursor() as cursor:
        cursor.execute("SELECT %s::int + 1", [1])
        assert cursor.fetchone() == (2,)
    for _ in range(3):
        with connection.cursor() as cursor:
            cursor.execute("SELECT 40 + 2")
    assert list(prepared_statements()) == ["SELECT $1::int + 1"]


def test_on_sqlite_and_where_queries_are_logged_it_is_the_ordinary_cursor(settings):
    settings.DEBUG = True
    connection.force_debug_cursor = True
    try:
        with prepared_cursor() as cursor:
            cursor.execute("SELECT 1")
    finally:
        connection.force_debug_cursor = False
    assert connection.queries[-1]["sql"] == "SELECT 1"


@postgres_only
def test_a_prepared_cursor_makes_djangos_health_check_when_one_is_due():
    from unittest import mock

    connection.ensure_connection()
    with mock.patch.object(connection, "is_usable", return_value=False) as is_usable:
        connection.health_check_done = True      # a request's connection, checked already
        with prepared_cursor() as cursor:
            cursor.execute("SELECT 1")
        assert is_usable.call_count == 0
    with mock.patch.object(connection, "is_usable", return_value=False) as is_usable, \
            mock.patch.object(connection, "close") as close:  # the test's transaction stays open
        connection.health_check_done = False     # as close_old_connections leaves it
        with prepared_cursor() as cursor:
            cursor.execute("SELECT 1")
    assert (is_usable.call_count, close.call_count, connection.health_check_done) == (1, 1, True)
