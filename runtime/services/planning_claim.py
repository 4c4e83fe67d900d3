"""Which events a batched planner takes: the oldest unplanned, in admission order (docs/design.md §7).

``claim_chunk`` reads up to a chunk of the oldest unplanned events in one statement — on
PostgreSQL locked ``FOR UPDATE SKIP LOCKED`` until the chunk commits, so two planners take
different events — and leaves out an event whose correlation, or loop (and key), has an
older unplanned event outside the chunk: another planner holds that one, and events of one
correlation and of one loop are planned in admission order.

The events are read as ``ClaimedEvent`` rows, not model instances: building 500 instances
and running the ORM's converters per field was a fifth of a chunk's client time
(docs/performance.md, "Planning").
"""

import json

from django.db import connection

from runtime.models import Door, Event
from runtime.prepared import prepared_cursor

from .bulk_rows import instant_reader, one_of

#: The event fields planning reads (``planning.decide``, the plan, the journal), in the order
#: ``claim_chunk`` selects them. The rest are left unread: parsing two more instants and
#: three more texts per event was a sixth of a chunk's client time.
PLANNED_FROM = ("id", "uid", "type", "door", "loop", "loop_key", "slot", "payload", "correlation_id")


class ClaimedEvent:
    """An unplanned event as planning reads it: the ``PLANNED_FROM`` fields of ``Event``
    (``slot`` a UTC instant or None, ``payload`` the parsed document), ``pk`` and ``is_tick``
    as the model has them."""

    __slots__ = PLANNED_FROM

    def __init__(self, *values):
        for name, value in zip(PLANNED_FROM, values, strict=True):
            setattr(self, name, value)

    @property
    def pk(self) -> int:
        return self.id

    @property
    def is_tick(self) -> bool:
        return self.door == Door.SCHEDULE and self.loop is not None

    def __repr__(self) -> str:
        return f"<ClaimedEvent {self.id} {self.uid}>"


#: PostgreSQL, for the rest of the chunk's transaction (one statement):
#:
#: - read the unplanned events' partial index with index scans, not a bitmap scan. Each
#:   planned event leaves a dead entry in that index until a vacuum; an index scan marks
#:   the entries it finds dead so the next chunk skips them, a bitmap scan reads them all
#:   again. Just after a burst the statistics say few events are unplanned and the planner
#:   picks the bitmap scan: planning 60,000 ticks spent 3.1 s in the claims, 26 ms a chunk
#:   and growing with the burst; with index scans 0.27 s (docs/performance.md, "Planning");
#: - commit without waiting for the WAL's flush (docs/design.md §7, "Batches": what a
#:   chunk writes is flushed before anything acts on it outside the database).
CHUNK_SETTINGS = (
    "SELECT set_config('enable_bitmapscan', 'off', true), set_config('synchronous_commit', 'off', true)"
)


def claim_chunk(size: int) -> list[ClaimedEvent]:
    """Up to ``size`` of the oldest unplanned events this planner may plan now, in admission
    order (one statement, on PostgreSQL after ``CHUNK_SETTINGS``, and one more when some are
    left: ``_in_admission_order``). Not
    marked here: the chunk's update sets ``planned_at`` with the outcome, one new version of
    each event row instead of two. On PostgreSQL, call inside the chunk's transaction."""
    quote = connection.ops.quote_name
    locked = " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    sql = (
        f"SELECT {', '.join(quote(name) for name in PLANNED_FROM)} FROM {quote(Event._meta.db_table)} "
        f"WHERE {quote('planned_at')} IS NULL ORDER BY {quote('id')} LIMIT %s{locked}"
    )
    with prepared_cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(CHUNK_SETTINGS)
        cursor.execute(sql, [size])
        rows = cursor.fetchall()
    if not rows:
        return []
    instant = instant_reader()
    events = [
        ClaimedEvent(pk, uid, kind, door, loop, key, instant(slot), json.loads(payload), correlation)
        for pk, uid, kind, door, loop, key, slot, payload, correlation in rows
    ]
    return _in_admission_order(events)


def _in_admission_order(events: list[ClaimedEvent]) -> list[ClaimedEvent]:
    """``events`` less those with an older unplanned event of their correlation or of their
    loop (and key) outside the chunk — another planner has it — and less every later event
    of such a correlation or loop: they wait for a later chunk."""
    first_held_correlation: dict[str, int] = {}
    first_held_loop: dict[tuple, int] = {}
    for pk, correlation, door, loop, loop_key in _older_unplanned(events):
        first_held_correlation[correlation] = min(pk, first_held_correlation.get(correlation, pk))
        if door == Door.SCHEDULE and loop is not None:
            first_held_loop[(loop, loop_key)] = min(pk, first_held_loop.get((loop, loop_key), pk))
    if not first_held_correlation:
        return events
    kept = []
    for event in events:
        loop = (event.loop, event.loop_key) if event.is_tick else None
        if first_held_correlation.get(event.correlation_id, event.pk) < event.pk or (
            loop is not None and first_held_loop.get(loop, event.pk) < event.pk
        ):
            # Everything of this correlation and loop after it waits too.
            first_held_correlation.setdefault(event.correlation_id, event.pk)
            if loop is not None:
                first_held_loop.setdefault(loop, event.pk)
            continue
        kept.append(event)
    return kept


def _older_unplanned(events: list[ClaimedEvent]) -> list[tuple]:
    """``(id, correlation_id, door, loop, loop_key)`` of the unplanned events older than the
    chunk's last that are not in it (the chunk's ids as ``bulk_rows.one_of``)."""
    quote = connection.ops.quote_name
    ids = [event.pk for event in events]
    outside, params = one_of(quote("id"), ids, negate=True)
    sql = (
        f"SELECT {quote('id')}, {quote('correlation_id')}, {quote('door')}, {quote('loop')}, {quote('loop_key')} "
        f"FROM {quote(Event._meta.db_table)} WHERE {quote('planned_at')} IS NULL AND {quote('id')} < %s AND {outside}"
    )
    with prepared_cursor() as cursor:
        cursor.execute(sql, [ids[-1], *params])
        return cursor.fetchall()
