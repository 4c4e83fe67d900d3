"""``runtime.services.runs``: the exact rows and journal entries of a run's transitions —
queued, claimed, started, renewed, finished, failed or expired — value by value
(docs/design.md §8)."""

import json

import pytest

from runtime.models import Actor
from runtime.services.bulk_rows import stored_instant
from runtime.services.runs import run_queued_entry
from tests.conftest import at

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T21:01:00Z")


def _data(value):
    return value if isinstance(value, dict) else json.loads(value)


def test_a_run_queued_entry_names_the_runs_actor_and_no_approver_by_default():
    """A door's auto-approval queues the run as the door's actor with an empty actor name."""
    entry = run_queued_entry({"actor": Actor.SCHEDULE, "event_id": 3, "proposal_id": 4, "definition": "heartbeat@1"},
                             run_id=5, now=NOW)
    assert entry[:7] == (stored_instant(NOW), "run_queued", "schedule", "", 3, 4, 5)
    assert _data(entry[7]) == {"definition": "heartbeat@1"}
