"""The tick emitter lease: one slot-loop process at a time emits ticks (docs/design.md §5; docs/operations.md).

Several ``runserve`` processes may share one database; each runs a slot loop, and
each slot loop's tick thread asks every iteration for the ``TickEmitterLease`` row.
The holder renews it (every iteration, and between the chunks of a burst); the others
take it only once it has expired on the database's clock, in one compare-and-swap
update, so two processes never both emit. A holder that dies stops renewing: within
``LEASE_SECONDS`` plus one iteration another process holds the lease and fires the
slots of that window (late, by at most the takeover, and each once: the eventId is the
slot). A holder that stops cleanly expires its lease at once.

Not a session advisory lock: the slot loop closes its connections between iterations.

A holder that is frozen rather than dead (a paused VM, a stopped process) keeps its
connection and, when frozen inside a transaction, the locks of the ticks it was writing:
the process that takes the lease over would wait on those same eventIds until the frozen
one resumed. On PostgreSQL the tick thread's connections therefore end a transaction left
idle for ``FROZEN_TRANSACTION_SECONDS`` (``bound_frozen_transactions``): the server rolls
it back and drops the session, the successor writes the ticks, and the frozen process,
resumed, finds its connection closed and its lease gone.
"""

import logging
import os
import secrets
import socket
import threading
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.db import connection
from django.db.backends.signals import connection_created

from runtime import clock
from runtime.clock import sql_instant
from runtime.prepared import prepared_cursor

from .models import TickEmitterLease

logger = logging.getLogger(__name__)

#: The one lease row's name.
LEASE_NAME = "ticks"
#: How long a renewal holds the lease (seconds, on the database's clock). With one-second
#: iterations a dead holder is replaced within this plus one second: at most 4 s.
LEASE_SECONDS = 3
#: A tick-thread transaction idle this long (seconds) is ended by PostgreSQL: twice the
#: lease, so a successor is writing by then; a live tick thread's transactions are a few
#: statements milliseconds apart.
FROZEN_TRANSACTION_SECONDS = 2 * LEASE_SECONDS

_bounded = threading.local()


@contextmanager
def bound_frozen_transactions():
    """Within this block, each PostgreSQL connection this thread opens ends a transaction
    left idle for ``FROZEN_TRANSACTION_SECONDS`` (``idle_in_transaction_session_timeout``,
    set once per connection as it opens). Nothing on SQLite, where a transaction holds the
    write turn in the kernel (``runtime.sqlite_backend``), which a frozen process keeps."""
    _bounded.on = True
    try:
        yield
    finally:
        _bounded.on = False


def _bound_on_open(sender, connection, **kwargs) -> None:
    if getattr(_bounded, "on", False) and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('idle_in_transaction_session_timeout', %s, false)",
                           [f"{FROZEN_TRANSACTION_SECONDS * 1000}"])


connection_created.connect(_bound_on_open, dispatch_uid="schedules.emitter.bound_frozen_transactions")


def holder_name() -> str:
    """``host:pid:token``: this process, and a token so that a reused pid is another holder."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class EmitterLease:
    """This process's side of the lease; ``held`` is what the last ``hold`` answered."""

    def __init__(self, holder: str | None = None):
        self.holder = holder or holder_name()
        self.held = False
        # The lease row was seen (taken, or found held by another): it is never deleted, so
        # a refused take does not ask again whether it exists.
        self._row_seen = False

    def hold(self, now: datetime) -> bool:
        """Renew the lease, or take it if it expired, at ``now`` (the database's instant);
        returns True when this process holds it until ``now + LEASE_SECONDS``. One update
        for the holder; the row is created the first time any process asks."""
        held = self._take(now)
        if not held and not self._row_seen:
            if TickEmitterLease.objects.filter(name=LEASE_NAME).exists():
                self._row_seen = True
            else:
                TickEmitterLease.objects.bulk_create(
                    [TickEmitterLease(name=LEASE_NAME, holder="", acquired_at=now, expires_at=now)],
                    ignore_conflicts=True,
                )
                held = self._take(now)
        self._row_seen = self._row_seen or held
        self._settle(held)
        return held

    def hold_now(self) -> datetime | None:
        """``hold`` at the database's instant, read by the statement that renews or takes the
        lease: that instant when this process holds the lease until it plus ``LEASE_SECONDS``,
        None when another process holds it. One statement for the holder and for a process
        refused (the tick thread's clock reading and its lease were two a second); the first
        ask of a process that has not seen the row yet goes through ``hold``."""
        vendor = connection.vendor
        with prepared_cursor() as cursor:
            holder = [self.holder] if self.held else []
            cursor.execute(_take_now_sql(vendor, self.held), [self.holder, *holder, LEASE_NAME, self.holder])
            row = cursor.fetchone()
        if row is None and not self._row_seen:
            now = clock.database_now()
            return now if self.hold(now) else None
        self._row_seen = True
        self._settle(row is not None)
        # The statement returns the new expiry: the instant it read plus exactly the lease.
        return None if row is None else clock.instant_of(row[0]) - _LEASE

    def hold_now_then(self, then_sql: str, params: list) -> tuple[datetime, tuple] | None:
        """``hold_now`` of the lease's holder on PostgreSQL (``held``, the row seen) with
        ``then_sql`` in the same statement: a data-modifying statement with ``params`` that may
        name ``clock`` (its ``now``: the instant) and ``lease`` (the renewed row; none when the
        lease is not held). Returns ``(the instant, then_sql's returned row, all None when it
        returned none)``, or None when another process holds the lease: one round trip."""
        with prepared_cursor() as cursor:
            cursor.execute(_take_then_sql(then_sql), [self.holder, self.holder, LEASE_NAME, self.holder, *params])
            row = cursor.fetchone()
        self._settle(row is not None)
        return None if row is None else (clock.instant_of(row[0]) - _LEASE, row[1:])

    def _settle(self, held: bool) -> None:
        """Log a change of holder, and remember ``held``."""
        if held != self.held:
            if held:
                logger.info("this process emits ticks now (lease %s)", self.holder,
                            extra={"action": "tick_emitter_acquired", "holder": self.holder})
            else:
                logger.warning("this process lost the tick emitter lease (%s)", self.holder,
                               extra={"action": "tick_emitter_lost", "holder": self.holder})
        self.held = held

    def _take(self, now: datetime) -> bool:
        """One compare-and-swap update: the holder's renewal (``acquired_at`` kept while it
        holds it), or a take of a lease that is this process's or has expired (``acquired_at``
        = ``now``). Plain SQL, prepared on PostgreSQL: the tick thread asks every second, and
        the ORM's two querysets cost more than the database's answer."""
        vendor = connection.vendor
        instant, until = sql_instant(now, vendor), sql_instant(now + _LEASE, vendor)
        with prepared_cursor() as cursor:
            acquired = [self.holder, instant, instant] if self.held else [instant]
            cursor.execute(
                _take_sql(vendor, self.held), [self.holder, *acquired, until, LEASE_NAME, self.holder, instant, instant],
            )
            return cursor.rowcount > 0

    def release(self, now: datetime) -> None:
        """Give the lease up at ``now`` (a clean stop): another process takes it at its next iteration."""
        if self.held:
            TickEmitterLease.objects.filter(name=LEASE_NAME, holder=self.holder).update(expires_at=now)
            self.held = False


