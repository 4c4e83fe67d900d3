"""Django's SQLite backend with the writers of every process queued in the kernel
(docs/performance.md, "SQLite: writers wait in the kernel"; docs/production.md, §2).

SQLite lets one writer in at a time. A writer that finds the write lock taken is left to
SQLite's busy handler, which sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 and then 100 ms
between tries: a door's group waiting behind the planner slept past the moment the lock was
free, and lost it again to the planner, which takes it back the instant it commits. Signed
intake at 8 clients had a p99 of 65–100 ms; at 32 clients it stopped near 730 admissions/s.

Here every transaction (``BEGIN IMMEDIATE``: ``transaction_mode`` in the settings) first
takes its **write turn**: an exclusive ``flock`` on ``<database>-writers.lock`` beside the
database file, held until the commit, the rollback or the connection's close. A writer
waiting for its turn sleeps in the kernel and wakes when the turn is given back, so the
lock passes from writer to writer without a sleeping gap. The kernel drops the turn of a
process that dies.

The wait is bounded as SQLite's is: a transaction that has not had its turn within the
connection's busy time-out (``FACTORY_SQLITE_BUSY_TIMEOUT_SECONDS``, default 30) fails with
``OperationalError`` "database is locked", begun nothing and written nothing. A single
statement outside a transaction, and any program other than the runtime's (the ``sqlite3``
shell), still meets SQLite's busy handler and the same time-out.

An in-memory database (the test suite's) has one connection and no file: no turn.
"""

import fcntl
import os
import threading
import weakref

from django.db import OperationalError
from django.db.backends.sqlite3 import base

from .cursor import RememberingCursor

#: Beside the database file, as SQLite's own ``-wal`` and ``-shm``.
TURN_SUFFIX = "-writers.lock"
#: sqlite3's own busy time-out when the settings name none (``sqlite3.connect``'s default).
DEFAULT_TIMEOUT_SECONDS = 5.0


def database_mode(name) -> int:
    """The database file's read and write permissions, which its lock file is created with
    (as SQLite creates ``-wal`` and ``-shm``): whoever may write the database may take the
    turn. 0600 while the file does not exist yet."""
    try:
        return os.stat(name).st_mode & 0o666
    except OSError:
        return 0o600


class TurnFile:
    """One connection's open lock file: a ``flock`` belongs to the open file, so two
    connections of one process exclude each other as two processes do. Closed with the
    connection, or when the connection is dropped unclosed (a thread that ends without
    closing its connection)."""

    def __init__(self, path: str, mode: int = 0o600):
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
        self.pid = os.getpid()
        self.close = weakref.finalize(self, os.close, self.fd)

    def take(self, timeout: float) -> bool:
        """Take the turn within ``timeout`` seconds; False when it was not given.

        Free, it is taken at once. Otherwise a thread waits for it in ``flock`` (which no
        time-out can interrupt) while this one waits at most ``timeout`` for that thread; a
        turn that comes after the caller gave up is given back and this file closed by that
        thread, so the caller must not use this file again after a False."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        given = threading.Event()
        settle = threading.Lock()
        abandoned = []

        def wait_in_kernel():
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            with settle:
                if not abandoned:
                    given.set()
                    return
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            self.close()

        threading.Thread(target=wait_in_kernel, name="sqlite-write-turn", daemon=True).start()
        if given.wait(timeout):
            return True
        with settle:
            if given.is_set():
                return True
            abandoned.append(True)
        return False

    def give_back(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)


class DatabaseWrapper(base.DatabaseWrapper):
    """``django.db.backends.sqlite3``'s wrapper whose transactions take the write turn."""

    _turn: TurnFile | None = None
    _turn_held = False

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=RememberingCursor)

    def turn_path(self) -> str | None:
        """The write turn's lock file, or None for an in-memory database."""
        name = str(self.settings_dict["NAME"])
        if self.is_in_memory_db() or name.startswith("file:"):
            return None
        return name + TURN_SUFFIX

    def _start_transaction_under_autocommit(self):
        self._take_turn()
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._give_turn_back()
            raise

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self._give_turn_back()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._give_turn_back()

    def _close(self):
        try:
            return super()._close()
        finally:
            self._give_turn_back()
            if self._turn is not None:
                self._turn.close()
                self._turn = None

    def _take_turn(self) -> None:
        path = self.turn_path()
        if path is None:
            return
        if self._turn is not None and self._turn.pid != os.getpid():
            self._forget_inherited_turn()
        if self._turn is None:
            self._turn = TurnFile(path, database_mode(self.settings_dict["NAME"]))
        timeout = float(self.settings_dict["OPTIONS"].get("timeout", DEFAULT_TIMEOUT_SECONDS))
        if not self._turn.take(timeout):
            self._turn = None  # the waiting thread closes it
            raise OperationalError(
                f"database is locked: no write turn within {timeout:g} s; another transaction has held "
                f"{path} all that time (FACTORY_SQLITE_BUSY_TIMEOUT_SECONDS)"
            )
        self._turn_held = True

    def _give_turn_back(self) -> None:
        if self._turn_held and self._turn is not None and self._turn.pid == os.getpid():
            self._turn_held = False
            self._turn.give_back()

    def _forget_inherited_turn(self) -> None:
        """A forked child holds its parent's open file: taking or giving back the turn on it
        would be the parent's turn. The child closes its copy, which leaves the parent's lock
        alone, and opens its own."""
        self._turn.close()
        self._turn, self._turn_held = None, False
