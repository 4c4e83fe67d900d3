"""The planner: admitted events → proposals or approved runs (docs/design.md §7).

``plan_next_event`` handles one event, the oldest unplanned one, in one transaction;
the slot loop calls it until it returns None. Two planners cannot plan one event
twice: the event is claimed with a compare-and-swap on ``planned_at``, and proposals
and runs are unique on the idempotency keys they hold (``runtime.services.idempotency``).
"""

import logging
import sys
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction

from lib.json_schema import Validator
from lib.refusals import Refused
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
from runtime.registry import Definition, Registry, get_registry
from runtime.registry.model import PLACEHOLDER, fill_argv

from .idempotency import KEY_MAX_LENGTH, idempotency_key, key_held
from .journal import record
from .runs import queue_run

logger = logging.getLogger(__name__)

#: Doors whose events may follow their type's ``approval: auto`` (docs/design.md §4); ticks
#: follow their loop's policy instead.
TYPE_AUTO_DOORS = (Door.GITHUB, Door.EVENTS, Door.INJECT, Door.CHAIN)
#: Filled only when the run exists (by the worker); they stay as written in a proposal's plan.
RUN_TIME_PLACEHOLDERS = ("runId", "runDir")


@dataclass(frozen=True)
class PlanningResult:
    """What the planner decided for one event."""

    event: Event
    outcome: PlanningOutcome
    reason: str = ""
    proposal: Proposal | None = None
    run: Run | None = None


class PlanRenderError(Refused):
    """A command template could not be filled from the event: code ``plan_render_failed``."""

    code_in_message = False

    def __init__(self, detail: str):
        super().__init__("plan_render_failed", detail)


def singleton_key(loop: str, key: str | None) -> str:
    """The value runs of one singleton loop (and key) share while active."""
    return f"{loop} {key}" if key else loop


def plan_time_values() -> dict[str, str]:
    """What ``{factoryRoot}``, ``{python}`` and ``{manage}`` stand for in this runtime."""
    return {
        "factoryRoot": str(settings.FACTORY_ROOT),
        "python": sys.executable,
        "manage": str(settings.BASE_DIR / "manage.py"),
    }


def argv_values(definition: Definition, payload: dict) -> dict[str, str]:
    """What each plan-time placeholder of the command template stands for (docs/design.md §8).

    ``{factoryRoot}``, ``{python}``, ``{manage}`` and, for non-mutating definitions only,
    ``{payload.<field>}``; ``{runId}``/``{runDir}`` are left for the worker, which fills
    them and these in one pass over the template. Raises PlanRenderError when a payload
    field is missing or not a scalar.
    """
    runtime = plan_time_values()
    values = {}
    for arg in definition.command:
        for name in PLACEHOLDER.findall(arg):
            if name in RUN_TIME_PLACEHOLDERS:
                continue
            if name in runtime:
                values[name] = runtime[name]
                continue
            field = name.removeprefix("payload.")
            value = payload.get(field)
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise PlanRenderError(f"payload field {field!r} is missing or not a string or number")
            values[name] = str(value)
    return values


def plan_adapter(definition: Definition) -> str:
    """The adapter a plan names: the definition's, except that ``FACTORY_FAKE_AGENTS`` (the
    demo, tests) plays every ``agent`` definition with the ``fake`` adapter, in plain sight
    on the proposal (docs/design.md §8)."""
    if settings.FACTORY_FAKE_AGENTS and definition.adapter == "agent":
        return "fake"
    return definition.adapter


def render_plan(definition: Definition, event: Event, registry: Registry) -> dict:
    """The plan a proposal carries and a run executes: what will run, with what, under which registry.

    ``argv`` is what the command will run, ``{runId}``/``{runDir}`` as written; the worker
    runs ``argvTemplate`` filled in one pass with ``argvValues`` and those two, so a payload
    value is never expanded and what runs is ``argv`` with the run's id and directory.
    """
    values = argv_values(definition, event.payload) if definition.command is not None else None
    return {
        "definition": definition.ref,
        "adapter": plan_adapter(definition),
        "argv": fill_argv(definition.command, values) if values is not None else None,
        "argvTemplate": list(definition.command) if values is not None else None,
        "argvValues": values,
        "builtin": definition.builtin,
        "captureStdout": definition.capture_stdout,
        "input": event.payload,
        "mutating": definition.mutating,
        "timeoutSeconds": definition.timeout_seconds,
        "maxAttempts": definition.max_attempts,
        "eventId": event.uid,
        "registryDigest": registry.digest,
    }


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


