"""The HTTP doors: ``POST /events`` and ``POST /github`` (docs/design.md §10, §12; docs/intake.md).

Both views read the raw body themselves (``intake.bodies.read_body``), check in the order
size → signature → content type → JSON → envelope or translation, and answer every refusal
with a status and a machine-readable code; nothing is written before the signature holds.
They are CSRF-exempt (``APIView.as_view`` wraps them) and use no session or login: the
signature is the authentication. They are ``APIView``s so that drf-spectacular describes
them (``intake.openapi``), but their ``dispatch`` is their own: no DRF request wrapping,
authentication, permissions, negotiation or rendering per request (docs/performance.md,
"Signed intake"). The client's ``Accept`` header is ignored: every answer is JSON written
as DRF's ``JSONRenderer`` writes it (compact UTF-8), with ``Allow: POST``.

Statuses: 202 admitted, 200 duplicate or ignored, 401 ``{error, detail}`` not authentic,
405/408/413/415 ``{error, detail}``, 422 ``{errors: [{code, detail}]}``; a 500 is
``factory_site.requests.server_error``'s JSON.
"""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from intake.bodies import (
    EVENTS_MAX_BODY_BYTES,
    FORM_CONTENT_TYPE,
    GITHUB_MAX_BODY_BYTES,
    JSON_CONTENT_TYPE,
    decode_form_payload,
    read_body,
    require_media_type,
)
from intake.door_admission import DoorAdmission, admit_at_door
from intake.github import Ignored
from intake.openapi import events_door, github_door
from intake.services import receive_github_delivery
from intake.signatures import verify_factory_signature, verify_github_signature
from lib.json_text import decode_json
from lib.refusals import Refused
from runtime import clock
from runtime.models import Door
from runtime.registry import RegistryInvalid, get_registry
from runtime.services.admission import AdmissionRefused

_RENDERER = JSONRenderer()


def _answer(status: int, document: dict) -> HttpResponse:
    """``document`` as JSON, whatever ``Accept`` says: webhook senders are not browsers."""
    return HttpResponse(_RENDERER.render(document), status=status, content_type="application/json",
                        headers={"Allow": "POST"})


def _error(status: int, code: str, detail: str) -> HttpResponse:
    return _answer(status, {"error": code, "detail": detail})


def _errors(errors: list[dict]) -> HttpResponse:
    return _answer(422, {"errors": errors})


def _refused(exc: Refused) -> HttpResponse:
    """A refusal in the doors' shapes: 422 ``{errors: [{code, detail}]}``, else ``{error, detail}``."""
    if exc.status == 422:
        return _errors(exc.as_errors())
    return _error(exc.status, exc.code, exc.detail)


def _admitted(admission: DoorAdmission) -> HttpResponse:
    if admission.duplicate:
        return _answer(200, {"admitted": False, "duplicate": True, "eventId": admission.event_id})
    return _answer(202, {"admitted": True, "duplicate": False, "eventId": admission.event_id})


class IntakeView(APIView):
    """What both doors share: POST only, JSON answers only, 503 without a good registry."""

    # Only POST is documented: OPTIONS, HEAD and the rest are 405 with ``Allow: POST``.
    http_method_names = ["post"]

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method != "POST":
            # The detail DRF's MethodNotAllowed gave, which the doors answered before.
            return _error(405, "method_not_allowed", f'Method "{request.method}" not allowed.')
        try:
            return self.post(request)
        except RegistryInvalid as exc:
            # Only a process that never had a good registry gets here; nothing was written.
            return _error(503, "registry_invalid", f"the registry does not validate: {exc}")


class EventsView(IntakeView):
    """``POST /events``: a signed ``factory.event/v1`` envelope, admitted through the ``events`` door."""

    @events_door
    def post(self, request: HttpRequest) -> HttpResponse:
        try:
            body = read_body(request, EVENTS_MAX_BODY_BYTES)
            # The one clock, once the body is in: no database work for a body still arriving.
            now = clock.recent_database_now()
            verify_factory_signature(
                settings.FACTORY_EVENTS_SECRET,
                # META, not request.headers: the same values, without building every header's entry.
                timestamp=request.META.get("HTTP_X_FACTORY_TIMESTAMP"),
                signature=request.META.get("HTTP_X_FACTORY_SIGNATURE"),
                body=body,
                now=now,
            )
            require_media_type(request, (JSON_CONTENT_TYPE,))
            envelope = decode_json(body)
        except Refused as exc:
            return _refused(exc)
        try:
            admission = admit_at_door(envelope, door=Door.EVENTS, registry=get_registry())
        except AdmissionRefused as exc:
            return _refused(exc)
        return _admitted(admission)


class GitHubView(IntakeView):
    """``POST /github``: a GitHub webhook delivery, translated as docs/intake.md tables it, admitted through the ``github`` door."""

    @github_door
    def post(self, request: HttpRequest) -> HttpResponse:
        try:
            body = read_body(request, GITHUB_MAX_BODY_BYTES)
            verify_github_signature(
                settings.FACTORY_GITHUB_WEBHOOK_SECRET,
                signature_256=request.headers.get("X-Hub-Signature-256"),
                signature_1=request.headers.get("X-Hub-Signature"),
                body=body,
            )
            content_type = require_media_type(request, (JSON_CONTENT_TYPE, FORM_CONTENT_TYPE))
            payload = decode_form_payload(body) if content_type == FORM_CONTENT_TYPE else decode_json(body)
        except Refused as exc:
            return _refused(exc)
        now = clock.recent_database_now()
        result = receive_github_delivery(
            request.headers.get("X-GitHub-Event"), request.headers.get("X-GitHub-Delivery"), payload,
            door=Door.GITHUB, now=now,
        )
        if isinstance(result, DoorAdmission):
            return _admitted(result)
        if isinstance(result, Ignored):
            return _answer(200, {"admitted": False, "ignored": True, "reason": result.reason})
        return _errors(result.errors)
