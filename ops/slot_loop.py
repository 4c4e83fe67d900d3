"""The one-second slot loop: re-read the registry, fire ticks, publish the outbox, plan events (docs/design.md §5, §7, §8).

``iterate`` is one iteration at a named instant and composes the layers below: tick
emission (``schedules.ticks``), outbox publication and planning (``runtime.services``);
``run_slot_loop`` is the loop around it that ``runserve`` starts.
"""

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError, close_old_connections

from runtime import clock
from runtime.registry import store
from runtime.services.outbox import publish_outbox
from runtime.services.planning import plan_pending
from schedules.models import SlotLoopStatus
from schedules.ticks import TickReport, emit_due_ticks

logger = logging.getLogger(__name__)

#: The ``SlotLoopStatus`` row every slot-loop process writes; the doctor reads it.
LOOP_NAME = "slot-loop"


@dataclass(frozen=True)
class IterationReport:
    ticks: list[TickReport]
    planned: int
    published: int = 0


def iterate(*, now: datetime, record_status: bool = True, at: datetime | None = None) -> IterationReport:
    """One iteration at ``now`` (the database's instant): reload a changed registry, admit due
    ticks, publish the outbox, plan events.

    ``at``, a past instant (``schedule tick --at``), only decides which slots are due
    (``schedules.ticks.emit_due_ticks``): publication and planning happen at ``now``, so
    nothing unrelated to the ticks is stamped with a pretend time.
    """
    store.refresh()
    registry = store.current()
    ticks = emit_due_ticks(now=now, registry=registry, at=at)
    published = publish_outbox(now=now, registry=registry)
    planned = plan_pending(now=now, registry=registry)
    if record_status:
        SlotLoopStatus.objects.update_or_create(
            name=LOOP_NAME,
            defaults={"last_iteration_at": now, "pid": os.getpid(), "host": socket.gethostname()},
        )
    return IterationReport(ticks, planned, published)


def run_slot_loop(*, stop: threading.Event, once: bool = False) -> None:
    """Iterate about once a second until ``stop`` is set; ``once`` runs a single iteration."""
    logger.info("slot loop started", extra={"action": "slot_loop_started"})
    while not stop.is_set():
        close_old_connections()
        try:
            iterate(now=clock.database_now())
        except DatabaseError:
            logger.exception("slot loop iteration failed; retrying", extra={"action": "slot_loop_error"})
        if once:
            break
        # The host clock only paces the loop (about one iteration a second); every instant
        # the iteration uses comes from the database's clock.
        stop.wait(1.0 - (time.time() % 1.0))
    logger.info("slot loop stopped", extra={"action": "slot_loop_stopped"})
