"""The approval API's views (docs/api.md): paged reads of proposals, runs and events, and decisions.

Every answer is JSON. A refusal is ``{error, detail}`` with its status: 400 ``invalid_body``,
``invalid_filter``, ``note_too_long``, ``parse_error``, ``bad_request`` (a body shorter than its
``Content-Length``); 401 ``not_authenticated``,
``authentication_failed``; 403 ``permission_denied``, ``person_required``, ``csrf_failed``;
404 ``not_found``; 405 ``method_not_allowed``; 409 ``not_pending``,
``previous_run_in_flight``, ``not_interrupted``; 408 ``request_timeout``; 413 ``payload_too_large``; 415
``unsupported_media_type``; and the services' ``invalid_note`` (400). A decision
goes through ``runtime.services.approval`` / ``interrupted`` with ``via: "api"``, the person
and the label of their token; ``now`` is the database's clock, read once per decision.
"""

import logging

from rest_framework import exceptions
from rest_framework.generics import GenericAPIView
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response

from lib.refusals import Refused
from runtime import clock
from runtime.listing import ProposalItems, event_item, proposal_item, run_item
from runtime.models import Event, Proposal, ProposalStatus, Run, RunStatus
from runtime.registry import get_registry
from runtime.services.approval import approve_proposal, reject_proposal
from runtime.services.interrupted import close_run, retry_run
from runtime.services.previews import request_preview

from ..paging import MAX_PAGE, MAX_PAGE_SIZE, PAGE_SIZE, only_parameters, whole_number
from . import openapi
from .auth import AUTHENTICATION_CLASSES, MayRead, PersonRequired, token_label

logger = logging.getLogger("django.request")

#: The largest id a row can have (a signed 64-bit primary key); a bigger number names no row,
#: and is 404 rather than an overflow in the database.
MAX_ID = 2**63 - 1
#: The longest ``loop`` and ``type`` filters worth asking about: the model's column widths.
FILTER_MAX_LENGTH = {"loop": 63, "type": 200}


class BadRequest(exceptions.APIException):
    """400 with the code given: ``invalid_filter`` or ``invalid_body``."""

    status_code = 400
    default_code = "bad_request"


class ApiPagination(PageNumberPagination):
    """``?page=N`` (from 1) and ``?pageSize=M`` (default 50, at most 500); past the last page is
    404. A value that is not a whole number in its range is 400 ``invalid_parameter`` naming
    it, as ``GET /schedules`` answers (``ops.paging``), never silently replaced."""

    page_size = PAGE_SIZE
    page_size_query_param = "pageSize"
    max_page_size = MAX_PAGE_SIZE

    def paginate_queryset(self, queryset, request, view=None):
        for name, high in (("page", MAX_PAGE), ("pageSize", MAX_PAGE_SIZE)):
            if name in request.query_params:
                whole_number(request.query_params[name], name, high)
        return super().paginate_queryset(queryset, request, view)


class ApiView(GenericAPIView):
    """What every route under ``/api/`` shares: the credentials of ``ops.api.auth`` and the
    ``{error, detail}`` shape, ``error`` being the refusal's code."""

    authentication_classes = AUTHENTICATION_CLASSES
    permission_classes = [MayRead]
    pagination_class = ApiPagination

    def handle_exception(self, exc):
        if isinstance(exc, Refused):
            return Response({"error": exc.code, "detail": exc.detail}, status=exc.status)
        if not isinstance(exc, exceptions.APIException):
            return self.internal_error(exc)
        response = super().handle_exception(exc)
        if isinstance(exc, exceptions.APIException):
            codes = exc.get_codes()
            code = codes if isinstance(codes, str) else exc.default_code
            response.data = {"error": code, "detail": _words(exc.detail)}
        return response


    def internal_error(self, exc: Exception) -> Response:
        """500 ``{error: "internal_error", detail, requestId}`` (docs/design.md §10), as the doors
        answer: the traceback goes to the log under the request's id, never to the client."""
        request_id = getattr(self.request._request, "request_id", "")
        logger.error("Internal Server Error: %s", self.request.path, exc_info=exc,
                     extra={"action": "api_internal_error", "status_code": 500})
        return Response({
            "error": "internal_error",
            "detail": "the server failed to answer this request; its log has the cause under this requestId",
            "requestId": request_id,
        }, status=500)


