"""A run's command never outlives the lease that allowed it (docs/design.md §8):
renewals retried, lost leases and stops kill the command at once and record the attempt."""

import os
import threading
import time

import pytest
from django.db import OperationalError

from runtime.models import Door, JournalEntry, Proposal, Run
from runtime.services import execution
from runtime.services.admission import admit_event
from runtime.services.approval import approve_proposal
from runtime.services.execution import work_one
from runtime.services.planning import plan_pending
from tests.conftest import at

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T10:00:00Z")


def sleeper(registry_files, approver, tmp_path, *, mutating: bool, seconds: float) -> Run:
    """A queued run whose command writes its pid to ``tmp_path/pid``, sleeps, then prints done."""
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep({seconds}); print('done')"
    registry_files.write("definitions/sleeper@1.json", {
        "id": "sleeper", "version": 1, "adapter": "command", "command": ["{python}", "-c", script],
        "output_contract": "factory.command-result/v1", "mutating": mutating, "timeoutSeconds": 60, "maxAttempts": 2,
    })
    registry_files.update("event-types.json", lambda t: t.__setitem__("sleep.requested", {"target": "sleeper@1"}))
    admit_event({
        "schemaVersion": "factory.event/v1", "eventId": "sleep-1", "type": "sleep.requested", "source": "test",
        "subject": "sleep", "occurredAt": "2026-11-30T10:00:00Z", "correlationId": "sleep-1", "payload": {},
    }, door=Door.INJECT, now=NOW)
    plan_pending(now=NOW)
    return approve_proposal(Proposal.objects.get().pk, user=approver, now=NOW)


def assert_command_gone(tmp_path) -> None:
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.fixture
def no_reconnect(monkeypatch):
    """The test's transaction must survive: count the reconnects instead of closing the connection."""
    resets = []
    monkeypatch.setattr(execution, "reset_connection", lambda: resets.append(1))
    return resets


def test_a_stopped_worker_lets_the_run_go_on_for_the_grace_then_kills_it_as_interrupted(registry_files, approver, tmp_path, settings):
    settings.FACTORY_STOP_GRACE_SECONDS = 1
    run = sleeper(registry_files, approver, tmp_path, mutating=True, seconds=30)
    stop = threading.Event()
    stop.set()
    started = time.monotonic()
    assert work_one(worker="w1", stop=stop)
    assert time.monotonic() - started < 10
    assert_command_gone(tmp_path)
    run.refresh_from_db()
    assert (run.status, run.reason, run.attempt) == ("interrupted", "worker_stopped", 1)
    assert JournalEntry.objects.get(action="run_interrupted").data == {
        "reason": "worker_stopped", "attempt": 1, "maxAttempts": 2, "worker": "w1"
    }


def test_a_stop_within_the_grace_lets_the_run_finish(registry_files, approver, tmp_path, settings):
    settings.FACTORY_STOP_GRACE_SECONDS = 20
    run = sleeper(registry_files, approver, tmp_path, mutating=True, seconds=0.5)
    stop = threading.Event()
    stop.set()
    work_one(worker="w1", stop=stop)
    run.refresh_from_db()
    assert (run.status, run.outcome) == ("succeeded", "SUCCEEDED")


def test_a_stopped_non_mutating_run_is_requeued(registry_files, approver, tmp_path, settings):
    settings.FACTORY_STOP_GRACE_SECONDS = 1
    run = sleeper(registry_files, approver, tmp_path, mutating=False, seconds=30)
    stop = threading.Event()
    stop.set()
    work_one(worker="w1", stop=stop)
    assert_command_gone(tmp_path)
    run.refresh_from_db()
    assert (run.status, run.reason, run.attempt) == ("queued", "worker_stopped", 1)


def test_a_failed_renewal_is_retried_within_the_lease(registry_files, approver, tmp_path, settings, monkeypatch, no_reconnect):
    settings.FACTORY_LEASE_SECONDS = 3
    run = sleeper(registry_files, approver, tmp_path, mutating=True, seconds=2.5)
    real = execution.renew_lease
    failures = iter([OperationalError("server closed the connection unexpectedly")])

    def flaky(*args, **kwargs):
        error = next(failures, None)
        if error:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(execution, "renew_lease", flaky)
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.attempt) == ("succeeded", 1)
    assert no_reconnect == [1]


def test_a_lease_that_cannot_be_renewed_in_time_kills_the_command(registry_files, approver, tmp_path, settings, monkeypatch, no_reconnect):
    settings.FACTORY_LEASE_SECONDS = 3
    run = sleeper(registry_files, approver, tmp_path, mutating=True, seconds=30)

    def down(*args, **kwargs):
        raise OperationalError("the database is unreachable")

    monkeypatch.setattr(execution, "renew_lease", down)
    started = time.monotonic()
    work_one(worker="w1")
    assert 3 <= time.monotonic() - started < 10
    assert_command_gone(tmp_path)
    run.refresh_from_db()
    assert (run.status, run.reason) == ("interrupted", "lease_renewal_failed")
    assert len(no_reconnect) >= 2


def test_a_run_that_ends_before_its_first_renewal_starts_no_lease_watchdog(registry_files, approver, tmp_path, monkeypatch):
    run = sleeper(registry_files, approver, tmp_path, mutating=False, seconds=0)
    watched = []
    monkeypatch.setattr(execution.LeaseKeeper, "_watch", lambda keeper: watched.append(keeper.run.pk))
    assert work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, watched) == ("succeeded", [])


def test_a_lost_lease_kills_the_command_at_once_and_is_journaled(registry_files, approver, tmp_path, settings, monkeypatch):
    settings.FACTORY_LEASE_SECONDS = 3
    run = sleeper(registry_files, approver, tmp_path, mutating=True, seconds=30)
    monkeypatch.setattr(execution, "renew_lease", lambda *args, **kwargs: False)
    started = time.monotonic()
    work_one(worker="w1")
    assert time.monotonic() - started < 8
    assert_command_gone(tmp_path)
    assert JournalEntry.objects.get(action="run_lease_lost", run=run).data == {"worker": "w1", "attempt": 1}


def test_a_renewal_that_hangs_past_the_lease_does_not_keep_the_command_alive(registry_files, approver, tmp_path, settings, monkeypatch, no_reconnect):
    settings.FACTORY_LEASE_SECONDS = 3
    run = sleeper(registry_files, approver, tmp_path, mutating=True, seconds=30)
    seen = {}

    def hangs(*args, **kwargs):
        time.sleep(9)  # the lease (3 s) ends meanwhile; the watchdog must not wait for this call
        seen["command alive when the renewal came back"] = os.path.exists(f"/proc/{int((tmp_path / 'pid').read_text())}")
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(execution, "renew_lease", hangs)
    work_one(worker="w1")
    assert seen == {"command alive when the renewal came back": False}
    run.refresh_from_db()
    assert (run.status, run.reason) == ("interrupted", "lease_renewal_failed")
