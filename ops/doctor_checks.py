"""The doctor's findings about runs, loops and clocks (docs/design.md §11; docs/schedules.md, "The doctor").

Each ``find_*`` function is a constant number of queries whatever the number of loops and
runs, and returns the list the ``/status`` key of the same name holds (empty: no anomaly);
the judgement itself is in the pure functions beside them.

- ``expiredLeases``: a run ``claimed`` or ``running`` whose lease has expired;
- ``interruptedRuns``: a run ``interrupted`` (its attempt was stopped midway; an operator
  retries or closes it);
- ``starvedQueue``: an interval or time-of-day loop whose oldest queued run has waited
  longer than one period of the loop;
- ``stuckLoops``: an interval or time-of-day loop whose last ``STUCK_TICKS`` ticks were
  all planned ``NOOP previous_run_in_flight``;
- ``futureLastSlot``: a last fired slot after now (``schedules.repair``);
- ``clockSkew``: a process seen recently whose clock is more than
  ``SKEW_WARNING_SECONDS`` from the database's (``ops.process_rows``);
- ``runBacklog``: more than ``FACTORY_BACKLOG_WARN_RUNS`` runs queued, or the oldest
  queued longer than ``FACTORY_BACKLOG_WARN_SECONDS`` ago (``run_backlog``; its figures
  come from the doctor's count of active runs, no query of its own).
"""

from datetime import datetime, timedelta

from django.db.models import Count, F, Min, Window
from django.db.models.functions import RowNumber

from lib.calendar import loop_rule
from lib.instants import format_instant, rounded_seconds
from runtime.models import Event, PlanningOutcome, Run, RunStatus
from runtime.registry import Loop, Registry
from schedules.emitter import LEASE_NAME
from schedules.models import ScheduleState, TickEmitterLease

from .models import ProcessRecord
from .process_rows import RECENT_SECONDS, is_skewed

#: A loop whose last this-many ticks all found the previous run still in flight is stuck.
STUCK_TICKS = 3
#: The run status of an attempt stopped midway (docs/design.md §8), held until an operator decides.
INTERRUPTED = "interrupted"
IN_FLIGHT = "previous_run_in_flight"


def find_expired_leases(*, now: datetime) -> list[dict]:
    """``[{id, definition, worker, leaseExpiredAt}]``, the longest expired first. One query (``run_leased_idx``)."""
    rows = Run.objects.filter(
        status__in=(RunStatus.CLAIMED, RunStatus.RUNNING), lease_expires_at__lt=now
    ).order_by("lease_expires_at", "id").values_list("id", "definition", "worker", "lease_expires_at")
    return [
        {"id": pk, "definition": definition, "worker": worker, "leaseExpiredAt": format_instant(expired)}
        for pk, definition, worker, expired in rows
    ]


def find_interrupted_runs() -> list[dict]:
    """``[{id, definition, loop, worker, attempt, reason}]``, oldest first. One query."""
    rows = Run.objects.filter(status=INTERRUPTED).order_by("id").values_list(
        "id", "definition", "loop", "worker", "attempt", "reason"
    )
    return [
        {"id": pk, "definition": definition, "loop": loop, "worker": worker, "attempt": attempt, "reason": reason}
        for pk, definition, loop, worker, attempt, reason in rows
    ]


def loop_period(loop: Loop, around: datetime) -> timedelta | None:
    """One period of ``loop`` at ``around``: its cadence, or, for a time-of-day loop, the span
    from its slot at or before ``around`` to the next (a day, or the days to the next allowed
    weekday). None for a keyed loop: its periods are per key. Pure."""
    if loop.keyed is not None:
        return None
    if loop.cadence_seconds is not None:
        return timedelta(seconds=loop.cadence_seconds)
    rule = loop_rule(loop)
    floor = rule.floor(around)
    return rule.after(floor) - floor


def starved(loop: Loop, oldest_queued_at: datetime, now: datetime) -> bool:
    """Whether a queued run of ``loop`` queued at ``oldest_queued_at`` has waited longer than one
    period of the loop at ``now``. Pure."""
    period = loop_period(loop, oldest_queued_at)
    return period is not None and now - oldest_queued_at > period


def find_starved_queue(registry: Registry | None, *, now: datetime) -> list[dict]:
    """``[{loop, queued, oldestQueuedAt, waitedSeconds, periodSeconds}]`` by loop. One query
    (``run_queued_idx``); keyed loops and runs of no loop have no period and are not judged."""
    if registry is None:
        return []
    rows = (
        Run.objects.filter(status=RunStatus.QUEUED, loop__isnull=False, loop_key__isnull=True)
        .order_by().values_list("loop").annotate(queued=Count("id"), oldest=Min("queued_at"))
    )
    found = []
    for name, queued, oldest in sorted(rows):
        loop = registry.loops.get(name)
        if loop is None or not starved(loop, oldest, now):
            continue
        found.append({
            "loop": name, "queued": queued, "oldestQueuedAt": format_instant(oldest),
            "waitedSeconds": rounded_seconds((now - oldest).total_seconds()),
            "periodSeconds": int(loop_period(loop, oldest).total_seconds()),
        })
    return found


