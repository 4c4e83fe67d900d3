"""Has a watched loop *earned* ``auto``? The criteria, judged on evidence (spec §6; docs/schedules.md,
"Earning auto: `schedule report LOOP`").

Spec §6's path is "watched for a week → read the run history → flip to auto in a reviewable
commit", and "a mutating loop may simply never earn it". Over a window ``[since, now]`` a loop
has earned ``auto`` when every criterion is met:

- ``allowedByRegistry``: the registry's rules permit ``auto`` for it (``ops.earning.auto_verdict``);
- ``windowSeconds``: the window is at least ``FACTORY_EARN_WINDOW_DAYS`` days (floor 7);
- ``firstSlot``: the loop's first tick's slot is at or before the window's start;
- ``unwatchedSeconds``: 0 — enabled (and, once pausing exists, not paused) at every moment of
  the window, by its enable/disable history (``schedules.history``);
- ``succeededRuns``: at least ``FACTORY_EARN_MIN_RUNS`` (floor 10; twice that for a mutating
  definition) runs queued in the window, approved by a person, succeeded;
- ``failedRuns``: 0 runs queued in the window failed, abandoned or interrupted;
- ``rejectedProposals``: 0 proposals created in the window rejected;
- ``runsNotApprovedByPerson``: 0 runs queued in the window approved by anyone but an operator
  (the schedule of an auto loop, a door): a run nobody looked at is nobody's decision.

Each criterion is reported as ``{criterion, required, observed, met, detail}`` (``Criterion``).
The facts are read for many loops at once with a constant number of grouped queries
(``gather``), so the report of one loop and the dashboard's page of fifty cost the same.
"""

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, OuterRef, Subquery

from lib.instants import format_instant
from runtime.models import TRIGGERED_LANE, Actor, Door, Event, Proposal, ProposalStatus, Run, RunStatus
from runtime.registry import Registry
from schedules.history import Gap, unwatched
from schedules.models import ScheduleState

#: The verdicts (``verdict`` of the report), and the exit status of ``schedule report`` for each.
EARNED, NOT_EARNED, NOT_ALLOWED, ALREADY_AUTO = "earned", "not-earned", "not-allowed", "already-auto"
EXIT_STATUS = {EARNED: 0, NOT_EARNED: 3, NOT_ALLOWED: 4, ALREADY_AUTO: 5}
#: Each verdict in words, as the report's text and the loop's page say it.
VERDICT_WORDS = {
    "earned": "auto earned: every criterion is met; flip it with the diff below, in a reviewed commit",
    "not-earned": "auto not earned: the criteria marked 'no' are not met",
    "not-allowed": "auto not allowed by the registry's rules, whatever the history",
    "already-auto": "already auto: its runs are approved by the schedule, so there is nothing to earn or flip",
}
#: The floors of the settings (``runtime.checks.KNOB_MINIMUMS`` refuses less at start).
WINDOW_DAYS_FLOOR = 7
MIN_RUNS_FLOOR = 10
#: The run statuses that are a failure for the ``failedRuns`` criterion.
FAILED_STATUSES = (RunStatus.FAILED, RunStatus.ABANDONED, RunStatus.INTERRUPTED)
#: How many gaps a criterion's detail names before "and N more".
GAPS_NAMED = 3


@dataclass
class LoopFacts:
    """What the criteria read of one loop over a window: its first tick's slot (None: never
    ticked), its unwatched gaps, its runs queued in the window by ``(status, actor)``, and its
    proposals created in the window that were rejected."""

    first_slot: datetime | None = None
    gaps: list[Gap] = field(default_factory=list)
    runs: Counter = field(default_factory=Counter)
    rejected: int = 0


@dataclass(frozen=True)
class Criterion:
    """One line of the evidence. ``required`` and ``observed`` are JSON scalars of the same kind
    (a count, seconds, an RFC 3339 instant, a boolean; ``observed`` may be null: nothing seen)."""

    criterion: str
    required: object
    observed: object
    met: bool
    detail: str

    def as_json(self) -> dict:
        return {"criterion": self.criterion, "required": self.required, "observed": self.observed,
                "met": self.met, "detail": self.detail}


def gather(names: list[str], *, since: datetime, now: datetime) -> dict[str, LoopFacts]:
    """The facts of each loop in ``names`` over ``[since, now]``: four queries whatever the
    number of loops and the length of their history (none for no loop). A loop's first tick is
    its oldest admitted one (an index probe per loop: ``event_tick_idx``)."""
    facts = {name: LoopFacts() for name in names}
    if not names:
        return facts
    for name, gaps in unwatched(names, since=since, now=now).items():
        facts[name].gaps = gaps
    first = Event.objects.filter(loop=OuterRef("loop")).order_by("id").values("slot")[:1]
    for name, slot in ScheduleState.objects.filter(loop__in=names).annotate(first=Subquery(first)).values_list("loop", "first"):
        facts[name].first_slot = slot
    runs = (
        Run.objects.filter(loop__in=names, queued_at__gte=since, queued_at__lte=now).exclude(lane=TRIGGERED_LANE).order_by()
        .values_list("loop", "status", "actor").annotate(n=Count("id"))
    )
    for name, status, actor, n in runs:
        facts[name].runs[status, actor] += n
    rejected = (
        Proposal.objects.filter(loop__in=names, created_at__gte=since, created_at__lte=now, status=ProposalStatus.REJECTED)
        .exclude(event__door=Door.OPERATOR).order_by().values_list("loop").annotate(n=Count("id"))
    )
    for name, n in rejected:
        facts[name].rejected = n
    return facts


