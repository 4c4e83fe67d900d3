"""``approval.superseded_by`` for a keyed loop: the proposals an approval superseded are found
by the loop and the key they share with it (docs/design.md §7)."""

import pytest

from runtime.models import Proposal
from runtime.services.approval import approve_proposal, superseded_by
from tests.conftest import at
from tests.helpers import tick

pytestmark = pytest.mark.django_db

WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"


def test_a_keyed_loops_approval_names_the_proposals_of_its_key_it_superseded(registry_files, approver):
    """Three pending proposals of one loop and key: approving the last supersedes the other two,
    and ``superseded_by`` names them by that key, not by a loop without one."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    for instant in ("2026-11-30T21:00:10Z", "2026-11-30T22:00:10Z", "2026-11-30T23:00:10Z"):
        tick(instant)
    # The reaper's proposals as a keyed loop's: one key for all three.
    assert Proposal.objects.filter(loop="reaper").update(loop_key="acme") == 3
    first, second, third = Proposal.objects.order_by("id")
    approve_proposal(third.pk, user=approver, now=at("2026-11-30T23:01:00Z"))
    third.refresh_from_db()
    assert [p.status for p in Proposal.objects.order_by("id")] == ["superseded", "superseded", "approved"]
    assert superseded_by(third) == [first.pk, second.pk]
