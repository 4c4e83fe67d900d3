"""``runtime.sqlite_backend``: a SQLite transaction waits for its write turn in the kernel,
so a writer queued behind another gets the lock the moment it is free, however short its
busy time-out; the turn is given back at commit, rollback, close or a failed BEGIN
(docs/performance.md, "Writers wait in the kernel")."""

import threading
import time
from pathlib import Path

import pytest
from django.db import OperationalError, connections, transaction

from runtime.sqlite_backend.base import TURN_SUFFIX, DatabaseWrapper

TIMEOUT = 10


@pytest.fixture
def database(tmp_path: Path, django_db_blocker):
    """A file database with one table, and a factory of connections to it (each with a
    50 ms busy time-out, far shorter than the holds below). Not the test database:
    connections of their own, to a file, as ``runserve``'s processes have."""
    made = []

    def connect(alias: str) -> DatabaseWrapper:
        settings = {**connections["default"].settings_dict, "ENGINE": "runtime.sqlite_backend",
                    "NAME": str(tmp_path / "turn.sqlite3"),
                    "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 0.05,
                                "init_command": "PRAGMA journal_mode=WAL;"}}
        wrapper = DatabaseWrapper(settings, alias=alias)
        connections[alias] = wrapper
        if threading.current_thread() is threading.main_thread():
            made.append(alias)
        return wrapper

    with django_db_blocker.unblock():
        first = connect("turn-setup")
        with first.cursor() as cursor:
            cursor.execute("CREATE TABLE written (who TEXT)")
        yield connect, tmp_path / "turn.sqlite3"
        for alias in made:
            connections[alias].close()
            del connections[alias]


def written(wrapper: DatabaseWrapper) -> list[str]:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT who FROM written ORDER BY rowid")
        return [row[0] for row in cursor.fetchall()]


def test_a_writer_queued_behind_a_long_transaction_writes_when_it_ends_not_database_is_locked(database):
    connect, path = database
    holder = connect("turn-holder")
    holding, outcome = threading.Event(), {}

    def wait_and_write():
        waiter = connect("turn-waiter")  # Django's connections belong to their thread
        holding.wait(TIMEOUT)
        try:
            with transaction.atomic(using="turn-waiter"), waiter.cursor() as cursor:
                cursor.execute("INSERT INTO written VALUES ('waiter')")
            outcome["waiter"] = "written"
        except OperationalError as exc:
            outcome["waiter"] = str(exc)
        finally:
            waiter.close()
            del connections["turn-waiter"]

    thread = threading.Thread(target=wait_and_write, daemon=True)
    thread.start()
    with transaction.atomic(using="turn-holder"), holder.cursor() as cursor:
        cursor.execute("INSERT INTO written VALUES ('holder')")
        holding.set()
        time.sleep(0.3)  # six busy time-outs of the waiter
    thread.join(TIMEOUT)
    assert outcome == {"waiter": "written"}
    assert written(holder) == ["holder", "waiter"]
    assert Path(str(path) + TURN_SUFFIX).exists()


def test_the_turn_is_given_back_at_rollback_and_close_and_when_begin_fails(database):
    connect, _ = database
    first, second = connect("turn-first"), connect("turn-second")
    with pytest.raises(ZeroDivisionError), transaction.atomic(using="turn-first"):
        assert first._turn_held
        with first.cursor() as cursor:
            cursor.execute("INSERT INTO written VALUES ('rolled back')")
        1 / 0  # noqa: B018 - the error that rolls the transaction back
    assert not first._turn_held
    with transaction.atomic(using="turn-second"), second.cursor() as cursor:
        cursor.execute("INSERT INTO written VALUES ('second')")
    assert written(second) == ["second"]

    # A connection closed in a transaction (a dropped connection, a process stopping).
    first.ensure_connection()
    first.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)  # atomic's BEGIN
    assert first._turn_held
    first.close()
    assert not first._turn_held and first._turn_fd is None
    with transaction.atomic(using="turn-second"), second.cursor() as cursor:
        cursor.execute("INSERT INTO written VALUES ('after close')")

    first.ensure_connection()
    first.connection.close()  # BEGIN on a closed sqlite3 connection fails
    with pytest.raises(Exception, match="closed"):
        first.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
    assert not first._turn_held
    first.connection = None
    with transaction.atomic(using="turn-second"), second.cursor() as cursor:
        cursor.execute("INSERT INTO written VALUES ('after failed begin')")
    assert written(second) == ["second", "after close", "after failed begin"]


def test_an_in_memory_database_takes_no_turn():
    settings = {**connections["default"].settings_dict, "NAME": ":memory:", "OPTIONS": {}}
    assert DatabaseWrapper(settings, alias="turn-memory").turn_path() is None
    shared = {**settings, "NAME": "file:memorydb_default?mode=memory&cache=shared"}
    assert DatabaseWrapper(shared, alias="turn-shared").turn_path() is None


def _child_takes_turn(wrapper: DatabaseWrapper, answers) -> None:
    """In a forked child: take the turn on the connection inherited from the parent."""
    took = threading.Event()
    threading.Thread(target=lambda: (wrapper._take_turn(), took.set()), daemon=True).start()
    answers.put(("while the parent holds it", took.wait(0.3)))
    answers.put(("after the parent gave it back", took.wait(TIMEOUT)))


def test_a_forked_child_waits_for_its_parents_turn_instead_of_sharing_it(database):
    # gunicorn forks its workers from a master that may have opened a connection: the child
    # inherits the parent's open lock file, and a flock on it would be the parent's own.
    import multiprocessing

    connect, _ = database
    parent = connect("turn-parent")
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    parent.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
    assert parent._turn_held
    child = context.Process(target=_child_takes_turn, args=(parent, answers))
    child.start()
    try:
        assert answers.get(timeout=TIMEOUT) == ("while the parent holds it", False)
        parent.rollback()
        assert not parent._turn_held
        assert answers.get(timeout=TIMEOUT) == ("after the parent gave it back", True)
    finally:
        child.join(TIMEOUT)
    assert child.exitcode == 0
    parent.set_autocommit(True)
