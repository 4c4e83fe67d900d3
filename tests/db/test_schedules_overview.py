"""The schedule view behind ``GET /schedules`` and ``schedule list`` (docs/design.md §10; docs/schedules.md)."""

import pytest

from ops.web.words import outcome
from runtime.models import Proposal, Run, RunStatus
from runtime.registry import get_registry
from runtime.services.approval import approve_proposal, reject_proposal
from schedules.models import ScheduleState
from schedules.overview import expected_by, next_slot_due, next_slots, recent_ticks, schedules_overview
from tests.conftest import at
from tests.helpers import finish_active_runs, many_loops, tick

pytestmark = pytest.mark.django_db

OVERLAY = """
schedules:
  reaper:
    enabled: true
    every: 30m
  nightly-health:
    every: 1d
    eventType: clock.tick.heartbeat
    catchUp: none
    singleton: true
    enabled: false
"""


def items(instant: str) -> dict[str, dict]:
    return {v.loop.name: v.as_json() for v in schedules_overview(get_registry(), now=at(instant))}


def test_exact_fields_of_a_kernel_an_overridden_and_an_overlay_only_loop(registry_files):
    registry_files.write_config("schedule.yaml", OVERLAY)
    tick("2026-11-30T21:07:00Z")
    view = items("2026-11-30T21:08:30Z")
    assert view["heartbeat"] == {
        "name": "heartbeat", "every": "5m", "cadenceSeconds": 300, "eventType": "clock.tick.heartbeat",
        "catchUp": "none", "singleton": True, "approval": "auto", "enabled": True,
        "source": "kernel", "overrides": [],
        "lastSlotFired": "2026-11-30T21:05:00Z", "lastTickAt": "2026-11-30T21:07:00Z",
        "nextSlotDue": "2026-11-30T21:10:00Z",
        "lastOutcome": {"stage": "planning", "value": "APPROVED", "reason": ""},
        "lastRun": {"id": Run.objects.get(loop="heartbeat").pk, "status": "queued", "outcome": None, "reason": None,
                    "finishedAt": None, "ofLastTick": True},
        "pendingProposals": 0, "stopped": False, "paused": None,
    }
    assert view["reaper"] == {
        "name": "reaper", "every": "30m", "cadenceSeconds": 1800, "eventType": "clock.tick.reaper",
        "catchUp": "none", "singleton": True, "approval": "watched", "enabled": True,
        "source": "kernel", "overrides": ["enabled", "every"],
        "lastSlotFired": "2026-11-30T21:00:00Z", "lastTickAt": "2026-11-30T21:07:00Z",
        "nextSlotDue": "2026-11-30T21:30:00Z",
        "lastOutcome": {"stage": "planning", "value": "PROPOSED", "reason": ""}, "lastRun": None,
        "pendingProposals": 1, "stopped": False, "paused": None,
    }
    assert view["nightly-health"] == {
        "name": "nightly-health", "every": "1d", "cadenceSeconds": 86400, "eventType": "clock.tick.heartbeat",
        "catchUp": "none", "singleton": True, "approval": "watched", "enabled": False,
        "source": "overlay", "overrides": [],
        "lastSlotFired": None, "lastTickAt": None, "nextSlotDue": None, "lastOutcome": None,
        "lastRun": None, "pendingProposals": 0, "stopped": False, "paused": None,
    }
    assert list(view) == sorted(view)


def test_last_outcome_is_the_run_outcome_once_the_run_finished(registry_files):
    tick("2026-11-30T21:07:00Z")
    assert items("2026-11-30T21:08:00Z")["heartbeat"]["lastOutcome"] == {"stage": "planning", "value": "APPROVED", "reason": ""}
    Run.objects.filter(loop="heartbeat").update(status=RunStatus.FAILED, outcome="FAILED", reason="exit_code_3")
    assert items("2026-11-30T21:08:00Z")["heartbeat"]["lastOutcome"] == {"stage": "run", "value": "FAILED", "reason": "exit_code_3"}
    Run.objects.filter(loop="heartbeat").update(status=RunStatus.ABANDONED, outcome="", reason="lease_expired")
    assert items("2026-11-30T21:08:00Z")["heartbeat"]["lastOutcome"] == {"stage": "run", "value": "ABANDONED", "reason": "lease_expired"}


