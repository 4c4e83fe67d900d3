"""Time-of-day loops through the slot loop, the views, ``schedule next`` and the doctor (docs/design.md §6).

Europe/Budapest 02:30 across 2026-03-29 (the gap: 02:00 → 03:00 CEST at 01:00Z) and
2026-10-25 (the repeat: 03:00 CEST → 02:00 CET at 01:00Z); Asia/Kolkata (+05:30, no DST).
"""

import json
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command

from runtime.models import Event
from runtime.registry import get_registry
from schedules.overview import expected_by, schedules_overview
from tests.conftest import at
from tests.helpers import finish_active_runs, tick
from tests.helpers import nightly_overlay as overlay


def budapest(catch_up: str = "none", singleton: bool = True) -> str:
    return (
        "schedules:\n  heartbeat:\n    enabled: false\n  nightly:\n    eventType: clock.tick.heartbeat\n"
        f"    catchUp: {catch_up}\n    singleton: {str(singleton).lower()}\n    enabled: true\n"
        "    at: '02:30'\n    timezone: Europe/Budapest\n"
    )


def tick_ids(loop="nightly"):
    return list(Event.objects.filter(loop=loop).order_by("id").values_list("uid", flat=True))


# --- the slot loop -------------------------------------------------------------------------------
@pytest.mark.django_db
def test_daily_0230_budapest_exact_event_ids_across_both_dst_days(registry_files):
    registry_files.write_config("schedule.yaml", budapest())
    for instant in (
        "2026-03-28T01:30:05Z", "2026-03-29T00:59:59Z", "2026-03-29T01:00:02Z", "2026-03-29T01:30:00Z",
        "2026-10-24T00:30:01Z", "2026-10-25T00:30:01Z", "2026-10-25T01:30:01Z", "2026-10-26T01:30:01Z",
    ):
        tick(instant)
        finish_active_runs()
    assert tick_ids() == [
        "clock:nightly:2026-03-28T01:30:00Z",
        "clock:nightly:2026-03-29T01:00:00Z",
        "clock:nightly:2026-10-24T00:30:00Z",
        "clock:nightly:2026-10-25T00:30:00Z",
        "clock:nightly:2026-10-26T01:30:00Z",
    ]
    payloads = [e.payload for e in Event.objects.filter(loop="nightly").order_by("id")]
    assert {p["cadenceSeconds"] for p in payloads} == {None}
    assert payloads[1] == {"loop": "nightly", "slot": "2026-03-29T01:00:00Z", "cadenceSeconds": None, "skippedSlots": 0}
    assert [p["skippedSlots"] for p in payloads] == [0, 0, 208, 0, 0]  # 03-30 … 10-23 skipped under none


@pytest.mark.django_db
def test_kolkata_slots_have_the_half_hour_in_their_event_id(registry_files):
    registry_files.write_config("schedule.yaml", overlay("    catchUp: none\n    at: '09:00'\n    timezone: Asia/Kolkata\n"))
    tick("2026-11-30T03:30:00Z")
    tick("2026-12-01T03:29:59Z")
    tick("2026-12-01T03:30:00Z")
    assert tick_ids() == ["clock:nightly:2026-11-30T03:30:00Z", "clock:nightly:2026-12-01T03:30:00Z"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("catch_up", "singleton", "fired"),
    [
        # Down from just after the 03-27 slot until 03-31 12:00Z: 03-28, 03-29 (the gap day),
        # 03-30 and 03-31 were due.
        ("none", True, [("2026-03-31T00:30:00Z", 3)]),
        ("last", True, [("2026-03-30T00:30:00Z", 2), ("2026-03-31T00:30:00Z", 0)]),
        ("all", False, [("2026-03-28T01:30:00Z", 0), ("2026-03-29T01:00:00Z", 0), ("2026-03-30T00:30:00Z", 0),
                        ("2026-03-31T00:30:00Z", 0)]),
    ],
)
def test_a_downtime_across_the_spring_change_under_each_policy(registry_files, catch_up, singleton, fired):
    registry_files.write_config("schedule.yaml", budapest(catch_up, singleton))
    tick("2026-03-27T01:30:10Z")
    finish_active_runs()
    tick("2026-03-31T12:00:00Z")
    tick("2026-03-31T12:00:01Z")
    events = Event.objects.filter(loop="nightly").order_by("id")
    assert [(e.payload["slot"], e.payload["skippedSlots"]) for e in events][1:] == fired


@pytest.mark.django_db
def test_a_downtime_across_the_autumn_change_fires_the_repeat_day_once(registry_files):
    registry_files.write_config("schedule.yaml", budapest("all", False))
    tick("2026-10-23T00:30:10Z")
    tick("2026-10-27T00:00:00Z")
    assert tick_ids() == [f"clock:nightly:{t}" for t in (
        "2026-10-23T00:30:00Z", "2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z",
    )]


# --- views, next, doctor ------------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.usefixtures("host_clock_as_database_clock")
def test_the_view_and_schedule_next_in_utc_and_the_loops_zone(registry_files):
    registry_files.write_config("schedule.yaml", budapest())
    tick("2026-03-28T01:30:05Z")
    (view,) = schedules_overview(get_registry(), now=at("2026-03-28T02:00:00Z"), names=["nightly"])
    document = view.as_json()
    assert (document["every"], document["cadenceSeconds"], document["at"], document["timezone"], document["days"]) == (
        None, None, "02:30", "Europe/Budapest", [],
    )
    assert document["nextSlotDue"] == "2026-03-29T01:00:00Z"
    out, text = StringIO(), StringIO()
    with time_machine.travel(at("2026-03-28T02:00:00Z"), tick=False):
        call_command("schedule", "next", "nightly", "-n", "3", "--json", stdout=out)
        call_command("schedule", "next", "nightly", "-n", "2", stdout=text)
    listing = json.loads(out.getvalue())
    assert listing["timezone"] == "Europe/Budapest"
    assert listing["slots"] == ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"]
    assert listing["local"] == ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"]
    assert "2026-03-29T01:00:00Z  2026-03-29T03:00:00+02:00 Europe/Budapest" in text.getvalue()


@pytest.mark.django_db
def test_the_doctor_waits_two_expected_slots(registry_files):
    registry_files.write_config("schedule.yaml", budapest())
    tick("2026-03-27T01:30:10Z")
    loop = get_registry().loops["nightly"]
    (view,) = schedules_overview(get_registry(), now=at("2026-03-29T01:00:10Z"), names=["nightly"])
    # Last tick 03-27 01:30:10Z; expected 03-28 01:30Z and 03-29 01:00Z (the gap day), plus the tick's latency.
    assert view.expected_by == at("2026-03-29T01:00:10Z")
    assert view.stopped is False
    (later,) = schedules_overview(get_registry(), now=at("2026-03-29T01:00:11Z"), names=["nightly"])
    assert later.stopped is True
    assert expected_by(loop, None) is None