_LEASE = timedelta(seconds=LEASE_SECONDS)
_sql: dict[tuple, str] = {}


def _take_sql(vendor: str, held: bool) -> str:
    """``EmitterLease._take``'s statement on ``vendor``; ``held``: this process held the lease at
    its last ask, so a renewal keeps ``acquired_at`` (the row's values are read before the update)."""
    key = (vendor, held)
    if key not in _sql:
        quote = connection.ops.quote_name
        holder, expires = quote("holder"), quote("expires_at")
        acquired = (
            f"CASE WHEN {holder} = %s AND {expires} > %s THEN {quote('acquired_at')} ELSE %s END"
            if held else "%s"
        )
        _sql[key] = (
            f"UPDATE {quote(TickEmitterLease._meta.db_table)} SET {holder} = %s, {quote('acquired_at')} = {acquired},"
            f" {expires} = %s WHERE {quote('name')} = %s AND (({holder} = %s AND {expires} > %s) OR {expires} <= %s)"
        )
    return _sql[key]


def _take_now_sql(vendor: str, held: bool) -> str:
    """``EmitterLease.hold_now``'s statement: ``_take_sql``'s compare-and-swap at the database's
    instant (``runtime.clock``'s: PostgreSQL's ``clock_timestamp()``; SQLite's ``'now'``, in the
    text form a ``DateTimeField`` stores), returning the new ``expires_at``. The instant is a
    common table expression's column, read once: each call of ``clock_timestamp()`` reads the
    clock again. SQLite's ``RETURNING`` may not name it, hence the expiry."""
    key = (vendor, held, "now")
    if key not in _sql:
        if vendor == "postgresql":
            instant, until = "clock_timestamp()", f"clock.now + interval '{LEASE_SECONDS} seconds'"
        else:
            # Microseconds written as Django writes them: the stored texts compare as instants
            # (``%%``: the statement has parameters).
            instant = "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now') || '000'"
            until = f"strftime('%%Y-%%m-%%d %%H:%%M:%%f', clock.now, '+{LEASE_SECONDS} seconds') || '000'"
        _sql[key] = f"WITH clock (now) AS (SELECT {instant}) {_renewal_sql(held, until)}"
    return _sql[key]


def _take_then_sql(then_sql: str) -> str:
    """``EmitterLease.hold_now_then``'s statement (PostgreSQL): the holder's ``_take_now_sql``
    as the common table expression ``lease``, then ``then_sql`` as ``then``; it returns the new
    ``expires_at`` and ``then``'s row beside it (all None when ``then`` returned none)."""
    key = ("then", then_sql)
    if key not in _sql:
        renewal = _renewal_sql(True, f"clock.now + interval '{LEASE_SECONDS} seconds'")
        _sql[key] = (
            f"WITH clock (now) AS (SELECT clock_timestamp()), lease AS ({renewal}), step AS ({then_sql})"
            f" SELECT lease.{connection.ops.quote_name('expires_at')}, step.* FROM lease LEFT JOIN step ON true"
        )
    return _sql[key]


def _renewal_sql(held: bool, until: str) -> str:
    """The lease's compare-and-swap ``UPDATE`` at ``clock.now`` (a common table expression of
    the statement), setting ``expires_at`` to ``until`` and returning it; with ``held`` the
    holder's, which keeps ``acquired_at`` while it holds the lease."""
    quote = connection.ops.quote_name
    holder, expires = quote("holder"), quote("expires_at")
    acquired = (
        f"CASE WHEN {holder} = %s AND {expires} > clock.now THEN {quote('acquired_at')} ELSE clock.now END"
        if held else "clock.now"
    )
    return (
        f"UPDATE {quote(TickEmitterLease._meta.db_table)}"
        f" SET {holder} = %s, {quote('acquired_at')} = {acquired}, {expires} = {until} FROM clock"
        f" WHERE {quote('name')} = %s AND (({holder} = %s AND {expires} > clock.now) OR {expires} <= clock.now)"
        f" RETURNING {expires}"
    )