def plan_next_event(*, now: datetime, registry: Registry | None = None) -> PlanningResult | None:
    """Plan the oldest unplanned event at ``now``; None when there is none waiting.

    Returns the decision (also recorded on the event and in the journal). When another
    planner claimed the candidate first, plans the next one.
    """
    registry = registry or get_registry()
    while True:
        candidate = (
            Event.objects.filter(planned_at__isnull=True).order_by("id").values_list("id", flat=True).first()
        )
        if candidate is None:
            return None
        with transaction.atomic():
            if not Event.objects.filter(pk=candidate, planned_at__isnull=True).update(planned_at=now):
                continue
            event = Event.objects.get(pk=candidate)
            result = _plan(event, registry, now)
            Event.objects.filter(pk=event.pk).update(planning_outcome=result.outcome, planning_reason=result.reason)
        log = logger.warning if result.outcome == PlanningOutcome.REFUSED else logger.info
        log(
            "planned %s: %s %s",
            event.uid, result.outcome, result.reason,
            extra={"action": "event_planned", "eventId": event.uid, "outcome": result.outcome},
        )
        return result


def plan_pending(*, now: datetime, limit: int = 1000, registry: Registry | None = None) -> int:
    """Plan up to ``limit`` waiting events; returns how many were planned."""
    count = 0
    while count < limit and plan_next_event(now=now, registry=registry) is not None:
        count += 1
    return count


def _finish(event: Event, outcome: PlanningOutcome, reason: str, now: datetime, data: dict | None = None):
    action = {"NOOP": "event_noop", "REFUSED": "event_refused"}[outcome]
    record(action, Actor.SYSTEM, at=now, event=event, data={"reason": reason, **(data or {})})
    return PlanningResult(event, outcome, reason)


def _plan(event: Event, registry: Registry, now: datetime) -> PlanningResult:
    event_type = registry.event_types.get(event.type)
    if event_type is None:
        return _finish(event, PlanningOutcome.REFUSED, "unregistered_type", now)
    definition = registry.definitions[event_type.target]
    loop = registry.loops.get(event.loop) if event.is_tick else None
    if event.is_tick and loop is None:
        return _finish(event, PlanningOutcome.REFUSED, "unknown_loop", now, {"loop": event.loop})
    if definition.input_schema is not None:
        errors = [e.message for e in Validator(definition.input_schema).iter_errors(event.payload)]
        if errors:
            return _finish(event, PlanningOutcome.REFUSED, "input_schema_violation", now, {"errors": errors[:10]})
    key = idempotency_key(event, definition)
    if len(key) > KEY_MAX_LENGTH:
        return _finish(event, PlanningOutcome.REFUSED, "idempotency_key_too_long", now, {"length": len(key)})
    if key_held(key):
        return _finish(event, PlanningOutcome.NOOP, "duplicate_idempotency_key", now, {"idempotencyKey": key})
    single = singleton_key(loop.name, event.loop_key) if loop is not None and loop.singleton else None
    if single and Run.objects.filter(singleton_key=single, status__in=ACTIVE_RUN_STATUSES).exists():
        return _finish(event, PlanningOutcome.NOOP, "previous_run_in_flight", now, {"loop": loop.name})
    try:
        plan = render_plan(definition, event, registry)
    except PlanRenderError as exc:
        return _finish(event, PlanningOutcome.REFUSED, "plan_render_failed", now, {"detail": str(exc)})

    auto = approval_policy(event, registry) == "auto"
    door_actor = DOOR_ACTOR[Door(event.door)]
    try:
        with transaction.atomic():
            proposal = Proposal.objects.create(
                event=event,
                idempotency_key=key,
                loop=loop.name if loop else None,
                loop_key=event.loop_key if loop else None,
                catch_up=loop.catch_up if loop else "",
                singleton_key=single,
                barrier=definition.barrier,
                definition=definition.ref,
                status=ProposalStatus.APPROVED if auto else ProposalStatus.PENDING,
                plan=plan,
                registry_digest=registry.digest,
                created_at=now,
                actor=door_actor if auto else "",
                decided_at=now if auto else None,
            )
            record(
                "proposal_auto_approved" if auto else "proposal_created",
                door_actor if auto else Actor.SYSTEM,
                at=now,
                event=event,
                proposal=proposal,
                data={"definition": definition.ref, "idempotencyKey": key, "approval": "auto" if auto else "watched"},
            )
            run = queue_run(proposal, actor=door_actor, approved_by=None, now=now) if auto else None
    except IntegrityError:
        # A run of this singleton loop was queued between the check above and here.
        if single and Run.objects.filter(singleton_key=single, status__in=ACTIVE_RUN_STATUSES).exists():
            return _finish(event, PlanningOutcome.NOOP, "previous_run_in_flight", now, {"loop": loop.name})
        return _finish(event, PlanningOutcome.NOOP, "duplicate_idempotency_key", now, {"idempotencyKey": key})
    outcome = PlanningOutcome.APPROVED if auto else PlanningOutcome.PROPOSED
    return PlanningResult(event, outcome, "", proposal, run)
