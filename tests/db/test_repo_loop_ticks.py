"""Repo loops tick like any loop: one repo's work and merge loops on the same slot boundary (docs/design.md §4; docs/demo.md)."""

import pytest

from ops.slot_loop import iterate
from runtime.models import Event, Proposal, ProposalStatus, Run
from tests.conftest import at


@pytest.mark.django_db
def test_work_and_merge_of_one_repo_tick_on_the_same_boundary(repos):
    repos.write_config("schedule.yaml", "schedules:\n  work-hello:\n    enabled: true\n")
    iterate(now=at("2026-11-30T10:47:13Z"))
    ticks = {e.loop: e for e in Event.objects.filter(loop__in=["work-hello", "merge-hello"])}
    assert ticks["work-hello"].payload == {
        "repo": "hello", "loop": "work-hello", "slot": "2026-11-30T10:30:00Z", "cadenceSeconds": 1800, "skippedSlots": 0,
    }
    assert ticks["merge-hello"].payload["slot"] == ticks["work-hello"].payload["slot"]
    assert ticks["merge-hello"].subject == "hello"
    # Watched work proposes; the merge-loop exception auto-approves the read-only scan as the schedule.
    assert Proposal.objects.get(loop="work-hello").status == ProposalStatus.PENDING
    merge_run = Run.objects.get(loop="merge-hello")
    assert (merge_run.definition, merge_run.actor, merge_run.approved_by) == ("merge-scan@1", "schedule", None)
