"""Batched planning: the backlog in chunks, each one transaction with multi-row inserts (docs/design.md §7).

``plan_batch`` claims up to ``size`` of the oldest unplanned events and plans them with
``planning.decide`` — the rule ``planning.plan_event`` applies to one event — in
admission order: which keys are held and which singleton loops have a run in flight is
read once for the whole chunk (two queries) and kept up to date in memory as the chunk's
own proposals and runs are decided, so a chunk decides exactly what planning its events
one at a time would. Then proposals, runs and journal entries are inserted with one
multi-row insert per table, and the events marked planned with their outcomes in one
update (one new version of each event row).

Several planners share the backlog instead of racing for it. On PostgreSQL each claims
its chunk with ``SELECT … FOR UPDATE SKIP LOCKED``, so two planners take different
events; an event is left for later when an older event of its correlation, or of its
loop (and key), is still unplanned outside the chunk — another planner holds it — so
events of one loop and of one correlation are still planned in admission order, and
parallelism is across them. On SQLite every transaction takes the write lock at BEGIN
(``transaction_mode: IMMEDIATE``), so one planner plans at a time and the next one's
chunk starts after it. Either way the update that marks the chunk's events planned is a
compare-and-swap on ``planned_at`` that must mark every one, or the chunk is rolled back:
two planners never plan one event twice.

When the database refuses one of a chunk's inserts (another planner or an approval took
a key or a singleton loop meanwhile), the chunk is rolled back and its events are
planned one at a time, each deciding again (``planning.plan_event``).
"""

import logging
from datetime import datetime

from django.db import IntegrityError, connection, transaction

from runtime.models import DOOR_ACTOR, Door, Event, PlanningOutcome, Proposal, Run

from .bulk_rows import insert_rows, one_of, recordset, stored_instant
from .idempotency import held_keys
from .journal import entry_row, record_values
from .planning import (
    Decision,
    decide,
    ended_entry,
    log_planned_chunk,
    loop_and_keys,
    plan_event,
    proposal_entry,
    proposal_fields,
    singletons_in_flight,
)
from .previews import queue_previews
from .runs import run_fields, run_queued_entry

logger = logging.getLogger(__name__)

#: Events planned per transaction: large enough that a burst of 10,000 ticks is a few dozen
#: transactions, small enough that a chunk's locks and its retry one at a time stay short.
CHUNK_SIZE = 500


#: The event fields planning reads (``planning.decide``, the plan, the journal). The rest are
#: left unread: parsing two more instants and three more texts per event was a sixth of a
#: chunk's client time (docs/performance.md).
PLANNED_FROM = ("id", "uid", "type", "door", "loop", "loop_key", "slot", "payload", "correlation_id")


class ChunkLost(Exception):
    """A chunk's events were not all still unplanned when claimed; it is rolled back."""


def plan_batch(*, now: datetime, registry, size: int = CHUNK_SIZE) -> int:
    """Claim and plan up to ``size`` of the oldest unplanned events at ``now``; returns how many
    were planned (0: none waiting, or every waiting one is held by another planner)."""
    events: list[Event] = []
    try:
        with transaction.atomic():
            events = _claim(size)
            if not events:
                return 0
            decided = _decide_chunk(events, registry)
            _write(decided, registry, now)
    except ChunkLost:
        # Only a planner that ignored the locks (or the write lock) could have taken them.
        logger.warning("a chunk's events were planned meanwhile; it was rolled back", extra={"action": "planning_chunk_lost"})
        return 0
    except IntegrityError:
        logger.info("a chunk of %s events met a concurrent change; planning them one at a time", len(events),
                    extra={"action": "planning_chunk_retried"})
        return sum(1 for event in events if plan_event(event.pk, now=now, registry=registry) is not None)
    log_planned_chunk([(event, decision.outcome, decision.reason) for event, decision in decided])
    return len(decided)


def _claim(size: int) -> list[Event]:
    """The chunk: up to ``size`` of the oldest unplanned events this planner may plan now,
    in admission order, in one statement — on PostgreSQL locked ``FOR UPDATE SKIP LOCKED``
    until the chunk commits, so no other planner takes them. Not marked here: ``_record_outcomes``
    sets ``planned_at`` with the outcome, one update of each event row instead of two."""
    events = list(
        Event.objects.select_for_update(skip_locked=True).filter(planned_at__isnull=True).order_by("id")
        .only(*PLANNED_FROM)[:size]
    )
    return _in_admission_order(events) if events else []


def _in_admission_order(events: list[Event]) -> list[Event]:
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