def _words(detail) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_words(value)}" for key, value in detail.items())
    if isinstance(detail, list):
        return "; ".join(_words(value) for value in detail)
    return str(detail)


def row_id(text: str, kind: str) -> int:
    """The id in a route, or 404 ``not_found``: ids are integers from 1 to ``MAX_ID``.

    A decision reads its body first: a bad body is 400 whatever the id."""
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_ID:
        raise exceptions.NotFound(f"there is no {kind} {text!r}: ids are positive integers")
    return int(text)


def text_filter(request, name: str) -> str | None:
    """A ``loop`` or ``type`` query filter; 400 ``invalid_filter`` for a NUL (PostgreSQL refuses it
    in text) or a value longer than its column (no row could match)."""
    value = request.query_params.get(name)
    if value is None:
        return None
    if len(value) > FILTER_MAX_LENGTH[name] or "\x00" in value:
        raise BadRequest(
            f"?{name}= takes at most {FILTER_MAX_LENGTH[name]} characters and no NUL", code="invalid_filter"
        )
    return value


def status_filter(request, choices) -> str | None:
    value = request.query_params.get("status")
    if value is not None and value not in choices.values:
        raise BadRequest(
            f"?status= is one of {', '.join(choices.values)}", code="invalid_filter"
        )
    return value


def decision_note(request) -> str:
    """The optional ``note`` of a decision body; 400 ``invalid_body`` for anything but
    ``{}`` or ``{"note": "<text>"}`` (the length is the service's ``note_too_long``)."""
    data = request.data  # read by ops.api.parsers: 408, 400 bad_request or 413 refuse the body
    if not isinstance(data, dict) or set(data) - {"note"}:
        raise BadRequest('the body is {} or {"note": "<text>"}', code="invalid_body")
    note = data.get("note", "")
    if not isinstance(note, str):
        raise BadRequest("note is a string", code="invalid_body")
    return note


def empty_body(request, what: str) -> None:
    """400 ``invalid_body`` unless the body is none or ``{}``: ``what`` (a retry, asking for a
    preview) takes nothing."""
    data = request.data  # read by ops.api.parsers: 408, 400 bad_request or 413 refuse the body
    if data not in ({}, None):
        raise BadRequest(f"{what} takes no body: send {{}} or none", code="invalid_body")


class ListView(ApiView):
    """A paged list: ``filters`` are the query parameters it narrows by, besides the page's; any
    other parameter, or one given twice, is 400 ``invalid_parameter`` (``ops.paging``)."""

    filters: tuple[str, ...] = ()

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # credentials first: 401 and 403 before 400
        only_parameters(request.query_params, (*self.filters, "page", "pageSize"), request.path)

    def page(self, queryset, item):
        rows = self.paginate_queryset(queryset)
        return self.get_paginated_response([item(row) for row in rows])


class EventList(ListView):
    """Admitted events, newest first; ``?type=`` and ``?loop=`` narrow them."""

    filters = ("type", "loop")

    @openapi.events_list
    def get(self, request):
        events = Event.objects.order_by("-id")
        if (type_ := text_filter(request, "type")) is not None:
            events = events.filter(type=type_)
        if (loop := text_filter(request, "loop")) is not None:
            events = events.filter(loop=loop)
        return self.page(events, event_item)


class EventDetail(ApiView):
    @openapi.event_read
    def get(self, request, id: str):
        event = Event.objects.filter(pk=row_id(id, "event")).first()
        if event is None:
            raise exceptions.NotFound(f"there is no event {id}")
        return Response(event_item(event))


