"""How a long-running loop logs a database error it will retry (docs/operations.md; docs/production.md).

A database connection dropped once — a server restart, a failover, an idle connection
closed by a proxy — is replaced within its iteration (``ops.loop_connection``) or heals at
the next, when ``close_old_connections`` opens a new one. Logged at ERROR with a traceback, each such blip paged whoever alerts on ERROR. So the
first failure of a streak is a WARNING of one line (the error's class and message), and only
a failure that persists — the ``ERROR_AFTER``-th in a row and each one after it — is an
ERROR with its traceback. The first success after a streak says how long it lasted, at INFO.
"""

import logging

from django.db import DatabaseError, InterfaceError

#: What the loops catch and retry: a database error, and the interface error of a connection
#: already closed under them (``InterfaceError`` is not a ``DatabaseError`` in PEP 249).
DATABASE_ERRORS = (DatabaseError, InterfaceError)
#: The consecutive failures from which each is an ERROR: the first may be a dropped
#: connection that the next iteration replaces; a second in a row is not a blip.
ERROR_AFTER = 2


class FailureStreak:
    """The consecutive database failures of one loop (``what``: ``slot loop iteration``,
    ``worker iteration``, …), logged on ``logger`` with the stable ``action`` key."""

    def __init__(self, logger: logging.Logger, *, what: str, action: str):
        self.logger = logger
        self.what = what
        self.action = action
        self.count = 0

    def failed(self, exc: BaseException) -> None:
        """One more failure in a row: a WARNING without traceback, or from ``ERROR_AFTER`` on an ERROR with it."""
        self.count += 1
        extra = {"action": self.action, "consecutiveFailures": self.count}
        if self.count < ERROR_AFTER:
            self.logger.warning(
                "%s failed (%s: %s); retrying", self.what, exc.__class__.__name__, str(exc).strip(), extra=extra,
            )
        else:
            self.logger.error(
                "%s failed %d times in a row; retrying", self.what, self.count, exc_info=exc, extra=extra,
            )

    def succeeded(self) -> None:
        """An iteration went through: a streak, if any, ends (logged at INFO)."""
        if self.count:
            self.logger.info(
                "%s works again after %d failure(s)", self.what, self.count,
                extra={"action": f"{self.action}_recovered", "consecutiveFailures": self.count},
            )
            self.count = 0
