"""The one-second slot loop: re-read the registry, fire ticks, publish the outbox, plan events (docs/design.md §5, §7, §8).

``iterate`` is one iteration at a named instant and composes the layers below: tick
emission (``schedules.ticks``), outbox publication and planning (``runtime.services``).
``run_slot_loop``, which ``runserve`` starts, runs them in two threads, each with its
own database connection, so that a tick is never late because of other work: the tick
thread (``run_tick_emitter``) emits ticks once a second while this process holds the
tick emitter lease (``schedules.emitter``: one process of several on a database), and
the main thread publishes the outbox and plans, however long that takes.
"""

import logging
import math
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from django.db import close_old_connections, connection, connections

from runtime import clock
from runtime.registry import Registry, store
from runtime.services.backlog import Backlog, backlog, backlog_now
from runtime.services.outbox import publish_outbox
from runtime.services.planning import plan_pending
from schedules.emitter import EmitterLease, bound_frozen_transactions
from schedules.tick_rows import tick_forms
from schedules.ticks import TickReport, emit_due_ticks

from .failure_streak import DATABASE_ERRORS, FailureStreak
from .loop_connection import step_on_connection
from .loop_status import ask_idle, hold_recording_idle, record_checking_idle, record_iteration, recorded_ago
from .thread_word import WorkWord

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class IterationReport:
    ticks: list[TickReport]
    planned: int
    published: int = 0


def iterate(
    *, now: datetime, record_status: bool = True, at: datetime | None = None, ticks: bool = True,
) -> IterationReport:
    """One iteration at ``now`` (the database's instant): reload a changed registry, admit due
    ticks (unless ``ticks`` is False: the tick thread does), publish the outbox, plan events.
    The outbox and planning phases run only when ``runtime.services.backlog`` says they
    have work. With ``ticks`` the ticks' question and the backlog's are asked in one
    statement first (``schedules.due_check.check_idle``), so an idle iteration is that
    statement and the doctor's row (docs/design.md §5); when a tick may be due,
    ``emit_due_ticks`` takes its own path and the backlog is asked again after it.

    ``at``, a past instant (``schedule tick --at``), only decides which slots are due
    (``schedules.ticks.emit_due_ticks``): publication and planning happen at ``now``, so
    nothing unrelated to the ticks is stamped with a pretend time.
    """
    started = time.monotonic()
    store.refresh()
    registry = store.current()
    fired, waiting = [], None
    if ticks and at is None:
        # The question emit_due_ticks asks first (due_check.nothing_due), with the backlog's.
        idle, waiting = ask_idle(now, registry)
        if not idle:
            # Ticks admitted now are events to plan: the backlog is asked after them.
            fired, waiting = emit_due_ticks(now=now, registry=registry), None
    elif ticks:
        fired = emit_due_ticks(now=now, registry=registry, at=at)
    if waiting is None:
        waiting = backlog()
    published = publish_outbox(now=now, registry=registry) if waiting.outbox else 0
    # Published chain events are planned in the same iteration, as before the check.
    planned = plan_in_steps(now=now, registry=registry) if waiting.events or published else 0
    if record_status:
        record_iteration(now, seconds=time.monotonic() - started)
    return IterationReport(fired, planned, published)


#: The planning thread's iteration looks at the registry's files only when no thread of this
#: process did in the last half second: the tick thread, waking at the same instant, has.
SHARED_CHECK_SECONDS = 0.5
#: The planning thread's idle iteration leaves the doctor's row to the tick thread when that
#: recorded an iteration this long ago at most (``slotLoopStale`` is 10 s).
RECORDED_RECENTLY_SECONDS = 1.5


def plan_iteration(lease: EmitterLease) -> IterationReport:
    """The planning thread's iteration (``run_slot_loop``): ``iterate(ticks=False)`` at the
    database's instant, read in the statement that asks the backlog's questions. The registry
    is looked at unless the tick thread just did (``SHARED_CHECK_SECONDS``); the doctor's row
    is written, while this process's tick thread holds ``lease`` (its ``held``: another process's
    planning thread recording it would hide a holder whose seconds fail or hang, docs/design.md
    §11), when the
    iteration published or planned, or when no iteration was recorded by this process in the
    last ``RECORDED_RECENTLY_SECONDS``, but never while the tick thread fails (``ticks_failing``). Its
    idle iteration is one statement, made only when the tick thread's word does not already
    answer it (``planner_word``)."""
    started = time.monotonic()
    store.refresh_if_due(SHARED_CHECK_SECONDS)
    registry = store.current()
    now, waiting = backlog_now()
    published = publish_outbox(now=now, registry=registry) if waiting.outbox else 0
    planned = plan_in_steps(now=now, registry=registry) if waiting.events or published else 0
    recording = lease.held and not ticks_failing.is_set()
    if recording and (published or planned or recorded_ago() > RECORDED_RECENTLY_SECONDS):
        record_iteration(now, seconds=time.monotonic() - started)
    return IterationReport([], planned, published)


