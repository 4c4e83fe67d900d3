"""Running a loop once now: a person's trigger (docs/schedules.md, "Running a loop once now").

A trigger admits one event of the loop's event type through the ``operator`` door, with
the payload a tick of the current slot would carry (so it validates as a tick does) and an
eventId of its own, ``manual:<loop>:<requestId>`` — never a slot id, so it neither collides
with nor suppresses a tick; the ``manual:`` prefix belongs to that door
(``runtime.services.admission.RESERVED_PREFIXES``). The request id comes from the person's
request (the loop page's form renders one, an API client may send one), so a double click
or a retried call admits one event: the second answers with the first's event and proposal.

The event is planned in the transaction that admits it, so the caller can take the person
straight to its proposal. Like every event from a door other than the slot loop's, it
plans **watched** (the ``operator`` door is not among ``TYPE_AUTO_DOORS``): a proposal
whatever the loop's approval, never an auto-approved run. It holds the loop's singleton as
a tick does (``runtime.services.planning.singleton_of``); barriers hold as for any run.

Journal (docs/design.md §9): ``event_admitted`` and ``loop_triggered`` name the person
(actor ``operator``); ``loop_triggered``'s data is ``{loop, eventId, via, key?, note?,
osUser?, tokenLabel?}``.
"""

import re
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from lib.calendar import loop_rule
from lib.envelope import make_envelope
from lib.instants import format_instant
from lib.notes import check_note
from lib.refusals import Refused
from runtime.models import ACTIVE_RUN_STATUSES, Actor, Door, Event, JournalEntry, Proposal, Run, RunStatus
from runtime.registry import Loop, Registry
from runtime.services.admission import admit_batch
from runtime.services.journal import entry_values, record_values
from runtime.services.planning import plan_event, singleton_key

from .models import KeyedSchedule, LoopPause
from .pausing import check_control_permission

#: A request id: what a form or an API client sends so that a retry admits one event.
REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")
EVENT_ID_PREFIX = "manual:"


class TriggerRefused(Refused):
    """A trigger that may not be taken: ``code`` is ``permission_denied`` (403),
    ``unknown_loop`` or ``unknown_key`` (404), ``loop_disabled``, ``loop_paused``,
    ``previous_run_in_flight`` or ``request_id_reused`` (409), ``key_required``,
    ``key_not_allowed``, ``invalid_request_id``, ``note_too_long``, ``invalid_note`` or
    ``invalid_payload`` (400)."""

    STATUS = {
        "permission_denied": 403, "unknown_loop": 404, "unknown_key": 404, "loop_disabled": 409, "loop_paused": 409,
        "previous_run_in_flight": 409, "request_id_reused": 409, "key_required": 400, "key_not_allowed": 400,
        "invalid_request_id": 400, "note_too_long": 400, "invalid_note": 400, "invalid_payload": 400,
    }

    def __init__(self, code: str, detail: str):
        super().__init__(code, detail, status=self.STATUS[code])


@dataclass(frozen=True)
class Trigger:
    """What a trigger did: its ``event``, the event's ``proposal`` (None when planning ended it:
    ``outcome`` and ``reason`` say why) and whether the request id had been seen
    (``duplicate``: nothing new was admitted)."""

    event: Event
    proposal: Proposal | None
    outcome: str
    reason: str
    duplicate: bool

    def as_json(self) -> dict:
        """``{loop, eventId, duplicate, planning: {outcome, reason}, proposal: id | null}``."""
        return {
            "loop": self.event.payload.get("loop"), "eventId": self.event.uid, "duplicate": self.duplicate,
            "planning": {"outcome": self.outcome, "reason": self.reason},
            "proposal": self.proposal.pk if self.proposal else None,
        }


def new_request_id() -> str:
    """A fresh request id (32 hex digits)."""
    return uuid.uuid4().hex


def trigger_envelope(loop: Loop, *, key: str | None, cadence_seconds: int | None, now: datetime, request_id: str) -> dict:
    """The envelope of a trigger of ``loop`` at ``now``: a tick's payload for the current slot
    (for a key of a keyed loop, the trigger's instant) with ``skippedSlots: 0``, eventId
    ``manual:<loop>:<request_id>``, source ``operator``. Pure."""
    slot = loop_rule(loop).floor(now) if key is None else now.replace(microsecond=0)
    payload = {**loop.payload, "loop": loop.name}
    if key is not None:
        payload["key"] = key
    payload.update(slot=format_instant(slot), cadenceSeconds=cadence_seconds, skippedSlots=0)
    return make_envelope(
        event_id=f"{EVENT_ID_PREFIX}{loop.name}:{request_id}", type=loop.event_type, source="operator",
        subject=key if key is not None else loop.subject, occurred_at=now.replace(microsecond=0), payload=payload,
    )


