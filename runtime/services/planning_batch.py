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
parallelism is across them. On SQLite a chunk is claimed, decided and its rows built
before its transaction begins: every transaction takes the database's one write turn at
``BEGIN`` (``transaction_mode: IMMEDIATE``), the doors' groups queue for it, and a chunk
held it for its whole Python work (docs/performance.md, "Signed intake"). Either way the
update that marks the chunk's events planned is a compare-and-swap on ``planned_at`` that
must mark every one, or the chunk is rolled back: two planners never plan one event twice
(on SQLite the second to write loses its chunk and claims another at its next iteration).

When the database refuses one of a chunk's inserts (another planner or an approval took
a key or a singleton loop meanwhile), the chunk is rolled back and its events are
planned one at a time, each deciding again (``planning.plan_event``).
"""

import json
import logging
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, connection, transaction

from runtime.models import DOOR_ACTOR, Door, Event, PlanningOutcome, Proposal, Run
from runtime.prepared import prepared_cursor

from .bulk_rows import backend_vendor, insert_rows, stored_instant
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
from .planning_claim import ClaimedEvent, claim_chunk
from .plans import plan_json
from .previews import queue_previews
from .runs import run_fields, run_queued_entry

logger = logging.getLogger(__name__)

#: Events planned per transaction: large enough that a burst of 10,000 ticks is a few dozen
#: transactions, small enough that a chunk's locks and its retry one at a time stay short.
CHUNK_SIZE = 500


class ChunkLost(Exception):
    """A chunk's events were not all still unplanned when claimed; it is rolled back."""


def plan_batch(*, now: datetime, registry, size: int = CHUNK_SIZE) -> int:
    """Claim and plan up to ``size`` of the oldest unplanned events at ``now``; returns how many
    were planned (0: none waiting, every waiting one is held by another planner, or — SQLite —
    another process's planner wrote the chunk first)."""
    events: list[ClaimedEvent] = []
    if connection.vendor == "postgresql":
        # The claim's row locks keep other planners off the chunk until it commits.
        reading, writing = transaction.atomic(), nullcontext()
    else:
        # SQLite: the chunk is read and decided before its transaction takes the write turn
        # the doors' groups queue for; the compare-and-swap and the constraints guard the
        # write as the row locks do on PostgreSQL (docs/design.md §7, "Batches").
        reading, writing = nullcontext(), transaction.atomic()
    try:
        with reading:
            events = claim_chunk(size)
            if not events:
                return 0
            decided = _decide_chunk(events, registry)
            rows = _rows(decided, registry, now)
            with writing:
                _write(rows, registry, now)
    except ChunkLost:
        if connection.vendor == "postgresql":
            # Only a planner that ignored the row locks could have taken them.
            logger.warning("a chunk's events were planned meanwhile; it was rolled back",
                           extra={"action": "planning_chunk_lost"})
        else:
            logger.info("a chunk's events were planned meanwhile by another planner; it was rolled back",
                        extra={"action": "planning_chunk_lost"})
        return 0
    except IntegrityError:
        logger.info("a chunk of %s events met a concurrent change; planning them one at a time", len(events),
                    extra={"action": "planning_chunk_retried"})
        return sum(1 for event in events if plan_event(event.pk, now=now, registry=registry) is not None)
    log_planned_chunk([(event, decision.outcome, decision.reason) for event, decision in decided])
    return len(decided)


def _decide_chunk(events: list[ClaimedEvent], registry) -> list[tuple[ClaimedEvent, Decision]]:
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


@dataclass
class ChunkRows:
    """A decided chunk's rows before they are written (``_rows``): the proposals' and runs'
    fields by event id, the proposals to preview as ``(event id, loop, key, plan)``."""

    decided: list[tuple[ClaimedEvent, Decision]]
    proposals: dict[int, dict]
    runs: dict[int, dict]
    previewed: list[tuple]


