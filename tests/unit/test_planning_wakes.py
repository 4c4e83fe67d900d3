"""The slot loop's planning thread takes the tick thread's word (ops.slot_loop.planner_word, a
``WorkWord``; docs/design.md §5): it sleeps while the word says there is nothing to plan, a word
of work wakes it, and the tick thread's stop wakes it to stop."""

import threading
import time

from ops import slot_loop
from ops.thread_word import WorkWord


def test_the_planning_threads_own_second_is_to_the_next_second_of_the_host_clock(monkeypatch):
    monkeypatch.setattr(slot_loop.time, "time", lambda: 1_000.25)
    assert slot_loop.to_next_second() == 0.75


def wait_for(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_the_planning_thread_sleeps_while_the_word_says_nothing_and_a_word_of_work_wakes_it(monkeypatch):
    now = [100.0]
    word = WorkWord(clock=lambda: now[0])
    looks = []
    monkeypatch.setattr(slot_loop, "planner_word", word)
    monkeypatch.setattr(slot_loop, "run_tick_emitter", lambda **kwargs: None)  # the test is the tick thread
    monkeypatch.setattr(slot_loop, "step_on_connection", lambda step, *args: looks.append(step))
    monkeypatch.setattr(slot_loop, "to_next_second", lambda: 0.05)
    stop = threading.Event()
    planner = threading.Thread(target=slot_loop.run_slot_loop, kwargs={"stop": stop}, daemon=True)
    planner.start()
    wait_for(lambda: looks)
    assert looks == [slot_loop.plan_iteration]  # no word yet: it asks for itself
    word.tell(False)
    time.sleep(0.3)
    assert len(looks) == 1  # six of its own seconds passed: it sleeps while the word says nothing
    now[0] += 1.0
    word.tell(True)
    wait_for(lambda: len(looks) == 2)
    assert len(looks) == 2
    word.tell(False)
    stop.set()
    word.tell(None)  # the tick thread's stop (run_tick_emitter) wakes it to see the stop
    planner.join(timeout=2)
    assert planner.is_alive() is False
