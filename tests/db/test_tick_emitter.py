"""The tick emitter lease: one slot-loop process at a time emits ticks, on the database's clock
(docs/design.md §5; docs/operations.md, "Several runserve processes")."""

import os
from datetime import timedelta

import pytest

from lib.instants import format_instant
from ops.slot_loop import emit_once
from runtime.clock import database_now
from runtime.models import Event
from runtime.registry import get_registry
from schedules.emitter import LEASE_SECONDS, EmitterLease
from schedules.models import TickEmitterLease
from tests.conftest import at

pytestmark = pytest.mark.django_db

T0 = at("2026-11-30T21:00:00.200Z")


def seconds(n: float):
    return T0 + timedelta(seconds=n)


def test_one_holder_at_a_time_and_another_takes_over_only_after_expiry():
    first, second = EmitterLease("host-a:1:aa"), EmitterLease("host-b:2:bb")
    assert first.hold(seconds(0)) is True
    assert second.hold(seconds(1)) is False
    assert first.hold(seconds(2)) is True                       # renewed: until 2 + LEASE_SECONDS
    assert second.hold(seconds(2 + LEASE_SECONDS - 0.1)) is False
    assert second.hold(seconds(2 + LEASE_SECONDS)) is True      # expired on the database's clock
    assert first.hold(seconds(2 + LEASE_SECONDS + 0.5)) is False
    lease = TickEmitterLease.objects.get()
    assert (lease.name, lease.holder, lease.expires_at) == ("ticks", "host-b:2:bb", seconds(2 + 2 * LEASE_SECONDS))


def test_a_clean_release_lets_the_other_process_take_over_at_once():
    first, second = EmitterLease("host-a:1:aa"), EmitterLease("host-b:2:bb")
    assert first.hold(seconds(0))
    first.release(seconds(0.5))
    assert first.held is False
    assert second.hold(seconds(0.6)) is True
    assert TickEmitterLease.objects.get().holder == "host-b:2:bb"


def test_only_the_holder_emits(registry_files):
    # emit_once reads the database's clock in the lease's statement: the instants are real.
    other = EmitterLease("host-b:2:bb")
    assert other.hold(database_now())
    mine = EmitterLease("host-a:1:aa")
    assert emit_once(mine) is None
    assert Event.objects.count() == 0
    other.release(database_now())
    before = database_now()
    fired = emit_once(mine)
    cadence = timedelta(seconds=get_registry().loops["heartbeat"].cadence_seconds)
    assert [(t.loop, t.event_id) for t in fired] == [("heartbeat", f"clock:heartbeat:{format_instant(fired[0].slot)}")]
    assert before - cadence < fired[0].slot <= database_now()  # the slot of the database's instant
    assert mine.held is True


def test_hold_now_reads_the_database_clock_in_the_leases_one_statement(django_assert_num_queries):
    first, second = EmitterLease("host-a:1:aa"), EmitterLease("host-b:2:bb")
    before = database_now()
    held = first.hold_now()  # the first ask: the row is made
    assert held is not None and before <= held <= database_now()
    lease = TickEmitterLease.objects.get()
    assert (lease.holder, lease.acquired_at, lease.expires_at) == ("host-a:1:aa", held, held + timedelta(seconds=LEASE_SECONDS))
    with django_assert_num_queries(1):
        renewed = first.hold_now()
    assert renewed >= held
    lease = TickEmitterLease.objects.get()
    assert (lease.acquired_at, lease.expires_at) == (held, renewed + timedelta(seconds=LEASE_SECONDS))  # still held since
    assert second.hold_now() is None  # the row exists: one statement from the first ask on
    with django_assert_num_queries(1):
        assert second.hold_now() is None
    assert first.held and not second.held


def test_hold_now_takes_an_expired_lease_and_agrees_with_hold_on_the_stored_instants():
    first, second = EmitterLease("host-a:1:aa"), EmitterLease("host-b:2:bb")
    now = database_now()
    assert first.hold(now - timedelta(seconds=LEASE_SECONDS + 1))  # stored by hold: expired now
    assert second.hold(now - timedelta(seconds=0.5)) is True       # hold's text compares with it
    assert first.hold_now() is None                               # held by second until now + 2.5 s
    second.release(database_now())
    taken = first.hold_now()
    assert taken is not None and first.held
    assert second.hold(taken + timedelta(seconds=LEASE_SECONDS - 0.001)) is False
    assert second.hold(taken + timedelta(seconds=LEASE_SECONDS)) is True