def test_the_last_run_is_shown_first_when_a_newer_tick_was_only_proposed_then_rejected(registry_files, approver):
    registry_files.write_config("schedule.yaml", "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n")
    tick("2026-11-30T21:07:00Z")
    run = approve_proposal(Proposal.objects.get().pk, user=approver, now=at("2026-11-30T21:07:30Z"))
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.SUCCEEDED, outcome="REAPED", started_at=at("2026-11-30T21:08:00Z"),
        finished_at=at("2026-11-30T21:08:02Z"),
    )
    tick("2026-11-30T22:00:05Z")
    reject_proposal(Proposal.objects.get(status="pending").pk, user=approver, now=at("2026-11-30T22:00:30Z"))
    item = items("2026-11-30T22:01:00Z")["reaper"]
    assert (item["lastOutcome"], item["lastRun"]) == (
        {"stage": "planning", "value": "PROPOSED", "reason": ""},
        {"id": run.pk, "status": "succeeded", "outcome": "REAPED", "reason": None,
         "finishedAt": "2026-11-30T21:08:02Z", "ofLastTick": False},
    )
    assert outcome(item["lastOutcome"], item["lastRun"]) == f"run {run.pk} REAPED · newest tick: planning PROPOSED"


def test_a_singleton_noop_shows_as_the_last_outcome(registry_files):
    tick("2026-11-30T21:07:00Z")
    tick("2026-11-30T21:10:05Z")
    assert items("2026-11-30T21:11:00Z")["heartbeat"]["lastOutcome"] == {
        "stage": "planning", "value": "NOOP", "reason": "previous_run_in_flight",
    }


def test_next_slot_due_is_the_slot_the_slot_loop_fires_next(registry_files):
    loop = get_registry().loops["heartbeat"]
    assert next_slot_due(loop, None, at("2026-11-30T21:07:00Z")) == at("2026-11-30T21:05:00Z")  # fires at once
    tick("2026-11-30T21:07:00Z")
    state = ScheduleState.objects.get(loop="heartbeat")
    assert next_slot_due(loop, state, at("2026-11-30T21:08:00Z")) == at("2026-11-30T21:10:00Z")
    # Overdue (the host slept): catch-up none fires the current slot next.
    assert next_slot_due(loop, state, at("2026-11-30T23:31:00Z")) == at("2026-11-30T23:30:00Z")
    assert next_slot_due(get_registry().loops["reaper"], state, at("2026-11-30T21:08:00Z")) is None


def test_next_slots_from_the_next_due_and_for_a_disabled_loop(registry_files):
    tick("2026-11-30T21:07:00Z")
    _, heartbeat, reaper = schedules_overview(get_registry(), now=at("2026-11-30T21:08:00Z"))
    assert next_slots(heartbeat, count=3, now=at("2026-11-30T21:08:00Z")) == [
        at("2026-11-30T21:10:00Z"), at("2026-11-30T21:15:00Z"), at("2026-11-30T21:20:00Z"),
    ]
    assert next_slots(reaper, count=2, now=at("2026-11-30T21:08:00Z")) == [
        at("2026-11-30T22:00:00Z"), at("2026-11-30T23:00:00Z"),
    ]


def test_stopped_counts_two_intervals_from_the_last_tick(registry_files):
    tick("2026-11-30T21:07:00Z")
    state = ScheduleState.objects.get(loop="heartbeat")
    assert expected_by(get_registry().loops["heartbeat"], state) == at("2026-11-30T21:17:00Z")
    assert items("2026-11-30T21:17:00Z")["heartbeat"]["stopped"] is False
    assert items("2026-11-30T21:17:01Z")["heartbeat"]["stopped"] is True


def test_recent_ticks_list_the_last_ten_newest_first_with_outcomes(registry_files):
    for minute in range(0, 60, 5):
        tick(f"2026-11-30T21:{minute:02d}:30Z")
        finish_active_runs()
    ticks = recent_ticks("heartbeat")
    assert len(ticks) == 10
    assert [t["slot"] for t in ticks[:2]] == ["2026-11-30T21:55:00Z", "2026-11-30T21:50:00Z"]
    newest = ticks[0]
    assert newest["eventId"] == "clock:heartbeat:2026-11-30T21:55:00Z"
    assert newest["admittedAt"] == "2026-11-30T21:55:30Z"
    assert newest["skippedSlots"] == 0
    assert newest["outcome"] == {"stage": "run", "value": "SUCCEEDED", "reason": ""}
    assert newest["proposal"]["status"] == "approved"
    assert newest["run"]["status"] == "succeeded"


@pytest.mark.parametrize("count", [1, 500])
def test_the_view_costs_five_queries_whatever_the_number_of_loops(registry_files, django_assert_num_queries, count):
    many_loops(registry_files, count)
    registry = get_registry()
    with django_assert_num_queries(5):
        views = schedules_overview(registry, now=at("2026-11-30T21:08:00Z"))
    assert len(views) == count
    assert {v.pending_proposals for v in views} == {1}
    assert {v.last_outcome.value for v in views} == {"PROPOSED"}
