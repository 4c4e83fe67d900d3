"""The notifier's loop (docs/notifications.md): every ``PASS_SECONDS`` one pass of
``raise_and_clear``, and in between every due notification sent.

It runs as its own process (``manage.py notify``; ``runserve`` starts it as a child when a
channel is configured), never in the slot loop: a pass reads the doctor's whole document
and a webhook may take ``WEBHOOK_TIMEOUT_SECONDS`` to fail, neither of which may delay a
tick; and never in a run worker, whose process a long run occupies.
"""

import logging
import threading
from datetime import timedelta

from django.db import close_old_connections

from runtime import clock

from .failure_streak import DATABASE_ERRORS, FailureStreak
from .notify import raise_and_clear
from .notify_send import send_one

logger = logging.getLogger(__name__)

#: How often conditions are compared with the open alerts, in seconds: a notification says
#: within about this long that something was raised or cleared.
PASS_SECONDS = 15
IDLE_SLEEP_SECONDS = 1


def run_notifier(*, stop: threading.Event, once: bool = False) -> None:
    """Notify until ``stop`` is set; with ``once``, one pass and every due send, then return."""
    logger.info("notifier started", extra={"action": "notifier_started"})
    next_pass = None
    failures = FailureStreak(logger, what="notifier iteration", action="notifier_error")
    while not stop.is_set():
        close_old_connections()
        try:
            now = clock.database_now()
            if next_pass is None or now >= next_pass:
                raise_and_clear(now=now)
                next_pass = now + timedelta(seconds=PASS_SECONDS)
            sent = send_one(now=clock.database_now())
        except DATABASE_ERRORS as exc:
            failures.failed(exc)
            sent = False
        else:
            failures.succeeded()
        if once and not sent:
            break
        if not sent:
            stop.wait(IDLE_SLEEP_SECONDS)
    logger.info("notifier stopped", extra={"action": "notifier_stopped"})
