"""The slot loop's row for the doctor (``SlotLoopStatus``): when an iteration was last recorded,
and the tick thread's idle second in as few statements as its database allows
(docs/design.md §5, §11; docs/performance.md, "An idle second").

``record_checking_idle`` writes the row and returns the ticks' and the backlog's question in
its ``RETURNING``: with the lease, an idle second of the lease's holder is two statements.
On PostgreSQL ``hold_recording_idle`` makes them one: the lease's renewal, the row's update
and the question are common table expressions of one statement at the database's instant.
"""

import functools
import os
import socket
import time
from datetime import datetime

from django.db import connection

from runtime import clock
from runtime.prepared import prepared_cursor
from runtime.services.backlog import Backlog
from schedules.due_check import check_idle, clock_idle_params, idle_columns, idle_params, read_idle
from schedules.emitter import EmitterLease
from schedules.models import SlotLoopStatus
from schedules.repair import FUTURE_TOLERANCE_SECONDS, future_limit
from schedules.state import SYNC_NAME, loops_fingerprint
from schedules.ticks import keyed_loops

#: The ``SlotLoopStatus`` row every slot-loop process writes; the doctor reads it.
LOOP_NAME = "slot-loop"


def record_iteration(now: datetime, *, seconds: float | None = None) -> None:
    """Write the ``SlotLoopStatus`` row the doctor's ``slotLoopStale`` reads; ``seconds``, when
    given, is how long the completed iteration took (``/metrics``' iteration time). One
    precompiled ``UPDATE`` (every iteration makes it); the row is created the first time."""
    vendor = connection.vendor
    # The row is a heartbeat rewritten every second: on PostgreSQL its commit does not
    # wait for the WAL to reach the disk (a crash loses at most its last second, which
    # the next iteration rewrites); that wait was most of an idle iteration. Only as a
    # statement of its own: inside a transaction the setting would cover its other writes.
    relaxed = vendor == "postgresql" and not connection.in_atomic_block
    params = [clock.sql_instant(now, vendor), os.getpid(), _HOST]
    if seconds is not None:
        params.append(seconds)
    params.append(LOOP_NAME)
    with prepared_cursor() as cursor:
        cursor.execute(_record_sql(vendor, relaxed, seconds is not None), params)
        if cursor.rowcount:
            _recorded[0] = time.monotonic()
            return
    defaults = {"last_iteration_at": now, "pid": os.getpid(), "host": _HOST}
    if seconds is not None:
        defaults["last_iteration_seconds"] = seconds
    SlotLoopStatus.objects.update_or_create(name=LOOP_NAME, defaults=defaults)
    _recorded[0] = time.monotonic()


def record_checking_idle(now: datetime, *, seconds: float, registry) -> tuple[bool, Backlog]:
    """``record_iteration(now, seconds=seconds)`` and ``due_check.check_idle``'s answer at
    ``now`` for ``registry``, in one statement: the row's update returns the question's
    columns (``due_check.idle_columns``). ``seconds`` is the iteration's time up to this
    statement. Where the row does not exist yet, the two statements apart."""
    keyed = tuple(keyed_loops(registry))
    fingerprint, future = loops_fingerprint(registry), future_limit(now)
    vendor = connection.vendor
    columns, constants = idle_columns(keyed)
    before, after = idle_params(now, future, keyed, SYNC_NAME)
    sql = f"{_record_sql(vendor, vendor == 'postgresql' and not connection.in_atomic_block, True)} RETURNING {columns}"
    with prepared_cursor() as cursor:
        cursor.execute(sql, [clock.sql_instant(now, vendor), os.getpid(), _HOST, seconds, LOOP_NAME,
                             *before, *constants, *after])
        row = cursor.fetchone()
    if row is None:
        record_iteration(now, seconds=seconds)
        return ask_idle(now, registry)
    _recorded[0] = time.monotonic()
    return read_idle(row, fingerprint)


