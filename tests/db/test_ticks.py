"""Tick emission through the slot loop (docs/design.md §5; spec §3, §4, §10 exit criteria 1 and 4)."""

import pytest
from django.test import override_settings

from runtime.models import Event, Run
from schedules.models import ScheduleState, ScheduleSync
from tests.helpers import finish_active_runs, tick

pytestmark = pytest.mark.django_db

HOURLY_HEARTBEAT = "schedules:\n  heartbeat:\n    every: 60m\n"


def tick_ids(loop="heartbeat"):
    return list(Event.objects.filter(loop=loop).order_by("id").values_list("uid", flat=True))


def test_restart_within_slot_admits_one_tick(registry_files):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    for instant in ("2026-11-30T21:00:05Z", "2026-11-30T21:17:00Z", "2026-11-30T21:59:59Z"):
        tick(instant)
    assert tick_ids() == ["clock:heartbeat:2026-11-30T21:00:00Z"]


def test_a_second_process_with_stale_state_converges_on_the_same_tick(registry_files):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:05Z")
    # A process that never saw the first tick's state (and so syncs the loops again).
    ScheduleState.objects.all().delete()
    ScheduleSync.objects.all().delete()
    report = tick("2026-11-30T21:30:00Z")
    assert [(t.event_id, t.admitted) for t in report.ticks] == [("clock:heartbeat:2026-11-30T21:00:00Z", False)]
    assert tick_ids() == ["clock:heartbeat:2026-11-30T21:00:00Z"]
    assert Run.objects.count() == 1


def test_the_tick_envelope(registry_files):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:42:00Z")
    event = Event.objects.get()
    assert event.envelope() == {
        "schemaVersion": "factory.event/v1",
        "eventId": "clock:heartbeat:2026-11-30T21:00:00Z",
        "type": "clock.tick.heartbeat",
        "source": "schedule",
        "subject": "heartbeat",
        "occurredAt": "2026-11-30T21:00:00Z",
        "correlationId": "clock:heartbeat:2026-11-30T21:00:00Z",
        "payload": {"loop": "heartbeat", "slot": "2026-11-30T21:00:00Z", "cadenceSeconds": 3600, "skippedSlots": 0},
    }
    assert event.door == "schedule"
    state = ScheduleState.objects.get(loop="heartbeat")
    assert state.last_event_id == "clock:heartbeat:2026-11-30T21:00:00Z"
    assert state.enabled_since.isoformat() == "2026-11-30T21:42:00+00:00"


def test_six_missed_slots_under_none_give_one_run_and_five_recorded_skips(registry_files):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:10Z")
    finish_active_runs()
    tick("2026-12-01T03:30:00Z")  # the host slept from 21:00 to 03:30
    assert tick_ids() == ["clock:heartbeat:2026-11-30T21:00:00Z", "clock:heartbeat:2026-12-01T03:00:00Z"]
    woke = Event.objects.get(uid="clock:heartbeat:2026-12-01T03:00:00Z")
    assert woke.payload["skippedSlots"] == 5
    assert Run.objects.filter(event=woke).count() == 1
    assert Run.objects.count() == 2


def overlay_loop(catch_up: str, singleton: bool) -> str:
    return (
        "schedules:\n  heartbeat:\n    enabled: false\n  sweep:\n    every: 60m\n    eventType: clock.tick.heartbeat\n"
        f"    catchUp: {catch_up}\n    singleton: {str(singleton).lower()}\n    enabled: true\n"
    )


def test_catch_up_last_fires_the_newest_missed_slot_then_the_current(registry_files):
    registry_files.write_config("schedule.yaml", overlay_loop("last", True))
    tick("2026-11-30T21:00:10Z")
    tick("2026-12-01T03:30:00Z")
    tick("2026-12-01T03:30:01Z")
    assert [(e.uid, e.payload["skippedSlots"]) for e in Event.objects.filter(loop="sweep").order_by("id")] == [
        ("clock:sweep:2026-11-30T21:00:00Z", 0),
        ("clock:sweep:2026-12-01T02:00:00Z", 4),
        ("clock:sweep:2026-12-01T03:00:00Z", 0),
    ]


def test_catch_up_all_fires_every_missed_slot_in_order(registry_files):
    registry_files.write_config("schedule.yaml", overlay_loop("all", False))
    tick("2026-11-30T21:00:10Z")
    tick("2026-12-01T03:30:00Z")
    assert [(e.uid, e.payload["skippedSlots"]) for e in Event.objects.filter(loop="sweep").order_by("id")] == [
        ("clock:sweep:2026-11-30T21:00:00Z", 0),
        ("clock:sweep:2026-11-30T22:00:00Z", 0),
        ("clock:sweep:2026-11-30T23:00:00Z", 0),
        ("clock:sweep:2026-12-01T00:00:00Z", 0),
        ("clock:sweep:2026-12-01T01:00:00Z", 0),
        ("clock:sweep:2026-12-01T02:00:00Z", 0),
        ("clock:sweep:2026-12-01T03:00:00Z", 0),
    ]


@override_settings(FACTORY_CATCHUP_LIMIT=2)
def test_catch_up_all_beyond_the_limit_counts_the_rest_as_skipped(registry_files):
    registry_files.write_config("schedule.yaml", overlay_loop("all", False))
    tick("2026-11-30T21:00:10Z")
    tick("2026-12-01T03:30:00Z")
    assert [(e.uid, e.payload["skippedSlots"]) for e in Event.objects.filter(loop="sweep").order_by("id")][1:] == [
        ("clock:sweep:2026-12-01T02:00:00Z", 4),
        ("clock:sweep:2026-12-01T03:00:00Z", 0),
    ]


def test_disabling_stops_ticks_and_re_enabling_does_not_replay_the_disabled_slots(registry_files):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:10Z")
    finish_active_runs()
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT + "    enabled: false\n")
    tick("2026-11-30T22:00:10Z")
    tick("2026-11-30T23:00:10Z")
    assert tick_ids() == ["clock:heartbeat:2026-11-30T21:00:00Z"]
    assert ScheduleState.objects.get(loop="heartbeat").enabled is False
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT + "    enabled: true\n")
    tick("2026-12-01T02:10:00Z")
    assert tick_ids()[-1] == "clock:heartbeat:2026-12-01T02:00:00Z"
    assert Event.objects.get(uid="clock:heartbeat:2026-12-01T02:00:00Z").payload["skippedSlots"] == 0
    state = ScheduleState.objects.get(loop="heartbeat")
    assert (state.enabled, state.enabled_since.isoformat()) == (True, "2026-12-01T02:10:00+00:00")
