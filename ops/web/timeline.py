"""A loop's recent ticks as a timeline, newest first, paged at the database (docs/web.md, "A loop's page").

Three queries a page whatever the loop's history: the page of ticks (``event_tick_idx``),
their proposals with their runs and deciders, and the loop's enable and resume changes in the
page's span (``loop_change_idx``), which lateness reads (``ops.web.badges.late_by``). Pages are keyed by event id
(``?before=<id>``), so a deep page costs what the first one does.
"""

from bisect import bisect_right
from datetime import datetime

from runtime.listing import reason_words
from runtime.models import Event, Proposal
from schedules.models import LoopChange, LoopChangeKind

from .badges import late_by

#: Ticks per page of a loop's timeline.
TICKS_PER_PAGE = 25
EVENT_FIELDS = ("id", "uid", "slot", "loop_key", "admitted_at", "payload", "planning_outcome", "planning_reason")


def parse_before(text: str | None) -> int | None:
    """``?before=`` as an event id, or None (absent, or not a positive integer in ASCII digits: the
    first page). ``isdigit`` alone takes ``١٢`` (read as 12) and ``²``; an id has at most 19 digits."""
    if not (text and text.isascii() and text.isdigit() and len(text) <= 19):
        return None
    return int(text) or None


def timeline(loop: str, *, before: int | None) -> tuple[list[dict], int | None]:
    """``(ticks, older)``: up to ``TICKS_PER_PAGE`` ticks of ``loop`` with ids below ``before``
    (all when None), newest first, and the ``before`` of the next, older page (None: no more).

    Each tick: ``{event: {id, uid, slot, key, admittedAt, lateSeconds, skipped, outcome, reason},
    proposal: Proposal | None, run: Run | None, runReason}``; ``lateSeconds`` is how long after its slot
    the tick was admitted after it was due, when more than ``LATE_AFTER_SECONDS`` (``late_by``: the
    first tick after the loop was enabled or resumed is due then, not at its slot's start); ``runReason`` the run's reason
    in words (``runtime.listing.reason_words``: ``attempt 1: timeout`` while attempt 2 waits or runs)."""
    events = Event.objects.filter(loop=loop).order_by("-id")
    if before is not None:
        events = events.filter(id__lt=before)
    rows = list(events.values(*EVENT_FIELDS)[: TICKS_PER_PAGE + 1])
    older = rows[TICKS_PER_PAGE - 1]["id"] if len(rows) > TICKS_PER_PAGE else None
    rows = rows[:TICKS_PER_PAGE]
    proposals = {
        p.event_id: p
        for p in Proposal.objects.filter(event_id__in=[r["id"] for r in rows]).select_related(
            "decided_by", "run", "run__approved_by"
        )
    }
    starts = watch_starts(loop, rows)
    ticks = []
    for row in rows:
        proposal = proposals.get(row["id"])
        late = None
        if row["slot"] is not None:
            seconds = late_by(row["slot"], row["admitted_at"], _latest(starts, row["admitted_at"]))
            late = round(seconds) if seconds is not None else None
        run = getattr(proposal, "run", None) if proposal else None
        ticks.append({
            "event": {
                "id": row["id"], "uid": row["uid"], "slot": row["slot"], "key": row["loop_key"],
                "admittedAt": row["admitted_at"], "lateSeconds": late,
                "skipped": (row["payload"] or {}).get("skippedSlots"),
                "outcome": row["planning_outcome"], "reason": row["planning_reason"],
            },
            "proposal": proposal,
            "run": run,
            "runReason": reason_words(run.status, run.reason, run.attempt) if run else "",
        })
    return ticks, older


def watch_starts(loop: str, rows: list[dict]) -> list[datetime]:
    """When ``loop`` was enabled or resumed (``LoopChange``) within the span of the ticks
    ``rows`` — after the oldest slot, up to the newest admission — in time order. One query;
    none for a page without a slot."""
    slots = [row["slot"] for row in rows if row["slot"] is not None]
    if not slots:
        return []
    changes = LoopChange.objects.filter(
        loop=loop, kind__in=(LoopChangeKind.ENABLED, LoopChangeKind.RESUMED),
        at__gt=min(slots), at__lte=max(row["admitted_at"] for row in rows),
    )
    return sorted(changes.values_list("at", flat=True))


def _latest(starts: list[datetime], instant: datetime) -> datetime | None:
    """The latest of ``starts`` (sorted) at or before ``instant``, or None. Pure."""
    index = bisect_right(starts, instant)
    return starts[index - 1] if index else None
