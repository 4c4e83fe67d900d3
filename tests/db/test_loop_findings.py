"""The loops in question, read set-based (``schedules.findings``, ``ops.web.badges.late_loops``): the
same answers as judging every loop's view, at every instant (docs/design.md §11; docs/web.md)."""

from datetime import timedelta

import pytest

from lib.instants import format_instant
from ops.web.badges import is_late, late_loops
from runtime.registry import get_registry
from schedules.findings import pile_ups, stopped_schedules
from schedules.models import KeyedSchedule, ScheduleState
from schedules.overview import schedules_overview
from tests.conftest import at
from tests.helpers import choose, tick

pytestmark = pytest.mark.django_db

#: An interval loop of 5 minutes and one of an hour, a time-of-day loop and a keyed one, all enabled.
MIXED = """\
schedules:
  reaper:
    enabled: true
  customer-digest:
    enabled: true
  nightly:
    eventType: clock.tick.heartbeat
    catchUp: none
    singleton: true
    enabled: true
    at: "02:30"
    timezone: Europe/Budapest
"""
#: Instants from a minute after the last iteration to two days on: on time, late, stopped.
INSTANTS = [
    "2026-11-30T21:11:00Z", "2026-11-30T21:15:04Z", "2026-11-30T21:15:06Z", "2026-11-30T21:20:01Z",
    "2026-11-30T21:20:02Z", "2026-11-30T23:07:00Z", "2026-11-30T23:07:01Z", "2026-12-01T01:30:06Z",
    "2026-12-01T08:00:06Z", "2026-12-01T08:01:01Z", "2026-12-02T21:07:00Z", "2026-12-02T21:07:01Z",
]


@pytest.fixture
def mixed(registry_files):
    """The loops of ``MIXED`` fired at 21:07 and the heartbeat again at 21:10:01 (the rest due
    later), a customer's digest due at 08:00Z, then the slot loop stops."""
    registry_files.write_config("schedule.yaml", MIXED)
    choose("alice", "09:00", "Europe/Budapest", "2026-11-30T06:10:00Z")
    tick("2026-11-30T21:07:00Z")
    tick("2026-11-30T21:10:01Z")
    assert KeyedSchedule.objects.get().next_due == at("2026-12-01T08:00:00Z")
    return get_registry()


def stopped_by_views(registry, now) -> list[dict]:
    return [
        {"loop": v.loop.name, "lastTickAt": format_instant(v.last_tick_at) if v.last_tick_at else None,
         "expectedBy": format_instant(v.expected_by)}
        for v in schedules_overview(registry, now=now) if v.stopped
    ]


def late_by_states(registry, now) -> set[str]:
    states = {state.loop: state for state in ScheduleState.objects.all()}
    due = KeyedSchedule.objects.order_by("next_due").values_list("next_due", flat=True).first()
    return {
        name for name, loop in registry.loops.items()
        if is_late(loop, states.get(name), now, due if loop.keyed is not None else None)
    }


@pytest.mark.parametrize("instant", INSTANTS)
def test_the_stopped_loops_are_those_every_loops_view_finds(mixed, instant):
    assert stopped_schedules(mixed, now=at(instant)) == stopped_by_views(mixed, at(instant))


@pytest.mark.parametrize("instant", INSTANTS)
def test_the_late_loops_are_those_every_loops_state_finds(mixed, instant):
    assert late_loops(mixed, now=at(instant)) == late_by_states(mixed, at(instant))


