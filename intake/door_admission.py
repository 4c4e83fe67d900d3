"""The signed doors' admissions, written in groups (docs/design.md §3, "The signed doors").

A request to ``POST /events`` or ``POST /github`` validates its envelope on its own thread
(``validate_envelope``: the envelope, the type, the payload), then ``admit_at_door`` hands
it to the process's ``GroupCommit``: the envelopes of the requests waiting at that moment
are admitted together — one ``admit_batch`` per door, so one insert of the events and one
of their ``event_admitted`` entries, and one commit — and each request is answered from
what the insert returned. Exactly-once is the unique eventId, as for one admission: an
eventId already stored, or twice in one group, is admitted once and every other request
carrying it is answered duplicate; only the first request carrying an eventId is written,
so the 202 goes to the request whose envelope was stored. A request is answered only after
the commit that holds its event; when the group's transaction fails, each envelope is admitted again on
its own, so one the database refuses is that request's 500 and the others are admitted.

On SQLite the group's transaction is begun before the group is taken (``GroupCommit``'s
opening): its ``BEGIN IMMEDIATE`` waits for the write turn, which another process's
transaction often holds, and the requests arriving during that wait join the group instead
of waiting for the next one. On PostgreSQL a group of one door is one statement (the events
and their journal entries: ``admit_batch``), which commits itself: no ``BEGIN`` and
``COMMIT`` round trips; a group of several doors is one transaction. Django's health check
of the connection (``CONN_HEALTH_CHECKS``: a ``SELECT 1`` on PostgreSQL, once a request) is
left out when the same connection wrote a door group less than ``HEALTHY_SECONDS`` ago
(docs/performance.md, "Signed intake"). The stored events that duplicates are compared
with are read after the answers are final, and a failure to read them is only logged.
"""

import logging
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from time import monotonic

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections, transaction

from lib.group_commit import GroupCommit
from runtime import clock
from runtime.models import Door, Event
from runtime.registry import Registry, get_registry
from runtime.services.admission import (
    INSERT_ROWS,
    AdmissionRefused,
    admit_batch,
    validate_envelope,
    warn_if_content_differs,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DoorAdmission:
    """What a door answers: ``admitted`` xor ``duplicate``, and the envelope's eventId."""

    admitted: bool
    duplicate: bool
    event_id: str


def admit_at_door(envelope, *, door: Door, registry: Registry) -> DoorAdmission:
    """Validate ``envelope`` and admit it through ``door`` with whatever other requests of
    this process are admitting at the same moment (the module's docstring).

    Raises ``AdmissionRefused`` with every error found (nothing written); re-raises the
    ``DatabaseError`` of a write that failed (nothing of this envelope written). The
    stored ``admitted_at`` is the group's instant on the database's clock.
    """
    errors = validate_envelope(envelope, door=door, registry=registry)
    if errors:
        raise AdmissionRefused(errors)
    return DOORS.submit((envelope, door))


def write_admissions(batch: list[tuple[dict, Door]]) -> list[DoorAdmission]:
    """Admit a group of valid ``(envelope, door)`` pairs at one instant, atomically: in the
    caller's transaction (``DOORS`` opens one on SQLite), else in one statement or a
    transaction of its own; one ``DoorAdmission`` per pair, in order.

    Only the first pair carrying an eventId is written, so the request answered admitted is
    the one whose envelope (and door) was stored, whichever door the others came through;
    every other pair carrying it is a duplicate. The answers come from the insert itself:
    when it fails nothing of the group is written, and ``GroupCommit`` then writes each pair
    alone, so no committed event is ever answered duplicate. Raises the insert's
    ``DatabaseError``.
    """
    first: dict[str, int] = {}
    for index, (envelope, _door) in enumerate(batch):
        first.setdefault(envelope["eventId"], index)
    by_door: dict[Door, list[dict]] = defaultdict(list)
    for index in first.values():
        envelope, door = batch[index]
        by_door[door].append(envelope)
    registry = get_registry()
    now = clock.recent_database_now()
    inserted: set[str] = set()
    one_statement = len(by_door) == 1 and len(first) <= INSERT_ROWS and connection.vendor == "postgresql"
    with nullcontext() if one_statement or connection.in_atomic_block else transaction.atomic():
        for door, envelopes in by_door.items():
            # validate_envelope ran on each request's thread: not again here.
            inserted.update(admit_batch(envelopes, door=door, now=now, registry=registry, validate=False).admitted)
    answers = []
    for index, (envelope, _door) in enumerate(batch):
        event_id = envelope["eventId"]
        admitted = first[event_id] == index and event_id in inserted
        answers.append(DoorAdmission(admitted=admitted, duplicate=not admitted, event_id=event_id))
    _compare_duplicates([pair for pair, answer in zip(batch, answers, strict=True) if answer.duplicate])
    return answers


def _compare_duplicates(duplicates: list[tuple[dict, Door]]) -> None:
    """Warn of each duplicate whose content differs from the stored event (docs/design.md §3);
    a database error reading them is logged, never raised: the answers are final."""
    try:
        stored = _stored(duplicates)
    except DatabaseError as exc:
        logger.warning("the stored events of %d duplicates could not be read to compare: %s", len(duplicates), exc,
                       extra={"action": "duplicates_not_compared"})
        return
    for envelope, door in duplicates:
        warn_if_content_differs(stored[envelope["eventId"]], envelope, door)


def _stored(pairs: list[tuple[dict, Door]]) -> dict[str, Event]:
    """The stored events of ``pairs``' eventIds, by eventId (one query; none for no pairs):
    what a duplicate is compared with (docs/design.md §3)."""
    if not pairs:
        return {}
    return {event.uid: event for event in Event.objects.filter(uid__in={e["eventId"] for e, _ in pairs})}


#: Seconds after a door group's commit during which its connection is taken to be alive
#: without Django's health check.
HEALTHY_SECONDS = 1.0


@contextmanager
def group_opening() -> Iterator[None]:
    """A door group's opening on this thread's connection: ``transaction.atomic()`` on SQLite,
    nothing on PostgreSQL (``write_admissions`` is atomic there by itself); the connection is
    marked health-checked when it wrote a door group within ``HEALTHY_SECONDS`` (a connection
    dropped since is that group's ``OperationalError``, and Django's request end then checks
    and replaces it)."""
    wrapper = connections[DEFAULT_DB_ALIAS]
    written = getattr(wrapper, "door_group_written", None)
    if wrapper.connection is not None and written is not None and monotonic() - written < HEALTHY_SECONDS:
        wrapper.health_check_done = True
    with nullcontext() if wrapper.vendor == "postgresql" else transaction.atomic():
        yield
    wrapper.door_group_written = monotonic()


#: This process's group of door admissions (one per process: its threads share it).
DOORS = GroupCommit(write_admissions, opening=group_opening)
