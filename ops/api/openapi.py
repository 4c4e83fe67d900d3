"""The OpenAPI description of ``/api/``, ``/schedules`` and ``/status`` (drf-spectacular; docs/api.md).

Each view is described here, next to the others, so that the list of statuses and codes
of every route reads in one place and ``tests/http/test_openapi.py`` can hold the answers
to it. The doors' descriptions live with them (``intake/openapi.py``: the intake layer
cannot import this one).
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema

from .shapes import (
    ApprovedSerializer,
    ErrorSerializer,
    EventItemSerializer,
    EventPageSerializer,
    LoopPausedSerializer,
    LoopResumedSerializer,
    LoopTriggeredSerializer,
    PreviewAskedSerializer,
    ProposalItemSerializer,
    ProposalPageSerializer,
    RejectedSerializer,
    RunDecidedSerializer,
    RunItemSerializer,
    RunPageSerializer,
    ServerErrorSerializer,
)


class PersonTokenScheme(OpenApiAuthenticationExtension):
    """A person's API token or ``FACTORY_API_TOKEN``, both as a bearer token."""

    target_class = "ops.api.auth.PersonTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http", "scheme": "bearer",
            "description": "a person's API token (manage.py api_token create), or FACTORY_API_TOKEN, "
                           "which reads and never decides",
        }


class SharedTokenScheme(OpenApiAuthenticationExtension):
    """``FACTORY_API_TOKEN`` on ``/schedules`` and ``/status``."""

    target_class = "ops.auth.BearerTokenAuthentication"
    name = "sharedTokenAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "FACTORY_API_TOKEN"}


class CsrfSessionScheme(OpenApiAuthenticationExtension):
    """The admin's session cookie on ``/api/`` (CSRF-checked on POST); ``cookieAuth`` is the
    same cookie on ``/schedules`` and ``/status``."""

    target_class = "ops.api.auth.CsrfSessionAuthentication"
    name = "sessionAuth"

    def get_security_definition(self, auto_schema):
        from django.conf import settings

        return {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME,
                "description": "a staff session of /admin/; a POST also sends X-CSRFToken"}


