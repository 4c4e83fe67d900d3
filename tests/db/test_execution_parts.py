"""``runtime.services.execution``'s parts, called directly: ``write_while_held``'s retries and
give-up, ``LeaseKeeper._end``'s word, ``_record_abort``'s two ways and ``work_one``'s claim, each
with its exact rows and log records (docs/design.md §8)."""

import logging
import threading
import time
from datetime import timedelta
from unittest import mock

import pytest
from django.db import OperationalError

from runtime.models import JournalEntry, Run
from runtime.services import execution
from runtime.services.execution import LeaseKeeper, _record_abort, write_while_held
from runtime.services.planning import plan_pending
from runtime.services.runs import claim_next_run, start_run
from tests.conftest import at
from tests.helpers import inject

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T10:00:00Z")


def _logged(caplog):
    return [(r.levelname, r.getMessage(), getattr(r, "action", None), getattr(r, "run", None))
            for r in caplog.records if r.name == "runtime.services.execution"]


def test_a_write_that_gets_through_returns_its_answer_at_once():
    """No error: one call, its answer, no reset and no sleep."""
    calls = []
    with mock.patch.object(execution, "reset_connection") as reset, mock.patch.object(execution.time, "sleep") as sleep:
        assert write_while_held(lambda: calls.append(1) or "done", until=0.0, what="x") == "done"
    assert (calls, reset.call_count, sleep.call_count) == ([1], 0, 0)



def answering(*answers):
    """A write answering ``answers`` in turn, raising those that are exceptions."""
    left = list(answers)

    def write():
        answer = left.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer
    write.left = left
    return write

def test_a_failed_write_is_retried_on_a_fresh_connection_while_the_lease_lasts(caplog):
    """Two database errors, then success: each error resets the connection and waits
    ``RETRY_SECONDS`` before the next try; nothing is logged."""
    write = answering(OperationalError("gone"), OperationalError("gone again"), 7)

    with caplog.at_level(logging.INFO, logger="runtime.services.execution"), \
            mock.patch.object(execution, "reset_connection") as reset, \
            mock.patch.object(execution.time, "sleep") as sleep:
        assert write_while_held(write, until=execution.time.monotonic() + 3600, what="the end of run 5") == 7
    assert reset.call_count == 2
    assert sleep.call_args_list == [mock.call(execution.RETRY_SECONDS)] * 2
    assert _logged(caplog) == []


def test_a_write_still_failing_when_the_lease_ends_is_left_to_the_sweep(caplog):
    """At ``until`` (the very instant): no retry — though the next try would get through —,
    None, and an error naming what could not be recorded and why."""
    write = answering(OperationalError("gone"), 7)

    with caplog.at_level(logging.INFO, logger="runtime.services.execution"), \
            mock.patch.object(execution, "reset_connection") as reset, \
            mock.patch.object(execution.time, "sleep"), \
            mock.patch.object(execution.time, "monotonic", return_value=50.0):
        assert write_while_held(write, until=50.0, what="the end of run 5") is None
    assert (reset.call_count, write.left) == (0, [7])
    assert [(r.levelname, r.getMessage(), r.action) for r in caplog.records
            if r.name == "runtime.services.execution"] == [
        ("ERROR", "could not record the end of run 5 (gone); the lease sweep will", "record_failed")]


def _running(registry_files):
    inject("op-0", "factory.work.requested", {"repo": "alpha"}, instant="2026-11-30T10:00:00Z")
    plan_pending(now=NOW)
    run = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    assert start_run(run, worker="w1", now=NOW) is True
    return run


def _keeper(run, ended):
    keeper = LeaseKeeper(run, worker="w1", lease_seconds=60, lease_started=execution.time.monotonic(),
                         stop=None, stop_grace=5.0)
    keeper.ended = ended
    return keeper


def test_a_keeper_ending_says_why_and_stops_the_command(registry_files, caplog):
    """``_end`` keeps the reason, answers False and warns with the reason in words."""
    run = _running(registry_files)
    keeper = _keeper(run, "")
    with caplog.at_level(logging.INFO, logger="runtime.services.execution"):
        assert keeper._end("lease_renewal_failed") is False
    assert keeper.ended == "lease_renewal_failed"
    assert _logged(caplog) == [
        ("WARNING", f"run {run.pk}: lease renewal failed; killing its command", "lease_renewal_failed", run.pk)]


def test_an_abort_after_a_lost_lease_journals_the_loss_and_leaves_the_run(registry_files):
    """The lease was lost: the journal says the worker killed its command; the run, now
    another's, is not touched."""
    run = _running(registry_files)
    _record_abort(run, _keeper(run, "lease_lost"), "w1")
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.worker, stored.attempt) == ("running", "w1", 1)
    assert [(e.action, e.data) for e in JournalEntry.objects.filter(run=run).order_by("id")][-1] == (
        "run_lease_lost", {"worker": "w1", "attempt": 1})


