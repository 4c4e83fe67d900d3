"""Executing runs: claim one run, execute it through its adapter, record the result (docs/design.md §8).

``work_one`` handles one item and says whether it did anything; ``ops.worker.run_worker``
is the trivial loop around it used by ``manage.py worker`` and by ``runserve``'s workers.
Every instant written comes from ``runtime.clock.database_now()``, read once per step.

A run's command never outlives the lease that allowed it (docs/design.md §8): the
worker renews the lease every ``renewal_interval``; a renewal that fails (a database
error, a dropped connection — closed and reopened) is retried while the lease lasts;
when the lease is lost, or would end before a renewal got through, or the worker was
asked to stop and its ``FACTORY_STOP_GRACE_SECONDS`` are over, the command is killed at
once and the attempt recorded.
"""

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection

from lib.refusals import Refused
from runtime.adapters import ADAPTERS
from runtime.adapters.base import Execution, RunDirUnwritable, RunResult
from runtime.adapters.command import terminate_running_commands
from runtime.adapters.result import result_from_output
from runtime.clock import database_now
from runtime.models import Run
from runtime.registry import get_registry, store

from .runs import (
    claim_next_run,
    expire_leases,
    fail_attempt,
    finish_run,
    record_lease_lost,
    renew_lease,
    renewal_interval,
    start_run,
    waiting_work,
)

logger = logging.getLogger(__name__)

#: After a failed renewal or write, how long before the next try, in seconds.
RETRY_SECONDS = 1.0
#: How often the lease watchdog looks at a renewal in progress, in seconds.
WATCHDOG_SECONDS = 0.2


def reset_connection() -> None:
    """Drop this thread's database connection (broken, say); the next query opens a new one."""
    with contextlib.suppress(DatabaseError):
        connection.close()


class LeaseKeeper:
    """``while_waiting`` for one attempt: True while the command may go on.

    ``held_until`` is this process's monotonic instant by which the lease ends for sure
    (measured from before the request that set it). ``ended`` says why it said stop:
    ``lease_lost`` (another took the run), ``lease_renewal_failed`` (no renewal got
    through in time) or ``worker_stopped`` (the stop grace is over).

    A renewal can hang (a database host gone without a word) with the waiting thread
    inside it: while the keeper is ``watching``, a watchdog thread kills the running
    commands when the lease ends during a renewal that has not come back. The watchdog
    starts with the first renewal: a run that ends before it (a quick command) starts none.
    """

    def __init__(self, run: Run, *, worker: str, lease_seconds: int, lease_started: float,
                 stop: threading.Event | None, stop_grace: float):
        self.run, self.worker, self.lease_seconds = run, worker, lease_seconds
        self.stop, self.stop_grace = stop, stop_grace
        self.renew_every = renewal_interval(lease_seconds)
        self.held_until = lease_started + lease_seconds
        self.next_renewal = lease_started + self.renew_every
        self.stop_deadline: float | None = None
        self.ended = ""
        self.renewing = False
        self.done = threading.Event()
        self.watched = False
        self.watchdog: threading.Thread | None = None

    @contextlib.contextmanager
    def watching(self):
        """Let renewals in the block start the watchdog; stop it at the block's end."""
        self.watched = True
        try:
            yield self
        finally:
            self.done.set()
            if self.watchdog is not None:
                self.watchdog.join()

    def _watch(self) -> None:
        while not self.done.wait(WATCHDOG_SECONDS):
            if self.renewing and time.monotonic() >= self.held_until:
                self.ended = "lease_renewal_failed"
                logger.error("run %s: lease renewal hung past the lease; killing its command", self.run.pk,
                             extra={"action": "lease_renewal_hung", "run": self.run.pk})
                terminate_running_commands()
                return

    def __call__(self) -> bool:
        moment = time.monotonic()
        if self.stop is not None and self.stop.is_set():
            if self.stop_deadline is None:
                self.stop_deadline = moment + self.stop_grace
                logger.warning("run %s: stopping; its command gets %ss to finish", self.run.pk, self.stop_grace,
                               extra={"action": "run_stop_grace", "run": self.run.pk})
            if moment >= self.stop_deadline:
                return self._end("worker_stopped")
        if moment >= self.held_until or self.ended:
            return self._end(self.ended or "lease_renewal_failed")
        if moment < self.next_renewal:
            return True
        if self.watched and self.watchdog is None:
            self.watchdog = threading.Thread(target=self._watch, name=f"lease-watchdog-{self.run.pk}", daemon=True)
            self.watchdog.start()
        self.renewing = True
        try:
            held = renew_lease(self.run.pk, worker=self.worker, now=database_now(), lease_seconds=self.lease_seconds)
        except DatabaseError as exc:
            logger.warning("run %s: lease renewal failed (%s); retrying", self.run.pk, exc,
                           extra={"action": "lease_renewal_failed", "run": self.run.pk})
            reset_connection()
            self.next_renewal = time.monotonic() + RETRY_SECONDS
            return True
        finally:
            self.renewing = False
        if self.ended:
            return self._end(self.ended)
        if not held:
            return self._end("lease_lost")
        self.held_until = moment + self.lease_seconds
        self.next_renewal = moment + self.renew_every
        return True

    def _end(self, reason: str) -> bool:
        self.ended = reason
        logger.warning("run %s: %s; killing its command", self.run.pk, reason.replace("_", " "),
                       extra={"action": reason, "run": self.run.pk})
        return False


