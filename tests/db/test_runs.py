"""Runs through the command adapter: contract, failures, time-outs, leases (docs/design.md §8)."""

import json
import os
import time
from datetime import timedelta
from pathlib import Path

import pytest

from runtime.models import Door, JournalEntry, Proposal, Run
from runtime.registry import store
from runtime.services.admission import admit_event
from runtime.services.approval import approve_proposal
from runtime.services.execution import work_one
from runtime.services.planning import plan_pending
from runtime.services.runs import claim_next_run, expire_leases
from tests.conftest import at

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T10:00:00Z")
CONTRACT_LINE = '{"schemaVersion": "factory.command-result/v1", "outcome": "DONE", "summary": "all good", "data": {"n": 3}}'


def queue(registry_files, script: str, *, timeout=30, attempts=1, mutating=False, capture="out.log", event_id="ev-1",
          approver=None):
    """Register a one-off command definition, inject an event for it and plan it into a queued run
    (a mutating one is watched: ``approver`` approves its proposal)."""
    definition = {
        "id": "probe", "version": 1, "adapter": "command", "command": ["{python}", "-c", script],
        "captureStdout": capture, "output_contract": "factory.command-result/v1", "mutating": mutating,
        "timeoutSeconds": timeout, "maxAttempts": attempts,
    }
    registry_files.write("definitions/probe@1.json", definition)
    registry_files.update("event-types.json", lambda t: t.__setitem__("probe.requested", {"target": "probe@1", "approval": "watched" if mutating else "auto"}))
    envelope = {
        "schemaVersion": "factory.event/v1", "eventId": event_id, "type": "probe.requested", "source": "test",
        "subject": "probe", "occurredAt": "2026-11-30T10:00:00Z", "correlationId": event_id, "payload": {},
    }
    admit_event(envelope, door=Door.INJECT, now=NOW)
    plan_pending(now=NOW)
    if mutating:
        approve_proposal(Proposal.objects.get(event__uid=event_id).pk, user=approver, now=NOW)
    return Run.objects.get(event__uid=event_id)


def test_a_contract_line_is_the_result_and_stdout_is_captured(registry_files):
    run = queue(registry_files, f"print('working'); print({CONTRACT_LINE!r})")
    assert work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.outcome, run.summary, run.result_data, run.exit_code, run.attempt) == (
        "succeeded", "DONE", "all good", {"n": 3}, 0, 1
    )
    assert run.stdout_path.endswith(f"/{run.pk}/out.log")
    assert Path(run.stdout_path).read_text() == f"working\n{CONTRACT_LINE}\n"
    assert [e.action for e in JournalEntry.objects.filter(run=run).order_by("id")] == [
        "run_queued", "run_claimed", "run_started", "run_succeeded"
    ]


def test_without_a_contract_line_the_exit_code_decides_and_a_finished_failure_is_final(registry_files):
    run = queue(registry_files, "import sys; print('no result'); sys.exit(3)", attempts=3)
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.outcome, run.reason, run.exit_code, run.attempt) == ("failed", "FAILED", "exit_code_3", 3, 1)
    assert not work_one(worker="w1")  # never re-run because it failed


def test_a_plain_successful_command_succeeds(registry_files):
    run = queue(registry_files, "print('done')")
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.outcome, run.reason) == ("succeeded", "SUCCEEDED", "")


def test_a_result_that_violates_the_contract_fails_the_run(registry_files):
    run = queue(registry_files, 'print(\'{"schemaVersion": "factory.command-result/v1", "outcome": "lowercase"}\')')
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.outcome, run.reason) == ("failed", "FAILED", "output_contract_violation")
    assert JournalEntry.objects.get(action="run_failed").data["violations"]


def test_a_missing_command_is_a_finished_failure(registry_files):
    registry_files.write("definitions/ghost@1.json", {
        "id": "ghost", "version": 1, "adapter": "command", "command": ["/nonexistent/ghost-command"],
        "output_contract": "factory.command-result/v1", "mutating": False, "timeoutSeconds": 5, "maxAttempts": 2,
    })
    registry_files.update("event-types.json", lambda t: t.__setitem__("ghost.requested", {"target": "ghost@1", "approval": "auto"}))
    admit_event({
        "schemaVersion": "factory.event/v1", "eventId": "g-1", "type": "ghost.requested", "source": "test",
        "subject": "ghost", "occurredAt": "2026-11-30T10:00:00Z", "correlationId": "g-1", "payload": {},
    }, door=Door.INJECT, now=NOW)
    plan_pending(now=NOW)
    work_one(worker="w1")
    run = Run.objects.get()
    assert (run.status, run.reason, run.attempt) == ("failed", "command_not_found", 1)


def test_a_time_out_kills_the_process_group_and_counts_as_a_failed_attempt(registry_files, tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); open({str(pid_file)!r}, 'w').write(str(p.pid)); "
        "time.sleep(60)"
    )
    run = queue(registry_files, script, timeout=1, attempts=2)
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.reason, run.attempt) == ("queued", "timeout", 1)
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the command's child outlived its time-out")
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.reason, run.attempt) == ("abandoned", "timeout", 2)
    assert JournalEntry.objects.get(action="run_abandoned").data == {"reason": "timeout", "attempt": 2, "maxAttempts": 2}


def test_a_mutating_command_past_its_time_out_is_interrupted_not_run_again(registry_files, approver):
    run = queue(registry_files, "import time; time.sleep(60)", timeout=1, attempts=3, mutating=True, approver=approver)
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.reason, run.attempt) == ("interrupted", "timeout", 1)
    assert JournalEntry.objects.get(action="run_interrupted").data == {
        "reason": "timeout", "attempt": 1, "maxAttempts": 3, "worker": "w1"
    }
    assert not work_one(worker="w1")


