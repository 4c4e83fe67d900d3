"""The run worker: claim one run, execute it through its adapter, record the result (DESIGN §8).

``work_one`` handles one item and says whether it did anything; ``run_worker`` is the
trivial loop around it used by ``manage.py worker`` and by ``runserve``'s workers.
"""

import logging
import os
import socket
import threading
import time
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, DatabaseError
from django.utils import timezone

from .adapters.command import run_command
from .adapters.result import result_from_output
from .models import Run
from .registry import get_registry
from .runs import RunResult, claim_next_run, expire_leases, fail_attempt, finish_run, renew_lease, start_run

logger = logging.getLogger(__name__)

IDLE_SLEEP_SECONDS = 1.0


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def execute_run(run: Run, *, worker: str) -> None:
    """Execute a claimed run to its end: finished, failed attempt, or lease lost."""
    if not start_run(run, worker=worker, now=timezone.now()):
        return
    plan = run.plan
    adapter = plan.get("adapter")
    if adapter != "command":
        finish_run(
            run,
            RunResult("FAILED", False, reason="adapter_not_built",
                      summary=f"the {adapter} adapter is not available in this runtime"),
            worker=worker, now=timezone.now(),
        )
        return
    lease_seconds = settings.FACTORY_LEASE_SECONDS
    renew_every = max(1.0, lease_seconds / 3)
    last_renewal = time.monotonic()

    def keep_lease() -> bool:
        nonlocal last_renewal
        if time.monotonic() - last_renewal < renew_every:
            return True
        last_renewal = time.monotonic()
        held = renew_lease(run.pk, worker=worker, now=timezone.now(), lease_seconds=lease_seconds)
        if not held:
            logger.warning("run %s: lease lost; stopping its command", run.pk, extra={"action": "lease_lost", "run": run.pk})
        return held

    run_dir = Path(settings.FACTORY_RUNS_DIR) / str(run.pk)
    outcome = run_command(
        plan["argv"],
        run_id=run.pk,
        run_dir=run_dir,
        capture_name=plan.get("captureStdout") or "stdout.log",
        timeout_seconds=run.timeout_seconds,
        stdout_cap=settings.FACTORY_STDOUT_CAP_BYTES,
        while_waiting=keep_lease,
    )
    now = timezone.now()
    if outcome.aborted:
        return
    if outcome.timed_out:
        fail_attempt(run.pk, reason="timeout", now=now, worker=worker)
        return
    if outcome.not_found:
        result = RunResult("FAILED", False, reason="command_not_found", summary=outcome.not_found)
    else:
        definition = get_registry().definitions.get(run.definition)
        result = result_from_output(
            outcome.stdout_tail,
            outcome.exit_code,
            contract_schema=get_registry().command_result_schema,
            output_schema=definition.output_schema if definition else None,
            stdout_path=outcome.stdout_path,
        )
    finish_run(run, result, worker=worker, now=now)


def work_one(*, worker: str) -> bool:
    """Expire stale leases, then claim and execute one run. True when a run was handled."""
    expire_leases(now=timezone.now())
    run = claim_next_run(worker=worker, now=timezone.now(), lease_seconds=settings.FACTORY_LEASE_SECONDS)
    if run is None:
        return False
    logger.info("run %s claimed (attempt %s/%s)", run.pk, run.attempt, run.max_attempts,
                extra={"action": "run_claimed", "run": run.pk})
    execute_run(run, worker=worker)
    return True


def run_worker(*, stop: threading.Event, once: bool = False) -> None:
    """Work until ``stop`` is set (or, with ``once``, until the queue is empty)."""
    name = worker_name()
    logger.info("worker %s started", name, extra={"action": "worker_started"})
    while not stop.is_set():
        close_old_connections()
        try:
            did_work = work_one(worker=name)
        except DatabaseError:
            logger.exception("worker iteration failed; retrying", extra={"action": "worker_error"})
            did_work = False
        if once and not did_work:
            break
        if not did_work:
            stop.wait(IDLE_SLEEP_SECONDS)
    logger.info("worker %s stopped", name, extra={"action": "worker_stopped"})
