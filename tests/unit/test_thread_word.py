"""The word a thread gives its helper thread (ops.thread_word.WorkWord; docs/design.md §5, §8;
docs/performance.md, "An idle second"): the helper looks when the word is stale or says work
given after its last look, sleeps ``QUIET_SECONDS`` while a fresh word says nothing, else its own
second, and a word of work or no word wakes it at once. The clock is the test's."""

import math
import threading
import time

import pytest

from ops import thread_word
from ops.thread_word import WorkWord

#: The helper thread's own second in these tests, in seconds.
SECOND = 0.75


@pytest.fixture
def clock():
    """A monotonic clock the test sets, in seconds."""
    return [100.0]


@pytest.fixture
def word(clock):
    return WorkWord(clock=lambda: clock[0])


def test_a_word_holds_one_and_a_half_seconds_and_a_word_of_nothing_lets_the_helper_sleep_five():
    assert (thread_word.WORD_SECONDS, thread_word.QUIET_SECONDS) == (1.5, 5.0)


def test_with_no_word_yet_the_helper_looks_every_second_of_its_own(word):
    assert word.wanted.is_set() is False
    assert (word.due(-math.inf), word.due(99.0)) == (True, True)
    assert word.wait_seconds(-math.inf, otherwise=SECOND) == SECOND


def test_a_fresh_word_of_nothing_keeps_the_helper_asleep_without_waking_it_until_it_is_stale(word, clock):
    word.tell(False)
    assert word.wanted.is_set() is False
    assert (word.due(99.0), word.wait_seconds(99.0, otherwise=SECOND)) == (False, 5.0)
    clock[0] += 1.5
    assert (word.due(99.0), word.wait_seconds(99.0, otherwise=SECOND)) == (False, 5.0)
    clock[0] += 0.01  # the teller lagged, hangs or stopped answering: the helper asks for itself
    assert (word.due(99.0), word.wait_seconds(99.0, otherwise=SECOND)) == (True, SECOND)


def test_a_word_of_work_wakes_the_helper_once_per_word(word, clock):
    word.tell(True)
    assert word.wanted.is_set() is True
    assert (word.due(99.0), word.wait_seconds(99.0, otherwise=SECOND)) == (True, 0.0)  # given after the look began
    assert (word.due(100.0), word.wait_seconds(100.0, otherwise=SECOND)) == (False, SECOND)  # the look saw it
    clock[0] += 1.0
    word.tell(True)
    assert (word.due(100.0), word.wait_seconds(100.0, otherwise=SECOND)) == (True, 0.0)


def test_no_word_wakes_the_helper_to_ask_for_itself_from_then_on(word, clock):
    word.tell(False)
    word.tell(None)  # a lease held elsewhere, a failure, a command about to run, a stop
    assert word.wanted.is_set() is True
    clock[0] += 60.0
    assert (word.due(159.0), word.wait_seconds(159.0, otherwise=SECOND)) == (True, SECOND)


def test_a_word_given_during_the_wait_ends_it_and_one_seen_before_it_does_not(word, clock):
    word.tell(True)
    started = time.monotonic()
    word.wait(100.0, otherwise=0.05)  # the look began at the word's instant: wanted is cleared
    assert time.monotonic() - started >= 0.04
    word.tell(False)
    waiter = threading.Thread(target=word.wait, args=(100.0,), kwargs={"otherwise": SECOND})
    started = time.monotonic()
    waiter.start()
    time.sleep(0.1)
    assert waiter.is_alive()  # asleep for QUIET_SECONDS
    clock[0] += 0.5
    word.tell(True)
    waiter.join(timeout=2)
    assert waiter.is_alive() is False and time.monotonic() - started < 1.0
