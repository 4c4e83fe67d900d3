"""The lease's holder's idle second in one statement on PostgreSQL (ops.loop_status.hold_recording_idle):
the same answers as the lease, the doctor's row and the question asked apart, and the lease's
rules kept (docs/design.md §5; docs/performance.md, "An idle second")."""

import os
from datetime import timedelta

import pytest
from django.db import connection

from ops import loop_status
from ops.slot_loop import emit_once
from runtime.clock import database_now
from runtime.models import Door
from runtime.registry import get_registry
from runtime.services.admission import admit_batch
from runtime.services.backlog import Backlog
from schedules.due_check import check_idle
from schedules.emitter import LEASE_SECONDS, EmitterLease
from schedules.models import ScheduleState, SlotLoopStatus, TickEmitterLease
from schedules.repair import future_limit
from schedules.state import SYNC_NAME, loops_fingerprint
from schedules.ticks import keyed_loops
from tests.events_door import envelope
from tests.helpers import DIGEST_ON

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="one statement on PostgreSQL only"),
]


@pytest.fixture
def holder(registry_files):
    """A lease held by this process, its first slot emitted and the doctor's row recorded."""
    lease = EmitterLease("host-a:1:aa")
    emit_once(lease)
    emit_once(lease)
    assert lease.held and loop_status.recorded_ago() < 60
    return lease


def asked_apart(now):
    registry = get_registry()
    return check_idle(sync_name=SYNC_NAME, fingerprint=loops_fingerprint(registry), due_by=now,
                      future_after=future_limit(now), keyed=tuple(keyed_loops(registry)))


def one_statement(lease, django_assert_num_queries):
    with django_assert_num_queries(1):
        answer = loop_status.hold_recording_idle(lease, seconds=0.25, registry=get_registry())
    now, idle, waiting = answer
    assert (idle, waiting) == asked_apart(now)
    return answer


def test_an_idle_second_renews_the_lease_records_the_row_and_answers_at_one_instant(holder, django_assert_num_queries):
    acquired = TickEmitterLease.objects.get().acquired_at
    now, idle, waiting = one_statement(holder, django_assert_num_queries)
    assert now <= database_now()
    assert (idle, waiting) == (True, Backlog(outbox=False, events=True))  # nothing due; the heartbeat's tick to plan
    lease = TickEmitterLease.objects.get()
    assert (lease.holder, lease.acquired_at, lease.expires_at) == ("host-a:1:aa", acquired,
                                                                    now + timedelta(seconds=LEASE_SECONDS))
    row = SlotLoopStatus.objects.get()
    assert (row.last_iteration_at, row.pid, row.last_iteration_seconds) == (now, os.getpid(), 0.25)


def test_its_answers_are_the_questions_asked_apart(holder, django_assert_num_queries, registry_files):
    from runtime.services.planning import plan_pending

    plan_pending(now=database_now(), registry=get_registry(), limit=100)
    assert one_statement(holder, django_assert_num_queries)[1:] == (True, Backlog(outbox=False, events=False))
    admit_batch([envelope()], door=Door.EVENTS, now=database_now(), registry=get_registry())
    assert one_statement(holder, django_assert_num_queries)[1:] == (True, Backlog(outbox=False, events=True))
    ScheduleState.objects.filter(loop="heartbeat").update(next_due=database_now() - timedelta(seconds=1))
    assert one_statement(holder, django_assert_num_queries)[1] is False   # a tick is due
    registry_files.write_config("schedule.yaml", DIGEST_ON)                # a keyed loop: its own questions
    from runtime.registry import store

    store.refresh()
    one_statement(holder, django_assert_num_queries)


def test_a_lease_another_process_took_answers_none_and_records_nothing(holder):
    taken_until = database_now() + timedelta(seconds=LEASE_SECONDS)
    TickEmitterLease.objects.update(holder="host-b:2:bb", expires_at=taken_until)
    before = SlotLoopStatus.objects.get().last_iteration_at
    assert loop_status.hold_recording_idle(holder, seconds=0.25, registry=get_registry()) is None
    assert holder.held is False
    assert (TickEmitterLease.objects.get().holder, SlotLoopStatus.objects.get().last_iteration_at) == (
        "host-b:2:bb", before)


def test_a_deleted_row_is_written_again_and_the_question_asked_apart(holder):
    SlotLoopStatus.objects.all().delete()
    now, idle, waiting = loop_status.hold_recording_idle(holder, seconds=0.25, registry=get_registry())
    assert (idle, waiting) == asked_apart(now)
    row = SlotLoopStatus.objects.get()
    assert (row.last_iteration_at, row.pid, row.last_iteration_seconds) == (now, os.getpid(), 0.25)
