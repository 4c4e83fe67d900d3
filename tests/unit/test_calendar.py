"""Calendar arithmetic (lib/calendar.py): wall times in IANA zones as UTC slots (docs/design.md §6).

2026-11-30 is a Monday. Europe/Budapest springs forward on 2026-03-29 (02:00 CET → 03:00 CEST at
01:00Z) and falls back on 2026-10-25 (03:00 CEST → 02:00 CET at 01:00Z); America/New_York springs
forward on 2026-03-08 (02:00 EST → 03:00 EDT at 07:00Z).
"""

import time
from datetime import UTC, date, datetime, timedelta
from datetime import time as wall
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lib.cadence import WEEKDAYS
from lib.calendar import calendar_slot, loop_rule, time_of_day, wall_instant
from lib.slots import Interval
from tests.conftest import at

BUDAPEST = ZoneInfo("Europe/Budapest")
MONDAYS_0900 = time_of_day("09:00", "Europe/Budapest", ("mon",))
DAILY_0230 = time_of_day("02:30", "Europe/Budapest")


@pytest.fixture
def server_zone(monkeypatch):
    """Set the host's zone (TZ) for one test; the host's zone must not matter."""
    def set_zone(name):
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield set_zone
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(("zone", "day", "transition"), [
    ("Europe/Budapest", date(2026, 3, 29), "2026-03-29T01:00:00Z"),
    ("America/New_York", date(2026, 3, 8), "2026-03-08T07:00:00Z"),
])
def test_every_wall_time_in_the_gap_is_the_transition_to_the_second(zone, day, transition):
    # The bisection ends within a second of the transition; the slot is the transition's own second.
    assert {wall_instant(day, wall(2, minute), ZoneInfo(zone)) for minute in range(60)} == {at(transition)}
    assert wall_instant(day, wall(2, 30), ZoneInfo(zone)).microsecond == 0


def test_wall_times_beside_the_gap_and_the_repeat_keep_their_offset():
    assert [wall_instant(d, wall(h, m), BUDAPEST) for d, h, m in [
        (date(2026, 3, 29), 1, 59), (date(2026, 3, 29), 3, 0), (date(2026, 10, 25), 2, 0),
        (date(2026, 10, 25), 2, 59), (date(2026, 10, 25), 3, 0), (date(2026, 6, 1), 0, 0),
    ]] == [at(t) for t in (
        "2026-03-29T00:59:00Z", "2026-03-29T01:00:00Z", "2026-10-25T00:00:00Z",
        "2026-10-25T00:59:00Z", "2026-10-25T02:00:00Z", "2026-05-31T22:00:00Z",
    )]


def test_slots_are_utc_whatever_the_hosts_zone(server_zone):
    server_zone("Asia/Tokyo")
    instants = [wall_instant(date(2026, 3, 29), wall(2, 30), BUDAPEST),  # in the gap
                wall_instant(date(2026, 10, 25), wall(2, 30), BUDAPEST),  # repeated
                wall_instant(date(2026, 6, 1), wall(2, 30), BUDAPEST)]
    assert [i.isoformat() for i in instants] == [
        "2026-03-29T01:00:00+00:00", "2026-10-25T00:30:00+00:00", "2026-06-01T00:30:00+00:00",
    ]
    assert DAILY_0230.floor(at("2026-03-29T12:00:00Z")).isoformat() == "2026-03-29T01:00:00+00:00"


def test_the_rules_zone_not_the_hosts_decides_the_local_date(server_zone):
    # Kiritimati (+14) is a day and an hour ahead of Pago Pago (-11): at 23:30 on Monday
    # 2026-11-30 in Pago Pago (10:30Z on Tuesday), the host's date is already Wednesday.
    server_zone("Pacific/Kiritimati")
    mondays = time_of_day("23:45", "Pacific/Pago_Pago", ("mon",))
    instant = at("2026-12-01T10:30:00Z")
    assert (mondays.floor(instant), mondays.after(instant)) == (at("2026-11-24T10:45:00Z"), at("2026-12-01T10:45:00Z"))


def test_a_one_weekday_rule_reaches_back_and_forward_a_whole_week():
    # Monday 2026-11-30 at 09:00 CET is 08:00Z.
    slot, week_before, week_after = at("2026-11-30T08:00:00Z"), at("2026-11-23T08:00:00Z"), at("2026-12-07T08:00:00Z")
    assert [MONDAYS_0900.floor(at(t)) for t in (
        "2026-11-30T07:59:59Z", "2026-11-30T08:00:00Z", "2026-11-29T12:00:00Z", "2026-12-07T07:00:00Z",
    )] == [week_before, slot, week_before, slot]
    assert [MONDAYS_0900.after(at(t)) for t in (
        "2026-11-30T07:59:59Z", "2026-11-30T08:00:00Z", "2026-12-01T00:00:00Z", "2026-11-23T08:00:00Z",
    )] == [slot, week_after, week_after, slot]
    assert (MONDAYS_0900.before(slot), MONDAYS_0900.before(week_after)) == (week_before, slot)