def write_while_held(write: Callable[[], object], *, until: float, what: str):
    """Call ``write`` (a database write that reads its own ``now``), retrying a database
    error on a fresh connection until the monotonic instant ``until``; after that the
    lease sweep owns the run. Returns what ``write`` returned, or None when it never got through."""
    while True:
        try:
            return write()
        except DatabaseError as exc:
            if time.monotonic() >= until:
                logger.error("could not record %s (%s); the lease sweep will", what, exc, extra={"action": "record_failed"})
                return None
            reset_connection()
            time.sleep(RETRY_SECONDS)


def execute_run(run: Run, *, worker: str, stop: threading.Event | None = None, lease_started: float | None = None) -> None:
    """Execute a claimed run to its end: finished, failed or interrupted attempt, or lease lost.

    The plan's adapter decides how (docs/design.md §8): ``command`` runs its argv, ``agent``
    runs ``FACTORY_AGENT_COMMAND`` with the plan on stdin, ``fake`` plays the scripted
    outcome. All three share the lease renewal (``LeaseKeeper``), the time-out (a failed
    attempt), the stop grace (an interrupted attempt) and the output contract; a run that
    cannot start (missing executable, no agent command, no scripted outcome, unknown
    adapter) is a finished failure, never retried. A run whose directory cannot be created
    or written (``runs_dir_unwritable``: a read-only, full or missing runs directory) never
    started its command: a failed attempt, requeued within its budget, else abandoned —
    a mutating one too, since nothing ran. A capture file that could not be written while
    the command ran (a full disk) leaves the result as the command said, with reason
    ``output_unwritable`` when it has none of its own and ``outputError`` journaled.
    ``lease_started`` is the monotonic instant taken before the claim (default: now).
    """
    lease_seconds = settings.FACTORY_LEASE_SECONDS
    lease = LeaseKeeper(
        run, worker=worker, lease_seconds=lease_seconds,
        lease_started=time.monotonic() if lease_started is None else lease_started,
        stop=stop, stop_grace=settings.FACTORY_STOP_GRACE_SECONDS,
    )
    if not start_run(run, worker=worker, now=database_now()):
        return
    plan = run.plan
    registry = get_registry()

    def finish(result: RunResult) -> None:
        write_while_held(lambda: finish_run(run, result, worker=worker, now=database_now(), registry=registry),
                         until=lease.held_until, what=f"the end of run {run.pk}")

    adapter = ADAPTERS.get(plan.get("adapter"))
    if adapter is None:
        finish(RunResult("FAILED", False, reason="unknown_adapter", summary=f"no adapter named {plan.get('adapter')!r}"))
        return
    execution = Execution(
        run=run,
        run_dir=Path(settings.FACTORY_RUNS_DIR) / str(run.pk),
        capture_name=plan.get("captureStdout") or "stdout.log",
        timeout_seconds=run.timeout_seconds,
        stdout_cap=settings.FACTORY_STDOUT_CAP_BYTES,
        while_waiting=lease,
        definitions=registry.definitions,
    )
    try:
        with lease.watching():
            outcome = adapter(execution)
    except Refused as exc:
        finish(RunResult("FAILED", False, reason=exc.code, summary=exc.detail))
        return
    except RunDirUnwritable as exc:
        # Nothing ran: an ordinary failed attempt, never an interrupted one (docs/design.md §8).
        # fail_attempt logs the reason with its detail (the path and the OS error).
        reason, detail = exc.code, exc.detail
        write_while_held(lambda: fail_attempt(run.pk, reason=reason, now=database_now(), worker=worker,
                                              detail=detail),
                         until=lease.held_until, what=f"the failed attempt of run {run.pk}")
        return
    if outcome.output_error:
        logger.error("run %s: its output could not be written (%s); read to the end and discarded",
                     run.pk, outcome.output_error, extra={"action": "output_unwritable", "run": run.pk})
    if outcome.aborted or lease.ended:
        _record_abort(run, lease, worker)
        return
    if outcome.timed_out:
        # A command killed at its time-out may have done part of its work, like a stopped one:
        # a mutating run waits as interrupted for an operator (docs/design.md §8).
        write_while_held(lambda: fail_attempt(run.pk, reason="timeout", now=database_now(), worker=worker,
                                              interrupted=True, detail=outcome.output_error),
                         until=lease.held_until, what=f"the time-out of run {run.pk}")
        return
    if outcome.spawner_lost:
        # Not the command's failure: the runtime cut it short, as a stopped worker does, so a
        # mutating run waits as interrupted for an operator (docs/design.md §8).
        logger.error("run %s: %s", run.pk, outcome.spawner_lost, extra={"action": "spawner_died", "run": run.pk})
        write_while_held(lambda: fail_attempt(run.pk, reason="spawner_died", now=database_now(), worker=worker,
                                              interrupted=True, detail=outcome.spawner_lost),
                         until=lease.held_until, what=f"the interrupted attempt of run {run.pk}")
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
    if outcome.output_error:
        result = dataclasses.replace(result, reason=result.reason or "output_unwritable",
                                     extra={**result.extra, "outputError": outcome.output_error})
    finish(result)


