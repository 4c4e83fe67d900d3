"""A watched loop's history written as rows, for the earning report's tests: ticks, proposals and
runs with the status and actor each criterion reads (ops.earning_evidence), and the loop's
enable/disable history. Time is ``NOW``; the default window is the 7 days before it."""

from datetime import timedelta
from itertools import count

from runtime.models import Door, Event, PlanningOutcome, Proposal, ProposalStatus, Run
from schedules.models import LoopChange, ScheduleState

from .conftest import at

NOW = at("2026-12-10T12:00:00Z")
SINCE = NOW - timedelta(days=7)
#: A kernel loop with a read-only definition (heartbeat@1), watched: 10 runs earn it.
SCAN = {"every": "60m", "eventType": "clock.tick.heartbeat", "catchUp": "none", "singleton": True,
        "approval": "watched", "enabled": True}
_serial = count(1)


def kernel_loops(registry_files):
    """``scan`` (read-only) and ``reaper`` (mutating) watched and enabled in the kernel; returns ``registry_files``."""
    def change(data):
        data["scan"] = dict(SCAN)
        data["reaper"]["enabled"] = True
    registry_files.update("schedules.json", change)
    return registry_files


def watched(loop: str, since=SINCE) -> None:
    """The loop's first tick at ``since`` (a NOOP), enabled from then on."""
    ScheduleState.objects.get_or_create(loop=loop, defaults={"enabled": True, "enabled_since": since})
    LoopChange.objects.create(loop=loop, at=since, kind="enabled")
    _tick(loop, since, outcome=PlanningOutcome.NOOP)


def _tick(loop: str, slot, outcome=PlanningOutcome.PROPOSED) -> Event:
    uid = f"clock:{loop}:{slot.isoformat()}:{next(_serial)}"
    return Event.objects.create(
        uid=uid, type="clock.tick.heartbeat", source="schedule", subject=loop, occurred_at=slot, correlation_id=uid,
        payload={}, door=Door.SCHEDULE, admitted_at=slot, loop=loop, slot=slot, planned_at=slot, planning_outcome=outcome,
    )


def runs(loop: str, n: int, user, *, status="succeeded", actor="operator", start=SINCE + timedelta(hours=1)) -> None:
    """``n`` ticks an hour apart from ``start``, each proposed, approved by ``user`` (actor
    ``operator``) or by the ``actor`` door, and its run ended ``status``."""
    for i in range(n):
        slot = start + timedelta(hours=i)
        event = _tick(loop, slot)
        person = user if actor == "operator" else None
        proposal = Proposal.objects.create(
            event=event, idempotency_key=event.uid, definition="heartbeat@1", status=ProposalStatus.APPROVED, plan={},
            registry_digest="d", created_at=slot, actor=actor, decided_by=person, decided_at=slot, loop=loop,
        )
        Run.objects.create(
            proposal=proposal, event=event, idempotency_key=event.uid, definition="heartbeat@1", loop=loop,
            lane=f"loop:{loop}", status=status, max_attempts=1, timeout_seconds=60, plan={}, registry_digest="d",
            actor=actor, approved_by=person, queued_at=slot,
        )


def rejected(loop: str, user, slot=SINCE + timedelta(days=2)) -> None:
    event = _tick(loop, slot)
    Proposal.objects.create(
        event=event, idempotency_key=event.uid, definition="heartbeat@1", status=ProposalStatus.REJECTED, plan={},
        registry_digest="d", created_at=slot, actor="operator", decided_by=user, decided_at=slot, loop=loop,
        key_released_at=slot,
    )