def refusal(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


#: What every protected route may answer besides its own outcomes.
COMMON = {
    401: refusal("`not_authenticated` (no credentials) or `authentication_failed` (a wrong, revoked or "
                 "malformed bearer token)"),
    403: refusal("`permission_denied`: not a staff user"),
    405: refusal("`method_not_allowed`, with an `Allow` header"),
    500: OpenApiResponse(ServerErrorSerializer, description="`internal_error`: the cause is in the log under requestId"),
}
NOT_FOUND = {404: refusal("`not_found`: no row of that id")}
PAGE = [
    OpenApiParameter("page", {"type": "integer", "minimum": 1, "maximum": 10**9},
                     description="the page, from 1; past the last page is 404 `not_found`"),
    OpenApiParameter("pageSize", {"type": "integer", "minimum": 1, "maximum": 500},
                     description="items per page: default 50, at most 500"),
]
BAD_FILTER = {400: refusal("`invalid_filter`: a status not in the enum, or a loop or type with a NUL "
                           "or longer than its column; `invalid_parameter`: ?page= or ?pageSize= not a "
                           "whole number in its range, a parameter the list does not take (?limit=) or one "
                           "given twice"),
              404: refusal("`not_found`: a page past the last one")}
NO_NUL = "^[^\\u0000]*$"
#: A note's text (lib.notes): no control character but tab, line feed and carriage return, no bidi override.
NOTE_TEXT = "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f\\u202a-\\u202e\\u2066-\\u2069]*$"
LOOP = OpenApiParameter("loop", {"type": "string", "maxLength": 63, "pattern": NO_NUL}, description="only this loop's")
ID = OpenApiParameter("id", {"type": "integer", "minimum": 1}, OpenApiParameter.PATH,
                      description="the row's id; anything else is 404 `not_found`")


def _status(choices: list[str]) -> OpenApiParameter:
    return OpenApiParameter("status", str, enum=choices, description="only those in this status")


#: A decision's body: ``{}`` or ``{"note": text}``, nothing else (400 ``invalid_body``).
NOTE_BODY = {
    "type": "object", "additionalProperties": False,
    "properties": {"note": {"type": "string", "pattern": NOTE_TEXT, "maxLength": 2000, "description": "journaled with the decision"}},
}


NOTE_REQUEST = {"application/json": NOTE_BODY}


def decision(operation_id: str, summary: str, ok, refusals: dict, *, request=NOTE_REQUEST):
    return extend_schema(
        operation_id=operation_id, summary=summary, tags=["decisions"], request=request, parameters=[ID],
        responses={200: ok, **COMMON, **refusals,
                   400: refusal("`invalid_body` (anything but {} or {\"note\": text}), `note_too_long` "
                                "(over 2,000 characters), `invalid_note` (a control character or a lone surrogate in it), `parse_error` (not strict JSON: a key twice counts), "
                                "`bad_request` (the body ended before its Content-Length)"),
                   408: refusal("`request_timeout`: the body did not arrive within FACTORY_HTTP_READ_SECONDS"),
                   413: refusal("`payload_too_large`: a body over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB)"),
                   403: refusal("`permission_denied` (no approve_proposal, or not staff), `person_required` "
                                "(FACTORY_API_TOKEN never decides), `csrf_failed` (a session POST without its "
                                "CSRF token)"),
                   404: refusal("`not_found`: no row of that id"),
                   415: refusal("`unsupported_media_type`: the body is not application/json")},
    )


events_list = extend_schema(
    operation_id="api_events_list", summary="List admitted events", tags=["reads"], responses={200: EventPageSerializer, **COMMON, **BAD_FILTER},
    parameters=[*PAGE, OpenApiParameter("type", {"type": "string", "maxLength": 200, "pattern": NO_NUL},
                                 description="only this event type"), LOOP],
)
event_read = extend_schema(operation_id="api_event_read", summary="Read an event", tags=["reads"], parameters=[ID],
                           responses={200: EventItemSerializer, **COMMON, **NOT_FOUND})
proposals_list = extend_schema(
    operation_id="api_proposals_list", summary="List proposals", tags=["reads"], responses={200: ProposalPageSerializer, **COMMON, **BAD_FILTER},
    parameters=[*PAGE, _status(["pending", "approved", "rejected", "superseded"]), LOOP],
)
proposal_read = extend_schema(operation_id="api_proposal_read", summary="Read a proposal", tags=["reads"], parameters=[ID],
                              responses={200: ProposalItemSerializer, **COMMON, **NOT_FOUND})
runs_list = extend_schema(
    operation_id="api_runs_list", summary="List runs", tags=["reads"], responses={200: RunPageSerializer, **COMMON, **BAD_FILTER},
    parameters=[*PAGE, _status(["queued", "claimed", "running", "succeeded", "failed", "abandoned", "interrupted"]),
                LOOP],
)
run_read = extend_schema(operation_id="api_run_read", summary="Read a run", tags=["reads"], parameters=[ID],
                         responses={200: RunItemSerializer, **COMMON, **NOT_FOUND})
proposal_approve = decision(
    "api_proposal_approve", "Approve a pending proposal and queue its run", ApprovedSerializer,
    {409: refusal("`not_pending` (already decided) or `previous_run_in_flight` (a run of the singleton loop is "
                  "queued, running or interrupted and awaits a decision; the proposal stays pending)")},
)
proposal_reject = decision(
    "api_proposal_reject", "Reject a pending proposal", RejectedSerializer, {409: refusal("`not_pending`: already decided")},
)
run_retry = decision(
    "api_run_retry", "Retry an interrupted run (one new attempt)", RunDecidedSerializer,
    {409: refusal("`not_interrupted`: the run is not waiting for a decision")}, request=None,
)
run_close = decision(
    "api_run_close", "Close an interrupted run for good", RunDecidedSerializer,
    {409: refusal("`not_interrupted`: the run is not waiting for a decision")},
)
proposal_preview = extend_schema(
    operation_id="api_proposal_preview",
    summary="Ask for a pending proposal's preview again: its mutating command's dry run (docs/design.md §8, Previews)",
    tags=["decisions"], request=None, parameters=[ID],
    responses={202: PreviewAskedSerializer, **COMMON,
               403: refusal("`permission_denied` (no approve_proposal, or not staff), `person_required` "
                            "(FACTORY_API_TOKEN never asks), `csrf_failed`"),
               404: refusal("`not_found`: no proposal of that id"),
               409: refusal("`not_pending` (decided), `no_preview` (its definition declares none), "
                            "`preview_in_progress` (its preview waits or runs)"),
               429: refusal("`preview_too_soon`: a person asked for this proposal's preview less than 10 s ago")},
)
LOOP_NAME = OpenApiParameter("name", {"type": "string", "maxLength": 63, "pattern": NO_NUL}, OpenApiParameter.PATH,
                             description="the loop's name; a loop not in the registry in force is 404 `unknown_loop`")
PAUSE_BODY = {
    "type": "object", "additionalProperties": False, "required": ["note"],
    "properties": {
        "note": {"type": "string", "pattern": NOTE_TEXT, "minLength": 1, "maxLength": 2000, "description": "why: journaled and shown"},
        "until": {"type": "string", "format": "date-time", "description": "resume by itself then (RFC 3339 with an offset)"},
    },
}


def loop_control(operation_id: str, summary: str, ok, body: dict, conflicts: str, bad: str):
    return extend_schema(
        operation_id=operation_id, summary=summary, tags=["decisions"], request={"application/json": body},
        parameters=[LOOP_NAME],
        responses={200: ok, **COMMON,
                   400: refusal(bad + ", `invalid_note` (a control character or a lone surrogate), `parse_error`, `bad_request`"),
                   403: refusal("`permission_denied` (no control_loop, or not staff), `person_required` "
                                "(FACTORY_API_TOKEN never pauses), `csrf_failed`"),
                   404: refusal("`unknown_loop`: no loop of that name"),
                   409: refusal(conflicts),
                   408: refusal("`request_timeout`"), 413: refusal("`payload_too_large`"),
                   415: refusal("`unsupported_media_type`: the body is not application/json")},
    )


loop_pause = loop_control(
    "api_loop_pause", "Pause a loop: it fires no slot until resumed or until `until` (docs/schedules.md)",
    LoopPausedSerializer, PAUSE_BODY, "`already_paused`, or `loop_disabled` (disabled in the registry)",
    "`invalid_body` (anything but {note, until?}), `note_required`, `note_too_long` (over 2,000 characters), "
    "`until_in_past`, `until_too_far` (more than 30 days ahead)",
)
loop_resume = loop_control(
    "api_loop_resume", "Resume a paused loop: its current slot fires at the next iteration, with no skips",
    LoopResumedSerializer, NOTE_BODY, "`not_paused`",
    "`invalid_body` (anything but {} or {\"note\": text}), `note_too_long` (over 2,000 characters), `invalid_note`",
)
TRIGGER_BODY = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "note": {"type": "string", "pattern": NOTE_TEXT, "maxLength": 2000, "description": "why: journaled"},
        "key": {"type": "string", "description": "the key to run (a keyed loop only, and then required)"},
        "requestId": {"type": "string", "pattern": "^[A-Za-z0-9_-]{8,64}$",
                      "description": "the same id again admits nothing new (200 `duplicate: true`)"},
    },
}
loop_trigger = extend_schema(
    operation_id="api_loop_trigger",
    summary="Run a loop once now: one event of its type through the operator door, planned watched (docs/schedules.md)",
    tags=["decisions"], request={"application/json": TRIGGER_BODY}, parameters=[LOOP_NAME],
    responses={201: LoopTriggeredSerializer, 200: LoopTriggeredSerializer, **COMMON,
               400: refusal("`invalid_body`, `key_required`, `key_not_allowed`, `invalid_request_id`, `note_too_long`, "
                            "`invalid_note`, `invalid_payload`, `parse_error`, `bad_request`"),
               403: refusal("`permission_denied` (no control_loop, or not staff), `person_required` "
                            "(FACTORY_API_TOKEN never triggers), `csrf_failed`"),
               404: refusal("`unknown_loop` or `unknown_key`"),
               409: refusal("`loop_disabled`, `loop_paused`, `previous_run_in_flight` (a run of the singleton loop is "
                            "in flight), `request_id_reused` (the request id ran another key)"),
               408: refusal("`request_timeout`"), 413: refusal("`payload_too_large`"),
               415: refusal("`unsupported_media_type`: the body is not application/json")},
)
unknown_route = extend_schema(exclude=True)

