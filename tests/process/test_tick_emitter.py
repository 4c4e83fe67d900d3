"""Two slot loops on one database: exactly one emits ticks; kill it and the other takes over within 5 s,
the slots of that window late but none lost and none doubled (docs/design.md §5; docs/operations.md).

Run on the suite's database kind: a SQLite file, or a PostgreSQL database of their own.
"""

import signal
from datetime import datetime, timedelta

import pytest
from django.db import connection

from tests.processes import stop, wait_for

pytestmark = [pytest.mark.process, pytest.mark.django_db]

#: A loop every second that catches up every missed slot, and nothing else.
EVERY_SECOND = (
    "schedules:\n  heartbeat:\n    enabled: false\n"
    "  fast:\n    eventType: clock.tick.heartbeat\n    catchUp: all\n    singleton: false\n"
    "    enabled: true\n    every: 1s\n"
)
HOLDER = "from schedules.models import TickEmitterLease as L; r = L.objects.first(); print(r.holder if r else '')"


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def fast_ticks(runtime) -> list[dict]:
    events = runtime.listing("events")
    return sorted((e for e in events if e["eventId"].startswith("clock:fast:")), key=lambda e: e["payload"]["slot"])


def holder_pid(runtime) -> int | None:
    holder = runtime.manage("shell", "-v", "0", "-c", HOLDER).stdout.strip()
    return int(holder.split(":")[1]) if holder else None


def test_killing_the_emitter_hands_the_ticks_to_the_other_slot_loop_losing_and_doubling_none(runtime):
    runtime.write_config("schedule.yaml", EVERY_SECOND)
    loops = {p.pid: p for p in (runtime.start("slot_loop"), runtime.start("slot_loop"))}
    try:
        first_holder = wait_for(lambda: holder_pid(runtime), timeout=40, what="a tick emitter")
        assert first_holder in loops
        wait_for(lambda: len(fast_ticks(runtime)) >= 3, timeout=30, what="three ticks")
        assert holder_pid(runtime) == first_holder  # held, not passed back and forth
        loops[first_holder].send_signal(signal.SIGKILL)
        survivor = next(pid for pid in loops if pid != first_holder)
        wait_for(lambda: holder_pid(runtime) == survivor, timeout=15, what="the other slot loop taking over")
        count = len(fast_ticks(runtime))
        wait_for(lambda: len(fast_ticks(runtime)) >= count + 3, timeout=20, what="three more ticks")
    finally:
        code, output = stop(loops[survivor]) if "survivor" in locals() else (0, "")
        for process in loops.values():
            if process.poll() is None:
                process.kill()
    assert code == 0, output

    ticks = fast_ticks(runtime)
    slots = [instant(t["payload"]["slot"]) for t in ticks]
    assert len(set(slots)) == len(slots)
    assert all(b - a == timedelta(seconds=1) for a, b in zip(slots, slots[1:], strict=False)), slots
    assert [t["payload"]["skippedSlots"] for t in ticks] == [0] * len(ticks)
    # The slots of the takeover window: late by the lease's expiry (3 s) and one iteration at most,
    # with a second to spare for this machine; everything else on time.
    lateness = [instant(t["admittedAt"]) - instant(t["payload"]["slot"]) for t in ticks]
    assert max(lateness) <= timedelta(seconds=5), lateness
    assert sum(1 for late in lateness if late > timedelta(seconds=1)) <= 5, lateness


#: A planning backlog: events admitted through the inject door, waiting to be planned.
BACKLOG = (
    "from datetime import UTC, datetime\n"
    "from runtime.models import Event\n"
    "now = datetime.now(UTC)\n"
    "Event.objects.bulk_create([Event(uid=f'backlog-{{n}}', type='clock.tick.reaper', source='operator', subject='reaper',"
    " occurred_at=now, correlation_id=f'backlog-{{n}}', door='inject', admitted_at=now,"
    " payload={{'loop': 'reaper', 'slot': '2026-11-30T21:00:00Z', 'cadenceSeconds': 3600, 'skippedSlots': n}})"
    " for n in range({count})], batch_size=1000)\n"
)
UNPLANNED = "from runtime.models import Event; print(Event.objects.filter(planned_at__isnull=True).count())"


def test_ticks_are_on_time_while_a_planning_backlog_drains(runtime):
    runtime.write_config("schedule.yaml", EVERY_SECOND)
    # Enough that planning is still busy after three ticks: 20,000, then 40,000, drained sooner
    # each time planning sped up (40,000 in under six seconds on PostgreSQL once its statements
    # were prepared).
    runtime.manage("shell", "-v", "0", "-c", BACKLOG.format(count=60000))
    loop = runtime.start("slot_loop")
    try:
        wait_for(lambda: len(fast_ticks(runtime)) >= 3, timeout=40, what="three ticks")
        waiting = int(runtime.manage("shell", "-v", "0", "-c", UNPLANNED).stdout.strip())
        wait_for(lambda: len(fast_ticks(runtime)) >= 6, timeout=40, what="six ticks")
    finally:
        code, output = stop(loop)
    assert code == 0, output
    assert waiting > 0  # the ticks below were admitted while planning was still busy
    ticks = fast_ticks(runtime)
    lateness = [instant(t["admittedAt"]) - instant(t["payload"]["slot"]) for t in ticks]
    assert max(lateness) <= timedelta(seconds=1), lateness


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_terminate_backend is PostgreSQL's")
def test_a_slot_loops_terminated_connections_are_replaced_within_the_second_silently(runtime):
    runtime.write_config("schedule.yaml", EVERY_SECOND)
    loop = runtime.start("slot_loop")
    terminated = 0
    try:
        wait_for(lambda: len(fast_ticks(runtime)) >= 3, timeout=40, what="three ticks")
        terminated = runtime.terminate_connections(times=2, every=1.5)
        count = len(fast_ticks(runtime))
        wait_for(lambda: len(fast_ticks(runtime)) >= count + 3, timeout=20, what="three more ticks")
    finally:
        code, output = stop(loop)
    assert code == 0, output
    assert terminated >= 2
    # Replaced at the second's first statement and the second's work done again at once: no
    # failure logged, no slot skipped, no tick later than the others.
    assert "failed" not in output, output
    ticks = fast_ticks(runtime)
    assert [t["payload"]["skippedSlots"] for t in ticks] == [0] * len(ticks)
    lateness = [instant(t["admittedAt"]) - instant(t["payload"]["slot"]) for t in ticks]
    assert max(lateness) <= timedelta(seconds=1), lateness
