"""Executing runs: claim one run, execute it through its adapter, record the result (docs/design.md §8).

``work_one`` handles one item and says whether it did anything; ``ops.worker.run_worker``
is the trivial loop around it used by ``manage.py worker`` and by ``runserve``'s workers.
"""

import logging
import time
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from lib.refusals import Refused
from runtime.adapters import ADAPTERS
from runtime.adapters.base import Execution, RunResult
from runtime.adapters.result import result_from_output
from runtime.models import Run
from runtime.registry import get_registry, store

from .runs import claim_next_run, expire_leases, fail_attempt, finish_run, renew_lease, start_run

logger = logging.getLogger(__name__)


def execute_run(run: Run, *, worker: str) -> None:
    """Execute a claimed run to its end: finished, failed attempt, or lease lost.

    The plan's adapter decides how (docs/design.md §8): ``command`` runs its argv, ``agent``
    runs ``FACTORY_AGENT_COMMAND`` with the plan on stdin, ``fake`` plays the scripted
    outcome. All three share the lease renewal, the time-out (a failed attempt) and the
    output contract; a run that cannot start (missing executable, no agent command, no
    scripted outcome, unknown adapter) is a finished failure, never retried.
    """
    if not start_run(run, worker=worker, now=timezone.now()):
        return
    plan = run.plan
    registry = get_registry()
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

    adapter = ADAPTERS.get(plan.get("adapter"))
    if adapter is None:
        finish_run(
            run, RunResult("FAILED", False, reason="unknown_adapter", summary=f"no adapter named {plan.get('adapter')!r}"),
            worker=worker, now=timezone.now(), registry=registry,
        )
        return
    execution = Execution(
        run=run,
        run_dir=Path(settings.FACTORY_RUNS_DIR) / str(run.pk),
        capture_name=plan.get("captureStdout") or "stdout.log",
        timeout_seconds=run.timeout_seconds,
        stdout_cap=settings.FACTORY_STDOUT_CAP_BYTES,
        while_waiting=keep_lease,
        definitions=registry.definitions,
    )
    try:
        outcome = adapter(execution)
    except Refused as exc:
        finish_run(run, RunResult("FAILED", False, reason=exc.code, summary=exc.detail), worker=worker,
                   now=timezone.now(), registry=registry)
        return
    now = timezone.now()
    if outcome.aborted:
        return
    if outcome.timed_out:
        fail_attempt(run.pk, reason="timeout", now=now, worker=worker)
        return
    if outcome.not_found:
        result = RunResult("FAILED", False, reason="command_not_found", summary=outcome.not_found)
    else:
        definition = registry.definitions.get(run.definition)
        result = result_from_output(
            outcome.stdout_tail,
            outcome.exit_code,
            contract_schema=registry.command_result_schema,
            output_schema=definition.output_schema if definition else None,
            stdout_path=outcome.stdout_path,
        )
    finish_run(run, result, worker=worker, now=now, registry=registry)


def work_one(*, worker: str) -> bool:
    """Expire stale leases, then claim and execute one run. True when a run was handled.

    The registry is re-read first when a file changed, so output contracts and chain
    edges are those in force, not those of the worker's start (a bad change on disk
    keeps the last good registry, as in the slot loop).
    """
    store.refresh()
    expire_leases(now=timezone.now())
    run = claim_next_run(worker=worker, now=timezone.now(), lease_seconds=settings.FACTORY_LEASE_SECONDS)
    if run is None:
        return False
    logger.info("run %s claimed (attempt %s/%s)", run.pk, run.attempt, run.max_attempts,
                extra={"action": "run_claimed", "run": run.pk})
    execute_run(run, worker=worker)
    return True
