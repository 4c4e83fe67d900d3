"""A loop thread's database connection, reused without Django's health check while it works
(docs/performance.md, "An idle second").

With ``CONN_HEALTH_CHECKS`` Django sends a ``SELECT 1`` (PostgreSQL) before the first statement
after each ``close_old_connections``: for the tick thread, the planning thread and the run
worker, which ask the database about once a second, one more round trip a second each. A
connection on which a step went through less than ``TRUSTED_SECONDS`` ago is used without that
check. When a step fails because the connection died under it (a server restart, a failover, a
proxy's idle time-out) — a trusted one, or a checked one that died between its check and the
step's statements — the connection is replaced and the step runs once more at once: a dropped
connection costs the loop neither a log line nor a second, as the health check's silent
replacement did not. Running a step once more is safe because every loop's step is: each
is the next iteration, which the loop would otherwise start a second later (docs/design.md §5, §8).
"""

import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, close_old_connections, connections

from .failure_streak import DATABASE_ERRORS

#: How long after a step went through its connection is used without the health check, in
#: seconds: longer than the loops' quiet sleeps (5 s: the planning and preview threads while
#: their word says nothing), so that their next step is one round trip too; a connection idle
#: longer is checked first. A trusted connection that died costs its step one more run.
TRUSTED_SECONDS = 10.0

Result = TypeVar("Result")


def step_on_connection(step: Callable[..., Result], *args, **kwargs) -> Result:
    """``step(*args, **kwargs)``'s result, on this thread's default connection: closed first when
    broken or older than ``CONN_MAX_AGE`` (``close_old_connections``), used without the health
    check when trusted (``TRUSTED_SECONDS``), and replaced, with ``step`` run once more, when the
    step fails on a connection that turns out dead. Raises what ``step`` raises otherwise (``DATABASE_ERRORS``
    among it, for the loop's ``FailureStreak``)."""
    close_old_connections()
    wrapper = connections[DEFAULT_DB_ALIAS]
    if _trusted(wrapper):
        wrapper.health_check_done = True
    wrapper.loop_step_worked = None  # a step that fails leaves its connection to be checked
    try:
        result = step(*args, **kwargs)
    except DATABASE_ERRORS:
        if not _replaced_dead(wrapper):
            raise
        result = step(*args, **kwargs)
    wrapper.loop_step_worked = time.monotonic()
    return result


def _trusted(wrapper) -> bool:
    """Whether ``wrapper``'s open connection went through a step less than ``TRUSTED_SECONDS`` ago."""
    worked = getattr(wrapper, "loop_step_worked", None)
    return (
        wrapper.connection is not None and wrapper.health_check_enabled
        and worked is not None and time.monotonic() - worked < TRUSTED_SECONDS
    )


def _replaced_dead(wrapper) -> bool:
    """After a failed step: close ``wrapper``'s connection if it no longer works (Django asks it
    whether it is usable once an error other than a data or integrity error occurred); True
    when it was closed, so that the next statement opens a new one."""
    close_old_connections()
    return wrapper.connection is None
