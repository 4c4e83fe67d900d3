"""A process's row survives a dropped database connection and goes when the process stops
(docs/operations.md, "Clock faults"; docs/design.md §11)."""

import os
import threading
import time
from contextlib import contextmanager

import pytest
from django.db import DatabaseError, connection

from ops import process_rows
from ops.models import ProcessRecord

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def row_thread(monkeypatch, measure, *, refresh_seconds: float):
    """A ``keep_row`` thread measuring with ``measure`` every ``refresh_seconds``, stopped and
    joined (5 s at most) when the block ends."""
    monkeypatch.setattr(process_rows, "measure", measure)
    monkeypatch.setattr(process_rows, "REFRESH_SECONDS", refresh_seconds)
    stop = threading.Event()
    thread = process_rows.keep_row("worker", stop)
    try:
        yield thread
    finally:
        stop.set()
        thread.join(5)


def wait_for_calls(calls: list, count: int, deadline: float) -> None:
    while len(calls) < count and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the in-memory SQLite test database cannot be reconnected")
def test_the_row_thread_reconnects_after_the_server_drops_its_connection(monkeypatch):
    real_measure, calls = process_rows.measure, []

    def measure_dropping_the_second_connection():
        calls.append(time.monotonic())
        if len(calls) == 2:
            with connection.cursor() as cursor, pytest.raises(DatabaseError):
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")  # as a server restart does
        return real_measure()

    with row_thread(monkeypatch, measure_dropping_the_second_connection, refresh_seconds=0.05) as thread:
        deadline = time.monotonic() + 10
        wait_for_calls(calls, 3, deadline)
        first_seen = ProcessRecord.objects.get().last_seen_at
        wait_for_calls(calls, 6, deadline)
        last_seen = ProcessRecord.objects.get().last_seen_at
    assert (len(calls) >= 6, thread.is_alive()) == (True, False)
    assert last_seen > first_seen


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL backend terminated")
def test_a_connection_dropped_between_two_refreshes_is_replaced_without_a_warning(monkeypatch, caplog):
    import logging

    from django.db import DEFAULT_DB_ALIAS, connections

    real_measure, calls = process_rows.measure, []

    def measure_then_drop_the_connection_after_the_second():
        calls.append(1)
        if len(calls) == 2:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                pid = cursor.fetchone()[0]

            def end_it():  # from another connection, while the row thread sleeps (a server restart)
                with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
                    cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
                connections[DEFAULT_DB_ALIAS].close()

            threading.Timer(0.02, end_it).start()
        return real_measure()

    caplog.set_level(logging.INFO, logger="ops.process_rows")
    with row_thread(monkeypatch, measure_then_drop_the_connection_after_the_second, refresh_seconds=0.2) as thread:
        wait_for_calls(calls, 4, time.monotonic() + 10)
    assert (len(calls) >= 4, thread.is_alive()) == (True, False)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_stopping_process_deletes_its_row(monkeypatch):
    with row_thread(monkeypatch, process_rows.measure, refresh_seconds=0.05) as thread:
        deadline = time.monotonic() + 10
        while not ProcessRecord.objects.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        (row,) = ProcessRecord.objects.values_list("role", "pid")
    assert (row, thread.is_alive(), ProcessRecord.objects.count()) == (("worker", os.getpid()), False, 0)


def test_a_row_that_cannot_be_deleted_is_left_to_age_out_with_a_line_saying_so(monkeypatch, caplog):
    import logging

    record = process_rows.register("worker")

    def refused():
        raise DatabaseError("the server went away")

    monkeypatch.setattr(process_rows, "step_on_connection", lambda step, *args: refused())
    caplog.set_level(logging.INFO, logger="ops.process_rows")
    process_rows._forget(record)
    assert ProcessRecord.objects.count() == 1
    assert [(r.levelname, r.getMessage(), r.action) for r in caplog.records] == [(
        "INFO", f"worker {record.host}:{record.pid}: its row could not be deleted (the server went away); "
        "the doctor lists it 60s more", "process_row_left",
    )]
