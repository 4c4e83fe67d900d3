"""Slot arithmetic (docs/design.md §5): the epoch floor and the catch-up policies, as pure functions."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lib.slots import DueSlot, Interval, due_slots, slot_floor
from tests.conftest import at

HOUR = 3600
instants = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC))
cadences = st.sampled_from([1, 60, 90, 300, 3600, 14400, 86400, 604800]) | st.integers(min_value=1, max_value=10**7)


def test_slot_is_the_epoch_floor():
    assert slot_floor(at("2026-11-30T21:59:59Z"), HOUR) == at("2026-11-30T21:00:00Z")
    assert slot_floor(at("2026-11-30T21:00:00Z"), HOUR) == at("2026-11-30T21:00:00Z")
    # 7d slots start on the epoch's weekday (Thursday), not on Monday: no offsets.
    assert slot_floor(at("2026-11-30T12:00:00Z"), 7 * 86400) == at("2026-11-26T00:00:00Z")
    # An offset instant is the same instant.
    assert slot_floor(datetime.fromisoformat("2026-11-30T23:30:00+02:00"), HOUR) == at("2026-11-30T21:00:00Z")


def test_naive_instants_are_refused():
    with pytest.raises(ValueError):
        slot_floor(datetime(2026, 1, 1), 60)


@given(instants, cadences)
def test_slot_floor_properties(instant, cadence):
    slot = slot_floor(instant, cadence)
    assert slot <= instant < slot + timedelta(seconds=cadence)
    assert int(slot.timestamp()) % cadence == 0
    assert slot_floor(slot, cadence) == slot


def due(catch_up, last, now, *, fresh=False, limit=1000, cadence=HOUR):
    return due_slots(
        rule=Interval(cadence), catch_up=catch_up, last_fired=at(last) if last else None,
        fresh=fresh, now=at(now), catchup_limit=limit,
    )


def test_worked_example_six_missed_slots_under_none_fire_one_tick_with_five_skipped():
    # Last fired 21:00Z; the host sleeps; the loop runs again at 03:30Z.
    assert due("none", "2026-11-30T21:00:00Z", "2026-12-01T03:30:00Z") == [DueSlot(at("2026-12-01T03:00:00Z"), 5)]


def test_last_fires_the_newest_missed_slot_then_the_current_one():
    assert due("last", "2026-11-30T21:00:00Z", "2026-12-01T03:30:00Z") == [DueSlot(at("2026-12-01T02:00:00Z"), 4)]
    assert due("last", "2026-12-01T02:00:00Z", "2026-12-01T03:30:01Z") == [DueSlot(at("2026-12-01T03:00:00Z"), 0)]
    assert due("last", "2026-12-01T03:00:00Z", "2026-12-01T03:59:59Z") == []


def test_all_fires_every_missed_slot_in_order():
    slots = due("all", "2026-11-30T21:00:00Z", "2026-12-01T03:30:00Z")
    assert [s.slot for s in slots] == [at(f"2026-11-30T{h}:00:00Z") for h in (22, 23)] + [
        at(f"2026-12-01T0{h}:00:00Z") for h in range(4)
    ]
    assert [s.skipped_slots for s in slots] == [0] * 6


def test_all_beyond_the_limit_counts_the_oldest_as_skipped_on_the_first_tick():
    slots = due("all", "2026-11-30T21:00:00Z", "2026-12-01T03:30:00Z", limit=2)
    assert slots == [DueSlot(at("2026-12-01T02:00:00Z"), 4), DueSlot(at("2026-12-01T03:00:00Z"), 0)]


def test_a_fresh_or_re_enabled_loop_fires_the_current_slot_without_skips():
    assert due("none", None, "2026-12-01T03:30:00Z") == [DueSlot(at("2026-12-01T03:00:00Z"), 0)]
    assert due("all", "2026-11-01T00:00:00Z", "2026-12-01T03:30:00Z", fresh=True) == [
        DueSlot(at("2026-12-01T03:00:00Z"), 0)
    ]


def test_nothing_fires_within_the_last_fired_slot():
    for policy in ("none", "last", "all"):
        assert due(policy, "2026-12-01T03:00:00Z", "2026-12-01T03:59:59Z") == []
        # A clock that went backwards fires nothing either.
        assert due(policy, "2026-12-01T03:00:00Z", "2026-12-01T01:00:00Z") == []


@given(instants, st.integers(min_value=0, max_value=5000), cadences, st.integers(min_value=1, max_value=1000))
def test_catch_up_accounts_for_every_missed_slot(last_instant, gap, cadence, limit):
    last = slot_floor(last_instant, cadence)
    now = last + timedelta(seconds=cadence * gap) + timedelta(seconds=cadence - 1)
    kwargs = dict(rule=Interval(cadence), last_fired=last, fresh=False, now=now, catchup_limit=limit)
    if gap == 0:
        assert due_slots(catch_up="none", **kwargs) == []
        return
    none = due_slots(catch_up="none", **kwargs)
    assert none == [DueSlot(last + timedelta(seconds=cadence * gap), gap - 1)]
    everything = due_slots(catch_up="all", **kwargs)
    assert len(everything) + everything[0].skipped_slots == gap
    assert everything[-1].slot == none[0].slot
    assert all(b.slot - a.slot == timedelta(seconds=cadence) for a, b in zip(everything, everything[1:], strict=False))


def test_interval_neighbours_of_a_slot_and_of_an_instant_between_slots():
    hourly = Interval(HOUR)
    slot, inside = at("2026-12-01T03:00:00Z"), at("2026-12-01T03:30:00Z")
    assert (hourly.floor(slot), hourly.after(slot), hourly.before(slot), hourly.ceil(slot)) == (
        slot, at("2026-12-01T04:00:00Z"), at("2026-12-01T02:00:00Z"), slot,
    )
    assert (hourly.floor(inside), hourly.after(inside), hourly.before(inside), hourly.ceil(inside)) == (
        slot, at("2026-12-01T04:00:00Z"), slot, at("2026-12-01T04:00:00Z"),
    )


def test_interval_between_counts_the_slots_strictly_inside_as_an_integer():
    hourly = Interval(HOUR)
    counts = [hourly.between(at("2026-12-01T00:00:00Z"), at(f"2026-12-01T0{h}:00:00Z")) for h in range(6)]
    assert counts == [0, 0, 1, 2, 3, 4]
    # An int, not 4.0: the count is written into ticks (JSON) as it is.
    assert [type(n) for n in counts] == [int] * 6
    assert hourly.between(at("2026-12-01T05:00:00Z"), at("2026-12-01T00:00:00Z")) == 0


def test_last_with_one_missed_slot_fires_it_without_skips():
    # Last fired 01:00Z; 02:00Z was missed; it is 03:30Z: 02:00Z fires now, 03:00Z next iteration.
    assert due("last", "2026-12-01T01:00:00Z", "2026-12-01T03:30:00Z") == [DueSlot(at("2026-12-01T02:00:00Z"), 0)]


def test_none_and_all_right_after_the_next_slot_fire_it_without_skips():
    for policy in ("none", "all"):
        assert due(policy, "2026-12-01T02:00:00Z", "2026-12-01T03:00:00Z") == [DueSlot(at("2026-12-01T03:00:00Z"), 0)]


def test_all_within_the_limit_exactly_fires_every_slot_without_skips():
    slots = due("all", "2026-12-01T00:00:00Z", "2026-12-01T03:10:00Z", limit=3)
    assert slots == [DueSlot(at(f"2026-12-01T0{h}:00:00Z"), 0) for h in (1, 2, 3)]
    assert due("all", "2026-12-01T00:00:00Z", "2026-12-01T03:10:00Z", limit=1) == [
        DueSlot(at("2026-12-01T03:00:00Z"), 2)
    ]


def test_an_unknown_policy_is_refused_by_name():
    with pytest.raises(ValueError) as refused:
        due("sometimes", "2026-12-01T00:00:00Z", "2026-12-01T03:10:00Z")
    assert str(refused.value) == "unknown catch-up policy 'sometimes'"
    # Policies are lower case: "NONE" is not "none".
    with pytest.raises(ValueError, match="unknown catch-up policy 'NONE'"):
        due("NONE", "2026-12-01T00:00:00Z", "2026-12-01T03:10:00Z")


@given(instants, cadences, st.integers(min_value=0, max_value=100))
def test_interval_rule_properties(instant, cadence, gap):
    rule = Interval(cadence)
    step = timedelta(seconds=cadence)
    floor = rule.floor(instant)
    assert floor == slot_floor(instant, cadence)
    assert rule.after(instant) == floor + step
    assert rule.before(instant) == (floor if floor < instant else floor - step)
    assert rule.ceil(instant) == (instant if floor == instant else floor + step)
    assert rule.before(rule.after(floor)) == floor == rule.ceil(floor)
    count = rule.between(floor, floor + gap * step)
    assert (count, type(count)) == (max(0, gap - 1), int)
