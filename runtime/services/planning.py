"""The planner's decisions: admitted event → proposal, approved run, NOOP or REFUSED (docs/design.md §7).

``decide`` is the whole rule for one event, given whether a key is held and whether a
singleton loop has a run in flight; both planning paths use it, so they cannot differ:
``runtime.services.planning_batch`` plans the backlog in chunks with multi-row inserts
(``plan_pending``), and ``plan_event`` here plans one event in its own transaction —
the path a chunk falls back to when the database refuses one of its inserts (a race with
another planner or an approval). Two planners cannot plan one event twice: the event
is claimed with a compare-and-swap on ``planned_at``, and proposals and runs are unique
on the idempotency keys they hold (``runtime.services.idempotency``).
"""

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, connection, transaction

from lib.instants import format_instant
from lib.json_schema import validator_for
from runtime.models import (
    ACTIVE_RUN_STATUSES,
    DOOR_ACTOR,
    Actor,
    Door,
    Event,
    PlanningOutcome,
    Proposal,
    ProposalStatus,
    Run,
)
from runtime.prepared import prepared_cursor
from runtime.registry import Definition, Loop, Registry, get_registry

from .bulk_rows import one_of
from .idempotency import KEY_MAX_LENGTH, idempotency_key, key_held
from .journal import entry, entry_values, record_values
from .plans import PlanRenderError, render_plan
from .previews import queue_previews
from .runs import queue_run

logger = logging.getLogger(__name__)

#: Doors whose events may follow their type's ``approval: auto`` (docs/design.md §4); ticks
#: follow their loop's policy instead.
TYPE_AUTO_DOORS = (Door.GITHUB, Door.EVENTS, Door.INJECT, Door.CHAIN)


@dataclass(frozen=True)
class PlanningResult:
    """What the planner decided for one event."""

    event: Event
    outcome: PlanningOutcome
    reason: str = ""
    proposal: Proposal | None = None
    run: Run | None = None


@dataclass(frozen=True)
class Decision:
    """What ``decide`` found for one event.

    A proposal (``outcome`` PROPOSED or APPROVED) comes with its ``key``, ``single``
    (the singleton key, or None), ``plan``, ``definition`` and ``loop`` (None for a
    non-tick); a NOOP or REFUSED with its ``reason`` and the journal entry's ``data``.
    """

    outcome: PlanningOutcome
    reason: str = ""
    data: dict | None = None
    key: str = ""
    single: str | None = None
    plan: dict | None = None
    definition: Definition | None = None
    loop: Loop | None = None

    @property
    def proposes(self) -> bool:
        return self.outcome in (PlanningOutcome.PROPOSED, PlanningOutcome.APPROVED)


def singleton_key(loop: str, key: str | None) -> str:
    """The value runs of one singleton loop (and key) share while active."""
    return f"{loop} {key}" if key else loop


def loop_of_singleton(single: str) -> str:
    """The loop of a singleton key (``singleton_key``): loop names hold no space. Pure."""
    return single.split(" ", 1)[0]


def singleton_in_flight_query(keys: list[str]) -> tuple[str, list[str]]:
    """SQL and parameters for the ``singleton_key`` values among ``keys`` that a run holds now
    (queued, claimed, running or interrupted: docs/design.md §7.3).

    The statuses are written into the SQL as literals, as the partial unique index
    ``run_one_active_per_singleton`` states them: SQLite uses a partial index only when the
    query's WHERE repeats the index's condition, and a bound parameter never does, so
    with parameters every planned tick would scan the whole runs table. The keys are
    ``bulk_rows.one_of``'s (one array parameter on PostgreSQL).
    """
    statuses = ", ".join(f"'{status}'" for status in ACTIVE_RUN_STATUSES)
    among, params = one_of("singleton_key", keys)
    table = connection.ops.quote_name(Run._meta.db_table)
    return f"SELECT DISTINCT singleton_key FROM {table} WHERE {among} AND status IN ({statuses})", params


def singletons_in_flight(keys) -> set[str]:
    """The singleton keys among ``keys`` that an active run holds (one query; none for no keys)."""
    keys = sorted(set(keys))
    if not keys:
        return set()
    sql, params = singleton_in_flight_query(keys)
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0] for row in cursor.fetchall()}


