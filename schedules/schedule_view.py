"""The schedule view: every effective loop and what it last did (DESIGN §10, §11; spec §9).

One computation serves ``GET /schedules``, ``manage.py schedule`` and the doctor, so the
three never disagree. Reading all loops costs four queries whatever their number
(schedule states, last ticks, their runs, pending-proposal counts); the per-loop work
is pure arithmetic on ``now``, which the caller passes in.

Instants are written ``YYYY-MM-DDTHH:MM:SSZ`` (``runtime.timefmt.format_instant``).
"""

from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, QuerySet

from runtime.models import TERMINAL_RUN_STATUSES, Event, Proposal, ProposalStatus, Run
from runtime.registry import Loop, Registry
from runtime.timefmt import format_instant

from .models import ScheduleState
from .slots import due_slots, slot_floor
from .ticks import is_fresh

#: An enabled loop with no admitted tick for more than this many intervals has stopped
#: (spec §9: "no admitted tick for more than two intervals while enabled").
STOPPED_AFTER_INTERVALS = 2
#: How many recent ticks ``schedule show`` lists.
SHOWN_TICKS = 10


@lru_cache(maxsize=4096)
def _instant(value: datetime | None) -> str | None:
    # Cached: loops that ticked in one iteration share their slot and tick instants, and
    # formatting is a large part of serialising ten thousand loops.
    return format_instant(value) if value is not None else None


#: ``slot_floor`` memoised: over thousands of loops, the instants (``now``, the last fired
#: slots) and the cadences repeat.
_slot_floor = lru_cache(maxsize=4096)(slot_floor)

#: The ``ScheduleState`` fields the view reads; rows are fetched as named tuples of them,
#: which costs a fraction of model instances over thousands of loops.
STATE_FIELDS = ("loop", "last_slot", "last_event_id", "last_tick_at", "enabled", "enabled_since")


class LoopState(Protocol):
    """What the pure functions read of a loop's state: a ``ScheduleState`` or a row of ``STATE_FIELDS``."""

    last_slot: datetime | None
    last_event_id: str
    last_tick_at: datetime | None
    enabled: bool
    enabled_since: datetime | None


@dataclass(frozen=True)
class LastOutcome:
    """What became of a tick: its planning outcome, or its run's outcome once the run finished.

    ``stage`` is ``"planning"`` or ``"run"``; ``value`` is the planning outcome
    (``PROPOSED``, ``APPROVED``, ``NOOP``, ``REFUSED``; None while not planned yet) or the
    run's outcome (``SUCCEEDED``, ``FAILED``, …; its status in capitals when the run
    ended without one, e.g. ``ABANDONED``).
    """

    stage: str
    value: str | None
    reason: str

    def as_json(self) -> dict:
        return {"stage": self.stage, "value": self.value, "reason": self.reason}


def last_outcome(planning_outcome: str | None, planning_reason: str, run: dict | None) -> LastOutcome:
    """The outcome of one tick from its event's planning fields and its run (``status``,
    ``outcome``, ``reason``), if any. Pure."""
    if run is not None and run["status"] in TERMINAL_RUN_STATUSES:
        return LastOutcome("run", run["outcome"] or run["status"].upper(), run["reason"])
    return LastOutcome("planning", planning_outcome, planning_reason or "")


def next_slot_due(loop: Loop, state: LoopState | None, now: datetime) -> datetime | None:
    """The slot the loop fires next: the first slot the slot loop would fire at ``now``
    (already due: the next iteration fires it), else the slot after the last fired one.
    None for a disabled loop. Pure; the same arithmetic as the slot loop (DESIGN §5)."""
    if not loop.enabled:
        return None
    step = timedelta(seconds=loop.cadence_seconds)
    if not is_fresh(state):
        last = _slot_floor(state.last_slot, loop.cadence_seconds)
        if last >= _slot_floor(now, loop.cadence_seconds):
            return last + step  # the usual case: nothing is due before the next slot
    due = due_slots(
        cadence_seconds=loop.cadence_seconds,
        catch_up=loop.catch_up,
        last_fired=state.last_slot if state else None,
        fresh=is_fresh(state),
        now=now,
        catchup_limit=settings.FACTORY_CATCHUP_LIMIT,
    )
    return due[0].slot


def expected_by(loop: Loop, state: LoopState | None) -> datetime | None:
    """When an enabled loop must have admitted its next tick before it counts as stopped.

    Two intervals after its last tick, or, for a loop that never ticked, after the slot
    loop first saw it enabled (``enabledSince``) — DESIGN §11. None when the loop is
    disabled, or when the slot loop has not seen it (re-)enabled yet: then the slot loop
    is not turning, which is its own anomaly. Pure.
    """
    if not loop.enabled or state is None or not state.enabled:
        return None
    since = state.last_tick_at or state.enabled_since
    if since is None:
        return None
    return since + STOPPED_AFTER_INTERVALS * timedelta(seconds=loop.cadence_seconds)


