"""The run worker's loop: ``work_one`` until stopped (docs/design.md §8).

A stop (SIGTERM, Ctrl-C, the supervisor's death) lets the current run finish within
``FACTORY_STOP_GRACE_SECONDS``; past it the run's command is killed and the attempt
recorded as interrupted (``runtime.services.execution``). The worker then exits.
"""

import logging
import os
import socket
import threading

from django.db import DatabaseError, close_old_connections

from runtime.services.execution import work_one

logger = logging.getLogger(__name__)

#: How long an idle worker waits before it looks at the queue again, in seconds.
IDLE_SLEEP_SECONDS = 1.0


def worker_name() -> str:
    """``host:pid:thread``: who holds a lease, as runs and the journal record it."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def run_worker(*, stop: threading.Event, once: bool = False) -> None:
    """Work until ``stop`` is set (or, with ``once``, until the queue is empty)."""
    name = worker_name()
    logger.info("worker %s started", name, extra={"action": "worker_started"})
    while not stop.is_set():
        close_old_connections()
        try:
            did_work = work_one(worker=name, stop=stop)
        except DatabaseError:
            logger.exception("worker iteration failed; retrying", extra={"action": "worker_error"})
            did_work = False
        if once and not did_work:
            break
        if not did_work:
            stop.wait(IDLE_SLEEP_SECONDS)
    logger.info("worker %s stopped", name, extra={"action": "worker_stopped"})
