"""The earning report: has a watched loop earned ``auto``? (spec §6; docs/schedules.md, "Earning auto: `schedule report LOOP`").

Spec §6's path from watched to auto is: watch the loop for a while, read its run history,
then flip it in a reviewable commit. ``earning_report`` reads that history over a window —
slots, planning outcomes, proposals and how they were decided, runs and their durations —
judges it against the criteria of ``ops.earning_evidence`` (a ``verdict`` and its
``evidence``), and only for a loop that earned ``auto`` gives the exact diff of
``registry/schedules.json`` that flips it. Nothing here changes a loop's approval: ``auto``
stays a tracked registry declaration (docs/design.md §4).
"""

import difflib
import json
import re
import statistics
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db.models import Count
from django.db.models.functions import Coalesce

from lib.cadence import CadenceError, parse_every
from lib.instants import InstantError, format_instant, parse_instant
from runtime.models import TRIGGERED_LANE, Door, Event, Proposal, ProposalStatus, Run, RunStatus
from runtime.registry import Registry

from .earning_evidence import EARNED, criteria, earn_window, gather, verdict

#: The kernel registry file a diff is written against, as a path in the repository.
KERNEL_FILE = "registry/schedules.json"


def default_window() -> str:
    """The window a report covers when none is asked for: spec §6's "watched for a week", or
    the longer ``FACTORY_EARN_WINDOW_DAYS``, as a span (``7d``)."""
    return f"{settings.FACTORY_EARN_WINDOW_DAYS}d"


class WindowError(ValueError):
    """A window's start (``--since``, ``?since=``) that is neither a span (``7d``) nor a past
    instant; the message says why, naming the value but not where it came from."""


def window_start(since: str, *, now: datetime) -> datetime:
    """The start of a report's window: ``now`` minus a span in the cadence grammar (``90m``,
    ``7d``, at most 366 days), or an RFC 3339 instant with an offset, not after ``now``.
    Raises WindowError."""
    try:
        return now - timedelta(seconds=parse_every(since))
    except CadenceError as exc:
        span_error = exc
    try:
        start = parse_instant(since)
    except InstantError:
        raise WindowError(f"{since!r} is neither a span ({span_error}) nor an RFC 3339 instant") from None
    if start > now:
        raise WindowError(f"{since!r} is in the future")
    return start


def _counts(queryset, field: str) -> dict[str, int]:
    return dict(queryset.order_by().values_list(field).annotate(n=Count("id")))


def decided_by(proposals) -> dict[str, int]:
    """Who decided ``proposals`` (a queryset), as the loop's timeline says it: a person's
    username, else the actor that decided — ``schedule`` (or another door) for an auto-approved
    tick, ``system`` for a superseded proposal. Pending ones are left out. One query."""
    decided = proposals.exclude(status=ProposalStatus.PENDING).exclude(actor="")
    return _counts(decided.annotate(who=Coalesce("decided_by__username", "actor")), "who")


def auto_verdict(registry: Registry, name: str) -> tuple[bool, str]:
    """``(allowed, why)``: whether the registry's rules *permit* this loop to be ``auto`` (not
    whether it earned it: ``ops.earning_evidence``), and, when not, what would have to change. Pure."""
    loop = registry.loops[name]
    event_type = registry.event_types.get(loop.event_type)
    if loop.approval == "auto":
        return True, "the loop is already auto"
    if event_type is not None and event_type.human_approval_only:
        return False, f"{loop.event_type} is humanApprovalOnly: every run needs a person, always"
    if loop.source == "overlay":
        return False, (
            "an overlay loop may never be auto (approval is a tracked declaration): move the loop into "
            f"{KERNEL_FILE} with approval auto, in a reviewed commit"
        )
    if loop.source == "repos":
        return False, (
            f"a repo loop is a repoLoops template in {KERNEL_FILE}: flipping it flips the loop of every repo in "
            "config/repos.yaml; change the template in a reviewed commit only if every repo has earned it"
        )
    return True, f"a kernel loop: {KERNEL_FILE} may declare it auto, in a reviewed commit"


