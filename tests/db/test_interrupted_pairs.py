"""Two interrupted runs at once: an operator's retry or close moves the run it names and leaves
the other interrupted (docs/design.md §8)."""

import pytest

from runtime.models import Proposal, Run
from runtime.services.approval import approve_proposal
from runtime.services.interrupted import close_run, retry_run
from runtime.services.runs import claim_next_run, fail_attempt, start_run
from tests.conftest import at
from tests.helpers import tick

pytestmark = pytest.mark.django_db

WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
NOW = at("2026-11-30T22:01:00Z")


def _interrupted(slot_tick: str, approver) -> Run:
    tick(slot_tick)
    proposal = Proposal.objects.filter(status="pending").get()
    run = approve_proposal(proposal.pk, user=approver, now=NOW)
    claimed = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    assert claimed.pk == run.pk and start_run(claimed, worker="w1", now=NOW)
    assert fail_attempt(run.pk, reason="worker_stopped", now=NOW, worker="w1", interrupted=True) == "interrupted"
    return run


@pytest.fixture
def two_interrupted(registry_files, approver):
    """Two reaper runs interrupted at once: the first's singleton key set aside (as if of
    another loop) so the second slot could be planned and run."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    first = _interrupted("2026-11-30T21:00:10Z", approver)
    Run.objects.filter(pk=first.pk).update(singleton_key="reaper-elsewhere")
    second = _interrupted("2026-11-30T22:00:10Z", approver)
    return first, second


def _statuses(*runs):
    return [Run.objects.get(pk=run.pk).status for run in runs]


def test_retrying_one_interrupted_run_leaves_the_other_interrupted(two_interrupted, approver):
    """``retry_run`` queues the run it names only."""
    first, second = two_interrupted
    assert retry_run(first.pk, user=approver, now=NOW).status == "queued"
    assert _statuses(first, second) == ["queued", "interrupted"]


def test_closing_one_interrupted_run_leaves_the_other_interrupted(two_interrupted, approver):
    """``close_run`` abandons the run it names only."""
    first, second = two_interrupted
    assert close_run(second.pk, user=approver, now=NOW).status == "abandoned"
    assert _statuses(first, second) == ["interrupted", "abandoned"]
