"""A database error the next iteration heals is a WARNING; one that persists an ERROR with its traceback (ops.failure_streak)."""

import logging
import threading
from unittest import mock

import pytest
from django.db import InterfaceError, OperationalError

from ops import loop_connection, slot_loop, worker

pytestmark = pytest.mark.django_db

DROPPED = "server closed the connection unexpectedly"


def logged(caplog, logger: str) -> list[tuple[str, str, bool, int | None]]:
    """``(level, message, traceback?, consecutiveFailures)`` of ``logger``'s records."""
    return [
        (r.levelname, r.getMessage(), r.exc_info is not None, getattr(r, "consecutiveFailures", None))
        for r in caplog.records if r.name == logger
    ]


def steps(*outcomes):
    """A worker step that raises or returns each of ``outcomes`` in turn, then stops the loop."""
    stop = threading.Event()
    left = list(outcomes)

    def step(*, worker, stop=stop):
        outcome = left.pop(0)
        if not left:
            stop.set()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return step, stop


def test_one_dropped_connection_that_heals_is_a_warning_without_traceback(caplog):
    caplog.set_level(logging.INFO, logger="ops.worker")
    step, stop = steps(OperationalError(DROPPED), True, True)
    with mock.patch.object(worker, "IDLE_SLEEP_SECONDS", 0):
        worker._loop(step, name="w", stop=stop, once=False, what="worker")
    assert logged(caplog, "ops.worker") == [
        ("WARNING", f"worker iteration failed (OperationalError: {DROPPED}); retrying", False, 1),
        ("INFO", "worker iteration works again after 1 failure(s)", False, 1),
    ]


def test_a_failure_that_persists_is_an_error_with_its_traceback_from_the_second_on(caplog):
    caplog.set_level(logging.INFO, logger="ops.worker")
    step, stop = steps(OperationalError(DROPPED), InterfaceError("connection already closed"), OperationalError(DROPPED), True)
    with mock.patch.object(worker, "IDLE_SLEEP_SECONDS", 0):
        worker._loop(step, name="w", stop=stop, once=False, what="worker")
    assert logged(caplog, "ops.worker") == [
        ("WARNING", f"worker iteration failed (OperationalError: {DROPPED}); retrying", False, 1),
        ("ERROR", "worker iteration failed 2 times in a row; retrying", True, 2),
        ("ERROR", "worker iteration failed 3 times in a row; retrying", True, 3),
        ("INFO", "worker iteration works again after 3 failure(s)", False, 3),
    ]


def test_the_slot_loops_iteration_warns_of_a_dropped_connection(caplog):
    caplog.set_level(logging.INFO, logger="ops.slot_loop")
    # Inside the test's transaction close_old_connections would close the connection itself.
    with mock.patch.object(slot_loop, "iterate", side_effect=OperationalError(DROPPED)), \
            mock.patch.object(loop_connection, "close_old_connections"):
        assert slot_loop.run_slot_loop(stop=threading.Event(), once=True) is True
    assert [entry for entry in logged(caplog, "ops.slot_loop") if entry[0] != "INFO"] == [
        ("WARNING", f"slot loop iteration failed (OperationalError: {DROPPED}); retrying", False, 1),
    ]