def _rows(decided: list[tuple[ClaimedEvent, Decision]], registry, now: datetime) -> ChunkRows:
    """The proposals and runs ``decided`` makes, as dicts of their fields (not model
    instances: ``bulk_rows.insert_rows``), their plans rendered; no statement."""
    proposing = [(event, decision) for event, decision in decided if decision.proposes]
    proposals = {event.pk: {**proposal_fields(event, decision, registry, now), "event_id": event.pk}
                 for event, decision in proposing}
    runs = {event.pk: run_fields(proposals[event.pk], door=event.door, actor=DOOR_ACTOR[Door(event.door)], now=now)
            for event, decision in proposing if decision.outcome == PlanningOutcome.APPROVED}
    previewed = [(pk, fields["loop"], fields["loop_key"], fields["plan"]) for pk, fields in proposals.items()
                 if pk not in runs]
    if backend_vendor() != "postgresql":
        for pk, fields in proposals.items():
            fields["plan"] = plan_json(fields["plan"])
            if pk in runs:
                runs[pk]["plan"] = fields["plan"]
    return ChunkRows(decided, proposals, runs, previewed)


def _write(rows: ChunkRows, registry, now: datetime) -> None:
    """Set the events' outcomes, then insert the chunk's proposals, runs and journal entries
    (one multi-row insert each, the journal in the order planning one at a time writes it)
    and queue its previews. Call inside the chunk's transaction. The outcomes' compare-and-swap
    comes first: a chunk another planner wrote meanwhile is ``ChunkLost`` at once, not a
    proposal refused by that planner's rows and then every event planned again alone."""
    decided, runs = rows.decided, rows.runs
    _record_outcomes(decided, now)
    proposal_ids = insert_rows(Proposal, list(rows.proposals.values()), key="event_id")
    for pk, run in runs.items():
        run["proposal_id"] = proposal_ids[pk]
    run_ids = insert_rows(Run, list(runs.values()), key="proposal_id")
    queue_previews([(proposal_ids[pk], loop, key, plan) for pk, loop, key, plan in rows.previewed],
                   registry=registry, now=now)
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


def _record_outcomes(decided: list[tuple[ClaimedEvent, Decision]], now: datetime) -> None:
    """Mark the chunk's events planned at ``now`` with their outcomes in one ``UPDATE``, a
    compare-and-swap on ``planned_at`` that raises ``ChunkLost`` — rolling the chunk back —
    unless it marked every one (docs/design.md §7). PostgreSQL: the events by their ids as one
    array, each one's outcome and reason looked up by id in one JSON object
    (``{"id": [outcome, reason]}``); SQLite 3.33+: ``UPDATE … FROM (VALUES …)``."""
    quote = connection.ops.quote_name
    table = quote(Event._meta.db_table)
    rows = [(event.pk, decision.outcome, decision.reason) for event, decision in decided]
    if connection.vendor == "postgresql":
        # Not a join with the rows of a JSON array: just after a burst the statistics say few
        # events are unplanned, so the planner joined the chunk's rows with the events found by
        # id in a nested loop that compared every pair (EXPLAIN ANALYZE: 124,750 comparisons
        # and 47 of a chunk's 60 ms at 60,000 events). A JSON object's key is found by a
        # binary search, whatever the plan.
        by_id = f"o.m -> {table}.{quote('id')}::text"
        sql = (
            f"UPDATE {table} SET {quote('planned_at')} = %s, {quote('planning_outcome')} = {by_id} ->> 0, "
            f"{quote('planning_reason')} = {by_id} ->> 1 FROM (SELECT %s::jsonb AS m) AS o "
            f"WHERE {table}.{quote('id')} = ANY(%s) AND {table}.{quote('planned_at')} IS NULL"
        )
        params = [json.dumps({str(pk): [outcome, reason] for pk, outcome, reason in rows}), [pk for pk, _, _ in rows]]
    else:
        sql = (
            f"UPDATE {table} SET {quote('planned_at')} = %s, {quote('planning_outcome')} = v.column2, "
            f"{quote('planning_reason')} = v.column3 FROM (VALUES {', '.join(['(%s, %s, %s)'] * len(rows))}) AS v "
            f"WHERE {table}.{quote('id')} = v.column1 AND {table}.{quote('planned_at')} IS NULL"
        )
        params = [value for row in rows for value in row]
    with prepared_cursor() as cursor:
        cursor.execute(sql, [stored_instant(now), *params])
        if cursor.rowcount != len(rows):
            raise ChunkLost
