"""Whether a tick iteration has anything to do: one precompiled statement (docs/performance.md).

An idle slot loop asks this once a second. When the loops' states are synced with the
registry in force, no state is due, no last slot lies in the future and the registry has
no keyed loops, ``emit_due_ticks`` returns at once; otherwise it takes its full path
(``ensure_synced``, ``due_states``, the repairs). The statement is plain SQL built once
per process: building it through the ORM cost more than the database's answer.
"""

from datetime import datetime

from django.db import connection
from django.db.models import DateTimeField

from .models import KeyedRule, KeyedSchedule, ScheduleState, ScheduleSync

_INSTANT = DateTimeField()
_sql: dict[str, str] = {}


def _statement() -> str:
    if connection.vendor not in _sql:
        quote = connection.ops.quote_name
        sync, state, keyed = (quote(m._meta.db_table) for m in (ScheduleSync, ScheduleState, KeyedSchedule))
        # Literals, not parameters, for the constant rule: SQLite matches a partial index's
        # condition only against literals.
        _sql[connection.vendor] = (
            f"SELECT (SELECT {quote('fingerprint')} FROM {sync} WHERE {quote('name')} = %s), "
            f"EXISTS (SELECT 1 FROM {state} WHERE {quote('next_due')} <= %s), "
            f"EXISTS (SELECT 1 FROM {state} WHERE {quote('last_slot')} > %s), "
            f"EXISTS (SELECT 1 FROM {keyed} WHERE {quote('last_slot')} > %s AND {quote('rule')} <> '{KeyedRule.ONCE.value}')"
        )
    return _sql[connection.vendor]


def nothing_due(*, sync_name: str, fingerprint: str, due_by: datetime, future_after: datetime) -> bool:
    """True when the states were synced with ``fingerprint`` (``schedules.state.ensure_synced``),
    no state is due at ``due_by`` and no state or keyed row has a last slot after
    ``future_after`` (``schedules.repair``). One statement."""
    due, future = (_INSTANT.get_db_prep_value(value, connection) for value in (due_by, future_after))
    with connection.cursor() as cursor:
        cursor.execute(_statement(), [sync_name, due, future, future])
        synced, any_due, state_future, keyed_future = cursor.fetchone()
    return synced == fingerprint and not (any_due or state_future or keyed_future)
