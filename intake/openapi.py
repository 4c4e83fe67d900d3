"""The OpenAPI description of ``POST /events`` and ``POST /github`` (docs/intake.md "Every answer").

Raw schemas rather than serializers: the doors read their bodies themselves (the signature
is over the bytes), so no DRF serializer ever sees them. Every status and refusal code of
docs/intake.md is listed; ``tests/http/test_openapi.py`` holds the two together.
"""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema


def _error(codes: str) -> OpenApiResponse:
    return OpenApiResponse({
        "type": "object", "required": ["error", "detail"],
        "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
    }, description=codes)


def _answer(properties: dict, description: str) -> dict:
    return {"type": "object", "required": list(properties), "properties": properties, "description": description}


ADMITTED = _answer({"admitted": {"type": "boolean", "enum": [True]}, "duplicate": {"type": "boolean", "enum": [False]},
                    "eventId": {"type": "string"}}, "admitted")
DUPLICATE = _answer({"admitted": {"type": "boolean", "enum": [False]}, "duplicate": {"type": "boolean", "enum": [True]},
                     "eventId": {"type": "string"}}, "this eventId was already admitted; nothing new was written")
IGNORED = _answer({"admitted": {"type": "boolean", "enum": [False]}, "ignored": {"type": "boolean", "enum": [True]},
                   "reason": {"type": "string", "enum": [
                       "unhandled_event", "unhandled_action", "not_pull_request_head", "unconfigured_repo",
                       "not_base_branch", "repo_report_only"]}},
                  "a genuine delivery that is not an event")
ERRORS = OpenApiResponse({
    "type": "object", "required": ["errors"],
    "properties": {"errors": {"type": "array", "minItems": 1, "items": {
        "type": "object", "required": ["code", "detail"],
        "properties": {"code": {"type": "string"}, "detail": {"type": "string"}}}}},
}, description="authentic but not admitted; codes: `invalid_json`, and per door those below")
SERVER_ERROR = OpenApiResponse({
    "type": "object", "required": ["error", "detail", "requestId"],
    "properties": {"error": {"type": "string", "enum": ["internal_error"]}, "detail": {"type": "string"},
                   "requestId": {"type": "string"}},
}, description="`internal_error`: the cause is in the log under requestId; send again, the eventId makes it safe")

#: What both doors answer besides their outcomes (docs/intake.md "Every answer").
SHARED = {
    400: _error("`bad_request`: refused before the door ran (a Host header not served), or a body shorter "
                "than its Content-Length"),
    405: _error("`method_not_allowed`, with `Allow: POST`"),
    408: _error("`request_timeout`: the request did not arrive within FACTORY_HTTP_READ_SECONDS"),
    413: _error("`payload_too_large`: over 1 MiB (/events) or 25 MiB (/github)"),
    500: SERVER_ERROR,
    503: _error("`registry_invalid`: the serving process never had a registry that validates"),
}

ENVELOPE = {
    "type": "object",
    "description": "a factory.event/v1 envelope (docs/design.md §3)",
    "required": ["schemaVersion", "eventId", "type", "source", "subject", "occurredAt", "correlationId", "payload"],
    "properties": {
        "schemaVersion": {"type": "string", "enum": ["factory.event/v1"]},
        "eventId": {"type": "string", "minLength": 1, "maxLength": 200},
        "type": {"type": "string"},
        "source": {"type": "string"},
        "subject": {"type": "string"},
        "occurredAt": {"type": "string", "format": "date-time"},
        "correlationId": {"type": "string"},
        "causationId": {"type": "string"},
        "payload": {"type": "object"},
    },
}

events_door = extend_schema(
    operation_id="events_post",
    summary="Admit a signed factory.event/v1 envelope",
    tags=["intake"],
    auth=[],
    request={"application/json": ENVELOPE},
    parameters=[
        OpenApiParameter("X-Factory-Timestamp", str, OpenApiParameter.HEADER, required=True,
                         description="unix seconds; within ±300 s of the server's clock"),
        OpenApiParameter("X-Factory-Signature", str, OpenApiParameter.HEADER, required=True,
                         description='sha256=HMAC-SHA256(FACTORY_EVENTS_SECRET, "<timestamp>.<raw body>") in hex'),
    ],
    responses={
        202: OpenApiResponse(ADMITTED, description="admitted"),
        200: OpenApiResponse(DUPLICATE, description="a duplicate eventId"),
        401: _error("`route_disabled`, `missing_signature`, `bad_timestamp`, `bad_signature`, `stale_timestamp`"),
        415: _error("`unsupported_media_type`: not application/json"),
        422: OpenApiResponse(ERRORS.response, description=ERRORS.description + ": `invalid_envelope`, "
                             "`reserved_event_id`, `unregistered_type`, `invalid_payload`"),
        **SHARED,
    },
)

github_door = extend_schema(
    operation_id="github_post",
    summary="Receive a GitHub webhook delivery",
    tags=["intake"],
    auth=[],
    request={"application/json": {"type": "object", "description": "the delivery's payload, as GitHub sends it"},
             "application/x-www-form-urlencoded": {
                 "type": "object", "required": ["payload"],
                 "properties": {"payload": {"type": "string", "description": "the delivery's JSON"}}}},
    parameters=[
        OpenApiParameter("X-GitHub-Event", str, OpenApiParameter.HEADER, required=False,
                         description="the kind: pull_request and workflow_run are read, others — and a "
                                     "delivery without the header — answer 200 ignored `unhandled_event`"),
        OpenApiParameter("X-GitHub-Delivery", str, OpenApiParameter.HEADER, required=True,
                         description="the delivery id: 1–200 printable characters, no spaces"),
        OpenApiParameter("X-Hub-Signature-256", str, OpenApiParameter.HEADER, required=True,
                         description="sha256=HMAC-SHA256(FACTORY_GITHUB_WEBHOOK_SECRET, raw body) in hex"),
    ],
    responses={
        202: OpenApiResponse(ADMITTED, description="admitted"),
        200: OpenApiResponse({"oneOf": [DUPLICATE, IGNORED]}, description="a duplicate, or ignored with a reason"),
        401: _error("`route_disabled`, `missing_signature`, `legacy_signature_only`, `bad_signature`"),
        415: _error("`unsupported_media_type`: neither application/json nor application/x-www-form-urlencoded"),
        422: OpenApiResponse(ERRORS.response, description=ERRORS.description + ": `missing_delivery_id`, "
                             "`malformed_payload`, `ambiguous_pull_request_head`"),
        **SHARED,
    },
)
