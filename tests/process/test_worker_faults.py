"""A run's command never outlives its worker, and no two attempts of a run overlap (docs/design.md §8).

Real workers and ``runserve`` on their own database; each attempt of the probe writes
its start and end with its pid (``tests.attempts``). Leases of 3 s and a stop grace of
1 s keep each test within seconds; the 20–40 s versions are the drills (``drills/``).
"""

import signal
import time
from pathlib import Path

import pytest
from django.db import connection

from tests.attempts import alive, attempts, install_probe, overlaps, queue_probe
from tests.processes import free_port, stop, wait_for

pytestmark = [pytest.mark.process, pytest.mark.django_db]

FAST = {"FACTORY_LEASE_SECONDS": "3", "FACTORY_STOP_GRACE_SECONDS": "1"}


def first_attempt(log):
    return wait_for(lambda: attempts(log), timeout=40, what="the probe's first attempt")[0]


def run_of(runtime, run_id):
    return next(run for run in runtime.listing("runs") if run["id"] == run_id)


def test_a_sigterm_lets_the_grace_pass_then_kills_the_command_and_interrupts_a_mutating_run(runtime):
    log = install_probe(runtime, mutating=True, seconds=30)
    run_id = queue_probe(runtime)
    worker = runtime.start("worker", **FAST)
    attempt = first_attempt(log)
    stopped_at = time.monotonic()
    code, output = stop(worker, timeout=20)
    assert code == 0, output
    assert not alive(attempt["pid"])
    assert 1 <= time.monotonic() - stopped_at < 8
    run = run_of(runtime, run_id)
    assert (run["status"], run["reason"], run["attempt"]) == ("interrupted", "worker_stopped", 1)
    assert [a["end"] is not None for a in attempts(log)] == [True]
    assert [r["id"] for r in runtime.listing("runs", "--status", "interrupted")] == [run_id]
    refused = runtime.manage("close_run", str(run_id), "--as", "nobody", check=False)
    assert (refused.returncode, refused.stderr.strip()) == (2, "refused: unknown_user: there is no user 'nobody'")
    retried = runtime.manage("retry_run", str(run_id), "--as", "operator")
    assert retried.stdout.strip() == f"retried run {run_id} as operator: queued for attempt 2/3"
    again = runtime.manage("retry_run", str(run_id), "--as", "operator", check=False)
    assert (again.returncode, again.stderr.strip()) == (2, f"refused: not_interrupted: run {run_id} is queued, not interrupted")