def approval_policy(event: Event, registry: Registry) -> str:
    """``watched`` or ``auto`` for this event (docs/design.md §7.4)."""
    event_type = registry.event_types[event.type]
    if event_type.human_approval_only:
        return "watched"
    if event.is_tick:
        return registry.loops[event.loop].approval
    if event.door in TYPE_AUTO_DOORS and event_type.approval == "auto":
        return "auto"
    return "watched"


def loop_and_keys(event: Event, registry: Registry) -> tuple[str, str | None] | None:
    """``(idempotency key, singleton key or None)`` the event would be planned under, or None
    when its type or loop is unknown (``decide`` refuses those)."""
    event_type = registry.event_types.get(event.type)
    if event_type is None:
        return None
    known, single = singleton_of(event, registry)
    if not known:
        return None
    return idempotency_key(event, registry.definitions[event_type.target]), single


def loop_name_of(event: Event) -> str | None:
    """The loop ``event`` belongs to: a tick's own, the loop a person ran once now (door
    ``operator``, in the payload: ``schedules.triggering``), else None. Pure."""
    if event.is_tick:
        return event.loop
    if event.door == Door.OPERATOR:
        return event.payload.get("loop")
    return None


def loop_key_of(event: Event) -> str | None:
    """The key of a keyed loop's ``event`` (as ``loop_name_of``), else None. Pure."""
    if event.is_tick:
        return event.loop_key
    if event.door == Door.OPERATOR:
        return event.payload.get("key")
    return None


def singleton_of(event: Event, registry: Registry) -> tuple[bool, str | None]:
    """``(known, singleton key or None)``: whether the loop ``event`` belongs to is in
    ``registry`` (an event of no loop: True), and the key its runs share when that loop is
    a singleton. A tick belongs to its loop; so does a person's "run once now" (door
    ``operator``, its loop and key in the payload: ``schedules.triggering``), which holds
    the loop's singleton as a tick would (docs/schedules.md, "Running a loop once now")."""
    name = loop_name_of(event)
    if name is None:
        return True, None
    loop = registry.loops.get(name)
    if loop is None:
        return False, None
    return True, singleton_key(loop.name, loop_key_of(event)) if loop.singleton else None


def _ended(outcome: PlanningOutcome, reason: str, data: dict | None = None) -> Decision:
    return Decision(outcome, reason, data or {})


def is_sample_shaped_tick(event: Event, loop: Loop | None) -> bool:
    """A tick of ``loop`` (a loop of the registry in force, not keyed) whose payload is the
    loop's sample tick but for its slot and skipped count: the registry validated that
    sample against the target's input schema at load, so planning need not validate it
    again — the rule admission applies to ticks (docs/design.md §3, §7). A tick admitted
    under another payload, cadence or name is validated as any event."""
    if loop is None or loop.keyed is not None or event.slot is None:
        return False
    payload = event.payload
    skipped = payload.get("skippedSlots")
    return (
        type(skipped) is int and skipped >= 0 and payload.get("slot") == format_instant(event.slot)
        and payload == {**loop.payload, "loop": loop.name, "slot": payload["slot"],
                        "cadenceSeconds": loop.cadence_seconds, "skippedSlots": skipped}
    )


