"""The run worker's loop: ``work_one`` until stopped (docs/design.md §8).

A stop (SIGTERM, Ctrl-C, the supervisor's death) lets the current run finish within
``FACTORY_STOP_GRACE_SECONDS``; past it the run's command is killed and the attempt
recorded as interrupted (``runtime.services.execution``). The worker then exits.

The worker starts its command spawner (``lib/command_spawner.py``) as it starts, so that its
first run costs a fork like the others. Each worker also has a preview thread (``run_previews``):
previews run beside runs, one at a time, so a preview never delays a run and a single worker
still previews (docs/design.md §8, Previews). A stop kills a running preview's command at once:
a preview is advice.

An idle worker asks the database one question a second (``runs.waiting_work``), for both
threads: the run thread tells the preview thread whether a preview is open (a ``WorkWord``,
``ops.thread_word``); the preview thread asks for itself only when that word is older than
``thread_word.WORD_SECONDS`` (the run thread is running a command, or its database fails),
and sleeps ``thread_word.QUIET_SECONDS`` while it says none is open.
"""

import functools
import logging
import os
import socket
import threading

from django.db import connections

from runtime.adapters.command import SPAWNER
from runtime.services.execution import work_one
from runtime.services.preview_execution import preview_one

from .failure_streak import DATABASE_ERRORS, FailureStreak
from .loop_connection import step_on_connection
from .thread_word import WorkWord

logger = logging.getLogger(__name__)

#: How long an idle worker waits before it looks at the queue again, in seconds; the preview
#: thread's second too, while the run thread's word does not answer it.
IDLE_SLEEP_SECONDS = 1.0


def worker_name() -> str:
    """``host:pid:thread``: who holds a lease, as runs and the journal record it."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def run_worker(*, stop: threading.Event, once: bool = False) -> None:
    """Work until ``stop`` is set (or, with ``once``, until the queue is empty, then until no
    preview waits), with a preview thread beside the runs unless ``once``."""
    name = worker_name()
    try:
        SPAWNER.start()  # now, not at the first run: its interpreter's start is the worker's to pay
    except OSError as exc:
        logger.error("worker %s: the command spawner could not start (%s); each command run will try again", name,
                     exc, extra={"action": "spawner_failed"})
    logger.info("worker %s started", name, extra={"action": "worker_started"})
    previews, word = None, WorkWord()
    if not once:
        previews = threading.Thread(target=run_previews, kwargs={"stop": stop, "word": word}, name="previews",
                                    daemon=True)
        previews.start()
    _loop(functools.partial(work_one, previews=word.tell), name=name, stop=stop, once=once, what="worker")
    if once:
        _loop(preview_one, name=name, stop=stop, once=True, what="preview")
    if previews is not None:
        word.wanted.set()  # stopping: the preview thread sees ``stop`` now, not at its next second
        previews.join()
    logger.info("worker %s stopped", name, extra={"action": "worker_stopped"})


def run_previews(*, stop: threading.Event, word: WorkWord) -> None:
    """The preview thread: ``preview_one`` until ``stop`` is set, with its own connection, when
    the run thread's ``word`` (whether a preview is open) says so (``WorkWord.due``); between two
    looks it waits for that word (``WorkWord.wait``), ``IDLE_SLEEP_SECONDS`` when it has none."""
    name = worker_name()
    failures = FailureStreak(logger, what="preview iteration", action="preview_error")
    looked = float("-inf")
    try:
        while not stop.is_set():
            if word.due(looked):
                looked = word.clock()
                if _step(preview_one, name=name, stop=stop, failures=failures):
                    continue
            word.wait(looked, otherwise=IDLE_SLEEP_SECONDS)
    finally:
        connections.close_all()


def _loop(step, *, name: str, stop: threading.Event, once: bool, what: str) -> None:
    """Call ``step(worker=name, stop=stop)`` until ``stop`` (or, with ``once``, until it did nothing)."""
    failures = FailureStreak(logger, what=f"{what} iteration", action=f"{what}_error")
    while not stop.is_set():
        did_work = _step(step, name=name, stop=stop, failures=failures)
        if once and not did_work:
            break
        if not did_work:
            stop.wait(IDLE_SLEEP_SECONDS)


def _step(step, *, name: str, stop: threading.Event, failures: FailureStreak) -> bool:
    """``step(worker=name, stop=stop)`` on a usable connection; a database error is counted in
    ``failures`` and is no work done."""
    try:
        did_work = step_on_connection(step, worker=name, stop=stop)
    except DATABASE_ERRORS as exc:
        failures.failed(exc)
        return False
    failures.succeeded()
    return did_work