def spawners_of(pid: int) -> list[int]:
    """The command spawners ``pid`` started (its children running lib/command_spawner.py)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat, cmdline = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
        except (OSError, NotADirectoryError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"command_spawner.py" in cmdline:
            found.append(int(entry.name))
    return found


def test_a_worker_starts_one_command_spawner_as_it_starts_and_it_dies_with_the_worker(runtime):
    worker = runtime.start("worker", **FAST)
    spawners = wait_for(lambda: spawners_of(worker.pid), timeout=30, what="the worker's command spawner")
    assert len(spawners) == 1 and alive(spawners[0])
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    wait_for(lambda: not alive(spawners[0]), timeout=5, what="the spawner to end with its worker")


def test_a_sigkilled_worker_takes_its_command_along_and_the_retry_never_overlaps(runtime):
    log = install_probe(runtime, mutating=False, seconds=3)
    run_id = queue_probe(runtime)
    worker = runtime.start("worker", **FAST)
    attempt = first_attempt(log)
    worker.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    worker.wait(timeout=10)
    wait_for(lambda: not alive(attempt["pid"]), timeout=5, what="the command to die with its worker")
    assert time.monotonic() - killed_at < 3
    runtime.start("worker", **FAST)
    wait_for(lambda: run_of(runtime, run_id)["status"] == "succeeded", timeout=40, what="the retried run", interval=0.5)
    run = run_of(runtime, run_id)
    assert (run["attempt"], run["outcome"]) == (2, "DONE")
    found = attempts(log)
    assert len(found) == 2 and overlaps(found) == []
    actions = [e["action"] for e in reversed(runtime.listing("journal")) if e["runId"] == run_id]
    assert actions == [
        "run_queued", "run_claimed", "run_started", "run_requeued", "run_claimed", "run_started", "run_succeeded"
    ]
    requeued = next(e for e in runtime.listing("journal") if e["action"] == "run_requeued")
    assert requeued["data"] == {"reason": "lease_expired", "attempt": 1, "maxAttempts": 3}


def test_a_sigkilled_supervisor_stops_its_worker_whose_command_dies_and_the_mutating_run_is_interrupted(runtime):
    log = install_probe(runtime, mutating=True, seconds=30)
    run_id = queue_probe(runtime)
    serve = runtime.start("runserve", "--bind", f"127.0.0.1:{free_port()}", "--http-workers", "1", **FAST)
    attempt = first_attempt(log)
    serve.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    # wait, not communicate: the orphaned worker holds the output pipe until it has stopped.
    serve.wait(timeout=10)
    wait_for(lambda: not alive(attempt["pid"]), timeout=10, what="the command to die after its worker's grace")
    assert time.monotonic() - killed_at < 8
    run = wait_for(lambda: run_of(runtime, run_id)["status"] == "interrupted" and run_of(runtime, run_id),
                   timeout=10, what="the run to be interrupted")
    assert (run["reason"], run["attempt"]) == ("worker_stopped", 1)
    assert overlaps(attempts(log)) == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_terminate_backend is PostgreSQL's")
def test_a_terminated_database_connection_is_reopened_and_the_run_goes_on_once(runtime):

    log = install_probe(runtime, mutating=True, seconds=6)
    run_id = queue_probe(runtime)
    # A 6 s lease: two terminations 1.5 s apart, each costing a renewal and a reconnect, leave
    # a 3 s lease no margin on a busy machine, and its end would kill the command (a fault
    # this test does not mean to cause).
    runtime.start("worker", **{**FAST, "FACTORY_LEASE_SECONDS": "6"})
    first_attempt(log)
    assert runtime.terminate_connections(times=2, every=1.5) >= 2
    wait_for(lambda: run_of(runtime, run_id)["status"] == "succeeded", timeout=30, what="the run to succeed", interval=0.5)
    assert run_of(runtime, run_id)["attempt"] == 1
    found = attempts(log)
    assert len(found) == 1 and found[0]["end"] is not None
    actions = [e["action"] for e in reversed(runtime.listing("journal")) if e["runId"] == run_id]
    assert actions == ["run_queued", "run_claimed", "run_started", "run_succeeded"]


def test_an_unwritable_runs_directory_fails_each_attempt_and_the_worker_goes_on(runtime):
    log = install_probe(runtime, mutating=False, seconds=0, max_attempts=1)
    queue_probe(runtime)
    queue_probe(runtime, "probe-2")
    first, second = sorted(run["id"] for run in runtime.listing("runs"))
    blocker = runtime.root / "not-a-directory"
    blocker.write_text("")
    worker = runtime.start("worker", **FAST, FACTORY_RUNS_DIR=str(blocker / "runs"))
    wait_for(lambda: all(run_of(runtime, r)["status"] == "abandoned" for r in (first, second)), timeout=30,
             what="both runs to be abandoned", interval=0.5)
    assert worker.poll() is None  # the worker lives on
    for run_id in (first, second):
        run = run_of(runtime, run_id)
        assert (run["status"], run["reason"], run["attempt"]) == ("abandoned", "runs_dir_unwritable", 1)
        actions = [e["action"] for e in reversed(runtime.listing("journal")) if e["runId"] == run_id]
        assert actions == ["run_queued", "run_claimed", "run_started", "run_abandoned"]
    assert attempts(log) == []  # no command started
    code, output = stop(worker, timeout=20)
    assert code == 0, output
    assert f"{blocker / 'runs'}/{first}: [Errno 20 ENOTDIR] Not a directory" in output