def decide(event: Event, registry: Registry, *, held: Callable[[str], bool],
           in_flight: Callable[[str], bool]) -> Decision:
    """The planner's rule for ``event`` (docs/design.md §7), in its order: type, loop, input
    schema, key, a held key, a singleton in flight, the plan, the approval policy.

    ``held(key)`` says whether a proposal holds the idempotency key, ``in_flight(single)``
    whether a run holds the singleton loop; nothing is written here.
    """
    event_type = registry.event_types.get(event.type)
    if event_type is None:
        return _ended(PlanningOutcome.REFUSED, "unregistered_type")
    definition = registry.definitions[event_type.target]
    loop = registry.loops.get(loop_name_of(event))
    known, single = singleton_of(event, registry)
    if not known:
        return _ended(PlanningOutcome.REFUSED, "unknown_loop", {"loop": event.loop or event.payload.get("loop")})
    if definition.input_schema is not None and not is_sample_shaped_tick(event, loop):
        errors = [e.message for e in validator_for(definition.input_schema).iter_errors(event.payload)]
        if errors:
            return _ended(PlanningOutcome.REFUSED, "input_schema_violation", {"errors": errors[:10]})
    key = idempotency_key(event, definition)
    if len(key) > KEY_MAX_LENGTH:
        return _ended(PlanningOutcome.REFUSED, "idempotency_key_too_long", {"length": len(key)})
    if held(key):
        return _ended(PlanningOutcome.NOOP, "duplicate_idempotency_key", {"idempotencyKey": key})
    if single and in_flight(single):
        return _ended(PlanningOutcome.NOOP, "previous_run_in_flight", {"loop": loop_of_singleton(single)})
    try:
        plan = render_plan(definition, event, registry)
    except PlanRenderError as exc:
        return _ended(PlanningOutcome.REFUSED, "plan_render_failed", {"detail": str(exc)})
    auto = approval_policy(event, registry) == "auto"
    return Decision(
        PlanningOutcome.APPROVED if auto else PlanningOutcome.PROPOSED,
        key=key, single=single, plan=plan, definition=definition, loop=loop,
    )


def proposal_fields(event: Event, decision: Decision, registry: Registry, now: datetime) -> dict:
    """The fields (by attname, ``event_id`` aside) of the proposal of a proposing
    ``decision``: approved by the event's door when auto. ``new_proposal`` builds the
    instance; batched planning inserts these as rows (``bulk_rows.insert_rows``)."""
    auto = decision.outcome == PlanningOutcome.APPROVED
    loop = decision.loop
    return {
        "idempotency_key": decision.key,
        "loop": loop.name if loop else None,
        "loop_key": loop_key_of(event) if loop else None,
        "catch_up": loop.catch_up if loop else "",
        "singleton_key": decision.single,
        "barrier": decision.definition.barrier,
        "definition": decision.definition.ref,
        "status": ProposalStatus.APPROVED if auto else ProposalStatus.PENDING,
        "plan": decision.plan,
        "registry_digest": registry.digest,
        "created_at": now,
        "actor": DOOR_ACTOR[Door(event.door)] if auto else "",
        "decided_at": now if auto else None,
    }


def new_proposal(event: Event, decision: Decision, registry: Registry, now: datetime) -> Proposal:
    """The unsaved proposal of a proposing ``decision`` (``proposal_fields``)."""
    return Proposal(event=event, **proposal_fields(event, decision, registry, now))


def proposal_entry(event: Event, decision: Decision, *, proposal_id: int, now: datetime) -> tuple:
    """The journal row (``journal.entry_values``, for ``record_values``) of the saved proposal
    ``proposal_id`` of a proposing ``decision``: ``proposal_auto_approved`` by the door, or
    ``proposal_created`` by ``system``."""
    auto = decision.outcome == PlanningOutcome.APPROVED
    return entry_values(
        "proposal_auto_approved" if auto else "proposal_created",
        DOOR_ACTOR[Door(event.door)] if auto else Actor.SYSTEM,
        at=now,
        event_id=event.pk,
        proposal_id=proposal_id,
        data={"definition": decision.definition.ref, "idempotencyKey": decision.key,
              "approval": "auto" if auto else "watched"},
    )


def ended_entry(event: Event, decision: Decision, now: datetime, *, build=entry):
    """The journal entry of a NOOP (``event_noop``) or REFUSED (``event_refused``) decision:
    unsaved (``build=journal.entry``) or its row for ``record_values`` (``journal.entry_row``)."""
    action = {"NOOP": "event_noop", "REFUSED": "event_refused"}[decision.outcome]
    return build(action, Actor.SYSTEM, at=now, event=event, data={"reason": decision.reason, **(decision.data or {})})


def log_planned(event: Event, outcome: str, reason: str) -> None:
    """One line for a planned event: INFO, a warning when it was refused."""
    log = logger.warning if outcome == PlanningOutcome.REFUSED else logger.info
    log(
        "planned %s: %s %s", event.uid, outcome, reason,
        extra={"action": "event_planned", "eventId": event.uid, "outcome": outcome},
    )


