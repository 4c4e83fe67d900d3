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
lock passes from writer to writer without a sleeping gap (``flock`` takes no time-out, so the
connection's waiter thread waits in it: ``runtime.sqlite_backend.turn``). The kernel drops the
turn of a process that dies.

The wait is bounded as SQLite's is: a transaction that has not had its turn within the
connection's busy time-out (``FACTORY_SQLITE_BUSY_TIMEOUT_SECONDS``, default 30) fails with
``OperationalError`` "database is locked", begun nothing and written nothing. A single
statement outside a transaction, and any program other than the runtime's (the ``sqlite3``
shell), still meets SQLite's busy handler and the same time-out.

An in-memory database (the test suite's) has one connection and no file: no turn.
"""

import os

from django.db import OperationalError
from django.db.backends.sqlite3 import base

from .cursor import RememberingCursor
from .turn import TurnFile

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
            self._turn.close()  # at once, or by its waiter once the turn it still waits for comes
            self._turn = None
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
