"""What the operator's pages judge and say (ops.web; docs/web.md): late is five seconds after a
slot was due, the doctor's findings badge their loops, problems sort first, a slow table polls
less often, the admin lists the runtime first, and cadences, outcomes and tallies in words."""

from types import SimpleNamespace

import pytest

from ops.schedule_status import status_words
from ops.web.admin_site import runtime_first
from ops.web.badges import doctor_flags, is_late, loop_badges, rank
from ops.web.dashboard import refresh_after
from ops.web.words import cadence, outcome, tally
from runtime.registry import Loop
from tests.conftest import at

HOURLY = Loop(name="reaper", every="60m", cadence_seconds=3600, event_type="clock.tick.reaper", catch_up="none",
              singleton=True, approval="watched", enabled=True)
MORNING = Loop(name="digest", every=None, cadence_seconds=None, event_type="clock.tick.heartbeat", catch_up="none",
               singleton=True, approval="watched", enabled=True, at="09:00", timezone="Europe/Budapest")


def state(last_slot, last_tick_at, enabled_since="2026-11-01T00:00:00Z", enabled=True):
    return SimpleNamespace(
        last_slot=at(last_slot) if last_slot else None, last_tick_at=at(last_tick_at) if last_tick_at else None,
        enabled=enabled, enabled_since=at(enabled_since) if enabled_since else None,
    )


@pytest.mark.parametrize("loop_state,now,late", [
    (state("2026-11-30T21:00:00Z", "2026-11-30T21:00:05Z"), "2026-11-30T21:30:00Z", False),  # 5 s: on time
    (state("2026-11-30T21:00:00Z", "2026-11-30T21:00:06Z"), "2026-11-30T21:30:00Z", True),  # admitted 6 s late
    (state("2026-11-30T21:00:00Z", "2026-11-30T21:00:01Z"), "2026-11-30T22:00:05Z", False),  # 22:00 due 5 s ago
    (state("2026-11-30T21:00:00Z", "2026-11-30T21:00:01Z"), "2026-11-30T22:00:06Z", True),  # 22:00 not yet, 6 s on
    # A loop's first tick fires its current slot when the slot loop first sees it enabled: due then.
    (state("2026-11-30T21:00:00Z", "2026-11-30T21:40:02Z", "2026-11-30T21:40:00Z"), "2026-11-30T21:50:00Z", False),
    (state(None, None, "2026-11-30T21:40:00Z"), "2026-11-30T21:40:04Z", False),
    (state(None, None, "2026-11-30T21:40:00Z"), "2026-11-30T21:40:06Z", True),
    # The slot loop has not seen it enabled: not judged (the doctor's slotLoopStale says why).
    (None, "2026-11-30T23:00:00Z", False),
    (state("2026-11-30T21:00:00Z", "2026-11-30T21:00:01Z", enabled=False), "2026-11-30T23:00:00Z", False),
])
def test_an_interval_loop_is_late_five_seconds_after_its_slot_was_due(loop_state, now, late):
    assert is_late(HOURLY, loop_state, at(now)) is late


def test_a_time_of_day_loop_is_late_after_its_wall_time_in_its_zone():
    fired = state("2026-11-30T08:00:00Z", "2026-11-30T08:00:01Z")  # 09:00 in Budapest
    assert is_late(MORNING, fired, at("2026-12-01T08:00:05Z")) is False
    assert is_late(MORNING, fired, at("2026-12-01T08:00:06Z")) is True


def test_a_keyed_loop_is_late_when_a_row_waits_more_than_five_seconds():
    keyed = Loop(name="customer-digest", every=None, cadence_seconds=None, event_type="x", catch_up="none",
                 singleton=True, approval="watched", enabled=True, keyed=SimpleNamespace())
    seen = state(None, None)
    assert is_late(keyed, seen, at("2026-11-30T21:00:05Z"), at("2026-11-30T21:00:00Z")) is False
    assert is_late(keyed, seen, at("2026-11-30T21:00:06Z"), at("2026-11-30T21:00:00Z")) is True
    assert is_late(keyed, seen, at("2026-11-30T21:00:06Z"), None) is False


def test_the_doctor_findings_badge_their_loops_in_order():
    status = {
        "stoppedSchedules": [{"loop": "reaper"}], "proposalPileUps": [{"loop": "reaper", "pending": 5}],
        "stuckLoops": [{"loop": "nightly"}], "interruptedRuns": [{"id": 4, "loop": None}],
        "expiredLeases": [{"id": 9}, {"id": 10}], "starvedQueue": [], "futureLastSlot": [{"loop": "nightly", "key": None}],
    }
    assert doctor_flags(status, {9: "merge-hello", 10: None}) == {
        "reaper": ["stopped", "piling up"], "nightly": ["stuck", "future last slot"], "merge-hello": ["expired lease"],
    }


def test_problems_rank_before_late_before_ok_before_disabled():
    flags = {"reaper": ["stopped"]}
    disabled = Loop(**{**HOURLY.__dict__, "name": "off", "enabled": False})
    other = Loop(**{**HOURLY.__dict__, "name": "other"})
    assert loop_badges(HOURLY, flags, set()) == ["stopped"]
    assert loop_badges(other, flags, {"other"}) == ["late"]
    assert loop_badges(other, flags, set()) == ["ok"]
    assert loop_badges(disabled, {"off": ["stopped"]}, {"off"}) == ["disabled"]
    assert [rank(["stopped"]), rank(["late"]), rank(["ok"]), rank(["disabled"])] == [0, 1, 2, 3]


def test_the_admin_lists_the_runtime_before_authentication():
    apps = [{"app_label": label} for label in ("auth", "ops", "runtime", "schedules", "zeta")]
    assert [app["app_label"] for app in runtime_first(apps)] == ["runtime", "schedules", "ops", "auth", "zeta"]


@pytest.mark.parametrize("elapsed,seconds", [(0.05, 5), (2.5, 5), (2.6, 6), (8.6, 18)])
def test_a_table_slow_to_compute_refreshes_less_often(elapsed, seconds):
    assert refresh_after(elapsed) == seconds


def test_the_pages_say_a_cadence_an_outcome_and_a_tally_in_words():
    weekdays = Loop(**{**MORNING.__dict__, "days": ("mon", "fri")})
    keyed = Loop(**{**MORNING.__dict__, "at": None, "timezone": None, "keyed": SimpleNamespace()})
    assert [cadence(HOURLY), cadence(MORNING), cadence(weekdays), cadence(keyed)] == [
        "every 60m", "09:00 Europe/Budapest", "09:00 Europe/Budapest on mon, fri", "keyed (each key its own slots)",
    ]
    assert outcome({"stage": "planning", "value": "NOOP", "reason": "previous_run_in_flight"}) == (
        "planning NOOP (previous_run_in_flight)"
    )
    assert [outcome({"stage": "planning", "value": None, "reason": ""}), outcome(None)] == ["planning not planned yet", "—"]
    assert [tally({"rejected": 1, "approved": 3}), tally({})] == ["approved 3, rejected 1", "none"]


@pytest.mark.parametrize(("badges", "paused", "words"), [
    (["ok"], False, "ok"),
    (["ok"], True, "paused"),
    (["late"], True, "paused"),
    (["stopped", "piling up"], False, "stopped, piling up"),
    (["piling up"], True, "paused, piling up"),
    (["paused for long"], True, "paused for long"),
    (["disabled"], True, "disabled"),
])
def test_schedule_lists_status_is_the_dashboards_badges_and_paused(badges, paused, words):
    assert status_words(badges, paused) == words
