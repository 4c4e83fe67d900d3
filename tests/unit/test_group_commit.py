"""``lib.group_commit.GroupCommit``: items submitted while a write runs share the next write;
a lone item is written at once; a failing batch is written again item by item; the group is
taken once its opening is entered."""

import threading
import time
from contextlib import contextmanager

import pytest

from lib.group_commit import GroupCommit

TIMEOUT = 10


class Writes:
    """A ``write`` that records its batches and, while ``hold`` is clear, blocks the first one
    until ``release`` is set (so the test can queue items behind it)."""

    def __init__(self, fail_on=(), wrong_count=False):
        self.batches: list[list] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail_on = set(fail_on)
        self.wrong_count = wrong_count

    def __call__(self, batch):
        self.batches.append(list(batch))
        if len(self.batches) == 1:
            self.entered.set()
            assert self.release.wait(TIMEOUT)
        if self.fail_on & set(batch):
            raise RuntimeError(f"refused {sorted(self.fail_on & set(batch))}")
        if self.wrong_count:
            return []
        return [ValueError(item) if item.startswith("bad") else item.upper() for item in batch]


def submit_in_threads(
    group: GroupCommit, items: list[str], name: str | None = None,
) -> tuple[dict[str, object], list[threading.Thread]]:
    """Submit each item on its own thread (named ``name`` when given): ({item: result or the
    exception raised}, the threads)."""
    outcomes: dict[str, object] = {}

    def one(item):
        try:
            outcomes[item] = group.submit(item)
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            outcomes[item] = exc

    threads = [threading.Thread(target=one, args=(item,), name=name, daemon=True) for item in items]
    for thread in threads:
        thread.start()
    return outcomes, threads


def queue_behind_first(group: GroupCommit, writes: Writes, first: str, others: list[str]) -> dict:
    """``first`` is written alone and held; ``others`` queue behind it; then all are let go."""
    outcomes, threads = submit_in_threads(group, [first])
    assert writes.entered.wait(TIMEOUT)
    more, more_threads = submit_in_threads(group, others)
    wait_until(lambda: len(group._queue) == len(others))
    writes.release.set()
    for thread in threads + more_threads:
        thread.join(TIMEOUT)
        assert not thread.is_alive()
    return {**outcomes, **more}


def wait_until(predicate) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, "the items never queued"
        time.sleep(0.01)


def test_a_lone_item_is_written_at_once_as_a_batch_of_one():
    writes = Writes()
    writes.release.set()
    group = GroupCommit(writes)
    assert group.submit("a") == "A"
    assert group.submit("b") == "B"
    assert writes.batches == [["a"], ["b"]]
    assert (group.batches, group.items) == (2, 2)


def test_items_submitted_during_a_write_share_the_next_write():
    writes = Writes()
    group = GroupCommit(writes)
    outcomes = queue_behind_first(group, writes, "a", ["b", "c", "d"])
    assert outcomes == {"a": "A", "b": "B", "c": "C", "d": "D"}
    assert writes.batches[0] == ["a"]
    assert sorted(writes.batches[1]) == ["b", "c", "d"]
    assert len(writes.batches) == 2
    assert (group.batches, group.items) == (2, 4)
    assert not group._writing and group._queue == []


def test_an_exception_result_is_raised_in_its_own_thread_only():
    writes = Writes()
    group = GroupCommit(writes)
    outcomes = queue_behind_first(group, writes, "a", ["b", "bad1", "c"])
    assert (outcomes["a"], outcomes["b"], outcomes["c"]) == ("A", "B", "C")
    assert isinstance(outcomes["bad1"], ValueError) and outcomes["bad1"].args == ("bad1",)


def test_a_batch_that_fails_whole_is_written_again_item_by_item():
    writes = Writes(fail_on={"x"})
    group = GroupCommit(writes)
    outcomes = queue_behind_first(group, writes, "a", ["b", "x", "c"])
    assert (outcomes["a"], outcomes["b"], outcomes["c"]) == ("A", "B", "C")
    assert isinstance(outcomes["x"], RuntimeError) and str(outcomes["x"]) == "refused ['x']"
    assert sorted(writes.batches[1]) == ["b", "c", "x"]
    assert sorted(writes.batches[2:]) == [["b"], ["c"], ["x"]]
    assert len(writes.batches) == 5


def test_a_lone_item_that_fails_raises_its_error_and_the_group_goes_on():
    writes = Writes(fail_on={"x"})
    writes.release.set()
    group = GroupCommit(writes)
    with pytest.raises(RuntimeError, match=r"refused \['x'\]"):
        group.submit("x")
    assert group.submit("a") == "A"
    assert writes.batches == [["x"], ["a"]]


def test_a_write_returning_the_wrong_number_of_results_fails_every_item_of_it():
    writes = Writes(wrong_count=True)
    writes.release.set()
    group = GroupCommit(writes)
    with pytest.raises(ValueError, match="write returned 0 results for 1 items"):
        group.submit("a")
    assert not group._writing


def test_many_threads_all_get_their_own_result_and_nobody_is_left_waiting():
    writes = Writes()
    writes.release.set()
    group = GroupCommit(writes)
    items = [f"item{n}" for n in range(200)]
    outcomes, threads = submit_in_threads(group, items)
    for thread in threads:
        thread.join(TIMEOUT)
        assert not thread.is_alive()
    assert outcomes == {item: item.upper() for item in items}
    assert sorted(item for batch in writes.batches for item in batch) == sorted(items)
    assert group.items == 200 and not group._writing and group._queue == []