def test_an_abort_otherwise_is_an_interrupted_attempt_with_the_keepers_reason(registry_files):
    """Stopped or past its lease: ``fail_attempt`` as interrupted, with the keeper's reason (a
    read-only run is requeued) — by the worker that held it only."""
    run = _running(registry_files)
    _record_abort(run, _keeper(run, "worker_stopped"), "w2")
    assert Run.objects.get(pk=run.pk).status == "running"
    _record_abort(run, _keeper(run, "worker_stopped"), "w1")
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.worker, stored.reason) == ("queued", "", "worker_stopped")
    assert [(e.action, e.data) for e in JournalEntry.objects.filter(run=run).order_by("id")][-1] == (
        "run_requeued", {"reason": "worker_stopped", "attempt": 1, "maxAttempts": 2})


def test_the_watchdog_kills_only_a_renewal_hung_past_the_lease(registry_files, caplog):
    """Past the lease but not renewing: the watchdog keeps watching (the keeper itself says
    stop); renewing at the very instant the lease ends: it kills the running commands, says
    why, and stops watching."""
    run = _running(registry_files)
    keeper = _keeper(run, "")
    with mock.patch.object(execution, "WATCHDOG_SECONDS", 0.01), \
            mock.patch.object(execution, "terminate_running_commands") as terminate, \
            caplog.at_level(logging.INFO, logger="runtime.services.execution"):
        keeper.held_until = execution.time.monotonic() - 1
        watchdog = threading.Thread(target=keeper._watch)
        watchdog.start()
        time.sleep(0.2)
        keeper.done.set()
        watchdog.join()
        assert (terminate.call_count, keeper.ended) == (0, "")
        keeper.done.clear()
        keeper.renewing = True
        with mock.patch.object(execution.time, "monotonic", return_value=keeper.held_until):
            keeper._watch()
    assert (terminate.call_count, keeper.ended) == (1, "lease_renewal_failed")
    assert _logged(caplog) == [
        ("ERROR", f"run {run.pk}: lease renewal hung past the lease; killing its command", "lease_renewal_hung", run.pk)]


@pytest.mark.parametrize(("ended", "what", "until"), [
    ("lease_lost", "the lost lease of run {pk}", 100.0 + 20),          # now, plus a renewal interval
    ("worker_stopped", "the interrupted attempt of run {pk}", 60.0 + 20),  # the lease's end, plus one
], ids=["lease_lost", "interrupted"])
def test_an_abort_is_recorded_until_a_renewal_interval_past_its_bound(registry_files, ended, what, until):
    """``_record_abort`` hands its write to ``write_while_held`` naming the run, bounded by a
    renewal interval (20 s of a 60 s lease) past now for a lost lease, past the lease's end
    for an interrupted attempt."""
    run = _running(registry_files)
    keeper = _keeper(run, ended)
    keeper.held_until = 60.0
    with mock.patch.object(execution, "write_while_held") as held, \
            mock.patch.object(execution.time, "monotonic", return_value=100.0):
        _record_abort(run, keeper, "w1")
    ((write,), bounds) = held.call_args
    assert bounds == {"until": until, "what": what.format(pk=run.pk)}


def test_a_worker_step_sweeps_and_claims_at_its_clock_and_says_so(registry_files, settings, caplog):
    """``work_one`` with a clock: a lease expired by then is taken back at that instant (its
    read-only run requeued), a run is claimed at it, the claim is logged with the attempt, and
    the run's lease is counted from the step's start (the monotonic instant before the claim)."""
    settings.FACTORY_LEASE_SECONDS = 60
    run = _running(registry_files)
    later = NOW + timedelta(seconds=120)  # past the lease (60 s) and its margin (25 s)
    with caplog.at_level(logging.INFO, logger="runtime.services.execution"), \
            mock.patch.object(execution, "execute_run") as executed, \
            mock.patch.object(execution.time, "monotonic", return_value=123.0):
        assert execution.work_one(worker="w2", clock=lambda: later) is True
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.worker, stored.attempt, stored.claimed_at) == ("claimed", "w2", 2, later)
    assert [(e.action, e.at) for e in JournalEntry.objects.filter(run=run).order_by("id")][-2:] == [
        ("run_requeued", later), ("run_claimed", later)]
    assert {k: executed.call_args.kwargs[k] for k in ("worker", "lease_started")} == {"worker": "w2", "lease_started": 123.0}
    assert _logged(caplog) == [("INFO", f"run {run.pk} claimed (attempt 2/2)", "run_claimed", run.pk)]
