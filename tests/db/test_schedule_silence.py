"""Silence is the failure a scheduler must never have (docs/design.md §11; docs/schedules.md)."""

import pytest

from ops.doctor import collect_status
from ops.slot_loop import iterate
from runtime.models import Event, Proposal, ProposalStatus, Run
from runtime.registry import get_registry
from schedules.overview import schedules_overview
from tests.conftest import at

pytestmark = pytest.mark.django_db

REAPER_ONLY = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
NOTHING_ENABLED = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: false\n"


def reaper_view(instant: str) -> dict:
    (view,) = schedules_overview(get_registry(), now=at(instant), names=["reaper"])
    return view.as_json()


def test_a_pending_proposal_never_silences_a_watched_loop(registry_files, settings):
    """OPS-436: an unapproved first proposal once silenced a loop entirely."""
    settings.FACTORY_PILEUP_THRESHOLD = 3
    registry_files.write_config("schedule.yaml", REAPER_ONLY)
    slots = ["2026-11-30T20:00:00Z", "2026-11-30T21:00:00Z", "2026-11-30T22:00:00Z", "2026-11-30T23:00:00Z"]
    for slot in slots:
        iterate(now=at(slot.replace(":00:00Z", ":00:02Z")))
    proposals = Proposal.objects.filter(loop="reaper").order_by("id")
    assert [p.event.payload["slot"] for p in proposals] == slots
    assert {p.status for p in proposals} == {ProposalStatus.PENDING}
    assert not Run.objects.exists()
    assert set(Event.objects.filter(loop="reaper").values_list("planning_outcome", flat=True)) == {"PROPOSED"}

    status = collect_status(now=at("2026-11-30T23:00:03Z"))
    assert status["proposalPileUps"] == [{"loop": "reaper", "pending": 4}]
    assert status["stoppedSchedules"] == []
    view = reaper_view("2026-11-30T23:00:03Z")
    assert (view["pendingProposals"], view["stopped"], view["lastSlotFired"]) == (4, False, "2026-11-30T23:00:00Z")


def test_disabling_in_the_overlay_stops_ticks_from_the_next_iteration_and_re_enabling_replays_nothing(registry_files):
    overlay = registry_files.config_dir / "schedule.yaml"
    overlay.write_text(REAPER_ONLY)
    iterate(now=at("2026-11-30T20:00:02Z"))
    iterate(now=at("2026-11-30T21:00:02Z"))
    assert Event.objects.filter(loop="reaper").count() == 2

    # Edited on disk while the slot loop runs: no restart, no store reset.
    overlay.write_text(NOTHING_ENABLED)
    iterate(now=at("2026-11-30T22:00:02Z"))
    iterate(now=at("2026-11-30T23:00:02Z"))
    assert Event.objects.filter(loop="reaper").count() == 2
    view = reaper_view("2026-11-30T23:00:03Z")
    assert (view["enabled"], view["nextSlotDue"], view["stopped"]) == (False, None, False)
    assert view["lastSlotFired"] == "2026-11-30T21:00:00Z"

    overlay.write_text(REAPER_ONLY)
    iterate(now=at("2026-12-01T02:30:00Z"))
    ticks = list(Event.objects.filter(loop="reaper").order_by("id").values_list("uid", "payload__skippedSlots"))
    assert ticks[2:] == [("clock:reaper:2026-12-01T02:00:00Z", 0)]
    view = reaper_view("2026-12-01T02:30:01Z")
    assert (view["enabled"], view["lastSlotFired"], view["nextSlotDue"]) == (True, "2026-12-01T02:00:00Z", "2026-12-01T03:00:00Z")
    # Counted from the re-enabling tick, not from the last tick before the pause.
    assert collect_status(now=at("2026-12-01T02:30:01Z"))["stoppedSchedules"] == []
