"""An idle worker's preview thread takes the run thread's answer instead of asking the database
(ops/worker.py, ``PreviewWord``; docs/performance.md, "An idle second")."""

import threading
import time

import pytest

from ops import worker


@pytest.fixture
def clock(monkeypatch):
    """The worker module's monotonic clock, set by the test."""
    now = [1000.0]
    monkeypatch.setattr(worker.time, "monotonic", lambda: now[0])
    return now


def test_with_no_word_yet_the_preview_thread_asks(clock):
    assert worker.PreviewWord().due(float("-inf")) is True


def test_a_fresh_word_that_no_preview_is_open_keeps_it_from_asking(clock):
    word = worker.PreviewWord()
    word.tell(False)
    assert word.wanted.is_set() is False
    clock[0] += worker.WORD_SECONDS
    assert word.due(999.0) is False
    clock[0] += 0.01
    assert word.due(999.0) is True  # the run thread is busy or failing: ask for itself


def test_an_open_preview_wakes_it_once_per_word(clock):
    word = worker.PreviewWord()
    word.tell(True)
    assert word.wanted.is_set() is True
    assert word.due(999.0) is True
    assert word.due(1000.0) is False  # a look began at the word's instant: it has answered it
    clock[0] += 1
    word.tell(True)
    assert word.due(1000.0) is True


def test_the_preview_thread_sleeps_long_only_while_the_word_says_none_is_open(clock):
    word = worker.PreviewWord()
    assert word.wait_seconds(float("-inf")) == worker.IDLE_SLEEP_SECONDS == 1.0  # no word yet
    word.tell(False)
    assert word.wait_seconds(999.0) == worker.QUIET_SECONDS == 5.0
    word.tell(True)
    assert (word.wait_seconds(999.0), word.wait_seconds(1000.0)) == (0.0, 1.0)
    clock[0] += worker.WORD_SECONDS + 0.01
    assert word.wait_seconds(999.0) == 1.0  # the run thread is busy or failing


def test_a_run_thread_about_to_run_a_command_wakes_the_preview_thread_to_ask_for_itself(clock):
    word = worker.PreviewWord()
    word.tell(False)
    word.tell(None)
    assert (word.wanted.is_set(), word.due(999.0), word.wait_seconds(999.0)) == (True, True, 1.0)


def test_the_preview_thread_asks_only_when_the_word_says_so(monkeypatch):
    calls = []
    monkeypatch.setattr(worker, "preview_one", lambda **kwargs: calls.append(kwargs["worker"]) and False)
    monkeypatch.setattr(worker, "IDLE_SLEEP_SECONDS", 0.05)
    word, stop = worker.PreviewWord(), threading.Event()
    word.tell(False)
    thread = threading.Thread(target=worker.run_previews, kwargs={"stop": stop, "word": word}, daemon=True)
    thread.start()
    time.sleep(0.3)
    assert calls == []
    word.tell(True)
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(calls) == 1
    stop.set()
    word.wanted.set()
    thread.join(timeout=5)
    assert thread.is_alive() is False