def test_the_findings_at_the_instants_are_these(mixed):
    stopped = {instant: [item["loop"] for item in stopped_schedules(mixed, now=at(instant))] for instant in INSTANTS}
    late = {instant: sorted(late_loops(mixed, now=at(instant))) for instant in INSTANTS}
    assert stopped == {
        "2026-11-30T21:11:00Z": [], "2026-11-30T21:15:04Z": [], "2026-11-30T21:15:06Z": [],
        "2026-11-30T21:20:01Z": [], "2026-11-30T21:20:02Z": ["heartbeat"],
        "2026-11-30T23:07:00Z": ["heartbeat"], "2026-11-30T23:07:01Z": ["heartbeat", "reaper"],
        "2026-12-01T01:30:06Z": ["heartbeat", "reaper"], "2026-12-01T08:00:06Z": ["heartbeat", "reaper"],
        "2026-12-01T08:01:01Z": ["customer-digest", "heartbeat", "reaper"],
        "2026-12-02T21:07:00Z": ["customer-digest", "heartbeat", "reaper"],
        "2026-12-02T21:07:01Z": ["customer-digest", "heartbeat", "nightly", "reaper"],
    }
    assert late == {
        "2026-11-30T21:11:00Z": [], "2026-11-30T21:15:04Z": [], "2026-11-30T21:15:06Z": ["heartbeat"],
        "2026-11-30T21:20:01Z": [], "2026-11-30T21:20:02Z": [],  # the current slot is 21:20, 2 s old
        "2026-11-30T23:07:00Z": ["heartbeat", "reaper"], "2026-11-30T23:07:01Z": ["heartbeat", "reaper"],
        "2026-12-01T01:30:06Z": ["heartbeat", "nightly", "reaper"],
        "2026-12-01T08:00:06Z": ["customer-digest", "heartbeat", "nightly", "reaper"],
        "2026-12-01T08:01:01Z": ["customer-digest", "heartbeat", "nightly", "reaper"],
        "2026-12-02T21:07:00Z": ["customer-digest", "heartbeat", "nightly", "reaper"],
        "2026-12-02T21:07:01Z": ["customer-digest", "heartbeat", "nightly", "reaper"],
    }


def test_a_state_whose_next_slot_lies_ahead_is_not_read_for_stopped_loops(mixed):
    # The slot loop keeps next_due: a loop with a slot ahead fired its current one, so it cannot
    # be stopped; the doctor does not read its row (here made inconsistent on purpose to show it).
    ScheduleState.objects.filter(loop="reaper").update(next_due=at("2026-12-05T00:00:00Z"))
    assert [item["loop"] for item in stopped_schedules(mixed, now=at("2026-11-30T23:07:01Z"))] == ["heartbeat"]


def test_a_state_the_slot_loop_has_not_given_a_next_due_is_judged(mixed):
    ScheduleState.objects.filter(loop="reaper").update(next_due=None)
    assert stopped_schedules(mixed, now=at("2026-11-30T23:07:01Z")) == [
        {"loop": "heartbeat", "lastTickAt": "2026-11-30T21:10:01Z", "expectedBy": "2026-11-30T21:20:01Z"},
        {"loop": "reaper", "lastTickAt": "2026-11-30T21:07:00Z", "expectedBy": "2026-11-30T23:07:00Z"},
    ]


def test_pile_ups_count_pending_proposals_of_watched_loops_only(registry_files, settings):
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    enabled: true\n")
    for hour in (20, 21, 22, 23):
        tick(f"2026-11-30T{hour}:00:05Z")
    registry = get_registry()
    assert pile_ups(registry, threshold=3) == [{"loop": "reaper", "pending": 4}]
    assert pile_ups(registry, threshold=4) == []
    assert [v.pending_proposals for v in schedules_overview(registry, now=at("2026-11-30T23:00:06Z"), names=["reaper"])] == [4]


def test_the_late_candidates_cover_a_tick_admitted_past_the_grace(mixed):
    # Enabled since 20:00, the reaper's 21:00 tick admitted at 21:07 was late.
    ScheduleState.objects.filter(loop="reaper").update(enabled_since=at("2026-11-30T20:00:00Z"))
    assert "reaper" in late_loops(mixed, now=at("2026-11-30T21:08:00Z"))
    ScheduleState.objects.filter(loop="reaper").update(last_tick_at=at("2026-11-30T21:00:05Z"))
    assert "reaper" not in late_loops(mixed, now=at("2026-11-30T21:08:00Z"))
    ScheduleState.objects.filter(loop="reaper").update(last_tick_at=at("2026-11-30T21:00:00Z") + timedelta(seconds=5.5))
    assert "reaper" in late_loops(mixed, now=at("2026-11-30T21:08:00Z"))
