"""A clock stepped forward, then back: the future last slot is repaired to the current slot, journaled,
and listed by the doctor while it stands (docs/design.md §5, §11; docs/schedules.md)."""

import pytest

from ops.doctor import collect_status
from runtime.models import Event, JournalEntry
from schedules.models import KeyedSchedule, ScheduleState
from tests.conftest import at
from tests.helpers import DIGEST_ON, choose, tick

pytestmark = pytest.mark.django_db

HEARTBEAT_ONLY = "schedules:\n  reaper:\n    enabled: false\n"


def repairs() -> list[tuple]:
    return [
        (entry.action, entry.actor, entry.at, entry.data)
        for entry in JournalEntry.objects.filter(action="schedule_state_repaired").order_by("id")
    ]


def test_a_future_last_slot_is_listed_then_repaired_to_the_current_slot_and_the_loop_ticks_again(registry_files):
    registry_files.write_config("schedule.yaml", HEARTBEAT_ONLY)
    tick("2026-11-30T21:07:00Z")
    tick("2026-12-01T21:07:00Z")  # the clock stepped a day forward …
    status = collect_status(now=at("2026-11-30T21:08:00Z"))  # … and back
    assert status["futureLastSlot"] == [{"loop": "heartbeat", "key": None, "lastSlot": "2026-12-01T21:05:00Z"}]
    assert "futureLastSlot" in status["anomalies"]

    report = tick("2026-11-30T21:08:30Z")
    assert report.ticks == []
    assert repairs() == [(
        "schedule_state_repaired", "system", at("2026-11-30T21:08:30Z"),
        {"loop": "heartbeat", "key": None, "futureSlot": "2026-12-01T21:05:00Z", "repairedSlot": "2026-11-30T21:05:00Z"},
    )]
    assert ScheduleState.objects.get(loop="heartbeat").last_slot == at("2026-11-30T21:05:00Z")
    assert collect_status(now=at("2026-11-30T21:08:31Z"))["futureLastSlot"] == []

    report = tick("2026-11-30T21:10:00Z")  # within one slot of the repair
    assert [(t.event_id, t.skipped_slots, t.admitted) for t in report.ticks] == [
        ("clock:heartbeat:2026-11-30T21:10:00Z", 0, True),
    ]
    tick("2026-11-30T21:10:01Z")
    assert len(repairs()) == 1


def test_a_slot_up_to_ten_seconds_ahead_is_another_slot_loops_fresh_tick_not_a_clock_step(registry_files):
    registry_files.write_config("schedule.yaml", HEARTBEAT_ONLY)
    tick("2026-11-30T21:10:00Z")  # as if another slot loop's iteration had read its instant a little later
    assert collect_status(now=at("2026-11-30T21:09:50Z"))["futureLastSlot"] == []
    tick("2026-11-30T21:09:50Z")
    assert repairs() == []
    assert collect_status(now=at("2026-11-30T21:09:49.999Z"))["futureLastSlot"] == [
        {"loop": "heartbeat", "key": None, "lastSlot": "2026-11-30T21:10:00Z"},
    ]
    tick("2026-11-30T21:09:49.999Z")
    assert [data for *_, data in repairs()] == [
        {"loop": "heartbeat", "key": None, "futureSlot": "2026-11-30T21:10:00Z", "repairedSlot": "2026-11-30T21:05:00Z"},
    ]


def test_a_keyed_rows_future_last_slot_is_repaired_with_its_key(registry_files):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    choose("alice", "09:00", "Europe/Budapest", "2026-11-30T06:10:00Z")
    tick("2026-11-30T06:10:00Z")
    tick("2026-12-02T08:30:00Z")  # forward: alice's 2026-12-02 09:00 CET fires
    assert Event.objects.filter(uid="clock:customer-digest:alice:2026-12-02T08:00:00Z").exists()
    assert collect_status(now=at("2026-11-30T08:30:00Z"))["futureLastSlot"] == [
        {"loop": "customer-digest", "key": None, "lastSlot": "2026-12-02T08:00:00Z"},
        {"loop": "customer-digest", "key": "alice", "lastSlot": "2026-12-02T08:00:00Z"},
    ]

    tick("2026-11-30T08:30:00Z")  # back
    stamp = at("2026-11-30T08:30:00Z")
    assert repairs() == [
        ("schedule_state_repaired", "system", stamp, {
            "loop": "customer-digest", "key": "alice",
            "futureSlot": "2026-12-02T08:00:00Z", "repairedSlot": "2026-11-30T08:00:00Z",
        }),
        ("schedule_state_repaired", "system", stamp, {
            "loop": "customer-digest", "key": None,
            "futureSlot": "2026-12-02T08:00:00Z", "repairedSlot": "2026-11-30T08:00:00Z",
        }),
    ]
    row = KeyedSchedule.objects.get(loop="customer-digest", key="alice")
    assert (row.last_slot, row.next_due) == (at("2026-11-30T08:00:00Z"), at("2026-12-01T08:00:00Z"))
    report = tick("2026-12-01T08:00:00Z")
    assert [t.event_id for t in report.ticks] == ["clock:customer-digest:alice:2026-12-01T08:00:00Z"]
