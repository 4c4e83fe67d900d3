"""``POST /api/loops/{name}/pause``, ``…/resume`` and ``…/trigger`` (docs/api.md; docs/schedules.md,
"Pausing a loop" and "Running a loop once now").

A person only (``PersonRequired``: ``FACTORY_API_TOKEN`` never pauses), with the
``control_loop`` permission (the service's 403 ``permission_denied``). The pause's body is
``{note, until?}``, the resume's ``{}`` or ``{note}``; anything else is 400 ``invalid_body``.
Each goes through ``schedules.pausing`` with ``via: "api"`` and the label of the person's
token; ``now`` is the database's clock, read once. The services' refusals answer with their
code and status (``schedules.pausing.PauseRefused``, ``schedules.triggering.TriggerRefused``).

The trigger's body is ``{}`` or any of ``{note, key, requestId}``: a client that retries with
the same ``requestId`` admits one event (200 ``duplicate: true``; 201 the first time).
"""

from rest_framework.response import Response

from lib.instants import InstantError, parse_instant
from runtime.listing import proposal_item
from runtime.models import Proposal
from runtime.registry import get_registry
from schedules.pausing import OTHER_DOORS, PauseView, pause_loop, resume_loop
from schedules.triggering import trigger_loop

from . import openapi
from .views import BadRequest, DecisionView, decision_note


def _pause_body(request) -> tuple[str, object]:
    data = request.data  # read by ops.api.parsers: 408, 400 bad_request or 413 refuse the body
    if not isinstance(data, dict) or set(data) - {"note", "until"}:
        raise BadRequest('the body is {"note": "<text>", "until": "<instant>"} (until optional)', code="invalid_body")
    note, until = data.get("note", ""), data.get("until")
    if not isinstance(note, str) or (until is not None and not isinstance(until, str)):
        raise BadRequest("note and until are strings", code="invalid_body")
    try:
        return note, parse_instant(until) if until is not None else None
    except InstantError as exc:
        raise BadRequest(f"until: {exc}", code="invalid_body") from None


class LoopPauseView(DecisionView):
    @openapi.loop_pause
    def post(self, request, name: str):
        note, until = _pause_body(request)
        pause = pause_loop(name, registry=get_registry(), note=note, until=until, **self.decided_by(request))
        shown = PauseView(pause.paused_by.get_username(), pause.paused_at, pause.note, pause.until).as_json()
        return Response({"loop": name, "paused": shown, "otherDoors": OTHER_DOORS})


class LoopResumeView(DecisionView):
    @openapi.loop_resume
    def post(self, request, name: str):
        note = decision_note(request)
        covered = resume_loop(name, registry=get_registry(), note=note, **self.decided_by(request))
        return Response({"loop": name, "paused": None, "coveredSlots": covered})



TRIGGER_FIELDS = {"note", "key", "requestId"}


def _trigger_body(request) -> dict:
    data = request.data  # read by ops.api.parsers: 408, 400 bad_request or 413 refuse the body
    if data is None:
        data = {}
    if not isinstance(data, dict) or set(data) - TRIGGER_FIELDS:
        raise BadRequest('the body is {} or {"note": "<text>", "key": "<key>", "requestId": "<id>"}, each optional',
                         code="invalid_body")
    if any(not isinstance(value, str) for value in data.values()):
        raise BadRequest("note, key and requestId are strings", code="invalid_body")
    return {"note": data.get("note", ""), "key": data.get("key"), "request_id": data.get("requestId")}


class LoopTriggerView(DecisionView):
    @openapi.loop_trigger
    def post(self, request, name: str):
        done = trigger_loop(name, registry=get_registry(), **_trigger_body(request), **self.decided_by(request))
        answer = done.as_json()
        if done.proposal is not None:
            answer["proposal"] = proposal_item(Proposal.objects.select_related("event", "decided_by").get(pk=done.proposal.pk))
        return Response(answer, status=200 if done.duplicate else 201)
