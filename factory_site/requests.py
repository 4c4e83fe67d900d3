"""Request ids and the JSON answers of the API routes when something other than a view answers
(docs/design.md §10, docs/intake.md "Every answer").

``RequestIdMiddleware`` (outermost but for the doors' own entry, ``factory_site.door_route``,
which does the same for them) gives every request an id: the client's ``X-Request-Id``
when it is 1–128 characters of ``[A-Za-z0-9._:-]``, else a new one (32 hex digits). The id
is echoed as the ``X-Request-Id`` response header and carried by every log line written
while the request is served (``factory_site.logs``), gunicorn's access line included.

The routes of ``API_PATHS`` and those under ``API_PREFIX`` answer JSON whatever happens: ``bad_request`` (Django's 400,
e.g. a ``Host`` header not in ``DJANGO_ALLOWED_HOSTS``), ``permission_denied`` (403),
``page_not_found`` (404) and ``server_error`` (500: an unhandled exception, a database fault)
are Django's ``handler400``/``403``/``404``/``500`` here, JSON for those routes and the
operator's pages elsewhere: ``templates/403.html``, ``404.html`` and ``500.html`` in the
admin's layout (the 500 page needs no request and no database). A 500's body is
``{error: "internal_error", detail, requestId}``; what went wrong is only in the log, under
that request id.
"""

import contextlib
import contextvars
import re
import uuid

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.views import defaults

#: The routes whose every answer is JSON (docs/design.md §10).
API_PATHS = frozenset({"/events", "/github", "/schedules", "/status", "/metrics"})
#: The approval API (ops/api, docs/api.md): every route under it answers JSON too.
API_PREFIX = "/api/"
REQUEST_ID_HEADER = "X-Request-Id"
#: The header as WSGI puts it in ``request.META``.
REQUEST_ID_META = "HTTP_X_REQUEST_ID"
REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")

_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)


def current_request_id() -> str | None:
    """The id of the request this thread is serving, or None outside a request."""
    return _request_id.get()


def request_id_for(request: HttpRequest) -> str:
    """The client's ``X-Request-Id`` when well-formed, else a fresh uuid4 in hex."""
    # META, not request.headers: the same value, without building every header's entry.
    offered = request.META.get(REQUEST_ID_META, "")
    return offered if REQUEST_ID_PATTERN.fullmatch(offered) else uuid.uuid4().hex


@contextlib.contextmanager
def serving(request_id: str):
    """``current_request_id()`` is ``request_id`` within the block (the log lines' id)."""
    token = _request_id.set(request_id)
    try:
        yield
    finally:
        _request_id.reset(token)


class RequestIdMiddleware:
    """Sets the request's id for the views, the error handlers and the log; echoes it.
    (The doors get the same from ``factory_site.door_route``, which stands before it.)"""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.request_id = request_id_for(request)
        with serving(request.request_id):
            response = self.get_response(request)
        response[REQUEST_ID_HEADER] = request.request_id
        return response


def _is_api(request: HttpRequest) -> bool:
    return request.path in API_PATHS or request.path.startswith(API_PREFIX)


def bad_request(request: HttpRequest, exception: Exception, template_name: str = "400.html") -> HttpResponse:
    """``handler400``: 400 ``{error: "bad_request", detail}`` on the API routes, Django's page elsewhere.

    Django answers 400 for a suspicious request (a ``Host`` header this server does not
    serve, a malformed cookie) before any view runs; the detail names the kind, not the
    offending value."""
    if not _is_api(request):
        return defaults.bad_request(request, exception, template_name)
    return JsonResponse(
        {"error": "bad_request", "detail": f"the request was refused before reaching the route ({type(exception).__name__})"},
        status=400,
    )


def _operator_page(request: HttpRequest, template_name: str, status: int, **context) -> HttpResponse:
    """An error page in the operator's layout: the admin's context (its header, the signed-in
    person's links) when the request went through the session middleware."""
    from django.contrib import admin

    if hasattr(request, "user"):
        context = {**admin.site.each_context(request), **context}
    return HttpResponse(loader.get_template(template_name).render(context, request), status=status)


def permission_denied(request: HttpRequest, exception: Exception, template_name: str = "403.html") -> HttpResponse:
    """``handler403``: 403 ``{error: "permission_denied", detail}`` on the API routes (DRF answers
    its own views' refusals before this); elsewhere the operator's page saying which role it
    takes and, to a signed-in staff person, whom to ask (``runtime.admin.proposals.deciders``)."""
    if _is_api(request):
        return JsonResponse({"error": "permission_denied", "detail": "you may not do this"}, status=403)
    from runtime.admin.proposals import deciders

    user = getattr(request, "user", None)
    staff = bool(user is not None and user.is_active and user.is_staff)
    return _operator_page(request, template_name, 403, title="Not allowed", deciders=deciders() if staff else [])


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: a form refused by Django's CSRF check is the operator's 403 page,
    saying to reload the page and send it again (the approval API checks CSRF itself and
    answers 403 ``csrf_failed`` in JSON; the doors do not use it)."""
    return _operator_page(request, "403.html", 403, title="Not allowed", csrf_reason=reason)


def page_not_found(request: HttpRequest, exception: Exception, template_name: str = "404.html") -> HttpResponse:
    """``handler404``: a JSON route's path with a slash at the end (``/github/``, as a webhook
    is easily configured) is 404 ``{error: "not_found", detail}`` naming the route; every
    other path gets the operator's page (the approval API answers its own 404s, docs/api.md)."""
    route = request.path.rstrip("/")
    if route == request.path or route not in API_PATHS:
        return _operator_page(request, template_name, 404, title="Not found", request_path=request.path)
    return JsonResponse(
        {"error": "not_found", "detail": f"there is no {request.path}; the route is {route}, without the slash at the end"},
        status=404,
    )


def server_error(request: HttpRequest, template_name: str = "500.html") -> HttpResponse:
    """``handler500``: 500 ``{error: "internal_error", detail, requestId}`` on the API routes.

    Django has already logged the exception (``django.request``, with its traceback) on a
    line that carries the request id; the answer says no more than where to look."""
    if not _is_api(request):
        return defaults.server_error(request, template_name)
    request_id = getattr(request, "request_id", None) or current_request_id() or uuid.uuid4().hex
    return JsonResponse(
        {
            "error": "internal_error",
            "detail": "the server failed to answer this request; its log has the cause under this requestId",
            "requestId": request_id,
        },
        status=500,
        headers={REQUEST_ID_HEADER: request_id},
    )