def _instant(value: datetime | None) -> str | None:
    return format_instant(value) if value is not None else None


def _gaps_text(gaps: list[Gap]) -> str:
    named = [f"{g.why} from {format_instant(g.start)} to {format_instant(g.end)} ({math.ceil(g.seconds)} s)" for g in gaps[:GAPS_NAMED]]
    more = f"; and {len(gaps) - GAPS_NAMED} more" if len(gaps) > GAPS_NAMED else ""
    return "; ".join(named) + more


def criteria(registry: Registry, name: str, facts: LoopFacts, *, allowed: tuple[bool, str], since: datetime, now: datetime) -> list[Criterion]:
    """Every criterion for loop ``name`` with ``facts`` over ``[since, now]``; ``allowed`` is
    ``ops.earning.auto_verdict``'s answer. Pure but for the two settings it reads."""
    loop = registry.loops[name]
    event_type = registry.event_types.get(loop.event_type)
    definition = registry.definitions.get(event_type.target) if event_type else None
    mutating = bool(definition and definition.mutating)
    days, runs_floor = settings.FACTORY_EARN_WINDOW_DAYS, settings.FACTORY_EARN_MIN_RUNS
    needed_runs = runs_floor * (2 if mutating else 1)
    window = int((now - since).total_seconds())
    unwatched_seconds = math.ceil(sum(g.seconds for g in facts.gaps))
    by_person = sum(n for (status, actor), n in facts.runs.items() if status == RunStatus.SUCCEEDED and actor == Actor.OPERATOR)
    failed = Counter()
    for (status, _), n in facts.runs.items():
        if status in FAILED_STATUSES:
            failed[status] += n
    others = Counter()
    for (_, actor), n in facts.runs.items():
        if actor != Actor.OPERATOR:
            others[actor] += n
    first = facts.first_slot
    return [
        Criterion("allowedByRegistry", True, allowed[0], allowed[0], allowed[1]),
        Criterion(
            "windowSeconds", days * 86400, window, window >= days * 86400,
            f"the report reads {window} s; earning needs at least {days} days (FACTORY_EARN_WINDOW_DAYS)"
            + ("" if window >= days * 86400 else f": a shorter window cannot show auto earned, ask for --since {days}d or more"),
        ),
        Criterion(
            "firstSlot", format_instant(since), _instant(first), first is not None and first <= since,
            "the loop has never ticked" if first is None else
            f"the loop's first slot must be at or before the window's start; it was {format_instant(first)}",
        ),
        Criterion(
            "unwatchedSeconds", 0, unwatched_seconds, not facts.gaps,
            _gaps_text(facts.gaps) if facts.gaps else "enabled and watched at every moment of the window",
        ),
        Criterion(
            "succeededRuns", needed_runs, by_person, by_person >= needed_runs,
            f"runs approved by a person that succeeded; at least {runs_floor} (FACTORY_EARN_MIN_RUNS)"
            + (", twice that for a mutating definition" if mutating else ""),
        ),
        Criterion(
            "failedRuns", 0, sum(failed.values()), not failed,
            ", ".join(f"{status} {n}" for status, n in sorted(failed.items())) or "no run failed, was abandoned or interrupted",
        ),
        Criterion(
            "rejectedProposals", 0, facts.rejected, facts.rejected == 0,
            f"{facts.rejected} proposal(s) rejected by a person" if facts.rejected else "no proposal rejected",
        ),
        Criterion(
            "runsNotApprovedByPerson", 0, sum(others.values()), not others,
            "approved by " + ", ".join(f"{actor} {n}" for actor, n in sorted(others.items()))
            + ": not a person's decision" if others else "every run was approved by a person",
        ),
    ]


def verdict(approval: str, evidence: list[Criterion]) -> str:
    """``already-auto`` for a loop that is auto (its runs are the schedule's decisions: there is
    nothing to earn or flip), else ``not-allowed`` when the registry's rules forbid ``auto``,
    ``earned`` when every criterion is met, ``not-earned`` otherwise. Pure."""
    if approval == "auto":
        return ALREADY_AUTO
    if not evidence[0].met:
        return NOT_ALLOWED
    return EARNED if all(c.met for c in evidence) else NOT_EARNED


def earn_window(now: datetime) -> datetime:
    """The start of the window the dashboard judges: ``FACTORY_EARN_WINDOW_DAYS`` before ``now``."""
    return now - timedelta(days=settings.FACTORY_EARN_WINDOW_DAYS)
