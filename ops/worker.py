"""The run worker's loop: ``work_one`` until stopped (docs/design.md §8).

A stop (SIGTERM, Ctrl-C, the supervisor's death) lets the current run finish within
``FACTORY_STOP_GRACE_SECONDS``; past it the run's command is killed and the attempt
recorded as interrupted (``runtime.services.execution``). The worker then exits.

The worker starts its command spawner (``lib/command_spawner.py``) as it starts, so that its
first run costs a fork like the others. Each worker also has a preview thread (``run_previews``): previews run beside runs, one
at a time, so a preview never delays a run and a single worker still previews (docs/design.md
§8, Previews). A stop kills a running preview's command at once: a preview is advice.
"""

import logging
import os
import socket
import threading

from django.db import close_old_connections, connections

from runtime.adapters.command import SPAWNER
from runtime.services.execution import work_one
from runtime.services.preview_execution import preview_one

from .failure_streak import DATABASE_ERRORS, FailureStreak

logger = logging.getLogger(__name__)

#: How long an idle worker waits before it looks at the queue again, in seconds.
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
    previews = None
    if not once:
        previews = threading.Thread(target=run_previews, kwargs={"stop": stop}, name="previews", daemon=True)
        previews.start()
    _loop(work_one, name=name, stop=stop, once=once, what="worker")
    if once:
        _loop(preview_one, name=name, stop=stop, once=True, what="preview")
    if previews is not None:
        previews.join()
    logger.info("worker %s stopped", name, extra={"action": "worker_stopped"})


def run_previews(*, stop: threading.Event) -> None:
    """The preview thread: ``preview_one`` until ``stop`` is set, with its own connection."""
    try:
        _loop(preview_one, name=worker_name(), stop=stop, once=False, what="preview")
    finally:
        connections.close_all()


def _loop(step, *, name: str, stop: threading.Event, once: bool, what: str) -> None:
    """Call ``step(worker=name, stop=stop)`` until ``stop`` (or, with ``once``, until it did nothing)."""
    failures = FailureStreak(logger, what=f"{what} iteration", action=f"{what}_error")
    while not stop.is_set():
        close_old_connections()
        try:
            did_work = step(worker=name, stop=stop)
        except DATABASE_ERRORS as exc:
            failures.failed(exc)
            did_work = False
        else:
            failures.succeeded()
        if once and not did_work:
            break
        if not did_work:
            stop.wait(IDLE_SLEEP_SECONDS)