def kernel_flip_diff(registry_dir: Path, name: str) -> str:
    """The unified diff of ``registry/schedules.json`` that sets the kernel loop ``name`` to
    ``approval: auto`` and ``enabled: true``, touching only those lines of its entry, or ""
    when the entry is not found as written (two-space indented, one key per line)."""
    path = registry_dir / "schedules.json"
    before = path.read_text().splitlines(keepends=True)
    start = next((i for i, line in enumerate(before) if line.rstrip() == f'  {json.dumps(name)}: {{'), None)
    if start is None:
        return ""
    after = list(before)
    for i in range(start + 1, len(before)):
        if re.fullmatch(r" {2}\},?\s*", before[i]):
            break
        line = before[i]
        after[i] = re.sub(r'^( {4}"approval": )"watched"', r'\1"auto"', line)
        after[i] = re.sub(r'^( {4}"enabled": )false', r"\1true", after[i])
    if after == before:
        return ""
    return "".join(difflib.unified_diff(before, after, f"a/{KERNEL_FILE}", f"b/{KERNEL_FILE}"))


def earning_report(registry: Registry, name: str, *, since: datetime, now: datetime, registry_dir: Path) -> dict:
    """The report for loop ``name`` over ``[since, now]`` (UTC instants).

    ``{loop, approval, since, until, slots, planning: {outcome: n}, noopReasons: {reason: n},
    proposals: {status: n}, decidedBy: {username or actor: n} (``decided_by``), runs: {status: n}, durationSeconds:
    {median, worst} (finished runs), mutating, verdict, evidence: [{criterion, required,
    observed, met, detail}], autoAllowed, why, diff}``: ``verdict`` is ``earned``,
    ``not-earned``, ``not-allowed`` or ``already-auto`` (``ops.earning_evidence``);
    ``autoAllowed`` and ``why`` say whether the registry's rules *permit* ``auto`` (not that it
    was earned); ``diff`` is the registry change that flips the loop, only when ``earned``
    (else null; null too if the loop's entry in the kernel file is not written as
    ``kernel_flip_diff`` expects). A constant number of queries whatever the history's size, each on the loop's
    own rows. Raises KeyError for a loop not in ``registry``.
    """
    loop = registry.loops[name]
    event_type = registry.event_types.get(loop.event_type)
    definition = registry.definitions.get(event_type.target) if event_type else None
    ticks = Event.objects.filter(loop=name, door=Door.SCHEDULE, admitted_at__gte=since, admitted_at__lte=now)
    # A loop run once now is not the loop's own evidence (docs/schedules.md, "Running a loop once now").
    proposals = Proposal.objects.filter(loop=name, created_at__gte=since, created_at__lte=now).exclude(event__door=Door.OPERATOR)
    runs = Run.objects.filter(loop=name, queued_at__gte=since, queued_at__lte=now).exclude(lane=TRIGGERED_LANE)
    took = [
        (finished - started).total_seconds()
        for started, finished in runs.filter(
            status__in=(RunStatus.SUCCEEDED, RunStatus.FAILED), started_at__isnull=False, finished_at__isnull=False
        ).values_list("started_at", "finished_at")
    ]
    allowed, why = auto_verdict(registry, name)
    evidence = criteria(registry, name, gather([name], since=since, now=now)[name], allowed=(allowed, why), since=since, now=now)
    judged = verdict(loop.approval, evidence)
    diff = (kernel_flip_diff(registry_dir, name) or None) if judged == EARNED else None
    return {
        "loop": name,
        "approval": loop.approval,
        "source": loop.source,
        "since": format_instant(since),
        "until": format_instant(now),
        "slots": ticks.count(),
        "planning": _counts(ticks, "planning_outcome"),
        "noopReasons": _counts(ticks.filter(planning_outcome="NOOP"), "planning_reason"),
        "proposals": _counts(proposals, "status"),
        "decidedBy": decided_by(proposals),
        "runs": _counts(runs, "status"),
        "durationSeconds": {
            "median": round(statistics.median(took), 1) if took else None,
            "worst": round(max(took), 1) if took else None,
        },
        "mutating": definition.mutating if definition else None,
        "verdict": judged,
        "evidence": [c.as_json() for c in evidence],
        "autoAllowed": allowed,
        "why": why,
        "diff": diff,
    }


def earned_loops(registry: Registry, names: list[str], *, now: datetime) -> set[str]:
    """Which of the loops ``names`` have earned ``auto`` over the last ``FACTORY_EARN_WINDOW_DAYS``
    days (the dashboard's mark): the report's verdict, with the facts of every loop read at
    once (``gather``: a constant number of queries; none when no loop could earn it)."""
    since = earn_window(now)
    candidates = [name for name in names if registry.loops[name].approval != "auto" and auto_verdict(registry, name)[0]]
    facts = gather(candidates, since=since, now=now)
    return {
        name for name in candidates
        if verdict(registry.loops[name].approval, criteria(registry, name, facts[name], allowed=(True, ""), since=since, now=now)) == EARNED
    }