def test_slot_on_is_the_days_slot_or_none_on_a_day_not_allowed():
    assert [MONDAYS_0900.slot_on(date(2026, 11, 30) + timedelta(days=n)) for n in range(8)] == [
        at("2026-11-30T08:00:00Z"), None, None, None, None, None, None, at("2026-12-07T08:00:00Z"),
    ]
    assert [DAILY_0230.slot_on(date(2026, 3, d)) for d in (28, 29, 30)] == [
        at("2026-03-28T01:30:00Z"), at("2026-03-29T01:00:00Z"), at("2026-03-30T00:30:00Z"),
    ]


def test_before_is_the_last_slot_strictly_before_an_instant():
    assert DAILY_0230.before(at("2026-03-30T00:30:00Z")) == at("2026-03-29T01:00:00Z")
    assert DAILY_0230.before(at("2026-03-30T00:30:01Z")) == at("2026-03-30T00:30:00Z")
    assert DAILY_0230.before(at("2026-03-29T01:00:00Z")) == at("2026-03-28T01:30:00Z")


def test_ceil_is_the_first_slot_at_or_after_an_instant():
    assert [DAILY_0230.ceil(at(t)) for t in (
        "2026-03-29T01:00:00Z", "2026-03-29T01:00:01Z", "2026-03-29T00:59:59Z", "2026-03-28T23:00:00Z",
    )] == [at("2026-03-29T01:00:00Z"), at("2026-03-30T00:30:00Z"), at("2026-03-29T01:00:00Z"), at("2026-03-29T01:00:00Z")]
    assert MONDAYS_0900.ceil(at("2026-12-01T00:00:00Z")) == at("2026-12-07T08:00:00Z")


def test_between_counts_the_slots_strictly_inside():
    first = at("2026-03-27T01:30:00Z")
    lasts = [DAILY_0230.slot_on(date(2026, 3, 27) + timedelta(days=n)) for n in range(5)]
    assert [DAILY_0230.between(first, last) for last in lasts] == [0, 0, 1, 2, 3]
    assert MONDAYS_0900.between(at("2026-11-23T08:00:00Z"), at("2026-12-07T08:00:00Z")) == 1


def test_a_loops_rule_is_its_time_of_day_or_its_interval():
    timed = SimpleNamespace(at="09:00", timezone="Europe/Budapest", days=("mon",), cadence_seconds=None)
    assert loop_rule(timed) == MONDAYS_0900
    assert loop_rule(SimpleNamespace(at=None, timezone=None, days=(), cadence_seconds=3600)) == Interval(3600)
    daily = loop_rule(SimpleNamespace(at="02:30", timezone="Europe/Budapest", days=(), cadence_seconds=None))
    assert (daily.at, daily.zone, daily.days) == (wall(2, 30), BUDAPEST, frozenset())


def test_calendar_slot_is_the_latest_firing_at_or_before_now():
    wednesday = at("2026-12-02T12:00:00Z")
    assert calendar_slot("09:00", "Europe/Budapest", ["mon"], wednesday) == at("2026-11-30T08:00:00Z")
    assert calendar_slot("09:00", "Europe/Budapest", [], wednesday) == at("2026-12-02T08:00:00Z")
    assert calendar_slot("09:00", "Europe/Budapest", ("mon", "wed"), at("2026-12-02T08:00:00Z")) == at("2026-12-02T08:00:00Z")


zones = st.sampled_from(["Europe/Budapest", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"])
wall_times = st.builds(lambda h, m: f"{h:02}:{m:02}", st.integers(0, 23), st.integers(0, 59))
weekday_sets = st.sets(st.sampled_from(WEEKDAYS), max_size=3).map(lambda s: tuple(sorted(s)))
instants = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC))


@given(zones, wall_times, weekday_sets, instants)
def test_floor_after_before_and_ceil_agree(zone, at_text, days, instant):
    rule = time_of_day(at_text, zone, days)
    floor, following = rule.floor(instant), rule.after(instant)
    assert floor <= instant < following
    assert rule.after(floor) == following
    assert rule.before(following) == floor
    assert rule.ceil(instant) == (instant if floor == instant else following)
    assert following - floor <= timedelta(days=7, hours=1)
    assert rule.between(floor, following) == 0
    local = following.astimezone(ZoneInfo(zone))
    assert not days or WEEKDAYS[local.weekday()] in days
