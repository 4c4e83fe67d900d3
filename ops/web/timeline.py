"""A loop's recent ticks as a timeline, newest first, paged at the database (docs/web.md, "A loop's page").

Two queries a page whatever the loop's history: the page of ticks (``event_tick_idx``),
then their proposals with their runs and deciders. Pages are keyed by event id
(``?before=<id>``), so a deep page costs what the first one does.
"""

from datetime import timedelta

from runtime.listing import reason_words
from runtime.models import Event, Proposal

from .badges import LATE_AFTER_SECONDS

#: Ticks per page of a loop's timeline.
TICKS_PER_PAGE = 25
EVENT_FIELDS = ("id", "uid", "slot", "loop_key", "admitted_at", "payload", "planning_outcome", "planning_reason")


def parse_before(text: str | None) -> int | None:
    """``?before=`` as an event id, or None (absent, or not a positive integer: the first page)."""
    return int(text) if text and text.isdigit() and int(text) > 0 else None


def timeline(loop: str, *, before: int | None) -> tuple[list[dict], int | None]:
    """``(ticks, older)``: up to ``TICKS_PER_PAGE`` ticks of ``loop`` with ids below ``before``
    (all when None), newest first, and the ``before`` of the next, older page (None: no more).

    Each tick: ``{event: {id, uid, slot, key, admittedAt, lateSeconds, skipped, outcome, reason},
    proposal: Proposal | None, run: Run | None, runReason}``; ``lateSeconds`` is how long after its slot
    the tick was admitted, when more than ``LATE_AFTER_SECONDS``; ``runReason`` the run's reason
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
    ticks = []
    for row in rows:
        proposal = proposals.get(row["id"])
        late = None
        if row["slot"] is not None and row["admitted_at"] - row["slot"] > timedelta(seconds=LATE_AFTER_SECONDS):
            late = round((row["admitted_at"] - row["slot"]).total_seconds())
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
