"""Small helpers the runtime tests share."""

from runtime.models import ACTIVE_RUN_STATUSES, Run, RunStatus
from ops.slot_loop import iterate

from .conftest import at


def tick(instant: str):
    """One slot-loop iteration at a named instant."""
    return iterate(now=at(instant), record_status=False)


def finish_active_runs(outcome: str = "SUCCEEDED") -> int:
    """Mark every active run succeeded, as a worker would (for planning tests that do not execute)."""
    return Run.objects.filter(status__in=ACTIVE_RUN_STATUSES).update(status=RunStatus.SUCCEEDED, outcome=outcome)
