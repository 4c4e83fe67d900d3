"""A loop's connection is reused without the health check while it works, and replaced at once
when it dies (ops.loop_connection; docs/performance.md, "An idle second")."""

import logging
import threading
import time
from unittest import mock

import pytest
from django.db import DEFAULT_DB_ALIAS, DatabaseError, ProgrammingError, connection, connections

from ops import slot_loop, worker
from ops.failure_streak import FailureStreak
from ops.loop_connection import TRUSTED_SECONDS, step_on_connection

# Outside a test transaction: close_old_connections closes a connection left in one.
pytestmark = pytest.mark.django_db(transaction=True)

postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL backend terminated")


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def terminate(pid: int) -> None:
    """End the server process ``pid`` from another thread's connection, as a server restart would."""
    def run():
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        connections[DEFAULT_DB_ALIAS].close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


@pytest.fixture(autouse=True)
def untrusted():
    """Each test starts with a connection no step has used."""
    connections[DEFAULT_DB_ALIAS].loop_step_worked = None


@pytest.fixture
def health_checks():
    """The number of Django's health checks (``is_usable``) made on this thread's connection."""
    wrapper = connections[DEFAULT_DB_ALIAS]
    with mock.patch.object(wrapper, "is_usable", wraps=wrapper.is_usable) as is_usable:
        yield is_usable


def counting(step, calls: list):
    """``step``, appending to ``calls`` each time it is called."""
    def counted():
        calls.append(1)
        return step()

    return counted


def one_statement() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone()[0]


def test_a_connection_that_just_worked_is_not_checked_again(health_checks):
    connection.ensure_connection()
    checks = []
    for _ in range(3):
        assert step_on_connection(one_statement) == 1
        checks.append(health_checks.call_count)
    assert checks == [1, 1, 1]


def test_a_connection_idle_longer_than_trusted_is_checked_first(health_checks):
    connection.ensure_connection()
    step_on_connection(one_statement)
    connection.loop_step_worked = time.monotonic() - TRUSTED_SECONDS - 0.1
    step_on_connection(one_statement)
    assert health_checks.call_count == 2


def test_a_step_that_failed_leaves_its_connection_untrusted(health_checks):
    connection.ensure_connection()
    with pytest.raises(ZeroDivisionError):
        step_on_connection(lambda: one_statement() / 0)
    step_on_connection(one_statement)
    assert health_checks.call_count == 2


def test_an_error_on_a_working_connection_is_raised_and_the_step_not_run_again():
    connection.ensure_connection()
    step_on_connection(one_statement)
    calls = []

    def bad_statement():
        calls.append(1)
        with connection.cursor() as cursor:
            cursor.execute("SELECT no_such_column FROM no_such_table")

    before = connection.connection
    with pytest.raises(DatabaseError, match="no_such"):
        step_on_connection(bad_statement)
    assert calls == [1]
    assert connection.connection is before


@postgresql_only
def test_a_trusted_connection_that_died_is_replaced_and_the_step_run_once_more(health_checks):
    connection.ensure_connection()
    step_on_connection(one_statement)
    dead = backend_pid()
    terminate(dead)
    calls = []
    assert step_on_connection(counting(backend_pid, calls)) != dead
    assert calls == [1, 1]
    # The first statement's check, then one after the failure: none before the failed step.
    assert health_checks.call_count == 2


@postgresql_only
def test_an_untrusted_connection_that_died_is_replaced_by_the_health_check_before_the_step(health_checks):
    step_on_connection(one_statement)
    connection.loop_step_worked = time.monotonic() - TRUSTED_SECONDS - 0.1
    dead = backend_pid()
    terminate(dead)
    calls = []
    assert step_on_connection(counting(backend_pid, calls)) != dead
    assert calls == [1]


@postgresql_only
def test_a_checked_connection_that_dies_before_the_steps_statement_is_replaced_and_the_step_run_once_more(
        health_checks):
    step_on_connection(one_statement)
    connection.loop_step_worked = time.monotonic() - TRUSTED_SECONDS - 0.1  # checked first
    calls = []

    def dies_after_its_check():
        calls.append(1)
        if len(calls) == 1:
            terminate(backend_pid())  # after Django's check: its first statement meets a dead backend
        return backend_pid()

    first = backend_pid()
    assert step_on_connection(dies_after_its_check) != first
    assert calls == [1, 1]


@postgresql_only
def test_a_step_that_fails_again_on_its_new_connection_raises():
    step_on_connection(one_statement)
    terminate(backend_pid())
    calls = []

    def step():
        calls.append(1)
        if len(calls) == 2:
            raise ProgrammingError("still failing")
        return backend_pid()

    with pytest.raises(ProgrammingError, match="still failing"):
        step_on_connection(step)
    assert calls == [1, 1]


def test_the_tick_threads_seconds_check_their_connection_once(health_checks):
    connection.ensure_connection()
    stop = threading.Event()
    seconds = []

    def emit_once(lease):
        seconds.append(one_statement())
        if len(seconds) == 3:
            stop.set()

    failures = FailureStreak(logging.getLogger("test"), what="tick emission", action="test")
    with mock.patch.object(slot_loop, "emit_once", emit_once), mock.patch.object(stop, "wait"):
        slot_loop.tick_until(stop, None, failures)
    assert seconds == [1, 1, 1]
    assert health_checks.call_count == 1


def test_the_run_workers_steps_check_their_connection_once(health_checks):
    connection.ensure_connection()
    failures = FailureStreak(logging.getLogger("test"), what="worker iteration", action="test")
    done = [
        worker._step(lambda *, worker, stop: one_statement() == 1, name="w", stop=threading.Event(), failures=failures)
        for _ in range(3)
    ]
    assert done == [True, True, True]
    assert health_checks.call_count == 1