def test_planning_waits_while_the_tick_thread_emits(monkeypatch):
    import threading

    from ops import slot_loop

    steps = []
    monkeypatch.setattr(slot_loop, "plan_pending", lambda **kw: steps.append(kw["limit"]) or kw["limit"])
    monkeypatch.setattr(slot_loop, "PLAN_LIMIT", 50)
    monkeypatch.setattr(slot_loop, "PLAN_STEP", 20)
    slot_loop.emitting.set()
    done = []
    planner = threading.Thread(target=lambda: done.append(slot_loop.plan_in_steps(now=T0, registry=None)))
    planner.start()
    planner.join(0.2)
    assert (steps, done) == ([], [])  # nothing planned while ticks are being emitted
    slot_loop.emitting.clear()
    planner.join(5)
    assert (steps, done) == ([20, 20, 10], [50])


def test_an_idle_tick_second_is_one_statement_on_postgresql_two_on_sqlite_and_tells_the_planning_thread_to_sleep(
    registry_files, django_assert_num_queries,
):
    """The lease (with the database's clock), then the doctor's row's update returning the
    ticks' and the backlog's question (issue 29's budget: two statements an idle second); on
    PostgreSQL the three are common table expressions of one statement."""
    from django.db import connection

    from ops import slot_loop
    from schedules.models import SlotLoopStatus

    lease = EmitterLease("host-a:1:aa")
    assert not SlotLoopStatus.objects.exists()
    emit_once(lease)  # the first: the lease's row, the doctor's row, the states' sync, the heartbeat's tick
    slot_loop.plan_pending(now=database_now(), registry=get_registry(), limit=100)
    emit_once(lease)  # an iteration with nothing due
    looked = slot_loop.planner_word.clock()
    one = connection.vendor == "postgresql"
    with django_assert_num_queries(1 if one else 2) as captured:
        assert emit_once(lease) == []
    assert [q["sql"].split()[0] for q in captured.captured_queries] == (["WITH"] if one else ["WITH", "UPDATE"])
    assert " RETURNING " in captured.captured_queries[-1]["sql"]
    assert slot_loop.planner_word.due(looked) is False
    row = SlotLoopStatus.objects.get()
    held_at = TickEmitterLease.objects.get().expires_at - timedelta(seconds=LEASE_SECONDS)
    assert (row.pid, row.last_iteration_at) == (os.getpid(), held_at)
    assert 0 < row.last_iteration_seconds < 1


def test_a_tick_second_with_work_records_its_iteration_again_when_it_ends(registry_files):
    """A second whose question says "work" is recorded by the question's statement and again
    after its ticks, at the lease's latest instant, with the whole iteration's time."""
    from ops import slot_loop
    from schedules.models import SlotLoopStatus

    slot_loop.record_iteration(database_now() - timedelta(seconds=10))  # the row exists
    lease = EmitterLease("host-a:1:aa")
    recorded = []
    real = slot_loop.record_iteration
    slot_loop.record_iteration = lambda now, seconds=None: (recorded.append((now, seconds)), real(now, seconds=seconds))
    try:
        fired = emit_once(lease)
    finally:
        slot_loop.record_iteration = real
    assert [report.loop for report in fired] == ["heartbeat"] and Event.objects.count() == 1
    assert len(recorded) == 1 and recorded[0][1] > 0
    row = SlotLoopStatus.objects.get()
    assert (row.last_iteration_at, row.last_iteration_seconds) == recorded[0]


def nothing_to_plan(lease: EmitterLease) -> float:
    """Tick and plan until nothing is left, then one more tick thread check, which tells the
    planning thread so; returns the instant (``time.monotonic``) the planning thread looks at."""
    from ops import slot_loop

    emit_once(lease)
    slot_loop.plan_pending(now=database_now(), registry=get_registry(), limit=100)
    emit_once(lease)
    looked = slot_loop.planner_word.clock()
    assert slot_loop.planner_word.due(looked) is False
    return looked


def test_the_tick_threads_check_wakes_the_planning_thread_for_an_event_to_plan(registry_files):
    from ops import slot_loop
    from runtime.models import Door
    from runtime.services.admission import admit_batch
    from tests.events_door import envelope

    lease = EmitterLease("host-a:1:aa")
    looked = nothing_to_plan(lease)
    admit_batch([envelope()], door=Door.EVENTS, now=database_now(), registry=get_registry())
    slot_loop.planner_word.wanted.clear()
    assert emit_once(lease) == []
    assert slot_loop.planner_word.wanted.is_set() and slot_loop.planner_word.due(looked) is True