def trigger_loop(
    name: str, *, registry: Registry, user, now: datetime, via: str, key: str | None = None, note: str = "",
    request_id: str | None = None, os_user: str | None = None, token_label: str = "",
) -> Trigger:
    """Run loop ``name`` (and ``key``, for a keyed loop) once now as ``user`` (who needs
    ``control_loop``): admit its event and plan it, in one transaction. A ``request_id``
    already used for this loop answers with that trigger (``duplicate``). Raises
    ``TriggerRefused``."""
    check_control_permission(user, TriggerRefused)
    note = note.strip()
    check_note(note, TriggerRefused)
    request_id = request_id or new_request_id()
    if not REQUEST_ID.fullmatch(request_id):
        raise TriggerRefused("invalid_request_id", "a request id is 8 to 64 characters: letters, digits, - and _")
    event_id = f"{EVENT_ID_PREFIX}{name}:{request_id}"
    seen = Event.objects.filter(uid=event_id).first()
    if seen is not None:
        return _again(seen, key, note)
    loop, cadence_seconds = _triggerable(registry, name, key)
    envelope = trigger_envelope(loop, key=key, cadence_seconds=cadence_seconds, now=now, request_id=request_id)
    data = {"loop": name, "eventId": event_id, "via": via}
    data.update({k: v for k, v in (("key", key), ("note", note), ("osUser", os_user), ("tokenLabel", token_label)) if v})
    with transaction.atomic():
        batch = admit_batch([envelope], door=Door.OPERATOR, now=now, registry=registry, actor_name=user.get_username())
        if batch.refused:
            raise TriggerRefused("invalid_payload", "; ".join(e["detail"] for e in batch.refused[0]))
        if event_id not in batch.admitted:
            # The same request id, admitted by a concurrent request after the read above.
            return _again(Event.objects.get(uid=event_id), key, note)
        pk = batch.admitted[event_id]
        record_values([entry_values("loop_triggered", Actor.OPERATOR, at=now, actor_name=user.get_username(), event_id=pk, data=data)])
        # Planned before the commit: no planner sees the event unplanned, and the person is
        # taken to its proposal at once.
        planned = plan_event(pk, now=now, registry=registry)
    return Trigger(planned.event, planned.proposal, planned.outcome, planned.reason, duplicate=False)


def _again(event: Event, key: str | None, note: str) -> Trigger:
    """The answer to a request id seen before: its event and proposal, if it was the same
    trigger (the same key and note: a retry); ``request_id_reused`` otherwise, since another
    request's key or note would be dropped without a word."""
    used = event.payload.get("key")
    if used != key:
        raise TriggerRefused("request_id_reused", f"the request id of {event.uid} was used with {_key_words(used)}, "
                                                  f"not with {_key_words(key)}")
    said = JournalEntry.objects.filter(action="loop_triggered", event=event).values_list("data", flat=True).first() or {}
    if said.get("note", "") != note:
        raise TriggerRefused("request_id_reused", f"the request id of {event.uid} was used with another note")
    proposal = Proposal.objects.filter(event=event).first()
    return Trigger(event, proposal, event.planning_outcome or "", event.planning_reason, duplicate=True)


def _key_words(key: str | None) -> str:
    return f"the key {key!r}" if key is not None else "no key"


def _triggerable(registry: Registry, name: str, key: str | None) -> tuple[Loop, int | None]:
    """The loop and the ``cadenceSeconds`` its trigger carries, or the refusal."""
    loop = registry.loops.get(name)
    if loop is None:
        raise TriggerRefused("unknown_loop", f"no loop named {name!r} in the registry in force")
    if not loop.enabled:
        raise TriggerRefused("loop_disabled", f"{name} is disabled in the registry: enable it in a reviewed change first")
    pause = LoopPause.objects.filter(loop=name).select_related("paused_by").first()
    if pause is not None:
        raise TriggerRefused("loop_paused", f"{name} is paused by {pause.paused_by.get_username()} "
                                            f"({pause.note}): resume it first")
    cadence_seconds = loop.cadence_seconds
    if loop.keyed is None and key is not None:
        raise TriggerRefused("key_not_allowed", f"{name} is not a keyed loop: it takes no key")
    if loop.keyed is not None:
        if not key:
            raise TriggerRefused("key_required", f"{name} is a keyed loop: name the key to run")
        row = KeyedSchedule.objects.filter(loop=name, key=key).values("every_seconds").first()
        if row is None:
            raise TriggerRefused("unknown_key", f"{name} has no key {key!r}")
        cadence_seconds = row["every_seconds"]
    single = singleton_key(name, key) if loop.singleton else None
    running = single and Run.objects.filter(singleton_key=single, status__in=ACTIVE_RUN_STATUSES).values_list(
        "pk", "status").first()
    if running:
        pk, status = running
        todo = ": retry or close it first" if status == RunStatus.INTERRUPTED else ""
        raise TriggerRefused("previous_run_in_flight", f"{name} is a singleton loop and run {pk} is {status}{todo}")
    return loop, cadence_seconds