#: Events of one planned chunk that get a line each (``log_planned_chunk``); one more line
#: counts the others by outcome. A line per event was 0.2 s of the planner's CPU for
#: 10,000 events at the default level, INFO; the journal records each decision.
PLANNED_LINES = 20


def log_planned_chunk(planned: list[tuple[Event, str, str]]) -> None:
    """Log a chunk's ``(event, outcome, reason)``: a line each for the first
    ``PLANNED_LINES``, then one line counting the rest by outcome (a warning when any
    of them was refused)."""
    for event, outcome, reason in planned[:PLANNED_LINES]:
        log_planned(event, outcome, reason)
    rest = planned[PLANNED_LINES:]
    if not rest:
        return
    outcomes = Counter(str(outcome) for _, outcome, _ in rest)
    (logger.warning if outcomes[str(PlanningOutcome.REFUSED)] else logger.info)(
        "%s more events planned in this chunk: %s; the journal has each", len(rest),
        ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items())),
        extra={"action": "events_planned", "events": len(rest), "outcomes": dict(sorted(outcomes.items()))},
    )


def plan_event(event_id: int, *, now: datetime, registry: Registry | None = None) -> PlanningResult | None:
    """Plan the event ``event_id`` alone, in its own transaction, at ``now``; None when it was
    planned already (another planner claimed it first).

    Returns the decision (also recorded on the event and in the journal).
    """
    registry = registry or get_registry()
    with transaction.atomic():
        if not Event.objects.filter(pk=event_id, planned_at__isnull=True).update(planned_at=now):
            return None
        event = Event.objects.get(pk=event_id)
        result = _plan(event, registry, now)
        Event.objects.filter(pk=event.pk).update(planning_outcome=result.outcome, planning_reason=result.reason)
    log_planned(event, result.outcome, result.reason)
    return result


def plan_pending(*, now: datetime, limit: int = 1000, registry: Registry | None = None) -> int:
    """Plan up to about ``limit`` waiting events, oldest first, in chunks; returns how many were planned.

    See ``runtime.services.planning_batch.plan_batch``.
    """
    # Imported here: the batch planner is built on this module's decisions.
    from .planning_batch import CHUNK_SIZE, plan_batch

    registry = registry or get_registry()
    count = 0
    while count < limit:
        planned = plan_batch(now=now, registry=registry, size=min(CHUNK_SIZE, limit - count))
        if not planned:
            break
        count += planned
    return count


def _in_flight(single: str) -> bool:
    return bool(singletons_in_flight([single]))


def _plan(event: Event, registry: Registry, now: datetime) -> PlanningResult:
    decision = decide(event, registry, held=key_held, in_flight=_in_flight)
    if not decision.proposes:
        ended_entry(event, decision, now).save(force_insert=True)
        return PlanningResult(event, decision.outcome, decision.reason)
    auto = decision.outcome == PlanningOutcome.APPROVED
    try:
        with transaction.atomic():
            proposal = new_proposal(event, decision, registry, now)
            proposal.save(force_insert=True)
            record_values([proposal_entry(event, decision, proposal_id=proposal.pk, now=now)])
            run = queue_run(proposal, actor=DOOR_ACTOR[Door(event.door)], approved_by=None, now=now) if auto else None
            if not auto:
                queue_previews([(proposal.pk, proposal.loop, proposal.loop_key, proposal.plan)], registry=registry, now=now)
    except IntegrityError:
        # A run of this singleton loop, or a proposal of this key, was queued between the checks above and here.
        if decision.single and _in_flight(decision.single):
            raced = _ended(PlanningOutcome.NOOP, "previous_run_in_flight", {"loop": loop_of_singleton(decision.single)})
        else:
            raced = _ended(PlanningOutcome.NOOP, "duplicate_idempotency_key", {"idempotencyKey": decision.key})
        ended_entry(event, raced, now).save(force_insert=True)
        return PlanningResult(event, raced.outcome, raced.reason)
    return PlanningResult(event, decision.outcome, "", proposal, run)