class PausingLock:
    """The group's lock, except that the thread named ``pause_thread`` stops right after its
    first release until ``resume`` is set: the moment between queueing an item and looking
    whether it was handed the lead."""

    def __init__(self, pause_thread: str):
        self._lock = threading.Lock()
        self.pause_thread = pause_thread
        self.paused = threading.Event()
        self.resume = threading.Event()

    def __enter__(self):
        self._lock.acquire()

    def __exit__(self, *exc):
        self._lock.release()
        if threading.current_thread().name == self.pause_thread and not self.paused.is_set():
            self.paused.set()
            assert self.resume.wait(TIMEOUT)


def test_an_item_handed_the_lead_before_it_starts_waiting_leads_and_releases_its_whole_batch():
    # The lead was handed to an item whose thread had queued it but not yet begun to wait:
    # that thread then led without waiting, and ended its write by releasing its own
    # already-released wake-up lock — RuntimeError in its request, and every other request
    # of its batch waiting for ever (seen with four HTTP workers under load).
    writes = Writes()
    group = GroupCommit(writes)
    group._lock = PausingLock(pause_thread="late")
    outcomes, (first,) = submit_in_threads(group, ["a"])
    assert writes.entered.wait(TIMEOUT)
    late_outcome, (late,) = submit_in_threads(group, ["b"], name="late")
    assert group._lock.paused.wait(TIMEOUT)
    writes.release.set()
    first.join(TIMEOUT)
    assert outcomes == {"a": "A"}
    assert group._queue[0].lead  # "b" holds the lead and has not yet looked
    others, other_threads = submit_in_threads(group, ["c", "d"])
    wait_until(lambda: len(group._queue) == 3)
    group._lock.resume.set()
    for thread in [late, *other_threads]:
        thread.join(TIMEOUT)
        assert not thread.is_alive()
    assert {**outcomes, **late_outcome, **others} == {"a": "A", "b": "B", "c": "C", "d": "D"}
    assert writes.batches[0] == ["a"] and sorted(writes.batches[1]) == ["b", "c", "d"]
    assert not group._writing and group._queue == []


class Openings:
    """An ``opening`` that logs each entry and how it was left, and holds its first entry
    until ``release`` is set (raising ``ConnectionError`` then when ``fail_first``)."""

    def __init__(self, fail_first: bool = False):
        self.log: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail_first = fail_first

    @contextmanager
    def __call__(self):
        first = not self.log
        self.log.append("enter")
        if first:
            self.entered.set()
            assert self.release.wait(TIMEOUT)
            if self.fail_first:
                raise ConnectionError("no write turn")
        try:
            yield
        except BaseException:
            self.log.append("rollback")
            raise
        self.log.append("commit")


def open_behind_first(group: GroupCommit, openings: Openings, first: str, others: list[str]) -> dict:
    """``first`` leads and is held in its opening; ``others`` queue meanwhile; then all are let go."""
    outcomes, threads = submit_in_threads(group, [first])
    assert openings.entered.wait(TIMEOUT)
    more, more_threads = submit_in_threads(group, others)
    wait_until(lambda: len(group._queue) == 1 + len(others))
    openings.release.set()
    for thread in threads + more_threads:
        thread.join(TIMEOUT)
        assert not thread.is_alive()
    return {**outcomes, **more}


def test_items_submitted_while_the_leader_enters_its_opening_join_its_batch():
    writes, openings = Writes(), Openings()
    writes.release.set()
    group = GroupCommit(writes, opening=openings)
    outcomes = open_behind_first(group, openings, "a", ["b", "c"])
    assert outcomes == {"a": "A", "b": "B", "c": "C"}
    assert [sorted(batch) for batch in writes.batches] == [["a", "b", "c"]]
    assert openings.log == ["enter", "commit"]
    assert (group.batches, group.items) == (1, 3)


def test_an_opening_that_fails_hands_its_error_to_every_waiting_item_and_writes_nothing():
    writes, openings = Writes(), Openings(fail_first=True)
    writes.release.set()
    group = GroupCommit(writes, opening=openings)
    outcomes = open_behind_first(group, openings, "a", ["b", "c"])
    assert sorted(outcomes) == ["a", "b", "c"]
    assert all(isinstance(error, ConnectionError) and str(error) == "no write turn" for error in outcomes.values())
    assert writes.batches == [] and group._queue == [] and not group._writing
    assert group.submit("d") == "D"
    assert openings.log == ["enter", "enter", "commit"]


def test_a_batch_that_fails_whole_is_undone_and_each_item_written_again_in_an_opening_of_its_own():
    writes, openings = Writes(fail_on={"x"}), Openings()
    writes.release.set()
    group = GroupCommit(writes, opening=openings)
    outcomes = open_behind_first(group, openings, "a", ["b", "x"])
    assert (outcomes["a"], outcomes["b"], str(outcomes["x"])) == ("A", "B", "refused ['x']")
    assert sorted(writes.batches[0]) == ["a", "b", "x"]
    assert sorted(writes.batches[1:]) == [["a"], ["b"], ["x"]]
    assert openings.log[:2] == ["enter", "rollback"]
    assert sorted(openings.log[2:]) == ["commit", "commit", "enter", "enter", "enter", "rollback"]


def test_a_batch_of_two_that_fails_whole_is_written_again_item_by_item():
    writes = Writes(fail_on={"x"})
    group = GroupCommit(writes)
    outcomes = queue_behind_first(group, writes, "a", ["b", "x"])
    assert (outcomes["a"], outcomes["b"], str(outcomes["x"])) == ("A", "B", "refused ['x']")
    assert sorted(writes.batches[1]) == ["b", "x"]
    assert sorted(writes.batches[2:]) == [["b"], ["x"]]
    assert len(writes.batches) == 4
