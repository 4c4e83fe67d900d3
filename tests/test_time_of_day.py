"""Time-of-day loops: wall-clock slots in an explicit IANA zone (issue 6; DESIGN §6).

Europe/Budapest 02:30 across 2026-03-29 (the gap: 02:00 → 03:00 CEST at 01:00Z) and
2026-10-25 (the repeat: 03:00 CEST → 02:00 CET at 01:00Z); Asia/Kolkata (+05:30, no DST).
"""

import json
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command

from runtime.models import Event
from runtime.registry import RegistryInvalid, get_registry, load_registry
from lib.calendar import time_of_day, wall_instant
from schedules.overview import expected_by, schedules_overview
from lib.slots import DueSlot, due_slots

from .conftest import at
from .helpers import finish_active_runs, tick

BUDAPEST_0230 = time_of_day("02:30", "Europe/Budapest")


def overlay(entry: str, name: str = "nightly") -> str:
    return (
        "schedules:\n  heartbeat:\n    enabled: false\n"
        f"  {name}:\n    eventType: clock.tick.heartbeat\n    singleton: true\n    enabled: true\n{entry}"
    )


def budapest(catch_up: str = "none", singleton: bool = True) -> str:
    return (
        "schedules:\n  heartbeat:\n    enabled: false\n  nightly:\n    eventType: clock.tick.heartbeat\n"
        f"    catchUp: {catch_up}\n    singleton: {str(singleton).lower()}\n    enabled: true\n"
        "    at: '02:30'\n    timezone: Europe/Budapest\n"
    )


def tick_ids(loop="nightly"):
    return list(Event.objects.filter(loop=loop).order_by("id").values_list("uid", flat=True))


# --- pure arithmetic ---------------------------------------------------------------------------
def test_the_gap_day_fires_at_the_first_instant_after_the_gap_not_zoneinfos_naive_instant():
    from datetime import date

    assert wall_instant(date(2026, 3, 29), time_of_day("02:30", "Europe/Budapest").at, BUDAPEST_0230.zone) == at(
        "2026-03-29T01:00:00Z"
    )
    assert [BUDAPEST_0230.floor(at(t)) for t in ("2026-03-28T23:00:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z")] == [
        at("2026-03-28T01:30:00Z"), at("2026-03-29T01:00:00Z"), at("2026-03-30T00:30:00Z"),
    ]


def test_the_repeat_day_fires_once_at_the_first_occurrence():
    slots = [at("2026-10-24T00:00:00Z")]
    for _ in range(3):
        slots.append(BUDAPEST_0230.after(slots[-1]))
    assert slots[1:] == [at("2026-10-24T00:30:00Z"), at("2026-10-25T00:30:00Z"), at("2026-10-26T01:30:00Z")]
    # The second 02:30 (01:30Z, CET) is not a slot.
    assert BUDAPEST_0230.floor(at("2026-10-25T01:30:00Z")) == at("2026-10-25T00:30:00Z")


def test_a_half_hour_zone_converts_with_its_offset():
    kolkata = time_of_day("09:00", "Asia/Kolkata")
    assert kolkata.floor(at("2026-11-30T04:00:00Z")) == at("2026-11-30T03:30:00Z")
    assert kolkata.after(at("2026-11-30T03:30:00Z")) == at("2026-12-01T03:30:00Z")
    adelaide = time_of_day("09:00", "Australia/Adelaide")  # +10:30 in (southern) summer
    assert adelaide.floor(at("2026-12-01T00:00:00Z")) == at("2026-11-30T22:30:00Z")


def test_days_limit_the_slots_to_those_weekdays():
    weekdays = time_of_day("09:00", "Europe/Budapest", ("mon", "fri"))
    # 2026-11-30 is a Monday; the next slot is Friday's.
    assert weekdays.after(at("2026-11-30T08:00:00Z")) == at("2026-12-04T08:00:00Z")
    assert weekdays.between(at("2026-11-30T08:00:00Z"), at("2026-12-07T08:00:00Z")) == 1


def test_catch_up_counts_wall_clock_slots_across_the_gap():
    kwargs = dict(rule=BUDAPEST_0230, last_fired=at("2026-03-27T01:30:00Z"), fresh=False,
                  now=at("2026-03-31T12:00:00Z"), catchup_limit=1000)
    assert due_slots(catch_up="none", **kwargs) == [DueSlot(at("2026-03-31T00:30:00Z"), 3)]
    assert due_slots(catch_up="last", **kwargs) == [DueSlot(at("2026-03-30T00:30:00Z"), 2)]
    assert due_slots(catch_up="all", **kwargs) == [
        DueSlot(at(t), 0) for t in ("2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z")
    ]


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


# --- load errors ---------------------------------------------------------------------------------
def errors(files):
    with pytest.raises(RegistryInvalid) as raised:
        load_registry(files.registry_dir, files.config_dir)
    return [str(e) for e in raised.value.errors]


def test_time_of_day_load_errors(registry_files):
    path = registry_files.config_dir / "schedule.yaml"
    cases = {
        "    catchUp: none\n    at: '09:00'\n    timezone: Europe/Budapset\n":
            "unknown_timezone: 'Europe/Budapset' is not an IANA time zone",
        "    catchUp: none\n    at: '9:00'\n    timezone: Europe/Budapest\n":
            "invalid_time: '9:00' is not a wall time: write HH:MM, 00:00 to 23:59 (e.g. 09:00)",
        "    catchUp: none\n    at: '24:00'\n    timezone: Europe/Budapest\n":
            "invalid_time: '24:00' is not a wall time: write HH:MM, 00:00 to 23:59 (e.g. 09:00)",
        "    catchUp: none\n    at: '09:00'\n":
            "missing_timezone: a time of day needs its IANA timezone (e.g. Europe/Budapest); there is no implicit server zone",
        "    catchUp: none\n    at: '09:00'\n    timezone: UTC\n    every: 1d\n":
            "cadence_conflict: give one of every, at or keyed, not every and at",
        "    catchUp: none\n    every: 1d\n    timezone: Europe/Budapest\n":
            "cadence_conflict: timezone and days belong to a time of day (at)",
        "    catchUp: none\n":
            "never_ticks: nothing can ever tick this loop: give every, at with timezone, or keyed with at least one setBy type",
    }
    for entry, message in cases.items():
        registry_files.write_config("schedule.yaml", overlay(entry))
        assert errors(registry_files) == [f"{path}: nightly: {message}"], entry


def test_a_kernel_loop_may_be_a_time_of_day_loop(registry_files):
    registry_files.update("schedules.json", lambda loops: loops.__setitem__(
        "morning", {"eventType": "clock.tick.heartbeat", "at": "09:00", "timezone": "Europe/Budapest", "days": ["mon"]}
    ))
    loop = load_registry(registry_files.registry_dir, registry_files.config_dir).loops["morning"]
    assert (loop.every, loop.cadence_seconds, loop.at, loop.timezone, loop.days) == (
        None, None, "09:00", "Europe/Budapest", ("mon",),
    )