@functools.cache
def _record_sql(vendor: str, relaxed: bool, timed: bool) -> str:
    """``record_iteration``'s ``UPDATE`` on ``vendor`` (its text is the same every second):
    ``relaxed``, the commit does not wait for the WAL (PostgreSQL, outside a transaction);
    ``timed``, it sets ``last_iteration_seconds`` too."""
    quote = connection.ops.quote_name
    columns = ["last_iteration_at", "pid", "host", *(["last_iteration_seconds"] if timed else [])]
    relax = " FROM (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed" if relaxed else ""
    return (
        f"UPDATE {quote(SlotLoopStatus._meta.db_table)} SET {', '.join(f'{quote(c)} = %s' for c in columns)}"
        f"{relax} WHERE {quote('name')} = %s"
    )


#: ``time.monotonic()`` when this process last recorded an iteration (``record_iteration``).
_recorded = [float("-inf")]
_HOST = socket.gethostname()


def ask_idle(now: datetime, registry) -> tuple[bool, Backlog]:
    """``due_check.check_idle`` at ``now`` (the database's instant) for ``registry``'s loops:
    ``(nothing due?, the backlog)``, one statement."""
    return check_idle(sync_name=SYNC_NAME, fingerprint=loops_fingerprint(registry), due_by=now,
                      future_after=future_limit(now), keyed=tuple(keyed_loops(registry)))


def recorded_ago() -> float:
    """Seconds since this process last recorded an iteration (``time.monotonic()``; infinite if never)."""
    return time.monotonic() - _recorded[0]


def hold_recording_idle(lease: EmitterLease, *, seconds: float, registry) -> tuple[datetime, bool, Backlog] | None:
    """PostgreSQL, ``lease`` held by this process and the row recorded by it before: the
    lease's renewal (``EmitterLease.hold_now_then``), ``record_iteration`` and
    ``due_check.check_idle`` at the database's instant, in one statement. Returns ``(the
    instant, idle?, backlog)``, or None when another process holds the lease. A row deleted
    since is written again, and the question asked, apart."""
    keyed = tuple(keyed_loops(registry))
    fingerprint = loops_fingerprint(registry)
    columns, constants = idle_columns(keyed, instants=_CLOCK_INSTANTS)
    before, after = clock_idle_params(SYNC_NAME)
    relaxed = not connection.in_atomic_block
    answer = lease.hold_now_then(_then_sql(columns, relaxed), [os.getpid(), _HOST, seconds, LOOP_NAME,
                                                      *before, *constants, *after])
    if answer is None:
        return None
    now, row = answer
    if row[0] is None:
        record_iteration(now, seconds=seconds)
        return (now, *ask_idle(now, registry))
    _recorded[0] = time.monotonic()
    return (now, *read_idle(row, fingerprint))


#: The due instant and the future limit (``schedules.repair.future_limit``) of
#: ``hold_recording_idle``'s question: its own instant, ``clock.now``.
_CLOCK_INSTANTS = ("clock.now", f"clock.now + interval '{FUTURE_TOLERANCE_SECONDS} seconds'")


@functools.cache
def _then_sql(columns: str, relaxed: bool) -> str:
    """``hold_recording_idle``'s part after the lease: the row's update at ``clock.now``, made
    only when ``lease`` returned the renewed row, returning the question's ``columns``;
    ``relaxed`` as ``record_iteration``'s (the lease's renewal is then relaxed too: a crash
    loses at most its last second, which a restarted process takes again)."""
    quote = connection.ops.quote_name
    relax = ", (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed" if relaxed else ""
    return (
        f"UPDATE {quote(SlotLoopStatus._meta.db_table)} SET {quote('last_iteration_at')} = clock.now,"
        f" {quote('pid')} = %s, {quote('host')} = %s, {quote('last_iteration_seconds')} = %s"
        f" FROM lease, clock{relax} WHERE {quote('name')} = %s RETURNING {columns}"
    )
