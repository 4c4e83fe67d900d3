"""``runtime.sqlite_backend``: a SQLite transaction waits for its write turn in the kernel,
not in SQLite's sleeping busy handler, and at most the busy time-out; the turn is given back
at commit, rollback, close or a failed BEGIN, a forked child never shares its parent's, and
a connection dropped unclosed closes its lock file (docs/performance.md, "SQLite: writers
wait in the kernel")."""

import gc
import os
import threading
import time
from pathlib import Path

import pytest
from django.db import OperationalError, connections, transaction

from runtime.sqlite_backend.base import TURN_SUFFIX, DatabaseWrapper
from tests.helpers import open_copies

TIMEOUT = 10


@pytest.fixture
def database(tmp_path: Path, django_db_blocker):
    """A file database with one table, and a factory of connections to it with a given busy
    time-out. Not the test database: connections of their own, to a file, as ``runserve``'s
    processes have."""
    made = []

    def connect(alias: str, timeout: float = 5) -> DatabaseWrapper:
        settings = {**connections["default"].settings_dict, "ENGINE": "runtime.sqlite_backend",
                    "NAME": str(tmp_path / "turn.sqlite3"),
                    "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": timeout,
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


def write_in_thread(connect, alias: str, who: str, *, timeout: float = 5, start: threading.Event | None = None):
    """Write ``who`` in one transaction on a connection of a new thread (Django's connections
    belong to their thread); returns (the thread, its outcome: "written" or the error)."""
    outcome = {}

    def run():
        wrapper = connect(alias, timeout)
        if start is not None:
            start.wait(TIMEOUT)
        try:
            with transaction.atomic(using=alias), wrapper.cursor() as cursor:
                cursor.execute("INSERT INTO written VALUES (%s)", [who])
            outcome[who] = "written"
        except OperationalError as exc:
            outcome[who] = str(exc)
        finally:
            wrapper.close()
            del connections[alias]

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def turn_waiters() -> int:
    return sum(1 for thread in threading.enumerate() if thread.name == "sqlite-write-turn")


def wait_until(predicate, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_writer_queued_behind_a_transaction_waits_in_the_kernel_and_writes_when_it_ends(database):
    connect, path = database
    holder = connect("turn-holder")
    waiters = turn_waiters()
    with transaction.atomic(using="turn-holder"), holder.cursor() as cursor:
        cursor.execute("INSERT INTO written VALUES ('holder')")
        thread, outcome = write_in_thread(connect, "turn-waiter", "waiter")
        # Queued on the turn (a thread in flock), not sleeping in SQLite's busy handler.
        wait_until(lambda: turn_waiters() == waiters + 1, "the waiter never queued for the turn")
        assert outcome == {}
    thread.join(TIMEOUT)
    assert outcome == {"waiter": "written"}
    assert written(holder) == ["holder", "waiter"]
    assert Path(str(path) + TURN_SUFFIX).exists()


def test_a_writer_that_gets_no_turn_within_its_busy_time_out_fails_and_the_turn_goes_on(database):
    connect, path = database
    holder = connect("turn-holder")
    with transaction.atomic(using="turn-holder"), holder.cursor() as cursor:
        cursor.execute("INSERT INTO written VALUES ('holder')")
        thread, outcome = write_in_thread(connect, "turn-late", "late", timeout=0.2)
        thread.join(TIMEOUT)
        assert outcome == {"late": f"database is locked: no write turn within 0.2 s; another transaction has held "
                                   f"{path}{TURN_SUFFIX} all that time (FACTORY_SQLITE_BUSY_TIMEOUT_SECONDS)"}
    # The abandoned wait takes the turn when the holder gives it back, and gives it back at
    # once: the next writer is not locked out.
    thread, outcome = write_in_thread(connect, "turn-next", "next", timeout=2)
    thread.join(TIMEOUT)
    assert outcome == {"next": "written"}
    assert written(holder) == ["holder", "next"]


def test_the_turn_is_given_back_at_rollback_and_close_and_when_begin_fails(database):
    connect, _ = database
    first, second = connect("turn-first"), connect("turn-second", timeout=0.2)
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
    assert not first._turn_held and first._turn is None
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


def lock_files_open(path: Path) -> int:
    return open_copies(str(path) + TURN_SUFFIX)


def test_a_connection_dropped_without_closing_closes_its_lock_file(database):
    # A thread that wrote and ended without closing its connection (Django's runserver, a
    # thread per request) left its lock file open for the life of the process.
    connect, path = database

    def write_and_leave_open(n):
        wrapper = connect(f"turn-dropped-{n}")
        with transaction.atomic(using=f"turn-dropped-{n}"), wrapper.cursor() as cursor:
            cursor.execute("INSERT INTO written VALUES ('dropped')")
        wrapper.connection.close()  # the database connection, not the wrapper's close()

    threads = [threading.Thread(target=write_and_leave_open, args=(n,)) for n in range(5)]
    for thread in threads:
        thread.start()
        thread.join(TIMEOUT)
    del threads
    gc.collect()
    assert lock_files_open(path) == 0


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


@pytest.mark.parametrize("database_mode,umask,lock_mode", [
    # 0o640 is a mode no umask makes of 0o666 or 0o600: the lock file took the database's.
    (0o640, 0o002, 0o640),
    # The umask still applies: 0o664 under 0o027 is 0o640, not 0o664.
    (0o664, 0o027, 0o640),
], ids=["the-databases-mode", "under-the-umask"])
def test_the_lock_file_is_created_with_the_databases_permissions(database, database_mode, umask, lock_mode):
    # A group that may write the database may take the turn (SQLite gives -wal and -shm the
    # database's permissions too); the process's umask still applies.
    connect, path = database
    os.chmod(path, database_mode)
    previous = os.umask(umask)
    try:
        writer = connect("turn-mode")
        with transaction.atomic(using="turn-mode"), writer.cursor() as cursor:
            cursor.execute("INSERT INTO written VALUES ('mode')")
    finally:
        os.umask(previous)
    assert os.stat(str(path) + TURN_SUFFIX).st_mode & 0o777 == lock_mode
