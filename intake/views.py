"""The HTTP doors: ``POST /events`` and ``POST /github`` (docs/design.md §10, §12; docs/intake.md).

Both views read the raw body themselves (``intake.bodies.read_body``), check in the order
size → signature → content type → JSON → envelope or translation, and answer every refusal
with a status and a machine-readable code; nothing is written before the signature holds.
They are CSRF-exempt (``APIView.as_view`` wraps them) and use no session or login:
``authentication_classes = []`` and ``AllowAny``, because the signature is the
authentication. The client's ``Accept`` header is ignored: the answer is always JSON.

Statuses: 202 admitted, 200 duplicate or ignored, 401 ``{error, detail}`` not authentic,
405/408/413/415 ``{error, detail}``, 422 ``{errors: [{code, detail}]}``; a 500 is
``factory_site.requests.server_error``'s JSON.
"""

from django.conf import settings
from rest_framework.exceptions import APIException
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
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


class AlwaysJSON(BaseContentNegotiation):
    """Answer JSON whatever ``Accept`` says: webhook senders are not browsers."""

    def select_parser(self, request, parsers):
        return None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


def _error(status: int, code: str, detail: str) -> Response:
    return Response({"error": code, "detail": detail}, status=status)


def _errors(errors: list[dict]) -> Response:
    return Response({"errors": errors}, status=422)


def _refused(exc: Refused) -> Response:
    """A refusal in the doors' shapes: 422 ``{errors: [{code, detail}]}``, else ``{error, detail}``."""
    if exc.status == 422:
        return _errors(exc.as_errors())
    return _error(exc.status, exc.code, exc.detail)


def _admitted(admission: DoorAdmission) -> Response:
    if admission.duplicate:
        return Response({"admitted": False, "duplicate": True, "eventId": admission.event_id}, status=200)
    return Response({"admitted": True, "duplicate": False, "eventId": admission.event_id}, status=202)


class IntakeView(APIView):
    """What both doors share: no session authentication, no parsers, JSON answers only."""

    authentication_classes = []
    permission_classes = [AllowAny]
    parser_classes = []
    content_negotiation_class = AlwaysJSON
    # Only POST is documented: OPTIONS, HEAD and the rest are 405 with ``Allow: POST``.
    http_method_names = ["post"]

    def handle_exception(self, exc):
        if isinstance(exc, RegistryInvalid):
            # Only a process that never had a good registry gets here; nothing was written.
            return _error(503, "registry_invalid", f"the registry does not validate: {exc}")
        if isinstance(exc, APIException):
            # DRF's own refusals (405 method_not_allowed for a GET or an OPTIONS, with its
            # Allow header) in the doors' {error, detail} shape.
            return _error(exc.status_code, exc.default_code, str(exc.detail))
        return super().handle_exception(exc)


class EventsView(IntakeView):
    """``POST /events``: a signed ``factory.event/v1`` envelope, admitted through the ``events`` door."""

    @events_door
    def post(self, request):
        http = request._request  # the Django request: its stream is read once, here
        try:
            body = read_body(http, EVENTS_MAX_BODY_BYTES)
            # The one clock, once the body is in: no database work for a body still arriving.
            now = clock.recent_database_now()
            verify_factory_signature(
                settings.FACTORY_EVENTS_SECRET,
                timestamp=http.headers.get("X-Factory-Timestamp"),
                signature=http.headers.get("X-Factory-Signature"),
                body=body,
                now=now,
            )
            require_media_type(http, (JSON_CONTENT_TYPE,))
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
    def post(self, request):
        http = request._request  # the Django request: its stream is read once, here
        try:
            body = read_body(http, GITHUB_MAX_BODY_BYTES)
            verify_github_signature(
                settings.FACTORY_GITHUB_WEBHOOK_SECRET,
                signature_256=http.headers.get("X-Hub-Signature-256"),
                signature_1=http.headers.get("X-Hub-Signature"),
                body=body,
            )
            content_type = require_media_type(http, (JSON_CONTENT_TYPE, FORM_CONTENT_TYPE))
            payload = decode_form_payload(body) if content_type == FORM_CONTENT_TYPE else decode_json(body)
        except Refused as exc:
            return _refused(exc)
        now = clock.recent_database_now()
        result = receive_github_delivery(
            http.headers.get("X-GitHub-Event"), http.headers.get("X-GitHub-Delivery"), payload,
            door=Door.GITHUB, now=now,
        )
        if isinstance(result, DoorAdmission):
            return _admitted(result)
        if isinstance(result, Ignored):
            return Response({"admitted": False, "ignored": True, "reason": result.reason}, status=200)
        return _errors(result.errors)
