"""Time-of-day loops: wall-clock slots in an explicit IANA zone (docs/design.md §6).

Europe/Budapest 02:30 across 2026-03-29 (the gap: 02:00 → 03:00 CEST at 01:00Z) and
2026-10-25 (the repeat: 03:00 CEST → 02:00 CET at 01:00Z); Asia/Kolkata (+05:30, no DST).
The slot loop, the views and the doctor over such loops are ``db/test_time_of_day_ticks.py``.
"""

import pytest

from lib.calendar import time_of_day, wall_instant
from lib.slots import DueSlot, due_slots
from runtime.registry import RegistryInvalid, load_registry
from tests.conftest import at
from tests.helpers import nightly_overlay as overlay

BUDAPEST_0230 = time_of_day("02:30", "Europe/Budapest")


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
