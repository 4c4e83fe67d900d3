"""The one-second slot loop: re-read the registry, fire ticks, publish the outbox, plan events (DESIGN §5, §7, §8).

``iterate`` is one iteration at a named instant; ``run_slot_loop`` is the loop around
it that ``runserve`` starts.
"""

import logging
import os
import socket
import threading
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError, close_old_connections, transaction
from django.utils import timezone

from intake.admission import AdmissionRefused, admit_event
from runtime.chains import mark_published, mark_refused, next_pending_entry
from runtime.models import Door
from runtime.planning import plan_pending
from runtime.registry import Registry, store

from .models import SlotLoopStatus
from .ticks import TickReport, emit_due_ticks

logger = logging.getLogger(__name__)

LOOP_NAME = "slot-loop"


#: Most outbox rows one iteration publishes; the rest wait a second, ticks stay on time.
OUTBOX_BATCH = 1000


@dataclass(frozen=True)
class IterationReport:
    ticks: list[TickReport]
    planned: int
    published: int = 0


def publish_outbox(*, now: datetime, registry: Registry, limit: int = OUTBOX_BATCH) -> int:
    """Admit pending chained events through the ``chain`` door, oldest first (DESIGN §8).

    Each row's admission and its ``published`` mark are one transaction, so a crash
    leaves the row pending and the next iteration admits it then; an eventId already
    admitted (another publisher) answers duplicate and the row is marked all the same:
    exactly one admission either way. A row the registry refuses is marked ``refused``
    with the reasons and journaled; the rows behind it go on. Returns how many rows
    were settled.
    """
    settled = 0
    while settled < limit and (entry := next_pending_entry()) is not None:
        try:
            with transaction.atomic():
                admission = admit_event(entry.envelope, door=Door.CHAIN, now=now, registry=registry)
                mark_published(entry, duplicate=admission.duplicate, now=now)
        except AdmissionRefused as exc:
            mark_refused(entry, exc.errors, now=now)
        settled += 1
    return settled


def iterate(*, now: datetime, record_status: bool = True) -> IterationReport:
    """One iteration at ``now``: reload a changed registry, admit due ticks, publish the outbox, plan events."""
    store.refresh()
    registry = store.current()
    ticks = emit_due_ticks(now=now, registry=registry)
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
            iterate(now=timezone.now())
        except DatabaseError:
            logger.exception("slot loop iteration failed; retrying", extra={"action": "slot_loop_error"})
        if once:
            break
        stop.wait(1.0 - (timezone.now().timestamp() % 1.0))
    logger.info("slot loop stopped", extra={"action": "slot_loop_stopped"})