SCHEDULES_PAGE = [
    OpenApiParameter("page", {"type": "integer", "minimum": 1, "maximum": 10**9},
                     description="one page of the loops by name, from 1; past the last page is 404 `not_found`"),
    OpenApiParameter("pageSize", {"type": "integer", "minimum": 1, "maximum": 500},
                     description="loops per page: default 50, at most 500"),
]
schedules_read = extend_schema(
    operation_id="schedules_read", summary="The effective loops, as `schedule list --json` (docs/schedules.md)", tags=["operations"],
    parameters=SCHEDULES_PAGE,
    responses={200: OpenApiResponse({"oneOf": [
        {"type": "array", "items": {"type": "object"}, "description": "without ?page= or ?pageSize=: every loop"},
        {"type": "object", "required": ["count", "next", "previous", "results"], "properties": {
            "count": {"type": "integer"}, "next": {"type": "string", "nullable": True}, "previous": {"type": "string", "nullable": True},
            "results": {"type": "array", "items": {"type": "object"}},
        }, "description": "with ?page= or ?pageSize=: one page of loops by name"},
    ]}, description="one item per loop, or one page of them"), **COMMON,
        400: refusal("`invalid_parameter`: ?page= or ?pageSize= not a whole number in its range, "
                     "a parameter the route does not take (?limit=) or one given twice"),
        404: refusal("`not_found`: a page past the last one")},
)
status_read = extend_schema(
    operation_id="status_read", summary="The doctor's document (docs/design.md §11)", tags=["operations"],
    responses={200: OpenApiResponse({"type": "object", "required": ["version", "ok", "anomalies"], "properties": {
        "version": {"type": "string", "description": "the product's version (CHANGELOG.md)"},
        "ok": {"type": "boolean"}, "anomalies": {"type": "array", "items": {"type": "string"}},
    }}, description="200 whatever it says: `ok` tells"), **COMMON},
)
metrics_read = extend_schema(
    operation_id="metrics_read", summary="The Prometheus text format (docs/production.md, metrics)", tags=["operations"],
    responses={(200, "text/plain"): OpenApiResponse({"type": "string"}, description=(
        "the database's figures over `FACTORY_METRICS_WINDOW_SECONDS`, the doctor's anomalies as gauges and this "
        "runserve's intake answers (`text/plain; version=0.0.4`)")), **COMMON},
)
