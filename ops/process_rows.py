"""Each long-running process keeps a row of its own: host, pid, role, start, last seen, clock offset
(docs/design.md §11; docs/operations.md, "Clock faults").

Every instant the runtime writes comes from the database's clock (``runtime.clock``), so
a host whose clock is wrong cannot steal leases or fire early; its offset is still worth
knowing (its logs' times are off, and so is anything outside the runtime on that host).
A process measures it around one read of the database's clock — host clock before and
after, the midpoint minus the database's instant — when it starts and every
``REFRESH_SECONDS``, in a daemon thread with a connection of its own, and logs a WARNING
with the figure when it exceeds ``SKEW_WARNING_SECONDS`` (and an INFO when it is back
within it). The doctor lists the processes seen within ``RECENT_SECONDS`` and, among
them, the skewed ones as ``clockSkew``; a process that stops deletes its row (the commands
wait ``FORGET_SECONDS`` for it), one killed is listed until ``RECENT_SECONDS`` after it was
last seen. Rows not seen for ``PRUNE_AFTER_SECONDS`` (a
process long gone) are deleted when a process registers.
"""

import logging
import os
import socket
import threading
import time
from datetime import datetime, timedelta

from django.db import connection

from runtime import clock

from .failure_streak import DATABASE_ERRORS, FailureStreak
from .loop_connection import step_on_connection
from .models import ProcessRecord

logger = logging.getLogger(__name__)

#: How often a process refreshes its row, in seconds.
REFRESH_SECONDS = 15
#: A process whose clock is further than this from the database's is skewed (the doctor's
#: ``clockSkew``); leases and slots do not depend on it, the host's logs and tools do.
SKEW_WARNING_SECONDS = 5.0
#: A process seen within this many seconds is alive for the doctor: four refreshes, so one
#: slow refresh does not drop it.
RECENT_SECONDS = 4 * REFRESH_SECONDS
#: Rows of processes not seen for this long (a day) are deleted.
PRUNE_AFTER_SECONDS = 24 * 3600
#: How long a stopping process waits for its row thread to delete its row, in seconds.
FORGET_SECONDS = 2.0


def clock_offset(host_before: float, database_now: datetime, host_after: float) -> float:
    """Host clock minus database clock, in seconds: the midpoint of two host readings (unix
    seconds) taken around the database's reading. Pure."""
    return (host_before + host_after) / 2 - database_now.timestamp()


def is_skewed(offset_seconds: float) -> bool:
    """Whether an offset is over ``SKEW_WARNING_SECONDS`` either way. Pure."""
    return abs(offset_seconds) > SKEW_WARNING_SECONDS


def measure() -> tuple[datetime, float]:
    """Read the database's clock once, between two readings of this host's (``time.time``);
    returns ``(database instant, offset in seconds)``. Raises ``DatabaseError``."""
    before = time.time()
    now = clock.database_now()
    return now, clock_offset(before, now, time.time())


def register(role: str) -> ProcessRecord:
    """Create this process's row (and delete the rows of processes long gone); returns it."""
    now, offset = measure()
    ProcessRecord.objects.filter(last_seen_at__lt=now - timedelta(seconds=PRUNE_AFTER_SECONDS)).delete()
    record = ProcessRecord.objects.create(
        role=role, host=socket.gethostname(), pid=os.getpid(), started_at=now, last_seen_at=now,
        clock_offset_seconds=offset,
    )
    _log(record, offset, was_skewed=False)
    return record


def refresh(record: ProcessRecord) -> None:
    """Measure again and update the row's last seen instant and offset; logs a change of skew."""
    now, offset = measure()
    was_skewed = is_skewed(record.clock_offset_seconds)
    record.last_seen_at, record.clock_offset_seconds = now, offset
    if not ProcessRecord.objects.filter(pk=record.pk).update(last_seen_at=now, clock_offset_seconds=offset):
        record.save(force_insert=True)  # pruned while this process was unreachable: its row comes back
    _log(record, offset, was_skewed=was_skewed)


def _log(record: ProcessRecord, offset: float, *, was_skewed: bool) -> None:
    extra = {"action": "clock_skew", "role": record.role, "clockOffsetSeconds": round(offset, 3)}
    if is_skewed(offset):
        logger.warning(
            "%s %s:%s: this host's clock is %+.1f s from the database's (over %.0f s); "
            "the runtime uses the database's clock, but fix the host's time (NTP)",
            record.role, record.host, record.pid, offset, SKEW_WARNING_SECONDS, extra=extra,
        )
    elif was_skewed:
        logger.info("%s %s:%s: this host's clock is back within %.0f s of the database's (%+.1f s)",
                    record.role, record.host, record.pid, SKEW_WARNING_SECONDS, offset, extra=extra)


def keep_row(role: str, stop: threading.Event) -> threading.Thread:
    """Start a daemon thread that registers this process as ``role`` and refreshes its row
    every ``REFRESH_SECONDS`` until ``stop`` is set, then deletes it (join the thread for at
    most ``FORGET_SECONDS`` before the process exits), each turn on a usable connection (a dropped
    one replaced without a word: ``ops.loop_connection``); a database error is logged, the
    connection closed, and the refresh retried on a new connection at the next turn. The thread
    has its own database connection and closes it."""
    thread = threading.Thread(target=_keep, args=(role, stop), name=f"process-row-{role}", daemon=True)
    thread.start()
    return thread


def _keep(role: str, stop: threading.Event) -> None:
    record = None
    failures = FailureStreak(logger, what="recording this process's row", action="process_row_error")
    try:
        while True:
            try:
                if record is None:
                    record = step_on_connection(register, role)
                else:
                    step_on_connection(refresh, record)
            except DATABASE_ERRORS as exc:
                failures.failed(exc)
                # A connection the server dropped stays broken: the next refresh opens a new one.
                connection.close()
            else:
                failures.succeeded()
            if stop.wait(REFRESH_SECONDS):
                _forget(record)
                return
    finally:
        connection.close()


def _forget(record: ProcessRecord | None) -> None:
    """Delete this stopping process's row, so that the doctor lists only the processes alive
    (a restart's old ones left it ``RECENT_SECONDS`` later); a database error leaves the row
    to age out of the list, as a killed process's does."""
    if record is None:
        return
    try:
        step_on_connection(ProcessRecord.objects.filter(pk=record.pk).delete)
    except DATABASE_ERRORS as exc:
        logger.info("%s %s:%s: its row could not be deleted (%s); the doctor lists it %ss more",
                    record.role, record.host, record.pid, exc, RECENT_SECONDS, extra={"action": "process_row_left"})
