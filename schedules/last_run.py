"""A loop's last run beside its last tick (docs/schedules.md, "Reading schedule").

The last tick's outcome alone hides what last ran: a watched loop whose newest tick was
proposed (and perhaps rejected) reads ``planning PROPOSED`` while its last real run —
approved from an older tick — ``REAPED`` a minute earlier. ``last_run_event`` finds, for
each loop, its newest run (a tick's or a person's "run once now"); ``LastRun`` is that run
as the overview shows it.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import OuterRef, Subquery

from lib.instants import format_instant
from runtime.models import Run


def last_run_event() -> Subquery:
    """For a ``ScheduleState`` row, the event id of its loop's newest run — a tick's or a
    person's "run once now" (docs/schedules.md, "Running a loop once now") — None: no run yet,
    or a keyed loop, whose runs are per key. One index probe (``run_loop_idx``)."""
    newest = Run.objects.filter(loop=OuterRef("loop"), loop_key__isnull=True).order_by("-id")
    return Subquery(newest.values("event_id")[:1])


@dataclass(frozen=True)
class LastRun:
    """A loop's newest run (``last_run_event``). ``of_last_tick``: it is
    the last tick's own run, whose outcome ``lastOutcome`` already says."""

    id: int
    status: str
    outcome: str
    reason: str
    finished_at: datetime | None
    of_last_tick: bool

    @classmethod
    def of(cls, row: dict | None, *, last_tick_id: int | None) -> "LastRun | None":
        """From a run row (``id, event_id, status, outcome, reason, finished_at``), or None."""
        if row is None:
            return None
        return cls(row["id"], row["status"], row["outcome"], row["reason"], row["finished_at"],
                   row["event_id"] == last_tick_id)

    def as_json(self) -> dict:
        """``{id, status, outcome, reason, finishedAt, ofLastTick}``: ``outcome`` and ``reason``
        null when none, ``finishedAt`` null while it has not ended."""
        return {
            "id": self.id, "status": self.status, "outcome": self.outcome or None, "reason": self.reason or None,
            "finishedAt": format_instant(self.finished_at) if self.finished_at else None,
            "ofLastTick": self.of_last_tick,
        }
