"""The loops in question, read set-based: stopped, piling up, due or ticked late (docs/design.md §11;
docs/schedules.md, "The doctor"; docs/web.md, "Status badges").

At 100,000 loops nothing here reads every loop's row. The database narrows the rows to those
that can be in question, then the overview's pure functions (``expected_by``) judge only
those, so the answer is the one a walk over every loop gives:

- a loop can be **stopped** (no tick for two intervals) only when the slot loop has its next
  slot due: an enabled state whose ``next_due`` is at or before now, or null (a keyed loop,
  whose rows carry their own; a row the slot loop has not synced yet). A state whose next
  slot lies ahead fired its current slot, so its last tick is less than one interval old;
- a loop is **piling up** when its pending proposals, counted per loop by the database,
  exceed the threshold;
- a loop can be **late** (``ops.web.badges.is_late``) only when its current slot is due and
  unfired, or its last tick was admitted more than the grace after its slot.

"""

from datetime import datetime, timedelta
from functools import lru_cache

from django.db import connection
from django.db.models import F, FloatField, Func, Min, Q

from lib.instants import format_instant
from runtime.models import Proposal, ProposalStatus
from runtime.registry import Registry

from .models import KeyedSchedule, ScheduleState
from .names import loop_index
from .overview import KeyedCounts, expected_by
from .rows import state_rows

#: ``format_instant`` memoised: where many loops stopped together, their instants repeat.
_format = lru_cache(maxsize=4096)(format_instant)
#: The ``ScheduleState`` fields the judgements read, fetched as named tuples.
STATE_ROW = ("loop", "last_slot", "last_event_id", "last_tick_at", "enabled", "enabled_since")


def due_states(*, due_by: datetime) -> dict:
    """The enabled states whose next slot is due at ``due_by`` (``next_due`` at or before it, or
    null), by loop, as named tuples of ``STATE_ROW``. One query (``schedule_next_due_idx``)."""
    rows = ScheduleState.objects.filter(Q(next_due__isnull=True) | Q(next_due__lte=due_by), enabled=True)
    return {row.loop: row for row in state_rows(rows.order_by(), STATE_ROW)}


class SecondsBetween(Func):
    """``end - start`` of two instants in seconds, a float, computed by the database's own
    arithmetic: on SQLite ``julianday``, not Django's datetime arithmetic, which calls back
    into Python for every row."""

    arity = 2
    output_field = FloatField()

    def as_sqlite(self, compiler, connection, **extra):
        return super().as_sql(
            compiler,
            connection,
            template="((julianday(%(expressions)s)) * 86400.0)",
            arg_joiner=") - julianday(",
            **extra,
        )

    def as_postgresql(self, compiler, connection, **extra):
        return super().as_sql(
            compiler, connection, template="EXTRACT(EPOCH FROM (%(expressions)s))", arg_joiner=" - ", **extra
        )


#: How much shorter than the grace a lag ``ticked_late_states`` lets through: the database's
#: float arithmetic must not drop a tick a microsecond over it; ``is_late`` judges exactly.
LAG_MARGIN_SECONDS = 0.5


def ticked_late_states(*, grace: timedelta) -> dict:
    """The enabled states whose last tick was admitted more than ``grace`` after its slot (and a
    few just under it: ``LAG_MARGIN_SECONDS``), by loop, as named tuples of ``STATE_ROW``. One
    query over the states, a comparison per row in the database."""
    lag = SecondsBetween(F("last_tick_at"), F("last_slot"))
    rows = ScheduleState.objects.alias(lag=lag).filter(enabled=True, lag__gt=grace.total_seconds() - LAG_MARGIN_SECONDS)
    return {row.loop: row for row in state_rows(rows.order_by(), STATE_ROW)}


def keyed_next_due(names: tuple[str, ...]) -> dict[str, datetime]:
    """The earliest ``next_due`` of each of the keyed loops ``names`` that has rows. One query
    (``keyed_due_idx``), none without keyed loops."""
    if not names:
        return {}
    rows = KeyedSchedule.objects.filter(loop__in=names).order_by().values_list("loop").annotate(d=Min("next_due"))
    return dict(rows)


def stopped_schedules(registry: Registry, *, now: datetime) -> list[dict]:
    """``[{loop, lastTickAt, expectedBy}]`` by loop: the enabled loops of ``registry`` with no
    admitted tick for more than two intervals at ``now`` (``expected_by``). Two queries at most:
    the due states, and the keyed loops' earliest rows."""
    states = due_states(due_by=now)
    due = keyed_next_due(loop_index(registry).keyed)
    found = []
    for name in sorted(states):
        loop = registry.loops.get(name)
        if loop is None:
            continue
        state = states[name]
        keyed = KeyedCounts(0, due.get(name)) if loop.keyed is not None else None
        deadline = expected_by(loop, state, keyed)
        if deadline is not None and now > deadline:
            found.append(
                {
                    "loop": name,
                    "lastTickAt": _format(state.last_tick_at) if state.last_tick_at else None,
                    "expectedBy": _format(deadline),
                }
            )
    return found


def pile_ups(registry: Registry, *, threshold: int) -> list[dict]:
    """``[{loop, pending}]`` by loop: the watched loops of ``registry`` with more than
    ``threshold`` pending proposals. One aggregate query (``proposal_pending_idx``)."""
    quote = connection.ops.quote_name
    table, loop = quote(Proposal._meta.db_table), quote("loop")
    # 'pending' is a literal, as proposal_pending_idx states it: SQLite uses a partial index
    # only when the query repeats its condition, which a bound parameter never does.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {loop}, COUNT(*) FROM {table} WHERE status = '{ProposalStatus.PENDING.value}' "
            f"AND {loop} IS NOT NULL GROUP BY {loop} HAVING COUNT(*) > %s",
            [threshold],
        )
        rows = cursor.fetchall()
    return [
        {"loop": name, "pending": pending}
        for name, pending in sorted(rows)
        if name in registry.loops and registry.loops[name].approval == "watched"
    ]
