"""The pure parts of the doctor's findings and of the process rows (docs/design.md §11; docs/schedules.md)."""

import json
from datetime import timedelta

import pytest

from ops.doctor import status_document
from ops.doctor_checks import clock_skew, loop_period, run_backlog, starved, stuck
from ops.process_rows import clock_offset, is_skewed
from runtime.registry import get_registry
from tests.conftest import at

IN_FLIGHT = ("NOOP", "previous_run_in_flight")


def test_the_clock_offset_is_the_midpoint_of_the_host_readings_minus_the_database_instant():
    database = at("2026-11-30T21:00:00Z")
    before = database.timestamp() + 89.9
    assert clock_offset(before, database, before + 0.2) == pytest.approx(90.0)
    assert clock_offset(database.timestamp() - 3.0, database, database.timestamp() - 1.0) == pytest.approx(-2.0)


@pytest.mark.parametrize(("offset", "skewed"), [(0.0, False), (5.0, False), (5.01, True), (-5.01, True), (90.0, True)])
def test_an_offset_over_five_seconds_either_way_is_skew(offset, skewed):
    assert is_skewed(offset) is skewed


def test_clock_skew_lists_only_the_skewed_processes():
    processes = [
        {"role": "slot-loop", "host": "a", "pid": 1, "clockOffsetSeconds": 0.1},
        {"role": "slot-loop", "host": "b", "pid": 2, "clockOffsetSeconds": 90.0},
        {"role": "worker", "host": "c", "pid": 3, "clockOffsetSeconds": -6.0},
    ]
    assert clock_skew(processes) == [processes[1], processes[2]]


@pytest.mark.parametrize(("ticks", "expected"), [
    ([IN_FLIGHT] * 3, True),
    ([IN_FLIGHT] * 2, False),
    ([IN_FLIGHT, IN_FLIGHT, ("APPROVED", "")], False),
    ([IN_FLIGHT, ("NOOP", "duplicate_idempotency_key"), IN_FLIGHT], False),
])
def test_a_loop_is_stuck_when_its_last_three_ticks_found_the_run_in_flight(ticks, expected):
    assert stuck(ticks) is expected


def test_a_queue_is_starved_after_one_period_of_its_loop(repos):
    registry = get_registry()
    merge = registry.loops["merge-hello"]  # every 30m
    queued = at("2026-11-30T21:00:00Z")
    assert loop_period(merge, queued) == timedelta(minutes=30)
    assert starved(merge, queued, queued + timedelta(minutes=30)) is False
    assert starved(merge, queued, queued + timedelta(minutes=30, seconds=1)) is True
    assert loop_period(registry.loops["customer-digest"], queued) is None
    assert starved(registry.loops["customer-digest"], queued, queued + timedelta(days=30)) is False


def test_a_time_of_day_loops_period_is_the_span_to_its_next_slot(registry_files):
    registry_files.write_config("schedule.yaml", (
        "schedules:\n  weekdays:\n    eventType: clock.tick.heartbeat\n    catchUp: none\n    singleton: true\n"
        "    enabled: true\n    at: \"09:00\"\n    timezone: Europe/Budapest\n    days: [mon, fri]\n"
    ))
    loop = get_registry().loops["weekdays"]
    # Friday 2026-12-04 09:00 CET is 08:00Z; the next slot is Monday's.
    assert loop_period(loop, at("2026-12-04T10:00:00Z")) == timedelta(days=3)
    # Tuesday: from Monday's slot to Friday's.
    assert loop_period(loop, at("2026-12-01T10:00:00Z")) == timedelta(days=4)


def test_each_finding_is_an_anomaly_when_not_empty_in_its_documented_order():
    findings = {
        "clockSkew": [{"role": "worker"}], "expiredLeases": [{"id": 1}], "futureLastSlot": [{"loop": "x"}],
        "interruptedRuns": [], "starvedQueue": [{"loop": "y"}], "stuckLoops": [{"loop": "z"}],
    }
    document = status_document(
        now=at("2026-11-30T21:00:01Z"), registry=get_registry(), registry_errors=[], stopped=[], pileups=[],
        last_iteration_at=at("2026-11-30T21:00:00Z"), runs={"queued": 0, "running": 0},
        findings=findings, processes=[{"role": "worker"}],
    )
    assert document["anomalies"] == ["expiredLeases", "starvedQueue", "stuckLoops", "futureLastSlot", "clockSkew"]
    assert document["ok"] is False
    assert {key: document[key] for key in findings} == findings
    assert document["processes"] == [{"role": "worker"}]


def test_a_slot_loop_iteration_a_hair_after_the_reading_is_0_0_seconds_old_never_minus_0_0():
    document = status_document(
        now=at("2026-11-30T21:00:00Z"), registry=get_registry(), registry_errors=[], stopped=[], pileups=[],
        last_iteration_at=at("2026-11-30T21:00:00.04Z"), runs={"queued": 0, "running": 0},
    )
    assert json.dumps(document["loop"]) == '{"lastIterationAt": "2026-11-30T21:00:00Z", "ageSeconds": 0.0, "turning": true}'


@pytest.mark.parametrize(("queued", "oldest", "backlog"), [
    (0, None, []),
    (1000, "2026-11-30T20:50:00Z", []),
    (1001, "2026-11-30T21:00:00Z", [{
        "queued": 1001, "oldestQueuedAt": "2026-11-30T21:00:00Z", "waitedSeconds": 0.0, "warnRuns": 1000, "warnSeconds": 600,
    }]),
    (1, "2026-11-30T20:49:59.96Z", [{
        "queued": 1, "oldestQueuedAt": "2026-11-30T20:49:59Z", "waitedSeconds": 600.0, "warnRuns": 1000, "warnSeconds": 600,
    }]),
    # A run queued just after the doctor read the clock waited nothing, never -0.0 s.
    (39000, "2026-11-30T21:00:00.01Z", [{
        "queued": 39000, "oldestQueuedAt": "2026-11-30T21:00:00Z", "waitedSeconds": 0.0, "warnRuns": 1000, "warnSeconds": 600,
    }]),
])
def test_a_deep_or_old_run_queue_is_a_backlog(queued, oldest, backlog):
    found = run_backlog(
        queued=queued, oldest_queued_at=at(oldest) if oldest else None, now=at("2026-11-30T21:00:00Z"),
        warn_runs=1000, warn_seconds=600,
    )
    assert found == backlog
    assert [str(item["waitedSeconds"]) for item in found] == [str(item["waitedSeconds"]) for item in backlog]