def stuck(ticks: list[tuple[str, str]]) -> bool:
    """Whether a loop's latest ticks (``(planning outcome, reason)``, newest first, at most
    ``STUCK_TICKS``) are ``STUCK_TICKS`` ticks all planned ``NOOP previous_run_in_flight``. Pure."""
    return len(ticks) == STUCK_TICKS and all(tick == (PlanningOutcome.NOOP, IN_FLIGHT) for tick in ticks)


def find_stuck_loops() -> list[dict]:
    """``[{loop, eventIds}]`` by loop, the ticks newest first. Two queries: the loops whose last
    tick (the one ``ScheduleState`` names) found its previous run in flight, then their last
    ``STUCK_TICKS`` ticks (``event_tick_idx``). Keyed loops are not judged: their singleton is
    per key, so a loop-wide run of three ticks says nothing about any one key."""
    candidates = list(
        Event.objects.filter(
            uid__in=ScheduleState.objects.exclude(last_event_id="").values("last_event_id"),
            loop_key__isnull=True, planning_outcome=PlanningOutcome.NOOP, planning_reason=IN_FLIGHT,
        ).values_list("loop", flat=True)
    )
    if not candidates:
        return []
    latest = (
        Event.objects.filter(loop__in=candidates, loop_key__isnull=True)
        .annotate(position=Window(RowNumber(), partition_by=[F("loop")], order_by=F("id").desc()))
        .filter(position__lte=STUCK_TICKS)
        .values_list("loop", "uid", "planning_outcome", "planning_reason", "id")
    )
    ticks: dict[str, list] = {}
    for loop, uid, outcome, reason, _ in sorted(latest, key=lambda row: (row[0], -row[4])):
        ticks.setdefault(loop, []).append((uid, (outcome, reason)))
    return [
        {"loop": loop, "eventIds": [uid for uid, _ in rows]}
        for loop, rows in sorted(ticks.items()) if stuck([tick for _, tick in rows])
    ]


def run_backlog(
    *, queued: int, oldest_queued_at: datetime | None, now: datetime, warn_runs: int, warn_seconds: int,
) -> list[dict]:
    """``[{queued, oldestQueuedAt, waitedSeconds, warnRuns, warnSeconds}]`` when the run queue
    is backed up — more than ``warn_runs`` runs queued, or the oldest (queued at
    ``oldest_queued_at``) waiting longer than ``warn_seconds`` at ``now`` — else []. Whatever
    the loop or door: a flood of intake runs that no worker drains is one too. Pure."""
    waited = (now - oldest_queued_at).total_seconds() if oldest_queued_at is not None else 0.0
    if queued <= warn_runs and waited <= warn_seconds:
        return []
    return [{
        "queued": queued, "oldestQueuedAt": format_instant(oldest_queued_at) if oldest_queued_at else None,
        # Never negative: a run queued a moment after the reading waited nothing.
        "waitedSeconds": rounded_seconds(max(0.0, waited)), "warnRuns": warn_runs, "warnSeconds": warn_seconds,
    }]


def find_processes(*, now: datetime) -> list[dict]:
    """The processes seen within ``RECENT_SECONDS`` of ``now``: ``[{role, host, pid, startedAt,
    lastSeenAt, clockOffsetSeconds}]`` by role, host and pid; a slot loop also says whether it
    ``emitsTicks`` (holds the unexpired tick emitter lease at ``now``, docs/design.md §5). Two
    queries (``process_last_seen_idx``; the lease's one row)."""
    rows = ProcessRecord.objects.filter(last_seen_at__gte=now - timedelta(seconds=RECENT_SECONDS)).values_list(
        "role", "host", "pid", "started_at", "last_seen_at", "clock_offset_seconds"
    )
    emitter = tick_emitter(now=now)
    found = []
    for role, host, pid, started, seen, offset in sorted(rows, key=lambda row: row[:3]):
        item = {"role": role, "host": host, "pid": pid, "startedAt": format_instant(started),
                "lastSeenAt": format_instant(seen), "clockOffsetSeconds": rounded_seconds(offset)}
        if role == SLOT_LOOP_ROLE:
            item["emitsTicks"] = emitter == (host, pid)
        found.append(item)
    return found


#: The role of a slot loop's process row (``manage.py slot_loop``).
SLOT_LOOP_ROLE = "slot-loop"


def tick_emitter(*, now: datetime) -> tuple[str, int] | None:
    """``(host, pid)`` of the process holding the unexpired tick emitter lease at ``now`` (its
    holder is ``host:pid:token``), or None when none holds it."""
    holder = TickEmitterLease.objects.filter(name=LEASE_NAME, expires_at__gt=now).values_list("holder", flat=True).first()
    if not holder:
        return None
    host, pid, _token = holder.rsplit(":", 2)
    return (host, int(pid)) if pid.isdigit() else None


def clock_skew(processes: list[dict]) -> list[dict]:
    """The processes (``find_processes``) whose clock offset is over the warning threshold. Pure."""
    return [process for process in processes if is_skewed(process["clockOffsetSeconds"])]

