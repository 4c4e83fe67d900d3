"""The tick emitter lease: one slot-loop process at a time emits ticks, on the database's clock
(docs/design.md §5; docs/operations.md, "Several runserve processes")."""

from datetime import timedelta

import pytest

from ops.slot_loop import emit_once
from runtime.models import Event
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


def test_only_the_holder_emits(registry_files, monkeypatch):
    monkeypatch.setattr("ops.slot_loop.clock.database_now", lambda: at("2026-11-30T21:05:00.300Z"))
    other = EmitterLease("host-b:2:bb")
    assert other.hold(at("2026-11-30T21:05:00.100Z"))
    mine = EmitterLease("host-a:1:aa")
    assert emit_once(mine) is None
    assert Event.objects.count() == 0
    other.release(at("2026-11-30T21:05:00.200Z"))
    fired = emit_once(mine)
    assert [t.event_id for t in fired] == ["clock:heartbeat:2026-11-30T21:05:00Z"]
    assert mine.held is True


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
