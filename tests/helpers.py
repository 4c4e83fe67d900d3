"""Small helpers the tests share: the slot loop at a named instant, the worker's queue, the preview
threads' queue, injected events, many loops at once, the keyed example's customers, a ship-apply
request, a factory root with stale claims and the copies of a file this process holds open."""

import json
import os
import shutil
from pathlib import Path
from unittest import mock

import time_machine

from ops.slot_loop import iterate
from runtime.models import ACTIVE_RUN_STATUSES, Door, Run, RunStatus
from runtime.services.admission import admit_event
from runtime.services.execution import work_one
from runtime.services.preview_execution import preview_one

from .conftest import at

#: A ship-apply request: the head to ship, and the ship-scan's evidence for it.
SHIP_SHA = "0123456789abcdef0123456789abcdef01234567"
SHIP_PAYLOAD = {"repo": "alpha", "headSha": SHIP_SHA, "evidence": {"headSha": SHIP_SHA}}


def tick(instant: str):
    """One slot-loop iteration at a named instant."""
    return iterate(now=at(instant), record_status=False)


def finish_active_runs(outcome: str = "SUCCEEDED") -> int:
    """Mark every active run succeeded, as a worker would (for planning tests that do not execute)."""
    return Run.objects.filter(status__in=ACTIVE_RUN_STATUSES).update(status=RunStatus.SUCCEEDED, outcome=outcome)


def work_all(clock=None) -> int:
    """Run every queued run to its end, as a worker would, its claims at ``clock()`` when given
    (else the database's instant); returns how many."""
    count = 0
    while work_one(worker="test-worker", clock=clock):
        count += 1
    return count


def step(instant: str):
    """At ``instant``: run the queue, then one slot-loop iteration (publish the outbox, plan).

    The worker reads the database's clock, which no time travel moves: it is pinned to ``instant``."""
    with time_machine.travel(at(instant), tick=False), mock.patch(
        "runtime.services.execution.database_now", lambda: at(instant)
    ):
        work_all(clock=lambda: at(instant))
        return tick(instant)


def operator_envelope(**changes) -> dict:
    """A valid ``factory.work.requested`` envelope from an operator (eventId ``op-1``), with
    ``changes`` in place of its fields."""
    base = {
        "schemaVersion": "factory.event/v1", "eventId": "op-1", "type": "factory.work.requested",
        "source": "operator", "subject": "hello", "occurredAt": "2026-11-30T11:00:00+01:00",
        "correlationId": "op-1", "payload": {"repo": "hello"},
    }
    base.update(changes)
    return base


def inject(event_id: str, type_: str, payload: dict, instant: str = "2026-11-30T10:00:00Z"):
    envelope = {
        "schemaVersion": "factory.event/v1", "eventId": event_id, "type": type_, "source": "operator",
        "subject": payload.get("repo", "test"), "occurredAt": instant, "correlationId": event_id, "payload": payload,
    }
    return admit_event(envelope, door=Door.INJECT, now=at(instant))


def many_loops(registry_files, count: int) -> None:
    """``count`` enabled watched loops (reaper copies), each ticked once and proposed."""
    def change(data):
        template = {**data["reaper"], "enabled": True}
        data.clear()
        data.update({f"loop-{i:04d}": dict(template) for i in range(count)})
    registry_files.update("schedules.json", change)
    tick("2026-11-30T21:07:00Z")


#: The keyed worked example on, the heartbeat off: ``customer-digest`` ticks each customer at the time they chose.
DIGEST_ON = "schedules:\n  heartbeat:\n    enabled: false\n  customer-digest:\n    enabled: true\n"
_serial = iter(range(1, 10**9))


def choose(customer, wall, zone, instant):
    """Admit ``customer.digest-time.chosen`` at ``instant`` (the events door)."""
    return _admit("customer.digest-time.chosen", {"customer": customer, "at": wall, "timezone": zone}, instant)


def unsubscribe(customer, instant):
    return _admit("customer.unsubscribed", {"customer": customer}, instant)


def _admit(event_type, payload, instant):
    event_id = f"crm-{next(_serial)}"
    admit_event({
        "schemaVersion": "factory.event/v1", "eventId": event_id, "type": event_type, "source": "crm",
        "subject": payload["customer"], "occurredAt": instant, "correlationId": event_id, "payload": payload,
    }, door=Door.EVENTS, now=at(instant))
    return event_id


def nightly_overlay(entry: str, name: str = "nightly") -> str:
    """The heartbeat off and one overlay loop ``name`` (a singleton heartbeat type, enabled) with ``entry``'s lines."""
    return (
        "schedules:\n  heartbeat:\n    enabled: false\n"
        f"  {name}:\n    eventType: clock.tick.heartbeat\n    singleton: true\n    enabled: true\n{entry}"
    )


#: What an approval journals of a reaper proposal's preview that no preview thread has run yet
#: (``Preview.seen``): the reaper declares a preview, and the tests' runtime runs no worker.
PREVIEW_WAITING = {"status": "pending", "reason": "", "outcome": "", "summary": "", "finishedAt": None}


#: The example factory's scripts: the reaper, the claim writer.
EXAMPLE_ORCHESTRATOR = Path(__file__).resolve().parents[1] / "examples" / "factory" / "orchestrator"


def factory_root(root: Path, stale: tuple[str, ...] = ("T-7",)) -> Path:
    """A factory root at ``root``: the example's scripts and a claim of each ticket in ``stale``
    whose last heartbeat was 2026-11-30T18:00:00Z (stale for the reaper from 20:00Z on)."""
    shutil.copytree(EXAMPLE_ORCHESTRATOR, root / "orchestrator")
    (root / "claims").mkdir(parents=True)
    for ticket in stale:
        (root / "claims" / f"{ticket}.json").write_text(json.dumps(
            {"ticket": ticket, "owner": "agent-3", "heartbeatAt": "2026-11-30T18:00:00Z"}))
    return root


def run_previews(instant: str, worker: str = "test-worker") -> int:
    """Run every waiting preview, as a worker's preview thread would, with the database's clock
    pinned at ``instant``; returns how many ran."""
    count = 0
    with mock.patch("runtime.services.preview_execution.database_now", lambda: at(instant)):
        while preview_one(worker=worker):
            count += 1
    return count


def open_copies(path) -> int:
    """How many of this process's file descriptors are open on ``path`` (Linux ``/proc``)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == str(path)
        except OSError:
            pass
    return count
