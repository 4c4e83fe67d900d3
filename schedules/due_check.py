"""Whether a tick iteration has anything to do: one statement (docs/design.md §5, docs/performance.md).

An idle slot loop asks this once a second. When the loops' states are synced with the
registry in force, no state is due, no last slot lies in the future and no keyed loop has
work, ``emit_due_ticks`` returns at once; otherwise it takes its full path
(``ensure_synced``, ``due_states``, the repairs, the keyed loops' steps). The answer may
say "work" when there is none (the full path then finds nothing), never the reverse.
The statement is plain SQL built once per process and registry: building it through the
ORM cost more than the database's answer.

``check_idle`` asks the same and, in the same statement, ``runtime.services.backlog``'s
two questions (outbox rows pending? events not planned?). The slot loop's tick thread asks
them in the ``RETURNING`` of its doctor's row's update (``idle_columns``, ``read_idle``): an
idle iteration is then the lease and that one statement (docs/design.md §5).

A keyed loop has work (``schedules.keyed``) when its state row is missing or marks it
disabled while it is enabled and not paused, when an event of its setting or clearing types lies past
its cursor (applied events stay there until they settle, a minute), or, enabled and not
paused, when one of its rows is due.
"""

from datetime import datetime

from django.db import connection

from runtime.clock import sql_instant
from runtime.models import Event
from runtime.prepared import prepared_cursor
from runtime.registry import Loop
from runtime.services.backlog import Backlog, backlog_columns

from .models import KeyedRule, KeyedSchedule, LoopPause, ScheduleState, ScheduleSync

_sql: dict[tuple, tuple[str, list]] = {}


def _statement(
    keyed: tuple[Loop, ...], *, with_backlog: bool, instants: tuple[str, str] = ("%s", "%s"),
) -> tuple[str, list]:
    """The question's columns (SQL expressions, comma-separated) and its constant parameters (the keyed loops' names and types); with
    ``with_backlog`` its first two columns are ``backlog_columns()``. ``instants`` are the SQL of
    the due instant and of the future limit: parameters, or expressions of the statement's own."""
    cache_key = (
        connection.vendor, with_backlog, instants,
        tuple((loop.name, loop.enabled, loop.keyed.event_types) for loop in keyed),
    )
    due, future = instants
    if cache_key in _sql:
        return _sql[cache_key]
    quote = connection.ops.quote_name
    sync, state, rows, events, pauses = (
        quote(m._meta.db_table) for m in (ScheduleSync, ScheduleState, KeyedSchedule, Event, LoopPause)
    )
    # The constant rule is a literal: SQLite matches a partial index's condition only
    # against literals. The earliest next_due and the latest last slots are compared, not
    # ``EXISTS (… WHERE next_due <= %s)``: PostgreSQL prepares this statement, and the
    # generic plan of the EXISTS read every state (3.7 ms at 10,000 loops) where MIN and
    # MAX read one end of their index whatever the instant.
    parts = [
        f"(SELECT {quote('fingerprint')} FROM {sync} WHERE {quote('name')} = %s)",
        f"(SELECT MIN({quote('next_due')}) FROM {state}) <= {due}",
        f"(SELECT MAX({quote('last_slot')}) FROM {state}) > {future}",
        f"(SELECT MAX({quote('last_slot')}) FROM {rows} WHERE {quote('rule')} <> '{KeyedRule.ONCE.value}') > {future}",
    ]
    constants = []
    if keyed:
        names = [loop.name for loop in keyed]
        enabled = [loop.name for loop in keyed if loop.enabled]
        types = sorted({event_type for loop in keyed for event_type in loop.keyed.event_types})

        def listed(values):
            constants.extend(values)
            return ", ".join(["%s"] * len(values))

        parts.append(f"(SELECT COUNT(*) FROM {state} WHERE {quote('loop')} IN ({listed(names)})) <> {len(names)}")
        parts.append(
            f"EXISTS (SELECT 1 FROM {events} WHERE {quote('type')} IN ({listed(types)}) AND {quote('id')} > "
            f"(SELECT COALESCE(MIN({quote('keyed_cursor')}), 0) FROM {state} WHERE {quote('loop')} IN ({listed(names)})))"
        )
        if enabled:
            # A paused keyed loop (``LoopPause``) has no work: its state stays marked disabled
            # and its due rows wait (docs/schedules.md, "Pausing a loop").
            def unpaused(table):
                return f"NOT EXISTS (SELECT 1 FROM {pauses} WHERE {pauses}.{quote('loop')} = {table}.{quote('loop')})"

            parts.append(
                f"EXISTS (SELECT 1 FROM {state} WHERE {quote('loop')} IN ({listed(enabled)}) AND NOT {quote('enabled')}"
                f" AND {unpaused(state)})"
            )
            parts.append(
                f"EXISTS (SELECT 1 FROM {rows} WHERE {quote('loop')} IN ({listed(enabled)}) AND {quote('next_due')} <= {due}"
                f" AND {unpaused(rows)})"
            )
    if with_backlog:
        parts[:0] = backlog_columns()
    _sql[cache_key] = (", ".join(parts), constants)
    return _sql[cache_key]