#: The tick thread's word to the planning thread after its check (the backlog's two questions
#: asked in its ticks' statement, ``due_check.check_idle``; ``ops.thread_word``): work (an event
#: not planned, an outbox row pending, ticks just admitted) wakes it at once, nothing lets it
#: sleep, no word (no check made: the lease held by another process, a failure, a stop) wakes it
#: to ask for itself from then on. An idle second of the planning thread then asks the database
#: nothing (docs/performance.md, "An idle second"); what arrives meanwhile is seen by the tick
#: thread's next check, within a second.
planner_word = WorkWord()


def to_next_second() -> float:
    """Seconds to the next second of the host's clock: the tick thread's pace, and the planning
    thread's while the tick thread's word does not answer it (it asks for itself every second)."""
    return 1.0 - (time.time() % 1.0)


#: Most events one iteration plans, and how many between two looks at the tick thread: a
#: step of 250 is one multi-row chunk of the batch planner (about 0.2 s of CPU), so the tick
#: thread waits at most that long for SQLite's write lock, and a backlog of 10,000 drains in
#: two iterations instead of ten.
PLAN_LIMIT = 5000
PLAN_STEP = 250
#: Set while this process's tick thread fails its seconds (a database error after the lease,
#: e.g. a chunk of ticks refused): no thread of the process records an iteration then, so the
#: doctor's ``slotLoopStale`` says the clock is not turning (docs/design.md §11).
ticks_failing = threading.Event()
#: Set while this process's tick thread emits: planning waits between its steps, so on
#: SQLite (one writer at a time) the ticks do not queue behind a planning backlog.
emitting = threading.Event()


def plan_in_steps(*, now: datetime, registry) -> int:
    """Plan up to ``PLAN_LIMIT`` waiting events, ``PLAN_STEP`` at a time, pausing while the
    tick thread emits; returns how many were planned."""
    planned = 0
    while planned < PLAN_LIMIT:
        while emitting.is_set():
            time.sleep(0.005)
        step = plan_pending(now=now, registry=registry, limit=min(PLAN_STEP, PLAN_LIMIT - planned))
        planned += step
        if step < PLAN_STEP:
            break
    return planned


def emit_once(lease: EmitterLease) -> list[TickReport] | None:
    """One tick-thread iteration: hold the lease at the database's instant (read by the lease's
    own statement: ``EmitterLease.hold_now``) and, if held, emit the due ticks, record the
    iteration and tell the planning thread whether it has work (``planner_word``); None when
    another process holds the lease (the planning thread then asks for itself). An idle
    second is two statements: the lease, and the doctor's row's update returning the ticks'
    and the backlog's question (``record_checking_idle``); when a tick may be due,
    ``emit_due_ticks`` asks the ticks' question again and takes its path, and the iteration
    is recorded again when it ends.
    Between the chunks of a burst the lease is renewed and the iteration recorded, so a
    long burst keeps the lease and does not look like a stopped slot loop. Planning in
    this process pauses meanwhile (``emitting``)."""
    emitting.set()
    started = time.monotonic()
    try:
        asked = _hold_and_ask(lease, started)
        if asked is None:
            planner_word.tell(None)
            return None
        now, registry, idle, waiting = asked
        latest = [now]

        def renew() -> bool:
            instant = lease.hold_now()
            if instant is None:
                latest.append(clock.database_now())
                return False
            latest.append(instant)
            record_iteration(instant)
            return True

        fired = []
        if not idle:
            fired = emit_due_ticks(now=now, registry=registry, renew=renew)
            record_iteration(latest[-1], seconds=time.monotonic() - started)
        planner_word.tell(not idle or waiting.outbox or waiting.events)
        return fired
    finally:
        emitting.clear()