def _record_abort(run: Run, lease: LeaseKeeper, worker: str) -> None:
    """Record an attempt whose command was killed: the lease was lost (the journal says the
    worker killed it) or the attempt was interrupted (``fail_attempt(interrupted=True)``)."""
    if lease.ended == "lease_lost":
        write_while_held(
            lambda: record_lease_lost(run.pk, worker=worker, attempt=run.attempt, now=database_now()),
            until=time.monotonic() + renewal_interval(lease.lease_seconds), what=f"the lost lease of run {run.pk}",
        )
        return
    write_while_held(
        lambda: fail_attempt(run.pk, reason=lease.ended, now=database_now(), worker=worker, interrupted=True),
        until=lease.held_until + renewal_interval(lease.lease_seconds), what=f"the interrupted attempt of run {run.pk}",
    )


def work_one(*, worker: str, stop: threading.Event | None = None,
             previews: Callable[[bool | None], None] | None = None, clock: Callable[[], datetime] | None = None) -> bool:
    """Expire stale leases, then claim and execute one run. True when a run was handled.

    One statement (``waiting_work``) reads the database's instant, which serves the sweep and
    the claim, and says whether there may be work; when there is none that is all (an idle
    second), and the sweep runs only when a lease has expired. ``previews``, when given, is
    told whether a preview is open (the worker's preview thread takes that answer instead of
    asking: ``ops.worker``), and None before a claimed run is executed. The registry is re-read
    before the sweep when a file changed, so output contracts and chain edges are those in force, not those of the worker's start (a
    bad change on disk keeps the last good registry, as in the slot loop). ``stop`` is the
    worker's stop request (``execute_run``); ``clock``, when given, the claim's instant
    instead of the database's (``waiting_work``).
    """
    lease_started = time.monotonic()
    waiting = waiting_work(clock=clock)
    if previews is not None:
        previews(waiting.previews)
    if not (waiting.queued or waiting.expired):  # an idle second: one statement, no look at the files
        return False
    now = waiting.now
    store.refresh()
    if waiting.expired:
        expire_leases(now=now)
    run = claim_next_run(worker=worker, now=now, lease_seconds=settings.FACTORY_LEASE_SECONDS)
    if run is None:
        return False
    logger.info("run %s claimed (attempt %s/%s)", run.pk, run.attempt, run.max_attempts,
                extra={"action": "run_claimed", "run": run.pk})
    if previews is not None:
        previews(None)  # no word while the command runs: the preview thread asks for itself
    execute_run(run, worker=worker, stop=stop, lease_started=lease_started)
    return True