def idle_columns(keyed: tuple[Loop, ...], *, instants: tuple[str, str] | None = None) -> tuple[str, list]:
    """``(columns, constants)``: ``check_idle``'s question as a list of SQL expressions, to be
    selected or returned by another statement, and its constant parameters;
    ``idle_params`` gives the parameters before the constants, ``read_idle`` reads the row.
    With ``instants`` (the SQL of the due instant and of the future limit, expressions of the
    statement that returns the columns) the parameters are ``clock_idle_params``'."""
    return _statement(keyed, with_backlog=True, **({"instants": instants} if instants else {}))


def idle_params(due_by: datetime, future_after: datetime, keyed: tuple[Loop, ...], sync_name: str) -> tuple[list, list]:
    """The parameters of ``idle_columns`` as ``(before the constants, after them)``."""
    vendor = connection.vendor
    due, future = sql_instant(due_by, vendor), sql_instant(future_after, vendor)
    return [sync_name, due, future, future], [due] if any(loop.enabled for loop in keyed) else []


def clock_idle_params(sync_name: str) -> tuple[list, list]:
    """The parameters of ``idle_columns`` with ``instants``, as ``idle_params`` gives them."""
    return [sync_name], []


def read_idle(row, fingerprint: str) -> tuple[bool, Backlog]:
    """``check_idle``'s answer from a row of ``idle_columns``."""
    synced, *work = row[2:]
    return synced == fingerprint and not any(work), Backlog(outbox=bool(row[0]), events=bool(row[1]))


def nothing_due(
    *, sync_name: str, fingerprint: str, due_by: datetime, future_after: datetime, keyed: tuple[Loop, ...] = (),
) -> bool:
    """True when the states were synced with ``fingerprint`` (``schedules.state.ensure_synced``),
    no state is due at ``due_by``, no state or keyed row has a last slot after
    ``future_after`` (``schedules.repair``) and none of the ``keyed`` loops (the registry's)
    has work at ``due_by``. One statement."""
    return _ask(sync_name, fingerprint, due_by, future_after, keyed, with_backlog=False)[0]


def check_idle(
    *, sync_name: str, fingerprint: str, due_by: datetime, future_after: datetime, keyed: tuple[Loop, ...] = (),
) -> tuple[bool, Backlog]:
    """``(nothing_due(…), runtime.services.backlog.backlog())`` with the same arguments as
    ``nothing_due``, in one statement."""
    return _ask(sync_name, fingerprint, due_by, future_after, keyed, with_backlog=True)


def _ask(sync_name, fingerprint, due_by, future_after, keyed, *, with_backlog: bool) -> tuple[bool, Backlog | None]:
    columns, constants = _statement(keyed, with_backlog=with_backlog)
    before, after = idle_params(due_by, future_after, keyed, sync_name)
    # Prepared on PostgreSQL: planning it took three times as long as answering it.
    with prepared_cursor() as cursor:
        cursor.execute(f"SELECT {columns}", [*before, *constants, *after])
        row = cursor.fetchone()
    if with_backlog:
        return read_idle(row, fingerprint)
    synced, *work = row
    return synced == fingerprint and not any(work), None
