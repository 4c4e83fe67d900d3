"""A tick thread frozen inside a transaction does not hold the next holder's ticks for longer
than ``FROZEN_TRANSACTION_SECONDS`` on PostgreSQL (schedules.emitter): its connections end a
transaction left idle that long, other threads' connections do not."""

import threading
import time

import pytest
from django.db import DatabaseError, connection, connections, transaction

from schedules import emitter

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's idle-in-transaction time-out"),
    pytest.mark.django_db(transaction=True),
]


def in_thread(work):
    """``work()`` in a new thread, with connections of its own; returns what it returned or raised."""
    result = {}

    def run():
        try:
            result["value"] = work()
        except Exception as exc:  # handed to the test
            result["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    return result


def setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW idle_in_transaction_session_timeout")
        return cursor.fetchone()[0]


def test_the_tick_threads_connections_end_a_transaction_left_idle(monkeypatch):
    monkeypatch.setattr(emitter, "FROZEN_TRANSACTION_SECONDS", 1)

    def frozen():
        with emitter.bound_frozen_transactions():
            with transaction.atomic():
                assert setting() == "1s"
                time.sleep(1.6)  # frozen, as a stopped process, between two statements
                setting()

    result = in_thread(frozen)
    assert isinstance(result.get("error"), DatabaseError), result
    assert "idle-in-transaction" in str(result["error"])


def test_other_threads_connections_keep_the_servers_setting():
    def bound():
        with emitter.bound_frozen_transactions():
            return setting()

    assert in_thread(bound) == {"value": f"{emitter.FROZEN_TRANSACTION_SECONDS}s"}
    assert in_thread(setting) == {"value": "0"}