class ProposalList(ListView):
    """Proposals, newest first; ``?status=`` and ``?loop=`` narrow them."""

    filters = ("status", "loop")

    @openapi.proposals_list
    def get(self, request):
        proposals = Proposal.objects.select_related("event", "decided_by", "preview__requested_by").order_by("-id")
        if (status := status_filter(request, ProposalStatus)) is not None:
            proposals = proposals.filter(status=status)
        if (loop := text_filter(request, "loop")) is not None:
            proposals = proposals.filter(loop=loop)
        return self.page(proposals, ProposalItems())


def _proposal(pk: int) -> Proposal:
    proposal = Proposal.objects.select_related("event", "decided_by", "preview__requested_by").filter(pk=pk).first()
    if proposal is None:
        raise exceptions.NotFound(f"there is no proposal {pk}")
    return proposal


def _run(pk: int) -> Run:
    run = Run.objects.select_related("event", "approved_by").filter(pk=pk).first()
    if run is None:
        raise exceptions.NotFound(f"there is no run {pk}")
    return run


class ProposalDetail(ApiView):
    @openapi.proposal_read
    def get(self, request, id: str):
        return Response(proposal_item(_proposal(row_id(id, "proposal"))))


class DecisionView(ApiView):
    """A POST that decides: a person (never ``FACTORY_API_TOKEN``), then the service's checks."""

    permission_classes = [PersonRequired, MayRead]
    http_method_names = ["post"]

    def decided_by(self, request) -> dict:
        return {"user": request.user, "now": clock.database_now(), "via": "api", "token_label": token_label(request)}


class ProposalApprove(DecisionView):
    @openapi.proposal_approve
    def post(self, request, id: str):
        note = decision_note(request)
        proposal_id = row_id(id, "proposal")
        run = approve_proposal(proposal_id, note=note, **self.decided_by(request))
        return Response({"proposal": proposal_item(_proposal(proposal_id)), "run": run_item(_run(run.pk))})


class ProposalReject(DecisionView):
    @openapi.proposal_reject
    def post(self, request, id: str):
        note = decision_note(request)
        proposal_id = row_id(id, "proposal")
        reject_proposal(proposal_id, note=note, **self.decided_by(request))
        return Response({"proposal": proposal_item(_proposal(proposal_id))})


class ProposalPreview(DecisionView):
    @openapi.proposal_preview
    def post(self, request, id: str):
        empty_body(request, "asking for a preview")
        proposal_id = row_id(id, "proposal")
        asked = self.decided_by(request)
        request_preview(proposal_id, registry=get_registry(), **asked)
        return Response({"proposal": proposal_item(_proposal(proposal_id))}, status=202)


class RunList(ListView):
    """Runs, newest first; ``?status=`` and ``?loop=`` narrow them."""

    filters = ("status", "loop")

    @openapi.runs_list
    def get(self, request):
        runs = Run.objects.select_related("event", "approved_by").order_by("-id")
        if (status := status_filter(request, RunStatus)) is not None:
            runs = runs.filter(status=status)
        if (loop := text_filter(request, "loop")) is not None:
            runs = runs.filter(loop=loop)
        return self.page(runs, run_item)


class RunDetail(ApiView):
    @openapi.run_read
    def get(self, request, id: str):
        return Response(run_item(_run(row_id(id, "run"))))


class RunRetry(DecisionView):
    @openapi.run_retry
    def post(self, request, id: str):
        empty_body(request, "a retry")
        run_id = row_id(id, "run")
        retry_run(run_id, **self.decided_by(request))
        return Response({"run": run_item(_run(run_id))})


class RunClose(DecisionView):
    @openapi.run_close
    def post(self, request, id: str):
        note = decision_note(request)
        run_id = row_id(id, "run")
        close_run(run_id, note=note, **self.decided_by(request))
        return Response({"run": run_item(_run(run_id))})


@openapi.unknown_route
class UnknownRoute(ApiView):
    """Any other path under ``/api/``: 404 ``not_found`` in JSON, not Django's page."""

    permission_classes = []
    authentication_classes = []

    def initial(self, request, *args, **kwargs):
        raise exceptions.NotFound(f"there is no route {request.path}: see /api/docs/")
