"""The write turn's waiter (``runtime.sqlite_backend.turn``): one thread a connection, kept from its
first wait to the connection's close, woken for each wait; a turn that comes after its taker
gave up is given back, and a file closed while its waiter is in ``flock`` is closed by the waiter."""

import fcntl
import gc
import os
import threading
import time

import pytest

from runtime.sqlite_backend.turn import TurnFile
from tests.helpers import open_copies

TIMEOUT = 10


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "db.sqlite3-writers.lock")


def held(path: str) -> bool:
    """Whether some open file holds the turn (asked on a file of its own, without waiting)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def waiters() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "sqlite-write-turn"]


def eventually(predicate, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def take_later(turn: TurnFile, timeout: float) -> tuple[threading.Thread, list]:
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(turn.take(timeout)))
    thread.start()
    return thread, outcome


def test_a_free_turn_is_taken_without_a_waiter(path):
    turn = TurnFile(path)
    before = waiters()
    assert turn.take(1) is True
    turn.give_back()
    assert waiters() == before
    turn.close()


def test_one_waiter_serves_every_wait_of_its_connection_and_ends_with_it(path):
    holder, waiting = TurnFile(path), TurnFile(path)
    before = set(waiters())
    kept = None
    for _ in range(3):
        assert holder.take(1)
        thread, outcome = take_later(waiting, TIMEOUT)
        eventually(lambda: len(set(waiters()) - before) == 1, "no waiter queued")
        started = (set(waiters()) - before).pop()
        assert kept in (None, started)
        kept = started
        time.sleep(0.05)
        assert outcome == []  # still the holder's
        holder.give_back()
        thread.join(TIMEOUT)
        assert outcome == [True]
        assert held(path)  # the waiting connection's now
        waiting.give_back()
        assert not held(path)
    waiting.close()
    kept.join(TIMEOUT)
    assert not kept.is_alive() and open_copies(path) == 1
    holder.close()


def test_a_turn_that_comes_after_its_taker_gave_up_is_given_back_and_the_closed_file_closed_by_the_waiter(path):
    holder, late = TurnFile(path), TurnFile(path)
    before = set(waiters())
    assert holder.take(1)
    assert late.take(0.1) is False
    [waiter] = set(waiters()) - before
    late.close()  # its waiter is in flock on the file: it closes it when flock returns
    assert open_copies(path) == 2 and waiter.is_alive()
    holder.give_back()
    waiter.join(TIMEOUT)
    assert not waiter.is_alive() and open_copies(path) == 1
    third = TurnFile(path)
    assert third.take(0) is True  # given back: free
    third.close()
    holder.close()


def test_a_connection_dropped_unclosed_ends_its_idle_waiter_and_closes_its_file(path):
    holder, dropped = TurnFile(path), TurnFile(path)
    before = set(waiters())
    assert holder.take(1)
    thread, outcome = take_later(dropped, TIMEOUT)
    eventually(lambda: len(set(waiters()) - before) == 1, "no waiter queued")
    [waiter] = set(waiters()) - before
    holder.give_back()
    thread.join(TIMEOUT)
    assert outcome == [True]
    dropped.give_back()
    del dropped, thread
    gc.collect()
    waiter.join(TIMEOUT)
    assert not waiter.is_alive() and open_copies(path) == 1
    holder.close()