@dataclass(frozen=True)
class LoopView:
    """One loop as ``GET /schedules`` and ``schedule list`` show it."""

    loop: Loop
    last_slot_fired: datetime | None
    last_tick_at: datetime | None
    next_slot_due: datetime | None
    last_outcome: LastOutcome | None
    pending_proposals: int
    expected_by: datetime | None
    stopped: bool

    def as_json(self) -> dict:
        """The item of ``schedule list --json`` (issue 4): camelCase, instants as text."""
        loop = self.loop
        return {
            "name": loop.name,
            "every": loop.every,
            "cadenceSeconds": loop.cadence_seconds,
            "eventType": loop.event_type,
            "catchUp": loop.catch_up,
            "singleton": loop.singleton,
            "approval": loop.approval,
            "enabled": loop.enabled,
            "source": loop.source,
            "overrides": list(loop.overrides),
            "lastSlotFired": _instant(self.last_slot_fired),
            "lastTickAt": _instant(self.last_tick_at),
            "nextSlotDue": _instant(self.next_slot_due),
            "lastOutcome": self.last_outcome.as_json() if self.last_outcome else None,
            "pendingProposals": self.pending_proposals,
            "stopped": self.stopped,
        }


def loop_view(
    loop: Loop,
    state: LoopState | None,
    last_tick: dict | None,
    last_run: dict | None,
    pending: int,
    now: datetime,
) -> LoopView:
    """Assemble one loop's view from rows already read. Pure.

    ``last_tick`` holds the last tick's ``planning_outcome`` and ``planning_reason``;
    ``last_run`` its run's ``status``, ``outcome`` and ``reason``.
    """
    deadline = expected_by(loop, state)
    outcome = None
    if last_tick is not None:
        outcome = last_outcome(last_tick["planning_outcome"], last_tick["planning_reason"], last_run)
    return LoopView(
        loop=loop,
        last_slot_fired=state.last_slot if state else None,
        last_tick_at=state.last_tick_at if state else None,
        next_slot_due=next_slot_due(loop, state, now),
        last_outcome=outcome,
        pending_proposals=pending,
        expected_by=deadline,
        stopped=deadline is not None and now > deadline,
    )


def schedule_view(registry: Registry, *, now: datetime, names: list[str] | None = None) -> list[LoopView]:
    """Every effective loop of ``registry`` (or only ``names``), by name, as seen at ``now``.

    Four queries whatever the number of loops: the loops' ``ScheduleState`` rows (as
    named tuples of ``STATE_FIELDS``, which the pure functions read like the model); their
    last ticks, found by the eventId each state records (the state is written in the
    tick's admission transaction, DESIGN §5); those ticks' runs; the pending proposals
    counted per loop.
    """
    loops = [registry.loops[name] for name in sorted(names if names is not None else registry.loops)]
    states_qs: QuerySet = ScheduleState.objects.all()
    pending_qs: QuerySet = Proposal.objects.filter(status=ProposalStatus.PENDING, loop__isnull=False)
    if names is not None:
        states_qs = states_qs.filter(loop__in=names)
        pending_qs = pending_qs.filter(loop__in=names)
    states = {state.loop: state for state in states_qs.values_list(*STATE_FIELDS, named=True)}
    ticks_qs = Event.objects.filter(event_id__in=states_qs.exclude(last_event_id="").values("last_event_id"))
    ticks = {
        row["event_id"]: row
        for row in ticks_qs.values("id", "event_id", "planning_outcome", "planning_reason")
    }
    runs = {
        row["event_id"]: row
        for row in Run.objects.filter(event_id__in=ticks_qs.values("id")).values("event_id", "status", "outcome", "reason")
    }
    pending = dict(pending_qs.order_by().values_list("loop").annotate(count=Count("id")))
    views = []
    for loop in loops:
        state = states.get(loop.name)
        tick = ticks.get(state.last_event_id) if state else None
        run = runs.get(tick["id"]) if tick else None
        views.append(loop_view(loop, state, tick, run, pending.get(loop.name, 0), now))
    return views


def recent_ticks(loop_name: str, *, limit: int = SHOWN_TICKS) -> list[dict]:
    """The loop's last ``limit`` ticks, newest first, with their proposal, run and outcome.

    Two queries: the ticks (index ``event_tick_idx``), then their proposals with runs.
    """
    events = list(
        Event.objects.filter(loop=loop_name).order_by("-id").values(
            "id", "event_id", "slot", "admitted_at", "payload", "planning_outcome", "planning_reason"
        )[:limit]
    )
    proposals = {
        proposal.event_id: proposal
        for proposal in Proposal.objects.filter(event_id__in=[e["id"] for e in events]).select_related("run")
    }
    result = []
    for event in events:
        proposal = proposals.get(event["id"])
        run = getattr(proposal, "run", None) if proposal else None
        run_row = {"status": run.status, "outcome": run.outcome, "reason": run.reason} if run else None
        result.append({
            "eventId": event["event_id"],
            "slot": _instant(event["slot"]),
            "admittedAt": _instant(event["admitted_at"]),
            "skippedSlots": event["payload"].get("skippedSlots"),
            "outcome": last_outcome(event["planning_outcome"], event["planning_reason"], run_row).as_json(),
            "proposal": {"id": proposal.pk, "status": proposal.status} if proposal else None,
            "run": {"id": run.pk, **run_row} if run else None,
        })
    return result


def next_slots(view: LoopView, *, count: int, now: datetime) -> list[datetime]:
    """The loop's next ``count`` slots: from its next slot due, or, for a disabled loop,
    the slot boundaries after ``now`` it would fire on if enabled. Pure."""
    step = timedelta(seconds=view.loop.cadence_seconds)
    first = view.next_slot_due
    if first is None:
        first = slot_floor(now, view.loop.cadence_seconds) + step
    return [first + i * step for i in range(count)]