def _hold_and_ask(lease: EmitterLease, started: float) -> tuple[datetime, Registry, bool, Backlog] | None:
    """The tick thread's second up to its ticks: the lease at the database's instant, the
    registry in force (looked at), the doctor's row and the ticks' and the backlog's question,
    as ``(instant, registry, idle?, backlog)``; None when another process holds the lease. One
    statement on PostgreSQL while this process holds the lease and has recorded the row
    (``hold_recording_idle``); else the lease, then the row's update returning the question
    (``record_checking_idle``), or the question alone while the seconds fail (``ticks_failing``:
    the row is left to go stale, and the doctor says the clock is not turning)."""
    if connection.vendor == "postgresql" and lease.held and recorded_ago() < math.inf and not ticks_failing.is_set():
        registry = _registry_in_force()
        asked = hold_recording_idle(lease, seconds=time.monotonic() - started, registry=registry)
        return None if asked is None else (asked[0], registry, *asked[1:])
    now = lease.hold_now()
    if now is None:
        return None
    registry = _registry_in_force()
    if ticks_failing.is_set():
        idle, waiting = ask_idle(now, registry)
    else:
        idle, waiting = record_checking_idle(now, seconds=time.monotonic() - started, registry=registry)
    return now, registry, idle, waiting


def _registry_in_force() -> Registry:
    """The registry, its files looked at first, with its ticks' forms built (``tick_forms``:
    once per registry, before its first burst needs them)."""
    store.refresh()
    registry = store.current()
    tick_forms(registry)
    return registry


def run_tick_emitter(*, stop: threading.Event, lease: EmitterLease, failed: threading.Event) -> None:
    """The tick thread: ``emit_once`` about once a second until ``stop``, then give the
    lease up. A database error is logged and retried; anything else is logged, sets
    ``failed`` and ``stop`` — the process exits non-zero and its supervisor sees it."""
    failures = FailureStreak(logger, what="tick emission", action="tick_emitter_error")
    try:
        with bound_frozen_transactions():
            tick_until(stop, lease, failures)
        planner_word.tell(None)  # stopping: the planning thread no longer waits on this one
        close_old_connections()
        lease.release(clock.database_now())
    except Exception:
        logger.exception("the tick thread failed; stopping the slot loop", extra={"action": "tick_emitter_failed"})
        failed.set()
        stop.set()
        planner_word.tell(None)  # wakes the planning thread to see the stop
    finally:
        connections.close_all()


def tick_until(stop: threading.Event, lease: EmitterLease, failures: FailureStreak) -> None:
    """``emit_once`` about once a second, at the top of each second, until ``stop``; a database
    error is counted in ``failures`` and the next second tries again."""
    while not stop.is_set():
        try:
            step_on_connection(emit_once, lease)
        except DATABASE_ERRORS as exc:
            failures.failed(exc)
            ticks_failing.set()
            planner_word.tell(None)  # no word this second: the planning thread asks for itself
        else:
            failures.succeeded()
            ticks_failing.clear()
        stop.wait(to_next_second())


def run_slot_loop(*, stop: threading.Event, once: bool = False) -> bool:
    """Run the tick thread and iterate outbox and planning until ``stop`` is set: at once when
    the tick thread's check finds work for them, else about once a second unless the tick
    thread, holding the lease, found nothing less than ``thread_word.WORD_SECONDS`` ago
    (``planner_word``); ``once`` runs a single whole iteration (ticks included) in this
    thread. Returns False when the tick thread failed."""
    logger.info("slot loop started", extra={"action": "slot_loop_started"})
    failed = threading.Event()
    emitter, lease = None, EmitterLease()
    planner_word.tell(None)  # no word yet from this loop's tick thread
    if not once:
        emitter = threading.Thread(
            target=run_tick_emitter, kwargs={"stop": stop, "lease": lease, "failed": failed},
            name="tick-emitter", daemon=True,
        )
        emitter.start()
    failures = FailureStreak(logger, what="slot loop iteration", action="slot_loop_error")
    looked = float("-inf")
    while not stop.is_set():
        if once or planner_word.due(looked):
            looked = planner_word.clock()
            try:
                if once:
                    step_on_connection(lambda: iterate(now=clock.database_now()))
                else:
                    step_on_connection(plan_iteration, lease)
            except DATABASE_ERRORS as exc:
                failures.failed(exc)
            else:
                failures.succeeded()
        if once:
            break
        # The host clock only paces the loop; every instant the iteration uses is the database's.
        planner_word.wait(looked, otherwise=to_next_second())
    if emitter is not None:
        emitter.join()
    logger.info("slot loop stopped", extra={"action": "slot_loop_stopped"})
    return not failed.is_set()