#: A command that SIGKILLs the spawner above it (its keeper's parent) and sleeps, unless ``marker`` exists.
KILLS_ITS_SPAWNER = (
    "import os, signal, time; marker = {marker!r}\n"
    "if not os.path.exists(marker):\n"
    "    open(marker, 'w').close()\n"
    "    keeper = os.getppid()\n"
    "    spawner = int(open('/proc/%d/stat' % keeper).read().rsplit(')', 1)[1].split()[1])\n"
    "    os.kill(spawner, signal.SIGKILL); time.sleep(60)\n"
    "print('done')\n"
)


def test_a_spawner_that_dies_midway_fails_the_attempt_and_the_next_attempt_gets_a_new_spawner(registry_files, tmp_path):
    from runtime.adapters.command import SPAWNER

    run = queue(registry_files, KILLS_ITS_SPAWNER.format(marker=str(tmp_path / "killed")), attempts=2)
    started = time.monotonic()
    assert work_one(worker="w1")
    assert time.monotonic() - started < 10  # its keeper killed the command: no wait for its time-out
    run.refresh_from_db()
    dead = SPAWNER.pid
    assert (run.status, run.reason, run.attempt) == ("queued", "spawner_died", 1)
    assert JournalEntry.objects.get(action="run_requeued").data == {
        "reason": "spawner_died", "attempt": 1, "maxAttempts": 2,
        "detail": f"the command spawner (pid {dead}) died; its command was killed",
    }
    assert work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.outcome, run.attempt) == ("succeeded", "SUCCEEDED", 2)
    assert SPAWNER.pid != dead


def test_a_mutating_command_whose_spawner_died_is_interrupted_not_run_again(registry_files, approver, tmp_path):
    script = KILLS_ITS_SPAWNER.format(marker=str(tmp_path / "killed"))
    run = queue(registry_files, script, attempts=3, mutating=True, approver=approver)
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.reason, run.attempt) == ("interrupted", "spawner_died", 1)
    assert not work_one(worker="w1")


def test_stdout_is_capped(registry_files, settings):
    settings.FACTORY_STDOUT_CAP_BYTES = 100
    run = queue(registry_files, f"print('x' * 10000); print({CONTRACT_LINE!r})")
    work_one(worker="w1")
    run.refresh_from_db()
    captured = Path(run.stdout_path).read_text()
    assert captured.startswith("x" * 100) and captured.endswith("[output truncated at 100 bytes]\n")
    assert run.outcome == "DONE"


def test_the_command_gets_a_minimal_environment_without_secrets(registry_files, monkeypatch):
    monkeypatch.setenv("FACTORY_EVENTS_SECRET", "s3cret")
    monkeypatch.setenv("SOMETHING_ELSE", "x")
    script = (
        "import json, os; "
        "print(json.dumps({'schemaVersion': 'factory.command-result/v1', 'outcome': 'ENV', 'data': dict(os.environ)}))"
    )
    run = queue(registry_files, script)
    work_one(worker="w1")
    run.refresh_from_db()
    env = run.result_data
    assert "FACTORY_EVENTS_SECRET" not in env and "SOMETHING_ELSE" not in env
    assert (env["TZ"], env["FACTORY_RUN_ID"]) == ("UTC", str(run.pk))
    assert env["FACTORY_RUN_DIR"].endswith(f"/{run.pk}")


def test_an_expired_lease_is_a_failed_attempt_retried_then_abandoned(registry_files, settings):
    settings.FACTORY_LEASE_SECONDS = 60
    run = queue(registry_files, "print('x')", attempts=2)
    claimed = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    assert (claimed.pk, claimed.attempt, claimed.status) == (run.pk, 1, "claimed")
    # Taken back only past the lease plus a margin: the renewal interval (20 s) and the kill grace (5 s).
    assert expire_leases(now=NOW + timedelta(seconds=84)) == 0
    assert expire_leases(now=NOW + timedelta(seconds=86)) == 1
    run.refresh_from_db()
    assert (run.status, run.reason, run.worker, run.attempt) == ("queued", "lease_expired", "", 1)
    again = claim_next_run(worker="w2", now=NOW + timedelta(seconds=87), lease_seconds=60)
    assert again.attempt == 2
    assert expire_leases(now=NOW + timedelta(seconds=200)) == 1
    run.refresh_from_db()
    assert (run.status, run.reason, run.attempt) == ("abandoned", "lease_expired", 2)
    assert [e.action for e in JournalEntry.objects.filter(run=run).order_by("id")][-2:] == ["run_claimed", "run_abandoned"]
    assert claim_next_run(worker="w3", now=NOW + timedelta(seconds=201), lease_seconds=60) is None


def test_a_running_worker_uses_the_registry_in_force(registry_files):
    run = queue(registry_files, 'print(\'{"schemaVersion": "factory.command-result/v1", "outcome": "DONE"}\')')
    store.current()  # the worker's process loaded the registry before the change below
    registry = registry_files.registry_dir
    (registry / "schemas" / "needs-data.json").write_text(json.dumps({"type": "object", "required": ["data"]}))
    definition = json.loads((registry / "definitions" / "probe@1.json").read_text())
    definition["outputSchema"] = "needs-data.json"
    (registry / "definitions" / "probe@1.json").write_text(json.dumps(definition))
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.reason) == ("failed", "output_contract_violation")
