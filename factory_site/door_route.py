"""The signed doors' short way through the middleware (docs/design.md §10; docs/performance.md,
"Signed intake").

``SignedDoorMiddleware`` is the outermost entry of ``MIDDLEWARE``. A request whose path is
``/events`` or ``/github`` gets from it, in one call, what the stack's first three middleware
give every request — its id (``factory_site.requests``: set for the view, the error handlers
and the log, echoed as ``X-Request-Id``), the security middleware's redirect and headers
(``SecurityMiddleware``'s own ``process_request`` and ``process_response``) and its count in
the intake counters (``ops.metrics_intake``) — and goes on to its door's view through
``CommonMiddleware`` and ``XFrameOptionsMiddleware`` only, chained as Django chains them, each
behind ``convert_exception_to_response``: the doors keep their host check (400
``bad_request``), ``Content-Length`` and ``X-Frame-Options``. What a signed door does not use
is skipped: WhiteNoise (static files), sessions, CSRF (the doors are exempt), authentication
and messages, and the per-layer calls of the middleware it does use. Every other request
goes on down the whole stack, ``RequestIdMiddleware`` first. Django's handler around it
still logs each 4xx and 5xx and answers an unhandled exception with ``handler500``'s JSON.
"""

from collections.abc import Callable

from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.middleware.security import SecurityMiddleware
from django.urls import resolve

from factory_site.requests import REQUEST_ID_HEADER, request_id_for, serving
from ops.metrics_intake import count_answer

#: The doors' paths (docs/design.md §10), each answered by the view the URLconf routes it to.
DOOR_PATHS = ("/events", "/github")
#: What a door request still passes through as layers, outermost first, as in ``MIDDLEWARE``.
DOOR_MIDDLEWARE = (CommonMiddleware, XFrameOptionsMiddleware)


def door_handler(view: Callable) -> Callable[[HttpRequest], HttpResponse]:
    """``view`` behind ``DOOR_MIDDLEWARE``, built as ``BaseHandler.load_middleware`` builds a chain."""
    handler = convert_exception_to_response(view)
    for middleware in reversed(DOOR_MIDDLEWARE):
        handler = convert_exception_to_response(middleware(handler))
    return handler


class SignedDoorMiddleware:
    """Answers the door paths: request id, security, ``door_handler``, count; passes every
    other request on."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.doors = {path: door_handler(resolve(path).func) for path in DOOR_PATHS}
        # Only its process_request and process_response are called.
        self.security = SecurityMiddleware(get_response)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        door = self.doors.get(request.path_info)
        if door is None:
            return self.get_response(request)
        request.request_id = request_id_for(request)
        with serving(request.request_id):
            response = self.security.process_request(request) or door(request)
            response = self.security.process_response(request, response)
        count_answer(request.path, response.status_code)
        response[REQUEST_ID_HEADER] = request.request_id
        return response