def test_the_planning_thread_asks_for_itself_when_the_tick_threads_word_is_old_or_it_holds_no_lease(
    registry_files, monkeypatch,
):
    from ops import slot_loop, thread_word

    lease = EmitterLease("host-a:1:aa")
    looked = nothing_to_plan(lease)
    later = looked + thread_word.WORD_SECONDS + 0.1
    monkeypatch.setattr(slot_loop.planner_word, "clock", lambda: later)
    assert slot_loop.planner_word.due(looked) is True  # the tick thread lagged or stopped checking
    monkeypatch.undo()
    emit_once(lease)
    assert slot_loop.planner_word.due(looked) is False
    lease.release(database_now())
    assert EmitterLease("host-b:2:bb").hold(database_now())
    assert emit_once(lease) is None  # another process holds the lease: no check made here
    assert slot_loop.planner_word.due(slot_loop.planner_word.clock()) is True



def test_the_tick_thread_says_its_seconds_fail_from_a_failure_until_a_second_works(monkeypatch):
    import threading

    from django.db import IntegrityError

    from ops import slot_loop
    from ops.failure_streak import FailureStreak

    outcomes = [None, IntegrityError("a chunk refused"), IntegrityError("a chunk refused"), None]

    def emit_once(lease):
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    stop, failing = threading.Event(), []

    def second_over(timeout):
        failing.append(slot_loop.ticks_failing.is_set())
        if not outcomes:
            stop.set()

    monkeypatch.setattr(slot_loop, "emit_once", emit_once)
    monkeypatch.setattr("ops.loop_connection.close_old_connections", lambda: None)
    monkeypatch.setattr(stop, "wait", second_over)
    slot_loop.tick_until(stop, None, FailureStreak(slot_loop.logger, what="tick emission", action="test"))
    assert failing == [False, True, True, False]


def test_no_thread_records_an_iteration_while_the_tick_threads_seconds_fail(registry_files, monkeypatch):
    """The doctor's row goes stale, and ``slotLoopStale`` is raised 10 s after the first failing
    second, though the process still asks and plans (docs/design.md §11)."""
    from ops import loop_status, slot_loop
    from schedules.models import SlotLoopStatus

    lease = EmitterLease("host-a:1:aa")
    nothing_to_plan(lease)
    old = database_now() - timedelta(seconds=30)

    def recorded() -> bool:
        """Whether an iteration was recorded since the row was set back to ``old``."""
        return SlotLoopStatus.objects.get().last_iteration_at != old

    SlotLoopStatus.objects.update(last_iteration_at=old)
    monkeypatch.setattr(loop_status, "_recorded", [float("-inf")])  # the planning thread would record
    slot_loop.ticks_failing.set()
    try:
        assert emit_once(lease) == []
        slot_loop.plan_iteration(lease)
        assert recorded() is False
    finally:
        slot_loop.ticks_failing.clear()
    emit_once(lease)
    assert recorded() is True
    SlotLoopStatus.objects.update(last_iteration_at=old)
    monkeypatch.setattr(loop_status, "_recorded", [float("-inf")])
    slot_loop.plan_iteration(lease)
    assert recorded() is True


def test_a_process_that_does_not_hold_the_lease_records_no_iteration(registry_files, monkeypatch):
    """Another process's planning thread does not keep the doctor's row fresh: a lease holder
    whose seconds fail or hang raises ``slotLoopStale`` all the same (docs/design.md §11)."""
    from ops import loop_status, slot_loop
    from schedules.models import SlotLoopStatus

    holder, other = EmitterLease("host-a:1:aa"), EmitterLease("host-b:2:bb")
    nothing_to_plan(holder)
    old = database_now() - timedelta(seconds=30)
    SlotLoopStatus.objects.update(last_iteration_at=old)
    monkeypatch.setattr(loop_status, "_recorded", [float("-inf")])  # nothing recorded by this process
    assert emit_once(other) is None  # the lease is host-a's
    slot_loop.plan_iteration(other)
    assert SlotLoopStatus.objects.get().last_iteration_at == old
    assert emit_once(holder) == []
    SlotLoopStatus.objects.update(last_iteration_at=old)
    monkeypatch.setattr(loop_status, "_recorded", [float("-inf")])
    slot_loop.plan_iteration(holder)
    assert SlotLoopStatus.objects.get().last_iteration_at > old