def _older_unplanned(events: list[Event]) -> list[tuple]:
    """``(id, correlation_id, door, loop, loop_key)`` of the unplanned events older than the
    chunk's last that are not in it (the chunk's ids as ``bulk_rows.one_of``)."""
    quote = connection.ops.quote_name
    ids = [event.pk for event in events]
    outside, params = one_of(quote("id"), ids, negate=True)
    sql = (
        f"SELECT {quote('id')}, {quote('correlation_id')}, {quote('door')}, {quote('loop')}, {quote('loop_key')} "
        f"FROM {quote(Event._meta.db_table)} WHERE {quote('planned_at')} IS NULL AND {quote('id')} < %s AND {outside}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [ids[-1], *params])
        return cursor.fetchall()


def _decide_chunk(events: list[Event], registry) -> list[tuple[Event, Decision]]:
    """Each event's decision, in order, as if the ones before it had been written."""
    keys = {found for event in events if (found := loop_and_keys(event, registry)) is not None}
    held = held_keys({key for key, _ in keys})
    in_flight = singletons_in_flight(single for _, single in keys if single)
    decided = []
    for event in events:
        decision = decide(event, registry, held=held.__contains__, in_flight=in_flight.__contains__)
        if decision.proposes:
            held.add(decision.key)
            if decision.outcome == PlanningOutcome.APPROVED and decision.single:
                in_flight.add(decision.single)
        decided.append((event, decision))
    return decided


def _write(decided: list[tuple[Event, Decision]], registry, now: datetime) -> None:
    """Insert the chunk's proposals, runs and journal entries (one multi-row insert each, the
    journal in the order planning one at a time writes it) and set the events' outcomes.
    Rows are built as dicts of their fields, not model instances (``bulk_rows.insert_rows``)."""
    proposing = [(event, decision) for event, decision in decided if decision.proposes]
    proposals = {event.pk: {**proposal_fields(event, decision, registry, now), "event_id": event.pk}
                 for event, decision in proposing}
    proposal_ids = insert_rows(Proposal, list(proposals.values()), key="event_id")
    runs = {
        event.pk: {**run_fields(proposals[event.pk], door=event.door, actor=DOOR_ACTOR[Door(event.door)], now=now),
                   "proposal_id": proposal_ids[event.pk]}
        for event, decision in proposing if decision.outcome == PlanningOutcome.APPROVED
    }
    run_ids = insert_rows(Run, list(runs.values()), key="proposal_id")
    queue_previews([(proposal_ids[pk], fields["loop"], fields["loop_key"], fields["plan"])
                    for pk, fields in proposals.items() if pk not in runs], registry=registry, now=now)
    entries = []
    for event, decision in decided:
        if not decision.proposes:
            entries.append(ended_entry(event, decision, now, build=entry_row))
            continue
        entries.append(proposal_entry(event, decision, proposal_id=proposal_ids[event.pk], now=now))
        if event.pk in runs:
            run = runs[event.pk]
            entries.append(run_queued_entry(run, run_id=run_ids[run["proposal_id"]], now=now))
    record_values(entries)
    _record_outcomes(decided, now)


def _record_outcomes(decided: list[tuple[Event, Decision]], now: datetime) -> None:
    """Mark the chunk's events planned at ``now`` with their outcomes: one ``UPDATE … FROM``
    of every event (PostgreSQL: the rows of one JSON parameter, ``bulk_rows.recordset``; SQLite
    3.33+: ``VALUES``), a compare-and-swap on ``planned_at`` that raises ``ChunkLost`` —
    rolling the chunk back — unless it marked every one (docs/design.md §7)."""
    quote = connection.ops.quote_name
    table = Event._meta.db_table
    rows = [(event.pk, decision.outcome, decision.reason) for event, decision in decided]
    if connection.vendor == "postgresql":
        source, params = recordset(table, ("id", "planning_outcome", "planning_reason"), rows, "v")
        picked = [f"v.{quote(column)}" for column in ("id", "planning_outcome", "planning_reason")]
    else:
        source = f"(VALUES {', '.join(['(%s, %s, %s)'] * len(rows))}) AS v"
        params, picked = [value for row in rows for value in row], ["v.column1", "v.column2", "v.column3"]
    sql = (
        f"UPDATE {quote(table)} SET {quote('planned_at')} = %s, {quote('planning_outcome')} = {picked[1]}, "
        f"{quote('planning_reason')} = {picked[2]} FROM {source} "
        f"WHERE {quote(table)}.{quote('id')} = {picked[0]} AND {quote(table)}.{quote('planned_at')} IS NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [stored_instant(now), *params])
        if cursor.rowcount != len(rows):
            raise ChunkLost
