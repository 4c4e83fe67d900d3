"""``POST /api/loops/{name}/pause`` and ``POST /api/loops/{name}/resume`` (docs/api.md; docs/schedules.md, "Pausing a loop").

A person only (``PersonRequired``: ``FACTORY_API_TOKEN`` never pauses), with the
``control_loop`` permission (the service's 403 ``permission_denied``). The pause's body is
``{note, until?}``, the resume's ``{}`` or ``{note}``; anything else is 400 ``invalid_body``.
Each goes through ``schedules.pausing`` with ``via: "api"`` and the label of the person's
token; ``now`` is the database's clock, read once. The services' refusals answer with their
code and status (``schedules.pausing.PauseRefused``).
"""

from rest_framework.response import Response

from lib.instants import InstantError, parse_instant
from runtime.registry import store
from schedules.pausing import OTHER_DOORS, PauseView, pause_loop, resume_loop

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
        pause = pause_loop(name, registry=store.current(), note=note, until=until, **self.decided_by(request))
        shown = PauseView(pause.paused_by.get_username(), pause.paused_at, pause.note, pause.until).as_json()
        return Response({"loop": name, "paused": shown, "otherDoors": OTHER_DOORS})


class LoopResumeView(DecisionView):
    @openapi.loop_resume
    def post(self, request, name: str):
        note = decision_note(request)
        covered = resume_loop(name, registry=store.current(), note=note, **self.decided_by(request))
        return Response({"loop": name, "paused": None, "coveredSlots": covered})

