"""How long the slot loop's planning thread sleeps between iterations (ops.slot_loop.planning_wait):
long while the tick thread's word says there is nothing, and woken by every other word."""

import pytest

from ops import slot_loop


@pytest.fixture
def clocks(monkeypatch):
    """The monotonic instant (settable) and a host clock 0.25 s into its second."""
    now = [100.0]
    monkeypatch.setattr(slot_loop.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(slot_loop.time, "time", lambda: 1_000.25)
    monkeypatch.setattr(slot_loop, "_word", [(float("-inf"), True)])
    slot_loop.plan_wanted.clear()
    yield now
    slot_loop.plan_wanted.clear()


def test_a_word_of_nothing_lets_the_planning_thread_sleep_without_waking_it(clocks):
    slot_loop.tell_planner(work=False)
    assert slot_loop.plan_wanted.is_set() is False
    assert slot_loop.planning_wait(looked=99.0) == slot_loop.PLANNER_QUIET_SECONDS == 5.0


def test_a_word_of_work_wakes_it_and_one_given_during_its_iteration_is_not_lost(clocks):
    slot_loop.tell_planner(work=True)
    assert slot_loop.plan_wanted.is_set() is True
    assert slot_loop.planning_wait(looked=99.0) == 0.0     # given after the iteration began
    assert slot_loop.planning_wait(looked=100.5) == 0.75   # the iteration saw it: to the next second


def test_no_word_wakes_it_to_ask_for_itself_every_second(clocks):
    slot_loop.tell_planner(work=None)  # the lease held elsewhere, a failure, a stop
    assert slot_loop.plan_wanted.is_set() is True
    assert slot_loop.planning_wait(looked=99.0) == 0.75


def test_a_word_older_than_the_tick_threads_second_is_not_trusted(clocks):
    slot_loop.tell_planner(work=False)
    clocks[0] += slot_loop.PLANNER_WORD_SECONDS + 0.1   # the tick thread hangs
    assert slot_loop.planning_wait(looked=99.0) == 0.75
