"""Django's SQLite backend with the writers of every process queued in the kernel
(docs/performance.md, "Writers wait in the kernel"; docs/production.md, "SQLite").

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
process that dies. A single statement outside a transaction, and any program other than
the runtime's (the ``sqlite3`` shell), still meets SQLite's busy handler and its time-out
(``FACTORY_SQLITE_BUSY_TIMEOUT_SECONDS``); a writer waiting for its turn waits as long as
the writer before it holds its transaction, as it would wait for SQLite's lock.

An in-memory database (the test suite's) has one connection and no file: no turn.
"""

import fcntl
import os

from django.db.backends.sqlite3 import base

#: Beside the database file, as SQLite's own ``-wal`` and ``-shm``.
TURN_SUFFIX = "-writers.lock"


class DatabaseWrapper(base.DatabaseWrapper):
    """``django.db.backends.sqlite3``'s wrapper whose transactions take the write turn."""

    _turn_fd: int | None = None
    _turn_pid: int | None = None
    _turn_held = False

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
            if self._turn_fd is not None:
                os.close(self._turn_fd)
                self._turn_fd, self._turn_pid, self._turn_held = None, None, False

    def _take_turn(self) -> None:
        path = self.turn_path()
        if path is None:
            return
        if self._turn_fd is not None and self._turn_pid != os.getpid():
            self._forget_inherited_turn()
        if self._turn_fd is None:
            # One open file per connection: a flock belongs to the open file, so two
            # connections of one process exclude each other as two processes do.
            self._turn_fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._turn_pid = os.getpid()
        fcntl.flock(self._turn_fd, fcntl.LOCK_EX)
        self._turn_held = True

    def _give_turn_back(self) -> None:
        if self._turn_held and self._turn_pid == os.getpid():
            self._turn_held = False
            fcntl.flock(self._turn_fd, fcntl.LOCK_UN)

    def _forget_inherited_turn(self) -> None:
        """A forked child (gunicorn's workers fork from a master that may have written) holds
        its parent's open file: taking or giving back the turn on it would be the parent's
        turn. The child closes its copy, which leaves the parent's lock alone, and opens its own."""
        os.close(self._turn_fd)
        self._turn_fd, self._turn_pid, self._turn_held = None, None, False
