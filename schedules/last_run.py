"""A loop's last run beside its last tick (docs/schedules.md, "Reading schedule").

The last tick's outcome alone hides what last ran: a watched loop whose newest tick was
proposed (and perhaps rejected) reads ``planning PROPOSED`` while its last real run —
approved from an older tick — ``REAPED`` a minute earlier. ``last_run_event`` finds, for
each loop, its newest tick that has a run; ``LastRun`` is that run as the overview shows it.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, OuterRef, Subquery

from lib.instants import format_instant
from runtime.models import Event, Run


def last_run_event() -> Subquery:
    """For a ``ScheduleState`` row, the id of its loop's newest tick that has a run (None: no
    run yet, or a keyed loop). A correlated subquery walking the loop's ticks newest first
    (``event_tick_idx``, in its order) to the first with a run (the run's event index): as
    many steps as the loop's newest ticks without a run."""
    # ``loop_key IS NULL`` lets the index give the order: the loop's ticks newest first, with
    # no sort of its whole history. A keyed loop's runs are per key: it has no last run here.
    with_run = Event.objects.filter(loop=OuterRef("loop"), loop_key__isnull=True).filter(
        Exists(Run.objects.filter(event_id=OuterRef("id")))
    )
    return Subquery(with_run.order_by("-id").values("id")[:1])


@dataclass(frozen=True)
class LastRun:
    """A loop's newest run (the run of its newest tick that has one). ``of_last_tick``: it is
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
