"""What the http tests share: two pending proposals of the watched reaper loop."""

import pytest

from runtime.models import Proposal
from tests.helpers import tick

#: The reaper on (watched: each tick a pending proposal), the auto heartbeat off.
WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"


@pytest.fixture
def proposals(registry_files):
    """Two pending reaper proposals (21:00 and 22:00), oldest first."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    tick("2026-11-30T22:00:10Z")
    return list(Proposal.objects.order_by("id"))
